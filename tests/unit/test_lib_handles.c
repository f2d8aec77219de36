/*
 * The frontend's record of library objects (frontend/src/lib_handles.c), built
 * into this test on its own: ids as fe_rt_new_id hands them, kinds and devices,
 * state words per id, histories byte for byte and dropped past
 * FE_LIB_MAX_HISTORY, ids that share a bucket, forgetting (every block freed:
 * the test links with --wrap for calloc, realloc and free and counts the alloc_blocks
 * live), out of memory, and threads making and forgetting objects at once.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_count.h"
#include "check.h"
#include "lib_handles.h"
#include "rt.h"

/* ---- what lib_handles.c needs from the rest of libremote.so ---- */

static _Atomic uint64_t next_id = 0x100;
static _Atomic uint64_t id_stride = 1;
uint64_t fe_rt_new_id(void) { return atomic_fetch_add(&next_id, atomic_load(&id_stride)); }

/* ---- tests ---- */

static void test_new_kind_dev(void)
{
	uint64_t first = atomic_load(&next_id);
	uint64_t ids[1000];
	for (int i = 0; i < 1000; i++) {
		ids[i] = fe_lib_new(i % 7, i % 5 - 1); /* devices -1 .. 3 */
		CHECK_EQ(ids[i], first + (uint64_t)i); /* the id is fe_rt_new_id's */
	}
	CHECK_EQ(atomic_load(&alloc_blocks), 1000);
	int ok = 1;
	for (int i = 0; i < 1000; i++)
		ok &= fe_lib_kind(ids[i]) == i % 7 && fe_lib_dev(ids[i]) == i % 5 - 1;
	CHECK(ok);
	/* unknown ids: never handed out, 0, one past the last */
	CHECK_EQ(fe_lib_kind(0), -1);
	CHECK_EQ(fe_lib_dev(0), -1);
	CHECK_EQ(fe_lib_kind(first - 1), -1);
	CHECK_EQ(fe_lib_kind(first + 1000), -1);
	CHECK_EQ(fe_lib_dev(first + 1000), -1);
	CHECK_EQ(fe_lib_state(first + 1000, 0), 0);

	/* forgetting: gone, the others kept, its block freed; twice is harmless */
	fe_lib_forget(ids[500]);
	CHECK_EQ(fe_lib_kind(ids[500]), -1);
	CHECK_EQ(fe_lib_dev(ids[500]), -1);
	CHECK_EQ(fe_lib_kind(ids[499]), 499 % 7);
	CHECK_EQ(fe_lib_kind(ids[501]), 501 % 7);
	CHECK_EQ(atomic_load(&alloc_blocks), 999);
	fe_lib_forget(ids[500]);
	fe_lib_forget(0);
	CHECK_EQ(atomic_load(&alloc_blocks), 999);

	/* a new object after a forget gets a new id, never the forgotten one */
	uint64_t again = fe_lib_new(3, 2);
	CHECK_EQ(again, first + 1000);
	CHECK_EQ(fe_lib_kind(ids[500]), -1);
	CHECK_EQ(fe_lib_kind(again), 3);
	CHECK_EQ(fe_lib_dev(again), 2);

	for (int i = 0; i < 1000; i++)
		fe_lib_forget(ids[i]);
	fe_lib_forget(again);
	CHECK_EQ(atomic_load(&alloc_blocks), 0);
}

/* Ids n << 16 all fall in one bucket: removal from the chain's head, middle
 * and tail leaves the rest findable. */
