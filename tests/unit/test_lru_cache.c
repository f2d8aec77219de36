/*
 * The client's LRU map (frontend/src/lru_cache.c), built on its own: exact bytes
 * in and out, replacing a key, the least recently used dropped first (a read
 * counts as a use), keys that differ only in length or one byte, a table that
 * grows far past its first size, a buffer shorter than the value, and threads
 * putting and getting at once under a small bound.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "lru_cache.h"

static int has(fe_lru *c, const char *k)
{
	char v[64];
	size_t n;
	return fe_lru_get(c, k, strlen(k), v, sizeof(v), &n);
}

static void test_bytes_and_replace(void)
{
	fe_lru *c = fe_lru_new(8);
	char v[16];
	size_t n = 99;
	CHECK(c);
	CHECK_EQ(fe_lru_get(c, "k", 1, v, sizeof(v), &n), 0);
	CHECK_EQ(n, 99); /* untouched on a miss */
	CHECK_EQ(fe_lru_put(c, "k", 1, "\0ab\xff", 4), 0);
	CHECK_EQ(fe_lru_get(c, "k", 1, v, sizeof(v), &n), 1);
	CHECK_EQ(n, 4);
	CHECK(!memcmp(v, "\0ab\xff", 4));
	CHECK_EQ(fe_lru_put(c, "k", 1, "xyz", 3), 0);
	CHECK_EQ(fe_lru_count(c), 1);
	CHECK_EQ(fe_lru_get(c, "k", 1, v, sizeof(v), &n), 1);
	CHECK_EQ(n, 3);
	CHECK(!memcmp(v, "xyz", 3));
	/* an empty value and an empty key are values like any other */
	CHECK_EQ(fe_lru_put(c, "e", 1, "", 0), 0);
	CHECK_EQ(fe_lru_get(c, "e", 1, v, sizeof(v), &n), 1);
	CHECK_EQ(n, 0);
	CHECK_EQ(fe_lru_put(c, "", 0, "z", 1), 0);
	CHECK_EQ(fe_lru_get(c, "", 0, v, sizeof(v), &n), 1);
	CHECK_EQ(v[0], 'z');
	/* a shorter buffer gets its first bytes; the length says the whole */
	CHECK_EQ(fe_lru_put(c, "long", 4, "0123456789", 10), 0);
	memset(v, '-', sizeof(v));
	CHECK_EQ(fe_lru_get(c, "long", 4, v, 4, &n), 1);
	CHECK_EQ(n, 10);
	CHECK(!memcmp(v, "0123----", 8));
	fe_lru_free(c);
}

static void test_near_keys(void)
{
	fe_lru *c = fe_lru_new(8);
	char v[8];
	size_t n;
	CHECK_EQ(fe_lru_put(c, "ab\0", 3, "3", 1), 0);
	CHECK_EQ(fe_lru_put(c, "ab", 2, "2", 1), 0);
	CHECK_EQ(fe_lru_put(c, "ac", 2, "c", 1), 0);
	CHECK_EQ(fe_lru_get(c, "ab\0", 3, v, sizeof(v), &n), 1);
	CHECK_EQ(v[0], '3');
	CHECK_EQ(fe_lru_get(c, "ab", 2, v, sizeof(v), &n), 1);
	CHECK_EQ(v[0], '2');
	CHECK_EQ(fe_lru_get(c, "ac", 2, v, sizeof(v), &n), 1);
	CHECK_EQ(v[0], 'c');
	CHECK_EQ(fe_lru_get(c, "a", 1, v, sizeof(v), &n), 0);
	fe_lru_free(c);
}

static void test_least_recent_dropped(void)
{
	fe_lru *c = fe_lru_new(3);
	fe_lru_put(c, "a", 1, "1", 1);
	fe_lru_put(c, "b", 1, "2", 1);
	fe_lru_put(c, "c", 1, "3", 1);
	CHECK(has(c, "a")); /* a is now the most recent; b the least */
	fe_lru_put(c, "d", 1, "4", 1);
	CHECK_EQ(fe_lru_count(c), 3);
	CHECK(!has(c, "b"));
	CHECK(has(c, "a") && has(c, "c") && has(c, "d"));
	/* order now a, c, d by use (d last used): replacing c makes it the newest */
	fe_lru_put(c, "c", 1, "5", 1);
	fe_lru_put(c, "e", 1, "6", 1);
	CHECK(!has(c, "a"));
	CHECK(has(c, "c") && has(c, "d") && has(c, "e"));
	fe_lru_free(c);
}

static void test_growth(void)
{
	enum { N = 20000 };
	fe_lru *c = fe_lru_new(N);
	char k[16];
	int ok = 1;
	for (int i = 0; i < N; i++) {
		int len = snprintf(k, sizeof(k), "key%d", i);
		ok &= fe_lru_put(c, k, (size_t)len, &i, sizeof(i)) == 0;
	}
	CHECK(ok);
	CHECK_EQ(fe_lru_count(c), N);
	int found = 0, right = 0;
	for (int i = 0; i < N; i++) {
		int len = snprintf(k, sizeof(k), "key%d", i), v = -1;
		size_t n;
		found += fe_lru_get(c, k, (size_t)len, &v, sizeof(v), &n);
		right += v == i && n == sizeof(v);
	}
	CHECK_EQ(found, N);
	CHECK_EQ(right, N);
	/* one more drops exactly the least recently used: key0, read first above */
	CHECK_EQ(fe_lru_put(c, "new", 3, "", 0), 0);
	CHECK_EQ(fe_lru_count(c), N);
	CHECK(!has(c, "key0"));
	CHECK(has(c, "key1"));
	fe_lru_free(c);
}

enum { THREADS = 4, PER = 5000, BOUND = 500 };
static fe_lru *shared;
static atomic_int wrong;

static void *worker(void *arg)
{
	int t = (int)(long)arg;
	for (int i = 0; i < PER; i++) {
		int key[2] = {t, i % 700}, val[2] = {t * 1000000 + i % 700, ~key[1]}, got[2];
		size_t n;
		if (fe_lru_get(shared, key, sizeof(key), got, sizeof(got), &n) &&
		    (n != sizeof(got) || memcmp(got, val, sizeof(got))))
			atomic_fetch_add(&wrong, 1);
		fe_lru_put(shared, key, sizeof(key), val, sizeof(val));
	}
	return NULL;
}

static void test_threads(void)
{
	pthread_t th[THREADS];
	shared = fe_lru_new(BOUND);
	for (long t = 0; t < THREADS; t++)
		pthread_create(&th[t], NULL, worker, (void *)t);
	for (int t = 0; t < THREADS; t++)
		pthread_join(th[t], NULL);
	CHECK_EQ(atomic_load(&wrong), 0);
	CHECK_EQ(fe_lru_count(shared), BOUND);
	fe_lru_free(shared);
}

int main(void)
{
	test_bytes_and_replace();
	test_near_keys();
	test_least_recent_dropped();
	test_growth();
	test_threads();
	return check_summary("test_lru_cache");
}
