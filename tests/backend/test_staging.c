/*
 * Unit tests of the pinned staging pool (backend/src/staging.c), with the
 * driver functions it calls replaced by counting fakes. As the driver does,
 * the fake cuMemHostAlloc needs a context current on the calling thread: the
 * main thread plays the executor (EXEC_CTX), fresh threads a stripe
 * connection's, which has none until the pool makes the one it is given
 * current.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "driver.h"
#include "rg_clock.h"
#include "staging.h"

struct be_driver be_drv;
static atomic_int pinned_live, pinned_allocs, alloc_tries, fail_alloc;
static _Thread_local CUcontext cur_ctx;

#define EXEC_CTX ((CUcontext)(uintptr_t)0x1000)
#define STRIPE_CTX ((CUcontext)(uintptr_t)0x2000)

static CUresult fake_set_current(CUcontext c)
{
	cur_ctx = c;
	return CUDA_SUCCESS;
}

static CUresult fake_host_alloc(void **p, size_t len, unsigned flags)
{
	atomic_fetch_add(&alloc_tries, 1);
	if (!cur_ctx)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (atomic_load(&fail_alloc))
		return CUDA_ERROR_OUT_OF_MEMORY;
	*p = malloc(len);
	if (!*p)
		return CUDA_ERROR_OUT_OF_MEMORY;
	atomic_fetch_add(&pinned_live, 1);
	atomic_fetch_add(&pinned_allocs, 1);
	return CUDA_SUCCESS;
}

static CUresult fake_free_host(void *p)
{
	if (!cur_ctx)
		return CUDA_ERROR_INVALID_CONTEXT; /* leaks: pinned_live tells */
	free(p);
	atomic_fetch_sub(&pinned_live, 1);
	return CUDA_SUCCESS;
}

const char *be_driver_error_name(CUresult r) { return "fake error"; }

#define CHUNK 4096u
#define MiB (1u << 20) /* big buffers are whole MiB */

static void test_chunks(void)
{
	be_staging st;
	be_buf b[4];

	CHECK_EQ(be_staging_init(&st, CHUNK, 3, 4 * CHUNK), 0);
	/* Before any grow (no context yet) the loop thread gets malloc'd memory. */
	CHECK_EQ(be_staging_take_nb(&st, 100, &b[0]), 0);
	CHECK_EQ(b[0].kind, BE_BUF_MALLOC);
	CHECK(b[0].p != NULL && b[0].cap >= 100);
	be_staging_release(&st, &b[0]);
	CHECK_EQ(b[0].kind, BE_BUF_NONE);

	be_staging_grow(&st, 2);
	CHECK_EQ(st.nchunks, 2);
	CHECK_EQ(atomic_load(&pinned_live), 2);
	CHECK_EQ(be_staging_take_nb(&st, CHUNK, &b[0]), 0);
	CHECK_EQ(be_staging_take_nb(&st, 1, &b[1]), 0);
	CHECK_EQ(b[0].kind, BE_BUF_CHUNK);
	CHECK_EQ(b[1].kind, BE_BUF_CHUNK);
	CHECK(b[0].p != b[1].p);
	/* pool empty: malloc, never a wait; the shortfall is remembered */
	CHECK_EQ(be_staging_take_nb(&st, 10, &b[2]), 0);
	CHECK_EQ(b[2].kind, BE_BUF_MALLOC);
	memset(b[2].p, 0xab, 10);
	be_staging_release(&st, &b[2]);
	be_staging_grow(&st, 0); /* the executor adds the missing chunk, up to the max */
	CHECK_EQ(st.nchunks, 3);
	CHECK_EQ(be_staging_take_nb(&st, 10, &b[2]), 0);
	CHECK_EQ(b[2].kind, BE_BUF_CHUNK);
	CHECK_EQ(be_staging_take_nb(&st, 10, &b[3]), 0);
	CHECK_EQ(b[3].kind, BE_BUF_MALLOC);
	be_staging_release(&st, &b[3]);
	be_staging_grow(&st, 0);
	CHECK_EQ(st.nchunks, 3); /* never beyond max_chunks */
	/* released chunks come back */
	be_staging_release(&st, &b[1]);
	CHECK_EQ(be_staging_take_nb(&st, 10, &b[1]), 0);
	CHECK_EQ(b[1].kind, BE_BUF_CHUNK);
	for (int i = 0; i < 3; i++)
		be_staging_release(&st, &b[i]);
	CHECK_EQ(st.nfree, 3);
	/* zero bytes: no buffer at all */
	CHECK_EQ(be_staging_take_nb(&st, 0, &b[0]), 0);
	CHECK_EQ(b[0].kind, BE_BUF_NONE);
	be_staging_destroy(&st);
	CHECK_EQ(atomic_load(&pinned_live), 0);
}

