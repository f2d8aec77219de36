/*
 * The kernel image cache: content hash (cubin_hash: SHA-256, 64 hex digits) ->
 * the fatbin bytes. Behind the in-memory cache of this process sits the on-disk
 * store (--cubin-store, cubin-tools/include/cubin_store.h), shared by every
 * session process and filled ahead of time by `remote-cubin extract` or by
 * uploads: a program's second run, or another client of the same program, loads
 * its modules by hash without sending the images again. Entries read from disk
 * are hashed before use; a damaged one counts as missing (the client uploads it
 * and the upload replaces it).
 *
 * Whatever is here is served to every session, so only images that are what
 * their address says and that loaded come in: the store an operator extracted,
 * and uploads that op_module.c verified (hash) and loaded in the uploading
 * session first (be_imgcache_add is called only then).
 *
 * Images are kept in least-recently-used order and evicted beyond
 * BE_IMGCACHE_MAX bytes, unless a session is loading one right now (refs).
 * Lookups walk a list: a server sees hundreds of distinct images, and a lookup
 * happens once per module load.
 */
#include "backend.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cubin_store.h"

#define BE_IMGCACHE_MAX (2ull << 30)

struct be_img {
	char hash[CUBIN_HASH_HEX];
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
		if (memcmp(e->hash, hash, CUBIN_HASH_LEN) == 0)
			return e;
	return NULL;
}

static be_img *cache_insert(const char *hash, void *data, size_t size);

/* The store's copy of an image, verified; NULL when absent or damaged. */
static be_img *store_load(const char *hash)
{
	char h[CUBIN_HASH_HEX], path[4096];
	memcpy(h, hash, CUBIN_HASH_LEN);
	h[CUBIN_HASH_LEN] = 0;
	if (!be_srv.store || cubin_store_path(be_srv.store, h, path, sizeof(path)) != CUBIN_OK)
		return NULL;
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	void *data = NULL;
	long size = -1;
	if (fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 && (data = malloc((size_t)size)) &&
	    fread(data, 1, (size_t)size, f) != (size_t)size) {
		free(data);
		data = NULL;
	}
	fclose(f);
	if (!data)
		return NULL;
	char got[CUBIN_HASH_HEX];
	cubin_hash(data, (size_t)size, got);
	if (memcmp(got, h, CUBIN_HASH_LEN) != 0) {
		LOG_WARN(BE_LOG, "cubin store: %s is damaged (its bytes hash to %s): asking the client for the image", path, got);
		free(data);
		return NULL;
	}
	LOG_DEBUG(BE_LOG, "cubin store: loaded %s (%ld bytes)", h, size);
	return cache_insert(hash, data, (size_t)size);
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
	return e ? e : store_load(hash);
}

int be_imgcache_open_store(const char *dir)
{
	int r = cubin_store_init(dir);
	if (r == CUBIN_ESTOREFMT) {
		LOG_ERROR(BE_LOG, "--cubin-store %s: %s (images are now named by SHA-256; "
				  "`remote-cubin extract` rebuilds a store)", dir, cubin_strerror(r));
		return -1;
	}
	if (r != CUBIN_OK) {
		LOG_ERROR(BE_LOG, "--cubin-store %s: cannot create or open it: %s", dir, strerror(errno));
		return -1;
	}
	cubin_store_index ix = {0};
	size_t bad = 0;
	if (cubin_store_index_read(dir, &ix, &bad) == CUBIN_OK) {
		uint64_t bytes = 0;
		for (size_t i = 0; i < ix.n; i++)
			bytes += ix.r[i].size;
		LOG_INFO(BE_LOG, "cubin store %s: %zu images, %llu MiB%s", dir, ix.n, (unsigned long long)(bytes >> 20),
			 bad ? " (malformed index lines skipped)" : "");
		cubin_store_index_free(&ix);
	}
	be_srv.store = dir;
	return 0;
}

/* An uploaded image goes to the store too, so later session processes find it. */
static void store_save(const char *hash, const void *data, size_t size)
{
	char h[CUBIN_HASH_HEX];
	if (!be_srv.store)
		return;
	int r = cubin_store_put(be_srv.store, data, size, h);
	if (r < 0) {
		LOG_WARN(BE_LOG, "cubin store: cannot save %.64s: %s", hash, cubin_strerror(r));
		return;
	}
	if (r > 0) {
		cubin_store_rec rec = {.size = size, .source = "upload"};
		memcpy(rec.hash, h, sizeof(rec.hash));
		cubin_store_index_add(be_srv.store, &rec, 1);
	}
}

static be_img *cache_insert(const char *hash, void *data, size_t size)
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
	memcpy(e->hash, hash, CUBIN_HASH_LEN);
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
		LOG_DEBUG(BE_LOG, "image cache: evicted %.64s (%zu bytes)", victims->hash, victims->size);
		free(victims->data);
		free(victims);
		victims = next;
	}
	return e;
}

/* An uploaded image, checked against its hash and loaded by the caller. */
be_img *be_imgcache_add(const char *hash, void *data, size_t size)
{
	store_save(hash, data, size);
	return cache_insert(hash, data, size);
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
