/*
 * rdma-pingpong: the transport alone, without backend or frontend, beside
 * perftest in bench/rdma/run.sh. One program, two roles:
 *
 *   rdma-pingpong server ADDR                 prints the port, echoes frames
 *   rdma-pingpong client ADDR:PORT [options]  measures, prints one line per result
 *
 * ADDR is [rdma://|tcp://]host[:port]. The server answers each frame that asks
 * for it (op ECHO) from its loop thread, with a payload of the asked size, so a
 * round trip here is the transport's own (no executor hand-off as in
 * remote-gpud). The client measures:
 *
 *   rtt        N round trips of a 64-byte frame, sent and received on one
 *              thread: median, p99, min (us)
 *   h2d SIZE   frames of SIZE bytes back to back (no replies), then one echo:
 *              bytes / time, from pageable and from registered memory, into
 *              a registered destination on the server
 *   d2h SIZE   the server sends frames of SIZE back (one request each, 8 in
 *              flight), into pageable and registered client memory
 *
 * Output lines are "key value" pairs that bench/rdma/report.py reads.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_clock.h"
#include "transport_int.h"

enum { OP_DATA = 1, OP_ECHO = 2, OP_PULL = 3 };

static int send_msg(transport_conn *c, uint32_t op, uint64_t seq, uint64_t arg, const void *p, size_t n)
{
	proto_msg m;
	proto_msg_begin(&m, op, seq, 1);
	proto_msg_u64(&m, arg);
	int r = proto_msg_finish(&m, 0, n);
	if (!r) {
		struct iovec iov[2] = {{m.data, m.len}, {(void *)p, n}};
		r = transport_sendv(c, iov, n ? 2 : 1);
	}
	proto_msg_free(&m);
	return r;
}

/* ---- server ---- */

typedef struct sconn {
	transport_conn *c;
	uint8_t *buf; /* registered landing place for payloads, and the source of replies */
	size_t cap;
	transport_mr *mr;
} sconn;

static void *s_accept(void *ctx, transport_conn *c)
{
	sconn *s = calloc(1, sizeof(*s));
	s->c = c;
	s->cap = 64u << 20;
	if (posix_memalign((void **)&s->buf, 4096, s->cap) != 0)
		return NULL;
	memset(s->buf, 1, s->cap);
	if (c->ops->reg_mem(c, s->buf, s->cap, &s->mr) != 0)
		s->mr = NULL;
	return s;
}

static void *s_dest(void *ctx, const transport_frame *f)
{
	sconn *s = ctx;
	return f->hdr.payload_len <= s->cap ? s->buf : NULL;
}

static void s_frame(void *ctx, transport_frame *f)
{
	sconn *s = ctx;
	proto_view v;
	uint64_t arg = 0;
	if (proto_view_init(&v, &f->hdr, f->msg) == PROTO_OK) {
		proto_arg_u64(&v, 0, &arg);
		if (v.op == OP_ECHO || v.op == OP_PULL)
			send_msg(s->c, v.op, v.seq, 0, s->buf, arg <= s->cap ? (size_t)arg : 0);
	}
	proto_view_free(&v);
	transport_frame_free(f);
}

static void s_close(void *ctx, int err)
{
	sconn *s = ctx;
	if (s->mr)
		s->c->ops->dereg_mem(s->c, s->mr);
	transport_close(s->c);
	free(s->buf);
	free(s);
}

static int server(const char *spec)
{
	static const transport_server_cb cb = {s_accept, s_dest, s_frame, s_close};
	uv_loop_t loop;
	transport_addr a;
	transport_listener *l;
	uv_loop_init(&loop);
	if (transport_parse_addr(spec, &a) || transport_listen(&loop, &a, &cb, NULL, &l) != 0)
		return 1;
	printf("%d\n", transport_listener_port(l));
	fflush(stdout);
	uv_run(&loop, UV_RUN_DEFAULT);
	return 0;
}

