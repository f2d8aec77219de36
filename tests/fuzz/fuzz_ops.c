/*
 * libFuzzer target for the server's request handlers: each input is one or more
 * request frames as they travel (40-byte header, msgpack part, payload), fed
 * through the backend's own transport callbacks (be_frame_ok, be_payload_dest,
 * be_on_frame), so they are decoded, dispatched and run exactly as remote-gpud
 * runs them: loop ops and quick ops on this thread (the harness is the loop
 * thread), the rest on the session's real executor thread, replies of
 * synchronising calls from its waiter thread, all against the driver test double
 * (tests/fakecuda), loaded with dlopen as remote-gpud loads a driver.
 *
 * One authenticated session lives across the inputs of a run, so allocations,
 * streams, events, modules and graphs made by earlier inputs are there: the
 * handlers see live, stale and made-up handles. The session is ended and a new
 * one opened when the backend refuses the connection (a malformed frame) and
 * every FUZZ_OPS_SESSION_INPUTS inputs; each end runs the real teardown, after
 * which the device's memory must all be free again (a handler that leaked an
 * allocation outside the session's tables fails here), and at exit
 * LeakSanitizer sees whatever the backend lost.
 *
 * The connection is a transport of our own: replies are checked to be valid
 * frames and dropped; a host function's event frame is answered with
 * hostfn_done, as a client does, so launches of host functions complete.
 * After each frame the harness waits until the executor and the waiter are
 * idle, so an input replays the same way each time.
 */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "backend.h"
#include "proto.h"

#define FUZZ_TOKEN "fuzz-token"
#define FUZZ_OPS_SESSION_INPUTS 4000 /* inputs per session before a fresh one */
#define FUZZ_OPS_MAX_FRAMES 256      /* frames of one input that are run */
#define FUZZ_HOSTFN_MAX 64

static void fuzz_conn_shutdown(transport_conn *c);

/* ---- the connection ---- */

typedef struct fuzz_conn {
	transport_conn c; /* first: transport_conn * and fuzz_conn * convert */
	pthread_mutex_t mu;
	int shut;               /* be_session_reject shut it down */
	int hello_status;       /* status of the hello's reply; -1 before */
	uint64_t hostfn[FUZZ_HOSTFN_MAX]; /* host functions waiting for hostfn_done */
	unsigned nhostfn;
} fuzz_conn;

/* The server's settings: main.c's in remote-gpud, this program's here. */
be_server be_srv;

static uv_loop_t loop;
static be_session *sess;
static fuzz_conn *conn;
static unsigned inputs_in_session;

/* Every frame the server sends must be one a client can decode. */
static int fuzz_conn_sendv(transport_conn *c, const struct iovec *iov, int iovcnt)
{
	fuzz_conn *fc = (fuzz_conn *)c;
	proto_hdr h;
	proto_view v;

	if (iovcnt < 1 || iov[0].iov_len < PROTO_HDR_SIZE)
		__builtin_trap();
	if (proto_decode_hdr(iov[0].iov_base, &h) != PROTO_OK || iov[0].iov_len != PROTO_HDR_SIZE + h.hdr_len)
		__builtin_trap();
	size_t payload = iovcnt > 1 ? iov[1].iov_len : 0;
	if (payload != h.payload_len)
		__builtin_trap();
	if (proto_view_init(&v, &h, h.hdr_len ? (const uint8_t *)iov[0].iov_base + PROTO_HDR_SIZE : NULL) !=
	    PROTO_OK)
		__builtin_trap();
	pthread_mutex_lock(&fc->mu);
	if (fc->shut) {
		pthread_mutex_unlock(&fc->mu);
		proto_view_free(&v);
		return TRANSPORT_ECLOSED;
	}
	if ((h.flags & PROTO_F_EVENT) && h.op == PROTO_OP_HOSTFN) {
		uint64_t id;
		if (proto_arg_u64(&v, 0, &id) == PROTO_OK && fc->nhostfn < FUZZ_HOSTFN_MAX)
			fc->hostfn[fc->nhostfn++] = id;
	} else if ((h.flags & PROTO_F_REPLY) && h.seq == 1 && fc->hello_status < 0) {
		fc->hello_status = h.status;
	}
	pthread_mutex_unlock(&fc->mu);
	proto_view_free(&v);
	return 0;
}

static int fuzz_conn_recv(transport_conn *c, transport_frame *f, transport_payload_dest_fn dest, void *ctx)
{
	return TRANSPORT_ECLOSED; /* the server side never receives this way */
}

static int fuzz_conn_reg(transport_conn *c, void *addr, size_t len, transport_mr **out)
{
	*out = NULL; /* as tcp: nothing to register */
	return 0;
}

