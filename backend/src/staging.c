/*
 * Pinned staging pool (staging.h). The mutex guards only bookkeeping (a free
 * list, busy flags, demand counters); driver calls that allocate or free
 * pinned memory happen outside it, so the loop thread never waits behind a
 * cuMemHostAlloc.
 */
#include "staging.h"

#include <stdlib.h>
#include <time.h>

#include "driver.h"
#include "rg_clock.h"
#include "rg_log.h"

#define BIG_ROUND (1u << 20)

static void *pinned_alloc(size_t len);
static void pinned_free(void *p);
static int take_idle(be_staging *st, size_t len, be_buf *out);
static int chunk_add(be_staging *st, be_buf *out);

static void *pinned_alloc(size_t len)
{
	void *p = NULL;
	/* Portable: pinned for every context of the session (one per served
	 * device), whichever device's frame grew the pool. */
	CUresult r = be_drv.cuMemHostAlloc(&p, len, CU_MEMHOSTALLOC_PORTABLE);
	if (r != CUDA_SUCCESS) {
		LOG_WARN("backend", "cuMemHostAlloc(%zu): %s", len, be_driver_error_name(r));
		return NULL;
	}
	return p;
}

static void pinned_free(void *p)
{
	CUresult r = be_drv.cuMemFreeHost(p);
	if (r != CUDA_SUCCESS)
		LOG_WARN("backend", "cuMemFreeHost: %s", be_driver_error_name(r));
}

/* A failed registration only costs the copy through the transport's rings. */
static transport_mr *reg(be_staging *st, void *p, size_t len)
{
	transport_mr *mr = NULL;
	if (st->conn && transport_reg_mem(st->conn, p, len, &mr) != 0) {
		LOG_INFO("backend", "%s: staging buffer of %zu bytes not registered: copies through the transport",
			 st->conn->peer, len);
		mr = NULL;
	}
	return mr;
}

static void dereg(be_staging *st, transport_mr *mr)
{
	if (mr)
		transport_dereg_mem(st->conn, mr);
}

void be_staging_set_conn(be_staging *st, transport_conn *conn) { st->conn = conn; }

int be_staging_init(be_staging *st, size_t chunk_size, unsigned max_chunks, size_t big_max)
{
	*st = (be_staging){.chunk_size = chunk_size, .max_chunks = max_chunks, .big_max = big_max};
	st->all = calloc(max_chunks ? max_chunks : 1, sizeof(void *));
	st->free = calloc(max_chunks ? max_chunks : 1, sizeof(void *));
	st->mrs = calloc(max_chunks ? max_chunks : 1, sizeof(transport_mr *));
	if (!st->all || !st->free || !st->mrs) {
		free(st->all);
		free(st->free);
		free(st->mrs);
		return -1;
	}
	pthread_mutex_init(&st->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&st->idle, &ca);
	pthread_condattr_destroy(&ca);
	return 0;
}

/* Caller holds mu. An idle pinned buffer that fits, and records what was
 * missing for the next grow. Returns 1 when out was filled. */
static int take_idle(be_staging *st, size_t len, be_buf *out)
{
	if (len <= st->chunk_size) {
		if (st->nfree) {
			*out = (be_buf){st->free[--st->nfree], st->chunk_size, BE_BUF_CHUNK};
			return 1;
		}
		if (st->nchunks + st->want_chunks < st->max_chunks)
			st->want_chunks++;
		return 0;
	}
	/* The smallest that fits, so a smaller copy leaves the larger for the
	 * larger copy that may come at the same time. */
	int best = -1;
	for (int i = 0; i < BE_STAGING_BIGS; i++)
		if (st->big[i] && !st->big_busy[i] && st->big_cap[i] >= len &&
		    (best < 0 || st->big_cap[i] < st->big_cap[best]))
			best = i;
	if (best >= 0) {
		st->big_busy[best] = 1;
		*out = (be_buf){st->big[best], st->big_cap[best], BE_BUF_BIG};
		return 1;
	}
	if (len <= st->big_max && len > st->want_big)
		st->want_big = len;
	return 0;
}

int be_staging_take_idle(be_staging *st, size_t len, be_buf *out)
{
	*out = (be_buf){0};
	pthread_mutex_lock(&st->mu);
	int got = len && take_idle(st, len, out);
	pthread_mutex_unlock(&st->mu);
	return got ? 0 : -1;
}

int be_staging_take_nb(be_staging *st, size_t len, be_buf *out)
{
	*out = (be_buf){0};
	if (len == 0)
		return 0;
	pthread_mutex_lock(&st->mu);
	int got = take_idle(st, len, out);
	if (!got)
		st->fallbacks++;
	pthread_mutex_unlock(&st->mu);
	if (got)
		return 0;
	void *p = malloc(len);
	if (!p)
		return -1;
	*out = (be_buf){p, len, BE_BUF_MALLOC};
	return 0;
}

