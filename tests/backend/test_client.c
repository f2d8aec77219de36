/*
 * End-to-end test of remote-gpud without the frontend: starts the server on the
 * driver test double (tests/fakecuda) and speaks the protocol to it directly
 * with the transport and protocol libraries, one frame at a time, so every
 * reply, latched error and disconnect can be checked exactly.
 *
 *   test_client SERVER_BINARY FAKE_DRIVER [KERNELS_FATBIN]
 *
 * Covers: handshake (version, token), allocations and copies of every kind
 * checked byte for byte, range and handle errors, streams, events, host
 * functions, modules and launches (when the fatbin is there), malformed and
 * hostile frames, a client killed in the middle of a copy, several clients at
 * once, striped copies (t_stripes: secrets, exact bytes, a stripe killed
 * mid-copy), a clean shutdown on SIGTERM, and a kernel image store that cannot be
 * poisoned (t_store_*: uploads verified, loaded before they are shared, within
 * a quota; images that collide under the old XXH3-128 addresses kept apart). Memory must be back to the baseline
 * after every session.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>

/* Inline, for XXH3_kSecret: the collision test builds images XXH3 cannot tell apart. */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "check.h"
#include "cubin.h"
#include "proto.h"
#include "transport.h"

#define U(x) ((uint64_t)(x))
#define I(x) ((int64_t)(x))

static const char *g_server, *g_driver, *g_fatbin;

/* ---- the server process ---- */

typedef struct srv {
	pid_t pid;
	int port;
	char dir[64];
} srv;

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	return remove(path);
}

/* token, quota: --token, --store-quota (NULL: none, the default). */
static int srv_start(srv *s, const char *token, const char *quota)
{
	const char *argv[16];
	int n = 0;
	char pf[128], store[128];

	snprintf(s->dir, sizeof(s->dir), "/tmp/rgbe.XXXXXX");
	if (!mkdtemp(s->dir))
		return -1;
	snprintf(pf, sizeof(pf), "%s/port", s->dir);
	/* A fresh kernel image store: the module tests expect to upload. */
	snprintf(store, sizeof(store), "%s/store", s->dir);
	s->pid = fork();
	if (s->pid < 0)
		return -1;
	if (s->pid == 0) {
		const char *fixed[] = {g_server, "--listen", "127.0.0.1:0", "--port-file", pf, "--driver", g_driver,
				       "--cubin-store", store, "--drain-seconds", "0"};
		for (size_t i = 0; i < sizeof(fixed) / sizeof(*fixed); i++)
			argv[n++] = fixed[i];
		if (token) {
			argv[n++] = "--token";
			argv[n++] = token;
		}
		if (quota) {
			argv[n++] = "--store-quota";
			argv[n++] = quota;
		}
		argv[n] = NULL;
		execv(g_server, (char *const *)argv);
		_exit(127);
	}
	for (int i = 0; i < 1000; i++) {
		FILE *f = fopen(pf, "r");
		if (f) {
			int ok = fscanf(f, "%d", &s->port) == 1;
			fclose(f);
			if (ok && s->port > 0)
				return 0;
		}
		if (waitpid(s->pid, NULL, WNOHANG) == s->pid) {
			s->pid = 0;
			return -1;
		}
		sleep_ms(10);
	}
	return -1;
}

/* SIGTERM; returns the exit status, or -1 if it did not exit within 20 s. */
static int srv_stop(srv *s)
{
	int st = 0;

	if (s->pid <= 0)
		return -1;
	kill(s->pid, SIGTERM);
	for (int i = 0; i < 2000; i++) {
		if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
			nftw(s->dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
			s->pid = 0;
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		}
		sleep_ms(10);
	}
	kill(s->pid, SIGKILL);
	waitpid(s->pid, NULL, 0);
	s->pid = 0;
	return -1;
}

static int srv_alive(srv *s) { return s->pid > 0 && waitpid(s->pid, NULL, WNOHANG) == 0; }

/* ---- a client ---- */

typedef struct cli {
	transport_conn *c;
	uint64_t seq;
	int latched;     /* of the last reply */
	uint64_t events[16];
	uint32_t event_ops[16];
	int nevents;
	int auto_done; /* answer host function events at once */
} cli;

typedef struct rep {
	int status, latched;
	proto_view v;
	uint8_t *msg;
	uint64_t plen;
} rep;

typedef struct dest {
	void *buf;
	size_t cap;
} dest;

static int cli_open(cli *k, int port)
{
	transport_addr a;
	char s[64];
	memset(k, 0, sizeof(*k));
	snprintf(s, sizeof(s), "127.0.0.1:%d", port);
	if (transport_parse_addr(s, &a) || transport_connect(&a, &k->c))
		return -1;
	return 0;
}

static void cli_close(cli *k)
{
	if (k->c)
		transport_close(k->c);
	k->c = NULL;
}

static void rep_free(rep *r)
{
	if (r->msg) {
		proto_view_free(&r->v);
		free(r->msg);
	}
	r->msg = NULL;
}

static void vbuild(cli *k, proto_msg *m, uint32_t op, uint64_t seq, const char *fmt, va_list ap)
{
	proto_msg_begin(m, op, seq, (uint32_t)strlen(fmt));
	for (const char *f = fmt; *f; f++) {
		switch (*f) {
		case 'u': proto_msg_u64(m, va_arg(ap, uint64_t)); break;
		case 'i': proto_msg_i64(m, va_arg(ap, int64_t)); break;
		case 's': proto_msg_str(m, va_arg(ap, const char *)); break;
		case 'b': {
			const void *p = va_arg(ap, const void *);
			size_t n = va_arg(ap, size_t);
			proto_msg_bin(m, p ? p : (const void *)"", n);
			break;
		}
		case 'n': proto_msg_nil(m); break;
		}
	}
}

static int sendm(cli *k, proto_msg *m, uint16_t flags, const void *payload, uint64_t plen)
{
	struct iovec iov[2] = {{m->data, 0}, {(void *)payload, plen}};
	proto_msg_finish(m, flags, plen);
	iov[0].iov_len = m->len;
	int r = transport_sendv(k->c, iov, plen ? 2 : 1);
	proto_msg_free(m);
	return r;
}

static void *dest_cb(void *ctx, const transport_frame *f)
{
	dest *d = ctx;
	return d && f->hdr.payload_len <= d->cap ? d->buf : NULL;
}

static int post(cli *k, const void *payload, uint64_t plen, uint32_t op, const char *fmt, ...);

/* Receives frames until the reply to seq; host function events on the way are
 * recorded. Returns 0 or a transport error. */
static int recv_reply(cli *k, uint64_t seq, rep *r, void *buf, size_t cap)
{
	dest d = {buf, cap};
	memset(r, 0, sizeof(*r));
	for (;;) {
		transport_frame f;
		int e = transport_recv_frame(k->c, &f, dest_cb, &d);
		if (e)
			return e;
		proto_view v;
		if (proto_view_init(&v, &f.hdr, f.msg) != PROTO_OK) {
			transport_frame_free(&f);
			return PROTO_EDECODE;
		}
		if (f.hdr.flags & PROTO_F_EVENT) {
			uint64_t id = 0;
			uint32_t op = v.op;
			proto_arg_u64(&v, 0, &id);
			if (k->nevents < 16) {
				k->event_ops[k->nevents] = op;
				k->events[k->nevents++] = id;
			}
			proto_view_free(&v);
			transport_frame_free(&f);
			if (op == PROTO_OP_HOSTFN && k->auto_done)
				post(k, NULL, 0, PROTO_OP_HOSTFN_DONE, "u", id);
			continue;
		}
		int32_t st = -1, la = -1;
		if (proto_reply_status(&v, &st, &la) != PROTO_OK || v.seq != seq) {
			fprintf(stderr, "unexpected frame op %u seq %" PRIu64 " (waiting for %" PRIu64 ")\n", v.op, v.seq,
				seq);
			proto_view_free(&v);
			transport_frame_free(&f);
			return PROTO_EDECODE;
		}
		r->status = st;
		r->latched = la;
		r->v = v;
		r->msg = f.msg;
		r->plen = f.hdr.payload_len;
		k->latched = la;
		return 0;
	}
}

/* A sync call: its status (or a negative transport error); *r kept if non-NULL. */
static int call(cli *k, rep *r, void *buf, size_t cap, const void *payload, uint64_t plen, uint32_t op,
		const char *fmt, ...)
{
	proto_msg m;
	rep tmp;
	va_list ap;
	uint64_t seq = ++k->seq;
	if (r)
		memset(r, 0, sizeof(*r));
	va_start(ap, fmt);
	vbuild(k, &m, op, seq, fmt, ap);
	va_end(ap);
	int e = sendm(k, &m, 0, payload, plen);
	if (e)
		return e;
	if (!r)
		r = &tmp;
	memset(r, 0, sizeof(*r));
	if ((e = recv_reply(k, seq, r, buf, cap)))
		return e;
	int st = r->status;
	if (r == &tmp)
		rep_free(r);
	return st;
}

/* An async call: no reply. */
static int post(cli *k, const void *payload, uint64_t plen, uint32_t op, const char *fmt, ...)
{
	proto_msg m;
	va_list ap;
	va_start(ap, fmt);
	vbuild(k, &m, op, ++k->seq, fmt, ap);
	va_end(ap);
	return sendm(k, &m, PROTO_F_ASYNC, payload, plen);
}

static int hello(cli *k, uint32_t version, const char *token, rep *r)
{
	return call(k, r, NULL, 0, NULL, 0, PROTO_OP_HELLO, "ususs", U(version), token ? token : "", U(getpid()),
		    "testhost", "test_client");
}

static int open_session(cli *k, int port)
{
	if (cli_open(k, port))
		return -1;
	return hello(k, PROTO_VERSION, NULL, NULL) == 0 ? 0 : -1;
}

static uint64_t u64_result(rep *r, int i)
{
	uint64_t v = 0;
	proto_arg_u64(&r->v, PROTO_REPLY_FIRST + i, &v);
	return v;
}

static uint64_t mem_alloc(cli *k, uint64_t size)
{
	rep r;
	uint64_t p = 0;
	if (call(k, &r, NULL, 0, NULL, 0, PROTO_OP_MEM_ALLOC, "u", size) == 0)
		p = u64_result(&r, 0);
	rep_free(&r);
	return p;
}

