/*
 * rdma transport over real verbs (Soft-RoCE in the test guest, or any RDMA
 * device): a listener on a libuv loop in its own thread, clients made with
 * transport_connect("rdma://..."). Needs RDMA_TEST_IP (an address of an RDMA
 * device; tests/rdma/guest.sh sets it) and exits 77 (skipped) without one.
 *
 *  - frames of 0 B, 1 B, around the inline limit, 64 KiB, 1 MiB, 3 MiB, both
 *    ways, from pageable memory (bounce ring) and from registered memory
 *    (zero-copy), into malloc'd (landing ring) and registered destinations;
 *    bytes land exactly, guard bytes after each buffer stay untouched; the
 *    statistics show which path each took. A msgpack part larger than a
 *    control message; discarded payloads; two frames in one sendv.
 *  - concurrent sends: 4 client threads on one connection while 2 server
 *    threads send back; every frame whole, each thread's frames in order.
 *  - a send from the server's loop thread (inside on_frame) that must wait.
 *  - registration cache: the same and an enclosed range share one MR.
 *  - closes: client shutdown, server shutdown, listener close: on_close once.
 *  - faults: the server process SIGKILLed while the client waits for a frame
 *    and while it sends 64 MiB; a client process SIGKILLed in the middle of a
 *    frame (the server frees the session); the QP forced into the error
 *    state; a SIGSTOPped server (the sender times out). Each must end within
 *    a bound, never hang.
 *
 * Child processes are this program run again (--child-server, --child-client):
 * verbs resources must not cross a fork.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../unit/check.h"
#include "rdma_int.h"

#define GUARD 64
#define GUARD_BYTE 0xA5
#define MAXREC 64

enum { OP_DATA = 10, OP_DATA_REG = 11, OP_DISCARD = 20, OP_ECHO = 30, OP_BIGMSG = 40, OP_PULL_ASYNC = 50 };

#define ASYNC_N 3               /* frames an OP_PULL_ASYNC answers with */
#define ASYNC_LEN (1u << 20)    /* each: from the server's registered arena */

static const char *ip;
static char self_path[4096];

static uint64_t now_ms(void) { return rdma_now_ns() / 1000000; }

/* transport.h has no wrappers for these two slots */
static int transport_conn_reg(transport_conn *c, void *p, size_t n, transport_mr **mr)
{
	return c->ops->reg_mem(c, p, n, mr);
}
static void transport_conn_dereg(transport_conn *c, transport_mr *mr) { c->ops->dereg_mem(c, mr); }

static uint8_t pat(uint64_t seq, size_t i) { return (uint8_t)(seq * 131 + i * 7 + (i >> 9)); }
static void fill(uint8_t *p, uint64_t seq, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = pat(seq, i);
}
static int verify(const uint8_t *p, uint64_t seq, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != pat(seq, i))
			return 0;
	return 1;
}
static int guard_ok(const uint8_t *p)
{
	for (int i = 0; i < GUARD; i++)
		if (p[i] != GUARD_BYTE)
			return 0;
	return 1;
}

/* Builds a request [<bin of extra bytes>] and sends it with the payload. */
static int send_frame(transport_conn *c, uint32_t op, uint64_t seq, size_t extra, const void *payload, size_t len)
{
	proto_msg m;
	proto_msg_begin(&m, op, seq, extra ? 1 : 0);
	uint8_t *x = NULL;
	if (extra) {
		x = malloc(extra);
		fill(x, seq + 1, extra);
		proto_msg_bin(&m, x, extra);
	}
	int r = proto_msg_finish(&m, 0, len);
	if (r == 0) {
		struct iovec iov[2] = {{m.data, m.len}, {(void *)payload, len}};
		r = transport_sendv(c, iov, len ? 2 : 1);
	}
	proto_msg_free(&m);
	free(x);
	return r;
}

static int msg_op(const transport_frame *f, uint64_t *seq, size_t *extra, int *extra_ok)
{
	proto_view v;
	int op = -1;
	if (proto_view_init(&v, &f->hdr, f->msg) == PROTO_OK) {
		op = (int)v.op;
		*seq = v.seq;
		const void *b;
		size_t n;
		*extra = 0;
		*extra_ok = 1;
		if (v.n > 0 && proto_arg_bin(&v, 0, &b, &n) == PROTO_OK) {
			*extra = n;
			*extra_ok = verify(b, v.seq + 1, n);
		}
	}
	proto_view_free(&v);
	return op;
}

/* ---- the in-process server ---- */

typedef struct conn_rec {
	struct server *s;
	transport_conn *c;
	char peer[64];        /* the client's address, as c->peer */
	int nclose, close_err;
	int keep; /* the test calls transport_close itself */
	int nframes, nbad;
	uint64_t last_seq[8]; /* per sending thread: seq = thread << 32 | i */
	int order_bad;
	uint8_t *arena;       /* registered destination memory */
	transport_mr *arena_mr;
	size_t arena_len;
	uint8_t *cur;         /* the buffer payload_dest handed out */
	int cur_reg;
	int echo_errs;
	int async_sent, async_done, async_err, async_done_at_return; /* OP_PULL_ASYNC */
} conn_rec;

typedef struct server {
	uv_loop_t loop;
	pthread_t thread;
	transport_listener *l;
	int port;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	conn_rec *recs[MAXREC];
	int nrecs;
} server;

static server S;

static void *srv_accept(void *ctx, transport_conn *c)
{
	server *s = ctx;
	conn_rec *r = calloc(1, sizeof(*r));
	r->s = s;
	r->c = c;
	snprintf(r->peer, sizeof(r->peer), "%s", c->peer);
	r->arena_len = 8u << 20;
	r->arena = malloc(r->arena_len);
	if (transport_conn_reg(c, r->arena, r->arena_len, &r->arena_mr) != 0)
		r->arena_mr = NULL;
	pthread_mutex_lock(&s->mu);
	s->recs[s->nrecs++] = r;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return r;
}