static void test_one_bucket(void)
{
	uint64_t save = atomic_load(&next_id);
	atomic_store(&next_id, 1ull << 16);
	atomic_store(&id_stride, 1ull << 16);
	uint64_t ids[8];
	for (int i = 0; i < 8; i++) {
		ids[i] = fe_lib_new(i, 10 + i);
		CHECK_EQ(ids[i], (uint64_t)(i + 1) << 16);
		fe_lib_set_state(ids[i], 1, 100 + i);
	}
	atomic_store(&id_stride, 1);
	atomic_store(&next_id, save);
	/* chains push at the head: ids[7] is first, ids[0] last */
	fe_lib_forget(ids[7]);
	fe_lib_forget(ids[3]);
	fe_lib_forget(ids[0]);
	int ok = 1;
	for (int i = 0; i < 8; i++) {
		int gone = i == 7 || i == 3 || i == 0;
		ok &= fe_lib_kind(ids[i]) == (gone ? -1 : i);
		ok &= fe_lib_dev(ids[i]) == (gone ? -1 : 10 + i);
		ok &= fe_lib_state(ids[i], 1) == (gone ? 0 : 100u + (uint64_t)i);
	}
	CHECK(ok);
	CHECK_EQ(atomic_load(&alloc_blocks), 5);
	for (int i = 0; i < 8; i++)
		fe_lib_forget(ids[i]);
	CHECK_EQ(atomic_load(&alloc_blocks), 0);
}

static void test_state(void)
{
	uint64_t a = fe_lib_new(1, 0), b = fe_lib_new(1, 0);
	for (int w = 0; w < FE_LIB_STATE_WORDS; w++) {
		CHECK_EQ(fe_lib_state(a, w), 0); /* a new object's words are 0 */
		CHECK_EQ(fe_lib_state(b, w), 0);
	}
	fe_lib_set_state(a, 0, UINT64_MAX);
	fe_lib_set_state(a, 2, 0x8000000000000001ull);
	fe_lib_set_state(b, 1, 42);
	CHECK(fe_lib_state(a, 0) == UINT64_MAX);
	CHECK_EQ(fe_lib_state(a, 1), 0);
	CHECK(fe_lib_state(a, 2) == 0x8000000000000001ull);
	CHECK_EQ(fe_lib_state(b, 0), 0);
	CHECK_EQ(fe_lib_state(b, 1), 42);
	CHECK_EQ(fe_lib_state(b, 2), 0);
	fe_lib_set_state(a, 0, 7); /* overwritten */
	CHECK_EQ(fe_lib_state(a, 0), 7);
	/* an unknown id: setting does nothing, reading answers 0 */
	uint64_t unknown = atomic_load(&next_id) + 5;
	fe_lib_set_state(unknown, 0, 9);
	CHECK_EQ(fe_lib_state(unknown, 0), 0);
	fe_lib_forget(a);
	CHECK_EQ(fe_lib_state(a, 0), 0);
	CHECK_EQ(fe_lib_state(b, 1), 42);
	fe_lib_forget(b);
	CHECK_EQ(atomic_load(&alloc_blocks), 0);
}

/* The bytes fe_lib_history appends: u64 length, then per record u32 op, u32
 * length, the arguments. */
static void put_record(uint8_t *e, size_t *n, uint32_t op, const void *args, uint32_t len)
{
	memcpy(e + *n, &op, 4);
	memcpy(e + *n + 4, &len, 4);
	if (len)
		memcpy(e + *n + 8, args, len);
	*n += 8 + len;
}