static uint64_t mem_free_bytes(cli *k)
{
	rep r;
	uint64_t v = 0;
	if (call(k, &r, NULL, 0, NULL, 0, PROTO_OP_MEM_GET_INFO, "") == 0)
		v = u64_result(&r, 0);
	rep_free(&r);
	return v;
}

static int htod(cli *k, uint64_t dst, const void *p, uint64_t n, uint64_t stream)
{
	return post(k, p, n, PROTO_OP_MEMCPY_HTOD, "uu", dst, stream);
}

static int dtoh(cli *k, void *p, uint64_t src, uint64_t n, uint64_t stream)
{
	rep r;
	int st = call(k, &r, p, n, NULL, 0, PROTO_OP_MEMCPY_DTOH, "uuu", src, n, stream);
	if (st == 0 && r.plen != n)
		st = -999;
	rep_free(&r);
	return st;
}

/* Whether the connection was closed by the server (a recv ends with an error). */
static int closed_by_server(cli *k)
{
	rep r;
	int e = recv_reply(k, UINT64_MAX, &r, NULL, 0);
	rep_free(&r);
	return e == TRANSPORT_ECLOSED || e == TRANSPORT_EIO;
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		p[i] = (uint8_t)(seed >> 16);
	}
}

static uint64_t g_baseline;

/* Teardown is asynchronous: wait (a little) for the memory to come back. */
static uint64_t wait_baseline(cli *k)
{
	uint64_t v = 0;
	for (int i = 0; i < 300; i++) {
		v = mem_free_bytes(k);
		if (v == g_baseline)
			break;
		sleep_ms(10);
	}
	return v;
}

/* ---- tests ---- */

static void t_hello(srv *s)
{
	cli k;
	rep r;
	if (!CHECK(cli_open(&k, s->port) == 0))
		return;
	CHECK_EQ(hello(&k, PROTO_VERSION, NULL, &r), 0);
	CHECK_EQ(u64_result(&r, 0), PROTO_VERSION);
	int64_t drv = 0, lo = 1, hi = 1;
	const char *name;
	size_t n;
	const void *b;
	proto_arg_i64(&r.v, PROTO_REPLY_FIRST + 1, &drv);
	CHECK(drv > 0);
	CHECK_EQ(u64_result(&r, 2), 1); /* devices served: the one of --device 0 */
	CHECK_EQ(u64_result(&r, 3), 0); /* its ordinal */
	CHECK(proto_arg_str(&r.v, PROTO_REPLY_FIRST + 4, &name, &n) == 0 && n > 0);
	CHECK(proto_arg_bin(&r.v, PROTO_REPLY_FIRST + 5, &b, &n) == 0 && n == 16);
	CHECK(u64_result(&r, 6) > 0);
	CHECK(proto_arg_bin(&r.v, PROTO_REPLY_FIRST + 7, &b, &n) == 0 && n == 4 * CU_DEVICE_ATTRIBUTE_MAX);
	if (n == 4 * CU_DEVICE_ATTRIBUTE_MAX) {
		const uint8_t *a = b;
		uint32_t mtpb = (uint32_t)a[4] | (uint32_t)a[5] << 8 | (uint32_t)a[6] << 16 | (uint32_t)a[7] << 24;
		CHECK(mtpb >= 64); /* attribute 1: max threads per block */
	}
	CHECK(proto_arg_str(&r.v, PROTO_REPLY_FIRST + 8, &name, &n) == 0);
	CHECK(proto_arg_i64(&r.v, PROTO_REPLY_FIRST + 9, &lo) == 0);
	CHECK(proto_arg_i64(&r.v, PROTO_REPLY_FIRST + 10, &hi) == 0);
	CHECK_EQ(u64_result(&r, 11), 0); /* peers: none */
	CHECK(hi <= lo);
	rep_free(&r);
	CHECK_EQ(hello(&k, PROTO_VERSION, NULL, NULL), CUDA_ERROR_INVALID_VALUE); /* twice */
	g_baseline = mem_free_bytes(&k);
	CHECK(g_baseline > 0);
	cli_close(&k);
}

static void t_copies(srv *s)
{
	cli k;
	const size_t n = 1 << 20;
	uint8_t *a = malloc(n), *b = malloc(n);
	if (!CHECK(open_session(&k, s->port) == 0))
		goto out;
	uint64_t p = mem_alloc(&k, n), q = mem_alloc(&k, n);
	CHECK(p && q);
	CHECK_EQ(mem_free_bytes(&k) + 2 * n <= g_baseline, 1);
	fill(a, n, 1);
	CHECK_EQ(htod(&k, p, a, n, 0), 0);
	memset(b, 0, n);
	CHECK_EQ(dtoh(&k, b, p, n, 0), 0);
	CHECK_MEM(a, b, n);
	CHECK_EQ(k.latched, 0);
	/* unaligned pieces */
	fill(a, 1000, 2);
	CHECK_EQ(htod(&k, p + 13, a, 1000, 0), 0);
	CHECK_EQ(dtoh(&k, b, p + 13, 1000, 0), 0);
	CHECK_MEM(a, b, 1000);
	CHECK_EQ(dtoh(&k, b, p + n - 1, 1, 0), 0); /* the last byte */
	/* zero bytes: fine, no payload */
	CHECK_EQ(htod(&k, p, a, 0, 0), 0);
	CHECK_EQ(dtoh(&k, b, p, 0, 0), 0);
	/* device to device */
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_MEMCPY_DTOD, "uuuu", q + 1, p + 13, U(1000), U(0)), 0);
	CHECK_EQ(dtoh(&k, b, q + 1, 1000, 0), 0);
	CHECK_MEM(a, b, 1000);
	/* memsets of each element size */
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_MEMSET, "uuuuu", p, U(0xab), U(1), U(100), U(0)), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_MEMSET, "uuuuu", p + 100, U(0x1234), U(2), U(10), U(0)), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_MEMSET, "uuuuu", p + 120, U(0xdeadbeef), U(4), U(5), U(0)), 0);
	CHECK_EQ(dtoh(&k, b, p, 140, 0), 0);
	int ok = 1;
	for (int i = 0; i < 100; i++)
		ok &= b[i] == 0xab;
	for (int i = 0; i < 10; i++)
		ok &= b[100 + 2 * i] == 0x34 && b[101 + 2 * i] == 0x12;
	for (int i = 0; i < 5; i++)
		ok &= b[120 + 4 * i] == 0xef && b[123 + 4 * i] == 0xde;
	CHECK(ok);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_MEMSET, "uuuuu", p, U(0), U(3), U(1), U(0)), 0); /* bad elemsize */
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_DEVICE_SYNC, ""), 0);
	CHECK_EQ(k.latched, CUDA_ERROR_INVALID_VALUE);

	/* 2D: 7 rows of 10 bytes, pitch 32 */
	uint8_t rows[70], back[70];
	fill(rows, 70, 3);
	CHECK_EQ(post(&k, rows, 70, PROTO_OP_MEMCPY_2D_HTOD, "uuuuu", p, U(32), U(10), U(7), U(0)), 0);
	CHECK_EQ(call(&k, NULL, back, 70, NULL, 0, PROTO_OP_MEMCPY_2D_DTOH, "uuuuu", p, U(32), U(10), U(7), U(0)), 0);
	CHECK_MEM(rows, back, 70);
	CHECK_EQ(dtoh(&k, b, p, 32 * 7, 0), 0);
	CHECK_MEM(rows + 10, b + 32, 10); /* row 1 at pitch 32 */
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_MEMCPY_2D_DTOD, "uuuuuuu", q, U(16), p, U(32), U(10), U(7), U(0)), 0);
	CHECK_EQ(call(&k, NULL, back, 70, NULL, 0, PROTO_OP_MEMCPY_2D_DTOH, "uuuuu", q, U(16), U(10), U(7), U(0)), 0);
	CHECK_MEM(rows, back, 70);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_MEMSET_2D, "uuuuuuu", q, U(16), U(0x55), U(1), U(4), U(3), U(0)), 0);
	CHECK_EQ(dtoh(&k, b, q, 48, 0), 0);
	CHECK(b[0] == 0x55 && b[3] == 0x55 && b[4] == rows[4] && b[16] == 0x55 && b[35] == 0x55 && b[36] != 0x55);
	/* 2D with a payload of the wrong length, and a pitch smaller than a row */
	CHECK_EQ(post(&k, rows, 69, PROTO_OP_MEMCPY_2D_HTOD, "uuuuu", p, U(32), U(10), U(7), U(0)), 0);
	CHECK_EQ(mem_free_bytes(&k) > 0, 1);
	CHECK_EQ(k.latched, CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(call(&k, NULL, back, 70, NULL, 0, PROTO_OP_MEMCPY_2D_DTOH, "uuuuu", p, U(5), U(10), U(7), U(0)),
		 CUDA_ERROR_INVALID_VALUE);

	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEM_FREE, "u", p), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEM_FREE, "u", q), 0);
	CHECK_EQ(mem_free_bytes(&k), g_baseline);
	cli_close(&k);
out:
	free(a);
	free(b);
}