/* The big slot to (re)grow for len bytes (mu held): an idle one too small
 * (replaced, so one copy size never costs two buffers), else an empty one;
 * -1 when every slot is busy or already fits. */
static int regrow_slot(const be_staging *st, size_t len)
{
	for (int i = 0; i < BE_STAGING_BIGS; i++)
		if (st->big[i] && !st->big_busy[i] && st->big_cap[i] < len)
			return i;
	for (int i = 0; i < BE_STAGING_BIGS; i++)
		if (!st->big[i] && !st->big_busy[i])
			return i;
	return -1;
}

/* Replaces an idle big buffer too small for len (or fills an empty slot) by
 * one of at least len bytes and hands it to the caller (busy). Returns 0 when
 * every slot is in use or the allocation fails. */
static int big_regrow(be_staging *st, size_t len, be_buf *out)
{
	void *old;
	size_t cap = (len + BIG_ROUND - 1) / BIG_ROUND * BIG_ROUND;

	if (cap > st->big_max)
		cap = len;
	pthread_mutex_lock(&st->mu);
	int i = regrow_slot(st, len);
	if (i < 0) {
		pthread_mutex_unlock(&st->mu);
		return 0;
	}
	old = st->big[i];
	transport_mr *old_mr = st->big_mr[i];
	st->big[i] = NULL;
	st->big_mr[i] = NULL;
	st->big_cap[i] = 0;
	st->big_busy[i] = 1; /* reserved while we reallocate */
	pthread_mutex_unlock(&st->mu);

	dereg(st, old_mr);
	if (old)
		pinned_free(old);
	void *p = pinned_alloc(cap);
	transport_mr *mr = p ? reg(st, p, cap) : NULL;
	pthread_mutex_lock(&st->mu);
	if (!p) {
		st->failed_ns = rg_clock_ns() | 1;
		st->big_busy[i] = 0;
		pthread_cond_broadcast(&st->idle);
		pthread_mutex_unlock(&st->mu);
		return 0;
	}
	st->big[i] = p;
	st->big_mr[i] = mr;
	st->big_cap[i] = cap;
	if (st->want_big <= cap)
		st->want_big = 0;
	pthread_mutex_unlock(&st->mu);
	*out = (be_buf){p, cap, BE_BUF_BIG};
	return 1;
}

/* Whether a taker may try to allocate: not within BE_STAGING_RETRY_MS of a
 * failed allocation, which would only fail again and log (mu held). */
static int may_alloc(const be_staging *st)
{
	return !st->failed_ns || rg_clock_ns() - st->failed_ns >= BE_STAGING_RETRY_MS * 1000000ull;
}

static struct timespec deadline(unsigned ms)
{
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (long)(ms % 1000) * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	return until;
}

int be_staging_take_wait(be_staging *st, size_t len, unsigned ms, CUcontext ctx, be_buf *out)
{
	*out = (be_buf){0};
	if (len <= st->chunk_size || len > st->big_max)
		return be_staging_take_nb(st, len, out);
	struct timespec until = deadline(ms);
	int got, grow = 0, late = 0;
	pthread_mutex_lock(&st->mu);
	for (;;) {
		if ((got = take_idle(st, len, out)))
			break;
		/* None idle fits: an idle or empty slot is regrown here (also
		 * while a busy buffer would fit: copies overlap, and the second
		 * buffer pinned now keeps the executor, which would otherwise
		 * pin it after its batch, off that tens-of-milliseconds call);
		 * with every slot busy, one is waited for. */
		if (regrow_slot(st, len) >= 0) {
			grow = may_alloc(st);
			break;
		}
		if (late)
			break;
		late = pthread_cond_timedwait(&st->idle, &st->mu, &until) != 0;
	}
	pthread_mutex_unlock(&st->mu);
	if (got || (grow && (!ctx || be_drv.cuCtxSetCurrent(ctx) == CUDA_SUCCESS) && big_regrow(st, len, out)))
		return 0;
	return be_staging_take_nb(st, len, out);
}

/* Executor: one more pool chunk, handed out at once, if the pool may grow.
 * all[] and nchunks only change on the executor (here and in grow), so the
 * check and the append need not be one critical section. */
