/*
 * module_load: loads a kernel image into the session's context and resolves
 * the kernels and variables the client registered from it, in one round trip.
 *
 * Images are named by content hash (SHA-256). A client first sends the hash
 * alone; if the server-wide cache (imgcache.c) lacks it the answer is
 * CUDA_ERROR_FILE_NOT_FOUND and the client sends it again with the image as
 * payload. An upload is a claim that other tenants will trust, so:
 *   - its bytes must hash to the address named (and have the size announced),
 *     or it is refused with CUDA_ERROR_INVALID_SOURCE and nothing is kept;
 *   - it must fit the tenant's store quota (store_quota.c), or it is refused
 *     with CUDA_ERROR_OUT_OF_MEMORY;
 *   - it is loaded from the session's own copy first, and joins the cache and
 *     the store only when the driver loaded it: junk never reaches another
 *     session.
 *
 * names: entries separated by '\n' (empty ones are skipped):
 *   f:<func id>:<kernel name>   resolve a kernel, register it under func id
 *   v:<var name>                resolve a global variable
 *   n:                          list the names of the module's kernels
 * The reply has one array, one element per entry, in order:
 *   f: [status, bin layout]         layout: (u32 offset, u32 size) pairs,
 *                                   little-endian, from cuFuncGetParamInfo
 *   v: [status, u64 dptr, u64 size] [dptr, dptr + size) becomes a range copies
 *                                   may touch (never freeable)
 *   n: [status, str names]          separated by '\n' (registers nothing)
 * A kernel's parameter size (end of its last parameter) is kept with its handle:
 * launches must bring exactly that many bytes.
 *
 * module_resolve: the same names list and reply for a module loaded before
 * (the driver API names kernels and variables one at a time).
 */
#include "backend.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cubin.h"
#include "cubin_store.h"
#include "tenants.h"
#include "ops.h"

#define MAX_PARAMS 32768 /* a parameter buffer holds at most 32764 bytes */

typedef struct entry {
	char kind; /* 'f', 'v' or 'n' */
	uint64_t func_id;
	const char *name;
} entry;

static int check_upload(be_session *s, const char *hex, const void *p, uint64_t plen, uint64_t size);
static int publish_upload(be_session *s, const char *hex, void *data, size_t size);
static int parse_names(char *buf, entry **out, uint32_t *n);
static void resolve_func(be_session *s, proto_msg *m, CUmodule mod, const entry *e);
static void resolve_var(be_session *s, proto_msg *m, CUmodule mod, const entry *e);
static void list_names(be_session *s, proto_msg *m, CUmodule mod);

