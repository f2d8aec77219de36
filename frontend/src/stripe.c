/*
 * Striped copies over tcp (docs/ARCHITECTURE.md "Striped copies"). One tcp
 * connection moves what one core copies through the kernel on each side; a
 * copy of REMOTE_GPU_STRIPE_MIN bytes or more (default 8 MiB) is cut across
 * REMOTE_GPU_STRIPES extra connections of the session (default 4; 0: off),
 * each with a thread here and a thread on the server, so several cores move
 * it at once.
 *
 * Opening, at the first such copy: stripe_open over the channel answers the
 * server's stripe port and one secret per connection (single use); each
 * connection presents its secret first. A server that says none (tls, rdma,
 * --stripes 0), a port that cannot be reached, or a refused secret: striping
 * stays off for the channel (logged once) and copies take the channel.
 *
 * A copy: transfers of at most FE_STRIPE_XFER_MAX bytes (the server's
 * BE_STRIPE_MAX_LEN); each transfer's bytes are split into one contiguous
 * part per connection, sent or received in frames of at most
 * REMOTE_GPU_STRIPE_KB (default 16384) straight from and into the caller's
 * buffer. H2D: the parts go out (stripe_put) on every connection at once,
 * then memcpy_htod_striped over the channel, which the server runs in stream
 * order once every byte came. D2H (synchronous copies): memcpy_dtoh_striped
 * over the channel, answered once the bytes are in the server's staging
 * buffer, then every connection asks for its part (stripe_get).
 *
 * One striped copy at a time per channel: a copy that finds one under way
 * takes the channel. A connection that fails fails the copy
 * (CUDA_ERROR_OPERATING_SYSTEM), every stripe connection is shut down and
 * striping stays off; the session goes on over the channel. Stripes that
 * show no progress for REMOTE_GPU_TIMEOUT are shut down the same way, so a
 * stopped server fails the copy rather than hanging it.
 */
#include "stripe.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda.h>

#include "live.h"
#include "rg_clock.h"
#include "rg_log.h"

#define FE_STRIPE_MAX 16
#define FE_STRIPE_XFER_MAX (256ull << 20)
#define SECRET_LEN 16

typedef struct job {
	int get; /* 0: put */
	uint64_t xfer, total, off, len;
	uint8_t *base; /* the caller's buffer at the transfer's start */
} job;

typedef struct worker {
	struct fe_stripes *set;
	transport_conn *t;
	pthread_t th;
	int has_job, quit, status;
	job j;
	uint64_t seq;
} worker;

typedef struct fe_stripes {
	pthread_mutex_t copy_mu; /* one striped copy at a time */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int state; /* 0 not tried, 1 on, 2 off */
	unsigned n, busy;
	uint64_t next_xfer;
	worker w[FE_STRIPE_MAX];
} fe_stripes;

static pthread_mutex_t open_mu = PTHREAD_MUTEX_INITIALIZER;

static size_t env_size(const char *name, size_t dflt, size_t hi)
{
	const char *e = getenv(name);
	if (!e || !*e)
		return dflt;
	unsigned long long v = strtoull(e, NULL, 10);
	return v > hi ? hi : (size_t)v;
}

static unsigned want_stripes(void)
{
	static int n = -1;
	if (n < 0)
		n = (int)env_size("REMOTE_GPU_STRIPES", 4, FE_STRIPE_MAX);
	return (unsigned)n;
}

static size_t min_len(void)
{
	static size_t v = (size_t)-1;
	if (v == (size_t)-1)
		v = env_size("REMOTE_GPU_STRIPE_MIN", 8u << 20, (size_t)1 << 40);
	return v;
}

static size_t piece_len(void)
{
	static size_t v;
	if (!v) {
		v = env_size("REMOTE_GPU_STRIPE_KB", 16384, 1u << 20) * 1024;
		if (!v)
			v = 16u << 20;
	}
	return v;
}

/* ---- one connection ---- */

static int send_frame(worker *w, proto_msg *m, uint16_t flags, const void *p, uint64_t len)
{
	int r = proto_msg_finish(m, flags, len);
	if (r == PROTO_OK) {
		struct iovec iov[2] = {{m->data, m->len}, {(void *)p, (size_t)len}};
		r = transport_sendv(w->t, iov, len ? 2 : 1);
	}
	proto_msg_free(m);
	return r;
}

