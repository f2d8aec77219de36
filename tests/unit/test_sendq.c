/*
 * The send queue of a call channel (frontend/src/sendq.c), built into this test
 * on its own over a test double of a transport connection that keeps every byte
 * written, counts the writes and who made them, can hold a write (a slow
 * network) and can fail. Checked: the bytes and their order (queued frames
 * before a synchronous one), large payloads written by the caller, the sender
 * thread woken from its sleep, the queue's limit (a poster past it waits for
 * the network, post_nowait never does), close writing what was queued, errors
 * latched, several producers at once (every frame once, in each producer's
 * order), and every block freed at close (the test links with --wrap for
 * calloc, realloc and free and counts the blocks live).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>

#include "alloc_count.h"
#include "check.h"
#include "sendq.h"

#define QUEUE_MAX (1u << 20) /* sendq.c's limits */
#define COPY_MAX (64u << 10)

/* ---- the transport double ---- */

typedef struct fake {
	transport_conn c;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint8_t *got; /* every byte of the writes that succeeded */
	size_t len, cap;
	int calls;      /* sendv calls */
	int main_calls; /* of those, made by the test's main thread */
	int last_iovcnt;
	size_t last_len;
	int hold;    /* writes wait while set */
	int in_send; /* a write is waiting at hold */
	int fail;    /* the error every write returns (0: none) */
} fake;

static pthread_t main_thread;

static int fake_sendv(transport_conn *c, const struct iovec *iov, int n)
{
	fake *f = (fake *)c;
	pthread_mutex_lock(&f->mu);
	f->calls++;
	if (pthread_equal(pthread_self(), main_thread))
		f->main_calls++;
	f->in_send = 1;
	pthread_cond_broadcast(&f->cv);
	while (f->hold)
		pthread_cond_wait(&f->cv, &f->mu);
	f->in_send = 0;
	int err = f->fail;
	size_t total = 0;
	for (int i = 0; i < n; i++)
		total += iov[i].iov_len;
	f->last_iovcnt = n;
	f->last_len = total;
	if (!err) {
		if (f->len + total > f->cap) {
			size_t cap = f->cap ? f->cap : 1 << 16;
			while (cap < f->len + total)
				cap *= 2;
			f->got = __real_realloc(f->got, cap);
			f->cap = cap;
		}
		for (int i = 0; i < n; i++) {
			memcpy(f->got + f->len, iov[i].iov_base, iov[i].iov_len);
			f->len += iov[i].iov_len;
		}
	}
	pthread_cond_broadcast(&f->cv);
	pthread_mutex_unlock(&f->mu);
	return err;
}

static const transport_ops fake_ops = {.scheme = "fake", .sendv = fake_sendv};

static void fake_init(fake *f)
{
	memset(f, 0, sizeof(*f));
	f->c.ops = &fake_ops;
	pthread_mutex_init(&f->mu, NULL);
	pthread_cond_init(&f->cv, NULL);
}

static void fake_free(fake *f)
{
	__real_free(f->got);
	pthread_mutex_destroy(&f->mu);
	pthread_cond_destroy(&f->cv);
}

static void fake_hold(fake *f, int on)
{
	pthread_mutex_lock(&f->mu);
	f->hold = on;
	pthread_cond_broadcast(&f->cv);
	pthread_mutex_unlock(&f->mu);
}

static int fake_get(fake *f, int *field)
{
	pthread_mutex_lock(&f->mu);
	int v = *field;
	pthread_mutex_unlock(&f->mu);
	return v;
}

/* Waits (at most 10 s: a lost wake-up fails rather than hangs) until a write
 * waits at hold (len 0) or len bytes have arrived. */
static int fake_wait(fake *f, size_t len)
{
	struct timespec dl;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 10;
	pthread_mutex_lock(&f->mu);
	int r = 0;
	while (len ? f->len < len : !f->in_send)
		if ((r = pthread_cond_timedwait(&f->cv, &f->mu, &dl)) != 0)
			break;
	pthread_mutex_unlock(&f->mu);
	return r == 0;
}

/* ---- frames: producer, seq, length, then bytes that follow from them ---- */

#define HDR 12

