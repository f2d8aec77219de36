/*
 * A session's stripe state (stripe.h): its stripe connections and the
 * transfers in flight, shared by the stripe threads, the executor and the
 * loop thread under one mutex.
 *
 * A transfer is a slot: its id (the client's), direction, bytes, staging
 * buffer, and busy, the threads receiving into or sending out of the buffer
 * right now. H2D: stripe threads fill it (put_dest/put_done) and the executor
 * takes the buffer once every byte came (take_in). D2H: the executor copies
 * into it and records an event (add_out); stripe threads wait for the event
 * and send their parts (get_wait/get_done); the last part frees the slot.
 * A break (a stripe connection died) fails every slot: its buffer goes back
 * once no thread uses it and no copy from the device writes it.
 */
#include "stripe.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { X_FREE = 0, X_FILL, X_READY, X_FAILED };

typedef struct xfer {
	int state, out; /* out: device to host */
	uint64_t id, total, moved; /* moved: bytes received (H2D) or sent (D2H) */
	unsigned busy;
	int taking; /* H2D: a stripe thread takes buf (outside mu; the others wait) */
	be_buf buf;
	CUevent ev; /* D2H: the copy into buf; NULL once it completed */
	int syncing; /* a stripe thread waits for ev (the others wait for it) */
	CUcontext ctx;
} xfer;

struct be_stripes {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int gone, broken;
	unsigned nconns;
	transport_conn *conns[BE_STRIPE_MAX];
	uint64_t heard_ns; /* bytes last moved */
	xfer x[BE_STRIPE_MAX_XFERS];
};

static void wait_a_while(be_stripes *t);

be_stripes *be_stripes_of(be_session *s, int create)
{
	if (!s->stripes && create) {
		be_stripes *t = calloc(1, sizeof(*t));
		if (!t)
			return NULL;
		pthread_mutex_init(&t->mu, NULL);
		pthread_condattr_t ca;
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&t->cv, &ca);
		pthread_condattr_destroy(&ca);
		s->stripes = t;
	}
	return s->stripes;
}

int be_stripes_usable(be_session *s)
{
	be_stripes *t = s->stripes;
	if (!t)
		return 1;
	pthread_mutex_lock(&t->mu);
	int ok = !t->broken && !t->gone;
	pthread_mutex_unlock(&t->mu);
	return ok;
}

/* The copy from the device into x's buffer is over (mu held; waits for it
 * when it is not: a buffer the DMA may still write cannot go back). */
static void settle_locked(xfer *x)
{
	if (!x->ev)
		return;
	be_drv.cuCtxSetCurrent(x->ctx);
	be_drv.cuEventSynchronize(x->ev);
	be_drv.cuEventDestroy(x->ev);
	x->ev = NULL;
}

/* Frees x's slot and buffer (mu held, busy 0). */
static void drop_locked(be_session *s, xfer *x)
{
	settle_locked(x);
	be_staging_release(&s->staging, &x->buf);
	memset(x, 0, sizeof(*x));
	pthread_cond_broadcast(&s->stripes->cv); /* a slot is free */
}

/* A stripe connection died: every transfer in flight fails (mu held); one
 * whose bytes all came stays for its copy, which the client has sent or
 * sends next. quiet: a clean end with nothing in flight (a client that
 * exits closes its stripes before its session), not worth a warning. */
static void break_locked(be_session *s, be_stripes *t, int quiet)
{
	for (int i = 0; i < BE_STRIPE_MAX_XFERS && quiet; i++)
		quiet = t->x[i].state == X_FREE;
	if (!t->broken && !t->gone && !quiet)
		LOG_WARN(BE_LOG, "session %" PRIu64 ": a stripe connection ended: copies in flight fail, later ones "
			 "take the main connection", s->id);
	t->broken = 1;
	for (unsigned i = 0; i < t->nconns; i++)
		transport_shutdown(t->conns[i]);
	for (int i = 0; i < BE_STRIPE_MAX_XFERS; i++) {
		xfer *x = &t->x[i];
		if (x->state == X_FREE || (x->state == X_READY && !x->out))
			continue;
		x->state = X_FAILED;
		if (!x->busy)
			drop_locked(s, x);
	}
	pthread_cond_broadcast(&t->cv);
}

int be_stripes_join(be_session *s, transport_conn *c)
{
	be_stripes *t = s->stripes;
	int r = -1;
	pthread_mutex_lock(&t->mu);
	if (!t->gone && !t->broken && t->nconns < BE_STRIPE_MAX) {
		t->conns[t->nconns++] = c;
		r = 0;
	}
	pthread_mutex_unlock(&t->mu);
	return r;
}

