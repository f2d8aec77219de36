/* Message builder (proto_msg) and decoder (proto_view): every type round trips,
 * messages past the inline buffer grow on the heap, and every accessor rejects
 * the wrong type or a missing argument instead of trusting the peer. */
#include <float.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "proto.h"

/* Checks the fixed header the builder wrote and opens a view on the msgpack part. */
static int open_view(proto_msg *m, uint16_t flags, uint64_t payload_len, proto_view *v)
{
	proto_hdr h;
	if (!CHECK_EQ(proto_msg_finish(m, flags, payload_len), PROTO_OK))
		return -1;
	if (!CHECK_EQ(proto_decode_hdr(m->data, &h), PROTO_OK))
		return -1;
	CHECK_EQ(h.flags, flags);
	CHECK_EQ(h.payload_len, payload_len);
	CHECK_EQ(h.hdr_len, m->len - PROTO_HDR_SIZE);
	CHECK_EQ(h.op, m->op);
	CHECK_EQ(h.seq, m->seq);
	return CHECK_EQ(proto_view_init(v, &h, m->data + PROTO_HDR_SIZE), PROTO_OK) ? 0 : -1;
}

/* The header of a request (op 1, seq 2) whose msgpack part is n bytes. */
static proto_hdr hdr_of(size_t n)
{
	return (proto_hdr){.version = PROTO_VERSION, .hdr_len = (uint32_t)n, .op = 1, .seq = 2};
}