static int fuzz_conn_dereg(transport_conn *c, transport_mr *mr) { return 0; }

static void fuzz_conn_shutdown(transport_conn *c)
{
	fuzz_conn *fc = (fuzz_conn *)c;
	pthread_mutex_lock(&fc->mu);
	fc->shut = 1;
	pthread_mutex_unlock(&fc->mu);
}

static void fuzz_conn_close(transport_conn *c)
{
	fuzz_conn *fc = (fuzz_conn *)c;
	pthread_mutex_destroy(&fc->mu);
	free(fc);
}

static const transport_ops fuzz_conn_ops = {
	.scheme = "fuzz",
	.sendv = fuzz_conn_sendv,
	.recv_frame = fuzz_conn_recv,
	.reg_mem = fuzz_conn_reg,
	.dereg_mem = fuzz_conn_dereg,
	.shutdown = fuzz_conn_shutdown,
	.close = fuzz_conn_close,
};

/* ---- feeding frames, as the transport does ---- */

/* One frame: header h, msgpack part msg (copied: the session owns its frames),
 * payload of h.payload_len bytes. 0, or -1 once the session refused it. */
static int fuzz_frame_feed(const proto_hdr *h, const uint8_t *msg, const uint8_t *payload)
{
	transport_frame f = {.hdr = *h};

	if (!be_frame_ok(sess, h))
		return -1;
	if (h->hdr_len) {
		if (!(f.msg = malloc(h->hdr_len)))
			abort();
		memcpy(f.msg, msg, h->hdr_len);
	}
	if (h->payload_len) {
		void *dest = be_payload_dest(sess, &f);
		if (dest)
			memcpy(dest, payload, h->payload_len);
		f.payload = dest;
	}
	be_on_frame(sess, &f);
	return 0;
}

/* A request made here (hello, hostfn_done). */
static void fuzz_request(proto_msg *m, uint16_t flags)
{
	proto_hdr h;
	if (proto_msg_finish(m, flags, 0) != PROTO_OK || proto_decode_hdr(m->data, &h) != PROTO_OK)
		abort();
	fuzz_frame_feed(&h, m->data + PROTO_HDR_SIZE, NULL);
	proto_msg_free(m);
}

/* Until the executor and the waiter have nothing in hand, answering host
 * functions that reached their stream as a client would. */
static void fuzz_wait_idle(void)
{
	for (;;) {
		uint64_t ids[FUZZ_HOSTFN_MAX];
		unsigned n;
		pthread_mutex_lock(&conn->mu);
		n = conn->nhostfn;
		memcpy(ids, conn->hostfn, n * sizeof(ids[0]));
		conn->nhostfn = 0;
		pthread_mutex_unlock(&conn->mu);
		for (unsigned i = 0; i < n; i++) {
			proto_msg m;
			proto_msg_begin(&m, PROTO_OP_HOSTFN_DONE, 0, 1);
			proto_msg_u64(&m, ids[i]);
			fuzz_request(&m, PROTO_F_ASYNC);
		}
		if (!n && be_executor_idle(sess) && be_waiter_idle(sess))
			return;
		sched_yield();
	}
}

/* ---- the session ---- */

/* Fresh devices must show all their memory free once a session is gone. */
static void fuzz_check_memory(void)
{
	for (int g = 0; g < be_srv.ngpu; g++) {
		CUcontext ctx;
		size_t free_b = 0, total_b = 0;
		if (be_drv.cuCtxCreate(&ctx, NULL, 0, be_srv.gpu[g].dev) != CUDA_SUCCESS)
			abort();
		if (be_drv.cuMemGetInfo(&free_b, &total_b) != CUDA_SUCCESS)
			abort();
		be_drv.cuCtxDestroy(ctx);
		if (free_b != total_b) {
			fprintf(stderr,
				"fuzz_ops: %zu bytes of device %d's memory still allocated after the session ended\n",
				total_b - free_b, g);
			/* Fatal: a leak here outlives the session in a long-running
			 * server. corpus_ops/regress_vmm_sticky is the first one found
			 * (VMM memory of a context with a sticky error). */
			__builtin_trap();
		}
	}
}

static void fuzz_session_open(void)
{
	conn = calloc(1, sizeof(*conn));
	if (!conn)
		abort();
	conn->c.ops = &fuzz_conn_ops;
	snprintf(conn->c.peer, sizeof(conn->c.peer), "fuzz:1");
	pthread_mutex_init(&conn->mu, NULL);
	conn->hello_status = -1;
	sess = be_on_accept(&loop, &conn->c);
	if (!sess)
		abort();
	proto_msg m;
	proto_msg_begin(&m, PROTO_OP_HELLO, 1, 5);
	proto_msg_u64(&m, PROTO_VERSION);
	proto_msg_str(&m, FUZZ_TOKEN);
	proto_msg_u64(&m, (uint64_t)getpid());
	proto_msg_str(&m, "fuzz-host");
	proto_msg_str(&m, "fuzz_ops");
	fuzz_request(&m, 0);
	fuzz_wait_idle();
	if (conn->hello_status != 0) {
		fprintf(stderr, "fuzz_ops: hello failed (%d)\n", conn->hello_status);
		abort();
	}
	inputs_in_session = 0;
}