static void *srv_payload_dest(void *ctx, const transport_frame *f)
{
	conn_rec *r = ctx;
	uint64_t seq;
	size_t extra;
	int eok;
	int op = msg_op(f, &seq, &extra, &eok);
	size_t n = (size_t)f->hdr.payload_len;
	r->cur = NULL;
	if (op == OP_DISCARD)
		return NULL;
	if (op == OP_DATA_REG && r->arena_mr && n + GUARD <= r->arena_len) {
		r->cur = r->arena;
		r->cur_reg = 1;
	} else {
		r->cur = malloc(n + GUARD);
		r->cur_reg = 0;
	}
	memset(r->cur, GUARD_BYTE, n + GUARD);
	return r->cur;
}

typedef struct echo_job {
	transport_conn *c;
	uint64_t seq;
	size_t len;
} echo_job;

/* transport_sent_fn of the OP_PULL_ASYNC answers (loop thread). */
static void srv_sent(void *ctx, int err)
{
	conn_rec *r = ctx;
	pthread_mutex_lock(&r->s->mu);
	r->async_done++;
	if (err)
		r->async_err++;
	pthread_cond_broadcast(&r->s->cv);
	pthread_mutex_unlock(&r->s->mu);
}

/* ASYNC_N frames straight from the registered arena, none waited for. */
static void srv_pull_async(conn_rec *r, uint64_t seq)
{
	for (unsigned k = 0; k < ASYNC_N && r->arena_mr; k++) {
		uint8_t *p = r->arena + (size_t)k * ASYNC_LEN;
		fill(p, seq + k, ASYNC_LEN);
		proto_msg m;
		proto_msg_begin(&m, OP_PULL_ASYNC, seq + k, 0);
		if (proto_msg_finish(&m, 0, ASYNC_LEN) == 0) {
			struct iovec iov[2] = {{m.data, m.len}, {p, ASYNC_LEN}};
			if (transport_sendv_async(r->c, iov, 2, srv_sent, r) == 0) {
				pthread_mutex_lock(&r->s->mu);
				r->async_sent++;
				pthread_mutex_unlock(&r->s->mu);
			}
		}
		proto_msg_free(&m);
	}
	/* Completions run on this (the loop) thread: none can have run yet. */
	pthread_mutex_lock(&r->s->mu);
	r->async_done_at_return = r->async_done;
	pthread_cond_broadcast(&r->s->cv);
	pthread_mutex_unlock(&r->s->mu);
}

static void srv_frame(void *ctx, transport_frame *f)
{
	conn_rec *r = ctx;
	uint64_t seq = 0;
	size_t extra = 0, n = (size_t)f->hdr.payload_len;
	int eok = 1;
	int op = msg_op(f, &seq, &extra, &eok);
	int ok = op >= 0 && eok;
	if (op == OP_DISCARD)
		ok = ok && f->payload == NULL;
	else if (n > 0)
		ok = ok && f->payload == r->cur && verify(f->payload, seq, n) && guard_ok(r->cur + n);
	pthread_mutex_lock(&r->s->mu);
	r->nframes++;
	if (!ok) {
		r->nbad++;
		fprintf(stderr, "server: frame op %d seq %" PRIx64 " len %zu is wrong\n", op, seq, n);
	}
	unsigned th = (unsigned)(seq >> 32) & 7;
	if (seq >> 32) {
		if ((uint32_t)seq != 0 && (uint32_t)seq != (uint32_t)r->last_seq[th] + 1)
			r->order_bad++;
		r->last_seq[th] = seq;
	}
	pthread_cond_broadcast(&r->s->cv);
	pthread_mutex_unlock(&r->s->mu);
	if (op == OP_ECHO) {
		/* Answer from the loop thread itself: a payload larger than the
		 * bounce ring makes this send wait (inline polling). */
		uint8_t *p = malloc(n ? n : 1);
		fill(p, seq, n);
		if (send_frame(r->c, OP_ECHO, seq, 0, p, n) != 0)
			r->echo_errs++;
		free(p);
	}
	if (op == OP_PULL_ASYNC)
		srv_pull_async(r, seq);
	if (r->cur && !r->cur_reg)
		free(r->cur);
	r->cur = NULL;
	transport_frame_free(f);
}

static void srv_close(void *ctx, int err)
{
	conn_rec *r = ctx;
	pthread_mutex_lock(&r->s->mu);
	r->nclose++;
	r->close_err = err;
	pthread_cond_broadcast(&r->s->cv);
	int keep = r->keep;
	pthread_mutex_unlock(&r->s->mu);
	if (r->arena_mr)
		transport_conn_dereg(r->c, r->arena_mr);
	r->arena_mr = NULL;
	if (!keep)
		transport_close(r->c);
}

static void *loop_main(void *arg)
{
	server *s = arg;
	uv_run(&s->loop, UV_RUN_DEFAULT);
	return NULL;
}

static const transport_server_cb srv_cb = {srv_accept, srv_payload_dest, srv_frame, srv_close};

static void *loop_main_front(uv_loop_t *loop)
{
	uv_run(loop, UV_RUN_DEFAULT);
	return NULL;
}

static int server_start(server *s)
{
	transport_addr a;
	char spec[128];
	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	uv_loop_init(&s->loop);
	snprintf(spec, sizeof(spec), "rdma://%s:0", ip);
	if (transport_parse_addr(spec, &a) || transport_listen(&s->loop, &a, &srv_cb, s, &s->l) != 0)
		return -1;
	s->port = transport_listener_port(s->l);
	pthread_create(&s->thread, NULL, loop_main, s);
	return 0;
}

static void server_stop(server *s)
{
	if (s->l) {
		transport_listener_close(s->l);
		pthread_join(s->thread, NULL);
		uv_loop_close(&s->loop);
		s->l = NULL;
	}
	for (int i = 0; i < s->nrecs; i++) {
		if (s->recs[i]->keep && s->recs[i]->c)
			transport_close(s->recs[i]->c);
		free(s->recs[i]->arena);
		free(s->recs[i]);
	}
	s->nrecs = 0;
}