static void t_range_errors(srv *s)
{
	cli k;
	uint8_t buf[64] = {0};
	if (!CHECK(open_session(&k, s->port) == 0))
		return;
	uint64_t p = mem_alloc(&k, 4096), q = mem_alloc(&k, 4096);
	CHECK(p && q);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_MEMSET, "uuuuu", q, U(0), U(1), U(4096), U(0)), 0);
	/* past the end, before the start, foreign, straddling */
	CHECK_EQ(dtoh(&k, buf, p + 4090, 7, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(dtoh(&k, buf, p - 1, 2, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(dtoh(&k, buf, 0xdead0000, 4, 0), CUDA_ERROR_INVALID_VALUE);
	uint64_t lo = p < q ? p : q, hi = p < q ? q : p;
	CHECK_EQ(dtoh(&k, buf, hi - 8, 16, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(dtoh(&k, buf, lo + 4096 - 8, 16, 0), CUDA_ERROR_INVALID_VALUE);
	/* hostile lengths near UINT64_MAX */
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEMCPY_DTOH, "uuu", p, UINT64_MAX, U(0)),
		 CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_MEMSET, "uuuuu", p + 8, U(0), U(4), UINT64_MAX / 2, U(0)), 0);
	CHECK_EQ(mem_free_bytes(&k) > 0, 1);
	CHECK_EQ(k.latched, CUDA_ERROR_INVALID_VALUE);
	/* an async copy out of range: latched, reported once by the next reply */
	CHECK_EQ(htod(&k, p + 4000, buf, 64, 0 + 0), 0); /* ends at 4064: fine */
	CHECK_EQ(htod(&k, p + 4064, buf, 64, 0), 0);      /* ends at 4128: not */
	CHECK_EQ(mem_free_bytes(&k) > 0, 1);
	CHECK_EQ(k.latched, CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(mem_free_bytes(&k) > 0, 1);
	CHECK_EQ(k.latched, 0); /* taken by the reply that carried it */
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_MEMCPY_DTOD, "uuuu", p, q + 1, U(4096), U(0)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_DEVICE_SYNC, ""), 0);
	CHECK_EQ(k.latched, CUDA_ERROR_INVALID_VALUE);
	/* frees: interior, foreign, double; NULL is fine */
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEM_FREE, "u", p + 8), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEM_FREE, "u", U(0xdead0000)), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEM_FREE, "u", p), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEM_FREE, "u", p), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEM_FREE, "u", U(0)), 0);
	CHECK_EQ(dtoh(&k, buf, p, 4, 0), CUDA_ERROR_INVALID_VALUE); /* use after free */
	/* another session cannot touch this one's memory */
	cli k2;
	if (CHECK(open_session(&k2, s->port) == 0)) {
		CHECK_EQ(dtoh(&k2, buf, q, 4, 0), CUDA_ERROR_INVALID_VALUE);
		CHECK_EQ(call(&k2, NULL, NULL, 0, NULL, 0, PROTO_OP_MEM_FREE, "u", q), CUDA_ERROR_INVALID_VALUE);
		cli_close(&k2);
	}
	CHECK_EQ(dtoh(&k, buf, q, 4, 0), 0);
	/* stream-ordered allocations */
	rep r;
	CHECK_EQ(call(&k, &r, NULL, 0, NULL, 0, PROTO_OP_MEM_ALLOC_ASYNC, "uu", U(8192), U(0)), 0);
	uint64_t a = u64_result(&r, 0);
	rep_free(&r);
	CHECK(a != 0);
	CHECK_EQ(htod(&k, a + 8000, buf, 64, 0), 0);
	CHECK_EQ(dtoh(&k, buf, a + 8000, 64, 0), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_MEM_FREE_ASYNC, "uu", a, U(0)), 0);
	CHECK_EQ(dtoh(&k, buf, a, 4, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(k.latched, 0);
	cli_close(&k); /* q is freed by the teardown */
	if (CHECK(open_session(&k, s->port) == 0)) {
		CHECK_EQ(wait_baseline(&k), g_baseline);
		cli_close(&k);
	}
}

/* ---- striped copies (backend/src/stripe.h) ---- */

#define SECRET 16

/* stripe_open: 0 and the port, count and secrets, or the status. */
static int stripe_open(cli *k, unsigned want, int *port, int *n, uint8_t *sec)
{
	rep r;
	const void *b = NULL;
	size_t bl = 0;
	int st = call(k, &r, NULL, 0, NULL, 0, PROTO_OP_STRIPE_OPEN, "u", U(want));
	if (st == 0) {
		*port = (int)u64_result(&r, 0);
		*n = (int)u64_result(&r, 1);
		if (proto_arg_bin(&r.v, PROTO_REPLY_FIRST + 2, &b, &bl) == 0 && bl == (size_t)*n * SECRET)
			memcpy(sec, b, bl);
		else
			st = -1;
	}
	rep_free(&r);
	return st;
}

/* A stripe connection presenting secret: the answer's status (-1: none). */
static int stripe_hello(cli *k, int port, const uint8_t *secret)
{
	if (cli_open(k, port))
		return -1;
	return call(k, NULL, NULL, 0, NULL, 0, PROTO_OP_STRIPE_HELLO, "b", secret, (size_t)SECRET);
}

/* Bytes [off, off+n) of transfer x (total bytes) in pieces of piece bytes. */
static int stripe_put(cli *k, uint64_t x, uint64_t total, const uint8_t *base, uint64_t off, uint64_t n,
		      uint64_t piece)
{
	for (uint64_t o = off; o < off + n; o += piece) {
		uint64_t m = off + n - o < piece ? off + n - o : piece;
		int r = post(k, base + o, m, PROTO_OP_STRIPE_PUT, "uuu", x, total, o);
		if (r)
			return r;
	}
	return 0;
}

static int stripe_get(cli *k, uint64_t x, uint8_t *base, uint64_t off, uint64_t n)
{
	rep r;
	int st = call(k, &r, base + off, n, NULL, 0, PROTO_OP_STRIPE_GET, "uuu", x, off, n);
	if (st == 0 && r.plen != n)
		st = -999;
	rep_free(&r);
	return st;
}

/* Secrets (wrong, spent), exact bytes across two stripes at odd sizes and
 * piece boundaries both ways, stripe ops refused on the main connection,
 * a stripe killed in the middle of a payload: the copy fails (latched), the
 * other stripe is closed, the session goes on over its connection, and its
 * memory comes back. */
static void t_stripes(srv *s)
{
	cli k, a, b, w;
	uint8_t sec[16 * SECRET], bad[SECRET];
	int port = 0, n = 0;
	const size_t len = (3u << 20) + 5;
	uint8_t *src = malloc(len), *dst = malloc(len);
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	if (!CHECK(open_session(&k, s->port) == 0))
		goto out;
	uint64_t p = mem_alloc(&k, len);
	CHECK(p != 0);
	if (!CHECK_EQ(stripe_open(&k, 2, &port, &n, sec), 0) || !CHECK_EQ(n, 2) || !CHECK(port > 0))
		goto done;
	/* a wrong secret: refused, closed, and the right ones still good */
	memcpy(bad, sec, SECRET);
	bad[7] ^= 1;
	CHECK_EQ(stripe_hello(&w, port, bad), CUDA_ERROR_NOT_PERMITTED);
	CHECK(closed_by_server(&w));
	cli_close(&w);
	CHECK_EQ(stripe_hello(&a, port, sec), 0);
	CHECK_EQ(stripe_hello(&b, port, sec + SECRET), 0);
	/* a spent one: refused (or, every secret spent, closed unread) */
	int st = stripe_hello(&w, port, sec);
	CHECK(st == CUDA_ERROR_NOT_PERMITTED || st < 0);
	CHECK(st < 0 || closed_by_server(&w));
	cli_close(&w);
	/* H2D over both, then back over the main connection and over both */
	static const uint64_t splits[] = {1, 4096, (1u << 20) + 3};
	uint64_t x = 1;
	for (size_t i = 0; i < 3; i++, x += 2) {
		uint64_t cut = splits[i];
		fill(src, len, 40 + (uint32_t)i);
		CHECK_EQ(stripe_put(&a, x, len, src, 0, cut, 65536), 0);
		CHECK_EQ(stripe_put(&b, x, len, src, cut, len - cut, 1u << 20), 0);
		CHECK_EQ(post(&k, NULL, 0, PROTO_OP_MEMCPY_HTOD_STRIPED, "uuuu", p, U(len), U(0), x), 0);
		memset(dst, 0, len);
		CHECK_EQ(dtoh(&k, dst, p, len, 0), 0);
		CHECK_MEM(src, dst, len);
		CHECK_EQ(k.latched, 0);
		memset(dst, 0, len);
		CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEMCPY_DTOH_STRIPED, "uuuu", p, U(len), U(0), x + 1), 0);
		CHECK_EQ(stripe_get(&b, x + 1, dst, cut, len - cut), 0);
		CHECK_EQ(stripe_get(&a, x + 1, dst, 0, cut), 0);
		CHECK_MEM(src, dst, len);
	}
	/* outside the session's memory: refused, nothing waits */
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEMCPY_DTOH_STRIPED, "uuuu", p + 1, U(len), U(0), x),
		 CUDA_ERROR_INVALID_VALUE);
	/* a stripe's op on the main connection */
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_STRIPE_GET, "uuu", x, U(0), U(1)), CUDA_ERROR_NOT_PERMITTED);
	/* b dies in the middle of a payload */
	fill(src, len, 50);
	CHECK_EQ(stripe_put(&a, x, len, src, 0, len / 2, 1u << 20), 0);
	proto_msg m;
	proto_msg_begin(&m, PROTO_OP_STRIPE_PUT, 99, 3);
	proto_msg_u64(&m, x);
	proto_msg_u64(&m, len);
	proto_msg_u64(&m, len / 2);
	proto_msg_finish(&m, PROTO_F_ASYNC, len - len / 2);
	struct iovec iov[2] = {{m.data, m.len}, {src + len / 2, 1000}};
	CHECK_EQ(transport_sendv(b.c, iov, 2), 0);
	proto_msg_free(&m);
	cli_close(&b);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_MEMCPY_HTOD_STRIPED, "uuuu", p, U(len), U(0), x), 0);
	CHECK_EQ(mem_free_bytes(&k) > 0, 1);
	CHECK_EQ(k.latched, CUDA_ERROR_OPERATING_SYSTEM);
	CHECK(closed_by_server(&a)); /* the other stripe too */
	/* broken: no more stripes for this session; its connection carries on */
	CHECK_EQ(stripe_open(&k, 2, &port, &n, sec), 0);
	CHECK_EQ(n, 0);
	CHECK_EQ(htod(&k, p, src, len, 0), 0);
	memset(dst, 0, len);
	CHECK_EQ(dtoh(&k, dst, p, len, 0), 0);
	CHECK_MEM(src, dst, len);
	CHECK_EQ(k.latched, 0);
done:
	cli_close(&a);
	cli_close(&b);
	cli_close(&k);
	if (CHECK(open_session(&k, s->port) == 0)) {
		CHECK_EQ(wait_baseline(&k), g_baseline);
		cli_close(&k);
	}
out:
	free(src);
	free(dst);
}

static void t_big(srv *s)
{
	cli k;
	const size_t n = 64u << 20;
	uint8_t *a = malloc(n), *b = malloc(n);
	if (!CHECK(open_session(&k, s->port) == 0))
		goto out;
	uint64_t p = mem_alloc(&k, n);
	CHECK(p != 0);
	for (int round = 0; round < 3; round++) { /* malloc'd, then the big staging buffer */
		fill(a, n, 10 + (uint32_t)round);
		CHECK_EQ(htod(&k, p, a, n, 0), 0);
		memset(b, 0, n);
		CHECK_EQ(dtoh(&k, b, p, n, 0), 0);
		CHECK_MEM(a, b, n);
	}
	/* many chunk-sized copies in flight at once */
	for (size_t off = 0; off < n; off += 1u << 20)
		CHECK_EQ(htod(&k, p + off, b + off, 1u << 20, 0), 0);
	memset(a, 0, n);
	CHECK_EQ(dtoh(&k, a, p, n, 0), 0);
	CHECK_MEM(a, b, n);
	CHECK_EQ(k.latched, 0);
	cli_close(&k);
out:
	free(a);
	free(b);
}

