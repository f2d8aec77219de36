/* Message building and decoding on top of msgpack-c. The builder writes the fixed
 * header and the msgpack part into one buffer so a call goes out as one iovec plus
 * its payload, one write. */
#include "proto.h"

#include <stdlib.h>
#include <string.h>

/* The slow path of msg_write, kept out of line so that the fast one needs no
 * stack frame. */
__attribute__((noinline)) static int msg_grow_write(proto_msg *m, const char *buf, size_t len)
{
	size_t cap = m->cap * 2;
	while (cap < m->len + len)
		cap *= 2;
	uint8_t *p = m->data == m->inline_buf ? malloc(cap) : realloc(m->data, cap);
	if (!p) {
		m->oom = 1;
		return -1;
	}
	if (m->data == m->inline_buf)
		memcpy(p, m->inline_buf, m->len);
	m->data = p;
	m->cap = cap;
	memcpy(m->data + m->len, buf, len);
	m->len += len;
	return 0;
}

/* msgpack-c's packer writes each element through here, most of them 1 to 9
 * bytes: copies of a constant size compile to a load and a store, where a
 * call to memcpy costs as much again as the rest of the write. */
static int msg_write(void *data, const char *buf, size_t len)
{
	proto_msg *m = data;
	if (m->cap - m->len < len)
		return msg_grow_write(m, buf, len);
	uint8_t *d = m->data + m->len;
	m->len += len;
	switch (len) {
	case 1: *d = (uint8_t)*buf; break;
	case 2: memcpy(d, buf, 2); break;
	case 3: memcpy(d, buf, 3); break;
	case 5: memcpy(d, buf, 5); break;
	case 9: memcpy(d, buf, 9); break;
	default: memcpy(d, buf, len); break;
	}
	return 0;
}

static void msg_reset(proto_msg *m)
{
	m->data = m->inline_buf;
	m->cap = sizeof(m->inline_buf);
	m->len = PROTO_HDR_SIZE;
	m->oom = 0;
	msgpack_packer_init(&m->pk, m, msg_write);
}

void proto_msg_begin(proto_msg *m, uint32_t op, uint64_t seq, uint32_t nargs)
{
	msg_reset(m);
	m->seq = seq;
	m->op = op;
	m->status = m->latched = 0;
	if (nargs)
		msgpack_pack_array(&m->pk, nargs);
}

void proto_msg_begin_reply(proto_msg *m, uint64_t seq, int32_t status, int32_t latched, uint32_t nresults)
{
	proto_msg_begin(m, PROTO_OP_REPLY, seq, nresults);
	m->status = status;
	m->latched = latched;
}

void proto_msg_u64(proto_msg *m, uint64_t v) { msgpack_pack_uint64(&m->pk, v); }
void proto_msg_i64(proto_msg *m, int64_t v) { msgpack_pack_int64(&m->pk, v); }
void proto_msg_f64(proto_msg *m, double v) { msgpack_pack_double(&m->pk, v); }
void proto_msg_nil(proto_msg *m) { msgpack_pack_nil(&m->pk); }

void proto_msg_bin(proto_msg *m, const void *p, size_t n)
{
	msgpack_pack_bin(&m->pk, n);
	if (n) /* (p may be NULL then) */
		msgpack_pack_bin_body(&m->pk, p, n);
}

void proto_msg_str(proto_msg *m, const char *s)
{
	size_t n = s ? strlen(s) : 0;
	msgpack_pack_str(&m->pk, n);
	msgpack_pack_str_body(&m->pk, s ? s : "", n);
}

proto_err proto_msg_finish(proto_msg *m, uint16_t flags, uint64_t payload_len)
{
	if (m->oom)
		return PROTO_ENOMEM;
	proto_hdr h = {.version = PROTO_VERSION,
		       .flags = flags,
		       .hdr_len = (uint32_t)(m->len - PROTO_HDR_SIZE),
		       .payload_len = payload_len,
		       .op = m->op,
		       .seq = m->seq,
		       .status = m->status,
		       .latched = m->latched};
	proto_encode_hdr(&h, m->data);
	return PROTO_OK;
}