/* Waits until pred holds (under S.mu) or ms passed. */
#define WAIT_FOR(pred, ms)                                                                       \
	({                                                                                       \
		uint64_t end_ = now_ms() + (ms);                                                 \
		pthread_mutex_lock(&S.mu);                                                       \
		while (!(pred) && now_ms() < end_) {                                             \
			struct timespec ts_;                                                     \
			clock_gettime(CLOCK_REALTIME, &ts_);                                     \
			ts_.tv_nsec += 20000000;                                                 \
			if (ts_.tv_nsec >= 1000000000) {                                         \
				ts_.tv_sec++;                                                    \
				ts_.tv_nsec -= 1000000000;                                       \
			}                                                                        \
			pthread_cond_timedwait(&S.cv, &S.mu, &ts_);                              \
		}                                                                                \
		int ok_ = !!(pred);                                                              \
		pthread_mutex_unlock(&S.mu);                                                     \
		ok_;                                                                             \
	})

static transport_conn *connect_to(int port)
{
	transport_addr a;
	char spec[128];
	transport_conn *c = NULL;
	snprintf(spec, sizeof(spec), "rdma://%s:%d", ip, port);
	if (transport_parse_addr(spec, &a) != 0)
		return NULL;
	int r = transport_connect(&a, &c);
	if (r)
		fprintf(stderr, "connect %s: %s\n", spec, transport_strerror(r));
	return c;
}

void rdma_addr_name(const struct sockaddr *sa, char *buf, size_t len); /* rdma_client.c */

/* The server's record of client connection c (matched by address: accepts of
 * earlier tests' connections may still come in). */
static conn_rec *rec_for(transport_conn *c)
{
	char me[64];
	rdma_ep *ep = rdma_conn_ep(c);
	rdma_addr_name(rdma_get_local_addr(ep->id), me, sizeof(me));
	conn_rec *found = NULL;
	uint64_t end = now_ms() + 5000;
	while (!found && now_ms() < end) {
		pthread_mutex_lock(&S.mu);
		for (int i = 0; i < S.nrecs && !found; i++)
			if (!strcmp(S.recs[i]->peer, me))
				found = S.recs[i];
		pthread_mutex_unlock(&S.mu);
		if (!found)
			usleep(10000);
	}
	return found;
}

typedef struct send_job {
	transport_conn *c;
	uint64_t seq;
	uint8_t *p;
	size_t n;
	int r;
} send_job;

static void *send_job_main(void *arg)
{
	send_job *j = arg;
	j->r = send_frame(j->c, OP_DATA, j->seq, 0, j->p, j->n);
	return NULL;
}

/* ---- client receiving ---- */

typedef struct rx_ctx {
	uint8_t *buf;  /* where payloads go (registered or not) */
	size_t cap;
	int discard;
} rx_ctx;

static void *cli_dest(void *ctx, const transport_frame *f)
{
	rx_ctx *x = ctx;
	if (x->discard || f->hdr.payload_len + GUARD > x->cap)
		return NULL;
	memset(x->buf, GUARD_BYTE, (size_t)f->hdr.payload_len + GUARD);
	return x->buf;
}

/* Receives one frame and checks it is (op, seq, len) with the pattern. */
static int recv_check(transport_conn *c, rx_ctx *x, int op_want, uint64_t seq_want, size_t len)
{
	transport_frame f;
	int r = transport_recv_frame(c, &f, cli_dest, x);
	if (!CHECK_EQ(r, 0))
		return 0;
	uint64_t seq = 0;
	size_t extra;
	int eok;
	int op = msg_op(&f, &seq, &extra, &eok);
	int ok = CHECK_EQ(op, op_want) & CHECK_EQ(seq, seq_want) & CHECK_EQ(f.hdr.payload_len, len);
	if (ok && len && !x->discard)
		ok = CHECK(f.payload == x->buf) && CHECK(verify(f.payload, seq, len)) && CHECK(guard_ok(x->buf + len));
	transport_frame_free(&f);
	return ok;
}

/* ---- tests ---- */

