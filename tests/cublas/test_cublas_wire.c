/*
 * The server's side of cuBLAS (and NCCL) forwarding against a hostile or broken client:
 * speaks the protocol to remote-gpud directly (no libremote.so, which would never
 * send these frames) and checks, by the statuses that come back and the fake
 * library's call log, that the library is never handed what it must not get.
 *
 *   test_cublas_wire SERVER FAKE_DRIVER FAKE_CUBLAS FAKE_CUBLASLT FAKE_NCCL
 *
 * Covered: pointer-mode mismatches both ways (an address where the library reads a
 * host value would make it read server memory), oversized scalars, attribute
 * buffers whose length disagrees with their size argument, absurd output sizes,
 * ids reused, zero, stale or of the wrong kind, missing arguments, the latch rule
 * (async failure reported by the next sync call, once), replies' shape, and the
 * teardown of objects a session leaves. NCCL: configs whose host strings and size
 * would make the library read server memory, unique ids of the wrong length,
 * scalars against their residence, and the communicator a session leaves.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>
#include <cublasLt.h>
#include <cublas_api.h>
#include <nccl.h>

#include "check.h"
#include "proto.h"
#include "transport.h"

#define U(x) ((uint64_t)(x))
#define I(x) ((int64_t)(x))

static char dir[64], logpath[128], nccl_logpath[128];
static pid_t srv_pid;
static transport_conn *conn;
static uint64_t seq;

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static int srv_start(char **argv)
{
	char pf[128];
	snprintf(dir, sizeof(dir), "/tmp/rgcw.XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(pf, sizeof(pf), "%s/port", dir);
	snprintf(logpath, sizeof(logpath), "%s/cublas.log", dir);
	setenv("FAKECUBLAS_LOG", logpath, 1);
	snprintf(nccl_logpath, sizeof(nccl_logpath), "%s/nccl.log", dir);
	setenv("FAKENCCL_LOG", nccl_logpath, 1);
	if ((srv_pid = fork()) == 0) {
		execl(argv[1], argv[1], "--listen", "127.0.0.1:0", "--port-file", pf, "--driver", argv[2], "--cublas",
		      argv[3], "--cublaslt", argv[4], "--nccl", argv[5], "--isolation", "thread", (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 1000; i++) {
		FILE *f = fopen(pf, "r");
		int port = 0;
		if (f) {
			int ok = fscanf(f, "%d", &port) == 1;
			fclose(f);
			if (ok && port > 0) {
				char a[64];
				transport_addr ad;
				snprintf(a, sizeof(a), "127.0.0.1:%d", port);
				return transport_parse_addr(a, &ad) || transport_connect(&ad, &conn) ? -1 : 0;
			}
		}
		if (waitpid(srv_pid, NULL, WNOHANG) == srv_pid)
			return -1;
		sleep_ms(10);
	}
	return -1;
}

/* Builds a request with args from a format: u (u64), i (i64), s (str), b (bin: pointer,
 * size), n (nil). */
static void build(proto_msg *m, uint32_t op, const char *fmt, va_list ap)
{
	proto_msg_begin(m, op, ++seq, (uint32_t)strlen(fmt));
	for (const char *f = fmt; *f; f++) {
		if (*f == 'u')
			proto_msg_u64(m, va_arg(ap, uint64_t));
		else if (*f == 'i')
			proto_msg_i64(m, va_arg(ap, int64_t));
		else if (*f == 'n')
			proto_msg_nil(m);
		else if (*f == 's')
			proto_msg_str(m, va_arg(ap, const char *));
		else {
			const void *p = va_arg(ap, const void *);
			proto_msg_bin(m, p, va_arg(ap, size_t));
		}
	}
}

static int send_msg(proto_msg *m, uint16_t flags)
{
	proto_msg_finish(m, flags, 0);
	struct iovec iov = {m->data, m->len};
	int r = transport_sendv(conn, &iov, 1);
	proto_msg_free(m);
	return r;
}