static void test_every_type(void)
{
	static const uint8_t blob[] = {0, 1, 2, 0xff, 0x80};
	proto_msg m;
	proto_view v;

	proto_msg_begin(&m, 42, 0x123456789abcull, 16);
	proto_msg_u64(&m, 0);                 /* 0 */
	proto_msg_u64(&m, UINT64_MAX);        /* 1 */
	proto_msg_i64(&m, -1);                /* 2 */
	proto_msg_i64(&m, INT64_MIN);         /* 3 */
	proto_msg_i64(&m, INT64_MAX);         /* 4 */
	proto_msg_f64(&m, 3.25);              /* 5 */
	proto_msg_f64(&m, -DBL_MAX);          /* 6 */
	proto_msg_bin(&m, blob, sizeof(blob)); /* 7 */
	proto_msg_bin(&m, NULL, 0);           /* 8 */
	proto_msg_str(&m, "sm_90");           /* 9 */
	proto_msg_str(&m, NULL);              /* 10: "" */
	proto_msg_nil(&m);                    /* 11 */
	msgpack_pack_array(proto_msg_packer(&m), 3); /* 12: nested */
	msgpack_pack_uint32(proto_msg_packer(&m), 7);
	msgpack_pack_int32(proto_msg_packer(&m), -7);
	msgpack_pack_str(proto_msg_packer(&m), 2);
	msgpack_pack_str_body(proto_msg_packer(&m), "ok", 2);
	proto_msg_u64(&m, UINT32_MAX);        /* 13 */
	proto_msg_i64(&m, INT32_MIN);         /* 14 */
	proto_msg_u64(&m, (uint64_t)UINT32_MAX + 1); /* 15 */
	CHECK(m.data == m.inline_buf);        /* small: no heap */
	if (open_view(&m, PROTO_F_ASYNC, 99, &v) < 0)
		goto out;

	CHECK_EQ(v.op, 42);
	CHECK_EQ(v.seq, 0x123456789abcull);
	CHECK_EQ(v.n, 16);

	uint64_t u;
	int64_t i;
	uint32_t u32;
	int32_t i32;
	double d;
	const void *p;
	const char *s;
	size_t n;
	const msgpack_object *items;
	uint32_t ni;

	CHECK(proto_arg_u64(&v, 0, &u) == PROTO_OK && u == 0);
	CHECK(proto_arg_u64(&v, 1, &u) == PROTO_OK && u == UINT64_MAX);
	CHECK(proto_arg_i64(&v, 2, &i) == PROTO_OK && i == -1);
	CHECK(proto_arg_i64(&v, 3, &i) == PROTO_OK && i == INT64_MIN);
	CHECK(proto_arg_i64(&v, 4, &i) == PROTO_OK && i == INT64_MAX);
	CHECK(proto_arg_i64(&v, 0, &i) == PROTO_OK && i == 0); /* positive ints read as i64 */
	CHECK(proto_arg_f64(&v, 5, &d) == PROTO_OK && d == 3.25);
	CHECK(proto_arg_f64(&v, 6, &d) == PROTO_OK && d == -DBL_MAX);
	CHECK(proto_arg_bin(&v, 7, &p, &n) == PROTO_OK && n == sizeof(blob) && memcmp(p, blob, n) == 0);
	CHECK(proto_arg_bin(&v, 8, &p, &n) == PROTO_OK && n == 0);
	CHECK(proto_arg_str(&v, 9, &s, &n) == PROTO_OK && n == 5 && memcmp(s, "sm_90", 5) == 0);
	CHECK(proto_arg_str(&v, 10, &s, &n) == PROTO_OK && n == 0);
	/* nil reads as 0 / empty for numbers and blobs (optional arguments) */
	CHECK(proto_arg_u64(&v, 11, &u) == PROTO_OK && u == 0);
	CHECK(proto_arg_bin(&v, 11, &p, &n) == PROTO_OK && p == NULL && n == 0);
	if (CHECK(proto_arg_array(&v, 12, &items, &ni) == PROTO_OK) && CHECK_EQ(ni, 3)) {
		CHECK(items[0].type == MSGPACK_OBJECT_POSITIVE_INTEGER && items[0].via.u64 == 7);
		CHECK(items[1].type == MSGPACK_OBJECT_NEGATIVE_INTEGER && items[1].via.i64 == -7);
		CHECK(items[2].type == MSGPACK_OBJECT_STR && items[2].via.str.size == 2);
	}
	CHECK(proto_arg_u32(&v, 13, &u32) == PROTO_OK && u32 == UINT32_MAX);
	CHECK(proto_arg_i32(&v, 14, &i32) == PROTO_OK && i32 == INT32_MIN);
	CHECK(proto_arg_i32(&v, 2, &i32) == PROTO_OK && i32 == -1);

	/* wrong types */
	CHECK_EQ(proto_arg_u64(&v, 2, &u), PROTO_ETYPE); /* negative */
	CHECK_EQ(proto_arg_u64(&v, 5, &u), PROTO_ETYPE); /* float */
	CHECK_EQ(proto_arg_u64(&v, 9, &u), PROTO_ETYPE); /* str */
	CHECK_EQ(proto_arg_u64(&v, 12, &u), PROTO_ETYPE); /* array */
	CHECK_EQ(proto_arg_i64(&v, 1, &i), PROTO_ETYPE); /* > INT64_MAX */
	CHECK_EQ(proto_arg_i64(&v, 7, &i), PROTO_ETYPE);
	CHECK_EQ(proto_arg_u32(&v, 15, &u32), PROTO_ETYPE); /* > UINT32_MAX */
	CHECK_EQ(proto_arg_u32(&v, 1, &u32), PROTO_ETYPE);
	CHECK_EQ(proto_arg_u32(&v, 2, &u32), PROTO_ETYPE);
	CHECK_EQ(proto_arg_i32(&v, 3, &i32), PROTO_ETYPE); /* < INT32_MIN */
	CHECK_EQ(proto_arg_i32(&v, 15, &i32), PROTO_ETYPE); /* > INT32_MAX */
	CHECK_EQ(proto_arg_f64(&v, 0, &d), PROTO_ETYPE);
	CHECK_EQ(proto_arg_f64(&v, 11, &d), PROTO_ETYPE);
	CHECK_EQ(proto_arg_bin(&v, 9, &p, &n), PROTO_ETYPE); /* str is not bin */
	CHECK_EQ(proto_arg_bin(&v, 0, &p, &n), PROTO_ETYPE);
	CHECK_EQ(proto_arg_str(&v, 7, &s, &n), PROTO_ETYPE); /* bin is not str */
	CHECK_EQ(proto_arg_str(&v, 11, &s, &n), PROTO_ETYPE);
	CHECK_EQ(proto_arg_array(&v, 7, &items, &ni), PROTO_ETYPE);
	CHECK_EQ(proto_arg_array(&v, 11, &items, &ni), PROTO_ETYPE);

	/* out of range */
	CHECK_EQ(proto_arg_u64(&v, 16, &u), PROTO_ERANGE);
	CHECK_EQ(proto_arg_i64(&v, 1000, &i), PROTO_ERANGE);
	CHECK_EQ(proto_arg_u32(&v, UINT32_MAX, &u32), PROTO_ERANGE);
	CHECK_EQ(proto_arg_i32(&v, 16, &i32), PROTO_ERANGE);
	CHECK_EQ(proto_arg_f64(&v, 16, &d), PROTO_ERANGE);
	CHECK_EQ(proto_arg_bin(&v, 16, &p, &n), PROTO_ERANGE);
	CHECK_EQ(proto_arg_str(&v, 16, &s, &n), PROTO_ERANGE);
	CHECK_EQ(proto_arg_array(&v, 16, &items, &ni), PROTO_ERANGE);

	/* not a reply */
	int32_t st, lat;
	CHECK_EQ(proto_reply_status(&v, &st, &lat), PROTO_EDECODE);
	proto_view_free(&v);
out:
	proto_msg_free(&m);
}

