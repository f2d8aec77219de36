/* Unit tests of the backend's handle tables (backend/src/handles.c). */
#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "handles.h"

static void test_basic(void)
{
	be_htab t;
	void *o;
	uint64_t aux;

	be_htab_init(&t);
	CHECK_EQ(be_htab_get(&t, 1, &o, &aux), BE_H_UNKNOWN); /* empty table */
	CHECK_EQ(be_htab_add(&t, 0, (void *)1, 0), BE_H_EZERO);
	CHECK_EQ(be_htab_add(&t, 7, (void *)0x70, 42), BE_H_OK);
	CHECK_EQ(be_htab_add(&t, 7, (void *)0x71, 0), BE_H_EINUSE);
	CHECK_EQ(be_htab_get(&t, 7, &o, &aux), BE_H_OK);
	CHECK(o == (void *)0x70);
	CHECK_EQ(aux, 42);
	CHECK_EQ(be_htab_get(&t, 8, &o, NULL), BE_H_UNKNOWN);
	CHECK_EQ(be_htab_get(&t, UINT64_MAX, NULL, NULL), BE_H_UNKNOWN);
	CHECK_EQ(be_htab_count(&t), 1);
	be_htab_free(&t);
}

static void test_stale_and_reuse(void)
{
	be_htab t;
	void *o = NULL;

	be_htab_init(&t);
	CHECK_EQ(be_htab_add(&t, 5, (void *)0x50, 0), BE_H_OK);
	CHECK_EQ(be_htab_gen(&t, 5), 1);
	CHECK_EQ(be_htab_del(&t, 5, &o, NULL), BE_H_OK);
	CHECK(o == (void *)0x50);
	/* used after its destroy: stale, not unknown */
	CHECK_EQ(be_htab_get(&t, 5, &o, NULL), BE_H_STALE);
	CHECK_EQ(be_htab_del(&t, 5, &o, NULL), BE_H_STALE); /* double destroy */
	CHECK_EQ(be_htab_del(&t, 6, &o, NULL), BE_H_UNKNOWN);
	CHECK_EQ(be_htab_count(&t), 0);
	/* the client reuses the id: a new generation, the new object */
	CHECK_EQ(be_htab_add(&t, 5, (void *)0x51, 3), BE_H_OK);
	CHECK_EQ(be_htab_gen(&t, 5), 2);
	CHECK_EQ(be_htab_get(&t, 5, &o, NULL), BE_H_OK);
	CHECK(o == (void *)0x51);
	CHECK_EQ(be_htab_del(&t, 5, NULL, NULL), BE_H_OK);
	CHECK_EQ(be_htab_add(&t, 5, (void *)0x52, 0), BE_H_OK);
	CHECK_EQ(be_htab_gen(&t, 5), 3);
	CHECK_EQ(be_htab_gen(&t, 99), 0);
	be_htab_free(&t);
}

static void count_cb(void *ctx, uint64_t id, void *obj, uint64_t aux)
{
	uint64_t *sum = ctx;
	sum[0]++;
	sum[1] += id;
	if ((uint64_t)(uintptr_t)obj != id * 2)
		sum[2]++;
}

/* Many ids, interleaved destroys, growth, and every survivor still found. */
static void test_many(void)
{
	be_htab t;
	const uint64_t n = 100000;
	int bad = 0;

	be_htab_init(&t);
	for (uint64_t i = 1; i <= n; i++)
		bad += be_htab_add(&t, i * 0x10001, (void *)(uintptr_t)(i * 0x10001 * 2), i) != BE_H_OK;
	CHECK_EQ(bad, 0);
	for (uint64_t i = 1; i <= n; i += 2)
		bad += be_htab_del(&t, i * 0x10001, NULL, NULL) != BE_H_OK;
	CHECK_EQ(bad, 0);
	CHECK_EQ(be_htab_count(&t), n / 2);
	for (uint64_t i = 1; i <= n; i++) {
		void *o;
		uint64_t aux;
		int r = be_htab_get(&t, i * 0x10001, &o, &aux);
		if (i % 2)
			bad += r != BE_H_STALE;
		else
			bad += r != BE_H_OK || aux != i || o != (void *)(uintptr_t)(i * 0x10001 * 2);
	}
	CHECK_EQ(bad, 0);
	uint64_t sum[3] = {0};
	be_htab_each(&t, count_cb, sum);
	CHECK_EQ(sum[0], n / 2);
	CHECK_EQ(sum[2], 0);
	be_htab_free(&t);
}

/* A client that creates and destroys fresh ids forever must not grow the
 * table forever: old tombstones are dropped. */
static void test_churn_bounded(void)
{
	be_htab t;
	int bad = 0;

	be_htab_init(&t);
	for (uint64_t i = 1; i <= 1000000; i++) {
		bad += be_htab_add(&t, i, (void *)1, 0) != BE_H_OK;
		bad += be_htab_del(&t, i, NULL, NULL) != BE_H_OK;
	}
	CHECK_EQ(bad, 0);
	CHECK(t.cap <= 8192);
	CHECK_EQ(be_htab_count(&t), 0);
	/* recent ids are still known to be stale */
	CHECK_EQ(be_htab_get(&t, 1000000, NULL, NULL), BE_H_STALE);
	int r = be_htab_get(&t, 1, NULL, NULL);
	CHECK(r == BE_H_STALE || r == BE_H_UNKNOWN);
	be_htab_free(&t);
}

int main(void)
{
	test_basic();
	test_stale_and_reuse();
	test_many();
	test_churn_bounded();
	return check_summary("test_handles");
}
