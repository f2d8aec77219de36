/*
 * The content hash that names a kernel image everywhere: the frontend computes it
 * over the bytes handed to __cudaRegisterFatBinary (exactly cubin_fatbin_size() of
 * them), remote-cubin over the same bytes cut out of the library file, the backend
 * over an uploaded image before it accepts it. SHA-256, as 64 lowercase hex digits.
 *
 * A cryptographic hash because the address is trusted across tenants: a session
 * that names an address gets whatever image the store holds under it, so two
 * different images must never share one (XXH3-128, used before, let an attacker
 * build such a pair and plant the wrong one). nettle's sha256 uses the CPU's SHA
 * instructions where it has them.
 */
#include "cubin.h"

#include <nettle/sha2.h>

void cubin_hash(const void *data, size_t size, char out[CUBIN_HASH_HEX])
{
	static const char hex[] = "0123456789abcdef";
	uint8_t d[SHA256_DIGEST_SIZE];
	struct sha256_ctx c;

	sha256_init(&c);
	sha256_update(&c, size, data);
	sha256_digest(&c, sizeof(d), d);
	for (int i = 0; i < SHA256_DIGEST_SIZE; i++) {
		out[2 * i] = hex[d[i] >> 4];
		out[2 * i + 1] = hex[d[i] & 15];
	}
	out[CUBIN_HASH_LEN] = '\0';
}

int cubin_hash_valid(const char *s, size_t len)
{
	if (len != CUBIN_HASH_LEN)
		return 0;
	for (size_t i = 0; i < len; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return 1;
}
