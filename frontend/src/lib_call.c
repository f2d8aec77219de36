/*
 * Library forwarding on the client (lib.h): starting, sending and answering the
 * calls the generated entry points make, and the record of the objects (handles,
 * descriptors) the program created through them.
 */
#include <stdlib.h>
#include <string.h>

#include "lib.h"
#include "stats.h"
#include "rg_log.h"

#define NBUCKETS 256 /* PyTorch keeps a few handles and a few descriptors alive */

typedef struct fe_lib_obj {
	uint64_t id;
	int kind;
	int dev;
	uint64_t state[FE_LIB_STATE_WORDS];
	fe_lib_buf hist;  /* lib.h: fe_lib_record */
	int hist_dropped; /* it grew past FE_LIB_MAX_HISTORY */
	struct fe_lib_obj *next;
} fe_lib_obj;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static fe_lib_obj *buckets[NBUCKETS];

static fe_lib_obj **slot_locked(uint64_t id)
{
	fe_lib_obj **pp = &buckets[(id ^ (id >> 8)) % NBUCKETS];
	while (*pp && (*pp)->id != id)
		pp = &(*pp)->next;
	return pp;
}

uint64_t fe_lib_new(int kind, int dev)
{
	fe_lib_obj *o = calloc(1, sizeof(*o));
	if (!o)
		return 0;
	o->id = fe_rt_new_id();
	o->kind = kind;
	o->dev = dev;
	pthread_mutex_lock(&lock);
	fe_lib_obj **pp = slot_locked(o->id);
	o->next = *pp;
	*pp = o;
	pthread_mutex_unlock(&lock);
	return o->id;
}

void fe_lib_forget(uint64_t id)
{
	pthread_mutex_lock(&lock);
	fe_lib_obj **pp = slot_locked(id), *o = *pp;
	if (o)
		*pp = o->next;
	pthread_mutex_unlock(&lock);
	if (o)
		free(o->hist.p);
	free(o);
}

uint64_t fe_lib_state(uint64_t id, int w)
{
	pthread_mutex_lock(&lock);
	fe_lib_obj *o = *slot_locked(id);
	uint64_t v = o ? o->state[w] : 0;
	pthread_mutex_unlock(&lock);
	return v;
}

void fe_lib_set_state(uint64_t id, int w, uint64_t v)
{
	pthread_mutex_lock(&lock);
	fe_lib_obj *o = *slot_locked(id);
	if (o)
		o->state[w] = v;
	pthread_mutex_unlock(&lock);
}

int fe_lib_buf_put(fe_lib_buf *b, const void *p, size_t n)
{
	if (!n)
		return 0;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 64;
		while (cap < b->len + n)
			cap *= 2;
		uint8_t *q = realloc(b->p, cap);
		if (!q)
			return -1;
		b->p = q;
		b->cap = cap;
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
	return 0;
}

void fe_lib_record(uint64_t id, uint32_t op, const void *args, size_t len)
{
	uint32_t head[2] = {op, (uint32_t)len};
	pthread_mutex_lock(&lock);
	fe_lib_obj *o = *slot_locked(id);
	if (o && !o->hist_dropped) {
		if (o->hist.len + sizeof(head) + len > FE_LIB_MAX_HISTORY || fe_lib_buf_put(&o->hist, head, sizeof(head)) ||
		    fe_lib_buf_put(&o->hist, args, len)) {
			o->hist_dropped = 1;
			free(o->hist.p);
			o->hist = (fe_lib_buf){0};
		}
	}
	pthread_mutex_unlock(&lock);
}

int fe_lib_history(uint64_t id, fe_lib_buf *b)
{
	pthread_mutex_lock(&lock);
	fe_lib_obj *o = *slot_locked(id);
	uint64_t n = o ? o->hist.len : 0;
	int r = !o || o->hist_dropped || fe_lib_buf_put(b, &n, sizeof(n)) || fe_lib_buf_put(b, o->hist.p, o->hist.len)
			? -1
			: 0;
	pthread_mutex_unlock(&lock);
	return r;
}

/* The object's kind and device; -1 and -1 if it is unknown. */
static void kind_dev(uint64_t id, int *kind, int *dev)
{
	pthread_mutex_lock(&lock);
	fe_lib_obj *o = *slot_locked(id);
	*kind = o ? o->kind : -1;
	*dev = o ? o->dev : -1;
	pthread_mutex_unlock(&lock);
}

int fe_lib_kind(uint64_t id)
{
	int k, d;
	kind_dev(id, &k, &d);
	return k;
}

int fe_lib_dev(uint64_t id)
{
	int k, d;
	kind_dev(id, &k, &d);
	return d;
}

/* ---- calls ---- */