proto_err proto_msg_version_reply(proto_msg *m)
{
	proto_msg_begin_reply(m, 0, PROTO_EVERSION, 0, 1);
	proto_msg_u64(m, PROTO_VERSION);
	return proto_msg_finish(m, PROTO_F_REPLY, 0);
}

proto_err proto_msg_tls_reply(proto_msg *m, uint64_t seq)
{
	proto_msg_begin_reply(m, seq, PROTO_ETLS, 0, 0);
	return proto_msg_finish(m, PROTO_F_REPLY, 0);
}

void proto_msg_free(proto_msg *m)
{
	if (m->data && m->data != m->inline_buf)
		free(m->data);
	m->data = m->inline_buf;
	m->len = 0;
}

/*
 * msgpack-c allocates room for an array's or map's elements from the count in its
 * header, before reading them: a 5-byte header claiming 2^32 elements would make
 * it ask for ~100 GiB. Walk the encoding first and refuse any count larger than
 * the bytes left (every element takes at least one byte).
 */
proto_err proto_check_msgpack(const uint8_t *p, size_t len)
{
	size_t pos = 0;
	uint64_t pending = 1;
	while (pending > 0) {
		if (pos >= len)
			return PROTO_EDECODE;
		uint8_t t = p[pos++];
		uint64_t skip = 0, children = 0;
		size_t need = 0; /* bytes of length field that follow t */
		if (t <= 0x7f || t >= 0xe0 || t == 0xc0 || t == 0xc2 || t == 0xc3) {
			/* fixint, nil, false, true (0xc1 is never used) */
		} else if (t >= 0x80 && t <= 0x8f) {
			children = 2u * (t & 0x0f);
		} else if (t >= 0x90 && t <= 0x9f) {
			children = t & 0x0f;
		} else if (t >= 0xa0 && t <= 0xbf) {
			skip = t & 0x1f;
		} else {
			switch (t) {
			case 0xc4: case 0xd9: need = 1; break;             /* bin8, str8 */
			case 0xc5: case 0xda: need = 2; break;             /* bin16, str16 */
			case 0xc6: case 0xdb: need = 4; break;             /* bin32, str32 */
			case 0xc7: need = 1; skip = 1; break;              /* ext8: + type */
			case 0xc8: need = 2; skip = 1; break;
			case 0xc9: need = 4; skip = 1; break;
			case 0xca: skip = 4; break;                        /* float32 */
			case 0xcb: skip = 8; break;                        /* float64 */
			case 0xcc: case 0xd0: skip = 1; break;
			case 0xcd: case 0xd1: skip = 2; break;
			case 0xce: case 0xd2: skip = 4; break;
			case 0xcf: case 0xd3: skip = 8; break;
			case 0xd4: skip = 2; break;                        /* fixext */
			case 0xd5: skip = 3; break;
			case 0xd6: skip = 5; break;
			case 0xd7: skip = 9; break;
			case 0xd8: skip = 17; break;
			case 0xdc: case 0xde: need = 2; break;             /* array16, map16 */
			case 0xdd: case 0xdf: need = 4; break;             /* array32, map32 */
			default: return PROTO_EDECODE;                     /* 0xc1: never used */
			}
		}
		if (need) {
			if (len - pos < need)
				return PROTO_EDECODE;
			uint64_t n = 0;
			for (size_t i = 0; i < need; i++)
				n = (n << 8) | p[pos + i];
			pos += need;
			if (t == 0xdc || t == 0xdd)
				children = n;
			else if (t == 0xde || t == 0xdf)
				children = 2 * n;
			else
				skip += n;
		}
		if (skip > len - pos || children > len - pos)
			return PROTO_EDECODE;
		pos += skip;
		pending += children;
		pending--;
	}
	return pos == len ? PROTO_OK : PROTO_EDECODE;
}