static void test_reply(void)
{
	proto_msg m;
	proto_view v;
	int32_t status = 1, latched = 1;
	uint64_t u;

	proto_msg_begin_reply(&m, 77, 0, 0, 1);
	proto_msg_u64(&m, 0xdead);
	if (open_view(&m, PROTO_F_REPLY, 0, &v) == 0) {
		CHECK_EQ(v.op, PROTO_OP_REPLY);
		CHECK_EQ(v.seq, 77);
		CHECK(proto_reply_status(&v, &status, &latched) == PROTO_OK && status == 0 && latched == 0);
		CHECK(proto_arg_u64(&v, PROTO_REPLY_FIRST, &u) == PROTO_OK && u == 0xdead);
		proto_view_free(&v);
	}
	proto_msg_free(&m);

	/* A status alone is the fixed header alone: no msgpack to encode or
	 * decode, nothing allocated. */
	proto_msg_begin_reply(&m, 78, 700 /* CUDA_ERROR_ILLEGAL_ADDRESS */, 719, 0);
	if (open_view(&m, PROTO_F_REPLY, 0, &v) == 0) {
		CHECK_EQ(m.len, PROTO_HDR_SIZE);
		CHECK(v.zone.chunk_list.head == NULL);
		CHECK_EQ(v.seq, 78);
		CHECK(proto_reply_status(&v, &status, &latched) == PROTO_OK && status == 700 && latched == 719);
		CHECK_EQ(v.n, 0);
		CHECK_EQ(proto_arg_u64(&v, PROTO_REPLY_FIRST, &u), PROTO_ERANGE);
		proto_view_free(&v);
	}
	proto_msg_free(&m);

	/* A request is not a reply. */
	proto_msg_begin(&m, PROTO_OP_STREAM_QUERY, 79, 1);
	proto_msg_u64(&m, 3);
	if (open_view(&m, 0, 0, &v) == 0) {
		CHECK_EQ(proto_reply_status(&v, &status, &latched), PROTO_EDECODE);
		proto_view_free(&v);
	}
	proto_msg_free(&m);

	/* The answer to a peer of another version. */
	CHECK_EQ(proto_msg_version_reply(&m), PROTO_OK);
	proto_hdr h;
	if (CHECK_EQ(proto_decode_hdr(m.data, &h), PROTO_OK) && CHECK_EQ(proto_view_init(&v, &h, m.data + PROTO_HDR_SIZE), PROTO_OK)) {
		CHECK_EQ(h.flags, PROTO_F_REPLY);
		CHECK(proto_reply_status(&v, &status, &latched) == PROTO_OK && status == PROTO_EVERSION && latched == 0);
		CHECK(proto_arg_u64(&v, PROTO_REPLY_FIRST, &u) == PROTO_OK && u == PROTO_VERSION);
		proto_view_free(&v);
	}
	proto_msg_free(&m);
}