static void t_streams_events(srv *s)
{
	cli k;
	uint8_t buf[256], back[256];
	if (!CHECK(open_session(&k, s->port) == 0))
		return;
	uint64_t p = mem_alloc(&k, 4096);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_STREAM_CREATE, "uui", U(5), U(1), I(0)), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_STREAM_CREATE, "uui", U(5), U(0), I(0)), 0); /* id in use */
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_STREAM_SYNC, "u", U(5)), 0);
	CHECK_EQ(k.latched, CUDA_ERROR_INVALID_HANDLE);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_STREAM_SYNC, "u", U(6)), CUDA_ERROR_INVALID_HANDLE);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_STREAM_SYNC, "u", U(0)), 0);
	fill(buf, sizeof(buf), 7);
	CHECK_EQ(htod(&k, p, buf, sizeof(buf), 5), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_EVENT_CREATE, "uu", U(9), U(0)), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_EVENT_CREATE, "uu", U(10), U(2)), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_EVENT_RECORD, "uuu", U(9), U(5), U(0)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_EVENT_SYNC, "u", U(9)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_EVENT_QUERY, "u", U(9)), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_STREAM_WAIT_EVENT, "uuu", U(0), U(9), U(0)), 0);
	CHECK_EQ(dtoh(&k, back, p, sizeof(back), 5), 0);
	CHECK_MEM(buf, back, sizeof(buf));
	/* destroy, then the stale id */
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_EVENT_DESTROY, "u", U(9)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_EVENT_SYNC, "u", U(9)), CUDA_ERROR_INVALID_HANDLE);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_EVENT_DESTROY, "u", U(9)), 0); /* twice */
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_DEVICE_SYNC, ""), 0);
	CHECK_EQ(k.latched, CUDA_ERROR_INVALID_HANDLE);
	/* an id reused after its destroy is a new event */
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_EVENT_CREATE, "uu", U(9), U(0)), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_EVENT_RECORD, "uuu", U(9), U(0), U(0)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_EVENT_SYNC, "u", U(9)), 0);
	CHECK_EQ(k.latched, 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_EVENT_CREATE, "uu", U(11), U(0x40)), 0); /* bad flags */
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_STREAM_DESTROY, "u", U(5)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_STREAM_SYNC, "u", U(5)), CUDA_ERROR_INVALID_HANDLE);
	CHECK_EQ(k.latched, CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(htod(&k, p, buf, 16, 5), 0); /* on the destroyed stream */
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_STREAM_DESTROY, "u", U(0)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_DEVICE_SYNC, ""), 0);
	CHECK_EQ(k.latched, CUDA_ERROR_INVALID_HANDLE);
	/* streams left alive are the teardown's job (event 10, stream 12) */
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_STREAM_CREATE, "uui", U(12), U(0), I(-1)), 0);
	/* host function: the server asks, the client answers, the stream goes on */
	k.nevents = 0;
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_HOSTFN, "uu", U(12), U(77)), 0);
	rep r;
	uint64_t seq = ++k.seq;
	{
		proto_msg m;
		va_list dummy;
		(void)dummy;
		proto_msg_begin(&m, PROTO_OP_STREAM_SYNC, seq, 1);
		proto_msg_u64(&m, 12);
		CHECK_EQ(sendm(&k, &m, 0, NULL, 0), 0);
	}
	/* the event arrives before the sync can complete; answer it */
	for (int i = 0; i < 100 && k.nevents == 0; i++) {
		transport_frame f;
		if (transport_recv_frame(k.c, &f, dest_cb, NULL))
			break;
		proto_view v;
		if (proto_view_init(&v, &f.hdr, f.msg) == PROTO_OK) {
			uint64_t id = 0;
			if ((f.hdr.flags & PROTO_F_EVENT) && v.op == PROTO_OP_HOSTFN && proto_arg_u64(&v, 0, &id) == 0)
				k.events[k.nevents++] = id;
			proto_view_free(&v);
		}
		transport_frame_free(&f);
	}
	CHECK_EQ(k.nevents, 1);
	CHECK_EQ(k.events[0], 77);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_HOSTFN_DONE, "u", U(77)), 0);
	CHECK_EQ(recv_reply(&k, seq, &r, NULL, 0), 0);
	CHECK_EQ(r.status, 0);
	rep_free(&r);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_HOSTFN_DONE, "u", U(78)), 0); /* nobody waits: logged, ignored */
	/* a host function still blocked when the client goes away */
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_HOSTFN, "uu", U(12), U(79)), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_STREAM_SYNC, "u", U(12)), 0);
	sleep_ms(50);
	cli_close(&k);
	if (CHECK(open_session(&k, s->port) == 0)) {
		CHECK_EQ(wait_baseline(&k), g_baseline);
		cli_close(&k);
	}
}

/* Module load, kernel parameter layouts, launches, globals. Needs the test
 * kernels fatbin (built by tests/fakecuda when nvcc exists). */
static void t_modules(srv *s)
{
	cli k;
	rep r;
	struct stat sb;
	if (!g_fatbin || stat(g_fatbin, &sb) != 0) {
		printf("t_modules: no kernels fatbin, module tests skipped\n");
		return;
	}
	FILE *f = fopen(g_fatbin, "rb");
	size_t n = (size_t)sb.st_size;
	uint8_t *img = malloc(n);
	if (!CHECK(f && fread(img, 1, n, f) == n)) {
		if (f)
			fclose(f);
		free(img);
		return;
	}
	fclose(f);
	char hash[CUBIN_HASH_HEX], bad[CUBIN_HASH_HEX];
	cubin_hash(img, n, hash);
	memcpy(bad, hash, sizeof(bad));
	bad[0] = bad[0] == '0' ? '1' : '0';
	const char *names = "f:1:rgtest_fill_u32\nf:2:mixed\nv:gvar\nf:3:noparams\nf:4:no_such_kernel\nv:ginit\n";

	if (!CHECK(open_session(&k, s->port) == 0))
		goto out;
	/* not cached yet: FILE_NOT_FOUND; then the upload */
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MODULE_LOAD, "ubus", U(1), hash, (size_t)CUBIN_HASH_LEN, U(n), names),
		 CUDA_ERROR_FILE_NOT_FOUND);
	CHECK_EQ(call(&k, NULL, NULL, 0, img, n, PROTO_OP_MODULE_LOAD, "ubus", U(1), bad, (size_t)CUBIN_HASH_LEN, U(n), names),
		 CUDA_ERROR_INVALID_SOURCE); /* bytes that do not hash to the name */
	CHECK_EQ(call(&k, NULL, NULL, 0, img, n, PROTO_OP_MODULE_LOAD, "ubus", U(1), hash, (size_t)CUBIN_HASH_LEN, U(n + 1), names),
		 CUDA_ERROR_INVALID_SOURCE);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MODULE_LOAD, "ubus", U(1), hash, (size_t)32, U(n), names), /* XXH3-128's length */
		 CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MODULE_LOAD, "ubus", U(0), hash, (size_t)CUBIN_HASH_LEN, U(n), names),
		 CUDA_ERROR_INVALID_HANDLE);
	CHECK_EQ(call(&k, NULL, NULL, 0, img, n, PROTO_OP_MODULE_LOAD, "ubus", U(1), hash, (size_t)CUBIN_HASH_LEN, U(n),
		      "f:x:bad\n"), CUDA_ERROR_INVALID_VALUE);
	int st = call(&k, &r, NULL, 0, img, n, PROTO_OP_MODULE_LOAD, "ubus", U(1), hash, (size_t)CUBIN_HASH_LEN, U(n), names);
	CHECK_EQ(st, 0);
	uint64_t gvar = 0, gsize = 0;
	if (st == 0) {
		const msgpack_object *e;
		uint32_t ne;
		if (CHECK(proto_arg_array(&r.v, PROTO_REPLY_FIRST, &e, &ne) == 0 && ne == 6)) {
			/* f:1 rgtest_fill_u32(unsigned *, unsigned, unsigned long long) */
			CHECK(e[0].type == MSGPACK_OBJECT_ARRAY && e[0].via.array.size == 2);
			CHECK(e[0].via.array.ptr[0].via.u64 == 0);
			const msgpack_object_bin *lb = &e[0].via.array.ptr[1].via.bin;
			static const uint8_t want[] = {0, 0, 0, 0, 8, 0, 0, 0, 8, 0, 0, 0, 4, 0, 0, 0,
						       16, 0, 0, 0, 8, 0, 0, 0};
			CHECK(lb->size == sizeof(want) && memcmp(lb->ptr, want, sizeof(want)) == 0);
			/* v:gvar */
			CHECK(e[2].via.array.size == 3 && e[2].via.array.ptr[0].via.u64 == 0);
			gvar = e[2].via.array.ptr[1].via.u64;
			gsize = e[2].via.array.ptr[2].via.u64;
			CHECK_EQ(gsize, 40);
			/* f:3 noparams: an empty layout */
			CHECK(e[3].via.array.ptr[0].via.u64 == 0 && e[3].via.array.ptr[1].via.bin.size == 0);
			/* f:4: not found, the others still resolved */
			CHECK(e[4].via.array.ptr[0].type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
			      e[4].via.array.ptr[0].via.u64 == CUDA_ERROR_NOT_FOUND);
		}
	}
	rep_free(&r);
	/* the module id is taken now */
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MODULE_LOAD, "ubus", U(1), hash, (size_t)CUBIN_HASH_LEN, U(n), ""),
		 CUDA_ERROR_INVALID_HANDLE);
	/* launch rgtest_fill_u32(p, 0x11223344, 1000) */
	uint64_t p = mem_alloc(&k, 4000);
	uint8_t params[24] = {0}, back[4000];
	uint32_t v = 0x11223344;
	uint64_t cnt = 1000;
	memcpy(params, &p, 8);
	memcpy(params + 8, &v, 4);
	memcpy(params + 16, &cnt, 8);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_LAUNCH, "uuuuuuuuubb", U(1), U(4), U(1), U(1), U(256), U(1), U(1), U(0),
		      U(0), params, (size_t)24, NULL, (size_t)0), 0);
	CHECK_EQ(dtoh(&k, back, p, 4000, 0), 0);
	int ok = 1;
	for (int i = 0; i < 1000; i++)
		ok &= memcmp(back + 4 * i, &v, 4) == 0;
	CHECK(ok);
	CHECK_EQ(k.latched, 0);
	/* wrong argument size; an unknown function; a launch attribute with a handle */
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_LAUNCH, "uuuuuuuuubb", U(1), U(1), U(1), U(1), U(1), U(1), U(1), U(0),
		      U(0), params, (size_t)20, NULL, (size_t)0), 0);
	CHECK_EQ(mem_free_bytes(&k) > 0, 1);
	CHECK_EQ(k.latched, CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_LAUNCH, "uuuuuuuuubb", U(99), U(1), U(1), U(1), U(1), U(1), U(1), U(0),
		      U(0), params, (size_t)24, NULL, (size_t)0), 0);
	CHECK_EQ(mem_free_bytes(&k) > 0, 1);
	CHECK_EQ(k.latched, CUDA_ERROR_INVALID_HANDLE);
	CUlaunchAttribute at[2];
	memset(at, 0, sizeof(at));
	at[0].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
	at[0].value.priority = 0;
	at[1].id = CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT;
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_LAUNCH, "uuuuuuuuubb", U(1), U(1), U(1), U(1), U(32), U(1), U(1), U(0),
		      U(0), params, (size_t)24, at, sizeof(at)), 0);
	CHECK_EQ(mem_free_bytes(&k) > 0, 1);
	CHECK_EQ(k.latched, CUDA_ERROR_NOT_SUPPORTED);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_LAUNCH, "uuuuuuuuubb", U(1), U(1), U(1), U(1), U(32), U(1), U(1), U(0),
		      U(0), params, (size_t)24, at, sizeof(at[0])), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_LAUNCH, "uuuuuuuuubb", U(1), U(1), U(1), U(1), U(32), U(1), U(1), U(0),
		      U(0), params, (size_t)24, at, (size_t)5), 0);
	CHECK_EQ(mem_free_bytes(&k) > 0, 1);
	CHECK_EQ(k.latched, CUDA_ERROR_INVALID_VALUE); /* the first launch went, the second did not */
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_LAUNCH, "uuuuuuuuubb", U(3), U(1), U(1), U(1), U(1), U(1), U(1), U(0),
		      U(0), NULL, (size_t)0, NULL, (size_t)0), 0);
	CHECK_EQ(mem_free_bytes(&k) > 0, 1);
	CHECK_EQ(k.latched, 0);
	/* function attributes */
	CHECK_EQ(call(&k, &r, NULL, 0, NULL, 0, PROTO_OP_FUNC_GET_ATTRS, "u", U(1)), 0);
	const void *ab;
	size_t an = 0;
	CHECK(proto_arg_bin(&r.v, PROTO_REPLY_FIRST, &ab, &an) == 0 && an == 4 * CU_FUNC_ATTRIBUTE_MAX);
	rep_free(&r);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_FUNC_GET_ATTRS, "u", U(5)), CUDA_ERROR_INVALID_HANDLE);
	/* a global is a valid copy range, not a freeable allocation */
	if (gvar) {
		uint8_t g[40];
		fill(g, 40, 9);
		CHECK_EQ(htod(&k, gvar, g, 40, 0), 0);
		CHECK_EQ(dtoh(&k, back, gvar, 40, 0), 0);
		CHECK_MEM(g, back, 40);
		CHECK_EQ(dtoh(&k, back, gvar, 41, 0), CUDA_ERROR_INVALID_VALUE);
		CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEM_FREE, "u", gvar), CUDA_ERROR_INVALID_VALUE);
	}
	/* cached now: another id loads without the image, in a new session too */
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MODULE_LOAD, "ubus", U(2), hash, (size_t)CUBIN_HASH_LEN, U(n),
		      "f:11:rgtest_fill_u32"), 0);
	cli_close(&k);
	if (CHECK(open_session(&k, s->port) == 0)) {
		CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MODULE_LOAD, "ubus", U(1), hash, (size_t)CUBIN_HASH_LEN, U(n),
			      "f:1:rgtest_fill_u32"), 0);
		cli_close(&k);
	}
	/* module globals are device memory too: gone with the sessions */
	if (CHECK(open_session(&k, s->port) == 0)) {
		CHECK_EQ(wait_baseline(&k), g_baseline);
		cli_close(&k);
	}