/* ---- client ---- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void *dest_buf;
static void *c_dest(void *ctx, const transport_frame *f) { return dest_buf; }

static int recv_one(transport_conn *c)
{
	transport_frame f;
	int r = transport_recv_frame(c, &f, c_dest, NULL);
	if (!r)
		transport_frame_free(&f);
	return r;
}

static int rtt(transport_conn *c, int n)
{
	uint64_t *t = malloc(sizeof(uint64_t) * (size_t)n);
	uint8_t p[64] = {0};
	dest_buf = malloc(64);
	for (int i = -n / 10; i < n; i++) { /* a tenth as warm-up */
		uint64_t t0 = bench_now_ns();
		if (send_msg(c, OP_ECHO, (uint64_t)i, 64, p, 64) || recv_one(c))
			return 1;
		if (i >= 0)
			t[i] = bench_now_ns() - t0;
	}
	qsort(t, (size_t)n, sizeof(*t), cmp_u64);
	printf("rtt_us median %.2f p99 %.2f min %.2f n %d\n", t[n / 2] / 1e3, t[n * 99 / 100] / 1e3, t[0] / 1e3, n);
	free(t);
	free(dest_buf);
	return 0;
}

/* Back-to-back frames of size n for at least sec seconds, then an echo. */
static int h2d(transport_conn *c, size_t n, void *src, const char *kind, double sec)
{
	uint64_t t0 = bench_now_ns(), bytes = 0;
	dest_buf = malloc(64);
	do {
		for (int k = 0; k < 8; k++) {
			if (send_msg(c, OP_DATA, 0, 0, src, n))
				return 1;
			bytes += n;
		}
	} while ((bench_now_ns() - t0) / 1e9 < sec);
	if (send_msg(c, OP_ECHO, 0, 0, NULL, 0) || recv_one(c))
		return 1;
	double dt = (bench_now_ns() - t0) / 1e9;
	printf("h2d %s size %zu MBps %.2f\n", kind, n, bytes / dt / 1e6);
	free(dest_buf);
	return 0;
}

/* The server sends frames of size n; 8 requests in flight. */
static int d2h(transport_conn *c, size_t n, void *dst, const char *kind, double sec)
{
	uint64_t t0 = bench_now_ns(), bytes = 0;
	int inflight = 0;
	dest_buf = dst;
	while ((bench_now_ns() - t0) / 1e9 < sec || inflight > 0) {
		while (inflight < 8 && (bench_now_ns() - t0) / 1e9 < sec) {
			if (send_msg(c, OP_PULL, 0, n, NULL, 0))
				return 1;
			inflight++;
		}
		if (recv_one(c))
			return 1;
		inflight--;
		bytes += n;
	}
	double dt = (bench_now_ns() - t0) / 1e9;
	printf("d2h %s size %zu MBps %.2f\n", kind, n, bytes / dt / 1e6);
	return 0;
}

static int client(const char *spec, int n, double sec, int nsizes, char **sizes)
{
	transport_addr a;
	transport_conn *c;
	if (transport_parse_addr(spec, &a) || transport_connect(&a, &c) != 0)
		return 1;
	if (rtt(c, n))
		return 1;
	for (int i = 0; i < nsizes; i++) {
		size_t sz = strtoull(sizes[i], NULL, 0);
		uint8_t *pg = malloc(sz), *pin = NULL;
		if (posix_memalign((void **)&pin, 4096, sz) != 0)
			return 1;
		memset(pg, 2, sz);
		memset(pin, 3, sz);
		transport_mr *mr = NULL;
		c->ops->reg_mem(c, pin, sz, &mr);
		if (h2d(c, sz, pg, "pageable", sec) || h2d(c, sz, pin, "pinned", sec) || d2h(c, sz, pg, "pageable", sec) ||
		    d2h(c, sz, pin, "pinned", sec))
			return 1;
		c->ops->dereg_mem(c, mr);
		free(pg);
		free(pin);
	}
	transport_close(c);
	return 0;
}

int main(int argc, char **argv)
{
	bench_clock_init();
	if (argc >= 3 && !strcmp(argv[1], "server"))
		return server(argv[2]);
	if (argc >= 3 && !strcmp(argv[1], "client")) {
		int n = argc > 3 ? atoi(argv[3]) : 5000;
		double sec = argc > 4 ? atof(argv[4]) : 2;
		return client(argv[2], n, sec, argc > 5 ? argc - 5 : 0, argv + 5);
	}
	fprintf(stderr, "usage: rdma-pingpong server ADDR | client ADDR:PORT [N [SECONDS [SIZE...]]]\n");
	return 2;
}
