/* Fixed frame header: encode/decode round trip and every rejection. */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "proto.h"

static void put_u32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void encode(uint8_t *b, uint16_t version, uint16_t flags, uint32_t hdr_len, uint64_t payload_len)
{
	proto_hdr h = {version, flags, hdr_len, payload_len};
	proto_encode_hdr(&h, b);
}

static void test_round_trip(void)
{
	static const struct {
		uint16_t flags;
		uint32_t hdr_len;
		uint64_t payload_len;
	} cases[] = {
		{0, 1, 0},
		{PROTO_F_REPLY, 3, 1},
		{PROTO_F_ASYNC | PROTO_F_EVENT, 4096, 3u << 20},
		{0xffff, PROTO_MAX_HDR, PROTO_MAX_PAYLOAD},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint8_t b[PROTO_HDR_SIZE];
		proto_hdr h;
		encode(b, PROTO_VERSION, cases[i].flags, cases[i].hdr_len, cases[i].payload_len);
		CHECK_EQ(proto_decode_hdr(b, &h), PROTO_OK);
		CHECK_EQ(h.version, PROTO_VERSION);
		CHECK_EQ(h.flags, cases[i].flags);
		CHECK_EQ(h.hdr_len, cases[i].hdr_len);
		CHECK_EQ(h.payload_len, cases[i].payload_len);
	}

	/* The byte layout is the wire format: little-endian, fixed offsets. */
	uint8_t b[PROTO_HDR_SIZE];
	encode(b, PROTO_VERSION, 0x0201, 0x06050403, 0x0e0d0c0b0a090807ull);
	static const uint8_t want[PROTO_HDR_SIZE] = {
		'U', 'P', 'G', 'R', PROTO_VERSION, 0, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06,
		0, 0, 0, 0, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e};
	CHECK_MEM(b, want, sizeof(want));
}

static void test_errors(void)
{
	uint8_t b[PROTO_HDR_SIZE];
	proto_hdr h;

	/* magic */
	encode(b, PROTO_VERSION, 0, 8, 0);
	b[0] ^= 1;
	CHECK_EQ(proto_decode_hdr(b, &h), PROTO_EMAGIC);
	memset(b, 0, sizeof(b));
	CHECK_EQ(proto_decode_hdr(b, &h), PROTO_EMAGIC);
	memcpy(b, "GET / HTTP/1.1\r\nHost: x\r\n", PROTO_HDR_SIZE);
	CHECK_EQ(proto_decode_hdr(b, &h), PROTO_EMAGIC);

	/* version: the peer's version is still reported */
	encode(b, PROTO_VERSION + 1, PROTO_F_REPLY, 8, 0);
	CHECK_EQ(proto_decode_hdr(b, &h), PROTO_EVERSION);
	CHECK_EQ(h.version, PROTO_VERSION + 1);
	encode(b, 0, 0, 8, 0);
	CHECK_EQ(proto_decode_hdr(b, &h), PROTO_EVERSION);
	CHECK_EQ(h.version, 0);
	encode(b, 0xffff, 0, 8, 0);
	CHECK_EQ(proto_decode_hdr(b, &h), PROTO_EVERSION);

	/* reserved must be zero */
	for (int byte = 12; byte < 16; byte++) {
		encode(b, PROTO_VERSION, 0, 8, 0);
		b[byte] = 0x80;
		CHECK_EQ(proto_decode_hdr(b, &h), PROTO_EDECODE);
	}

	/* hostile lengths */
	encode(b, PROTO_VERSION, 0, 0, 0);
	CHECK_EQ(proto_decode_hdr(b, &h), PROTO_ETOOBIG); /* no [op, seq] at all */
	encode(b, PROTO_VERSION, 0, PROTO_MAX_HDR + 1, 0);
	CHECK_EQ(proto_decode_hdr(b, &h), PROTO_ETOOBIG);
	encode(b, PROTO_VERSION, 0, UINT32_MAX, 0);
	CHECK_EQ(proto_decode_hdr(b, &h), PROTO_ETOOBIG);
	encode(b, PROTO_VERSION, 0, 8, PROTO_MAX_PAYLOAD + 1);
	CHECK_EQ(proto_decode_hdr(b, &h), PROTO_ETOOBIG);
	encode(b, PROTO_VERSION, 0, 8, UINT64_MAX);
	CHECK_EQ(proto_decode_hdr(b, &h), PROTO_ETOOBIG);
	encode(b, PROTO_VERSION, 0, 8, 1ull << 63);
	CHECK_EQ(proto_decode_hdr(b, &h), PROTO_ETOOBIG);

	/* reserved garbage and a bad length together: still rejected */
	encode(b, PROTO_VERSION, 0, UINT32_MAX, 0);
	put_u32(b + 12, 0xdeadbeef);
	CHECK(proto_decode_hdr(b, &h) < 0);

	/* every error has a message */
	for (int e = PROTO_OK; e >= PROTO_ENOMEM; e--)
		CHECK(proto_strerror(e) && *proto_strerror(e));
	CHECK(proto_strerror(-99) != NULL);
}

int main(void)
{
	test_round_trip();
	test_errors();
	return check_summary("test_frame");
}
