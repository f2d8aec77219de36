/*
 * The driver's integrity check hash (frontend/src/drv_integrity.c): HMAC-MD2
 * with the fixed key, against a known answer. The message is what the check
 * hashes: the driver version, the runtime's version argument, pid, thread,
 * the two tables' and the function's addresses, the time, then a record per
 * device (UUID, PCI domain, bus, device). The answer was computed by a
 * textbook MD2 and HMAC (RFC 1319, RFC 2104) whose intermediate states match
 * published test values; the static CUDA runtime accepting libremote.so's
 * answers (every static_* end-to-end test) is the check against the real one.
 */
#include <stdint.h>
#include <string.h>

#include "check.h"

void fe_drv_integrity_digest(const uint8_t *msg, size_t len, uint8_t out[16]);

static void put(uint8_t **p, uint64_t v, int n)
{
	memcpy(*p, &v, (size_t)n); /* little-endian, as the hosts this runs on */
	*p += n;
}

int main(void)
{
	uint8_t msg[48 + 28], *p = msg;
	put(&p, 0x2f30, 4);
	put(&p, 12082, 4);
	put(&p, 0x002fa423, 4);
	put(&p, 0xf79c1000, 4);
	put(&p, 0x00007ffff6958240ull, 8);
	put(&p, 0x00007ffff6958220ull, 8);
	put(&p, 0x00007ffff2aaf4a0ull, 8);
	put(&p, 0x682b9cee, 8);
	static const uint8_t uuid[16] = {0x9a, 0xfe, 0x2b, 0x8a, 0xac, 0x25, 0x2d, 0x38,
					 0xea, 0x37, 0xae, 0xc5, 0x6d, 0x71, 0x32, 0x5f};
	memcpy(p, uuid, 16);
	p += 16;
	put(&p, 0, 4);
	put(&p, 2, 4);
	put(&p, 0, 4);
	CHECK_EQ((int)(p - msg), (int)sizeof(msg));

	static const uint8_t want[16] = {0x44, 0x48, 0xa1, 0x71, 0xb0, 0x26, 0xce, 0xf7,
					 0x6c, 0x8c, 0x3e, 0x39, 0x05, 0x1b, 0x02, 0xdd};
	uint8_t got[16];
	fe_drv_integrity_digest(msg, sizeof(msg), got);
	CHECK(memcmp(got, want, 16) == 0);
	/* one bit of the message changes the answer */
	msg[20] ^= 1;
	fe_drv_integrity_digest(msg, sizeof(msg), got);
	CHECK(memcmp(got, want, 16) != 0);
	return check_summary("test_integrity");
}
