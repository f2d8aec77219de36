/*
 * The shm transport alone (transport/shm/shm_*.c), the baseline of remote runs
 * over shm:// as the TCP loopback is for tcp://: a listener on a libuv loop in
 * a thread of this process and a client connection, exactly the provider
 * libremote.so and remote-gpud use, with nothing of CUDA around it.
 *
 *   ping-pong: a 64 B frame there and a 64 B frame back, timed one by one;
 *   stream: frames of each copy size (40 B header + payload, received into one
 *           destination buffer as remote-gpud receives into staging), back to
 *           back with the last one acknowledged, and acknowledged one by one
 *           ("acked": the shape of a synchronous copy).
 *
 * The peer is a thread of this process, so it shares the host's cores as
 * remote-gpud and its client do.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "transport_server.h"

#define PING_BYTES 64
enum { OP_PING = 1, OP_DATA = 2, OP_DATA_ACK = 3 };

static struct {
	uv_loop_t loop;
	pthread_t thread;
	transport_listener *l;
	uint8_t *dest;
	size_t dest_len;
	char dir[64], path[128];
} P;

static void *on_accept(void *ctx, transport_conn *c) { return c; }

static void *payload_dest(void *ctx, const transport_frame *f)
{
	return f->hdr.payload_len <= P.dest_len ? P.dest : NULL;
}

/* Replies from the loop thread: the client reads them at once. */
static void on_frame(void *ctx, transport_frame *f)
{
	transport_conn *c = ctx;
	if (f->hdr.op != OP_DATA) {
		uint8_t hb[PROTO_HDR_SIZE];
		proto_hdr h = {.version = PROTO_VERSION, .flags = PROTO_F_REPLY, .op = f->hdr.op, .seq = f->hdr.seq,
			       .payload_len = f->hdr.op == OP_PING ? f->hdr.payload_len : 0};
		proto_encode_hdr(&h, hb);
		struct iovec iov[2] = {{hb, sizeof(hb)}, {P.dest, (size_t)h.payload_len}};
		transport_sendv(c, iov, 2);
	}
	transport_frame_free(f);
}

static void on_close(void *ctx, int err) { transport_close(ctx); }

static const transport_server_cb cb = {
	.on_accept = on_accept, .payload_dest = payload_dest, .on_frame = on_frame, .on_close = on_close};

static void *loop_main(void *arg)
{
	uv_run(&P.loop, UV_RUN_DEFAULT);
	return NULL;
}

