/* See sendq.h. Two locks: `wlock` is held while bytes go to the socket (one writer
 * at a time, frames never interleave), `qlock` guards the queue. A writer takes
 * the whole queue under qlock, then writes it outside qlock, so posting never
 * waits for the network. */
#define _GNU_SOURCE /* pthread_setname_np */

#include "sendq.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rg_clock.h"
#include "rg_log.h"

#define QUEUE_MAX (1u << 20)     /* beyond this, posters write themselves: backpressure */
#define COPY_MAX (64u << 10)     /* larger payloads are written from the caller's buffer */
#define SPIN_NS 50000            /* the sender keeps looking this long before it sleeps */

struct fe_sendq {
	transport_conn *t;
	pthread_mutex_t wlock;
	pthread_mutex_t qlock;
	pthread_cond_t qcond;
	uint8_t *buf, *spare; /* buf: being filled; spare: free for the next swap */
	size_t len, cap, spare_cap;
	atomic_size_t pending; /* len, readable without the lock by the spinning sender */
	int sleeping, closing;
	atomic_int err;        /* written under qlock, read without it by writers */
	atomic_int writing;    /* a writer is inside transport_sendv (fe_sendq_busy) */
	pthread_t thread;
};

/* Takes the queue's bytes (caller holds wlock and qlock). */
static uint8_t *take_locked(fe_sendq *q, size_t *len, size_t *cap)
{
	uint8_t *b = q->buf;
	*len = q->len;
	*cap = q->cap;
	q->buf = q->spare;
	q->cap = q->spare_cap;
	q->spare = NULL;
	q->spare_cap = 0;
	q->len = 0;
	atomic_store(&q->pending, 0);
	return b;
}

static void give_back(fe_sendq *q, uint8_t *b, size_t cap)
{
	pthread_mutex_lock(&q->qlock);
	if (!q->spare) {
		q->spare = b;
		q->spare_cap = cap;
		b = NULL;
	}
	pthread_mutex_unlock(&q->qlock);
	free(b);
}

/* Writes queued bytes and, optionally, one more frame: one writev (wlock held). */
static int write_locked(fe_sendq *q, const void *frame, size_t len, const void *payload, size_t plen)
{
	size_t qlen = 0, qcap = 0;
	uint8_t *qb = NULL;
	int err;
	/* Busy from before the queue is taken (its count drops to 0 there) until
	 * the write returns: fe_sendq_busy never sees a gap between the two. */
	atomic_store_explicit(&q->writing, 1, memory_order_release);
	/* Nothing queued: no queue to take (a synchronous call's common case).
	 * Bytes this thread posted earlier are either still counted in pending
	 * or were taken by the sender thread under wlock, which we now hold, so
	 * they are on the wire before this frame either way. */
	if (atomic_load_explicit(&q->pending, memory_order_acquire) == 0) {
		err = atomic_load(&q->err);
	} else {
		pthread_mutex_lock(&q->qlock);
		qb = take_locked(q, &qlen, &qcap);
		err = q->err;
		pthread_mutex_unlock(&q->qlock);
	}
	if (!err) {
		struct iovec iov[3];
		int n = 0;
		if (qlen)
			iov[n++] = (struct iovec){qb, qlen};
		if (len)
			iov[n++] = (struct iovec){(void *)frame, len};
		if (plen)
			iov[n++] = (struct iovec){(void *)payload, plen};
		if (n)
			err = transport_sendv(q->t, iov, n);
	}
	atomic_store_explicit(&q->writing, 0, memory_order_release);
	if (qb)
		give_back(q, qb, qcap);
	if (err) {
		pthread_mutex_lock(&q->qlock);
		if (!q->err)
			q->err = err;
		pthread_mutex_unlock(&q->qlock);
	}
	return err;
}