static size_t frame_make(uint8_t *b, uint32_t producer, uint32_t seq, uint32_t len)
{
	memcpy(b, &producer, 4);
	memcpy(b + 4, &seq, 4);
	memcpy(b + 8, &len, 4);
	for (uint32_t i = HDR; i < len; i++)
		b[i] = (uint8_t)(producer * 131 + seq * 7 + i);
	return len;
}

static uint8_t *frame_new(uint32_t producer, uint32_t seq, uint32_t len)
{
	uint8_t *b = __real_calloc(1, len);
	frame_make(b, producer, seq, len);
	return b;
}

/* Posts frame (producer, seq) of len bytes, its first hlen as the frame and the
 * rest as the payload (how conn.c hands a header and a caller's buffer). */
static int post_split(fe_sendq *q, uint32_t producer, uint32_t seq, uint32_t len, uint32_t hlen)
{
	uint8_t *b = frame_new(producer, seq, len);
	int r = fe_sendq_post(q, b, hlen, b + hlen, len - hlen);
	__real_free(b);
	return r;
}

static int post_one(fe_sendq *q, uint32_t producer, uint32_t seq, uint32_t len)
{
	uint8_t b[512];
	frame_make(b, producer, seq, len);
	return fe_sendq_post(q, b, len, NULL, 0);
}

/* Walks a stream of frames: per producer (< 8) the seqs seen must run 0, 1, ...
 * and every byte be right. Returns the number of frames; -1 at the first wrong one. */
static long stream_check(const uint8_t *s, size_t len, uint32_t next[8])
{
	long n = 0;
	size_t off = 0;
	while (off < len) {
		uint32_t p, seq, flen;
		if (len - off < HDR)
			return -1;
		memcpy(&p, s + off, 4);
		memcpy(&seq, s + off + 4, 4);
		memcpy(&flen, s + off + 8, 4);
		if (p >= 8 || seq != next[p] || flen < HDR || flen > len - off) {
			fprintf(stderr, "    frame %ld at %zu: producer %u seq %u (want %u) len %u\n", n, off, p, seq,
				p < 8 ? next[p] : 0, flen);
			return -1;
		}
		for (uint32_t i = HDR; i < flen; i++)
			if (s[off + i] != (uint8_t)(p * 131 + seq * 7 + i)) {
				fprintf(stderr, "    frame %ld (producer %u seq %u): byte %u wrong\n", n, p, seq, i);
				return -1;
			}
		next[p]++;
		off += flen;
		n++;
	}
	return n;
}

/* ---- tests ---- */

/* A queue over a fresh double; rig_free checks that every block the queue
 * allocated was freed (after fe_sendq_close). */
typedef struct rig {
	fake f;
	fe_sendq *q;
	long b0;
} rig;

static int rig_open(rig *r)
{
	fake_init(&r->f);
	r->b0 = atomic_load(&alloc_blocks);
	if (CHECK_EQ(fe_sendq_open(&r->f.c, &r->q), 0))
		return 1;
	fake_free(&r->f);
	return 0;
}

static void rig_free(rig *r)
{
	CHECK_EQ(atomic_load(&alloc_blocks), r->b0);
	fake_free(&r->f);
}

/* A test of one queue, which closes it. */
static void run(void (*test)(fake *f, fe_sendq *q))
{
	rig r;
	if (!rig_open(&r))
		return;
	test(&r.f, r.q);
	rig_free(&r);
}

/* Queued frames, with and without payloads, and a ping, then a synchronous
 * frame: every byte once, in order; the caller wrote once (the sync frame). */
static void test_order(fake *f, fe_sendq *q)
{
	size_t total = 0;
	for (uint32_t i = 0; i < 10; i++) {
		uint32_t len = HDR + 17 * i;
		CHECK_EQ(i % 2 ? post_split(q, 0, i, len, HDR) : post_one(q, 0, i, len), 0);
		total += len;
	}
	uint8_t ping[HDR];
	frame_make(ping, 0, 10, HDR);
	CHECK_EQ(fe_sendq_post_nowait(q, ping, HDR), 0);
	uint8_t *sync = frame_new(0, 11, 1000);
	CHECK_EQ(fe_sendq_write(q, sync, 24, sync + 24, 1000 - 24), 0);
	__real_free(sync);
	total += HDR + 1000;
	/* fe_sendq_write returns once the queue before it and its frame are written */
	CHECK_EQ(f->len, total);
	uint32_t next[8] = {0};
	CHECK_EQ(stream_check(f->got, f->len, next), 12);
	CHECK_EQ(f->main_calls, 1);
	CHECK_EQ(fe_sendq_busy(q), 0);

	/* a write with nothing queued and no frame: no call */
	int calls = fake_get(f, &f->calls);
	CHECK_EQ(fe_sendq_write(q, NULL, 0, NULL, 0), 0);
	CHECK_EQ(fake_get(f, &f->calls), calls);

	fe_sendq_close(q);
}