out:
	free(img);
}

static void t_graphs(srv *s)
{
	cli k;
	rep r;
	if (!CHECK(open_session(&k, s->port) == 0))
		return;
	uint64_t p = mem_alloc(&k, 1024);
	uint8_t back[16];
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_MEMSET, "uuuuu", p, U(0), U(1), U(1024), U(0)), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_STREAM_CREATE, "uui", U(3), U(1), I(0)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_DEVICE_SYNC, ""), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_CAPTURE_BEGIN, "uuu", U(3), U(0), U(0)),
		 CUDA_ERROR_INVALID_HANDLE); /* the graph id 0 */
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_CAPTURE_BEGIN, "uuu", U(3), U(0), U(20)), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_MEMSET, "uuuuu", p, U(0x5a), U(1), U(16), U(3)), 0);
	/* the capture's graph has its id already: one dependency, the memset */
	CHECK_EQ(call(&k, &r, NULL, 0, NULL, 0, PROTO_OP_CAPTURE_INFO, "uuu", U(3), U(20), U(8)), 0);
	CHECK_EQ(u64_result(&r, 0), CU_STREAM_CAPTURE_STATUS_ACTIVE);
	CHECK_EQ(u64_result(&r, 2), 1);
	rep_free(&r);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_CAPTURE_INFO, "uuu", U(3), U(21), U(8)),
		 CUDA_ERROR_INVALID_VALUE); /* not the capture's graph */
	/* the capture owns it: no destroy, and the end names it */
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_GRAPH_DESTROY, "u", U(20)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_CAPTURE_END, "uu", U(3), U(21)), CUDA_ERROR_INVALID_HANDLE);
	CHECK_EQ(k.latched, CUDA_ERROR_ILLEGAL_STATE);
	/* a mode out of range; devout is not a request */
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_CAPTURE_MODE, "u", U(7)), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_DEVOUT, "b", "x", (size_t)1), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_STREAM_QUERY, "u", U(0)), 0);
	CHECK_EQ(k.latched, CUDA_ERROR_INVALID_VALUE);
	/* a staging copy into a capturing stream is refused */
	CHECK_EQ(dtoh(&k, back, p, 16, 3), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_CAPTURE_END, "uu", U(3), U(20)), 0);
	CHECK_EQ(call(&k, &r, NULL, 0, NULL, 0, PROTO_OP_GRAPH_NODE_COUNT, "u", U(20)), 0);
	CHECK_EQ(u64_result(&r, 0), 1);
	rep_free(&r);
	CHECK_EQ(dtoh(&k, back, p, 16, 0), 0);
	CHECK(back[0] == 0 && back[15] == 0); /* captured, not run */
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_GRAPH_INSTANTIATE, "uuu", U(30), U(20), U(0)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_GRAPH_INSTANTIATE, "uuu", U(30), U(20), U(0)),
		 CUDA_ERROR_INVALID_HANDLE);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_GRAPH_LAUNCH, "uu", U(30), U(3)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_STREAM_SYNC, "u", U(3)), 0);
	CHECK_EQ(dtoh(&k, back, p, 16, 0), 0);
	CHECK(back[0] == 0x5a && back[15] == 0x5a);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_GRAPH_EXEC_DESTROY, "u", U(30)), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_GRAPH_LAUNCH, "uu", U(30), U(3)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_GRAPH_NODE_COUNT, "u", U(21)), CUDA_ERROR_INVALID_HANDLE);
	CHECK_EQ(k.latched, CUDA_ERROR_INVALID_HANDLE);
	/* a second graph and exec left for the teardown */
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_CAPTURE_BEGIN, "uuu", U(3), U(0), U(20)),
		 CUDA_ERROR_INVALID_HANDLE); /* id in use */
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_CAPTURE_BEGIN, "uuu", U(3), U(0), U(21)), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_MEMSET, "uuuuu", p, U(1), U(1), U(16), U(3)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_CAPTURE_END, "uu", U(3), U(21)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_GRAPH_INSTANTIATE, "uuu", U(31), U(21), U(0)), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_GRAPH_DESTROY, "u", U(20)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_GRAPH_NODE_COUNT, "u", U(20)), CUDA_ERROR_INVALID_HANDLE);
	/* memory pool attributes */
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEMPOOL_SET_ATTR, "uiu", U(0), I(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD),
		      U(1 << 20)), 0);
	CHECK_EQ(call(&k, &r, NULL, 0, NULL, 0, PROTO_OP_MEMPOOL_GET_ATTR, "ui", U(0), I(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)), 0);
	CHECK_EQ(u64_result(&r, 0), 1 << 20);
	rep_free(&r);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEMPOOL_SET_ATTR, "uiu", U(0), I(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD),
		      U(0)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEMPOOL_GET_ATTR, "ui", U(0), I(999)), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEMPOOL_SET_ATTR, "uiu",
		      U(0), I(CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC), U(1ull << 40)), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_MEMPOOL_TRIM, "uu", U(0), U(0)), 0);
	/* a pool of the session's: attributes, an allocation from it, the current
	 * pool; destroyed, its id is stale; another left for the teardown */
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEMPOOL_CREATE, "uuuu", U(0x1880), U(CU_MEM_ALLOCATION_TYPE_PINNED),
		      U(0), U(0)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEMPOOL_CREATE, "uuuu", U(0x1880), U(CU_MEM_ALLOCATION_TYPE_PINNED),
		      U(0), U(0)), CUDA_ERROR_INVALID_VALUE); /* id in use */
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEMPOOL_SET_ATTR, "uiu", U(0x1880),
		      I(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), U(4096)), 0);
	CHECK_EQ(call(&k, &r, NULL, 0, NULL, 0, PROTO_OP_MEMPOOL_GET_ATTR, "ui", U(0x1880), I(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)), 0);
	CHECK_EQ(u64_result(&r, 0), 4096);
	rep_free(&r);
	CHECK_EQ(call(&k, &r, NULL, 0, NULL, 0, PROTO_OP_MEM_ALLOC_POOL, "uuu", U(1000), U(0x1880), U(0)), 0);
	uint64_t pp = u64_result(&r, 0);
	rep_free(&r);
	CHECK_EQ(call(&k, &r, NULL, 0, NULL, 0, PROTO_OP_MEMPOOL_GET_ATTR, "ui", U(0x1880), I(CU_MEMPOOL_ATTR_USED_MEM_CURRENT)), 0);
	CHECK_EQ(u64_result(&r, 0), 1024);
	rep_free(&r);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEMPOOL_SET_CURRENT, "u", U(0x1880)), 0);
	CHECK_EQ(call(&k, &r, NULL, 0, NULL, 0, PROTO_OP_MEMPOOL_GET_CURRENT, ""), 0);
	CHECK_EQ(u64_result(&r, 0), 0x1880);
	rep_free(&r);
	CHECK_EQ(call(&k, &r, NULL, 0, NULL, 0, PROTO_OP_MEMPOOL_GET_ACCESS, "u", U(0x1880)), 0);
	rep_free(&r);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEMPOOL_DESTROY, "u", U(0)), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEMPOOL_DESTROY, "u", U(0x1880)), 0);
	CHECK_EQ(call(&k, &r, NULL, 0, NULL, 0, PROTO_OP_MEMPOOL_GET_CURRENT, ""), 0);
	CHECK_EQ(u64_result(&r, 0), 0); /* back to the default pool */
	rep_free(&r);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEM_FREE, "u", U(pp)), 0); /* still live until freed */
	CHECK_EQ(call(&k, &r, NULL, 0, NULL, 0, PROTO_OP_MEM_ALLOC_POOL, "uuu", U(64), U(0x1880), U(0)),
		 CUDA_ERROR_INVALID_HANDLE);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEMPOOL_SET_CURRENT, "u", U(0x1980)), CUDA_ERROR_INVALID_HANDLE);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEMPOOL_CREATE, "uuuu", U(0x1980), U(CU_MEM_ALLOCATION_TYPE_PINNED),
		      U(0), U(0)), 0);
	CHECK_EQ(call(&k, &r, NULL, 0, NULL, 0, PROTO_OP_MEM_ALLOC_POOL, "uuu", U(4096), U(0x1980), U(0)), 0);
	rep_free(&r);
	cli_close(&k);
	if (CHECK(open_session(&k, s->port) == 0)) {
		CHECK_EQ(wait_baseline(&k), g_baseline);
		cli_close(&k);
	}
}