void be_stripes_leave(be_session *s, transport_conn *c, int broke)
{
	be_stripes *t = s->stripes;
	pthread_mutex_lock(&t->mu);
	for (unsigned i = 0; i < t->nconns; i++)
		if (t->conns[i] == c) {
			t->conns[i] = t->conns[--t->nconns];
			break;
		}
	if (broke)
		break_locked(s, t, broke == TRANSPORT_ECLOSED);
	pthread_cond_broadcast(&t->cv);
	pthread_mutex_unlock(&t->mu);
}

static xfer *find_locked(be_stripes *t, uint64_t id, int out)
{
	for (int i = 0; i < BE_STRIPE_MAX_XFERS; i++)
		if (t->x[i].state != X_FREE && t->x[i].id == id && t->x[i].out == out)
			return &t->x[i];
	return NULL;
}

static xfer *new_locked(be_stripes *t, uint64_t id)
{
	for (int i = 0; i < BE_STRIPE_MAX_XFERS; i++)
		if (t->x[i].state == X_FREE) {
			memset(&t->x[i], 0, sizeof(t->x[i]));
			t->x[i].id = id;
			t->x[i].state = X_FILL;
			return &t->x[i];
		}
	return NULL;
}

void *be_stripes_put_dest(be_session *s, uint64_t id, uint64_t total, uint64_t off, uint64_t len)
{
	be_stripes *t = s->stripes;
	void *p = NULL;
	if (len == 0 || total == 0 || total > BE_STRIPE_MAX_LEN || off > total || len > total - off)
		return NULL;
	pthread_mutex_lock(&t->mu);
	xfer *x = NULL;
	/* Every slot taken: transfers whose copies the executor has not run
	 * yet. It will (their frames follow their bytes), so this stripe waits,
	 * and the client with it (TCP's window). */
	while (!t->broken && !t->gone && !(x = find_locked(t, id, 0)) && !(x = new_locked(t, id)))
		wait_a_while(t);
	if (x && x->state == X_FILL && !x->total) {
		/* The first part takes the buffer, outside mu: it may pin a big one
		 * with the session's first context (made at hello, gone only after
		 * this thread), or wait while the last transfers' device copies
		 * still read every big one (executor and waiter need mu
		 * meanwhile), rather than land in fresh pages. */
		x->total = total;
		x->taking = 1;
		x->busy++;
		pthread_mutex_unlock(&t->mu);
		be_buf b;
		int e = be_staging_take_wait(&s->staging, (size_t)total, BE_STRIPE_LAND_WAIT_MS, s->ctxs[0], &b);
		pthread_mutex_lock(&t->mu);
		x->taking = 0;
		x->busy--;
		if (e == 0 && x->state == X_FILL)
			x->buf = b;
		else
			be_staging_release(&s->staging, &b);
		if (e != 0 && x->state == X_FILL)
			memset(x, 0, sizeof(*x));
		else if (x->state == X_FAILED && !x->busy)
			drop_locked(s, x);
		pthread_cond_broadcast(&t->cv);
	}
	while (x && x->state == X_FILL && x->id == id && !x->out && x->taking)
		wait_a_while(t); /* another part takes the buffer */
	if (x && x->state == X_FILL && x->id == id && !x->out && x->total == total && x->buf.p) {
		x->busy++;
		p = (uint8_t *)x->buf.p + off;
	}
	pthread_mutex_unlock(&t->mu);
	return p;
}

/* Waits on the condition for at most 100 ms (mu held). */
static void wait_a_while(be_stripes *t)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_nsec += 100000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_cond_timedwait(&t->cv, &t->mu, &ts);
}

/* Whether nothing moved for BE_STRIPE_WAIT_MS since start (mu held). */
static int silent(be_stripes *t, uint64_t start)
{
	uint64_t last = t->heard_ns > start ? t->heard_ns : start;
	return rg_clock_ns() - last > BE_STRIPE_WAIT_MS * 1000000ull;
}

int be_stripes_take_in(be_session *s, uint64_t id, uint64_t len, be_buf *b)
{
	be_stripes *t = s->stripes;
	uint64_t start = rg_clock_ns();
	int r = CUDA_ERROR_OPERATING_SYSTEM;
	if (!t)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&t->mu);
	for (;;) {
		xfer *x = find_locked(t, id, 0);
		if (x && x->state == X_READY && !x->busy) {
			if (x->total == len) {
				*b = x->buf;
				x->buf = (be_buf){0};
				r = 0;
			} else {
				r = CUDA_ERROR_INVALID_VALUE;
			}
			drop_locked(s, x);
			break;
		}
		if (x && x->state == X_FAILED) {
			if (!x->busy)
				drop_locked(s, x);
			break;
		}
		if (t->broken || t->gone || atomic_load(&s->closing))
			break;
		if (silent(t, start)) {
			LOG_WARN(BE_LOG, "session %" PRIu64 ": striped copy %" PRIu64 ": no bytes for %d ms", s->id, id,
				 BE_STRIPE_WAIT_MS);
			break_locked(s, t, 0);
			break;
		}
		wait_a_while(t);
	}
	pthread_mutex_unlock(&t->mu);
	return r;
}