static void test_big(void)
{
	be_staging st;
	be_buf a, b;

	CHECK_EQ(be_staging_init(&st, CHUNK, 2, 64u << 20), 0);
	/* larger than a chunk, nothing big yet: malloc on the loop thread */
	CHECK_EQ(be_staging_take_nb(&st, 3 * CHUNK, &a), 0);
	CHECK_EQ(a.kind, BE_BUF_MALLOC);
	be_staging_release(&st, &a);
	be_staging_grow(&st, 0); /* allocates the big buffer the loop asked for */
	CHECK(st.big[0] != NULL && st.big_cap[0] >= 3 * CHUNK && st.big[1] == NULL);
	CHECK_EQ(be_staging_take_nb(&st, 3 * CHUNK, &a), 0);
	CHECK_EQ(a.kind, BE_BUF_BIG);
	/* the big buffer is busy: another big copy gets malloc, and the next
	 * grow adds a second big buffer for such overlaps */
	CHECK_EQ(be_staging_take_nb(&st, 2 * CHUNK, &b), 0);
	CHECK_EQ(b.kind, BE_BUF_MALLOC);
	be_staging_release(&st, &b);
	be_staging_grow(&st, 0);
	CHECK(st.big[1] != NULL && st.big_cap[1] >= 2 * CHUNK);
	CHECK_EQ(be_staging_take_nb(&st, 2 * CHUNK, &b), 0);
	CHECK_EQ(b.kind, BE_BUF_BIG);
	CHECK(b.p == st.big[1]);
	/* both busy: the executor gets pinned memory for one copy instead */
	be_buf e;
	CHECK_EQ(be_staging_take(&st, 2 * CHUNK, &e), 0);
	CHECK_EQ(e.kind, BE_BUF_PINNED);
	be_staging_release(&st, &e);
	be_staging_release(&st, &b);
	CHECK(!st.big_busy[1] && st.big_busy[0]);
	void *second = st.big[1];
	be_staging_grow(&st, 0); /* nothing missing: nothing regrown */
	CHECK(st.big[1] == second);
	/* chunk-sized: the executor grows the pool itself, up to its max */
	be_buf c[3];
	CHECK_EQ(be_staging_take(&st, 10, &c[0]), 0);
	CHECK_EQ(be_staging_take(&st, 10, &c[1]), 0);
	CHECK_EQ(be_staging_take(&st, 10, &c[2]), 0);
	CHECK(c[0].kind == BE_BUF_CHUNK && c[1].kind == BE_BUF_CHUNK && c[2].kind == BE_BUF_PINNED);
	CHECK_EQ(st.nchunks, 2);
	for (int i = 0; i < 3; i++)
		be_staging_release(&st, &c[i]);
	CHECK_EQ(st.nfree, 2);
	be_staging_release(&st, &a);
	/* executor: a copy larger than the big buffers regrows one at once */
	CHECK_EQ(be_staging_take(&st, (2u << 20) + 1, &a), 0);
	CHECK_EQ(a.kind, BE_BUF_BIG);
	CHECK(a.cap >= (2u << 20) + 1);
	be_staging_release(&st, &a);
	CHECK(st.big[0] != NULL && st.big[1] != NULL);
	/* beyond big_max: pinned for this copy alone, or malloc if that fails */
	CHECK_EQ(be_staging_take(&st, (64u << 20) + 1, &a), 0);
	CHECK_EQ(a.kind, BE_BUF_PINNED);
	be_staging_release(&st, &a);
	atomic_store(&fail_alloc, 1);
	CHECK_EQ(be_staging_take(&st, (64u << 20) + 1, &a), 0);
	CHECK_EQ(a.kind, BE_BUF_MALLOC);
	be_staging_release(&st, &a);
	be_staging_grow(&st, 3); /* failing allocations leave the pool as it was */
	CHECK_EQ(st.nchunks, 2);
	atomic_store(&fail_alloc, 0);
	be_staging_destroy(&st);
	CHECK_EQ(atomic_load(&pinned_live), 0);
}

/* be_staging_take_wait: a busy big buffer that fits is waited for, up to a
 * limit; none that fits is not. */
static be_staging waited;
static be_buf held;

static void *release_soon(void *arg)
{
	usleep(20000);
	be_staging_release(&waited, &held);
	return NULL;
}