typedef struct dest {
	uint8_t *p;
	uint64_t len;
} dest;

static void *reply_dest(void *ctx, const transport_frame *f)
{
	dest *d = ctx;
	return f->hdr.payload_len == d->len ? d->p : NULL;
}

/* The next reply: its status (a transport error as CUDA_ERROR_OPERATING_SYSTEM);
 * a payload of exactly d->len bytes lands at d->p. */
static int recv_reply(worker *w, dest *d)
{
	transport_frame f = {0};
	int r = transport_recv_frame(w->t, &f, reply_dest, d);
	if (r == TRANSPORT_OK)
		r = !(f.hdr.flags & PROTO_F_REPLY) ? CUDA_ERROR_OPERATING_SYSTEM
		    : f.hdr.status                  ? f.hdr.status
		    : (d && d->len && !f.payload)   ? CUDA_ERROR_OPERATING_SYSTEM
						    : 0;
	else
		r = CUDA_ERROR_OPERATING_SYSTEM;
	transport_frame_free(&f);
	return r;
}

/* The worker's part: [j.off, j.off + j.len) of the transfer, in pieces. */
static int run_job(worker *w, const job *j)
{
	size_t piece = piece_len();
	uint64_t end = j->off + j->len;
	int r = 0;
	for (uint64_t o = j->off; o < end && !r; o += piece) {
		uint64_t n = end - o < piece ? end - o : piece;
		proto_msg m;
		proto_msg_begin(&m, j->get ? PROTO_OP_STRIPE_GET : PROTO_OP_STRIPE_PUT, w->seq++, 3);
		proto_msg_u64(&m, j->xfer);
		if (j->get) {
			proto_msg_u64(&m, o);
			proto_msg_u64(&m, n);
			r = send_frame(w, &m, 0, NULL, 0);
		} else {
			proto_msg_u64(&m, j->total);
			proto_msg_u64(&m, o);
			r = send_frame(w, &m, PROTO_F_ASYNC, j->base + o, n);
		}
		if (r)
			r = CUDA_ERROR_OPERATING_SYSTEM;
	}
	/* The answers to the gets, in order, each into its place. */
	for (uint64_t o = j->off; j->get && o < end && !r; o += piece) {
		dest d = {j->base + o, end - o < piece ? end - o : piece};
		r = recv_reply(w, &d);
	}
	return r;
}