static const size_t sizes[] = {0, 1, 100, 8100, 8144, 8152, 8200, 65536, (1u << 20) + 3, 3u << 20};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static void test_frames(void)
{
	transport_conn *c = connect_to(S.port);
	if (!CHECK(c))
		return;
	conn_rec *r = rec_for(c);
	if (!CHECK(r))
		return;
	r->keep = 1; /* we send on r->c: it must outlive a failure */
	rdma_ep *ep = rdma_conn_ep(c);
	size_t big = 3u << 20;
	uint8_t *pg = malloc(big), *pin = NULL;
	if (posix_memalign((void **)&pin, 4096, big) != 0)
		return;
	transport_mr *mr = NULL;
	CHECK_EQ(transport_conn_reg(c, pin, big, &mr), 0);
	uint64_t seq = 1;
	int sent = 0;
	/* every size, pageable and registered source, both kinds of destination */
	for (int dst = 0; dst < 2; dst++)
		for (int src = 0; src < 2; src++)
			for (size_t i = 0; i < NSIZES; i++, seq++) {
				uint8_t *p = src ? pin : pg;
				fill(p, seq, sizes[i]);
				if (!CHECK_EQ(send_frame(c, dst ? OP_DATA_REG : OP_DATA, seq, 0, p, sizes[i]), 0))
					goto out;
				sent++;
			}
	/* a msgpack part bigger than a control message, with and without payload */
	fill(pg, seq, 100000);
	CHECK_EQ(send_frame(c, OP_BIGMSG, seq++, 200000, pg, 100000), 0);
	CHECK_EQ(send_frame(c, OP_BIGMSG, seq++, 50000, NULL, 0), 0);
	/* discarded payloads of each kind, then a normal frame */
	fill(pg, seq, 1u << 20);
	CHECK_EQ(send_frame(c, OP_DISCARD, seq++, 0, pg, 1u << 20), 0);
	CHECK_EQ(send_frame(c, OP_DISCARD, seq++, 0, pg, 10), 0);
	fill(pg, seq, 5000);
	CHECK_EQ(send_frame(c, OP_DATA, seq++, 0, pg, 5000), 0);
	sent += 5;
	/* two frames in one sendv */
	{
		proto_msg a, b;
		uint8_t *pa = malloc(70000), *pb = malloc(7);
		fill(pa, seq, 70000);
		fill(pb, seq + 1, 7);
		proto_msg_begin(&a, OP_DATA, seq, 0);
		proto_msg_finish(&a, 0, 70000);
		proto_msg_begin(&b, OP_DATA, seq + 1, 0);
		proto_msg_finish(&b, 0, 7);
		struct iovec iov[4] = {{a.data, a.len}, {pa, 70000}, {b.data, b.len}, {pb, 7}};
		CHECK_EQ(transport_sendv(c, iov, 4), 0);
		proto_msg_free(&a);
		proto_msg_free(&b);
		free(pa);
		free(pb);
		seq += 2;
		sent += 2;
	}
	/* a batch as the frontend's send queue makes it: many small frames in one
	 * buffer (they share SENDs), one large frame in the middle */
	{
		enum { NB = 150 };
		uint8_t *buf = malloc(NB * 512), *big = malloc(100000);
		size_t used = 0;
		struct iovec iov[3];
		int niov = 0;
		for (int k = 0; k < NB; k++, seq++) {
			proto_msg m;
			size_t n = (size_t)(k * 37) % 300;
			proto_msg_begin(&m, OP_DATA, seq, 0);
			proto_msg_finish(&m, 0, k == NB / 2 ? 100000 : n);
			memcpy(buf + used, m.data, m.len);
			used += m.len;
			if (k == NB / 2) {
				fill(big, seq, 100000);
				iov[niov++] = (struct iovec){buf, used};
				iov[niov++] = (struct iovec){big, 100000};
				buf += used; /* the rest in a third iovec */
				used = 0;
			} else {
				fill(buf + used, seq, n);
				used += n;
			}
			proto_msg_free(&m);
		}
		iov[niov++] = (struct iovec){buf, used};
		uint64_t b0 = ep->st.tx_batches;
		CHECK_EQ(transport_sendv(c, iov, niov), 0);
		CHECK(ep->st.tx_batches > b0);
		free(iov[0].iov_base);
		free(big);
		sent += NB;
	}
	CHECK(WAIT_FOR(r->nframes >= sent, 60000));
	CHECK_EQ(r->nframes, sent);
	CHECK_EQ(r->nbad, 0);

	/* which paths they took */
	pthread_mutex_lock(&ep->mu);
	CHECK(ep->st.tx_zc_bytes >= 2 * ((3u << 20) + (1u << 20) + 65536));
	CHECK(ep->st.tx_bounce_bytes >= 2 * ((3u << 20) + (1u << 20)));
	CHECK(ep->st.tx_inline > 0);
	pthread_mutex_unlock(&ep->mu);
	rdma_ep *sep = rdma_conn_ep(r->c);
	pthread_mutex_lock(&sep->mu);
	CHECK(sep->st.rx_direct_bytes >= 2 * ((3u << 20) + (1u << 20)));
	CHECK(sep->st.rx_landing_bytes >= 2 * ((3u << 20) + (1u << 20)));
	CHECK(sep->st.rx_skip_bytes >= (1u << 20));
	pthread_mutex_unlock(&sep->mu);

	/* the other way: the server sends, the client receives into pageable
	 * and registered buffers */
	rx_ctx x = {.cap = big + GUARD};
	uint8_t *rpin = NULL;
	if (posix_memalign((void **)&rpin, 4096, big + GUARD) != 0)
		goto out;
	transport_mr *rmr = NULL;
	CHECK_EQ(transport_conn_reg(c, rpin, big + GUARD, &rmr), 0);
	uint8_t *spin = malloc(big);
	transport_mr *smr = NULL;
	CHECK_EQ(transport_conn_reg(r->c, spin, big, &smr), 0);
	for (int dst = 0; dst < 2; dst++)
		for (int src = 0; src < 2; src++)
			for (size_t i = 0; i < NSIZES; i++, seq++) {
				uint8_t *p = src ? spin : pg;
				fill(p, seq, sizes[i]);
				x.buf = dst ? rpin : malloc(big + GUARD);
				if (sizes[i] > 8000) {
					/* not inline: the send waits for our reads (zero-copy)
					 * or for bounce slots: send from another thread */
					pthread_t th;
					send_job job = {r->c, seq, p, sizes[i], -1};
					pthread_create(&th, NULL, send_job_main, &job);
					recv_check(c, &x, OP_DATA, seq, sizes[i]);
					pthread_join(th, NULL);
					CHECK_EQ(job.r, 0);
				} else {
					CHECK_EQ(send_frame(r->c, OP_DATA, seq, 0, p, sizes[i]), 0);
					recv_check(c, &x, OP_DATA, seq, sizes[i]);
				}
				if (!dst)
					free(x.buf);
			}
	pthread_mutex_lock(&ep->mu);
	CHECK(ep->st.rx_direct_bytes >= 2 * ((3u << 20) + (1u << 20)));
	CHECK(ep->st.rx_landing_bytes >= 2 * ((3u << 20) + (1u << 20)));
	pthread_mutex_unlock(&ep->mu);

	/* an echo answered from the server's loop thread (bigger than the
	 * bounce ring: the loop must wait inline for our acks) */
	x.buf = rpin;
	fill(pg, seq, 3u << 20);
	CHECK_EQ(send_frame(c, OP_ECHO, seq, 0, pg, 3u << 20), 0);
	recv_check(c, &x, OP_ECHO, seq, 3u << 20);
	seq++;
	CHECK_EQ(r->echo_errs, 0);

	transport_conn_dereg(r->c, smr);
	free(spin);
	transport_conn_dereg(c, rmr);
	free(rpin);
out:
	transport_conn_dereg(c, mr);
	free(pin);
	free(pg);
	transport_close(c);
	CHECK(WAIT_FOR(r->nclose == 1, 5000));
	CHECK_EQ(r->close_err, TRANSPORT_ECLOSED);
}

