/*
 * The cubin store: a directory of kernel images named by their content hash
 * (cubin_hash), written by `remote-cubin extract` and read by
 * `remote-gpud --cubin-store DIR` (which also adds uploaded images to it).
 *
 *   DIR/<hash>.fatbin  the image, byte for byte as registered (a fatbin, exactly
 *                      cubin_fatbin_size() bytes; or a standalone cubin)
 *   DIR/index          one line per image: "<hash> <size> <source>\n", where
 *                      source is the file it came from (the rest of the line)
 *   DIR/FORMAT         "remote-gpu cubin store 2 sha256": <hash> is SHA-256 (64
 *                      hex digits). A directory with images or an index but no
 *                      such FORMAT (a store of XXH3-128 addresses, from before) is
 *                      refused with CUBIN_ESTOREFMT, never read.
 *   DIR/tenants/<id>   (mode 0700) what one tenant uploaded: "<hash> <size>\n"
 *                      per image; its sum is counted against the tenant's quota.
 *
 * Writers never leave a partial file under a final name: images and the index
 * are written to a temporary name in DIR and renamed. Index updates are
 * serialised between processes with flock() on DIR/index.lock and merge with the
 * index on disk, so concurrent writers lose no lines. Images are not fsynced
 * (a reader verifies the hash before use; `remote-cubin verify DIR` checks all);
 * the index is.
 */
#ifndef CUBIN_STORE_H
#define CUBIN_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "cubin.h"

typedef struct cubin_store_rec {
	char hash[CUBIN_HASH_HEX];
	uint64_t size;
	char *source; /* owned; "" when unknown */
} cubin_store_rec;

typedef struct cubin_store_index {
	cubin_store_rec *r;
	size_t n;
} cubin_store_index;

/* Creates DIR if missing (its parent must exist) and checks or writes its
 * FORMAT; CUBIN_ESTOREFMT for a store of another format. */
int cubin_store_init(const char *dir);
/* The same check without writing (for readers): CUBIN_OK for a store of this
 * format or a directory without one, CUBIN_ESTOREFMT otherwise. */
int cubin_store_check(const char *dir);
/* DIR/<hash>.fatbin into buf; CUBIN_ENOMEM when len is too small. */
int cubin_store_path(const char *dir, const char *hash, char *buf, size_t len);
/* 1 when DIR/<hash>.fatbin exists with this size, 0 when not (contents unchecked:
 * a reader hashes what it loads). */
int cubin_store_has(const char *dir, const char *hash, uint64_t size);
/* Writes an image atomically under its hash (computed here). Returns 1 when
 * written, 0 when the entry was already there with these bytes, 2 when a damaged
 * entry of that name was replaced, or a CUBIN_E* error. */
int cubin_store_put(const char *dir, const void *data, size_t size, char hash_out[CUBIN_HASH_HEX]);
/* Reads DIR/index; a missing index is an empty one. Malformed lines are
 * skipped and counted in *bad (may be NULL). */
int cubin_store_index_read(const char *dir, cubin_store_index *out, size_t *bad);
/* Adds records (those whose hash is already listed are left as they are) and
 * rewrites DIR/index atomically, under the lock. */
int cubin_store_index_add(const char *dir, const cubin_store_rec *recs, size_t n);
void cubin_store_index_free(cubin_store_index *ix);

/* Bytes tenant (a name of [0-9a-z] characters) has uploaded, from DIR/tenants. */
int cubin_store_tenant_usage(const char *dir, const char *tenant, uint64_t *bytes);
/* Records that tenant uploaded image hash of size bytes, if its uploads stay
 * within quota bytes: 1 when recorded, 0 when that would pass the quota (nothing
 * recorded), or a CUBIN_E* error. Check and record are one step under a lock on
 * the tenant's file, so concurrent uploads of one tenant cannot both pass. */
int cubin_store_tenant_charge(const char *dir, const char *tenant, const char *hash, uint64_t size, uint64_t quota);

#endif