/* Messages beyond the 512-byte inline buffer move to the heap, several times. */
static void test_growth(void)
{
	enum { NBIN = 100000, NU = 300 };
	uint8_t *big = malloc(NBIN);
	proto_msg m;
	proto_view v;

	for (int i = 0; i < NBIN; i++)
		big[i] = (uint8_t)(i * 7 + 3);
	proto_msg_begin(&m, 9, 1, NU + 2);
	for (int i = 0; i < NU; i++)
		proto_msg_u64(&m, (uint64_t)i << 40);
	proto_msg_bin(&m, big, NBIN);
	proto_msg_str(&m, "tail");
	CHECK(m.data != m.inline_buf);
	CHECK(m.len > NBIN + NU * 9);
	if (open_view(&m, 0, 0, &v) == 0) {
		uint64_t u;
		const void *p;
		const char *s;
		size_t n;
		int ok = 1;
		for (int i = 0; i < NU; i++)
			ok &= proto_arg_u64(&v, (uint32_t)i, &u) == PROTO_OK && u == (uint64_t)i << 40;
		CHECK(ok);
		CHECK(proto_arg_bin(&v, NU, &p, &n) == PROTO_OK && n == NBIN && memcmp(p, big, n) == 0);
		CHECK(proto_arg_str(&v, NU + 1, &s, &n) == PROTO_OK && n == 4 && memcmp(s, "tail", 4) == 0);
		proto_view_free(&v);
	}
	proto_msg_free(&m);

	/* Just past the inline buffer, and a builder reused after free. */
	for (size_t len = 470; len < 520; len++) {
		char *str = malloc(len + 1);
		memset(str, 'x', len);
		str[len] = 0;
		proto_msg_begin(&m, 1, 2, 1);
		proto_msg_str(&m, str);
		if (open_view(&m, 0, 0, &v) == 0) {
			const char *s;
			size_t n;
			CHECK(proto_arg_str(&v, 0, &s, &n) == PROTO_OK && n == len && memcmp(s, str, len) == 0);
			proto_view_free(&v);
		}
		proto_msg_free(&m);
		free(str);
	}
	free(big);
}

