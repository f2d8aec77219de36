/*
 * Unit tests of the pinned staging pool (backend/src/staging.c), with the two
 * driver functions it calls replaced by counting fakes.
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
static atomic_int pinned_live, pinned_allocs, fail_alloc;

static CUresult fake_host_alloc(void **p, size_t len, unsigned flags)
{
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
	free(p);
	atomic_fetch_sub(&pinned_live, 1);
	return CUDA_SUCCESS;
}

const char *be_driver_error_name(CUresult r) { return "fake error"; }

#define CHUNK 4096u

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
	CHECK_EQ(be_staging_take_wait(&waited, 3 * CHUNK, 5000, &b), 0);
	pthread_join(t, NULL);
	CHECK_EQ(b.kind, BE_BUF_BIG);
	/* both busy and nobody lets go: malloc after the wait */
	uint64_t t0 = rg_clock_ns();
	CHECK_EQ(be_staging_take_wait(&waited, 3 * CHUNK, 30, &held), 0);
	CHECK_EQ(held.kind, BE_BUF_MALLOC);
	CHECK(rg_clock_ns() - t0 >= 25000000ull);
	be_staging_release(&waited, &held);
	/* larger than any big buffer: malloc at once; chunk-sized: a chunk */
	CHECK_EQ(be_staging_take_wait(&waited, 32u << 20, 60000, &held), 0);
	CHECK_EQ(held.kind, BE_BUF_MALLOC);
	be_staging_release(&waited, &held);
	CHECK_EQ(be_staging_take_wait(&waited, CHUNK, 60000, &held), 0);
	CHECK(held.kind == BE_BUF_CHUNK || held.kind == BE_BUF_MALLOC);
	be_staging_release(&waited, &held);
	be_staging_release(&waited, &a);
	be_staging_release(&waited, &b);
	be_staging_destroy(&waited);
	CHECK_EQ(atomic_load(&pinned_live), 0);
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
	test_chunks();
	test_big();
	test_wait();
	test_threads();
	return check_summary("test_staging");
}
