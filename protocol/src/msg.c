/* Message building and decoding on top of msgpack-c. The builder writes the fixed
 * header and the msgpack part into one buffer so a call goes out as one iovec plus
 * its payload, one write. */
#include "proto.h"

#include <stdlib.h>
#include <string.h>

static int msg_write(void *data, const char *buf, size_t len)
{
	proto_msg *m = data;
	if (m->len + len > m->cap) {
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
	}
	memcpy(m->data + m->len, buf, len);
	m->len += len;
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
	msgpack_pack_array(&m->pk, nargs + 2);
	msgpack_pack_uint32(&m->pk, op);
	msgpack_pack_uint64(&m->pk, seq);
}

void proto_msg_begin_reply(proto_msg *m, uint64_t seq, int32_t status, int32_t latched, uint32_t nresults)
{
	proto_msg_begin(m, PROTO_OP_REPLY, seq, nresults + 2);
	msgpack_pack_int32(&m->pk, status);
	msgpack_pack_int32(&m->pk, latched);
}

void proto_msg_u64(proto_msg *m, uint64_t v) { msgpack_pack_uint64(&m->pk, v); }
void proto_msg_i64(proto_msg *m, int64_t v) { msgpack_pack_int64(&m->pk, v); }
void proto_msg_f64(proto_msg *m, double v) { msgpack_pack_double(&m->pk, v); }
void proto_msg_nil(proto_msg *m) { msgpack_pack_nil(&m->pk); }

void proto_msg_bin(proto_msg *m, const void *p, size_t n)
{
	msgpack_pack_bin(&m->pk, n);
	msgpack_pack_bin_body(&m->pk, p, n);
}

void proto_msg_str(proto_msg *m, const char *s)
{
	size_t n = s ? strlen(s) : 0;
	msgpack_pack_str(&m->pk, n);
	msgpack_pack_str_body(&m->pk, s ? s : "", n);
}

int proto_msg_finish(proto_msg *m, uint16_t flags, uint64_t payload_len)
{
	if (m->oom)
		return PROTO_ENOMEM;
	proto_hdr h = {PROTO_VERSION, flags, (uint32_t)(m->len - PROTO_HDR_SIZE), payload_len};
	proto_encode_hdr(&h, m->data);
	return PROTO_OK;
}

void proto_msg_free(proto_msg *m)
{
	if (m->data && m->data != m->inline_buf)
		free(m->data);
	m->data = m->inline_buf;
	m->len = 0;
}

int proto_view_init(proto_view *v, const uint8_t *msg, size_t len)
{
	size_t off = 0;
	msgpack_unpacked_init(&v->up);
	v->items = NULL;
	v->n = 0;
	if (msgpack_unpack_next(&v->up, (const char *)msg, len, &off) != MSGPACK_UNPACK_SUCCESS ||
	    off != len || v->up.data.type != MSGPACK_OBJECT_ARRAY || v->up.data.via.array.size < 2)
		goto bad;
	const msgpack_object *o = v->up.data.via.array.ptr;
	if (o[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER || o[0].via.u64 > UINT32_MAX ||
	    o[1].type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		goto bad;
	v->op = (uint32_t)o[0].via.u64;
	v->seq = o[1].via.u64;
	v->items = o + 2;
	v->n = v->up.data.via.array.size - 2;
	return PROTO_OK;
bad:
	msgpack_unpacked_destroy(&v->up);
	msgpack_unpacked_init(&v->up);
	return PROTO_EDECODE;
}

void proto_view_free(proto_view *v) { msgpack_unpacked_destroy(&v->up); }

static const msgpack_object *arg(const proto_view *v, uint32_t i, int *err)
{
	if (i >= v->n) {
		*err = PROTO_ERANGE;
		return NULL;
	}
	*err = PROTO_OK;
	return &v->items[i];
}

int proto_arg_u64(const proto_view *v, uint32_t i, uint64_t *out)
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

int proto_arg_i64(const proto_view *v, uint32_t i, int64_t *out)
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

int proto_arg_u32(const proto_view *v, uint32_t i, uint32_t *out)
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

int proto_arg_i32(const proto_view *v, uint32_t i, int32_t *out)
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

int proto_arg_f64(const proto_view *v, uint32_t i, double *out)
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

int proto_arg_bin(const proto_view *v, uint32_t i, const void **p, size_t *n)
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

int proto_arg_str(const proto_view *v, uint32_t i, const char **p, size_t *n)
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

int proto_arg_array(const proto_view *v, uint32_t i, const msgpack_object **items, uint32_t *n)
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

int proto_reply_status(const proto_view *v, int32_t *status, int32_t *latched)
{
	if (v->op != PROTO_OP_REPLY)
		return PROTO_EDECODE;
	int err = proto_arg_i32(v, 0, status);
	return err ? err : proto_arg_i32(v, 1, latched);
}