static void test_regcache(void)
{
	transport_conn *c = connect_to(S.port);
	if (!CHECK(c))
		return;
	rdma_ep *ep = rdma_conn_ep(c);
	uint8_t *p = NULL;
	if (posix_memalign((void **)&p, 4096, 1u << 20) != 0)
		return;
	transport_mr *a = NULL, *b = NULL, *d = NULL;
	CHECK_EQ(transport_conn_reg(c, p, 1u << 20, &a), 0);
	CHECK_EQ(transport_conn_reg(c, p, 1u << 20, &b), 0);        /* same range */
	CHECK_EQ(transport_conn_reg(c, p + 4096, 8192, &d), 0);      /* enclosed */
	if (a && b && d) {
		CHECK_EQ(a->rkey, b->rkey);
		CHECK_EQ(a->rkey, d->rkey);
		CHECK_EQ(ep->regs.n, 1);
		CHECK_EQ(ep->regs.hits, 2);
	}
	uint32_t lk, rk;
	transport_conn_dereg(c, a);
	CHECK(rdma_regs_find(&ep->regs, p + 100, 10, &lk, &rk));     /* b and d still hold it */
	transport_conn_dereg(c, b);
	transport_conn_dereg(c, d);
	CHECK(!rdma_regs_find(&ep->regs, p + 100, 10, &lk, &rk));
	CHECK_EQ(ep->regs.n, 0);
	free(p);
	transport_close(c);
}

typedef struct thr {
	transport_conn *c;
	int id, n, err;
} thr;

static void *cli_sender(void *arg)
{
	thr *t = arg;
	uint8_t *p = malloc(300000);
	for (int i = 0; i < t->n && !t->err; i++) {
		uint64_t seq = (uint64_t)(t->id + 1) << 32 | (uint32_t)i;
		size_t n = (size_t)((i * 7919u + (unsigned)t->id * 104729u) % 300000u);
		if (i % 3 == 0)
			n %= 2000; /* plenty of small ones */
		fill(p, seq, n);
		t->err = send_frame(t->c, OP_DATA, seq, 0, p, n);
	}
	free(p);
	return NULL;
}

static void *srv_sender(void *arg)
{
	thr *t = arg;
	uint8_t *p = malloc(200000);
	for (int i = 0; i < t->n && !t->err; i++) {
		uint64_t seq = (uint64_t)(t->id + 1) << 32 | (uint32_t)i;
		size_t n = (size_t)((i * 6007u + (unsigned)t->id * 3u) % 200000u);
		fill(p, seq, n);
		t->err = send_frame(t->c, OP_DATA, seq, 0, p, n);
	}
	free(p);
	return NULL;
}

static void test_concurrent(void)
{
	transport_conn *c = connect_to(S.port);
	if (!CHECK(c))
		return;
	conn_rec *r = rec_for(c);
	if (!CHECK(r))
		return;
	r->keep = 1; /* server threads send on r->c */
	enum { NC = 4, NS = 2, N = 60 };
	thr ct[NC], st[NS];
	pthread_t cth[NC], sth[NS];
	for (int i = 0; i < NC; i++) {
		ct[i] = (thr){c, i, N, 0};
		pthread_create(&cth[i], NULL, cli_sender, &ct[i]);
	}
	for (int i = 0; i < NS; i++) {
		st[i] = (thr){r->c, i, N, 0};
		pthread_create(&sth[i], NULL, srv_sender, &st[i]);
	}
	/* the client receives the server threads' frames meanwhile */
	uint8_t *buf = malloc(200000 + GUARD);
	rx_ctx x = {.buf = buf, .cap = 200000 + GUARD};
	int last[NS], bad = 0, order = 0;
	for (int i = 0; i < NS; i++)
		last[i] = -1;
	for (int k = 0; k < NS * N; k++) {
		transport_frame f;
		if (!CHECK_EQ(transport_recv_frame(c, &f, cli_dest, &x), 0))
			break;
		uint64_t seq = 0;
		size_t extra;
		int eok;
		msg_op(&f, &seq, &extra, &eok);
		int th = (int)(seq >> 32) - 1, i = (int)(uint32_t)seq;
		if (th < 0 || th >= NS || (f.hdr.payload_len && !verify(f.payload, seq, (size_t)f.hdr.payload_len)))
			bad++;
		else if (i != last[th] + 1)
			order++;
		else
			last[th] = i;
		transport_frame_free(&f);
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(order, 0);
	for (int i = 0; i < NC; i++) {
		pthread_join(cth[i], NULL);
		CHECK_EQ(ct[i].err, 0);
	}
	for (int i = 0; i < NS; i++) {
		pthread_join(sth[i], NULL);
		CHECK_EQ(st[i].err, 0);
	}
	CHECK(WAIT_FOR(r->nframes >= NC * N, 60000));
	CHECK_EQ(r->nframes, NC * N);
	CHECK_EQ(r->nbad, 0);
	CHECK_EQ(r->order_bad, 0);
	free(buf);
	/* the server ends it this time: the client sees ECLOSED */
	transport_shutdown(r->c);
	CHECK(WAIT_FOR(r->nclose == 1, 5000));
	transport_frame f;
	uint64_t t0 = now_ms();
	CHECK_EQ(transport_recv_frame(c, &f, NULL, NULL), TRANSPORT_ECLOSED);
	CHECK(now_ms() - t0 < 5000);
	CHECK_EQ(send_frame(c, OP_DATA, 1, 0, NULL, 0) < 0, 1);
	transport_close(c);
}

/* The QP in the error state (as a broken link leaves it): a receiver blocked
 * on it and later senders fail with EIO at once; the server hears of it. */
static void *recv_one(void *arg)
{
	transport_conn *c = arg;
	transport_frame f;
	intptr_t r = transport_recv_frame(c, &f, NULL, NULL);
	if (r == 0)
		transport_frame_free(&f);
	return (void *)r;
}

static void test_qp_error(void)
{
	transport_conn *c = connect_to(S.port);
	if (!CHECK(c))
		return;
	conn_rec *r = rec_for(c);
	if (!CHECK(r))
		return;
	uint8_t one = pat(1, 0);
	CHECK_EQ(send_frame(c, OP_DATA, 1, 0, &one, 1), 0);
	CHECK(WAIT_FOR(r->nframes == 1, 5000));
	CHECK_EQ(r->nbad, 0);
	pthread_t th;
	pthread_create(&th, NULL, recv_one, c);
	usleep(200000);
	uint64_t t0 = now_ms();
	rdma_test_break_qp(c);
	void *res;
	pthread_join(th, &res);
	CHECK_EQ((intptr_t)res, TRANSPORT_EIO);
	CHECK(now_ms() - t0 < 3000);
	CHECK(send_frame(c, OP_DATA, 2, 0, NULL, 0) != 0);
	CHECK(WAIT_FOR(r->nclose == 1, 5000));
	transport_close(c);
}

/* A peer that vanishes without a word (no DISCONNECTED, no flush it reports):
 * found by keepalives within keepalive_ms + the QP's retry time. Both ways:
 * the client's receiver fails with EIO; the server frees the session. */
static void test_vanish(void)
{
	uint64_t bound = (uint64_t)rdma_conf()->keepalive_ms + 4000;
	for (int side = 0; side < 2; side++) {
		transport_conn *c = connect_to(S.port);
		if (!CHECK(c))
			return;
		conn_rec *r = rec_for(c);
		if (!CHECK(r))
			return;
		r->keep = 1;
		pthread_t th;
		pthread_create(&th, NULL, recv_one, c);
		usleep(100000);
		uint64_t t0 = now_ms();
		printf("  vanish side %d\n", side);
		if (side == 0) {
			rdma_test_vanish(r->c); /* the server's host "dies" */
			void *res;
			pthread_join(th, &res);
			uint64_t dt = now_ms() - t0;
			printf("  server vanished: recv_frame returned %s after %" PRIu64 " ms\n",
			       transport_strerror((int)(intptr_t)res), dt);
			CHECK_EQ((intptr_t)res, TRANSPORT_EIO);
			CHECK(dt < bound);
			transport_close(c);
			transport_shutdown(r->c);
		} else {
			rdma_test_vanish(c); /* the client's host "dies" */
			CHECK(WAIT_FOR(r->nclose == 1, bound));
			uint64_t dt = now_ms() - t0;
			printf("  client vanished: server on_close(%s) after %" PRIu64 " ms\n",
			       transport_strerror(r->close_err), dt);
			CHECK_EQ(r->close_err, TRANSPORT_EIO);
			transport_shutdown(c);
			pthread_join(th, NULL);
			transport_close(c);
		}
	}
}

/* ---- fault tests with child processes ---- */

static pid_t spawn(char *const argv[], int *out_fd)
{
	int p[2];
	if (pipe(p) != 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		execv(self_path, argv);
		_exit(127);
	}
	close(p[1]);
	*out_fd = p[0];
	return pid;
}

static int read_line(int fd, char *buf, size_t n, int ms)
{
	size_t k = 0;
	uint64_t end = now_ms() + (uint64_t)ms;
	while (k + 1 < n && now_ms() < end) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		if (poll(&pf, 1, 100) <= 0)
			continue;
		if (read(fd, buf + k, 1) != 1)
			break;
		if (buf[k] == '\n')
			break;
		k++;
	}
	buf[k] = 0;
	return (int)k;
}

