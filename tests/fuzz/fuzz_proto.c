/*
 * libFuzzer target for the protocol decoder: everything a peer controls goes
 * through proto_decode_hdr and proto_view_init, and every accessor is then
 * asked for every argument (and past the end) with every type. Nothing may
 * crash, read out of bounds, or leak, whatever the bytes.
 *
 * Input layout: a frame as it travels, 40-byte fixed header then the msgpack
 * part. A valid header's view is decoded as a receiver would; the bytes are
 * also decoded as a msgpack part alone (under a made-up header), so the
 * decoder is fuzzed even when the header bytes are garbage.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "proto.h"

/* Keeps results observable so the compiler cannot drop the calls. */
static volatile uint64_t sink;

static void walk_object(const msgpack_object *o, int depth)
{
	if (depth > 64)
		return;
	switch (o->type) {
	case MSGPACK_OBJECT_ARRAY:
		for (uint32_t i = 0; i < o->via.array.size; i++)
			walk_object(&o->via.array.ptr[i], depth + 1);
		break;
	case MSGPACK_OBJECT_MAP:
		for (uint32_t i = 0; i < o->via.map.size; i++) {
			walk_object(&o->via.map.ptr[i].key, depth + 1);
			walk_object(&o->via.map.ptr[i].val, depth + 1);
		}
		break;
	case MSGPACK_OBJECT_STR:
		if (o->via.str.size)
			sink += (uint8_t)o->via.str.ptr[o->via.str.size - 1];
		break;
	case MSGPACK_OBJECT_BIN:
		if (o->via.bin.size)
			sink += (uint8_t)o->via.bin.ptr[o->via.bin.size - 1];
		break;
	default:
		sink += o->via.u64;
	}
}

static void fuzz_view(const proto_hdr *h, const uint8_t *data)
{
	proto_view v;

	if (proto_view_init(&v, h, data) != PROTO_OK) {
		proto_view_free(&v); /* must be safe after a failed init */
		return;
	}
	sink += v.op + v.seq;
	/* two past the end: out-of-range must be an error, not a read */
	for (uint32_t i = 0; i < v.n + 2; i++) {
		uint64_t u;
		int64_t s;
		uint32_t u32;
		int32_t s32;
		double d;
		const void *p;
		const char *str;
		size_t n;
		const msgpack_object *items;
		uint32_t ni;

		if (proto_arg_u64(&v, i, &u) == PROTO_OK)
			sink += u;
		if (proto_arg_i64(&v, i, &s) == PROTO_OK)
			sink += (uint64_t)s;
		if (proto_arg_u32(&v, i, &u32) == PROTO_OK)
			sink += u32;
		if (proto_arg_i32(&v, i, &s32) == PROTO_OK)
			sink += (uint32_t)s32;
		if (proto_arg_f64(&v, i, &d) == PROTO_OK)
			sink += d == d; /* NaN-safe */
		if (proto_arg_bin(&v, i, &p, &n) == PROTO_OK && n)
			sink += ((const uint8_t *)p)[0] + ((const uint8_t *)p)[n - 1];
		if (proto_arg_str(&v, i, &str, &n) == PROTO_OK && n)
			sink += (uint8_t)str[0] + (uint8_t)str[n - 1];
		if (proto_arg_array(&v, i, &items, &ni) == PROTO_OK)
			for (uint32_t k = 0; k < ni; k++)
				walk_object(&items[k], 1);
	}
	int32_t status, latched;
	if (proto_reply_status(&v, &status, &latched) == PROTO_OK)
		sink += (uint32_t)status + (uint32_t)latched;
	proto_view_free(&v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size >= PROTO_HDR_SIZE) {
		proto_hdr h;
		int err = proto_decode_hdr(data, &h);
		sink += (uint32_t)err + h.version + h.flags + h.hdr_len + h.payload_len;
		if (err == PROTO_OK) {
			/* Invariants the transports rely on before they allocate. */
			if (h.hdr_len > PROTO_MAX_HDR || h.payload_len > PROTO_MAX_PAYLOAD)
				__builtin_trap();
			/* A request's status names a device below PROTO_MAX_DEVICES;
			 * it never carries a latched error. */
			if (!(h.flags & PROTO_F_REPLY) &&
			    (h.status < 0 || h.status >= PROTO_MAX_DEVICES || h.latched))
				__builtin_trap();
			/* Re-encoding a valid header gives the same bytes back. */
			uint8_t again[PROTO_HDR_SIZE];
			proto_encode_hdr(&h, again);
			if (memcmp(again, data, PROTO_HDR_SIZE) != 0)
				__builtin_trap();
			if (h.hdr_len <= size - PROTO_HDR_SIZE)
				fuzz_view(&h, h.hdr_len ? data + PROTO_HDR_SIZE : NULL);
		}
	}
	if (size > 0 && size <= PROTO_MAX_HDR) {
		proto_hdr any = {.version = PROTO_VERSION, .flags = PROTO_F_REPLY, .hdr_len = (uint32_t)size,
				 .op = PROTO_OP_REPLY, .seq = size};
		fuzz_view(&any, data);
	}
	return 0;
}
