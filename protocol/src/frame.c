/* Fixed frame header: explicit little-endian so the format does not depend on the
 * host's struct layout. */
#include "proto.h"

#include <endian.h>
#include <string.h>

/* Loads and stores through memcpy and <endian.h>: one instruction each on a
 * little-endian host (these run for every frame, twice per round trip). */
static void put_u16(uint8_t *p, uint16_t v) { v = htole16(v); memcpy(p, &v, 2); }
static void put_u32(uint8_t *p, uint32_t v) { v = htole32(v); memcpy(p, &v, 4); }
static void put_u64(uint8_t *p, uint64_t v) { v = htole64(v); memcpy(p, &v, 8); }
static uint16_t get_u16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return le16toh(v); }
static uint32_t get_u32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return le32toh(v); }
static uint64_t get_u64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return le64toh(v); }

void proto_encode_hdr(const proto_hdr *h, uint8_t out[PROTO_HDR_SIZE])
{
	put_u32(out, PROTO_MAGIC);
	put_u16(out + 4, h->version);
	put_u16(out + 6, h->flags);
	put_u32(out + 8, h->hdr_len);
	put_u32(out + 12, h->op);
	put_u64(out + 16, h->payload_len);
	put_u64(out + 24, h->seq);
	put_u32(out + 32, (uint32_t)h->status);
	put_u32(out + 36, (uint32_t)h->latched);
}

proto_err proto_decode_hdr(const uint8_t in[PROTO_HDR_SIZE], proto_hdr *h)
{
	if (get_u32(in) != PROTO_MAGIC) {
		*h = (proto_hdr){0};
		return PROTO_EMAGIC;
	}
	/* Every field, then the checks: the fields of another version's header
	 * are read too (reported, never used). */
	h->version = get_u16(in + 4);
	h->flags = get_u16(in + 6);
	h->hdr_len = get_u32(in + 8);
	h->op = get_u32(in + 12);
	h->payload_len = get_u64(in + 16);
	h->seq = get_u64(in + 24);
	h->status = (int32_t)get_u32(in + 32);
	h->latched = (int32_t)get_u32(in + 36);
	if (h->version != PROTO_VERSION)
		return PROTO_EVERSION;
	/* A request's status names a device (below PROTO_MAX_DEVICES) and it has
	 * no latched error: anything else is a peer that speaks something else. */
	if (!(h->flags & PROTO_F_REPLY) && (h->status < 0 || h->status >= PROTO_MAX_DEVICES || h->latched))
		return PROTO_EDECODE;
	if (h->hdr_len > PROTO_MAX_HDR || h->payload_len > PROTO_MAX_PAYLOAD)
		return PROTO_ETOOBIG;
	return PROTO_OK;
}

proto_err proto_peek_frame_len(const uint8_t in[PROTO_HDR_SIZE], uint64_t *len)
{
	if (get_u32(in) != PROTO_MAGIC)
		return PROTO_EMAGIC;
	uint32_t hl = get_u32(in + 8);
	uint64_t pl = get_u64(in + 16);
	if (hl > PROTO_MAX_HDR || pl > PROTO_MAX_PAYLOAD)
		return PROTO_ETOOBIG;
	*len = hl + pl;
	return PROTO_OK;
}

int proto_magic_prefix_ok(const uint8_t *in, size_t n)
{
	uint8_t magic[4];
	put_u32(magic, PROTO_MAGIC);
	return memcmp(in, magic, n < 4 ? n : 4) == 0;
}

/* Each code's name and meaning (proto_strerror, proto_err_name). */
static const struct {
	int code;
	const char *name, *text;
} errs[] = {
	{PROTO_OK, "PROTO_OK", "ok"},
	{PROTO_EMAGIC, "PROTO_EMAGIC", "bad frame magic (not a remote-gpu peer?)"},
	{PROTO_EVERSION, "PROTO_EVERSION", "protocol version mismatch"},
	{PROTO_ETOOBIG, "PROTO_ETOOBIG", "frame length beyond protocol limits"},
	{PROTO_EDECODE, "PROTO_EDECODE", "malformed message"},
	{PROTO_ETYPE, "PROTO_ETYPE", "argument of the wrong type"},
	{PROTO_ERANGE, "PROTO_ERANGE", "missing argument"},
	{PROTO_ENOMEM, "PROTO_ENOMEM", "out of memory"},
	{PROTO_ETLS, "PROTO_ETLS", "the server requires TLS (tls://host:port)"},
};

const char *proto_strerror(int err)
{
	for (size_t i = 0; i < sizeof(errs) / sizeof(errs[0]); i++)
		if (errs[i].code == err)
			return errs[i].text;
	return "unknown protocol error";
}

const char *proto_err_name(int err)
{
	for (size_t i = 0; i < sizeof(errs) / sizeof(errs[0]); i++)
		if (errs[i].code == err)
			return errs[i].name;
	return "PROTO_?";
}
