/*
 * The kernel image cache, shared by all sessions of the server: content hash
 * (cubin_hash: XXH3-128, 32 hex digits) -> the fatbin bytes a client uploaded.
 * A program's second run, or a second client of the same program, loads its
 * modules by hash without sending the images again.
 *
 * Images are kept in least-recently-used order and evicted beyond
 * BE_IMGCACHE_MAX bytes, unless a session is loading one right now (refs).
 * Lookups walk a list: a server sees hundreds of distinct images, and a lookup
 * happens once per module load.
 */
#include "backend.h"

#include <stdlib.h>
#include <string.h>

#define BE_IMGCACHE_MAX (2ull << 30)

struct be_img {
	char hash[33];
	void *data;
	size_t size;
	unsigned refs;
	struct be_img *prev, *next; /* most recently used first */
};

static struct {
	pthread_mutex_t mu;
	be_img *head, *tail;
	uint64_t bytes;
	unsigned n;
} C = {PTHREAD_MUTEX_INITIALIZER};

static void unlink_img(be_img *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		C.head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		C.tail = e->prev;
	e->prev = e->next = NULL;
}

static void push_front(be_img *e)
{
	e->next = C.head;
	e->prev = NULL;
	if (C.head)
		C.head->prev = e;
	C.head = e;
	if (!C.tail)
		C.tail = e;
}

/* Caller holds C.mu. */
static be_img *find(const char *hash)
{
	for (be_img *e = C.head; e; e = e->next)
		if (memcmp(e->hash, hash, 32) == 0)
			return e;
	return NULL;
}

be_img *be_imgcache_get(const char *hash)
{
	pthread_mutex_lock(&C.mu);
	be_img *e = find(hash);
	if (e) {
		e->refs++;
		unlink_img(e);
		push_front(e);
	}
	pthread_mutex_unlock(&C.mu);
	return e;
}

be_img *be_imgcache_add(const char *hash, void *data, size_t size)
{
	be_img *e, *victims = NULL;

	pthread_mutex_lock(&C.mu);
	if ((e = find(hash))) { /* another session uploaded it meanwhile */
		e->refs++;
		pthread_mutex_unlock(&C.mu);
		free(data);
		return e;
	}
	if (!(e = calloc(1, sizeof(*e)))) {
		pthread_mutex_unlock(&C.mu);
		free(data);
		return NULL;
	}
	memcpy(e->hash, hash, 32);
	e->data = data;
	e->size = size;
	e->refs = 1;
	push_front(e);
	C.bytes += size;
	C.n++;
	/* Evict the least recently used images nobody is loading. */
	for (be_img *v = C.tail; v && C.bytes > BE_IMGCACHE_MAX;) {
		be_img *prev = v->prev;
		if (!v->refs) {
			unlink_img(v);
			C.bytes -= v->size;
			C.n--;
			v->next = victims;
			victims = v;
		}
		v = prev;
	}
	pthread_mutex_unlock(&C.mu);
	while (victims) {
		be_img *next = victims->next;
		LOG_DEBUG(BE_LOG, "image cache: evicted %.32s (%zu bytes)", victims->hash, victims->size);
		free(victims->data);
		free(victims);
		victims = next;
	}
	return e;
}

const void *be_img_data(const be_img *e) { return e->data; }
size_t be_img_size(const be_img *e) { return e->size; }

void be_imgcache_put(be_img *e)
{
	pthread_mutex_lock(&C.mu);
	e->refs--;
	pthread_mutex_unlock(&C.mu);
}

void be_imgcache_clear(void)
{
	pthread_mutex_lock(&C.mu);
	be_img *e = C.head;
	C.head = C.tail = NULL;
	C.bytes = 0;
	C.n = 0;
	pthread_mutex_unlock(&C.mu);
	while (e) {
		be_img *next = e->next;
		free(e->data);
		free(e);
		e = next;
	}
}