static void reap(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

static void test_server_death(void)
{
	char *argv[] = {self_path, "--child-server", NULL};
	int fd;
	char line[64];
	/* 1: blocked in recv_frame when the server dies */
	pid_t pid = spawn(argv, &fd);
	if (!CHECK(pid > 0) || !CHECK(read_line(fd, line, sizeof(line), 10000) > 0)) {
		reap(pid);
		return;
	}
	transport_conn *c = connect_to(atoi(line));
	if (CHECK(c)) {
		uint8_t abc[3];
		fill(abc, 7, 3);
		CHECK_EQ(send_frame(c, OP_ECHO, 7, 0, abc, 3), 0);
		rx_ctx x = {.buf = malloc(64 + GUARD), .cap = 64 + GUARD};
		recv_check(c, &x, OP_ECHO, 7, 3);
		free(x.buf);
		pthread_t th;
		pthread_create(&th, NULL, recv_one, c);
		usleep(300000);
		uint64_t t0 = now_ms();
		kill(pid, SIGKILL);
		void *res;
		pthread_join(th, &res);
		uint64_t dt = now_ms() - t0;
		printf("  server killed: recv_frame returned %s after %" PRIu64 " ms\n",
		       transport_strerror((int)(intptr_t)res), dt);
		CHECK((intptr_t)res == TRANSPORT_ECLOSED || (intptr_t)res == TRANSPORT_EIO);
		CHECK(dt < 5000);
		CHECK(send_frame(c, OP_DATA, 8, 0, NULL, 0) != 0);
		transport_close(c);
	}
	waitpid(pid, NULL, 0);
	close(fd);

	/* 2: in the middle of a 64 MiB send when the server dies */
	pid = spawn(argv, &fd);
	if (!CHECK(pid > 0) || !CHECK(read_line(fd, line, sizeof(line), 10000) > 0)) {
		reap(pid);
		return;
	}
	c = connect_to(atoi(line));
	if (CHECK(c)) {
		size_t n = 64u << 20;
		uint8_t *p = calloc(1, n);
		uint64_t t0 = 0;
		int r = 0;
		pid_t killer = fork();
		if (killer == 0) {
			usleep(500000);
			kill(pid, SIGKILL);
			_exit(0);
		}
		for (int i = 0; i < 100 && r == 0; i++) {
			r = send_frame(c, OP_DATA, 100 + (uint64_t)i, 0, p, n);
			if (!t0 && kill(pid, 0) != 0)
				t0 = now_ms();
		}
		waitpid(killer, NULL, 0);
		printf("  server killed: sendv returned %s\n", transport_strerror(r));
		CHECK(r == TRANSPORT_EIO || r == TRANSPORT_ECLOSED);
		free(p);
		transport_close(c);
	}
	waitpid(pid, NULL, 0);
	close(fd);

	/* 3: a stopped server: the sender runs out of credits and times out */
	pid = spawn(argv, &fd);
	if (!CHECK(pid > 0) || !CHECK(read_line(fd, line, sizeof(line), 10000) > 0)) {
		reap(pid);
		return;
	}
	c = connect_to(atoi(line));
	if (CHECK(c)) {
		kill(pid, SIGSTOP);
		uint64_t t0 = now_ms();
		int r = 0;
		for (int i = 0; i < 1000 && r == 0; i++)
			r = send_frame(c, OP_DATA, 1000 + (uint64_t)i, 0, "y", 1);
		uint64_t dt = now_ms() - t0;
		printf("  server stopped: sendv returned %s after %" PRIu64 " ms\n", transport_strerror(r), dt);
		CHECK_EQ(r, TRANSPORT_ETIMEDOUT);
		CHECK(dt < (uint64_t)rdma_conf()->timeout_ms + 3000);
		transport_close(c);
	}
	kill(pid, SIGCONT);
	reap(pid);
	close(fd);
}

static void test_client_death(void)
{
	char port[16];
	snprintf(port, sizeof(port), "%d", S.port);
	char *argv[] = {self_path, "--child-client", (char *)ip, port, NULL};
	int fd;
	char line[64];
	pid_t pid = spawn(argv, &fd);
	if (!CHECK(pid > 0))
		return;
	CHECK(read_line(fd, line, sizeof(line), 10000) > 0); /* "sending ADDR" */
	conn_rec *r = NULL;
	for (uint64_t end = now_ms() + 5000; !r && now_ms() < end; usleep(10000)) {
		pthread_mutex_lock(&S.mu);
		for (int i = 0; i < S.nrecs && !r; i++)
			if (!strncmp(line, "sending ", 8) && !strcmp(S.recs[i]->peer, line + 8))
				r = S.recs[i];
		pthread_mutex_unlock(&S.mu);
	}
	if (!CHECK(r)) {
		reap(pid);
		return;
	}
	usleep(700000); /* in the middle of a 64 MiB frame */
	uint64_t t0 = now_ms();
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	CHECK(WAIT_FOR(r->nclose == 1, 5000));
	printf("  client killed: server on_close(%s) after %" PRIu64 " ms, %d frames before\n",
	       transport_strerror(r->close_err), now_ms() - t0, r->nframes);
	CHECK(r->close_err == TRANSPORT_EIO || r->close_err == TRANSPORT_ECLOSED);
	CHECK_EQ(r->nbad, 0);
	close(fd);
}

/* Listener close with connections open: on_close for each, clients see the
 * end. */
static void test_listener_close(void)
{
	transport_conn *c[2] = {connect_to(S.port), connect_to(S.port)};
	if (!CHECK(c[0] && c[1]))
		return;
	conn_rec *r[2] = {rec_for(c[0]), rec_for(c[1])};
	if (!CHECK(r[0] && r[1]))
		return;
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, recv_one, c[i]);
	usleep(200000);
	uint64_t t0 = now_ms();
	transport_listener_close(S.l);
	for (int i = 0; i < 2; i++) {
		void *res;
		pthread_join(th[i], &res);
		CHECK_EQ((intptr_t)res, TRANSPORT_ECLOSED);
		CHECK(WAIT_FOR(r[i]->nclose == 1, 5000));
		CHECK_EQ(r[i]->close_err, TRANSPORT_ECLOSED);
		transport_close(c[i]);
	}
	CHECK(now_ms() - t0 < 5000);
	/* the loop ends once the listener and every connection are gone */
	pthread_join(S.thread, NULL);
	uv_loop_close(&S.loop);
	S.l = NULL;
}