#define VIEW_ZONE_CHUNK 512

void proto_view_free(proto_view *v);

/* Messages up to this size need no walk before msgpack_unpack when no byte can
 * be an array16/32 or map16/32 header (may_claim_large): fixarrays and fixmaps
 * claim at most 15 elements (30 objects) each, so a malformed message makes
 * msgpack-c allocate at most 720 bytes per byte of it before it fails. */
#define VIEW_UNWALKED_MAX 4096

/* Whether any byte is 0xdc-0xdf, the type bytes of array16/32 and map16/32,
 * the containers whose claimed size could exceed what the message holds by
 * far. Nearly every call is scalars, strings and fixarrays, and none of its
 * bytes is; eight bytes are looked at per step. */
static int word_claims_large(uint64_t w)
{
	const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
	uint64_t x = (w & 0xfcfcfcfcfcfcfcfcull) ^ 0xdcdcdcdcdcdcdcdcull; /* 0 where 0xdc-0xdf */
	return ((x - ones) & ~x & highs) != 0;
}

static int may_claim_large(const uint8_t *p, size_t len)
{
	size_t i = 0;
	for (; i + 8 <= len; i += 8) {
		uint64_t w;
		memcpy(&w, p + i, 8);
		if (word_claims_large(w))
			return 1;
	}
	if (i == len)
		return 0;
	if (len >= 8) { /* the last 1-7 bytes in one step: the word that ends the message */
		uint64_t w;
		memcpy(&w, p + len - 8, 8);
		return word_claims_large(w);
	}
	for (; i < len; i++)
		if ((p[i] & 0xfc) == 0xdc)
			return 1;
	return 0;
}

static void view_take_hdr(proto_view *v, const proto_hdr *h)
{
	v->op = h->op;
	v->seq = h->seq;
	v->status = h->status;
	v->latched = h->latched;
	v->items = NULL;
	v->n = 0;
}

/* Decodes a msgpack part (len > 0) into a view whose zone is ready and empty. */
static int view_decode(proto_view *v, const uint8_t *msg, size_t len)
{
	size_t off = 0;
	if (((len > VIEW_UNWALKED_MAX || may_claim_large(msg, len)) && proto_check_msgpack(msg, len) != PROTO_OK) ||
	    msgpack_unpack((const char *)msg, len, &off, &v->zone, &v->root) != MSGPACK_UNPACK_SUCCESS || off != len ||
	    v->root.type != MSGPACK_OBJECT_ARRAY)
		goto bad;
	v->items = v->root.via.array.ptr;
	v->n = v->root.via.array.size;
	return PROTO_OK;
bad:
	/* Nothing left to free, and freeing again is harmless. */
	proto_view_free(v);
	return PROTO_EDECODE;
}

static int view_zone_init(proto_view *v)
{
	if (msgpack_zone_init(&v->zone, VIEW_ZONE_CHUNK))
		return PROTO_OK;
	/* leave a zone that proto_view_free can destroy */
	memset(&v->zone, 0, sizeof(v->zone));
	return PROTO_ENOMEM;
}

proto_err proto_view_init(proto_view *v, const proto_hdr *h, const uint8_t *msg)
{
	memset(&v->zone, 0, sizeof(v->zone));
	view_take_hdr(v, h);
	if (h->hdr_len == 0)
		return PROTO_OK;
	int err = view_zone_init(v);
	return err ? err : view_decode(v, msg, h->hdr_len);
}

proto_err proto_view_reuse(proto_view *v, const proto_hdr *h, const uint8_t *msg)
{
	view_take_hdr(v, h);
	if (h->hdr_len == 0)
		return PROTO_OK; /* the zone, if any, is emptied by the next decode */
	if (v->zone.chunk_list.head) {
		msgpack_zone_clear(&v->zone);
	} else {
		int err = view_zone_init(v);
		if (err)
			return err;
	}
	return view_decode(v, msg, h->hdr_len);
}