/* Payloads over COPY_MAX go out from the caller's buffer, by the caller, after
 * what was queued; COPY_MAX itself is copied and left to the sender. */
static void test_large(fake *f, fe_sendq *q)
{
	CHECK_EQ(post_one(q, 1, 0, 100), 0);
	CHECK_EQ(post_split(q, 1, 1, 64 + COPY_MAX, 64), 0); /* payload exactly COPY_MAX: queued */
	CHECK_EQ(fake_get(f, &f->main_calls), 0);
	CHECK(fake_wait(f, 100 + 64 + COPY_MAX));
	CHECK_EQ(fake_get(f, &f->main_calls), 0);

	CHECK_EQ(post_one(q, 1, 2, 200), 0);
	CHECK_EQ(post_split(q, 1, 3, 64 + COPY_MAX + 1, 64), 0);
	/* written when post returned, by this thread */
	pthread_mutex_lock(&f->mu);
	CHECK_EQ(f->main_calls, 1);
	CHECK_EQ(f->len, 100 + 64 + COPY_MAX + 200 + 64 + COPY_MAX + 1);
	CHECK_EQ(f->last_len, f->last_iovcnt == 3 ? 200 + 64 + COPY_MAX + 1 : 64 + COPY_MAX + 1);
	uint32_t next[8] = {0};
	CHECK_EQ(stream_check(f->got, f->len, next), 4);
	pthread_mutex_unlock(&f->mu);

	fe_sendq_close(q);
}

/* The sender spins a while (50 us) and then sleeps: a post must wake it,
 * whether it sleeps long or is just going to. */
static void test_wakeup(fake *f, fe_sendq *q)
{
	size_t total = 0;
	int lost = 0;
	uint32_t seq = 0;
	for (int i = 0; i < 20; i++) { /* asleep */
		struct timespec ts = {0, 2000000};
		nanosleep(&ts, NULL);
		CHECK_EQ(post_one(q, 2, seq++, 40), 0);
		total += 40;
		if ((lost = !fake_wait(f, total)) != 0)
			break;
	}
	for (int i = 0; i < 2000 && !lost; i++) { /* spinning, or just going to sleep */
		if (i % 100 == 0) {
			struct timespec ts = {0, (long)(i / 100) * 5000};
			nanosleep(&ts, NULL);
		}
		CHECK_EQ(post_one(q, 2, seq++, 40), 0);
		total += 40;
		lost = !fake_wait(f, total);
	}
	CHECK_EQ(lost, 0);
	CHECK_EQ(fake_get(f, &f->main_calls), 0);
	uint32_t next[8] = {0};
	if (!lost)
		CHECK_EQ(stream_check(f->got, f->len, next), 2020);
	fe_sendq_close(q);
}

typedef struct poster {
	fe_sendq *q;
	const uint8_t *frame;
	size_t len;
	atomic_int done;
	int ret;
} poster;

static void *post_main(void *arg)
{
	poster *p = arg;
	p->ret = fe_sendq_post(p->q, p->frame, p->len, NULL, 0);
	atomic_store(&p->done, 1);
	return NULL;
}

static void *close_main(void *arg)
{
	poster *p = arg;
	fe_sendq_close(p->q);
	atomic_store(&p->done, 1);
	return NULL;
}

static void pause_ms(long ms)
{
	struct timespec ts = {0, ms * 1000000};
	nanosleep(&ts, NULL);
}

/* The network is held (a write waits): posts queue up to QUEUE_MAX without
 * waiting; past it, post_nowait still queues, a post waits until the network
 * takes the queue and then writes its frame after it. */