/* Msgpack parts of the wrong shape (the arguments must be one array). */
static void test_bad_views(void)
{
	static const struct {
		const char *what;
		uint8_t b[12];
		size_t n;
	} bad[] = {
		{"not an array", {0x05}, 1},
		{"a map", {0x81, 0x01, 0x02}, 3},
		{"two arrays", {0x91, 0x01, 0x90}, 3},
		{"truncated array", {0x93, 0x01, 0x02}, 3},
		{"trailing bytes", {0x92, 0x01, 0x02, 0x03}, 4},
		{"truncated u64", {0x92, 0x01, 0xcf, 0, 0}, 5},
		{"reserved byte", {0x92, 0x01, 0xc1}, 3},
		{"huge str length", {0x93, 0x01, 0x02, 0xdb, 0xff, 0xff, 0xff, 0xff}, 8},
		{"huge array length", {0xdd, 0xff, 0xff, 0xff, 0xff, 0x01}, 6},
	};
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		proto_view v;
		proto_hdr h = hdr_of(bad[k].n);
		int err = proto_view_init(&v, &h, bad[k].b);
		if (!CHECK_EQ(err, PROTO_EDECODE))
			fprintf(stderr, "    case: %s\n", bad[k].what);
		proto_view_free(&v); /* safe after a failed init */
	}

	/* Containers claiming more than is there: fixarrays nested and side by
	 * side (decoded without the walk), an array16 past the first eight
	 * bytes, and one in a message too long to go unwalked. */
	static uint8_t fix[1000], a16[16], longmsg[8192];
	memset(fix, 0x9f, sizeof(fix));
	fix[0] = 0x93, fix[1] = 0x01, fix[2] = 0x02;
	const uint8_t a16_init[] = {0x93, 0x01, 0x02, 0xcf, 1, 2, 3, 4, 5, 6, 7, 8, 0xdc, 0xff, 0xff};
	memcpy(a16, a16_init, sizeof(a16_init));
	memset(longmsg, 0xc0, sizeof(longmsg));
	longmsg[0] = 0x93, longmsg[1] = 0x01, longmsg[2] = 0x02, longmsg[3] = 0x9f;
	const struct {
		const char *what;
		const uint8_t *b;
		size_t n;
	} claims[] = {{"nested fixarrays", fix, sizeof(fix)},
		      {"array16 after 8 bytes", a16, sizeof(a16_init)},
		      {"long message, fixarray of nils short", longmsg, sizeof(longmsg)}};
	for (size_t k = 0; k < sizeof(claims) / sizeof(claims[0]); k++) {
		proto_view cv;
		proto_hdr h = hdr_of(claims[k].n);
		if (!CHECK_EQ(proto_view_init(&cv, &h, claims[k].b), PROTO_EDECODE))
			fprintf(stderr, "    case: %s\n", claims[k].what);
		proto_view_free(&cv);
	}

	/* An empty array is no arguments, as is no msgpack part at all. */
	static const uint8_t empty[] = {0x90};
	proto_view v;
	proto_hdr h = hdr_of(sizeof(empty));
	if (CHECK_EQ(proto_view_init(&v, &h, empty), PROTO_OK)) {
		CHECK(v.op == 1 && v.seq == 2 && v.n == 0);
		proto_view_free(&v);
	}
	h = hdr_of(0);
	if (CHECK_EQ(proto_view_init(&v, &h, NULL), PROTO_OK)) {
		CHECK(v.op == 1 && v.seq == 2 && v.n == 0);
		proto_view_free(&v);
	}
}

/* One view decoded message after message keeps its zone: a message with more
 * objects than the first chunk holds, then small ones, a malformed one in
 * between (after which the view is as if zeroed and reusable). */
static void test_reuse(void)
{
	static const uint8_t bad[] = {0x92, 0x01, 0xc1};
	proto_view v;
	proto_msg m;
	uint64_t u;

	memset(&v, 0, sizeof(v));
	for (int round = 0; round < 4; round++) {
		uint32_t nargs = round == 0 ? 300 : round == 2 ? 0 : 2;
		proto_msg_begin(&m, 7, 100 + (uint64_t)round, nargs);
		for (uint32_t i = 0; i < nargs; i++)
			proto_msg_u64(&m, (uint64_t)i * 3 + (uint64_t)round);
		CHECK_EQ(proto_msg_finish(&m, 0, 0), PROTO_OK);
		proto_hdr h;
		CHECK_EQ(proto_decode_hdr(m.data, &h), PROTO_OK);
		if (CHECK_EQ(proto_view_reuse(&v, &h, m.data + PROTO_HDR_SIZE), PROTO_OK)) {
			CHECK_EQ(v.op, 7);
			CHECK_EQ(v.seq, 100 + (uint64_t)round);
			CHECK_EQ(v.n, nargs);
			if (nargs)
				CHECK(proto_arg_u64(&v, nargs - 1, &u) == PROTO_OK &&
				      u == (uint64_t)(nargs - 1) * 3 + (uint64_t)round);
			CHECK_EQ(proto_arg_u64(&v, nargs, &u), PROTO_ERANGE);
		}
		proto_msg_free(&m);
		if (round == 1) {
			proto_hdr hb = hdr_of(sizeof(bad));
			CHECK_EQ(proto_view_reuse(&v, &hb, bad), PROTO_EDECODE);
			CHECK(v.zone.chunk_list.head == NULL);
		}
	}
	proto_view_free(&v);
	proto_view_free(&v); /* harmless twice */
}

int main(void)
{
	test_reuse();
	test_every_type();
	test_reply();
	test_growth();
	test_bad_views();
	return check_summary("test_msg");
}