static void test_history(void)
{
	uint64_t a = fe_lib_new(2, 0), b = fe_lib_new(2, 1);
	fe_lib_buf buf = {0};

	/* no record yet: a history of length 0 */
	CHECK_EQ(fe_lib_history(a, &buf), 0);
	CHECK_EQ(buf.len, 8);
	uint64_t n0;
	memcpy(&n0, buf.p, 8);
	CHECK_EQ(n0, 0);

	const uint8_t args1[5] = {1, 2, 3, 4, 5};
	const uint8_t args2[3] = {0xaa, 0xbb, 0xcc};
	fe_lib_record(a, 17, args1, sizeof(args1));
	fe_lib_record(b, 99, args2, sizeof(args2)); /* b's own, not a's */
	fe_lib_record(a, 18, NULL, 0);
	fe_lib_record(a, 0xffffffffu, args2, sizeof(args2));

	uint8_t want[64];
	size_t wn = 8;
	put_record(want, &wn, 17, args1, sizeof(args1));
	put_record(want, &wn, 18, NULL, 0);
	put_record(want, &wn, 0xffffffffu, args2, sizeof(args2));
	uint64_t hlen = wn - 8;
	memcpy(want, &hlen, 8);

	/* appended after what buf held: the 8 bytes above stay */
	CHECK_EQ(fe_lib_history(a, &buf), 0);
	CHECK_EQ(buf.len, 8 + wn);
	CHECK_EQ(hlen, 13 + 8 + 11);
	if (buf.len == 8 + wn)
		CHECK_MEM(buf.p + 8, want, wn);

	fe_lib_buf bb = {0};
	CHECK_EQ(fe_lib_history(b, &bb), 0);
	size_t bn = 8;
	put_record(want, &bn, 99, args2, sizeof(args2));
	uint64_t blen = bn - 8;
	memcpy(want, &blen, 8);
	CHECK_EQ(bb.len, bn);
	if (bb.len == bn)
		CHECK_MEM(bb.p, want, bn);

	/* an unknown id: -1, buf untouched; recording for it does nothing */
	uint64_t unknown = atomic_load(&next_id) + 5;
	size_t before = buf.len;
	fe_lib_record(unknown, 1, args1, sizeof(args1));
	CHECK_EQ(fe_lib_history(unknown, &buf), -1);
	CHECK_EQ(buf.len, before);

	fe_lib_forget(a);
	CHECK_EQ(fe_lib_history(a, &buf), -1);
	CHECK_EQ(buf.len, before);
	fe_lib_forget(b);
	free(buf.p);
	free(bb.p);
	CHECK_EQ(atomic_load(&alloc_blocks), 0);
}

static void test_history_cap(void)
{
	static uint8_t big[FE_LIB_MAX_HISTORY];
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 31 + 7);
	fe_lib_buf buf = {0};

	/* exactly FE_LIB_MAX_HISTORY bytes: kept */
	uint64_t a = fe_lib_new(0, 0);
	fe_lib_record(a, 1, big, 1000);
	fe_lib_record(a, 2, big + 1000, FE_LIB_MAX_HISTORY - 1000 - 16);
	CHECK_EQ(fe_lib_history(a, &buf), 0);
	CHECK_EQ(buf.len, 8 + FE_LIB_MAX_HISTORY);
	uint64_t n;
	memcpy(&n, buf.p, 8);
	CHECK_EQ(n, FE_LIB_MAX_HISTORY);
	uint32_t head[2];
	memcpy(head, buf.p + 8 + 8 + 1000, 8);
	CHECK_EQ(head[0], 2);
	CHECK_EQ(head[1], FE_LIB_MAX_HISTORY - 1016);
	CHECK_MEM(buf.p + 8 + 8, big, 1000);
	CHECK_MEM(buf.p + 8 + 8 + 1000 + 8, big + 1000, FE_LIB_MAX_HISTORY - 1016);

	/* one more record, even with no arguments, is past the cap: the history
	 * is dropped, its buffer freed, and stays dropped */
	CHECK_EQ(atomic_load(&alloc_blocks), 3); /* a, a's history, buf */
	fe_lib_record(a, 3, NULL, 0);
	CHECK_EQ(atomic_load(&alloc_blocks), 2);
	size_t before = buf.len;
	CHECK_EQ(fe_lib_history(a, &buf), -1);
	CHECK_EQ(buf.len, before);
	fe_lib_record(a, 4, big, 1);
	CHECK_EQ(fe_lib_history(a, &buf), -1);
	CHECK_EQ(atomic_load(&alloc_blocks), 2);
	/* the object itself lives on */
	CHECK_EQ(fe_lib_kind(a), 0);
	fe_lib_set_state(a, 0, 5);
	CHECK_EQ(fe_lib_state(a, 0), 5);
	fe_lib_forget(a);

	/* one record larger than the cap on its own */
	uint64_t b = fe_lib_new(0, 0);
	fe_lib_record(b, 1, big, FE_LIB_MAX_HISTORY - 7);
	CHECK_EQ(fe_lib_history(b, &buf), -1);
	fe_lib_forget(b);

	/* out of memory while recording: dropped as well */
	uint64_t c = fe_lib_new(0, 0);
	atomic_store(&alloc_fail_next, 1);
	fe_lib_record(c, 1, big, 10);
	CHECK_EQ(fe_lib_history(c, &buf), -1);
	fe_lib_forget(c);

	free(buf.p);
	CHECK_EQ(atomic_load(&alloc_blocks), 0);
}