/* A listener that serves no one and sends every client to the test server
 * (on_redirect), with a cookie the client must present there. */
static int redirect_port;
static uint64_t redirect_cookie;
static int front_redirect(void *ctx, const char *peer, uint64_t *cookie)
{
	*cookie = redirect_cookie;
	return redirect_port;
}

/* transport_sendv_async: zero-copy answers go out without waiting for the
 * peer to read them, their completions run once it has (and, when the peer
 * goes away without reading, with an error), and the bytes arrive intact. */
static void test_sent_async(void)
{
	transport_conn *c = connect_to(S.port);
	if (!CHECK(c))
		return;
	conn_rec *r = rec_for(c);
	if (!CHECK(r) || !CHECK(r->arena_mr))
		return;
	rx_ctx x = {.cap = ASYNC_LEN + GUARD};
	x.buf = malloc(x.cap);
	CHECK_EQ(send_frame(c, OP_PULL_ASYNC, 100, 0, NULL, 0), 0);
	for (unsigned k = 0; k < ASYNC_N; k++)
		recv_check(c, &x, OP_PULL_ASYNC, 100 + k, ASYNC_LEN);
	CHECK(WAIT_FOR(r->async_done == ASYNC_N, 5000));
	pthread_mutex_lock(&S.mu);
	CHECK_EQ(r->async_sent, ASYNC_N);
	CHECK_EQ(r->async_done_at_return, 0);
	CHECK_EQ(r->async_err, 0);
	pthread_mutex_unlock(&S.mu);
	CHECK(rdma_conn_ep(r->c)->st.tx_zc_bytes >= (uint64_t)ASYNC_N * ASYNC_LEN);

	/* a second connection asks, and closes without reading */
	transport_conn *c2 = connect_to(S.port);
	if (CHECK(c2)) {
		conn_rec *r2 = rec_for(c2);
		if (CHECK(r2) && CHECK(r2->arena_mr)) {
			CHECK_EQ(send_frame(c2, OP_PULL_ASYNC, 200, 0, NULL, 0), 0);
			CHECK(WAIT_FOR(r2->async_sent == ASYNC_N, 5000));
			transport_close(c2);
			c2 = NULL;
			CHECK(WAIT_FOR(r2->async_done == ASYNC_N, 5000));
			pthread_mutex_lock(&S.mu);
			CHECK_EQ(r2->async_err, ASYNC_N);
			pthread_mutex_unlock(&S.mu);
		}
		if (c2)
			transport_close(c2);
	}
	transport_close(c);
	free(x.buf);
}

