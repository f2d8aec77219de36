/*
 * A bounded map from byte strings to byte strings that drops the least recently
 * used entry when full: the client's memory of answers that are a pure function
 * of what it sent (cuBLASLt's heuristics, lib_cublas.c). Thread-safe; values are
 * copied in and out, so nothing handed out can be freed under the caller.
 */
#ifndef FE_LRU_CACHE_H
#define FE_LRU_CACHE_H

#include <stddef.h>

typedef struct fe_lru fe_lru;

/* At most max_entries entries; NULL when out of memory. */
fe_lru *fe_lru_new(size_t max_entries);
void fe_lru_free(fe_lru *c);
/* The value of key into val (at most cap bytes) and its length into *len; marks
 * it the most recently used. Returns 1 when found, 0 when not. */
int fe_lru_get(fe_lru *c, const void *key, size_t klen, void *val, size_t cap, size_t *len);
/* Stores a copy (replacing the key's value), dropping the least recently used
 * entry beyond the bound. Returns 0, or -1 when out of memory (nothing stored). */
int fe_lru_put(fe_lru *c, const void *key, size_t klen, const void *val, size_t vlen);
size_t fe_lru_count(fe_lru *c);

#endif
