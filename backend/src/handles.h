/*
 * Handle tables: the client's 64-bit ids -> the driver objects they stand for,
 * one table per kind of handle per session. The client chooses the ids; the
 * server never turns a number from the wire into a pointer without a lookup here.
 *
 * An id that was removed stays in the table as a tombstone with its generation
 * (how many times it has been added), so a lookup can tell a stale id (used
 * after its destroy) from one that never existed, and the log says which. Adding
 * the id again revives it with the next generation. Tombstones are dropped when
 * they would make the table grow beyond a small multiple of the live entries; an
 * old stale id then reads as unknown, which is the same error for the client.
 *
 * Not thread-safe: a session's tables belong to its executor thread.
 */
#ifndef BE_HANDLES_H
#define BE_HANDLES_H

#include <stddef.h>
#include <stdint.h>

/* The tables' own errors: a handler turns them into the CUresult its call
 * answers (CUDA_ERROR_INVALID_HANDLE, _INVALID_VALUE, _OUT_OF_MEMORY) and
 * never returns one (session.h). Numbered apart from every other space of
 * negative ints (docs/ARCHITECTURE.md, "Errors by boundary"). */
enum be_h_err {
	BE_H_OK = 0,
	BE_H_UNKNOWN = -301, /* never added (or its tombstone was dropped) */
	BE_H_STALE = -302,   /* added, then removed */
	BE_H_EINUSE = -303,  /* add: the id is live */
	BE_H_EZERO = -304,   /* add: id 0 is reserved (the NULL stream, no handle) */
	BE_H_ENOMEM = -305,
};

typedef struct be_hent {
	uint64_t id;
	void *obj;
	uint64_t aux;  /* per-kind extra: a function's parameter size */
	uint32_t gen;  /* times added; the current generation while live */
	uint8_t state; /* 0 empty, 1 live, 2 tombstone */
	uint8_t dev;   /* *dev_src when added: the session's device it was made on */
} be_hent;

typedef struct be_htab {
	be_hent *e;
	uint32_t cap; /* power of two, 0 before the first add */
	uint32_t live, dead;
	const int *dev_src; /* the owner's running device (be_session.cur); NULL: 0 */
} be_htab;

void be_htab_init(be_htab *t);
void be_htab_free(be_htab *t);
int be_htab_add(be_htab *t, uint64_t id, void *obj, uint64_t aux);
/* obj and aux may be NULL. */
int be_htab_get(const be_htab *t, uint64_t id, void **obj, uint64_t *aux);
int be_htab_del(be_htab *t, uint64_t id, void **obj, uint64_t *aux);
/* Replaces the aux of a live id (its object and generation stay). */
int be_htab_set_aux(be_htab *t, uint64_t id, uint64_t aux);
/* Generation of id: 0 if unknown. */
uint32_t be_htab_gen(const be_htab *t, uint64_t id);
static inline uint32_t be_htab_count(const be_htab *t) { return t->live; }
/* Calls fn for every live entry (teardown). fn must not modify the table. */
void be_htab_each(const be_htab *t, void (*fn)(void *ctx, uint64_t id, void *obj, uint64_t aux), void *ctx);
/* The same for the live entries added while *dev_src was dev. */
void be_htab_each_dev(const be_htab *t, int dev, void (*fn)(void *ctx, uint64_t id, void *obj, uint64_t aux),
		      void *ctx);
const char *be_h_strerror(int err);

#endif
