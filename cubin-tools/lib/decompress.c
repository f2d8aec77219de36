/*
 * Compressed fatbin entries. nvcc 13 compresses PTX (and, with
 * --compress-mode=size or -Xfatbin -compress-all, cubins too) with zstd: entry
 * flag 0x8000, the payload one zstd frame. --compress-mode=speed uses LZ4 instead:
 * flag 0x2000, the payload one raw LZ4 block (no frame header), the format older
 * toolkits used for every compressed entry. The entry header gives the
 * uncompressed size; we require the decoder to produce exactly that many bytes.
 */
#include <stdlib.h>

#include <lz4.h>
#include <zstd.h>

#include "cubin_int.h"

int cubin__decompress(uint64_t flags, const uint8_t *src, size_t n, uint64_t usize, uint8_t **out)
{
	int lz4 = (flags & CUBIN_FF_LZ4) != 0, zstd = (flags & CUBIN_FF_ZSTD) != 0;
	uint8_t *dst;

	*out = NULL;
	if (lz4 == zstd)
		return CUBIN_ECOMPRESS; /* neither, or both: no codec we know */
	if (usize == 0 || usize > CUBIN_MAX_UNCOMPRESSED)
		return CUBIN_ECOMPRESS;
	if (lz4 && (n > (size_t)LZ4_MAX_INPUT_SIZE || usize > (uint64_t)INT32_MAX))
		return CUBIN_ECOMPRESS;
	if (!(dst = malloc((size_t)usize)))
		return CUBIN_ENOMEM;
	if (zstd) {
		size_t r = ZSTD_decompress(dst, (size_t)usize, src, n);
		if (ZSTD_isError(r) || r != usize)
			goto bad;
	} else {
		int r = LZ4_decompress_safe((const char *)src, (char *)dst, (int)n, (int)usize);
		if (r < 0 || (uint64_t)r != usize)
			goto bad;
	}
	*out = dst;
	return CUBIN_OK;
bad:
	free(dst);
	return CUBIN_ECOMPRESS;
}