int fe_lib_begin(fe_lib_msg *k, uint32_t op, uint64_t route_id, uint32_t nargs)
{
	int dev = -1;
	if (route_id) {
		pthread_mutex_lock(&lock);
		fe_lib_obj *o = *slot_locked(route_id);
		if (o)
			dev = o->dev;
		pthread_mutex_unlock(&lock);
	}
	if (dev < 0)
		dev = fe_rt_current_device();
	fe_device *d = fe_rt_device(dev);
	if (!d)
		return FE_LIB_ENOSERVER;
	k->c = d->conn;
	k->dev = dev;
	k->op = op;
	/* Statistics and traces name the library function (the op is named after
	 * it); its caller is not known this deep, so no calling library. */
	FE_OBS_ENTER(proto_op_name(op), NULL);
	proto_msg_begin(&k->m, op, fe_conn_next_seq(k->c), nargs);
	return 0;
}

void fe_lib_abort(fe_lib_msg *k) { proto_msg_free(&k->m); }

int fe_lib_post(fe_lib_msg *k) { return fe_obs_leave_ret(fe_conn_post(k->c, &k->m, NULL, 0)); }

int fe_lib_call(fe_lib_msg *k, fe_reply *r)
{
	int st = fe_obs_leave_ret(fe_conn_call(k->c, &k->m, NULL, 0, NULL, 0, r));
	/* The reply's own status is 0 for library calls; a CUresult comes from the
	 * server's executor: an op it does not know (an older server), no memory. */
	if (st == CUDA_ERROR_NOT_SUPPORTED)
		return FE_LIB_EMISSING;
	if (st > 0) {
		LOG_WARN("frontend", "%s: the server answered CUresult %d", proto_op_name(k->op), st);
		return FE_LIB_EPROTO;
	}
	if (st < 0)
		return st;
	int32_t lib;
	if (proto_arg_i32(&r->view, PROTO_REPLY_FIRST, &lib) != PROTO_OK || lib < 0) {
		fe_reply_free(r);
		return FE_LIB_EPROTO;
	}
	return lib;
}

int fe_lib_out(fe_reply *r, uint32_t i, void *dst, size_t cap)
{
	const void *p;
	size_t n;
	if (proto_arg_bin(&r->view, PROTO_REPLY_FIRST + 1 + i, &p, &n) != PROTO_OK) {
		/* absent: the server answered before making the call */
		return r->view.n <= PROTO_REPLY_FIRST + 1 + i ? 0 : FE_LIB_EPROTO;
	}
	if (n > cap)
		return FE_LIB_EPROTO;
	if (n)
		memcpy(dst, p, n);
	return 0;
}

int fe_lib_result_out(fe_reply *r, uint32_t i, void *dst, size_t n)
{
	const void *p;
	size_t len;
	if (proto_arg_bin(&r->view, PROTO_REPLY_FIRST + 1 + i, &p, &len) != PROTO_OK)
		return r->view.n <= PROTO_REPLY_FIRST + 1 + i ? 0 : FE_LIB_EPROTO;
	if (!p) /* nil: the result went to device memory */
		return 0;
	if (len < n)
		return FE_LIB_EPROTO;
	memcpy(dst, p, n);
	return 0;
}

int fe_lib_ret(fe_reply *r, uint32_t i, uint64_t *v)
{
	if (r->view.n <= PROTO_REPLY_FIRST + 1 + i)
		return 0;
	return proto_arg_u64(&r->view, PROTO_REPLY_FIRST + 1 + i, v) == PROTO_OK ? 0 : FE_LIB_EPROTO;
}

void fe_lib_in(fe_lib_msg *k, const void *p, size_t n)
{
	if (p)
		proto_msg_bin(&k->m, p, n);
	else
		proto_msg_nil(&k->m);
}

void fe_lib_scalar(fe_lib_msg *k, const void *p, size_t n, int on_device)
{
	if (on_device)
		proto_msg_u64(&k->m, fe_lib_id(p));
	else if (p && n <= FE_LIB_SCALAR)
		proto_msg_bin(&k->m, p, n);
	else
		proto_msg_nil(&k->m); /* NULL (or a type we cannot size): the library refuses it */
}

void fe_lib_result(fe_lib_msg *k, const void *p, int on_device)
{
	if (on_device)
		proto_msg_u64(&k->m, fe_lib_id(p));
	else
		proto_msg_nil(&k->m);
}

int fe_lib_fail(int st, const fe_lib_statuses *map)
{
	switch (st) {
	case FE_LIB_ENOSERVER:
		rg_log_once("frontend", "no remote GPU (REMOTE_GPU unset or unreachable), calls fail", map->lib);
		return map->no_server;
	case FE_LIB_EARG:
		return map->bad_arg;
	case FE_LIB_ENOMEM:
		return map->nomem;
	case FE_LIB_EMISSING:
		LOG_WARN("frontend", "%s: the server does not know this call (an older remote-gpud?)", map->lib);
		return map->missing;
	case FE_LIB_EPROTO:
		LOG_ERROR("frontend", "%s: malformed reply from the server", map->lib);
		return map->channel;
	default:
		/* conn.c logged the loss of the connection */
		LOG_DEBUG("frontend", "%s: call failed on the channel (%d)", map->lib, st);
		return map->channel;
	}
}