static void *worker_main(void *arg)
{
	worker *w = arg;
	fe_stripes *s = w->set;
	pthread_mutex_lock(&s->mu);
	for (;;) {
		while (!w->has_job && !w->quit)
			pthread_cond_wait(&s->cv, &s->mu);
		if (w->quit)
			break;
		job j = w->j;
		pthread_mutex_unlock(&s->mu);
		int r = run_job(w, &j);
		pthread_mutex_lock(&s->mu);
		w->status = r;
		w->has_job = 0;
		s->busy--;
		pthread_cond_broadcast(&s->cv);
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* ---- the set ---- */

static void stripes_close(void *ext)
{
	fe_stripes *s = ext;
	if (!s)
		return;
	pthread_mutex_lock(&s->mu);
	for (unsigned i = 0; i < s->n; i++) {
		s->w[i].quit = 1;
		transport_shutdown(s->w[i].t);
	}
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	for (unsigned i = 0; i < s->n; i++) {
		pthread_join(s->w[i].th, NULL);
		transport_close(s->w[i].t);
	}
	free(s);
}

/* Connects one stripe and presents its secret: the connection, or NULL. */
static transport_conn *stripe_connect(const transport_addr *a, const uint8_t *secret)
{
	transport_conn *t;
	if (transport_connect_within(a, 5000, &t) != TRANSPORT_OK)
		return NULL;
	worker w = {.t = t};
	proto_msg m;
	proto_msg_begin(&m, PROTO_OP_STRIPE_HELLO, 0, 1);
	proto_msg_bin(&m, secret, SECRET_LEN);
	if (send_frame(&w, &m, 0, NULL, 0) != 0 || recv_reply(&w, NULL) != 0) {
		transport_close(t);
		return NULL;
	}
	return t;
}

/* Asks the server for stripes and connects them (s->state 1), or not (2). */
static void stripes_open(fe_conn *c, fe_stripes *s)
{
	unsigned want = want_stripes();
	uint64_t port = 0, n = 0;
	const void *sec = NULL;
	size_t seclen = 0;
	fe_reply r = {0};
	transport_addr a;
	const char *why = "the server offers none";

	s->state = 2;
	if (!want)
		return;
	proto_msg m;
	proto_msg_begin(&m, PROTO_OP_STRIPE_OPEN, fe_conn_next_seq(c), 1);
	proto_msg_u64(&m, want);
	int st = fe_conn_call(c, &m, NULL, 0, NULL, 0, &r);
	if (st != 0) {
		LOG_INFO("frontend", "striped copies: stripe_open answered %d: copies take the main connection", st);
		return;
	}
	if (proto_arg_u64(&r.view, 0, &port) || proto_arg_u64(&r.view, 1, &n) ||
	    proto_arg_bin(&r.view, 2, &sec, &seclen) || seclen != n * SECRET_LEN || n > FE_STRIPE_MAX)
		n = 0;
	if (n && transport_parse_addr(fe_conn_peer(c), &a) == TRANSPORT_OK) {
		a.port = (int)port;
		snprintf(a.scheme, sizeof(a.scheme), "tcp");
		why = "a stripe connection failed";
		for (unsigned i = 0; i < n; i++) {
			worker *w = &s->w[s->n];
			w->set = s;
			if (!(w->t = stripe_connect(&a, (const uint8_t *)sec + i * SECRET_LEN)))
				break;
			if (pthread_create(&w->th, NULL, worker_main, w) != 0) {
				transport_close(w->t);
				break;
			}
			s->n++;
		}
	}
	fe_reply_free(&r);
	if (n && s->n == n) {
		s->state = 1;
		LOG_DEBUG("frontend", "striped copies: %u connections to %s port %" PRIu64, s->n, fe_conn_peer(c), port);
		return;
	}
	LOG_INFO("frontend", "striped copies: %s: copies take the main connection", why);
}

/* The channel's set, opened on first use; NULL: no striping. Takes copy_mu. */
static fe_stripes *stripes_get(fe_conn *c, size_t len)
{
	if (len < min_len() || !want_stripes())
		return NULL;
	/* Only where one connection's copying is the limit: not rdma (its own
	 * zero-copy), shm (no sockets) or tls (stripes would cross in clear). */
	if (fe_conn_caps(c) & (TRANSPORT_CAP_REG_MEM | TRANSPORT_CAP_REGIONS | TRANSPORT_CAP_LOCAL |
			       TRANSPORT_CAP_ENCRYPTED))
		return NULL;
	pthread_mutex_lock(&open_mu);
	void **slot = fe_conn_ext(c, stripes_close);
	fe_stripes *s = *slot;
	if (!s && (s = calloc(1, sizeof(*s))) != NULL) {
		pthread_mutex_init(&s->copy_mu, NULL);
		pthread_mutex_init(&s->mu, NULL);
		pthread_cond_init(&s->cv, NULL);
		stripes_open(c, s);
		if (s->state != 1) { /* an empty set that says off */
			stripes_close(s);
			if ((s = calloc(1, sizeof(*s))) != NULL)
				s->state = 2;
		}
		*slot = s;
	}
	pthread_mutex_unlock(&open_mu);
	if (!s || s->state != 1 || pthread_mutex_trylock(&s->copy_mu) != 0)
		return NULL;
	return s;
}

/* Runs one transfer's parts on every connection; 0 or the first failure
 * (then striping goes off: every connection is shut down). */
static int run_all(fe_stripes *s, int get, uint64_t xfer, uint8_t *base, uint64_t total)
{
	int r = 0;
	pthread_mutex_lock(&s->mu);
	for (unsigned i = 0; i < s->n; i++) {
		worker *w = &s->w[i];
		uint64_t a = total * i / s->n, b = total * (i + 1) / s->n;
		w->j = (job){.get = get, .xfer = xfer, .total = total, .off = a, .len = b - a, .base = base};
		w->has_job = b > a;
		w->status = 0;
		s->busy += w->has_job;
	}
	pthread_cond_broadcast(&s->cv);
	/* As the channel's watchdog does (live.c): stripes that show no progress
	 * for REMOTE_GPU_TIMEOUT (a server stopped, its kernel still ACKing) are
	 * shut down, and the copy fails rather than hangs. */
	double limit = fe_live_timeout();
	uint64_t seen = 0, quiet_since = rg_clock_ns();
	while (s->busy) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		pthread_cond_timedwait(&s->cv, &s->mu, &ts);
		uint64_t p = 0, now = rg_clock_ns();
		for (unsigned i = 0; i < s->n; i++)
			p += transport_progress(s->w[i].t);
		if (p != seen) {
			seen = p;
			quiet_since = now;
		} else if (limit > 0 && (now - quiet_since) / 1e9 > limit) {
			LOG_WARN("frontend", "striped copy: no progress for %g s (REMOTE_GPU_TIMEOUT)", limit);
			for (unsigned i = 0; i < s->n; i++)
				transport_shutdown(s->w[i].t);
			quiet_since = now;
		}
	}
	for (unsigned i = 0; i < s->n && !r; i++)
		r = s->w[i].status;
	if (r) {
		LOG_WARN("frontend", "striped copy: a stripe connection failed (%d): the copy fails, later copies "
			 "take the main connection", r);
		s->state = 2;
		for (unsigned i = 0; i < s->n; i++)
			transport_shutdown(s->w[i].t);
	}
	pthread_mutex_unlock(&s->mu);
	return r;
}

/* A copy's frame over the channel: op for transfer id, n bytes at addr. */
static void copy_frame(proto_msg *m, fe_conn *c, uint32_t op, uint64_t addr, uint64_t n, uint64_t sid, uint64_t id)
{
	proto_msg_begin(m, op, fe_conn_next_seq(c), 4);
	proto_msg_u64(m, addr);
	proto_msg_u64(m, n);
	proto_msg_u64(m, sid);
	proto_msg_u64(m, id);
}

/* Copies len bytes as transfers of at most FE_STRIPE_XFER_MAX: H2D (get 0)
 * sends each transfer's parts, then its frame; D2H (get 1) its frame, and
 * once answered asks for its parts. */
static int striped(fe_stripes *s, fe_conn *c, int get, uint64_t dev, uint8_t *host, size_t len, uint64_t sid)
{
	int r = 0;
	for (size_t off = 0; off < len && !r; off += FE_STRIPE_XFER_MAX) {
		uint64_t n = len - off < FE_STRIPE_XFER_MAX ? len - off : FE_STRIPE_XFER_MAX;
		uint64_t id = ++s->next_xfer;
		proto_msg m;
		if (get) {
			copy_frame(&m, c, PROTO_OP_MEMCPY_DTOH_STRIPED, dev + off, n, sid, id);
			/* answered once the bytes wait in the server's staging buffer */
			if ((r = fe_conn_call(c, &m, NULL, 0, NULL, 0, NULL)) == 0)
				r = run_all(s, 1, id, host + off, n);
		} else if ((r = run_all(s, 0, id, host + off, n)) == 0) {
			copy_frame(&m, c, PROTO_OP_MEMCPY_HTOD_STRIPED, dev + off, n, sid, id);
			r = fe_conn_post(c, &m, NULL, 0);
		}
	}
	pthread_mutex_unlock(&s->copy_mu);
	return r;
}

int fe_stripe_htod(fe_conn *c, uint64_t dst, const void *src, size_t len, uint64_t sid, int *st)
{
	fe_stripes *s = stripes_get(c, len);
	if (!s)
		return 0;
	*st = striped(s, c, 0, dst, (uint8_t *)src, len, sid);
	return 1;
}

int fe_stripe_dtoh(fe_conn *c, void *dst, uint64_t src, size_t len, uint64_t sid, int *st)
{
	fe_stripes *s = stripes_get(c, len);
	if (!s)
		return 0;
	*st = striped(s, c, 1, src, dst, len, sid);
	return 1;
}
