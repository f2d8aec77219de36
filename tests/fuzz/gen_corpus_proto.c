/*
 * Writes the seed corpus of fuzz_proto: a few valid frames (fixed header +
 * msgpack part) of the shapes the protocol uses. The files are committed in
 * corpus_proto/; run this again only when the protocol's shapes change:
 *     gen_corpus_proto tests/fuzz/corpus_proto
 */
#include <stdio.h>
#include <string.h>

#include "proto.h"

static int save(const char *dir, const char *name, proto_msg *m, uint16_t flags, uint64_t payload_len)
{
	char path[4096];
	int ok = proto_msg_finish(m, flags, payload_len) == PROTO_OK;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = ok ? fopen(path, "wb") : NULL;
	ok = f && fwrite(m->data, 1, m->len, f) == m->len;
	if (f)
		ok &= fclose(f) == 0;
	proto_msg_free(m);
	if (!ok)
		fprintf(stderr, "gen_corpus_proto: cannot write %s\n", path);
	return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
	static const uint8_t blob[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
	uint8_t big[600];
	proto_msg m;
	int bad = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	memset(big, 0x5a, sizeof(big));

	/* a request: HELLO with [version, token, client id] */
	proto_msg_begin(&m, PROTO_OP_HELLO, 1, 3);
	proto_msg_u64(&m, PROTO_VERSION);
	proto_msg_str(&m, "token");
	proto_msg_bin(&m, blob, sizeof(blob));
	bad |= save(argv[1], "hello", &m, 0, 0);

	/* a reply with results, one that is a status alone */
	proto_msg_begin_reply(&m, 7, 0, 0, 2);
	proto_msg_u64(&m, 0x7f0000001000ull);
	proto_msg_f64(&m, 1.5);
	bad |= save(argv[1], "reply", &m, PROTO_F_REPLY, 0);
	proto_msg_begin_reply(&m, 8, 700, 719, 0);
	bad |= save(argv[1], "reply_status", &m, PROTO_F_REPLY, 0);

	/* an async request announcing a payload (the bytes are not part of it) */
	proto_msg_begin(&m, 8, 9, 3);
	proto_msg_u64(&m, 0x7f0000002000ull);
	proto_msg_u64(&m, 4096);
	proto_msg_u64(&m, 0);
	bad |= save(argv[1], "async_payload", &m, PROTO_F_ASYNC, 4096);

	/* nested array, nil, negative numbers, strings */
	proto_msg_begin(&m, 30, 10, 5);
	msgpack_pack_array(proto_msg_packer(&m), 3);
	msgpack_pack_uint32(proto_msg_packer(&m), 8);
	msgpack_pack_uint32(proto_msg_packer(&m), 16);
	msgpack_pack_int32(proto_msg_packer(&m), -4);
	proto_msg_nil(&m);
	proto_msg_i64(&m, -700);
	proto_msg_str(&m, "_Z6kernelPfS_i");
	proto_msg_i64(&m, INT64_MIN);
	bad |= save(argv[1], "nested", &m, 0, 0);

	/* the server's answer to another protocol version */
	proto_msg_version_reply(&m);
	bad |= save(argv[1], "version_reply", &m, PROTO_F_REPLY, 0);

	/* larger than the builder's inline buffer */
	proto_msg_begin(&m, 2, 11, 2);
	proto_msg_bin(&m, big, sizeof(big));
	proto_msg_u64(&m, UINT64_MAX);
	bad |= save(argv[1], "big", &m, 0, 0);
	return bad;
}