/* As the transport ends a connection: on_close, then the loop runs until the
 * executor's teardown is done and the session is freed. */
static void fuzz_session_close(void)
{
	if (!sess)
		return;
	be_on_close(sess, 0);
	while (be_sessions_live() > 0)
		uv_run(&loop, UV_RUN_ONCE);
	sess = NULL;
	conn = NULL; /* freed by transport_close in on_done */
	fuzz_check_memory();
}

/* The devices' identity, as main.c's device_info fills it for the hello. */
static void fuzz_server_init(void)
{
	/* Two devices, as --device all serves them: a frame may name either
	 * (or one the server lacks). */
	setenv("FAKECUDA_DEVICES", "2", 1);
	be_hostfn_set_capture(be_hostnode_capture); /* as main.c registers them */
	be_graph_set_watch(&(be_graph_watch){be_hostnode_merge, be_hostnode_drop});
	if (be_driver_load(FUZZ_FAKECUDA) != 0 || be_drv.cuInit(0) != CUDA_SUCCESS) {
		fprintf(stderr, "fuzz_ops: cannot load the driver test double %s\n", FUZZ_FAKECUDA);
		abort();
	}
	be_drv.cuDriverGetVersion(&be_srv.driver_version);
	be_srv.ngpu = 2;
	for (int g = 0; g < be_srv.ngpu; g++) {
		be_gpu *d = &be_srv.gpu[g];
		d->ordinal = g;
		if (be_drv.cuDeviceGet(&d->dev, g) != CUDA_SUCCESS)
			abort();
		be_drv.cuDeviceGetName(d->name, sizeof(d->name) - 1, d->dev);
		be_drv.cuDeviceTotalMem(&d->total_mem, d->dev);
		for (int i = 1; i < CU_DEVICE_ATTRIBUTE_MAX; i++)
			be_drv.cuDeviceGetAttribute(&d->attrs[i], (CUdevice_attribute)i, d->dev);
	}
	be_srv.gpu[0].peers = 2, be_srv.gpu[1].peers = 1;
	be_srv.token = FUZZ_TOKEN;
	be_srv.store_quota = 64u << 20;
	char dir[] = "/tmp/fuzz_ops_store.XXXXXX";
	static char store[sizeof(dir)];
	if (!mkdtemp(dir) || be_imgcache_open_store(memcpy(store, dir, sizeof(dir))) != 0)
		abort();
}

static void fuzz_at_exit(void) { fuzz_session_close(); }

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	/* Bounded device memory: allocations are host memory in the test double,
	 * and the fuzzer runs with an RSS limit. */
	setenv("FAKECUDA_MEM_BYTES", "256m", 1);
	/* NCCL's handlers on its test double, which never waits (lib.c reads it) */
	setenv("REMOTE_GPU_NCCL", FUZZ_FAKENCCL, 1);
	if (!getenv("REMOTE_GPU_LOG"))
		setenv("REMOTE_GPU_LOG", "error", 1);
	rg_log_init("fuzz_ops");
	if (uv_loop_init(&loop) != 0)
		abort();
	fuzz_server_init();
	fuzz_session_open();
	atexit(fuzz_at_exit); /* before LeakSanitizer's own exit check, which was registered first */
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int refused = 0;

	for (int n = 0; n < FUZZ_OPS_MAX_FRAMES && size >= PROTO_HDR_SIZE && !refused; n++) {
		proto_hdr h;
		if (proto_decode_hdr(data, &h) != PROTO_OK)
			break;
		uint64_t len = PROTO_HDR_SIZE + (uint64_t)h.hdr_len + h.payload_len;
		if (len > size)
			break; /* a frame cut short never reaches on_frame */
		refused = fuzz_frame_feed(&h, data + PROTO_HDR_SIZE, data + PROTO_HDR_SIZE + h.hdr_len) != 0;
		fuzz_wait_idle();
		pthread_mutex_lock(&conn->mu);
		refused |= conn->shut;
		pthread_mutex_unlock(&conn->mu);
		data += len;
		size -= len;
	}
	if (refused || ++inputs_in_session >= FUZZ_OPS_SESSION_INPUTS) {
		fuzz_session_close();
		fuzz_session_open();
	}
	return 0;
}