static void test_limit(fake *f, fe_sendq *q)
{
	fake_hold(f, 1);
	CHECK_EQ(post_one(q, 3, 0, 100), 0);
	CHECK(fake_wait(f, 0)); /* the sender is in the held write */
	size_t total = 100;
	for (uint32_t i = 1; i <= QUEUE_MAX / (64u << 10); i++) { /* exactly QUEUE_MAX bytes */
		CHECK_EQ(post_split(q, 3, i, 64u << 10, 16), 0);
		total += 64u << 10;
	}
	CHECK_EQ(fe_sendq_busy(q), 1);
	uint8_t ping[HDR], last[HDR];
	frame_make(ping, 3, 17, HDR);
	frame_make(last, 3, 18, HDR);
	CHECK_EQ(fe_sendq_post_nowait(q, ping, HDR), 0); /* past the limit, queued */
	poster p = {.q = q, .frame = last, .len = HDR};
	pthread_t th;
	pthread_create(&th, NULL, post_main, &p);
	pause_ms(50);
	CHECK_EQ(atomic_load(&p.done), 0); /* waits for the held write */
	CHECK_EQ(fake_get(f, &f->calls), 1);
	CHECK_EQ(fake_get(f, &f->main_calls), 0);
	fake_hold(f, 0);
	pthread_join(th, NULL);
	CHECK_EQ(p.ret, 0);
	total += 2 * HDR;
	CHECK(fake_wait(f, total));
	pthread_mutex_lock(&f->mu);
	CHECK_EQ(f->len, total);
	uint32_t next[8] = {0};
	CHECK_EQ(stream_check(f->got, f->len, next), 19);
	/* the held frame; then the queue and the poster's frame, in one write or two */
	CHECK(f->calls == 2 || f->calls == 3);
	pthread_mutex_unlock(&f->mu);
	fe_sendq_close(q);
}

/* Close while frames are queued behind a held write: close waits, the queue
 * goes out in one write, nothing after, every block freed. */
static void test_close_queued(fake *f, fe_sendq *q)
{
	fake_hold(f, 1);
	CHECK_EQ(post_one(q, 4, 0, 50), 0);
	CHECK(fake_wait(f, 0));
	size_t queued = 0;
	for (uint32_t i = 1; i <= 100; i++) {
		CHECK_EQ(post_one(q, 4, i, HDR + i), 0);
		queued += HDR + i;
	}
	poster p = {.q = q};
	pthread_t th;
	pthread_create(&th, NULL, close_main, &p);
	pause_ms(50);
	CHECK_EQ(atomic_load(&p.done), 0);
	fake_hold(f, 0);
	pthread_join(th, NULL);
	CHECK_EQ(f->calls, 2);
	CHECK_EQ(f->last_iovcnt, 1);
	CHECK_EQ(f->last_len, queued);
	CHECK_EQ(f->len, 50 + queued);
	uint32_t next[8] = {0};
	CHECK_EQ(stream_check(f->got, f->len, next), 101);
}

/* Close right after a post, while the sender spins, sleeps or wakes: what was
 * posted goes out all the same. */
static void test_close_posted(void)
{
	int bad = 0;
	for (int i = 0; i < 300 && !bad; i++) {
		rig r;
		if (!rig_open(&r))
			return;
		if (i % 3)
			pause_ms(i % 3); /* asleep */
		for (uint32_t s = 0; s < (uint32_t)i % 5 + 1; s++)
			bad += post_one(r.q, 6, s, HDR + s) != 0;
		fe_sendq_close(r.q);
		uint32_t next[8] = {0};
		bad += stream_check(r.f.got, r.f.len, next) != i % 5 + 1;
		rig_free(&r);
	}
	CHECK_EQ(bad, 0);
}

/* Close right after open (the sender spinning) and after it fell asleep. */
static void test_close_idle(void)
{
	for (int i = 0; i < 2; i++) {
		rig r;
		if (!rig_open(&r))
			return;
		if (i)
			pause_ms(20);
		fe_sendq_close(r.q);
		CHECK_EQ(r.f.calls, 0);
		rig_free(&r);
	}
}

/* A failed write is latched: the first error answers every later post and
 * write, which queue and write nothing. */
