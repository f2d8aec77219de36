/*
 * A plausibility check of a msgpack message before msgpack-c unpacks it.
 *
 * msgpack-c allocates an array's or map's elements as soon as it reads the
 * container's header, trusting the declared count: five bytes claiming 2^32
 * elements make it ask for about 100 GiB, and a 1 MiB message can claim many
 * such containers. The allocation fails or stays untouched virtual memory, but a
 * sanitizer build aborts, and a server should not let a peer choose its
 * allocation sizes. Every msgpack object takes at least one byte, so a message
 * is only plausible if, at every point, the objects still owed fit in the bytes
 * left. This walk checks that in one pass, without allocating, which bounds
 * what msgpack-c allocates afterwards by the message's own size.
 */
#include "msgcheck.h"

static uint64_t be16(const uint8_t *p) { return (uint64_t)p[0] << 8 | p[1]; }
static uint64_t be32(const uint8_t *p) { return be16(p) << 16 | be16(p + 2); }

int be_msgpack_plausible(const uint8_t *p, size_t n)
{
	size_t pos = 0;
	uint64_t need = 1; /* objects still to read */

	while (need > 0) {
		if (pos >= n)
			return 0;
		uint8_t b = p[pos++];
		uint64_t left = n - pos, skip = 0, count = 0;
		need--;
		if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) {
			/* fixint, nil, bool */
		} else if (b <= 0x8f) {
			count = 2u * (b & 0x0f);
		} else if (b <= 0x9f) {
			count = b & 0x0f;
		} else if (b <= 0xbf) {
			skip = b & 0x1f;
		} else {
			/* header bytes that follow, then what they announce */
			static const uint8_t hdr[32] = {
				[0x04] = 1, [0x05] = 2, [0x06] = 4,             /* bin 8/16/32 */
				[0x07] = 2, [0x08] = 3, [0x09] = 5,             /* ext 8/16/32 (len + type) */
				[0x0a] = 4, [0x0b] = 8,                         /* float 32/64 */
				[0x0c] = 1, [0x0d] = 2, [0x0e] = 4, [0x0f] = 8, /* uint */
				[0x10] = 1, [0x11] = 2, [0x12] = 4, [0x13] = 8, /* int */
				[0x14] = 2, [0x15] = 3, [0x16] = 5, [0x17] = 9, [0x18] = 17, /* fixext */
				[0x19] = 1, [0x1a] = 2, [0x1b] = 4,             /* str 8/16/32 */
				[0x1c] = 2, [0x1d] = 4, [0x1e] = 2, [0x1f] = 4, /* array/map 16/32 */
			};
			uint8_t h = hdr[b - 0xc0];
			if (h == 0 || h > left)
				return 0; /* 0xc1 (never used), or a truncated header */
			const uint8_t *q = p + pos; /* h bytes readable */
			switch (b) {
			case 0xc4: case 0xd9: case 0xc7: /* 8-bit length (ext: then the type) */
				skip = q[0];
				break;
			case 0xc5: case 0xda: case 0xc8:
				skip = be16(q);
				break;
			case 0xc6: case 0xdb: case 0xc9:
				skip = be32(q);
				break;
			case 0xdc:
				count = be16(q);
				break;
			case 0xdd:
				count = be32(q);
				break;
			case 0xde:
				count = 2 * be16(q);
				break;
			case 0xdf:
				count = 2 * be32(q);
				break;
			default: /* fixed-size scalars and fixext: the header is the object */
				break;
			}
			pos += h;
			left -= h;
		}
		if (skip > left)
			return 0;
		pos += (size_t)skip;
		need += count;
		if (need > n - pos)
			return 0; /* more objects owed than bytes left */
	}
	return pos == n;
}