static void test_wait(void)
{
	be_buf a, b;
	pthread_t t;

	CHECK_EQ(be_staging_init(&waited, CHUNK, 2, 64u << 20), 0);
	CHECK_EQ(be_staging_take(&waited, 3 * CHUNK, &a), 0);
	CHECK_EQ(be_staging_take(&waited, 3 * CHUNK, &held), 0);
	CHECK(a.kind == BE_BUF_BIG && held.kind == BE_BUF_BIG);
	/* both busy: waits until one goes idle */
	pthread_create(&t, NULL, release_soon, NULL);
	CHECK_EQ(be_staging_take_wait(&waited, 3 * CHUNK, 5000, NULL, &b), 0);
	pthread_join(t, NULL);
	CHECK_EQ(b.kind, BE_BUF_BIG);
	/* both busy and nobody lets go: malloc after the wait */
	uint64_t t0 = rg_clock_ns();
	CHECK_EQ(be_staging_take_wait(&waited, 3 * CHUNK, 30, NULL, &held), 0);
	CHECK_EQ(held.kind, BE_BUF_MALLOC);
	CHECK(rg_clock_ns() - t0 >= 25000000ull);
	be_staging_release(&waited, &held);
	/* larger than any big buffer, both busy: a slot to regrow is waited for
	 * as long, then malloc; chunk-sized: a chunk or malloc, never a wait */
	t0 = rg_clock_ns();
	CHECK_EQ(be_staging_take_wait(&waited, 32u << 20, 30, NULL, &held), 0);
	CHECK_EQ(held.kind, BE_BUF_MALLOC);
	CHECK(rg_clock_ns() - t0 >= 25000000ull);
	be_staging_release(&waited, &held);
	CHECK_EQ(be_staging_take_wait(&waited, CHUNK, 60000, NULL, &held), 0);
	CHECK(held.kind == BE_BUF_CHUNK || held.kind == BE_BUF_MALLOC);
	be_staging_release(&waited, &held);
	/* beyond big_max: malloc at once (only the executor pins such a copy) */
	CHECK_EQ(be_staging_take_wait(&waited, (64u << 20) + 1, 60000, NULL, &held), 0);
	CHECK_EQ(held.kind, BE_BUF_MALLOC);
	be_staging_release(&waited, &held);
	be_staging_release(&waited, &a);
	be_staging_release(&waited, &b);
	be_staging_destroy(&waited);
	CHECK_EQ(atomic_load(&pinned_live), 0);
}

/* The pool's end: every pinned buffer it allocated is freed. */
static void destroy_all_freed(be_staging *st)
{
	be_staging_destroy(st);
	CHECK_EQ(atomic_load(&pinned_live), 0);
}

/* A stripe connection's thread: take_wait with its context, on a thread with
 * none current, as the server's are. */
struct stripe_take {
	be_staging *st;
	size_t len;
	unsigned ms;
	CUcontext ctx;
	be_buf b;
	int r;
};

static void *stripe_take_main(void *arg)
{
	struct stripe_take *k = arg;
	k->r = be_staging_take_wait(k->st, k->len, k->ms, k->ctx, &k->b);
	return NULL;
}

static be_buf stripe_take(be_staging *st, size_t len, unsigned ms, CUcontext ctx)
{
	struct stripe_take k = {st, len, ms, ctx, {0}, -1};
	pthread_t t;
	pthread_create(&t, NULL, stripe_take_main, &k);
	pthread_join(t, NULL);
	CHECK_EQ(k.r, 0);
	return k.b;
}

/* Releases *arg's buffer 20 ms from now. */
struct later {
	be_staging *st;
	be_buf *b;
};

static void *release_later(void *arg)
{
	struct later *l = arg;
	usleep(20000);
	be_staging_release(l->st, l->b);
	return NULL;
}

/* After a jump in size, synchronous copies: the first lands in a big buffer
 * its stripe thread regrew, every later one in the same; one slot grows. */
static void test_jump_sync(void)
{
	be_staging st;
	const size_t small = 2 * MiB, large = 8 * MiB;

	CHECK_EQ(be_staging_init(&st, CHUNK, 2, 64u << 20), 0);
	be_buf b = stripe_take(&st, small, 100, STRIPE_CTX);
	CHECK_EQ(b.kind, BE_BUF_BIG); /* the very first large copy too */
	be_staging_release(&st, &b);
	int allocs = atomic_load(&pinned_allocs);
	for (int i = 0; i < 5; i++) {
		b = stripe_take(&st, large, 100, STRIPE_CTX);
		CHECK_EQ(b.kind, BE_BUF_BIG);
		CHECK(b.cap >= large);
		memset(b.p, i, large);
		be_staging_release(&st, &b);
		be_staging_grow(&st, 0); /* the executor after each copy: nothing to do */
	}
	CHECK_EQ(st.fallbacks, 0);
	CHECK_EQ(atomic_load(&pinned_allocs), allocs + 1); /* regrown once, in place */
	CHECK(st.big_cap[0] >= large && st.big[1] == NULL);
	CHECK_EQ(atomic_load(&pinned_live), 1);
	destroy_all_freed(&st);
}

