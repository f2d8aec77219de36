/*
 * Library forwarding on the server (lib.h): loading the libraries, the
 * per-session object tables, the decoding helpers the generated handlers call,
 * latched statuses and replies, and the teardown of what a session left alive.
 * Everything here but loading runs on the session's executor thread.
 */
#include "backend.h"
#include "tenants.h"

#include <dlfcn.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "lib.h"

static int load(be_lib_def *def);
static be_lib_sess *sess_of(be_session *s, be_lib_def *def);
static const msgpack_object *item(be_lib_dec *d, uint32_t i);
static void fail(be_lib_dec *d, int st);
static void *track(be_lib_dec *d, void *p);
static void free_allocs(be_lib_dec *d);

static pthread_mutex_t load_mu = PTHREAD_MUTEX_INITIALIZER;

/* ---- loading ---- */

int be_lib_option(const char *opt, const char *value)
{
	for (be_lib_def *const *d = be_lib_defs; *d; d++)
		for (int i = 0; i < (*d)->nlibs; i++)
			if (!strcmp(opt, (*d)->libs[i].option)) {
				/* Also in the environment: session processes (isolate.c)
				 * get a command line of their own but inherit it. */
				(*d)->libs[i].path = value;
				setenv((*d)->libs[i].env, value, 1);
				return 0;
			}
	return -1;
}

/* Once per description: every library in order (a library's own dependencies on
 * an earlier one then resolve to the copy loaded here), then every function. */