static void post(uint32_t op, const char *fmt, ...)
{
	proto_msg m;
	va_list ap;
	va_start(ap, fmt);
	build(&m, op, fmt, ap);
	va_end(ap);
	CHECK_EQ(send_msg(&m, PROTO_F_ASYNC), 0);
}

typedef struct rep {
	int32_t status, latched, lib; /* lib: the library status, first result (-1: none) */
	proto_view v;
	uint8_t *msg;
} rep;

/* A sync call; the reply is kept in *r (rep_free). Returns the reply's status. */
static int call(rep *r, uint32_t op, const char *fmt, ...)
{
	proto_msg m;
	va_list ap;
	va_start(ap, fmt);
	build(&m, op, fmt, ap);
	va_end(ap);
	memset(r, 0, sizeof(*r));
	r->lib = -1;
	if (send_msg(&m, 0))
		return -1;
	transport_frame f;
	if (transport_recv_frame(conn, &f, NULL, NULL) || proto_view_init(&r->v, &f.hdr, f.msg) != PROTO_OK ||
	    proto_reply_status(&r->v, &r->status, &r->latched) != PROTO_OK || r->v.seq != seq)
		return -1;
	r->msg = f.msg;
	proto_arg_i32(&r->v, PROTO_REPLY_FIRST, &r->lib);
	return r->status;
}

static void rep_free(rep *r)
{
	proto_view_free(&r->v);
	free(r->msg);
}

/* The library status a sync call reports (its own, or a latched one). */
static int lib_sync(void)
{
	rep r;
	int st = call(&r, PROTO_OP_CUBLASLTGETVERSION, "");
	int lib = st == 0 ? r.lib : -1000 - st;
	rep_free(&r);
	return lib;
}

static int count_in(const char *path, const char *prefix)
{
	FILE *f = fopen(path, "r");
	char line[4096];
	int n = 0;
	while (f && fgets(line, sizeof(line), f))
		n += !strncmp(line, prefix, strlen(prefix));
	if (f)
		fclose(f);
	return n;
}

static int log_count(const char *prefix) { return count_in(logpath, prefix); }
static int nccl_count(const char *prefix) { return count_in(nccl_logpath, prefix); }

/* The NCCL status a sync call reports (ncclCommCount of comm). */
static int nccl_sync(uint64_t comm)
{
	rep r;
	int st = call(&r, PROTO_OP_NCCLCOMMCOUNT, "u", comm);
	int lib = st == 0 ? r.lib : -1000 - st;
	rep_free(&r);
	return lib;
}