/* The events k received since nevents was 0: n of them, each of op, with the
 * ids of want in any order. */
static int events_are(cli *k, uint32_t op, const uint64_t *want, int n)
{
	if (k->nevents != n)
		return 0;
	for (int i = 0; i < n; i++) {
		int found = 0;
		for (int j = 0; j < n; j++)
			found |= k->event_ops[j] == op && k->events[j] == want[i];
		if (!found)
			return 0;
	}
	return 1;
}

/* Host nodes: each replay of an exec calls the client (hostfn events, answered
 * at once here); a record goes, and the client is told (hostfn_forget), when the
 * last graph or exec that holds it is destroyed, not before. */
static void t_hostnodes(srv *s)
{
	cli k;
	rep r;
	if (!CHECK(open_session(&k, s->port) == 0))
		return;
	k.auto_done = 1;
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_STREAM_CREATE, "uui", U(4), U(1), I(0)), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_GRAPH_CREATE, "uu", U(40), U(0)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_GRAPH_ADD_HOST, "ubu", U(41), NULL, (size_t)0, U(500)),
		 CUDA_ERROR_INVALID_HANDLE); /* no graph 41 */
	CHECK_EQ(call(&k, &r, NULL, 0, NULL, 0, PROTO_OP_GRAPH_ADD_HOST, "ubu", U(40), NULL, (size_t)0, U(501)), 0);
	uint64_t h1 = u64_result(&r, 0);
	rep_free(&r);
	CHECK_EQ(call(&k, &r, NULL, 0, NULL, 0, PROTO_OP_GRAPH_ADD_HOST, "ubu", U(40), &h1, (size_t)8, U(502)), 0);
	uint64_t h2 = u64_result(&r, 0);
	rep_free(&r);
	CHECK_EQ(call(&k, &r, NULL, 0, NULL, 0, PROTO_OP_GRAPH_HOST_GET, "u", U(h2)), 0);
	CHECK_EQ(u64_result(&r, 0), 502);
	rep_free(&r);
	CHECK_EQ(call(&k, &r, NULL, 0, NULL, 0, PROTO_OP_GRAPH_NODE_TYPE, "u", U(h1)), 0);
	rep_free(&r);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_GRAPH_INSTANTIATE, "uuu", U(42), U(40), U(0)), 0);
	/* the exec's copy of h1 calls 503, then 508 (while its graph, which names the
	 * node, lives); the exec keeps holding 501 and 503 all the same */
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_GRAPH_HOST_SET, "uuu", U(42), U(h1), U(503)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_GRAPH_HOST_SET, "uuu", U(42), U(h1), U(508)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_GRAPH_HOST_SET, "uuu", U(43), U(h1), U(509)),
		 CUDA_ERROR_INVALID_HANDLE); /* no exec 43 */
	k.nevents = 0;
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_GRAPH_DESTROY, "u", U(40)), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_GRAPH_LAUNCH, "uu", U(42), U(4)), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_GRAPH_LAUNCH, "uu", U(42), U(4)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_STREAM_SYNC, "u", U(4)), 0);
	CHECK_EQ(k.latched, 0);
	/* in the graph's order at each replay; the exec holds them: nothing forgotten */
	CHECK_EQ(k.nevents, 4);
	for (int i = 0; i < 4 && i < k.nevents; i++) {
		CHECK_EQ(k.event_ops[i], PROTO_OP_HOSTFN);
		CHECK_EQ(k.events[i], i % 2 ? 502 : 508);
	}
	/* its destroy ends all four */
	k.nevents = 0;
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_GRAPH_EXEC_DESTROY, "u", U(42)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_DEVICE_SYNC, ""), 0);
	CHECK(events_are(&k, PROTO_OP_HOSTFN_FORGET, (const uint64_t[]){501, 502, 503, 508}, 4));
	/* a graph alone: its destroy */
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_GRAPH_CREATE, "uu", U(43), U(0)), 0);
	CHECK_EQ(call(&k, &r, NULL, 0, NULL, 0, PROTO_OP_GRAPH_ADD_HOST, "ubu", U(43), NULL, (size_t)0, U(504)), 0);
	rep_free(&r);
	k.nevents = 0;
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_GRAPH_DESTROY, "u", U(43)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_DEVICE_SYNC, ""), 0);
	CHECK(events_are(&k, PROTO_OP_HOSTFN_FORGET, (const uint64_t[]){504}, 1));
	/* captured: the graph and its exec hold it; the exec outlives the graph */
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_CAPTURE_BEGIN, "uuu", U(4), U(0), U(44)), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_HOSTFN, "uu", U(4), U(505)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_CAPTURE_END, "uu", U(4), U(44)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_GRAPH_INSTANTIATE, "uuu", U(45), U(44), U(0)), 0);
	k.nevents = 0;
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_GRAPH_DESTROY, "u", U(44)), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_GRAPH_LAUNCH, "uu", U(45), U(4)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_STREAM_SYNC, "u", U(4)), 0);
	CHECK(events_are(&k, PROTO_OP_HOSTFN, (const uint64_t[]){505}, 1));
	k.nevents = 0;
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_GRAPH_EXEC_DESTROY, "u", U(45)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_DEVICE_SYNC, ""), 0);
	CHECK(events_are(&k, PROTO_OP_HOSTFN_FORGET, (const uint64_t[]){505}, 1));
	/* a capture that fails: the record goes with it */
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_CAPTURE_BEGIN, "uuu", U(4), U(0), U(46)), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_HOSTFN, "uu", U(4), U(506)), 0);
	CHECK_EQ(call(&k, &r, NULL, 0, NULL, 0, PROTO_OP_MEM_ALLOC, "u", U(64)), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	rep_free(&r);
	k.nevents = 0;
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_CAPTURE_END, "uu", U(4), U(46)),
		 CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
	CHECK(events_are(&k, PROTO_OP_HOSTFN_FORGET, (const uint64_t[]){506}, 1));
	/* hostfn_forget is not a request; a graph and exec left for the teardown */
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_HOSTFN_FORGET, "u", U(1)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_DEVICE_SYNC, ""), 0);
	CHECK_EQ(k.latched, CUDA_ERROR_NOT_SUPPORTED);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_GRAPH_CREATE, "uu", U(47), U(0)), 0);
	CHECK_EQ(call(&k, &r, NULL, 0, NULL, 0, PROTO_OP_GRAPH_ADD_HOST, "ubu", U(47), NULL, (size_t)0, U(507)), 0);
	rep_free(&r);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_GRAPH_INSTANTIATE, "uuu", U(48), U(47), U(0)), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_GRAPH_LAUNCH, "uu", U(48), U(4)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_STREAM_SYNC, "u", U(4)), 0);
	cli_close(&k);
	if (CHECK(open_session(&k, s->port) == 0)) {
		CHECK_EQ(wait_baseline(&k), g_baseline);
		cli_close(&k);
	}
}