static void test_error(fake *f, fe_sendq *q)
{
	f->fail = TRANSPORT_EIO; /* before any write: no race with the sender */
	CHECK_EQ(post_one(q, 5, 0, 64), 0);
	/* the sender's write failed, or this one takes the queue and fails */
	CHECK_EQ(post_split(q, 5, 1, 64 + COPY_MAX + 1, 64), TRANSPORT_EIO);
	CHECK_EQ(fake_get(f, &f->calls), 1);
	pthread_mutex_lock(&f->mu);
	f->fail = TRANSPORT_ECLOSED;
	pthread_mutex_unlock(&f->mu);
	CHECK_EQ(post_one(q, 5, 2, 64), TRANSPORT_EIO);
	uint8_t b[HDR];
	frame_make(b, 5, 3, HDR);
	CHECK_EQ(fe_sendq_post_nowait(q, b, HDR), TRANSPORT_EIO);
	CHECK_EQ(fe_sendq_write(q, b, HDR, NULL, 0), TRANSPORT_EIO);
	CHECK_EQ(fe_sendq_busy(q), 0); /* nothing was queued */
	CHECK_EQ(fake_get(f, &f->calls), 1);
	CHECK_EQ(f->len, 0);
	fe_sendq_close(q);
	CHECK_EQ(fake_get(f, &f->calls), 1);
}

/* A synchronous write that fails answers its own error. */
static void test_error_sync(fake *f, fe_sendq *q)
{
	uint8_t b[HDR];
	frame_make(b, 5, 0, HDR);
	f->fail = TRANSPORT_ECLOSED;
	CHECK_EQ(fe_sendq_write(q, b, HDR, NULL, 0), TRANSPORT_ECLOSED);
	CHECK_EQ(f->main_calls, 1);
	CHECK_EQ(fe_sendq_post(q, b, HDR, NULL, 0), TRANSPORT_ECLOSED);
	fe_sendq_close(q);
	CHECK_EQ(f->calls, 1);
}

#define PRODUCERS 4
#define PER_PRODUCER 5000

typedef struct producer {
	fe_sendq *q;
	uint32_t id;
	size_t bytes;
	int errors;
} producer;

/* Mostly posts of 12 to 300 bytes; every 50th a ping, every 97th a synchronous
 * write, every 1000th a payload over COPY_MAX. */
static void *producer_main(void *arg)
{
	producer *p = arg;
	uint8_t b[512];
	for (uint32_t s = 0; s < PER_PRODUCER; s++) {
		uint32_t len = HDR + (s * 37 + p->id * 11) % 289;
		int r;
		if (s % 1000 == 999) {
			len = 32 + COPY_MAX + 5;
			r = post_split(p->q, p->id, s, len, 32);
		} else if (s % 97 == 96) {
			frame_make(b, p->id, s, len);
			r = fe_sendq_write(p->q, b, HDR, b + HDR, len - HDR);
		} else if (s % 50 == 49) {
			frame_make(b, p->id, s, len);
			r = fe_sendq_post_nowait(p->q, b, len);
		} else {
			r = post_one(p->q, p->id, s, len);
		}
		p->errors += r != 0;
		p->bytes += len;
	}
	return NULL;
}

static void test_producers(fake *f, fe_sendq *q)
{
	producer p[PRODUCERS];
	pthread_t th[PRODUCERS];
	for (uint32_t i = 0; i < PRODUCERS; i++) {
		p[i] = (producer){.q = q, .id = i};
		pthread_create(&th[i], NULL, producer_main, &p[i]);
	}
	size_t total = 0;
	for (int i = 0; i < PRODUCERS; i++) {
		pthread_join(th[i], NULL);
		CHECK_EQ(p[i].errors, 0);
		total += p[i].bytes;
	}
	fe_sendq_close(q); /* writes what is still queued */
	CHECK_EQ(f->len, total);
	uint32_t next[8] = {0};
	CHECK_EQ(stream_check(f->got, f->len, next), PRODUCERS * PER_PRODUCER);
	for (int i = 0; i < PRODUCERS; i++)
		CHECK_EQ(next[i], PER_PRODUCER);
}

int main(void)
{
	main_thread = pthread_self();
	run(test_order);
	run(test_large);
	run(test_wakeup);
	run(test_limit);
	run(test_close_queued);
	test_close_posted();
	test_close_idle();
	run(test_error);
	run(test_error_sync);
	run(test_producers);
	return check_summary("test_sendq");
}