/* After a jump in size, back-to-back copies (the next one's bytes arrive
 * while the device still reads the last one's): the first regrows a slot,
 * the second, overlapping it, the other; from then on both take turns and
 * the executor's grows have nothing to do. Nothing is malloc'd. */
static void test_jump_back_to_back(void)
{
	be_staging st;
	const size_t small = 2 * MiB, large = 8 * MiB;
	be_buf b[6];

	CHECK_EQ(be_staging_init(&st, CHUNK, 2, 64u << 20), 0);
	/* steady state at the small size: both slots grown */
	b[0] = stripe_take(&st, small, 100, STRIPE_CTX);
	b[1] = stripe_take(&st, small, 0, STRIPE_CTX); /* overlapping: the other slot */
	CHECK(b[0].kind == BE_BUF_BIG && b[1].kind == BE_BUF_BIG && b[0].p != b[1].p);
	be_staging_release(&st, &b[0]);
	be_staging_release(&st, &b[1]);
	CHECK(st.big_cap[0] >= small && st.big_cap[1] >= small);
	CHECK_EQ(st.fallbacks, 0);

	int allocs = atomic_load(&pinned_allocs);
	b[0] = stripe_take(&st, large, 100, STRIPE_CTX);
	CHECK_EQ(b[0].kind, BE_BUF_BIG);
	CHECK(b[0].cap >= large);
	be_staging_grow(&st, 0); /* the executor, after that copy's batch */
	b[1] = stripe_take(&st, large, 100, STRIPE_CTX); /* b[0] still busy */
	CHECK_EQ(b[1].kind, BE_BUF_BIG);
	CHECK(b[1].cap >= large && b[1].p != b[0].p);
	CHECK_EQ(atomic_load(&pinned_allocs), allocs + 2);
	CHECK(st.big_cap[0] >= large && st.big_cap[1] >= large);
	CHECK_EQ(atomic_load(&pinned_live), 2);
	be_staging_release(&st, &b[0]);
	be_staging_grow(&st, 0);
	allocs = atomic_load(&pinned_allocs);
	for (int i = 2; i < 6; i++) {
		b[i] = stripe_take(&st, large, 5000, STRIPE_CTX); /* b[i - 1] still busy */
		CHECK_EQ(b[i].kind, BE_BUF_BIG);
		CHECK(b[i].p != b[i - 1].p);
		be_staging_release(&st, &b[i - 1]);
		be_staging_grow(&st, 0);
	}
	be_staging_release(&st, &b[5]);
	CHECK_EQ(atomic_load(&pinned_allocs), allocs);
	CHECK_EQ(st.fallbacks, 0);
	/* a smaller copy takes the smaller of two idle buffers that fit */
	be_buf keep = stripe_take(&st, large, 0, STRIPE_CTX);
	be_buf c = stripe_take(&st, 12 * MiB, 0, STRIPE_CTX); /* regrows the other */
	CHECK(c.kind == BE_BUF_BIG && c.cap >= 12 * MiB);
	be_staging_release(&st, &c);
	be_staging_release(&st, &keep);
	c = stripe_take(&st, small, 0, STRIPE_CTX);
	CHECK(c.p == keep.p || c.cap < 12 * MiB);
	be_staging_release(&st, &c);
	CHECK_EQ(st.fallbacks, 0);
	destroy_all_freed(&st);
}

/* Both slots busy and too small: the copy waits for one to go idle and
 * regrows that, rather than land in malloc'd memory. */
static void test_jump_both_busy(void)
{
	be_staging st;
	be_buf a, b, c;
	pthread_t t;

	CHECK_EQ(be_staging_init(&st, CHUNK, 2, 64u << 20), 0);
	a = stripe_take(&st, 2 * MiB, 0, STRIPE_CTX);
	b = stripe_take(&st, 2 * MiB, 0, STRIPE_CTX);
	CHECK(a.kind == BE_BUF_BIG && b.kind == BE_BUF_BIG);
	struct later l = {&st, &a};
	pthread_create(&t, NULL, release_later, &l);
	c = stripe_take(&st, 8 * MiB, 5000, STRIPE_CTX);
	pthread_join(t, NULL);
	CHECK_EQ(c.kind, BE_BUF_BIG);
	CHECK(c.cap >= 8 * MiB);
	CHECK_EQ(st.fallbacks, 0);
	be_staging_release(&st, &b);
	be_staging_release(&st, &c);
	destroy_all_freed(&st);
}