static void test_nomem(void)
{
	uint64_t id = atomic_load(&next_id);
	atomic_store(&alloc_fail_next, 1);
	CHECK_EQ(fe_lib_new(1, 1), 0);
	CHECK_EQ(atomic_load(&next_id), id); /* no id spent */
	CHECK_EQ(atomic_load(&alloc_blocks), 0);
	fe_lib_buf b = {0};
	atomic_store(&alloc_fail_next, 1);
	CHECK_EQ(fe_lib_buf_put(&b, "x", 1), -1);
	CHECK(b.p == NULL);
	CHECK_EQ(b.len, 0);
	CHECK_EQ(fe_lib_buf_put(&b, "x", 0), 0); /* nothing to add: no allocation */
	CHECK(b.p == NULL);
}

#define THREADS 4
#define PER_THREAD 2000

static void *worker(void *arg)
{
	int t = (int)(intptr_t)arg;
	uint64_t ids[PER_THREAD];
	long bad = 0;
	for (int i = 0; i < PER_THREAD; i++) {
		ids[i] = fe_lib_new(t, i);
		fe_lib_set_state(ids[i], 2, ((uint64_t)t << 32) | (uint64_t)i);
		uint32_t v = (uint32_t)i;
		fe_lib_record(ids[i], (uint32_t)t, &v, sizeof(v));
	}
	for (int i = 0; i < PER_THREAD; i++) {
		bad += fe_lib_kind(ids[i]) != t || fe_lib_dev(ids[i]) != i;
		bad += fe_lib_state(ids[i], 2) != (((uint64_t)t << 32) | (uint64_t)i);
		fe_lib_buf b = {0};
		bad += fe_lib_history(ids[i], &b) != 0 || b.len != 8 + 8 + 4;
		if (b.len == 20) {
			uint32_t r[3];
			memcpy(r, b.p + 8, 12);
			bad += r[0] != (uint32_t)t || r[1] != 4 || r[2] != (uint32_t)i;
		}
		free(b.p);
		if (i % 2)
			fe_lib_forget(ids[i]);
	}
	for (int i = 0; i < PER_THREAD; i += 2)
		fe_lib_forget(ids[i]);
	return (void *)(intptr_t)bad;
}

static void test_threads(void)
{
	uint64_t first = atomic_load(&next_id);
	pthread_t th[THREADS];
	for (int t = 0; t < THREADS; t++)
		pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t);
	for (int t = 0; t < THREADS; t++) {
		void *bad;
		pthread_join(th[t], &bad);
		CHECK_EQ((intptr_t)bad, 0);
	}
	CHECK_EQ(atomic_load(&next_id), first + THREADS * PER_THREAD); /* one id each */
	CHECK_EQ(atomic_load(&alloc_blocks), 0);
}

int main(void)
{
	test_new_kind_dev();
	test_one_bucket();
	test_state();
	test_history();
	test_history_cap();
	test_nomem();
	test_threads();
	return check_summary("test_lib_handles");
}
