#include "ptrmap.h"

#include <stdint.h>
#include <stdlib.h>

static size_t slot(const void *key, size_t cap)
{
	uint64_t h = (uint64_t)(uintptr_t)key * 0x9E3779B97F4A7C15ull; /* Fibonacci hashing */
	return (size_t)(h >> 20) & (cap - 1);
}

static int grow(fe_ptrmap *m)
{
	size_t cap = m->cap ? m->cap * 2 : 1024;
	const void **keys = calloc(cap, sizeof(*keys));
	void **vals = calloc(cap, sizeof(*vals));
	if (!keys || !vals) {
		free(keys);
		free(vals);
		return -1;
	}
	for (size_t i = 0; i < m->cap; i++)
		if (m->keys[i]) {
			size_t j = slot(m->keys[i], cap);
			while (keys[j])
				j = (j + 1) & (cap - 1);
			keys[j] = m->keys[i];
			vals[j] = m->vals[i];
		}
	free(m->keys);
	free(m->vals);
	m->keys = keys;
	m->vals = vals;
	m->cap = cap;
	return 0;
}

int fe_ptrmap_put(fe_ptrmap *m, const void *key, void *val)
{
	if (!key)
		return -1;
	if ((m->n + 1) * 2 > m->cap && grow(m))
		return -1;
	size_t i = slot(key, m->cap);
	while (m->keys[i] && m->keys[i] != key)
		i = (i + 1) & (m->cap - 1);
	if (!m->keys[i])
		m->n++;
	m->keys[i] = key;
	m->vals[i] = val;
	return 0;
}

void *fe_ptrmap_get(const fe_ptrmap *m, const void *key)
{
	if (!m->cap || !key)
		return NULL;
	size_t i = slot(key, m->cap);
	while (m->keys[i]) {
		if (m->keys[i] == key)
			return m->vals[i];
		i = (i + 1) & (m->cap - 1);
	}
	return NULL;
}