void proto_view_free(proto_view *v)
{
	if (v->zone.chunk_list.head)
		msgpack_zone_destroy(&v->zone);
	memset(&v->zone, 0, sizeof(v->zone));
}


static const msgpack_object *arg(const proto_view *v, uint32_t i, int *err)
{
	if (i >= v->n) {
		*err = PROTO_ERANGE;
		return NULL;
	}
	*err = PROTO_OK;
	return &v->items[i];
}

proto_err proto_arg_u64(const proto_view *v, uint32_t i, uint64_t *out)
{
	int err;
	const msgpack_object *o = arg(v, i, &err);
	if (!o)
		return err;
	if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
		*out = o->via.u64;
	else if (o->type == MSGPACK_OBJECT_NIL)
		*out = 0;
	else
		return PROTO_ETYPE;
	return PROTO_OK;
}

proto_err proto_arg_i64(const proto_view *v, uint32_t i, int64_t *out)
{
	int err;
	const msgpack_object *o = arg(v, i, &err);
	if (!o)
		return err;
	if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 <= INT64_MAX)
		*out = (int64_t)o->via.u64;
	else if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
		*out = o->via.i64;
	else
		return PROTO_ETYPE;
	return PROTO_OK;
}

proto_err proto_arg_u32(const proto_view *v, uint32_t i, uint32_t *out)
{
	uint64_t x;
	int err = proto_arg_u64(v, i, &x);
	if (err)
		return err;
	if (x > UINT32_MAX)
		return PROTO_ETYPE;
	*out = (uint32_t)x;
	return PROTO_OK;
}

proto_err proto_arg_i32(const proto_view *v, uint32_t i, int32_t *out)
{
	int64_t x;
	int err = proto_arg_i64(v, i, &x);
	if (err)
		return err;
	if (x < INT32_MIN || x > INT32_MAX)
		return PROTO_ETYPE;
	*out = (int32_t)x;
	return PROTO_OK;
}

proto_err proto_arg_f64(const proto_view *v, uint32_t i, double *out)
{
	int err;
	const msgpack_object *o = arg(v, i, &err);
	if (!o)
		return err;
	if (o->type == MSGPACK_OBJECT_FLOAT64 || o->type == MSGPACK_OBJECT_FLOAT32)
		*out = o->via.f64;
	else
		return PROTO_ETYPE;
	return PROTO_OK;
}

proto_err proto_arg_bin(const proto_view *v, uint32_t i, const void **p, size_t *n)
{
	int err;
	const msgpack_object *o = arg(v, i, &err);
	if (!o)
		return err;
	if (o->type == MSGPACK_OBJECT_BIN) {
		*p = o->via.bin.ptr;
		*n = o->via.bin.size;
	} else if (o->type == MSGPACK_OBJECT_NIL) {
		*p = NULL;
		*n = 0;
	} else
		return PROTO_ETYPE;
	return PROTO_OK;
}

proto_err proto_arg_str(const proto_view *v, uint32_t i, const char **p, size_t *n)
{
	int err;
	const msgpack_object *o = arg(v, i, &err);
	if (!o)
		return err;
	if (o->type != MSGPACK_OBJECT_STR)
		return PROTO_ETYPE;
	*p = o->via.str.ptr;
	*n = o->via.str.size;
	return PROTO_OK;
}

proto_err proto_arg_array(const proto_view *v, uint32_t i, const msgpack_object **items, uint32_t *n)
{
	int err;
	const msgpack_object *o = arg(v, i, &err);
	if (!o)
		return err;
	if (o->type != MSGPACK_OBJECT_ARRAY)
		return PROTO_ETYPE;
	*items = o->via.array.ptr;
	*n = o->via.array.size;
	return PROTO_OK;
}

proto_err proto_reply_status(const proto_view *v, int32_t *status, int32_t *latched)
{
	if (v->op != PROTO_OP_REPLY)
		return PROTO_EDECODE;
	*status = v->status;
	*latched = v->latched;
	return PROTO_OK;
}