static void nccl_section(uint64_t dev)
{
	const uint64_t C = 0x5000;
	rep r;
	ncclUniqueId id;
	memset(&id, 0, sizeof(id));
	CHECK_EQ(call(&r, PROTO_OP_NCCLGETUNIQUEID, ""), 0);
	CHECK_EQ(r.lib, ncclSuccess);
	const void *p = NULL;
	size_t n = 0;
	CHECK_EQ(proto_arg_bin(&r.v, PROTO_REPLY_FIRST + 1, &p, &n), PROTO_OK);
	CHECK_EQ(n, sizeof(id));
	if (p && n == sizeof(id))
		memcpy(&id, p, n);
	rep_free(&r);

	/* a config whose strings point anywhere and whose size claims a gigabyte:
	 * the library gets NULL strings and at most its own size */
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	cfg.size = 1u << 30;
	cfg.netName = (const char *)(uintptr_t)0xdeadbeef;
	cfg.commName = (const char *)(uintptr_t)0x10;
	CHECK_EQ(call(&r, PROTO_OP_NCCLCOMMINITRANKCONFIG, "uibib", C, I(1), &id, sizeof(id), I(0), &cfg, sizeof(cfg)), 0);
	CHECK_EQ(r.lib, ncclSuccess);
	rep_free(&r);
	char want[160];
	snprintf(want, sizeof(want), "ncclCommInitRankConfig new=comm#1 nranks=1 id=6c63636e656b616601000000 last=7f "
		 "rank=0 size=%zu ", sizeof(cfg));
	CHECK_EQ(nccl_count(want), 1);
	CHECK_EQ(nccl_count("ncclCommInitRankConfig "), 1);
	FILE *f = fopen(nccl_logpath, "r");
	char line[1024] = "";
	while (f && fgets(line, sizeof(line), f) && strncmp(line, "ncclCommInitRankConfig ", 23))
		;
	if (f)
		fclose(f);
	CHECK(strstr(line, " netName=null commName=null ") != NULL);

	/* a unique id one byte short, a config of the wrong size: refused before the library */
	CHECK_EQ(call(&r, PROTO_OP_NCCLCOMMINITRANK, "uibi", U(C + 1), I(1), &id, sizeof(id) - 1, I(0)), 0);
	CHECK_EQ(r.lib, ncclInvalidArgument);
	rep_free(&r);
	CHECK_EQ(call(&r, PROTO_OP_NCCLCOMMINITRANKCONFIG, "uibib", U(C + 1), I(1), &id, sizeof(id), I(0), &cfg,
		      sizeof(cfg) - 8), 0);
	CHECK_EQ(r.lib, ncclInvalidArgument);
	rep_free(&r);
	/* two ids announced, one sent */
	CHECK_EQ(call(&r, PROTO_OP_NCCLCOMMINITRANKSCALABLE, "uiiibn", U(C + 1), I(1), I(0), I(2), &id, sizeof(id)), 0);
	CHECK_EQ(r.lib, ncclInvalidArgument);
	rep_free(&r);
	CHECK_EQ(nccl_count("ncclCommInitRank"), 1);

	/* scalars against their residence: bytes where the library would read an
	 * address (device), an address where it would read bytes (host) */
	float half = 0.5f;
	CHECK_EQ(call(&r, PROTO_OP_NCCLREDOPCREATEPREMULSUM, "biiu", &half, sizeof(half), I(ncclFloat32),
		      I(ncclScalarDevice), C), 0);
	CHECK_EQ(r.lib, ncclInvalidArgument);
	rep_free(&r);
	CHECK_EQ(call(&r, PROTO_OP_NCCLREDOPCREATEPREMULSUM, "uiiu", dev, I(ncclFloat32), I(ncclScalarHostImmediate), C),
		 0);
	CHECK_EQ(r.lib, ncclInvalidArgument);
	rep_free(&r);
	CHECK_EQ(nccl_count("ncclRedOpCreatePreMulSum "), 0);

	/* an unknown communicator in a collective: latched, reported once */
	post(PROTO_OP_NCCLALLREDUCE, "uuuiiuu", dev, dev, U(1), I(ncclFloat32), I(ncclSum), U(0x7777), U(0));
	CHECK_EQ(nccl_sync(C), ncclInvalidArgument);
	CHECK_EQ(nccl_sync(C), ncclSuccess);
	CHECK_EQ(nccl_count("ncclAllReduce "), 0);
}

/* Sgemm 1x1x1 with the given alpha element: "alpha" is a format letter. */
#define SGEMM(h, alpha_fmt, ...)                                                                       \
	post(PROTO_OP_CUBLASSGEMM_V2, "uiiiii" alpha_fmt "uiuibui", U(h), I(0), I(0), I(1), I(1), I(1), \
	     __VA_ARGS__, U(dev), I(1), U(dev), I(1), &zero, sizeof(zero), U(dev), I(1))