static int load(be_lib_def *def)
{
	if (__atomic_load_n(&def->loaded, __ATOMIC_ACQUIRE))
		return 0;
	pthread_mutex_lock(&load_mu);
	if (!def->loaded) {
		for (int i = 0; i < def->nlibs; i++) {
			be_lib_so *l = &def->libs[i];
			const char *env = getenv(l->env);
			const char *path = l->path ? l->path : env && *env ? env : l->soname;
			l->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
			if (l->dl)
				LOG_INFO(BE_LOG, "%s: loaded %s", def->name, path);
			else
				LOG_ERROR(BE_LOG, "%s: cannot load %s (%s; set %s PATH or %s): its calls are answered "
					  "with status %d", def->name, path, dlerror(), l->option, l->env, def->st_unavailable);
		}
		int missing = 0;
		for (int i = 0; i < def->nsyms; i++) {
			const be_lib_sym *y = &def->syms[i];
			void *dl = def->libs[y->lib].dl;
			*y->slot = dl ? dlsym(dl, y->name) : NULL;
			missing += dl && !*y->slot;
		}
		if (missing)
			LOG_WARN(BE_LOG, "%s: the library lacks %d of the functions forwarded (answered not supported)",
				 def->name, missing);
		__atomic_store_n(&def->loaded, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&load_mu);
	return 0;
}

void *be_lib_dlsym(be_lib_def *def, int lib, const char *name)
{
	load(def);
	return def->libs[lib].dl ? dlsym(def->libs[lib].dl, name) : NULL;
}

/* ---- per-session state ---- */

static be_lib_sess *sess_of(be_session *s, be_lib_def *def)
{
	for (be_lib_sess *ls = s->lib; ls; ls = ls->next)
		if (ls->def == def)
			return ls;
	be_lib_sess *ls = calloc(1, sizeof(*ls));
	if (!ls || !(ls->tabs = calloc((size_t)def->nkinds, sizeof(*ls->tabs)))) {
		free(ls);
		return NULL;
	}
	ls->def = def;
	for (int k = 0; k < def->nkinds; k++) {
		be_htab_init(&ls->tabs[k]);
		ls->tabs[k].dev_src = &s->cur; /* made on the frame's device */
	}
	ls->next = s->lib;
	s->lib = ls;
	return ls;
}

typedef struct td_ctx {
	const be_lib_kind *kind;
	unsigned n, failed;
} td_ctx;

static void td_obj(void *ctx, uint64_t id, void *obj, uint64_t aux)
{
	td_ctx *c = ctx;
	c->n++;
	c->failed += c->kind->destroy(obj) != 0;
}

/* Objects of the kinds marked early, in reverse order, tables emptied; the
 * rest stays for be_lib_teardown. */
void be_lib_teardown_early(be_session *s)
{
	for (be_lib_sess *ls = s->lib; ls; ls = ls->next) {
		td_ctx c = {0};
		for (int k = ls->def->nkinds - 1; k >= 0; k--) {
			c.kind = &ls->def->kinds[k];
			if (!c.kind->early || !c.kind->destroy)
				continue;
			be_htab_each(&ls->tabs[k], td_obj, &c);
			be_htab_free(&ls->tabs[k]);
			be_htab_init(&ls->tabs[k]);
		}
		if (c.n)
			LOG_INFO(BE_LOG, "session %" PRIu64 ": %s: released %u objects the client left, first%s", s->id,
				 ls->def->name, c.n, c.failed ? " (some failed)" : "");
	}
}

void be_lib_teardown(be_session *s)
{
	while (s->lib) {
		be_lib_sess *ls = s->lib;
		td_ctx c = {0};
		/* Reverse order of declaration: descriptors before the handles;
		 * each with the device it was made on current. */
		for (int d = be_srv.ngpu - 1; d >= 0; d--) {
			if (be_srv.ngpu > 1)
				be_session_select(s, (uint32_t)d);
			for (int k = ls->def->nkinds - 1; k >= 0; k--) {
				c.kind = &ls->def->kinds[k];
				if (c.kind->destroy)
					be_htab_each_dev(&ls->tabs[k], d, td_obj, &c);
			}
		}
		for (int k = ls->def->nkinds - 1; k >= 0; k--)
			be_htab_free(&ls->tabs[k]);
		if (c.n)
			LOG_INFO(BE_LOG, "session %" PRIu64 ": %s: destroyed %u objects the client left%s", s->id,
				 ls->def->name, c.n, c.failed ? " (some destroys failed)" : "");
		s->lib = ls->next;
		free(ls->tabs);
		free(ls);
	}
}

/* ---- decoding ---- */

void be_lib_dec_init(be_lib_dec *d, be_session *s, be_req *rq, be_lib_def *def, int lib, void **fn)
{
	memset(d, 0, sizeof(*d));
	d->s = s;
	d->rq = rq;
	d->def = def;
	load(def);
	if (!(d->ls = sess_of(s, def)))
		d->st = def->st_nomem;
	else if (!def->libs[lib].dl)
		d->st = def->st_unavailable;
	else if (!*fn) {
		rg_log_once(BE_LOG, "not supported by the server's library", proto_op_name(rq->view.op));
		d->st = def->st_missing;
	}
}

static void fail(be_lib_dec *d, int st)
{
	if (!d->st)
		d->st = st;
}

static const msgpack_object *item(be_lib_dec *d, uint32_t i)
{
	if (d->st)
		return NULL;
	if (i >= d->rq->view.n) {
		fail(d, BE_EPROTO);
		return NULL;
	}
	return &d->rq->view.items[i];
}

static void *track(be_lib_dec *d, void *p)
{
	if (!p || d->nallocs == BE_LIB_MAX_ALLOCS) {
		free(p);
		fail(d, d->def->st_nomem);
		return NULL;
	}
	return d->allocs[d->nallocs++] = p;
}

static void free_allocs(be_lib_dec *d)
{
	while (d->nallocs)
		free(d->allocs[--d->nallocs]);
}

#define BE_LIB_INT(name, type, dec)                                 \
	type be_lib_##name(be_lib_dec *d, uint32_t i)               \
	{                                                           \
		type v = 0;                                         \
		if (!d->st && dec(&d->rq->view, i, &v) != PROTO_OK) \
			fail(d, BE_EPROTO);                         \
		return v;                                           \
	}
BE_LIB_INT(i32, int32_t, proto_arg_i32)
BE_LIB_INT(u32, uint32_t, proto_arg_u32)
BE_LIB_INT(i64, int64_t, proto_arg_i64)
BE_LIB_INT(u64, uint64_t, proto_arg_u64)
#undef BE_LIB_INT

CUstream be_lib_stream(be_lib_dec *d, uint32_t i)
{
	uint64_t id = be_lib_u64(d, i);
	CUstream st = NULL;
	if (!d->st && be_get_stream(d->s, id, &st) != 0)
		fail(d, d->def->st_bad_arg);
	return st;
}

static void *lookup(be_lib_dec *d, uint32_t i, int kind, int del)
{
	uint64_t id = be_lib_u64(d, i);
	if (d->st)
		return NULL;
	const be_lib_kind *k = &d->def->kinds[kind];
	void *obj = NULL;
	uint64_t charged = 0;
	int r = del ? be_htab_del(&d->ls->tabs[kind], id, &obj, &charged) : be_htab_get(&d->ls->tabs[kind], id, &obj, NULL);
	if (r == BE_H_OK && charged)
		be_tenant_uncharge(d->s, charged);
	if (r != BE_H_OK && !del && k->alias >= 0 && be_htab_get(&d->ls->tabs[k->alias], id, &obj, NULL) == BE_H_OK)
		r = BE_H_OK;
	if (r != BE_H_OK) {
		LOG_INFO(BE_LOG, "session %" PRIu64 ": %s: %s %" PRIu64 ": %s", d->s->id, proto_op_name(d->rq->view.op),
			 k->ctype, id, be_h_strerror(r));
		fail(d, k->unknown);
		return NULL;
	}
	return obj;
}

void *be_lib_obj(be_lib_dec *d, uint32_t i, int kind) { return lookup(d, i, kind, 0); }

void *be_lib_del(be_lib_dec *d, uint32_t i, int kind) { return lookup(d, i, kind, 1); }

uint64_t be_lib_new_id(be_lib_dec *d, uint32_t i, int kind)
{
	uint64_t id = be_lib_u64(d, i);
	/* Checked before the library creates anything, so nothing can leak. */
	if (!d->st && (id == 0 || be_htab_get(&d->ls->tabs[kind], id, NULL, NULL) == BE_H_OK)) {
		LOG_INFO(BE_LOG, "session %" PRIu64 ": %s: id %" PRIu64 " %s", d->s->id, proto_op_name(d->rq->view.op),
			 id, id ? "already in use" : "is reserved");
		fail(d, d->def->st_bad_arg);
	}
	return id;
}

void be_lib_add(be_lib_dec *d, int kind, uint64_t id, void *obj)
{
	const be_lib_kind *k = &d->def->kinds[kind];
	/* What the library took for the object is the tenant's to pay: over its
	 * quota, the object goes again and the call fails as out of memory. Kept
	 * as the entry's aux, given back at the destroy (lookup). */
	uint64_t charge = k->charge ? k->charge(d->s) : 0;
	if (charge && be_tenant_charge(d->s, charge) != CUDA_SUCCESS) {
		k->destroy(obj);
		d->st = d->def->st_nomem;
		return;
	}
	int r = be_htab_add(&d->ls->tabs[kind], id, obj, charge);
	if (r == BE_H_OK)
		return;
	if (charge)
		be_tenant_uncharge(d->s, charge);
	LOG_WARN(BE_LOG, "session %" PRIu64 ": %s: cannot register id %" PRIu64 ": %s", d->s->id,
		 proto_op_name(d->rq->view.op), id, be_h_strerror(r));
	d->def->kinds[kind].destroy(obj);
	d->st = r == BE_H_ENOMEM ? d->def->st_nomem : d->def->st_bad_arg;
}

void be_lib_val(be_lib_dec *d, uint32_t i, void *dst, size_t n)
{
	const void *p;
	size_t len;
	memset(dst, 0, n);
	if (d->st)
		return;
	if (proto_arg_bin(&d->rq->view, i, &p, &len) != PROTO_OK || !p || len != n) {
		fail(d, BE_EPROTO);
		return;
	}
	memcpy(dst, p, n);
}

const void *be_lib_in(be_lib_dec *d, uint32_t i, uint64_t n)
{
	static const _Alignas(16) unsigned char empty[16];
	const void *p;
	size_t len;
	if (d->st)
		return NULL;
	if (proto_arg_bin(&d->rq->view, i, &p, &len) != PROTO_OK) {
		fail(d, BE_EPROTO);
		return NULL;
	}
	if (!p && d->rq->view.items[i].type == MSGPACK_OBJECT_NIL)
		return NULL;
	if (len != n || n > BE_LIB_MAX_BUF) {
		LOG_WARN(BE_LOG, "session %" PRIu64 ": %s: argument %u has %zu bytes, the call says %" PRIu64, d->s->id,
			 proto_op_name(d->rq->view.op), i, len, n);
		fail(d, BE_EPROTO);
		return NULL;
	}
	if (len == 0)
		return empty;
	/* msgpack leaves it unaligned; libraries may read it as a struct. */
	void *b = track(d, malloc(len));
	if (b)
		memcpy(b, p, len);
	return b;
}

void *be_lib_out(be_lib_dec *d, uint64_t n)
{
	if (d->st)
		return NULL;
	if (n > BE_LIB_MAX_BUF) {
		LOG_INFO(BE_LOG, "session %" PRIu64 ": %s: output of %" PRIu64 " bytes refused", d->s->id,
			 proto_op_name(d->rq->view.op), n);
		fail(d, d->def->st_bad_arg);
		return NULL;
	}
	return track(d, calloc(1, n ? (size_t)n : 1));
}

static void mode_mismatch(be_lib_dec *d, uint32_t i, int dev)
{
	LOG_INFO(BE_LOG, "session %" PRIu64 ": %s: argument %u is a %s pointer, the pointer mode says %s", d->s->id,
		 proto_op_name(d->rq->view.op), i, dev ? "host" : "device", dev ? "device" : "host");
	fail(d, d->def->st_bad_arg);
}

const void *be_lib_scalar_in(be_lib_dec *d, uint32_t i, be_lib_scalar *sc, be_lib_mode_fn mode, void *obj,
			     int which)
{
	const msgpack_object *o = item(d, i);
	if (!o)
		return NULL;
	int dev = mode(obj, which);
	switch (o->type) {
	case MSGPACK_OBJECT_NIL:
		return NULL; /* NULL either way: the library judges it */
	case MSGPACK_OBJECT_BIN:
		if (dev) {
			mode_mismatch(d, i, dev);
			return NULL;
		}
		if (o->via.bin.size > sizeof(sc->b)) {
			fail(d, BE_EPROTO);
			return NULL;
		}
		memset(sc->b, 0, sizeof(sc->b));
		memcpy(sc->b, o->via.bin.ptr, o->via.bin.size);
		return sc->b;
	case MSGPACK_OBJECT_POSITIVE_INTEGER:
		if (!dev) {
			mode_mismatch(d, i, dev);
			return NULL;
		}
		return (const void *)(uintptr_t)o->via.u64;
	default:
		fail(d, BE_EPROTO);
		return NULL;
	}
}

void *be_lib_result(be_lib_dec *d, uint32_t i, be_lib_scalar *sc, be_lib_mode_fn mode, void *obj, int which)
{
	const msgpack_object *o = item(d, i);
	if (!o)
		return NULL;
	int dev = mode(obj, which);
	if (o->type == MSGPACK_OBJECT_NIL && !dev) {
		memset(sc->b, 0, sizeof(sc->b));
		return sc->b;
	}
	if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && dev)
		return (void *)(uintptr_t)o->via.u64;
	if (o->type == MSGPACK_OBJECT_NIL || o->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
		mode_mismatch(d, i, dev);
	else
		fail(d, BE_EPROTO);
	return NULL;
}

void be_lib_put_result(proto_msg *m, const be_lib_scalar *sc, const void *p)
{
	if (p == sc->b)
		proto_msg_bin(m, sc->b, sizeof(sc->b));
	else
		proto_msg_nil(m);
}

/* ---- status and replies ---- */

int be_lib_wants_reply(const be_lib_dec *d) { return !(be_frame_of(d->rq)->flags & PROTO_F_ASYNC); }

/* A library that made another context current on this thread (a runtime's
 * cudaSetDevice makes the device's primary context current): the session's
 * comes back, or its next calls would run in the wrong context. */
static void keep_ctx(be_lib_dec *d)
{
	CUcontext cur = NULL;
	if (!d->s->ctx || be_drv.cuCtxGetCurrent(&cur) != CUDA_SUCCESS || cur == d->s->ctx)
		return;
	rg_log_once(BE_LOG, "the library made another CUDA context current; the session's is restored",
		    d->def->name);
	be_drv.cuCtxSetCurrent(d->s->ctx);
}

/* The status this call reports: its own, or (if that is success) the first
 * failure latched by an earlier async call of the library, which it takes. */
static int report(be_lib_dec *d)
{
	keep_ctx(d);
	int st = d->st;
	if (st == BE_EPROTO) {
		LOG_WARN(BE_LOG, "session %" PRIu64 ": %s (seq %" PRIu64 "): malformed arguments", d->s->id,
			 proto_op_name(d->rq->view.op), d->rq->seq);
		st = d->def->st_bad_arg;
	}
	if (st != d->def->st_success)
		LOG_DEBUG(BE_LOG, "session %" PRIu64 ": %s (seq %" PRIu64 "): status %d", d->s->id,
			  proto_op_name(d->rq->view.op), d->rq->seq, st);
	if (!be_lib_wants_reply(d)) {
		if (st != d->def->st_success && st != d->def->st_pending && d->ls && !d->ls->latched)
			d->ls->latched = st;
		return st;
	}
	if (st == d->def->st_success && d->ls && d->ls->latched) {
		st = d->ls->latched;
		d->ls->latched = 0;
	}
	return st;
}

int be_lib_done(be_lib_dec *d)
{
	if (!be_lib_wants_reply(d)) {
		report(d);
		free_allocs(d);
		return BE_REPLIED; /* latched: nothing else for the executor to do */
	}
	return be_lib_reply_end(d, be_lib_reply_begin(d, 0));
}

proto_msg *be_lib_reply_begin(be_lib_dec *d, uint32_t nresults)
{
	int st = report(d);
	proto_msg *m = be_reply_begin(d->s, d->rq, nresults + 1);
	proto_msg_i64(m, st);
	return m;
}

int be_lib_reply_end(be_lib_dec *d, proto_msg *m)
{
	int r = be_reply_end(d->s, d->rq, m, NULL, 0);
	free_allocs(d);
	return r;
}
