/*
 * LRU map (lru_cache.h): a chained hash table (XXH3 of the key) whose entries
 * also sit on one recency list, most recent at the head. The table doubles
 * with the count, so chains stay short at any bound.
 */
#include "lru_cache.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

typedef struct ent {
	struct ent *chain;      /* next in its bucket */
	struct ent *prev, *next; /* recency list */
	uint64_t h;
	size_t klen, vlen;
	unsigned char bytes[]; /* key, then value */
} ent;

struct fe_lru {
	pthread_mutex_t mu;
	ent **b;
	size_t nb, n, max;
	ent *head, *tail;
};

fe_lru *fe_lru_new(size_t max_entries)
{
	fe_lru *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->nb = 64;
	c->b = calloc(c->nb, sizeof(*c->b));
	if (!c->b) {
		free(c);
		return NULL;
	}
	c->max = max_entries ? max_entries : 1;
	pthread_mutex_init(&c->mu, NULL);
	return c;
}

void fe_lru_free(fe_lru *c)
{
	if (!c)
		return;
	for (ent *e = c->head, *nx; e; e = nx) {
		nx = e->next;
		free(e);
	}
	free(c->b);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

static void list_unlink(fe_lru *c, ent *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		c->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		c->tail = e->prev;
	e->prev = e->next = NULL;
}

static void list_push_head(fe_lru *c, ent *e)
{
	e->prev = NULL;
	e->next = c->head;
	if (c->head)
		c->head->prev = e;
	c->head = e;
	if (!c->tail)
		c->tail = e;
}

/* The link that points at key's entry, or at the NULL that ends its chain. */
static ent **find(fe_lru *c, uint64_t h, const void *key, size_t klen)
{
	ent **p = &c->b[h & (c->nb - 1)];
	while (*p && !((*p)->h == h && (*p)->klen == klen && !memcmp((*p)->bytes, key, klen)))
		p = &(*p)->chain;
	return p;
}

static void remove_entry(fe_lru *c, ent *e)
{
	ent **p = find(c, e->h, e->bytes, e->klen);
	*p = e->chain;
	list_unlink(c, e);
	c->n--;
	free(e);
}

/* Doubles the table when it holds more entries than buckets; a failed
 * allocation keeps the old one (longer chains, same answers). */
static void maybe_grow(fe_lru *c)
{
	if (c->n < c->nb)
		return;
	size_t nb = c->nb * 2;
	ent **b = calloc(nb, sizeof(*b));
	if (!b)
		return;
	for (size_t i = 0; i < c->nb; i++)
		for (ent *e = c->b[i], *nx; e; e = nx) {
			nx = e->chain;
			e->chain = b[e->h & (nb - 1)];
			b[e->h & (nb - 1)] = e;
		}
	free(c->b);
	c->b = b;
	c->nb = nb;
}

int fe_lru_get(fe_lru *c, const void *key, size_t klen, void *val, size_t cap, size_t *len)
{
	uint64_t h = XXH3_64bits(key, klen);
	pthread_mutex_lock(&c->mu);
	ent *e = *find(c, h, key, klen);
	if (e) {
		list_unlink(c, e);
		list_push_head(c, e);
		memcpy(val, e->bytes + e->klen, e->vlen < cap ? e->vlen : cap);
		*len = e->vlen;
	}
	pthread_mutex_unlock(&c->mu);
	return e != NULL;
}

int fe_lru_put(fe_lru *c, const void *key, size_t klen, const void *val, size_t vlen)
{
	uint64_t h = XXH3_64bits(key, klen);
	ent *e = malloc(sizeof(*e) + klen + vlen);
	if (!e)
		return -1;
	*e = (ent){.h = h, .klen = klen, .vlen = vlen};
	memcpy(e->bytes, key, klen);
	memcpy(e->bytes + klen, val, vlen);
	pthread_mutex_lock(&c->mu);
	ent *old = *find(c, h, key, klen);
	if (old)
		remove_entry(c, old);
	while (c->n >= c->max && c->tail)
		remove_entry(c, c->tail);
	maybe_grow(c);
	ent **slot = &c->b[h & (c->nb - 1)];
	e->chain = *slot;
	*slot = e;
	list_push_head(c, e);
	c->n++;
	pthread_mutex_unlock(&c->mu);
	return 0;
}

size_t fe_lru_count(fe_lru *c)
{
	pthread_mutex_lock(&c->mu);
	size_t n = c->n;
	pthread_mutex_unlock(&c->mu);
	return n;
}