/* Frames a well-behaved client never sends. Each ends (at most) its own session. */
static void t_bad_input(srv *s)
{
	cli k, other;
	proto_msg m;
	if (!CHECK(open_session(&other, s->port) == 0))
		return;
	uint64_t keep = mem_alloc(&other, 4096);
	CHECK_EQ(post(&other, NULL, 0, PROTO_OP_MEMSET, "uuuuu", keep, U(7), U(1), U(4096), U(0)), 0);

	/* an op before hello: the connection is closed, unanswered (issue 24) */
	if (CHECK(cli_open(&k, s->port) == 0)) {
		CHECK(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEM_ALLOC, "u", U(16)) < 0);
		CHECK(closed_by_server(&k));
		cli_close(&k);
	}
	/* another protocol version in hello */
	if (CHECK(cli_open(&k, s->port) == 0)) {
		CHECK_EQ(hello(&k, PROTO_VERSION + 1, NULL, NULL), CUDA_ERROR_NOT_SUPPORTED);
		CHECK(closed_by_server(&k));
		cli_close(&k);
	}
	/* unknown ops, sync and async; wrong argument types; missing arguments */
	if (CHECK(open_session(&k, s->port) == 0)) {
		CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, 200, "u", U(1)), CUDA_ERROR_NOT_SUPPORTED);
		CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_REPLY, "u", U(1)), CUDA_ERROR_NOT_SUPPORTED);
		CHECK_EQ(post(&k, NULL, 0, 4000000000u, ""), 0);
		CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEM_ALLOC, "s", "big"), CUDA_ERROR_INVALID_VALUE);
		CHECK_EQ(k.latched, CUDA_ERROR_NOT_SUPPORTED);
		CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEMCPY_DTOH, "u", keep), CUDA_ERROR_INVALID_VALUE);
		CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEM_ALLOC, "i", I(-5)), CUDA_ERROR_INVALID_VALUE);
		CHECK_EQ(post(&k, NULL, 0, PROTO_OP_STREAM_CREATE, "uui", U(1), U(0), I(1ll << 40)), 0);
		CHECK_EQ(mem_free_bytes(&k) > 0, 1);
		CHECK_EQ(k.latched, CUDA_ERROR_INVALID_VALUE); /* async: latched */
		/* payload on an op that takes none: the session ends */
		uint8_t junk[100] = {0};
		CHECK_EQ(post(&k, junk, sizeof(junk), PROTO_OP_MEM_FREE, "u", U(0)), 0);
		CHECK(closed_by_server(&k));
		cli_close(&k);
	}
	/* arguments that are not msgpack */
	if (CHECK(open_session(&k, s->port) == 0)) {
		uint8_t fr[PROTO_HDR_SIZE + 3];
		proto_hdr h = {PROTO_VERSION, 0, 3, 0};
		proto_encode_hdr(&h, fr);
		fr[PROTO_HDR_SIZE] = 0xc1; /* never used in msgpack */
		fr[PROTO_HDR_SIZE + 1] = 0;
		fr[PROTO_HDR_SIZE + 2] = 0;
		struct iovec iov = {fr, sizeof(fr)};
		CHECK_EQ(transport_sendv(k.c, &iov, 1), 0);
		CHECK(closed_by_server(&k));
		cli_close(&k);
	}
	/* a map instead of the array of arguments */
	if (CHECK(open_session(&k, s->port) == 0)) {
		proto_msg_begin(&m, 0, 0, 0);
		m.len = PROTO_HDR_SIZE;
		msgpack_pack_map(proto_msg_packer(&m), 1);
		msgpack_pack_str(proto_msg_packer(&m), 1);
		msgpack_pack_str_body(proto_msg_packer(&m), "x", 1);
		msgpack_pack_nil(proto_msg_packer(&m));
		CHECK_EQ(sendm(&k, &m, 0, NULL, 0), 0);
		CHECK(closed_by_server(&k));
		cli_close(&k);
	}
	/* arrays that claim billions of elements the message does not hold */
	static const uint8_t huge[][8] = {
		{0xdd, 0xff, 0xff, 0xff, 0xff},
		{0x93, 0x01, 0x01, 0xdd, 0x0f, 0xff, 0xff, 0xff},
		{0x94, 0x02, 0x01, 0xdf, 0x7f, 0xff, 0xff, 0xff},
	};
	for (size_t i = 0; i < sizeof(huge) / sizeof(huge[0]); i++) {
		if (!CHECK(open_session(&k, s->port) == 0))
			break;
		uint8_t fr[PROTO_HDR_SIZE + 8];
		proto_hdr h = {PROTO_VERSION, 0, 8, 0};
		proto_encode_hdr(&h, fr);
		memcpy(fr + PROTO_HDR_SIZE, huge[i], 8);
		struct iovec iov = {fr, sizeof(fr)};
		CHECK_EQ(transport_sendv(k.c, &iov, 1), 0);
		CHECK(closed_by_server(&k));
		cli_close(&k);
	}
	/* bad magic; a header announcing more than the limits */
	if (CHECK(open_session(&k, s->port) == 0)) {
		uint8_t fr[PROTO_HDR_SIZE] = "XXXXXXXXXXXXXXXXXXXXXXX";
		struct iovec iov = {fr, sizeof(fr)};
		CHECK_EQ(transport_sendv(k.c, &iov, 1), 0);
		CHECK(closed_by_server(&k));
		cli_close(&k);
	}
	if (CHECK(open_session(&k, s->port) == 0)) {
		uint8_t fr[PROTO_HDR_SIZE];
		proto_hdr h = {PROTO_VERSION, 0, PROTO_MAX_HDR + 1, 0};
		proto_encode_hdr(&h, fr);
		struct iovec iov = {fr, sizeof(fr)};
		CHECK_EQ(transport_sendv(k.c, &iov, 1), 0);
		CHECK(closed_by_server(&k));
		cli_close(&k);
	}
	/* an htod announcing 1 GiB and sending a little: killed mid-payload */
	if (CHECK(open_session(&k, s->port) == 0)) {
		uint64_t p = mem_alloc(&k, 1u << 20);
		uint8_t part[4096] = {1};
		proto_msg_begin(&m, PROTO_OP_MEMCPY_HTOD, ++k.seq, 2);
		proto_msg_u64(&m, p);
		proto_msg_u64(&m, 0);
		proto_msg_finish(&m, PROTO_F_ASYNC, PROTO_MAX_PAYLOAD);
		struct iovec iov[2] = {{m.data, m.len}, {part, sizeof(part)}};
		CHECK_EQ(transport_sendv(k.c, iov, 2), 0);
		proto_msg_free(&m);
		sleep_ms(20);
		cli_close(&k);
	}
	/* a client killed in the middle of a large copy, from a child process */
	pid_t pid = fork();
	if (pid == 0) {
		cli c;
		if (open_session(&c, s->port) != 0)
			_exit(1);
		uint64_t p = mem_alloc(&c, 32u << 20);
		uint8_t *big = calloc(1, 32u << 20);
		htod(&c, p, big, 32u << 20, 0); /* killed during this, probably */
		_exit(0);
	}
	sleep_ms(30);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);

	/* the other session carried on through all of it */
	uint8_t b[16];
	CHECK_EQ(dtoh(&other, b, keep, 16, 0), 0);
	CHECK_EQ(call(&other, NULL, NULL, 0, NULL, 0, PROTO_OP_MEM_FREE, "u", keep), 0);
	CHECK_EQ(wait_baseline(&other), g_baseline);
	cli_close(&other);
	CHECK(srv_alive(s));
}

/* Several clients at once, each with its own memory. */
static int g_port;

static void *client_thread(void *arg)
{
	cli k;
	uint32_t seed = (uint32_t)(uintptr_t)arg;
	const size_t n = 300000;
	uint8_t *a = malloc(n), *b = malloc(n);
	intptr_t bad = 0;

	if (open_session(&k, g_port) != 0)
		bad = 1000;
	for (int i = 0; i < 30 && !bad; i++) {
		uint64_t p = mem_alloc(&k, n);
		fill(a, n, seed + (uint32_t)i);
		bad += !p;
		bad += htod(&k, p, a, n, 0) != 0;
		bad += dtoh(&k, b, p, n, 0) != 0;
		bad += memcmp(a, b, n) != 0;
		bad += call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEM_FREE, "u", p) != 0;
		bad += k.latched != 0;
	}
	cli_close(&k);
	free(a);
	free(b);
	return (void *)bad;
}

static void t_concurrent(srv *s)
{
	pthread_t t[4];
	intptr_t bad = 0;
	g_port = s->port;
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, client_thread, (void *)(uintptr_t)(i * 1000 + 1));
	for (int i = 0; i < 4; i++) {
		void *r;
		pthread_join(t[i], &r);
		bad += (intptr_t)r;
	}
	CHECK_EQ(bad, 0);
}

/* ---- the kernel image store ---- */

static uint8_t *slurp(const char *path, size_t *n)
{
	struct stat sb;
	FILE *f = fopen(path, "rb");
	uint8_t *b = f && fstat(fileno(f), &sb) == 0 ? malloc((size_t)sb.st_size + 1) : NULL;
	if (b && fread(b, 1, (size_t)sb.st_size, f) != (size_t)sb.st_size) {
		free(b);
		b = NULL;
	}
	if (b)
		*n = (size_t)sb.st_size;
	if (f)
		fclose(f);
	return b;
}

/* module_load of image under hash; without the image when img is NULL. */
static int load_image(cli *k, uint64_t id, const char *hash, const void *img, size_t n)
{
	return call(k, NULL, NULL, 0, img, img ? n : 0, PROTO_OP_MODULE_LOAD, "ubus", U(id), hash,
		    (size_t)CUBIN_HASH_LEN, U(n), "");
}

/* As a client loads an image: by hash, and the bytes when the server lacks it. */
static int load_or_upload(cli *k, uint64_t id, const void *img, size_t n)
{
	char h[CUBIN_HASH_HEX];
	cubin_hash(img, n, h);
	int st = load_image(k, id, h, NULL, n);
	return st == CUDA_ERROR_FILE_NOT_FOUND ? load_image(k, id, h, img, n) : st;
}

/* What the store on disk holds under the hash of img: 1 these bytes, 0 nothing,
 * -1 other bytes. */
static int stored(srv *s, const void *img, size_t n)
{
	char h[CUBIN_HASH_HEX], path[256];
	size_t got = 0;
	cubin_hash(img, n, h);
	snprintf(path, sizeof(path), "%s/store/%s.fatbin", s->dir, h);
	uint8_t *b = slurp(path, &got);
	int r = !b ? 0 : got == n && memcmp(b, img, n) == 0 ? 1 : -1;
	free(b);
	return r;
}

/* A .text section of the first cubin in img, at least min bytes: code the driver
 * test double never reads, so changing it keeps the image loadable. */
static int text_section(const uint8_t *img, size_t n, size_t min, size_t *off, size_t *len)
{
	for (size_t e = 0; e + 64 <= n; e++) {
		uint64_t shoff, stroff, so, ss;
		uint16_t shentsize, shnum, shstrndx;
		uint32_t name;
		if (memcmp(img + e, "\x7f" "ELF\x02\x01", 6) != 0)
			continue;
		memcpy(&shoff, img + e + 0x28, 8);
		memcpy(&shentsize, img + e + 0x3a, 2);
		memcpy(&shnum, img + e + 0x3c, 2);
		memcpy(&shstrndx, img + e + 0x3e, 2);
		if (shentsize != 64 || shstrndx >= shnum || shoff > n || (uint64_t)shnum * 64 > n - e - shoff)
			continue;
		const uint8_t *sh = img + e + shoff;
		memcpy(&stroff, sh + (size_t)shstrndx * 64 + 0x18, 8);
		for (unsigned i = 0; i < shnum; i++) {
			memcpy(&name, sh + (size_t)i * 64, 4);
			memcpy(&so, sh + (size_t)i * 64 + 0x18, 8);
			memcpy(&ss, sh + (size_t)i * 64 + 0x20, 8);
			if (stroff + name + 7 < n - e && !strncmp((const char *)img + e + stroff + name, ".text.", 6) &&
			    ss >= min && so + ss <= n - e) {
				*off = e + so;
				*len = ss;
				return 0;
			}
		}
	}
	return -1;
}

