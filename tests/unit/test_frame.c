/* Fixed frame header: encode/decode round trip and every rejection. */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "proto.h"

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
		uint32_t op;
		uint64_t seq;
		int32_t status, latched;
	} cases[] = {
		{0, 0, 0, 1, 0, 0, 0}, /* no arguments, no payload: a header alone */
		{0, 1, 0, 18, 7, 0, 0},
		{PROTO_F_REPLY, 3, 1, PROTO_OP_REPLY, 1ull << 40, 0, 0},
		{PROTO_F_REPLY, 0, 0, PROTO_OP_REPLY, 9, 700, -2},
		{PROTO_F_ASYNC | PROTO_F_EVENT, 4096, 3u << 20, UINT32_MAX, UINT64_MAX, 0, 0},
		{0xffff, PROTO_MAX_HDR, PROTO_MAX_PAYLOAD, 0, 0, INT32_MIN, INT32_MAX},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint8_t b[PROTO_HDR_SIZE];
		proto_hdr h, in = {PROTO_VERSION,  cases[i].flags, cases[i].hdr_len, cases[i].payload_len,
				   cases[i].op,    cases[i].seq,   cases[i].status,  cases[i].latched};
		proto_encode_hdr(&in, b);
		CHECK_EQ(proto_decode_hdr(b, &h), PROTO_OK);
		CHECK_EQ(h.version, PROTO_VERSION);
		CHECK_EQ(h.flags, cases[i].flags);
		CHECK_EQ(h.hdr_len, cases[i].hdr_len);
		CHECK_EQ(h.payload_len, cases[i].payload_len);
		CHECK_EQ(h.op, cases[i].op);
		CHECK_EQ(h.seq, cases[i].seq);
		CHECK_EQ(h.status, cases[i].status);
		CHECK_EQ(h.latched, cases[i].latched);
	}

	/* The byte layout is the wire format: little-endian, fixed offsets. */
	uint8_t b[PROTO_HDR_SIZE];
	proto_hdr h = {PROTO_VERSION, 0x0201, 0x06050403, 0x0e0d0c0b0a090807ull, 0x1a191817u, 0x2827262524232221ull,
		       0x34333231, -2};
	proto_encode_hdr(&h, b);
	static const uint8_t want[PROTO_HDR_SIZE] = {
		'U',  'P',  'G',  'R',  PROTO_VERSION, 0, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x17, 0x18,
		0x19, 0x1a, 0x07, 0x08, 0x09,          0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x21, 0x22, 0x23, 0x24,
		0x25, 0x26, 0x27, 0x28, 0x31,          0x32, 0x33, 0x34, 0xfe, 0xff, 0xff, 0xff};
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
	memcpy(b, "GET / HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n", PROTO_HDR_SIZE);
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

	/* A request's status is its device, below PROTO_MAX_DEVICES; it has no
	 * latched error: anything else is a peer that speaks something else. A
	 * reply may carry both. */
	encode(b, PROTO_VERSION, PROTO_F_ASYNC, 8, 0);
	b[32] = PROTO_MAX_DEVICES - 1;
	CHECK_EQ(proto_decode_hdr(b, &h), PROTO_OK);
	CHECK_EQ(h.status, PROTO_MAX_DEVICES - 1);
	b[32] = PROTO_MAX_DEVICES;
	CHECK_EQ(proto_decode_hdr(b, &h), PROTO_EDECODE);
	for (int byte = 32; byte < 40; byte++) {
		encode(b, PROTO_VERSION, PROTO_F_ASYNC, 8, 0);
		b[byte] = 0x80;
		CHECK_EQ(proto_decode_hdr(b, &h), PROTO_EDECODE);
		encode(b, PROTO_VERSION, PROTO_F_REPLY, 8, 0);
		b[byte] = 0x80;
		CHECK_EQ(proto_decode_hdr(b, &h), PROTO_OK);
	}

	/* hostile lengths */
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

	/* a status on a request and a bad length together: still rejected */
	encode(b, PROTO_VERSION, 0, UINT32_MAX, 0);
	b[33] = 0xde;
	CHECK(proto_decode_hdr(b, &h) < 0);

	/* every error has a message */
	for (int e = PROTO_OK; e >= PROTO_ETLS; e--)
		CHECK(proto_strerror(e) && *proto_strerror(e));
	CHECK(proto_strerror(-99) != NULL);
}

/* A sender's own frame lengths: magic and limits, nothing else. */
static void test_peek_len(void)
{
	uint8_t b[PROTO_HDR_SIZE];
	uint64_t n = 7;
	encode(b, PROTO_VERSION, 0, 12, 1000);
	CHECK_EQ(proto_peek_frame_len(b, &n), PROTO_OK);
	CHECK_EQ(n, 1012);
	encode(b, PROTO_VERSION + 1, PROTO_F_REPLY, 0, 0); /* another version: its length still */
	CHECK_EQ(proto_peek_frame_len(b, &n), PROTO_OK);
	CHECK_EQ(n, 0);
	encode(b, PROTO_VERSION, 0, PROTO_MAX_HDR, PROTO_MAX_PAYLOAD);
	CHECK_EQ(proto_peek_frame_len(b, &n), PROTO_OK);
	CHECK_EQ(n, (uint64_t)PROTO_MAX_HDR + PROTO_MAX_PAYLOAD);
	n = 7;
	encode(b, PROTO_VERSION, 0, PROTO_MAX_HDR + 1, 0);
	CHECK_EQ(proto_peek_frame_len(b, &n), PROTO_ETOOBIG);
	encode(b, PROTO_VERSION, 0, 8, UINT64_MAX);
	CHECK_EQ(proto_peek_frame_len(b, &n), PROTO_ETOOBIG);
	encode(b, PROTO_VERSION, 0, 8, 0);
	b[0] ^= 1;
	CHECK_EQ(proto_peek_frame_len(b, &n), PROTO_EMAGIC);
	CHECK_EQ(n, 7); /* untouched on an error */
}

int main(void)
{
	test_round_trip();
	test_errors();
	test_peek_len();
	return check_summary("test_frame");
}