static int chunk_add(be_staging *st, be_buf *out)
{
	pthread_mutex_lock(&st->mu);
	int room = st->nchunks < st->max_chunks;
	pthread_mutex_unlock(&st->mu);
	void *p = room ? pinned_alloc(st->chunk_size) : NULL;
	if (!p)
		return 0;
	transport_mr *mr = reg(st, p, st->chunk_size);
	pthread_mutex_lock(&st->mu);
	st->mrs[st->nchunks] = mr;
	st->all[st->nchunks++] = p;
	if (st->want_chunks)
		st->want_chunks--; /* take_idle counted this shortfall */
	pthread_mutex_unlock(&st->mu);
	*out = (be_buf){p, st->chunk_size, BE_BUF_CHUNK};
	return 1;
}

int be_staging_take(be_staging *st, size_t len, be_buf *out)
{
	*out = (be_buf){0};
	if (len == 0)
		return 0;
	pthread_mutex_lock(&st->mu);
	int got = take_idle(st, len, out);
	pthread_mutex_unlock(&st->mu);
	if (got)
		return 0;
	if (len <= st->chunk_size && chunk_add(st, out))
		return 0;
	if (len > st->chunk_size && len <= st->big_max && big_regrow(st, len, out))
		return 0;
	/* A chunk-sized copy with every chunk busy, a big one while the big buffers
	 * are busy, or one beyond big_max: pinned memory for this copy alone. */
	void *p = pinned_alloc(len);
	if (p) {
		*out = (be_buf){p, len, BE_BUF_PINNED};
		return 0;
	}
	pthread_mutex_lock(&st->mu);
	st->fallbacks++;
	pthread_mutex_unlock(&st->mu);
	p = malloc(len);
	if (!p)
		return -1;
	*out = (be_buf){p, len, BE_BUF_MALLOC};
	return 0;
}

void be_staging_grow(be_staging *st, unsigned min_chunks)
{
	unsigned n;
	size_t want_big;

	pthread_mutex_lock(&st->mu);
	n = st->want_chunks;
	if (st->nchunks + n < min_chunks)
		n = min_chunks - st->nchunks;
	if (st->nchunks + n > st->max_chunks)
		n = st->max_chunks - st->nchunks;
	st->want_chunks = 0;
	want_big = st->want_big && regrow_slot(st, st->want_big) >= 0 ? st->want_big : 0;
	pthread_mutex_unlock(&st->mu);

	for (unsigned i = 0; i < n; i++) {
		void *p = pinned_alloc(st->chunk_size);
		if (!p)
			break;
		transport_mr *mr = reg(st, p, st->chunk_size);
		pthread_mutex_lock(&st->mu);
		st->mrs[st->nchunks] = mr;
		st->all[st->nchunks++] = p;
		st->free[st->nfree++] = p;
		pthread_mutex_unlock(&st->mu);
	}
	if (want_big) {
		be_buf b;
		if (big_regrow(st, want_big, &b))
			be_staging_release(st, &b);
		else {
			pthread_mutex_lock(&st->mu);
			st->want_big = 0; /* do not retry a failing allocation on every batch */
			pthread_mutex_unlock(&st->mu);
		}
	}
}

void be_staging_release(be_staging *st, be_buf *b)
{
	switch (b->kind) {
	case BE_BUF_CHUNK:
		pthread_mutex_lock(&st->mu);
		st->free[st->nfree++] = b->p;
		pthread_mutex_unlock(&st->mu);
		break;
	case BE_BUF_BIG:
		pthread_mutex_lock(&st->mu);
		for (int i = 0; i < BE_STAGING_BIGS; i++)
			if (st->big[i] == b->p)
				st->big_busy[i] = 0;
		pthread_cond_broadcast(&st->idle);
		pthread_mutex_unlock(&st->mu);
		break;
	case BE_BUF_PINNED:
		pinned_free(b->p);
		break;
	case BE_BUF_MALLOC:
		free(b->p);
		break;
	default:
		break;
	}
	*b = (be_buf){0};
}

void be_staging_destroy(be_staging *st)
{
	if (!st->all)
		return;
	int bigs_busy = 0;
	for (int i = 0; i < BE_STAGING_BIGS; i++)
		bigs_busy += st->big_busy[i];
	if (st->nfree != st->nchunks || bigs_busy)
		LOG_ERROR("backend", "staging pool destroyed with %u of %u chunks and %d big buffers in use",
			  st->nchunks - st->nfree, st->nchunks, bigs_busy);
	for (unsigned i = 0; i < st->nchunks; i++) {
		dereg(st, st->mrs[i]);
		pinned_free(st->all[i]);
	}
	for (int i = 0; i < BE_STAGING_BIGS; i++) {
		dereg(st, st->big_mr[i]);
		if (st->big[i])
			pinned_free(st->big[i]);
	}
	free(st->all);
	free(st->free);
	free(st->mrs);
	pthread_mutex_destroy(&st->mu);
	pthread_cond_destroy(&st->idle);
	*st = (be_staging){0};
}
