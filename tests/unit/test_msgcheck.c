/* Unit tests of the msgpack plausibility check (proto_check_msgpack in protocol/src/msg.c). */
#include <stdlib.h>
#include <string.h>

#include <msgpack.h>

#include "check.h"
#include "proto.h"

#define plausible(p, n) (proto_check_msgpack((p), (n)) == PROTO_OK)

static uint32_t rng = 1;
static uint32_t rnd(void)
{
	rng = rng * 1664525u + 1013904223u;
	return rng >> 8;
}

/* A random object of every kind msgpack has, nested up to depth. */
static void gen(msgpack_packer *pk, int depth)
{
	static const char bytes[300] = "x";
	switch (rnd() % (depth > 0 ? 14 : 11)) {
	case 0: msgpack_pack_nil(pk); break;
	case 1: msgpack_pack_true(pk); break;
	case 2: msgpack_pack_uint64(pk, (uint64_t)rnd() << (rnd() % 40)); break;
	case 3: msgpack_pack_int64(pk, -(int64_t)(rnd() << (rnd() % 30)) - 1); break;
	case 4: msgpack_pack_double(pk, 1.5); break;
	case 5: msgpack_pack_float(pk, 2.5f); break;
	case 6: {
		size_t n = rnd() % 300;
		msgpack_pack_str(pk, n);
		msgpack_pack_str_body(pk, bytes, n);
		break;
	}
	case 7: {
		size_t n = rnd() % 300;
		msgpack_pack_bin(pk, n);
		msgpack_pack_bin_body(pk, bytes, n);
		break;
	}
	case 8: {
		static const size_t fixed[] = {1, 2, 4, 8, 16, 0, 3, 100, 70000};
		size_t n = fixed[rnd() % 9];
		static char big[70000];
		msgpack_pack_ext(pk, n, 7);
		msgpack_pack_ext_body(pk, big, n);
		break;
	}
	case 9: msgpack_pack_uint8(pk, 200); break;
	case 10: msgpack_pack_int16(pk, -300); break;
	case 11: {
		uint32_t n = rnd() % 50 == 0 ? 20 + rnd() % 70000 : rnd() % 20;
		if (n > 20)
			depth = 0;
		msgpack_pack_array(pk, n);
		for (uint32_t i = 0; i < n; i++)
			gen(pk, depth - 1);
		break;
	}
	default: {
		uint32_t n = rnd() % 6;
		msgpack_pack_map(pk, n);
		for (uint32_t i = 0; i < 2 * n; i++)
			gen(pk, depth - 1);
		break;
	}
	}
}

static void test_valid_and_truncated(void)
{
	int bad_valid = 0, bad_trunc = 0, bad_extra = 0;
	for (int i = 0; i < 3000; i++) {
		msgpack_sbuffer sb;
		msgpack_packer pk;
		msgpack_sbuffer_init(&sb);
		msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
		gen(&pk, 4);
		const uint8_t *p = (const uint8_t *)sb.data;
		bad_valid += !plausible(p, sb.size);
		/* every proper prefix is incomplete */
		size_t cut = sb.size > 1 ? rnd() % sb.size : 0;
		bad_trunc += plausible(p, cut);
		/* trailing bytes: not one object */
		uint8_t *q = malloc(sb.size + 1);
		memcpy(q, p, sb.size);
		q[sb.size] = 0;
		bad_extra += plausible(q, sb.size + 1);
		free(q);
		msgpack_sbuffer_destroy(&sb);
	}
	CHECK_EQ(bad_valid, 0);
	CHECK_EQ(bad_trunc, 0);
	CHECK_EQ(bad_extra, 0);
}

static void test_hostile(void)
{
	static const uint8_t a32[] = {0xdd, 0xff, 0xff, 0xff, 0xff};
	static const uint8_t nested[] = {0x93, 0x01, 0x01, 0xdd, 0x0f, 0xff, 0xff, 0xff};
	static const uint8_t map32[] = {0x94, 0x02, 0x01, 0xdf, 0x7f, 0xff, 0xff, 0xff};
	static const uint8_t fits[] = {0x92, 0x01, 0x92, 0xc0, 0xc0};
	static const uint8_t str32[] = {0xdb, 0xff, 0xff, 0xff, 0xff, 'a'};
	static const uint8_t never[] = {0xc1};
	static const uint8_t trunc_hdr[] = {0xcf, 1, 2};
	static const uint8_t fixext16[] = {0xd8, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
	CHECK(!plausible(a32, sizeof(a32)));
	CHECK(!plausible(nested, sizeof(nested)));
	CHECK(!plausible(map32, sizeof(map32)));
	CHECK(plausible(fits, sizeof(fits)));
	CHECK(!plausible(str32, sizeof(str32)));
	CHECK(!plausible(never, sizeof(never)));
	CHECK(!plausible(trunc_hdr, sizeof(trunc_hdr)));
	CHECK(plausible(fixext16, sizeof(fixext16)));
	CHECK(!plausible(fixext16, sizeof(fixext16) - 1));
	CHECK(!plausible(NULL, 0));
}

/* Random bytes: never a crash, and whatever passes, msgpack-c decodes whole. */
static void test_random(void)
{
	uint8_t buf[64];
	int disagree = 0;
	for (int i = 0; i < 200000; i++) {
		size_t n = 1 + rnd() % sizeof(buf);
		for (size_t j = 0; j < n; j++)
			buf[j] = (uint8_t)rnd();
		if (rnd() % 2)
			buf[0] = (uint8_t)(0x90 | (rnd() % 4));
		if (!plausible(buf, n))
			continue;
		msgpack_unpacked up;
		size_t off = 0;
		msgpack_unpacked_init(&up);
		int r = msgpack_unpack_next(&up, (const char *)buf, n, &off);
		disagree += r != MSGPACK_UNPACK_SUCCESS || off != n;
		msgpack_unpacked_destroy(&up);
	}
	CHECK_EQ(disagree, 0);
}

int main(void)
{
	test_valid_and_truncated();
	test_hostile();
	test_random();
	return check_summary("test_msgcheck");
}