static void test_redirect(void)
{
	static const transport_server_cb front_cb = {.on_redirect = front_redirect};
	uv_loop_t loop;
	transport_addr a;
	transport_listener *front;
	char spec[128];
	uv_loop_init(&loop);
	snprintf(spec, sizeof(spec), "rdma://%s:0", ip);
	if (!CHECK(transport_parse_addr(spec, &a) == 0 && transport_listen(&loop, &a, &front_cb, NULL, &front) == 0))
		return;
	int fport = transport_listener_port(front);
	pthread_t th;
	pthread_create(&th, NULL, (void *(*)(void *))loop_main_front, &loop);

	/* straight to the server: no cookie */
	transport_conn *d = connect_to(S.port);
	conn_rec *rd = d ? rec_for(d) : NULL;
	if (CHECK(rd))
		CHECK_EQ(rd->c->cookie, 0);

	/* sent on, the cookie comes along, and the connection carries frames */
	redirect_port = S.port;
	redirect_cookie = 0x5eed0c00c1e5ull;
	transport_conn *c = connect_to(fport);
	conn_rec *r = c ? rec_for(c) : NULL;
	if (CHECK(r)) {
		CHECK_EQ(r->c->cookie, redirect_cookie);
		CHECK_EQ(send_frame(c, OP_DATA, 1, 0, NULL, 0), 0);
		CHECK(WAIT_FOR(r->nframes == 1, 5000));
	}

	/* a redirect refused is a failed connect */
	redirect_port = 0;
	transport_conn *x = connect_to(fport);
	CHECK(x == NULL);

	if (c)
		transport_close(c);
	if (d)
		transport_close(d);
	transport_listener_close(front);
	pthread_join(th, NULL);
	uv_loop_close(&loop);
}

/* ---- children ---- */

static void *child_srv_accept(void *ctx, transport_conn *c) { return c; }
static void *child_srv_dest(void *ctx, const transport_frame *f) { return malloc(f->hdr.payload_len); }
static void child_srv_frame(void *ctx, transport_frame *f)
{
	transport_conn *c = ctx;
	uint64_t seq = 0;
	size_t extra;
	int eok;
	if (msg_op(f, &seq, &extra, &eok) == OP_ECHO)
		send_frame(c, OP_ECHO, seq, 0, f->payload, (size_t)f->hdr.payload_len);
	free(f->payload);
	transport_frame_free(f);
}
static void child_srv_close(void *ctx, int err) { transport_close(ctx); }

static int child_server(void)
{
	static const transport_server_cb cb = {child_srv_accept, child_srv_dest, child_srv_frame, child_srv_close};
	uv_loop_t loop;
	transport_addr a;
	transport_listener *l;
	char spec[128];
	uv_loop_init(&loop);
	snprintf(spec, sizeof(spec), "rdma://%s:0", ip);
	if (transport_parse_addr(spec, &a) || transport_listen(&loop, &a, &cb, NULL, &l) != 0)
		return 1;
	printf("%d\n", transport_listener_port(l));
	fflush(stdout);
	uv_run(&loop, UV_RUN_DEFAULT);
	return 0;
}

static int child_client(const char *port)
{
	transport_conn *c = connect_to(atoi(port));
	if (!c)
		return 1;
	size_t n = 64u << 20;
	uint8_t *p = malloc(n);
	fill(p, 5, n);
	char me[64];
	rdma_addr_name(rdma_get_local_addr(rdma_conn_ep(c)->id), me, sizeof(me));
	printf("sending %s\n", me);
	fflush(stdout);
	for (uint64_t i = 0;; i++)
		if (send_frame(c, OP_DATA, 5, 0, p, n) != 0)
			return 1;
}

/* A hung test must not hang the suite (and the guest): say which one, exit. */
static const char *volatile current_test;
static volatile uint64_t current_deadline;
static void *watchdog(void *arg)
{
	for (;;) {
		sleep(1);
		if (current_deadline && now_ms() > current_deadline) {
			printf("FAIL %s: still running after its time limit (hung)\n", current_test);
			fflush(stdout);
			_exit(1);
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	ip = getenv("RDMA_TEST_IP");
	if (!ip || !*ip) {
		printf("SKIP: RDMA_TEST_IP is not set (run in the Soft-RoCE guest: tests/rdma/guest.sh)\n");
		return 77;
	}
	if (readlink("/proc/self/exe", self_path, sizeof(self_path) - 1) < 0)
		return 1;
	/* short limits so the fault tests end quickly (read once per process) */
	setenv("REMOTE_GPU_RDMA_TIMEOUT_MS", "3000", 0);
	setenv("REMOTE_GPU_RDMA_KEEPALIVE_MS", "500", 0);
	if (argc >= 2 && !strcmp(argv[1], "--child-server"))
		return child_server();
	if (argc >= 4 && !strcmp(argv[1], "--child-client"))
		return child_client(argv[3]);
	signal(SIGPIPE, SIG_IGN);

	pthread_t wd;
	pthread_create(&wd, NULL, watchdog, NULL);
	if (server_start(&S) != 0) {
		printf("FAIL: cannot listen on rdma://%s:0\n", ip);
		return 1;
	}
	struct {
		const char *name;
		void (*fn)(void);
	} tests[] = {
		{"frames", test_frames},         {"regcache", test_regcache},
		{"concurrent", test_concurrent}, {"qp_error", test_qp_error},
		{"vanish", test_vanish},         {"redirect", test_redirect},
		{"client_death", test_client_death}, {"server_death", test_server_death},
		{"sent_async", test_sent_async},
		{"listener_close", test_listener_close}, /* last: it closes the listener */
	};
	const char *only = getenv("RDMA_TEST_ONLY");
	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		if (only && !strstr(only, tests[i].name))
			continue;
		int f0 = atomic_load(&check_failed_);
		uint64_t t0 = now_ms();
		current_test = tests[i].name;
		current_deadline = t0 + 120000;
		tests[i].fn();
		current_deadline = 0;
		printf("%s %s (%" PRIu64 " ms)\n", atomic_load(&check_failed_) == f0 ? "PASS" : "FAIL", tests[i].name,
		       now_ms() - t0);
	}
	server_stop(&S);
	return check_summary("test_rdma");
}