static int peer_start(size_t max, transport_conn **c)
{
	transport_addr a;
	char s[160];
	const char *tmp = getenv("TMPDIR");
	snprintf(P.dir, sizeof(P.dir), "%s/rg-bench-shm.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(P.dir))
		return -1;
	snprintf(P.path, sizeof(P.path), "%s/sock", P.dir);
	snprintf(s, sizeof(s), "shm://%s", P.path);
	P.dest_len = max > PING_BYTES ? max : PING_BYTES;
	P.dest = malloc(P.dest_len);
	if (!P.dest || transport_parse_addr(s, &a) != TRANSPORT_OK)
		return -1;
	memset(P.dest, 0x3c, P.dest_len);
	uv_loop_init(&P.loop);
	if (transport_listen(&P.loop, &a, &cb, NULL, &P.l) != TRANSPORT_OK)
		return -1;
	pthread_create(&P.thread, NULL, loop_main, NULL);
	return transport_connect_within(&a, 5000, c) == TRANSPORT_OK ? 0 : -1;
}

static void peer_stop(transport_conn *c)
{
	if (c)
		transport_close(c);
	if (P.l) {
		transport_listener_close(P.l);
		pthread_join(P.thread, NULL);
		uv_loop_close(&P.loop);
		P.l = NULL;
	}
	rmdir(P.dir);
	free(P.dest);
	P.dest = NULL;
}

static void *recv_dest(void *ctx, const transport_frame *f) { return ctx; }

struct shm_ctx {
	transport_conn *c;
	uint8_t *buf, *back;
	uint64_t seq;
};

static int send_one(struct shm_ctx *x, int op, size_t bytes)
{
	uint8_t hb[PROTO_HDR_SIZE];
	proto_hdr h = {.version = PROTO_VERSION, .op = (uint32_t)op, .seq = ++x->seq, .payload_len = bytes};
	proto_encode_hdr(&h, hb);
	struct iovec iov[2] = {{hb, sizeof(hb)}, {x->buf, bytes}};
	return transport_sendv(x->c, iov, 2);
}

static int recv_one(struct shm_ctx *x)
{
	transport_frame f;
	int r = transport_recv_frame(x->c, &f, recv_dest, x->back);
	if (r == 0)
		transport_frame_free(&f);
	return r;
}

static int send_acked(void *arg, size_t bytes)
{
	struct shm_ctx *x = arg;
	return send_one(x, OP_DATA_ACK, bytes) || recv_one(x) ? -1 : 0;
}

static double send_stream(struct shm_ctx *x, size_t bytes, double min_time, long *n)
{
	uint64_t t0 = bench_now_ns(), limit = (uint64_t)(min_time * 1e9);
	int last = 0;
	for (*n = 0; !last; ++*n) {
		last = *n >= 4 && (bench_now_ns() - t0 >= limit || *n >= 10000000);
		if (send_one(x, last ? OP_DATA_ACK : OP_DATA, bytes) != 0)
			return -1;
	}
	if (recv_one(x) != 0)
		return -1;
	return (double)(bench_now_ns() - t0) * 1e-9;
}

int shm_bench(const struct bench_opts *o, struct json *j)
{
	struct shm_ctx x = {0};
	struct samples s;
	char name[32];
	int rc = 0, warm = o->rtt_iters / 10 + 10;

	x.buf = malloc(o->max_size > PING_BYTES ? o->max_size : PING_BYTES);
	x.back = malloc(PING_BYTES);
	if (!x.buf || !x.back || peer_start(o->max_size, &x.c) != 0) {
		fprintf(stderr, "remote-bench: shm: cannot set up the transport\n");
		json_str(j, "shm_pingpong_error", "no shm transport (see stderr)");
		peer_stop(x.c);
		free(x.buf);
		free(x.back);
		return -1;
	}
	memset(x.buf, 0xa5, o->max_size > PING_BYTES ? o->max_size : PING_BYTES);

	samples_init(&s, (size_t)o->rtt_iters);
	for (int i = 0; i < warm + o->rtt_iters && rc == 0; i++) {
		uint64_t t0 = bench_now_ns();
		if (send_one(&x, OP_PING, PING_BYTES) != 0 || recv_one(&x) != 0)
			rc = -1;
		else if (i >= warm)
			samples_add(&s, (double)(bench_now_ns() - t0) * 1e-9);
	}
	struct summary r = samples_summary(&s);
	samples_free(&s);
	if (rc == 0) {
		printf("\n== shm transport ping-pong (%d B each way, %zu round trips) ==\n", PING_BYTES, r.n);
		printf("  median %8.2f us   p99 %8.2f us   min %8.2f us   mean %8.2f us\n", r.median * 1e6,
		       r.p99 * 1e6, r.min * 1e6, r.mean * 1e6);
		json_open(j, "shm_pingpong", '{');
		json_int(j, "msg_bytes", PING_BYTES);
		json_summary_us(j, &r);
		json_close(j, '}');
	} else {
		json_str(j, "shm_pingpong_error", "failed (see stderr)");
	}
	bench_checkpoint(o, j);

	printf("\n== shm transport stream (GB/s = 1e9 B/s; 40 B header + payload per frame) ==\n");
	printf("  %-9s %12s %12s %14s\n", "size", "stream", "acked", "acked median");
	json_open(j, "shm_stream", '[');
	for (size_t sz = o->min_size; rc == 0 && sz <= o->max_size; sz *= (size_t)o->step) {
		struct summary acked;
		long n;
		double t;
		if (measure_xfer(send_acked, &x, sz, o->min_time, &acked) != 0 ||
		    (t = send_stream(&x, sz, o->min_time, &n)) < 0) {
			fprintf(stderr, "remote-bench: shm stream failed at %zu B\n", sz);
			rc = -1;
			break;
		}
		double stream = gbps(sz * (size_t)n, t), ack = gbps(sz, acked.median);
		printf("  %-9s %12.2f %12.2f %11.1f us\n", size_name(sz, name, sizeof(name)), stream, ack,
		       acked.median * 1e6);
		fflush(stdout);
		json_open(j, NULL, '{');
		json_int(j, "bytes", (long long)sz);
		json_num(j, "stream_gbps", stream);
		json_int(j, "stream_msgs", n);
		json_num(j, "acked_gbps", ack);
		json_num(j, "acked_mean_gbps", gbps(sz, acked.mean));
		json_summary_us(j, &acked);
		json_close(j, '}');
		if (sz > o->max_size / (size_t)o->step)
			break;
	}
	json_close(j, ']');
	if (rc)
		json_str(j, "shm_stream_error", "failed (see stderr)");
	peer_stop(x.c);
	free(x.buf);
	free(x.back);
	return rc;
}