int be_stripes_add_out(be_session *s, uint64_t id, be_buf *b, uint64_t len, CUevent ev)
{
	be_stripes *t = s->stripes;
	int r = CUDA_ERROR_OPERATING_SYSTEM;
	pthread_mutex_lock(&t->mu);
	xfer *x = t->broken || t->gone || find_locked(t, id, 1) ? NULL : new_locked(t, id);
	if (x) {
		x->out = 1;
		x->total = len;
		x->buf = *b;
		x->ev = ev;
		x->ctx = s->ctx;
		x->state = X_READY;
		*b = (be_buf){0};
		r = 0;
		pthread_cond_broadcast(&t->cv);
	}
	pthread_mutex_unlock(&t->mu);
	return r;
}

int be_stripes_get_wait(be_session *s, uint64_t id, uint64_t off, uint64_t len, const void **p)
{
	be_stripes *t = s->stripes;
	uint64_t start = rg_clock_ns();
	int r = CUDA_ERROR_OPERATING_SYSTEM;
	pthread_mutex_lock(&t->mu);
	for (;;) {
		xfer *x = find_locked(t, id, 1);
		if (x && x->state == X_READY) {
			if (len == 0 || off > x->total || len > x->total - off) {
				r = CUDA_ERROR_INVALID_VALUE;
				break;
			}
			if (x->ev && x->syncing) {
				wait_a_while(t); /* another part waits for the event */
				continue;
			}
			if (x->ev) {
				/* The first part waits for the copy from the device, the
				 * others for it (the slot stays: busy). */
				x->busy++;
				x->syncing = 1;
				be_drv.cuCtxSetCurrent(x->ctx);
				pthread_mutex_unlock(&t->mu);
				CUresult e = be_drv.cuEventSynchronize(x->ev);
				pthread_mutex_lock(&t->mu);
				x->busy--;
				x->syncing = 0;
				be_drv.cuEventDestroy(x->ev);
				x->ev = NULL;
				if (e != CUDA_SUCCESS && x->state == X_READY)
					x->state = X_FAILED;
				pthread_cond_broadcast(&t->cv);
				continue;
			}
			x->busy++;
			*p = (uint8_t *)x->buf.p + off;
			r = 0;
			break;
		}
		if (x && x->state == X_FAILED) {
			if (!x->busy)
				drop_locked(s, x);
			break;
		}
		if (t->broken || t->gone)
			break;
		if (silent(t, start))
			break;
		wait_a_while(t);
	}
	pthread_mutex_unlock(&t->mu);
	return r;
}

void be_stripes_done(be_session *s, uint64_t id, int out, uint64_t len, int ok)
{
	be_stripes *t = s->stripes;
	pthread_mutex_lock(&t->mu);
	xfer *x = find_locked(t, id, out);
	if (x) {
		x->busy--;
		t->heard_ns = rg_clock_ns();
		if (!ok)
			x->state = X_FAILED;
		else if (x->state != X_FAILED && (x->moved += len) >= x->total)
			x->state = out ? X_FAILED : X_READY; /* D2H: all sent, nothing more to serve */
		if (x->state == X_FAILED && !x->busy)
			drop_locked(s, x);
	}
	pthread_cond_broadcast(&t->cv);
	pthread_mutex_unlock(&t->mu);
}

void be_stripes_session_gone(be_session *s)
{
	be_stripes *t = s->stripes;
	if (!t)
		return;
	pthread_mutex_lock(&t->mu);
	t->gone = 1;
	for (unsigned i = 0; i < t->nconns; i++)
		transport_shutdown(t->conns[i]);
	pthread_cond_broadcast(&t->cv);
	pthread_mutex_unlock(&t->mu);
}

void be_stripes_join_all(be_session *s)
{
	be_stripes *t = s->stripes;
	be_stripes_session_gone(s);
	if (!t)
		return;
	pthread_mutex_lock(&t->mu);
	while (t->nconns)
		pthread_cond_wait(&t->cv, &t->mu); /* each thread's last touch is its leave */
	for (int i = 0; i < BE_STRIPE_MAX_XFERS; i++)
		if (t->x[i].state != X_FREE)
			drop_locked(s, &t->x[i]);
	pthread_mutex_unlock(&t->mu);
	pthread_mutex_destroy(&t->mu);
	pthread_cond_destroy(&t->cv);
	free(t);
	s->stripes = NULL;
}
