/*
 * Library forwarding on the client (lib.h): starting, sending and answering the
 * calls the generated entry points make. The record of the objects they create
 * is lib_handles.c's.
 */
#include <string.h>

#include "lib.h"
#include "stats.h"
#include "rg_log.h"

int fe_lib_begin(fe_lib_msg *k, uint32_t op, uint64_t route_id, uint32_t nargs)
{
	int dev = route_id ? fe_lib_dev(route_id) : -1;
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