/* Two images that XXH3-128, the store's old address, cannot tell apart, built
 * as the attack in issue 24 did. XXH3 adds each 8-byte lane of a 64-byte stripe
 * into one accumulator and the product of the halves of (lane ^ secret) into
 * another. A lane whose low half equals the secret's makes the product 0, so
 * changing the high halves of that lane in two stripes of one block by +d and -d
 * leaves every accumulator, and so the hash, as it was. Both are img with 16
 * bytes of a .text section changed; both load. */
static int xxh3_twins(const uint8_t *img, size_t n, uint8_t *g, uint8_t *p)
{
	size_t off, len, stripe;
	if (text_section(img, n, 192, &off, &len) != 0)
		return -1;
	stripe = (off + 63) / 64;
	if (stripe % 16 == 15) /* both stripes in one block (16 stripes, one secret pass) */
		stripe++;
	if ((stripe + 2) * 64 > off + len || (stripe + 3) * 64 > n)
		return -1;
	memcpy(g, img, n);
	memcpy(p, img, n);
	for (size_t i = 0; i < 2; i++) {
		size_t st = stripe + i;
		uint64_t key, v;
		memcpy(&key, XXH3_kSecret + (st % 16) * 8, 8); /* lane 0's secret in this stripe */
		v = (key & 0xffffffffu) | (uint64_t)(0x1000 + i) << 32;
		memcpy(g + st * 64, &v, 8);
		v = i ? v - (0x77ull << 32) : v + (0x77ull << 32);
		memcpy(p + st * 64, &v, 8);
	}
	return 0;
}

/* The attack of issue 24: an image planted under the address of another. With
 * SHA-256 addresses the two images are two entries; the planted one is never
 * what a session naming the genuine one gets. */
static void t_store_collision(srv *s, const uint8_t *img, size_t n)
{
	uint8_t *g = malloc(n), *p = malloc(n);
	char hg[CUBIN_HASH_HEX], hp[CUBIN_HASH_HEX];
	cli a, b;

	if (!CHECK(g && p && xxh3_twins(img, n, g, p) == 0))
		goto out;
	XXH128_hash_t xg = XXH3_128bits(g, n), xp = XXH3_128bits(p, n);
	CHECK(memcmp(g, p, n) != 0);
	CHECK(XXH128_isEqual(xg, xp)); /* the old scheme gave both one address */
	cubin_hash(g, n, hg);
	cubin_hash(p, n, hp);
	CHECK(strcmp(hg, hp) != 0);
	if (!CHECK(open_session(&a, s->port) == 0))
		goto out;
	CHECK_EQ(load_or_upload(&a, 101, p, n), 0); /* the attacker plants p */
	cli_close(&a);
	CHECK_EQ(stored(s, p, n), 1);
	if (CHECK(open_session(&b, s->port) == 0)) {
		/* the victim names g: the store has nothing under that name */
		CHECK_EQ(load_image(&b, 102, hg, NULL, n), CUDA_ERROR_FILE_NOT_FOUND);
		CHECK_EQ(load_image(&b, 102, hg, g, n), 0);
		cli_close(&b);
	}
	CHECK_EQ(stored(s, g, n), 1);
	CHECK_EQ(stored(s, p, n), 1);
out:
	free(g);
	free(p);
}

/* Uploads that must never reach the store: bytes that are not what they claim,
 * and bytes the driver cannot load. */
static void t_store_junk(srv *s, const uint8_t *img, size_t n)
{
	uint8_t junk[4096];
	char hj[CUBIN_HASH_HEX], hi[CUBIN_HASH_HEX];
	cli a, b;

	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)(i * 131 + 7);
	cubin_hash(junk, sizeof(junk), hj);
	cubin_hash(img, n, hi);
	if (!CHECK(open_session(&a, s->port) == 0))
		return;
	/* junk under its own hash: verified, but it does not load, so not kept */
	CHECK_EQ(load_image(&a, 201, hj, junk, sizeof(junk)), CUDA_ERROR_INVALID_IMAGE);
	/* a loadable image named by the junk's hash: refused before any load */
	CHECK_EQ(load_image(&a, 202, hj, img, n), CUDA_ERROR_INVALID_SOURCE);
	/* the image with one byte changed, named by the image's hash */
	uint8_t *bent = malloc(n);
	if (CHECK(bent != NULL)) {
		memcpy(bent, img, n);
		bent[n / 2] ^= 1;
		CHECK_EQ(load_image(&a, 203, hi, bent, n), CUDA_ERROR_INVALID_SOURCE);
		CHECK_EQ(stored(s, bent, n), 0);
		free(bent);
	}
	CHECK(mem_free_bytes(&a) > 0); /* the session goes on */
	cli_close(&a);
	CHECK_EQ(stored(s, junk, sizeof(junk)), 0);
	if (CHECK(open_session(&b, s->port) == 0)) {
		CHECK_EQ(load_image(&b, 204, hj, NULL, sizeof(junk)), CUDA_ERROR_FILE_NOT_FOUND);
		cli_close(&b);
	}
}

/* --store-quota: an upload past it is refused as out of memory and not kept;
 * junk that failed to load costs nothing; an image already stored is loaded by
 * anyone without counting again. */
static void t_store_quota(const uint8_t *img, size_t n)
{
	uint8_t *g = malloc(n), *p = malloc(n), *junk = malloc(n);
	char quota[32], hg[CUBIN_HASH_HEX];
	srv q;
	cli a, b;

	snprintf(quota, sizeof(quota), "%zu", n + n / 2); /* room for one image */
	if (!CHECK(g && p && junk && xxh3_twins(img, n, g, p) == 0) || !CHECK(srv_start(&q, NULL, quota) == 0))
		goto out;
	memset(junk, 0x5a, n);
	if (CHECK(open_session(&a, q.port) == 0)) {
		CHECK_EQ(load_or_upload(&a, 301, junk, n), CUDA_ERROR_INVALID_IMAGE);
		CHECK_EQ(load_or_upload(&a, 302, g, n), 0);
		CHECK_EQ(load_or_upload(&a, 303, p, n), CUDA_ERROR_OUT_OF_MEMORY);
		CHECK(mem_free_bytes(&a) > 0);
		cli_close(&a);
	}
	CHECK_EQ(stored(&q, g, n), 1);
	CHECK_EQ(stored(&q, p, n), 0);
	cubin_hash(g, n, hg);
	if (CHECK(open_session(&b, q.port) == 0)) {
		CHECK_EQ(load_image(&b, 304, hg, NULL, n), 0);
		cli_close(&b);
	}
	CHECK_EQ(srv_stop(&q), 0);
	CHECK_EQ(srv_start(&q, NULL, "0") == 0, 1); /* no uploads at all */
	if (CHECK(open_session(&a, q.port) == 0)) {
		CHECK_EQ(load_or_upload(&a, 305, img, n), CUDA_ERROR_OUT_OF_MEMORY);
		cli_close(&a);
	}
	CHECK_EQ(stored(&q, img, n), 0);
	CHECK_EQ(srv_stop(&q), 0);
out:
	free(g);
	free(p);
	free(junk);
}

static void t_store(srv *s)
{
	size_t n = 0;
	uint8_t *img = g_fatbin ? slurp(g_fatbin, &n) : NULL;
	if (!img) {
		printf("t_store: no kernels fatbin, store tests skipped\n");
		return;
	}
	t_store_collision(s, img, n);
	t_store_junk(s, img, n);
	t_store_quota(img, n);
	free(img);
}

static void t_token(void)
{
	srv s2;
	cli k;
	if (!CHECK(srv_start(&s2, "s3cret", NULL) == 0))
		return;
	if (CHECK(cli_open(&k, s2.port) == 0)) {
		CHECK_EQ(hello(&k, PROTO_VERSION, "wrong", NULL), CUDA_ERROR_NOT_PERMITTED);
		CHECK(closed_by_server(&k));
		cli_close(&k);
	}
	/* the source is in back-off (250 ms after one wrong token): closed
	 * unanswered, once the supervisor has learnt of the failure from the
	 * session process's exit */
	int r = 0;
	for (int i = 0; i < 100 && r >= 0; i++) {
		if (!CHECK(cli_open(&k, s2.port) == 0))
			break;
		r = hello(&k, PROTO_VERSION, "s3cret", NULL);
		cli_close(&k);
		if (r >= 0)
			sleep_ms(5);
	}
	CHECK(r < 0);
	sleep_ms(400);
	if (CHECK(cli_open(&k, s2.port) == 0)) {
		CHECK_EQ(hello(&k, PROTO_VERSION, NULL, NULL), CUDA_ERROR_NOT_PERMITTED);
		cli_close(&k);
	}
	sleep_ms(1000); /* the second back-off: 500 ms */
	if (CHECK(cli_open(&k, s2.port) == 0)) {
		CHECK_EQ(hello(&k, PROTO_VERSION, "s3cret", NULL), 0);
		CHECK(mem_free_bytes(&k) > 0);
		/* shutdown with a session open */
		CHECK_EQ(srv_stop(&s2), 0);
		CHECK(closed_by_server(&k));
		cli_close(&k);
	}
}

int main(int argc, char **argv)
{
	srv s;

	if (argc < 3) {
		fprintf(stderr, "usage: test_client SERVER_BINARY FAKE_DRIVER [KERNELS_FATBIN]\n");
		return 2;
	}
	g_server = argv[1];
	g_driver = argv[2];
	g_fatbin = argc > 3 ? argv[3] : NULL;
	signal(SIGPIPE, SIG_IGN);
	if (!CHECK(srv_start(&s, NULL, NULL) == 0))
		return check_summary("test_client");

	t_hello(&s);
	t_copies(&s);
	t_range_errors(&s);
	t_big(&s);
	t_stripes(&s);
	t_streams_events(&s);
	t_modules(&s);
	t_store(&s);
	t_graphs(&s);
	t_hostnodes(&s);
	t_bad_input(&s);
	t_concurrent(&s);
	CHECK(srv_alive(&s));
	CHECK_EQ(srv_stop(&s), 0);
	t_token();
	return check_summary("test_client");
}
