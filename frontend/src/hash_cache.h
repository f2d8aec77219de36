/*
 * The client's cache of image hashes (hash_cache.c has the design): an image's
 * cubin_hash, from the per-user cache of the hashes of library files' images
 * when it lies in one (else computed, and filed there).
 */
#ifndef FE_HASH_CACHE_H
#define FE_HASH_CACHE_H

#include <stddef.h>

#include "cubin.h"

void fe_hashcache_get(const void *data, size_t size, char out[CUBIN_HASH_HEX]);
/* Drops what the cache says of the image (the server found it wrong); 1 if it
 * had an entry. */
int fe_hashcache_forget(const void *data, size_t size);

#endif
