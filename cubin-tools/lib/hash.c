/*
 * The content hash that names a fatbin everywhere: the frontend computes it over
 * the bytes handed to __cudaRegisterFatBinary (exactly cubin_fatbin_size() of
 * them), remote-cubin over the same bytes cut out of the library file, the backend
 * over an uploaded image. XXH3-128, printed as the canonical (big-endian) form of
 * the 128-bit value: high 64 bits first, lowercase hex.
 */
#include "cubin.h"

#include <xxhash.h>

void cubin_hash(const void *data, size_t size, char out[CUBIN_HASH_HEX])
{
	static const char hex[] = "0123456789abcdef";
	XXH128_hash_t h = XXH3_128bits(data, size);
	XXH128_canonical_t c;

	XXH128_canonicalFromHash(&c, h);
	for (int i = 0; i < 16; i++) {
		out[2 * i] = hex[c.digest[i] >> 4];
		out[2 * i + 1] = hex[c.digest[i] & 15];
	}
	out[32] = '\0';
}