static void *sender_main(void *arg)
{
	fe_sendq *q = arg;
	pthread_setname_np(pthread_self(), "rg-send");
	rg_spin idle;
	rg_spin_start(&idle, SPIN_NS);
	for (;;) {
		if (atomic_load_explicit(&q->pending, memory_order_acquire) == 0) {
			if (rg_spin_on(&idle)) {
				rg_cpu_relax();
				continue;
			}
			pthread_mutex_lock(&q->qlock);
			while (q->len == 0 && !q->closing) {
				q->sleeping = 1;
				pthread_cond_wait(&q->qcond, &q->qlock);
				q->sleeping = 0;
			}
			int done = q->closing && q->len == 0;
			pthread_mutex_unlock(&q->qlock);
			if (done)
				return NULL;
		}
		pthread_mutex_lock(&q->wlock);
		write_locked(q, NULL, 0, NULL, 0);
		pthread_mutex_unlock(&q->wlock);
		rg_spin_start(&idle, SPIN_NS);
	}
}

int fe_sendq_open(transport_conn *t, fe_sendq **out)
{
	fe_sendq *q = calloc(1, sizeof(*q));
	if (!q)
		return TRANSPORT_ENOMEM;
	q->t = t;
	pthread_mutex_init(&q->wlock, NULL);
	pthread_mutex_init(&q->qlock, NULL);
	pthread_cond_init(&q->qcond, NULL);
	atomic_init(&q->pending, 0);
	atomic_init(&q->err, 0);
	atomic_init(&q->writing, 0);
	if (pthread_create(&q->thread, NULL, sender_main, q) != 0) {
		free(q);
		return TRANSPORT_ENOMEM;
	}
	*out = q;
	return 0;
}

void fe_sendq_close(fe_sendq *q)
{
	pthread_mutex_lock(&q->qlock);
	q->closing = 1;
	pthread_cond_signal(&q->qcond);
	pthread_mutex_unlock(&q->qlock);
	pthread_join(q->thread, NULL);
	free(q->buf);
	free(q->spare);
	free(q);
}

int fe_sendq_write(fe_sendq *q, const void *frame, size_t len, const void *payload, size_t plen)
{
	pthread_mutex_lock(&q->wlock);
	int err = write_locked(q, frame, len, payload, plen);
	pthread_mutex_unlock(&q->wlock);
	return err;
}

/* may_write: a frame that does not fit the queue is written by the caller. */
static int post(fe_sendq *q, const void *frame, size_t len, const void *payload, size_t plen, int may_write)
{
	if (plen > COPY_MAX && may_write)
		return fe_sendq_write(q, frame, len, payload, plen);
	pthread_mutex_lock(&q->qlock);
	int err = q->err;
	if (!err && q->len + len + plen > QUEUE_MAX && may_write) {
		pthread_mutex_unlock(&q->qlock);
		return fe_sendq_write(q, frame, len, payload, plen);
	}
	if (!err && q->len + len + plen > q->cap) {
		size_t cap = q->cap ? q->cap : 64u << 10;
		while (cap < q->len + len + plen)
			cap *= 2;
		uint8_t *b = realloc(q->buf, cap);
		if (!b)
			err = TRANSPORT_ENOMEM;
		else {
			q->buf = b;
			q->cap = cap;
		}
	}
	if (!err) {
		memcpy(q->buf + q->len, frame, len);
		if (plen)
			memcpy(q->buf + q->len + len, payload, plen);
		q->len += len + plen;
		atomic_store_explicit(&q->pending, q->len, memory_order_release);
		if (q->sleeping)
			pthread_cond_signal(&q->qcond);
	}
	pthread_mutex_unlock(&q->qlock);
	return err;
}

int fe_sendq_post(fe_sendq *q, const void *frame, size_t len, const void *payload, size_t plen)
{
	return post(q, frame, len, payload, plen, 1);
}

int fe_sendq_post_nowait(fe_sendq *q, const void *frame, size_t len) { return post(q, frame, len, NULL, 0, 0); }

int fe_sendq_busy(fe_sendq *q)
{
	return atomic_load(&q->pending) > 0 || atomic_load_explicit(&q->writing, memory_order_acquire);
}
