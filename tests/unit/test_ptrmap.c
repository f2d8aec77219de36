/*
 * The frontend's map from host addresses to records (frontend/src/ptrmap.c):
 * put, get, replace, NULL keys, growth past the first table, and keys that
 * collide in one slot (linear probing).
 */
#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "ptrmap.h"

static void test_basic(void)
{
	fe_ptrmap m = {0};
	int a, b, c;
	CHECK(fe_ptrmap_get(&m, &a) == NULL); /* empty, no table yet */
	CHECK_EQ(fe_ptrmap_put(&m, &a, &b), 0);
	CHECK(fe_ptrmap_get(&m, &a) == &b);
	CHECK(fe_ptrmap_get(&m, &b) == NULL);
	CHECK_EQ(fe_ptrmap_put(&m, &a, &c), 0); /* replaced, not added */
	CHECK(fe_ptrmap_get(&m, &a) == &c);
	CHECK_EQ(m.n, 1);
	CHECK_EQ(fe_ptrmap_put(&m, NULL, &c), -1);
	CHECK(fe_ptrmap_get(&m, NULL) == NULL);
	free(m.keys);
	free(m.vals);
}

static void test_many(void)
{
	/* 100,000 keys, 16 bytes apart like kernel stubs: several growths */
	enum { N = 100000 };
	char *base = malloc(N * 16);
	fe_ptrmap m = {0};
	int ok = 1;
	for (uintptr_t i = 0; i < N; i++)
		ok &= fe_ptrmap_put(&m, base + i * 16, (void *)(i + 1)) == 0;
	CHECK(ok);
	CHECK_EQ(m.n, N);
	CHECK(m.cap >= 2 * N);
	CHECK_EQ(m.cap & (m.cap - 1), 0); /* a power of two */
	ok = 1;
	for (uintptr_t i = 0; i < N; i++) {
		ok &= fe_ptrmap_get(&m, base + i * 16) == (void *)(i + 1);
		ok &= fe_ptrmap_get(&m, base + i * 16 + 8) == NULL;
	}
	CHECK(ok);
	free(m.keys);
	free(m.vals);
	free(base);
}

static void test_collisions(void)
{
	/* multiples of 2^44: the product with the hash's constant has its low 44
	 * bits zero, so after the shift by 20 every one of them lands in slot 0 of
	 * any table under 2^24 slots, and is found by probing */
	fe_ptrmap m = {0};
	int ok = 1;
	for (uintptr_t i = 1; i <= 64; i++)
		ok &= fe_ptrmap_put(&m, (const void *)(i << 44), (void *)i) == 0;
	CHECK(ok);
	ok = 1;
	for (uintptr_t i = 1; i <= 64; i++)
		ok &= fe_ptrmap_get(&m, (const void *)(i << 44)) == (void *)i;
	CHECK(ok);
	CHECK(fe_ptrmap_get(&m, (const void *)(65ull << 44)) == NULL);
	free(m.keys);
	free(m.vals);
}

int main(void)
{
	test_basic();
	test_many();
	test_collisions();
	return check_summary("test_ptrmap");
}
