/*
 * Handle tables (handles.h): open addressing with linear probing on a mixed
 * hash of the id. Removal leaves a tombstone (needed for probing anyway), which
 * doubles as the record of a stale id. A rehash keeps tombstones while they are
 * few compared to live entries, so a client that creates and destroys ids
 * forever does not grow the table forever.
 */
#include "handles.h"

#include <stdlib.h>

#define MIN_CAP 16u
#define KEEP_DEAD_MIN 1024u /* tombstones always kept up to this many */

static uint32_t slot_of(uint64_t id, uint32_t cap);
static be_hent *find(const be_htab *t, uint64_t id);
static int rehash(be_htab *t, uint32_t need);

/* splitmix64's finaliser: client ids are often small consecutive numbers. */
static uint32_t slot_of(uint64_t id, uint32_t cap)
{
	id ^= id >> 30;
	id *= 0xbf58476d1ce4e5b9ull;
	id ^= id >> 27;
	id *= 0x94d049bb133111ebull;
	id ^= id >> 31;
	return (uint32_t)id & (cap - 1);
}

void be_htab_init(be_htab *t)
{
	t->e = NULL;
	t->cap = t->live = t->dead = 0;
}

void be_htab_free(be_htab *t)
{
	free(t->e);
	be_htab_init(t);
}

/* The live or tombstone entry of id, or NULL. */
static be_hent *find(const be_htab *t, uint64_t id)
{
	if (!t->cap)
		return NULL;
	for (uint32_t i = slot_of(id, t->cap), n = 0; n < t->cap; i = (i + 1) & (t->cap - 1), n++) {
		be_hent *e = &t->e[i];
		if (e->state == 0)
			return NULL;
		if (e->id == id)
			return e;
	}
	return NULL;
}

/* Rebuilds the table with room for need more entries. */
static int rehash(be_htab *t, uint32_t need)
{
	uint32_t keep_dead = t->dead <= t->live || t->dead <= KEEP_DEAD_MIN;
	uint64_t n = (uint64_t)t->live + (keep_dead ? t->dead : 0) + need;
	uint64_t cap = MIN_CAP;

	while (cap < n * 2)
		cap *= 2;
	if (cap > (1u << 30))
		return BE_H_ENOMEM;
	be_hent *ne = calloc((size_t)cap, sizeof(*ne));
	if (!ne)
		return BE_H_ENOMEM;
	uint32_t live = 0, dead = 0;
	for (uint32_t i = 0; i < t->cap; i++) {
		be_hent *e = &t->e[i];
		if (e->state == 0 || (e->state == 2 && !keep_dead))
			continue;
		uint32_t j = slot_of(e->id, (uint32_t)cap);
		while (ne[j].state)
			j = (j + 1) & ((uint32_t)cap - 1);
		ne[j] = *e;
		if (e->state == 1)
			live++;
		else
			dead++;
	}
	free(t->e);
	t->e = ne;
	t->cap = (uint32_t)cap;
	t->live = live;
	t->dead = dead;
	return BE_H_OK;
}

int be_htab_add(be_htab *t, uint64_t id, void *obj, uint64_t aux)
{
	if (id == 0)
		return BE_H_EZERO;
	be_hent *e = find(t, id);
	if (e && e->state == 1)
		return BE_H_EINUSE;
	uint8_t dev = t->dev_src ? (uint8_t)*t->dev_src : 0;
	if (e) { /* revive the tombstone: next generation */
		e->state = 1;
		e->dev = dev;
		e->obj = obj;
		e->aux = aux;
		e->gen++;
		t->dead--;
		t->live++;
		return BE_H_OK;
	}
	/* Keep the load (live + tombstones) at most 3/4. */
	if ((uint64_t)(t->live + t->dead + 1) * 4 > (uint64_t)t->cap * 3) {
		int err = rehash(t, 1);
		if (err)
			return err;
	}
	uint32_t i = slot_of(id, t->cap);
	while (t->e[i].state)
		i = (i + 1) & (t->cap - 1);
	t->e[i] = (be_hent){.id = id, .obj = obj, .aux = aux, .gen = 1, .state = 1, .dev = dev};
	t->live++;
	return BE_H_OK;
}

int be_htab_get(const be_htab *t, uint64_t id, void **obj, uint64_t *aux)
{
	const be_hent *e = find(t, id);
	if (!e)
		return BE_H_UNKNOWN;
	if (e->state != 1)
		return BE_H_STALE;
	if (obj)
		*obj = e->obj;
	if (aux)
		*aux = e->aux;
	return BE_H_OK;
}

int be_htab_set_aux(be_htab *t, uint64_t id, uint64_t aux)
{
	be_hent *e = find(t, id);
	if (!e)
		return BE_H_UNKNOWN;
	if (e->state != 1)
		return BE_H_STALE;
	e->aux = aux;
	return BE_H_OK;
}

int be_htab_del(be_htab *t, uint64_t id, void **obj, uint64_t *aux)
{
	be_hent *e = find(t, id);
	if (!e)
		return BE_H_UNKNOWN;
	if (e->state != 1)
		return BE_H_STALE;
	if (obj)
		*obj = e->obj;
	if (aux)
		*aux = e->aux;
	e->state = 2;
	e->obj = NULL;
	e->aux = 0;
	t->live--;
	t->dead++;
	return BE_H_OK;
}

uint32_t be_htab_gen(const be_htab *t, uint64_t id)
{
	const be_hent *e = find(t, id);
	return e ? e->gen : 0;
}

void be_htab_each(const be_htab *t, void (*fn)(void *ctx, uint64_t id, void *obj, uint64_t aux), void *ctx)
{
	for (uint32_t i = 0; i < t->cap; i++)
		if (t->e[i].state == 1)
			fn(ctx, t->e[i].id, t->e[i].obj, t->e[i].aux);
}

const char *be_h_strerror(int err)
{
	switch (err) {
	case BE_H_OK: return "ok";
	case BE_H_UNKNOWN: return "unknown id";
	case BE_H_STALE: return "stale id (already destroyed)";
	case BE_H_EINUSE: return "id already in use";
	case BE_H_EZERO: return "id 0 is reserved";
	case BE_H_ENOMEM: return "out of memory";
	}
	return "?";
}

void be_htab_each_dev(const be_htab *t, int dev, void (*fn)(void *ctx, uint64_t id, void *obj, uint64_t aux),
		      void *ctx)
{
	for (uint32_t i = 0; i < t->cap; i++)
		if (t->e[i].state == 1 && t->e[i].dev == dev)
			fn(ctx, t->e[i].id, t->e[i].obj, t->e[i].aux);
}