/* A failing cuMemHostAlloc: malloc'd memory that works, the pool consistent,
 * and takers do not try again at once (the executor's grow does). */
static void test_jump_alloc_fails(void)
{
	be_staging st;
	be_buf a, b;

	CHECK_EQ(be_staging_init(&st, CHUNK, 2, 64u << 20), 0);
	a = stripe_take(&st, 2 * MiB, 100, STRIPE_CTX);
	CHECK_EQ(a.kind, BE_BUF_BIG);
	be_staging_release(&st, &a);
	atomic_store(&fail_alloc, 1);
	int tries = atomic_load(&alloc_tries);
	a = stripe_take(&st, 8 * MiB, 100, STRIPE_CTX);
	CHECK_EQ(a.kind, BE_BUF_MALLOC);
	CHECK(a.cap >= 8 * MiB);
	memset(a.p, 0x5a, 8 * MiB);
	CHECK_EQ(atomic_load(&alloc_tries), tries + 1);
	b = stripe_take(&st, 8 * MiB, 100, STRIPE_CTX); /* within BE_STAGING_RETRY_MS */
	CHECK_EQ(b.kind, BE_BUF_MALLOC);
	CHECK_EQ(atomic_load(&alloc_tries), tries + 1);
	CHECK_EQ(st.fallbacks, 2);
	be_staging_release(&st, &a);
	be_staging_release(&st, &b);
	CHECK(!st.big_busy[0] && !st.big_busy[1]);
	/* the slot that held the smaller buffer gave it up for the larger */
	CHECK_EQ(atomic_load(&pinned_live), 0);
	atomic_store(&fail_alloc, 0);
	be_staging_grow(&st, 0); /* the executor retries what takers missed */
	CHECK(st.big_cap[0] >= 8 * MiB || st.big_cap[1] >= 8 * MiB);
	a = stripe_take(&st, 8 * MiB, 100, STRIPE_CTX);
	CHECK_EQ(a.kind, BE_BUF_BIG);
	be_staging_release(&st, &a);
	CHECK_EQ(st.fallbacks, 2);
	destroy_all_freed(&st);
}

/* Loop-thread takers and an executor growing the pool at the same time. */
static be_staging shared;
static atomic_int stop_grow;

static void *taker(void *arg)
{
	int bad = 0;
	for (int i = 0; i < 20000; i++) {
		be_buf b;
		size_t len = 1 + (size_t)(i * 7919) % (2 * CHUNK);
		if (be_staging_take_nb(&shared, len, &b) != 0 || !b.p || b.cap < len) {
			bad++;
			continue;
		}
		memset(b.p, i & 0xff, len);
		be_staging_release(&shared, &b);
	}
	return (void *)(intptr_t)bad;
}

static void *grower(void *arg)
{
	fake_set_current(EXEC_CTX);
	while (!atomic_load(&stop_grow))
		be_staging_grow(&shared, 0);
	return NULL;
}

static void test_threads(void)
{
	pthread_t t[3], g;
	int bad = 0;

	CHECK_EQ(be_staging_init(&shared, CHUNK, 4, 8 * CHUNK), 0);
	pthread_create(&g, NULL, grower, NULL);
	for (int i = 0; i < 3; i++)
		pthread_create(&t[i], NULL, taker, NULL);
	for (int i = 0; i < 3; i++) {
		void *r;
		pthread_join(t[i], &r);
		bad += (int)(intptr_t)r;
	}
	atomic_store(&stop_grow, 1);
	pthread_join(g, NULL);
	CHECK_EQ(bad, 0);
	CHECK_EQ(shared.nfree, shared.nchunks);
	CHECK(shared.nchunks <= 4);
	CHECK(!shared.big_busy[0] && !shared.big_busy[1]);
	be_staging_destroy(&shared);
	CHECK_EQ(atomic_load(&pinned_live), 0);
}

int main(void)
{
	be_drv.cuMemHostAlloc = fake_host_alloc;
	be_drv.cuMemFreeHost = fake_free_host;
	be_drv.cuCtxSetCurrent = fake_set_current;
	fake_set_current(EXEC_CTX); /* the main thread is the executor */
	test_chunks();
	test_big();
	test_wait();
	test_jump_sync();
	test_jump_back_to_back();
	test_jump_both_busy();
	test_jump_alloc_fails();
	test_threads();
	return check_summary("test_staging");
}