/* An uploaded image, checked: CUDA_SUCCESS, or why it is refused. */
static int check_upload(be_session *s, const char *hex, const void *p, uint64_t plen, uint64_t size)
{
	char got[CUBIN_HASH_HEX];

	if (plen != size) {
		LOG_INFO(BE_LOG, "session %" PRIu64 ": module_load %s: image of %" PRIu64 " bytes, announced %" PRIu64,
			 s->id, hex, plen, size);
		return CUDA_ERROR_INVALID_SOURCE;
	}
	cubin_hash(p, (size_t)plen, got);
	if (memcmp(got, hex, CUBIN_HASH_LEN) != 0) {
		LOG_WARN(BE_LOG, "session %" PRIu64 ": module_load: refused an upload that hashes to %s, not to %s", s->id,
			 got, hex);
		return CUDA_ERROR_INVALID_SOURCE;
	}
	if (!be_quota_admits(plen)) {
		LOG_WARN(BE_LOG, "session %" PRIu64 ": module_load %s: an upload of %" PRIu64 " bytes passes the store quota (%" PRIu64 " bytes)",
			 s->id, hex, plen, be_srv.store_quota);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	return CUDA_SUCCESS;
}

/* An upload that loaded: counted against the tenant's quota, then shared. The
 * count comes after the load so that junk costs nothing; admits() before the
 * load refused what was over already, this refuses what a concurrent upload of
 * the same tenant pushed over. Takes data. */
static int publish_upload(be_session *s, const char *hex, void *data, size_t size)
{
	be_img *img;

	if (!(be_srv.store && cubin_store_has(be_srv.store, hex, size)) && be_quota_charge(hex, size) != 0) {
		LOG_WARN(BE_LOG, "session %" PRIu64 ": module_load %s: the store quota (%" PRIu64 " bytes) is used up", s->id,
			 hex, be_srv.store_quota);
		free(data);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	if ((img = be_imgcache_add(hex, data, size)))
		be_imgcache_put(img);
	LOG_DEBUG(BE_LOG, "session %" PRIu64 ": image %s (%zu bytes) uploaded", s->id, hex, size);
	return CUDA_SUCCESS;
}

/* Splits buf (NUL-terminated, modified in place) into entries. Returns 0, or -1
 * on a malformed entry, -2 when out of memory. */
static int parse_names(char *buf, entry **out, uint32_t *n)
{
	uint32_t cap = 0, cnt = 0;
	entry *v = NULL;
	char *save = NULL;

	for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		entry e = {0};
		if (line[0] == 'f' && line[1] == ':') {
			char *p = line + 2;
			uint64_t id = 0;
			if (*p < '0' || *p > '9')
				goto bad;
			for (; *p >= '0' && *p <= '9'; p++) {
				if (id > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
					goto bad;
				id = id * 10 + (uint64_t)(*p - '0');
			}
			if (*p != ':' || !p[1])
				goto bad;
			e = (entry){'f', id, p + 1};
		} else if (line[0] == 'v' && line[1] == ':' && line[2]) {
			e = (entry){'v', 0, line + 2};
		} else if (line[0] == 'n' && line[1] == ':' && !line[2]) {
			e = (entry){'n', 0, NULL};
		} else {
			goto bad;
		}
		if (cnt == cap) {
			cap = cap ? cap * 2 : 16;
			entry *nv = realloc(v, cap * sizeof(*nv));
			if (!nv) {
				free(v);
				return -2;
			}
			v = nv;
		}
		v[cnt++] = e;
	}
	*out = v;
	*n = cnt;
	return 0;
bad:
	free(v);
	return -1;
}

static void resolve_func(be_session *s, proto_msg *m, CUmodule mod, const entry *e)
{
	msgpack_packer *pk = proto_msg_packer(m);
	CUfunction fn;
	uint8_t *layout = NULL;
	size_t nparams = 0, cap = 0;
	uint64_t psize = 0;
	CUresult st = be_drv.cuModuleGetFunction(&fn, mod, e->name);

	if (st == CUDA_SUCCESS) {
		for (size_t i = 0; i < MAX_PARAMS; i++) {
			size_t off = 0, sz = 0;
			if (be_drv.cuFuncGetParamInfo(fn, i, &off, &sz) != CUDA_SUCCESS)
				break;
			if (off > UINT32_MAX || sz > UINT32_MAX) {
				st = CUDA_ERROR_INVALID_VALUE;
				break;
			}
			if (nparams == cap) {
				cap = cap ? cap * 2 : 16;
				uint8_t *nl = realloc(layout, cap * 8);
				if (!nl) {
					st = CUDA_ERROR_OUT_OF_MEMORY;
					break;
				}
				layout = nl;
			}
			uint32_t w[2] = {(uint32_t)off, (uint32_t)sz};
			for (int k = 0; k < 2; k++)
				for (int b = 0; b < 4; b++)
					layout[nparams * 8 + (size_t)k * 4 + (size_t)b] = (uint8_t)(w[k] >> (8 * b));
			nparams++;
			if (off + sz > psize)
				psize = off + sz;
		}
	}
	if (st == CUDA_SUCCESS) {
		int err = be_htab_add(&s->funcs, e->func_id, fn, psize);
		if (err) {
			LOG_INFO(BE_LOG, "session %" PRIu64 ": function id %" PRIu64 " (%s): %s", s->id, e->func_id,
				 e->name, be_h_strerror(err));
			st = be_h_status(err, CUDA_ERROR_INVALID_HANDLE);
		}
	} else {
		LOG_INFO(BE_LOG, "session %" PRIu64 ": kernel %s: %s", s->id, e->name, be_errname(st));
	}
	msgpack_pack_array(pk, 2);
	proto_msg_i64(m, st);
	/* Never a NULL pointer, even for 0 bytes: memcpy(dst, NULL, 0) is undefined. */
	proto_msg_bin(m, layout ? (const void *)layout : (const void *)"", st == CUDA_SUCCESS ? nparams * 8 : 0);
	free(layout);
}

static void resolve_var(be_session *s, proto_msg *m, CUmodule mod, const entry *e)
{
	msgpack_packer *pk = proto_msg_packer(m);
	CUdeviceptr dp = 0;
	size_t bytes = 0;
	CUresult st = be_drv.cuModuleGetGlobal(&dp, &bytes, mod, e->name);

	if (st == CUDA_SUCCESS && bytes > 0) {
		const be_range *r = be_ranges_at(&s->ranges, (uint64_t)dp);
		/* Not listed twice, nor charged twice: the first resolve pays for it
		 * (an initialised one was in the image already: counted high). */
		if (!(r && r->size == bytes) && (st = be_tenant_charge(s, bytes)) == CUDA_SUCCESS) {
			pthread_mutex_lock(&s->ranges_mu); /* fetch.c reads them on its thread */
			int err = be_ranges_add(&s->ranges, (uint64_t)dp, bytes, BE_RANGE_VAR);
			pthread_mutex_unlock(&s->ranges_mu);
			if (err)
				LOG_WARN(BE_LOG, "session %" PRIu64 ": variable %s at 0x%llx+%zu not recorded (%d)", s->id,
					 e->name, (unsigned long long)dp, bytes, err);
		}
	}
	if (st != CUDA_SUCCESS) {
		LOG_INFO(BE_LOG, "session %" PRIu64 ": variable %s: %s", s->id, e->name, be_errname(st));
		dp = 0;
		bytes = 0;
	}
	msgpack_pack_array(pk, 3);
	proto_msg_i64(m, st);
	proto_msg_u64(m, (uint64_t)dp);
	proto_msg_u64(m, (uint64_t)bytes);
}

/* The names of the module's kernels, as cuModuleEnumerateFunctions finds them
 * (the driver may not have it: CUDA_ERROR_NOT_SUPPORTED). */
static void list_names(be_session *s, proto_msg *m, CUmodule mod)
{
	unsigned n = 0;
	CUfunction *fns = NULL;
	char *text = NULL;
	size_t len = 0;
	CUresult st = CUDA_ERROR_NOT_SUPPORTED;

	if (be_drv.cuModuleGetFunctionCount && be_drv.cuModuleEnumerateFunctions && be_drv.cuFuncGetName)
		st = be_drv.cuModuleGetFunctionCount(&n, mod);
	if (st == CUDA_SUCCESS && n && !(fns = calloc(n, sizeof(*fns))))
		st = CUDA_ERROR_OUT_OF_MEMORY;
	if (st == CUDA_SUCCESS && n)
		st = be_drv.cuModuleEnumerateFunctions(fns, n, mod);
	for (unsigned i = 0; st == CUDA_SUCCESS && i < n; i++) {
		const char *name = NULL;
		if ((st = be_drv.cuFuncGetName(&name, fns[i])) != CUDA_SUCCESS || !name)
			break;
		size_t k = strlen(name);
		char *t = realloc(text, len + k + 2);
		if (!t) {
			st = CUDA_ERROR_OUT_OF_MEMORY;
			break;
		}
		text = t;
		memcpy(text + len, name, k);
		len += k;
		text[len++] = '\n';
		text[len] = 0;
	}
	if (st != CUDA_SUCCESS) {
		LOG_INFO(BE_LOG, "session %" PRIu64 ": module kernel names: %s", s->id, be_errname(st));
		len = 0;
	}
	msgpack_pack_array(proto_msg_packer(m), 2);
	proto_msg_i64(m, st);
	proto_msg_str(m, len ? text : "");
	free(fns);
	free(text);
}

/* A request's names list, parsed into entries (pointing into *buf, which the
 * caller frees); a malformed list is refused before anything is loaded. */
static int names_of(be_session *s, const char *op, const char *names, size_t names_len, char **buf, entry **ents,
		    uint32_t *n)
{
	char *b = malloc(names_len + 1);
	if (!b)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (names_len)
		memcpy(b, names, names_len);
	b[names_len] = 0;
	int pr = memchr(b, 0, names_len) ? -1 : parse_names(b, ents, n);
	if (pr) {
		free(b);
		if (pr == -2)
			return CUDA_ERROR_OUT_OF_MEMORY;
		LOG_INFO(BE_LOG, "session %" PRIu64 ": %s: malformed names list", s->id, op);
		return CUDA_ERROR_INVALID_VALUE;
	}
	*buf = b;
	return 0;
}

int be_op_module_load(be_session *s, be_req *rq, uint64_t m_id, const void *hash, size_t hash_len, uint64_t size,
		      const char *names, size_t names_len)
{
	uint64_t plen = be_req_payload_len(rq);
	be_buf *pb = be_req_payload(rq);
	char hex[CUBIN_HASH_HEX];
	be_img *img = NULL;
	void *upload = NULL;
	const void *image;
	entry *ents = NULL;
	uint32_t n = 0;
	CUmodule mod;
	CUresult r;

	if (m_id == 0 || be_htab_get(&s->modules, m_id, NULL, NULL) == BE_H_OK) {
		LOG_INFO(BE_LOG, "session %" PRIu64 ": module_load: id %" PRIu64 " %s", s->id, m_id,
			 m_id ? "already in use" : "0 is reserved");
		return CUDA_ERROR_INVALID_HANDLE;
	}
	if (!cubin_hash_valid(hash, hash_len)) {
		LOG_INFO(BE_LOG, "session %" PRIu64 ": module_load: hash is not %d lowercase hex digits (SHA-256)", s->id,
			 CUBIN_HASH_LEN);
		return CUDA_ERROR_INVALID_VALUE;
	}
	memcpy(hex, hash, CUBIN_HASH_LEN);
	hex[CUBIN_HASH_LEN] = 0;

	/* Names first: a malformed list fails before anything is loaded. */
	char *buf;
	int nerr = names_of(s, "module_load", names, names_len, &buf, &ents, &n);
	if (nerr)
		return nerr;

	if (plen > 0) {
		if ((r = check_upload(s, hex, pb->p, plen, size)) != CUDA_SUCCESS)
			goto out;
		upload = pb->p; /* ours until it loaded (publish_upload) or failed */
		*pb = (be_buf){0};
		image = upload;
	} else if ((img = be_imgcache_get(hex))) {
		image = be_img_data(img);
	} else {
		r = CUDA_ERROR_FILE_NOT_FOUND; /* the client sends it again with the image */
		goto out;
	}

	/* The tenant pays for the module before the driver loads it: its image's
	 * size stands for the code, constants and initialised variables the driver
	 * puts on the device (its own figure is not to be had); variables are
	 * charged as they are resolved (resolve_var). Modules live as long as the
	 * session, whose end gives the bytes back. */
	uint64_t isz = upload ? plen : be_img_size(img);
	if ((r = be_tenant_charge(s, isz)) != CUDA_SUCCESS) {
		if (img)
			be_imgcache_put(img);
		free(upload);
		goto out;
	}
	r = be_drv.cuModuleLoadData(&mod, image);
	if (img)
		be_imgcache_put(img);
	if (r != CUDA_SUCCESS)
		be_tenant_uncharge(s, isz);
	if (r != CUDA_SUCCESS) {
		LOG_INFO(BE_LOG, "session %" PRIu64 ": cuModuleLoadData(%s): %s%s", s->id, hex, be_errname(r),
			 upload ? " (the upload is not kept)" : "");
		free(upload);
		goto out;
	}
	if (upload && (r = publish_upload(s, hex, upload, (size_t)plen)) != CUDA_SUCCESS) {
		be_drv.cuModuleUnload(mod);
		be_tenant_uncharge(s, isz);
		goto out;
	}
	int err = be_htab_add(&s->modules, m_id, mod, 0);
	if (err) {
		be_drv.cuModuleUnload(mod);
		be_tenant_uncharge(s, isz);
		r = be_h_status(err, CUDA_ERROR_INVALID_HANDLE);
		goto out;
	}

	proto_msg *m = be_reply_begin(s, rq, 1);
	msgpack_pack_array(proto_msg_packer(m), n);
	for (uint32_t i = 0; i < n; i++) {
		if (ents[i].kind == 'f')
			resolve_func(s, m, mod, &ents[i]);
		else if (ents[i].kind == 'v')
			resolve_var(s, m, mod, &ents[i]);
		else
			list_names(s, m, mod);
	}
	free(ents);
	free(buf);
	return be_reply_end(s, rq, m, NULL, 0);
out:
	free(ents);
	free(buf);
	return r;
}

int be_op_module_resolve(be_session *s, be_req *rq, uint64_t m_id, const char *names, size_t names_len)
{
	void *o;
	entry *ents = NULL;
	uint32_t n = 0;

	if (be_htab_get(&s->modules, m_id, &o, NULL) != BE_H_OK) {
		LOG_INFO(BE_LOG, "session %" PRIu64 ": module_resolve: no module %" PRIu64, s->id, m_id);
		return CUDA_ERROR_INVALID_HANDLE;
	}
	char *buf;
	int err = names_of(s, "module_resolve", names, names_len, &buf, &ents, &n);
	if (err)
		return err;
	proto_msg *m = be_reply_begin(s, rq, 1);
	msgpack_pack_array(proto_msg_packer(m), n);
	for (uint32_t i = 0; i < n; i++) {
		if (ents[i].kind == 'f')
			resolve_func(s, m, (CUmodule)o, &ents[i]);
		else if (ents[i].kind == 'v')
			resolve_var(s, m, (CUmodule)o, &ents[i]);
		else
			list_names(s, m, (CUmodule)o);
	}
	free(ents);
	free(buf);
	return be_reply_end(s, rq, m, NULL, 0);
}