int main(int argc, char **argv)
{
	if (argc != 6) {
		fprintf(stderr, "usage: %s SERVER FAKE_DRIVER FAKE_CUBLAS FAKE_CUBLASLT FAKE_NCCL\n", argv[0]);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	if (!CHECK(srv_start(argv) == 0))
		return check_summary("test_cublas_wire");
	rep r;
	CHECK_EQ(call(&r, PROTO_OP_HELLO, "ususs", U(PROTO_VERSION), "", U(getpid()), "h", "test_cublas_wire"), 0);
	rep_free(&r);
	CHECK_EQ(call(&r, PROTO_OP_MEM_ALLOC, "u", U(256)), 0);
	uint64_t dev = 0;
	proto_arg_u64(&r.v, PROTO_REPLY_FIRST, &dev);
	rep_free(&r);
	float one = 1.0f, zero = 0.0f;
	const uint64_t H = 0x1000, H2 = 0x1001, DESC = 0x2000, LA = 0x3000, PREF = 0x4000;

	/* the reply's shape: [0, CUDA latched, library status, results...] */
	CHECK_EQ(call(&r, PROTO_OP_CUBLASLTGETVERSION, ""), 0);
	uint64_t version = 0;
	CHECK_EQ(r.lib, CUBLAS_STATUS_SUCCESS);
	CHECK_EQ(proto_arg_u64(&r.v, PROTO_REPLY_FIRST + 1, &version), 0);
	CHECK_EQ(version, 130042);
	rep_free(&r);

	/* ids: created async; reused, zero, or unknown ones refused */
	post(PROTO_OP_CUBLASCREATE_V2, "u", H);
	CHECK_EQ(lib_sync(), CUBLAS_STATUS_SUCCESS);
	post(PROTO_OP_CUBLASCREATE_V2, "u", H);
	CHECK_EQ(lib_sync(), CUBLAS_STATUS_INVALID_VALUE);
	CHECK_EQ(lib_sync(), CUBLAS_STATUS_SUCCESS); /* a latched status is reported once */
	post(PROTO_OP_CUBLASCREATE_V2, "u", U(0));
	CHECK_EQ(lib_sync(), CUBLAS_STATUS_INVALID_VALUE);
	CHECK_EQ(log_count("cublasCreate_v2 "), 1); /* neither reached the library */
	post(PROTO_OP_CUBLASSETMATHMODE, "ui", U(0x9999), I(0));
	CHECK_EQ(lib_sync(), CUBLAS_STATUS_NOT_INITIALIZED);

	/* the first failure is the one reported */
	post(PROTO_OP_CUBLASSETMATHMODE, "ui", U(0x9999), I(0));
	post(PROTO_OP_CUBLASCREATE_V2, "u", U(0));
	CHECK_EQ(lib_sync(), CUBLAS_STATUS_NOT_INITIALIZED);

	/* host pointer mode: a value (bin) is taken, an address is refused */
	SGEMM(H, "b", &one, sizeof(one));
	CHECK_EQ(lib_sync(), CUBLAS_STATUS_SUCCESS);
	CHECK_EQ(log_count("cublasSgemm_v2 "), 1);
	SGEMM(H, "u", U(dev));
	CHECK_EQ(lib_sync(), CUBLAS_STATUS_INVALID_VALUE);
	SGEMM(H, "u", U(0x7fffffff0000ull));
	CHECK_EQ(lib_sync(), CUBLAS_STATUS_INVALID_VALUE);
	/* a scalar larger than any the library reads */
	uint8_t big[32] = {0};
	SGEMM(H, "b", big, sizeof(big));
	CHECK_EQ(lib_sync(), CUBLAS_STATUS_INVALID_VALUE);
	/* a string where an integer goes; an argument missing */
	post(PROTO_OP_CUBLASSGEMM_V2, "uiiiii", H, I(0), I(0), I(1), I(1), I(1));
	CHECK_EQ(lib_sync(), CUBLAS_STATUS_INVALID_VALUE);
	post(PROTO_OP_CUBLASSETMATHMODE, "ub", H, &one, sizeof(one));
	CHECK_EQ(lib_sync(), CUBLAS_STATUS_INVALID_VALUE);
	CHECK_EQ(log_count("cublasSgemm_v2 "), 1);

	/* device pointer mode: the reverse */
	post(PROTO_OP_CUBLASSETPOINTERMODE_V2, "ui", H, I(CUBLAS_POINTER_MODE_DEVICE));
	SGEMM(H, "b", &one, sizeof(one));
	CHECK_EQ(lib_sync(), CUBLAS_STATUS_INVALID_VALUE);
	post(PROTO_OP_CUBLASSGEMM_V2, "uiiiiiuuiuiuui", H, I(0), I(0), I(1), I(1), I(1), U(dev), U(dev), I(1), U(dev),
	     I(1), U(dev + 4), U(dev), I(1));
	CHECK_EQ(lib_sync(), CUBLAS_STATUS_SUCCESS);
	CHECK_EQ(log_count("cublasSgemm_v2 "), 2);
	/* a dot product's result: nil (host) refused in device mode */
	CHECK_EQ(call(&r, PROTO_OP_CUBLASSDOT_V2, "uiuiuin", H, I(1), U(dev), I(1), U(dev), I(1)), 0);
	CHECK_EQ(r.lib, CUBLAS_STATUS_INVALID_VALUE);
	CHECK_EQ(r.v.n, PROTO_REPLY_FIRST + 1); /* no results: the call was not made */
	rep_free(&r);
	post(PROTO_OP_CUBLASSETPOINTERMODE_V2, "ui", H, I(CUBLAS_POINTER_MODE_HOST));
	CHECK_EQ(call(&r, PROTO_OP_CUBLASSDOT_V2, "uiuiuin", H, I(1), U(dev), I(1), U(dev), I(1)), 0);
	const void *res;
	size_t n = 0;
	CHECK_EQ(r.lib, CUBLAS_STATUS_SUCCESS);
	CHECK(proto_arg_bin(&r.v, PROTO_REPLY_FIRST + 1, &res, &n) == 0 && n == 16);
	rep_free(&r);

	/* host outputs: a size beyond the limit is refused before any allocation */
	post(PROTO_OP_CUBLASLTMATMULDESCCREATE, "uii", DESC, I(CUBLAS_COMPUTE_32F), I(CUDA_R_32F));
	post(PROTO_OP_CUBLASLTMATRIXLAYOUTCREATE, "uiuui", LA, I(CUDA_R_32F), U(1), U(1), I(1));
	post(PROTO_OP_CUBLASLTMATMULPREFERENCECREATE, "u", PREF);
	CHECK_EQ(lib_sync(), CUBLAS_STATUS_SUCCESS);
	CHECK_EQ(call(&r, PROTO_OP_CUBLASLTMATMULALGOGETHEURISTIC, "uuuuuuui", H, DESC, LA, LA, LA, LA, PREF,
		      I(1 << 30)), 0);
	CHECK_EQ(r.lib, CUBLAS_STATUS_INVALID_VALUE);
	rep_free(&r);
	CHECK_EQ(call(&r, PROTO_OP_CUBLASLTMATMULALGOGETHEURISTIC, "uuuuuuui", H, DESC, LA, LA, LA, LA, PREF, I(-1)),
		 0);
	CHECK_EQ(r.lib, CUBLAS_STATUS_INVALID_VALUE);
	rep_free(&r);
	/* a cuBLAS handle serves as the Lt handle; a descriptor where a layout goes does not */
	CHECK_EQ(call(&r, PROTO_OP_CUBLASLTMATMULALGOGETHEURISTIC, "uuuuuuui", H, DESC, LA, LA, LA, LA, PREF, I(2)), 0);
	CHECK_EQ(r.lib, CUBLAS_STATUS_SUCCESS);
	CHECK(proto_arg_bin(&r.v, PROTO_REPLY_FIRST + 1, &res, &n) == 0 &&
	      n == 2 * sizeof(cublasLtMatmulHeuristicResult_t));
	rep_free(&r);
	CHECK_EQ(call(&r, PROTO_OP_CUBLASLTMATMULALGOGETHEURISTIC, "uuuuuuui", H, DESC, DESC, LA, LA, LA, PREF, I(1)),
		 0);
	CHECK_EQ(r.lib, CUBLAS_STATUS_INVALID_VALUE);
	rep_free(&r);
	CHECK_EQ(call(&r, PROTO_OP_CUBLASLTMATMULALGOGETHEURISTIC, "uuuuuuui", LA, DESC, LA, LA, LA, LA, PREF, I(1)), 0);
	CHECK_EQ(r.lib, CUBLAS_STATUS_NOT_INITIALIZED);
	rep_free(&r);

	/* attribute buffers: the length must be the size argument */
	int32_t v = 1;
	post(PROTO_OP_CUBLASLTMATMULDESCSETATTRIBUTE, "uibu", DESC, I(CUBLASLT_MATMUL_DESC_TRANSA), &v, (size_t)3,
	     U(4));
	CHECK_EQ(lib_sync(), CUBLAS_STATUS_INVALID_VALUE);
	post(PROTO_OP_CUBLASLTMATMULDESCSETATTRIBUTE, "uibu", DESC, I(CUBLASLT_MATMUL_DESC_TRANSA), &v, sizeof(v),
	     U(1ull << 40));
	CHECK_EQ(lib_sync(), CUBLAS_STATUS_INVALID_VALUE);
	CHECK_EQ(log_count("cublasLtMatmulDescSetAttribute "), 0);
	post(PROTO_OP_CUBLASLTMATMULDESCSETATTRIBUTE, "uibu", DESC, I(CUBLASLT_MATMUL_DESC_TRANSA), &v, sizeof(v),
	     U(sizeof(v)));
	CHECK_EQ(lib_sync(), CUBLAS_STATUS_SUCCESS);
	CHECK_EQ(log_count("cublasLtMatmulDescSetAttribute desc=desc#1 attr=3 buf=01000000 size=4"), 1);

	/* stale ids: destroyed once, refused after */
	post(PROTO_OP_CUBLASCREATE_V2, "u", H2);
	post(PROTO_OP_CUBLASDESTROY_V2, "u", H2);
	post(PROTO_OP_CUBLASDESTROY_V2, "u", H2);
	CHECK_EQ(lib_sync(), CUBLAS_STATUS_NOT_INITIALIZED);
	CHECK_EQ(log_count("cublasDestroy_v2 "), 1);
	/* an op of no one: not supported, the session goes on */
	CHECK_EQ(call(&r, 900, "u", U(1)), CUDA_ERROR_NOT_SUPPORTED);
	rep_free(&r);
	CHECK_EQ(lib_sync(), CUBLAS_STATUS_SUCCESS);

	nccl_section(dev);

	/* the session ends: H, DESC, LA, PREF are destroyed by the server, the
	 * communicator aborted */
	transport_close(conn);
	int ok = 0;
	for (int i = 0; i < 500 && !ok; i++) {
		ok = log_count("cublasDestroy_v2 handle=blas#1") == 1 && log_count("cublasLtMatmulDescDestroy ") == 1 &&
		     log_count("cublasLtMatrixLayoutDestroy ") == 1 && log_count("cublasLtMatmulPreferenceDestroy ") == 1 &&
		     nccl_count("ncclCommAbort comm=comm#1") == 1;
		if (!ok)
			sleep_ms(10);
	}
	CHECK(ok);
	kill(srv_pid, SIGTERM);
	int st = 0;
	waitpid(srv_pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	if (!check_failed_) {
		unlink(logpath);
		unlink(nccl_logpath);
		char pf[128];
		snprintf(pf, sizeof(pf), "%s/port", dir);
		unlink(pf);
		rmdir(dir);
	} else {
		fprintf(stderr, "kept %s\n", dir);
	}
	return check_summary("test_cublas_wire");
}
