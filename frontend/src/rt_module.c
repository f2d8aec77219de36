/*
 * Registration and launch. nvcc's host stubs register each fatbin, its kernels and
 * its variables at start-up; nothing crosses the wire then. The first use of a
 * kernel or variable on a device loads its fatbin there, by content hash (the image
 * itself is sent only if the server lacks it), and brings back every kernel's
 * parameter layout, so a launch packs its arguments by offset with no round trip.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cubin.h"
#include "hash_cache.h"
#include "module.h"
#include "proto_launch.h"
#include "ptrmap.h"
#include "rg_log.h"
#include "rpc.h"
#include "rt.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static fe_ptrmap kernels_by_stub, vars_by_shadow;
/* Every kernel record and image (the handles the driver API gives out). */
static fe_ptrmap kernel_records, image_records;
static fe_fatbin *images;

void fe_module_lock(void) { pthread_mutex_lock(&lock); }
void fe_module_unlock(void) { pthread_mutex_unlock(&lock); }
/* Images loaded, those the server did not hold and we had to send, and of
 * those the ones it refused (lock). A refused upload is not stored (one that
 * does not load on the device, or past the quota), so it is sent again by the
 * next program. */
static struct {
	unsigned loads, uploads, refused;
	uint64_t upload_bytes;
} U;

static void report_uploads(void)
{
	if (U.loads)
		LOG_INFO("frontend", "kernel images: %u loaded, %u uploaded (%llu bytes), %u of them refused", U.loads,
			 U.uploads, (unsigned long long)U.upload_bytes, U.refused);
}

struct fatbin_wrapper {
	int magic;
	int version;
	const void *data;
	void *filename_or_fatbins;
};

void **__cudaRegisterFatBinary(void *fatCubin)
{
	const struct fatbin_wrapper *w = fatCubin;
	fe_fatbin *fb = calloc(1, sizeof(*fb));
	if (!fb)
		return NULL;
	if (w && (unsigned)w->magic == CUBIN_FATBIN_WRAPPER_MAGIC && w->data &&
	    cubin_fatbin_size(w->data, SIZE_MAX, &fb->size) == CUBIN_OK)
		fb->data = w->data;
	else
		rg_log_once("frontend", "unrecognised fatbin wrapper: its kernels cannot be loaded", "__cudaRegisterFatBinary");
	pthread_mutex_lock(&lock);
	fb->next_image = images;
	images = fb;
	fe_ptrmap_put(&image_records, fb, fb);
	pthread_mutex_unlock(&lock);
	return (void **)fb;
}

void __cudaRegisterFatBinaryEnd(void **fatCubinHandle) {}

void __cudaUnregisterFatBinary(void **fatCubinHandle)
{
	/* Kernel records stay: other threads may still launch during exit, and the
	 * server unloads everything with the session. */
}

void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun, const char *deviceName,
			    int thread_limit, uint3 *tid, uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize)
{
	fe_fatbin *fb = (fe_fatbin *)fatCubinHandle;
	fe_kernel *k = calloc(1, sizeof(*k));
	if (!fb || !k || !(k->name = strdup(deviceName))) {
		free(k);
		return;
	}
	k->host_fn = hostFun;
	k->fb = fb;
	pthread_mutex_lock(&lock);
	k->next_in_fb = fb->kernels;
	fb->kernels = k;
	fe_ptrmap_put(&kernels_by_stub, hostFun, k);
	fe_ptrmap_put(&kernel_records, k, k);
	pthread_mutex_unlock(&lock);
}

void __cudaRegisterVar(void **fatCubinHandle, char *hostVar, char *deviceAddress, const char *deviceName, int ext,
		       size_t size, int constant, int global)
{
	fe_fatbin *fb = (fe_fatbin *)fatCubinHandle;
	fe_var *v = calloc(1, sizeof(*v));
	if (!fb || !v || !(v->name = strdup(deviceName))) {
		free(v);
		return;
	}
	v->host_var = hostVar;
	v->size = size;
	v->fb = fb;
	pthread_mutex_lock(&lock);
	v->next_in_fb = fb->vars;
	fb->vars = v;
	fe_ptrmap_put(&vars_by_shadow, hostVar, v);
	pthread_mutex_unlock(&lock);
}

void __cudaRegisterManagedVar(void **fatCubinHandle, void **hostVarPtrAddress, char *deviceAddress,
			      const char *deviceName, int ext, size_t size, int constant, int global)
{
	rg_log_once("frontend", "not supported (managed memory needs a GPU in this host)", "__cudaRegisterManagedVar");
}

/* Names of everything in the fatbin, as module_load wants them. */
static char *load_names(fe_fatbin *fb)
{
	size_t len = 1;
	for (fe_kernel *k = fb->kernels; k; k = k->next_in_fb)
		len += strlen(k->name) + 32;
	for (fe_var *v = fb->vars; v; v = v->next_in_fb)
		len += strlen(v->name) + 4;
	char *s = malloc(len), *p = s;
	if (!s)
		return NULL;
	for (fe_kernel *k = fb->kernels; k; k = k->next_in_fb)
		p += sprintf(p, "f:%llu:%s\n", (unsigned long long)k->load_id, k->name);
	for (fe_var *v = fb->vars; v; v = v->next_in_fb)
		p += sprintf(p, "v:%s\n", v->name);
	*p = 0;
	return s;
}

static int send_load(fe_conn *c, fe_fatbin *fb, uint64_t mid, const char *names, int with_image, fe_reply *r)
{
	proto_msg m;
	proto_msg_begin(&m, PROTO_OP_MODULE_LOAD, fe_conn_next_seq(c), 4);
	proto_msg_u64(&m, mid);
	proto_msg_bin(&m, fb->hash, CUBIN_HASH_LEN);
	proto_msg_u64(&m, fb->size);
	proto_msg_str(&m, names);
	return fe_conn_call(c, &m, with_image ? fb->data : NULL, with_image ? fb->size : 0, NULL, 0, r);
}

static int take_layout(fe_kernel *k, const msgpack_object *o)
{
	if (o->type != MSGPACK_OBJECT_BIN || o->via.bin.size % 8)
		return -1;
	if (k->off) /* loaded on another device before: same image, same layout */
		return 0;
	uint32_t n = o->via.bin.size / 8;
	k->off = calloc(n + 1, sizeof(uint32_t));
	k->size = calloc(n + 1, sizeof(uint32_t));
	if (!k->off || !k->size)
		return -1;
	const uint8_t *b = (const uint8_t *)o->via.bin.ptr;
	for (uint32_t i = 0; i < n; i++) {
		memcpy(&k->off[i], b + 8 * i, 4);
		memcpy(&k->size[i], b + 8 * i + 4, 4);
		if (k->off[i] + k->size[i] > k->param_size)
			k->param_size = k->off[i] + k->size[i];
	}
	k->nparams = n;
	return 0;
}

/* One kernel's entry of a module_load / module_resolve reply: [status, layout]. */
static void take_func(fe_kernel *k, int dev, const msgpack_object *e)
{
	k->func_id[dev] = k->load_id;
	k->status[dev] = CUDA_ERROR_INVALID_IMAGE;
	if (e->type == MSGPACK_OBJECT_ARRAY && e->via.array.size >= 1) {
		k->status[dev] = (int)e->via.array.ptr[0].via.i64;
		if (k->status[dev] == 0 && (e->via.array.size < 2 || take_layout(k, &e->via.array.ptr[1])))
			k->status[dev] = CUDA_ERROR_INVALID_IMAGE;
	}
	k->resolved |= 1u << dev;
}

/* One variable's entry: [status, dptr, size]. */
static void take_var(fe_var *v, int dev, const msgpack_object *e)
{
	v->status[dev] = CUDA_ERROR_NOT_FOUND;
	if (e->type == MSGPACK_OBJECT_ARRAY && e->via.array.size >= 3) {
		v->status[dev] = (int)e->via.array.ptr[0].via.i64;
		v->dptr[dev] = e->via.array.ptr[1].via.u64;
		if (v->status[dev] == 0) {
			if (!v->host_var) /* the driver's: the size is the module's */
				v->size = (size_t)e->via.array.ptr[2].via.u64;
			fe_mem_add(v->dptr[dev], e->via.array.ptr[2].via.u64, FE_MEM_MODULE, dev);
		}
	}
	v->resolved |= 1u << dev;
}

/* Loads fb on device dev (lock held). */
static int load_locked(fe_fatbin *fb, int dev, fe_conn *c)
{
	if (fb->loaded[dev])
		return fb->loaded[dev] > 0 ? 0 : fb->load_err[dev];
	if (!fb->data)
		return CUDA_ERROR_INVALID_IMAGE;
	if (!fb->hash[0])
		fe_hashcache_get(fb->data, fb->size, fb->hash);
	for (fe_kernel *k = fb->kernels; k; k = k->next_in_fb)
		k->load_id = fe_rt_new_id();
	char *names = load_names(fb);
	if (!names)
		return CUDA_ERROR_OUT_OF_MEMORY;
	uint64_t mid = fe_rt_new_id();
	fe_reply r;
	int st = send_load(c, fb, mid, names, 0, &r);
	if (st == CUDA_ERROR_FILE_NOT_FOUND) { /* the server lacks this image: send it once */
		st = send_load(c, fb, mid, names, 1, &r);
		U.uploads++;
		U.upload_bytes += fb->size;
		/* The bytes do not hash to the name sent: a stale cached hash. */
		if (st == CUDA_ERROR_INVALID_SOURCE && fe_hashcache_forget(fb->data, fb->size)) {
			LOG_WARN("frontend", "image hash cache: a stale entry for an image of %zu bytes; hashing it", fb->size);
			fe_hashcache_get(fb->data, fb->size, fb->hash);
			if ((st = send_load(c, fb, mid, names, 0, &r)) == CUDA_ERROR_FILE_NOT_FOUND)
				st = send_load(c, fb, mid, names, 1, &r);
		}
		if (st == CUDA_ERROR_OUT_OF_MEMORY)
			LOG_WARN("frontend", "the server refused an image of %zu bytes: its store quota is used up", fb->size);
		U.refused += st > 0;
	}
	if (U.loads++ == 0)
		atexit(report_uploads);
	free(names);
	if (st < 0)
		return st; /* channel broken: may be retried on a new connection */
	if (st) {
		fb->loaded[dev] = -1;
		fb->load_err[dev] = st;
		return st;
	}
	fb->module_id[dev] = mid;
	const msgpack_object *items;
	uint32_t n, i = 0;
	if (proto_arg_array(&r.view, PROTO_REPLY_FIRST, &items, &n) == PROTO_OK) {
		for (fe_kernel *k = fb->kernels; k && i < n; k = k->next_in_fb, i++)
			take_func(k, dev, &items[i]);
		for (fe_var *v = fb->vars; v && i < n; v = v->next_in_fb, i++)
			take_var(v, dev, &items[i]);
	}
	fe_reply_free(&r);
	if (i != n) {
		fb->loaded[dev] = -1;
		fb->load_err[dev] = CUDA_ERROR_INVALID_IMAGE;
		return CUDA_ERROR_INVALID_IMAGE;
	}
	fb->loaded[dev] = 1;
	return 0;
}

int fe_image_resolve_locked(fe_fatbin *fb, int dev, fe_conn *c, fe_kernel *k, fe_var *v)
{
	if (!fb->loaded[dev] || fb->loaded[dev] < 0)
		return load_locked(fb, dev, c); /* k and v are in its lists */
	if ((!k || k->resolved >> dev & 1) && (!v || v->resolved >> dev & 1))
		return 0;
	size_t len = (k ? strlen(k->name) + 32 : 0) + (v ? strlen(v->name) + 4 : 0) + 1;
	char *names = malloc(len), *p = names;
	if (!names)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (k) {
		k->load_id = fe_rt_new_id();
		p += sprintf(p, "f:%llu:%s\n", (unsigned long long)k->load_id, k->name);
	}
	if (v)
		p += sprintf(p, "v:%s\n", v->name);
	proto_msg m;
	fe_reply r;
	proto_msg_begin(&m, PROTO_OP_MODULE_RESOLVE, fe_conn_next_seq(c), 2);
	proto_msg_u64(&m, fb->module_id[dev]);
	proto_msg_str(&m, names);
	int st = fe_conn_call(c, &m, NULL, 0, NULL, 0, &r);
	free(names);
	if (st)
		return st;
	const msgpack_object *items;
	uint32_t n;
	st = CUDA_ERROR_INVALID_IMAGE;
	uint32_t want = (k != NULL) + (v != NULL);
	if (proto_arg_array(&r.view, PROTO_REPLY_FIRST, &items, &n) == PROTO_OK && n == want) {
		if (k)
			take_func(k, dev, &items[0]);
		if (v)
			take_var(v, dev, &items[n - 1]);
		st = 0;
	}
	fe_reply_free(&r);
	return st;
}

int fe_image_names_locked(fe_fatbin *fb, int dev, fe_conn *c, char **names)
{
	int st = fb->loaded[dev] > 0 ? 0 : load_locked(fb, dev, c);
	if (st)
		return st;
	proto_msg m;
	fe_reply r;
	proto_msg_begin(&m, PROTO_OP_MODULE_RESOLVE, fe_conn_next_seq(c), 2);
	proto_msg_u64(&m, fb->module_id[dev]);
	proto_msg_str(&m, "n:\n");
	if ((st = fe_conn_call(c, &m, NULL, 0, NULL, 0, &r)))
		return st;
	const msgpack_object *items, *e;
	uint32_t n;
	st = CUDA_ERROR_INVALID_IMAGE;
	if (proto_arg_array(&r.view, PROTO_REPLY_FIRST, &items, &n) == PROTO_OK && n == 1 &&
	    (e = &items[0])->type == MSGPACK_OBJECT_ARRAY && e->via.array.size == 2 &&
	    e->via.array.ptr[1].type == MSGPACK_OBJECT_STR) {
		st = (int)e->via.array.ptr[0].via.i64;
		const msgpack_object_str *t = &e->via.array.ptr[1].via.str;
		if (st == 0 && !(*names = strndup(t->ptr, t->size)))
			st = CUDA_ERROR_OUT_OF_MEMORY;
	}
	fe_reply_free(&r);
	return st;
}

static int kernel_ready(fe_kernel *k, fe_conn *c, int dev)
{
	if (k->fb->loaded[dev] > 0 && (k->resolved >> dev & 1))
		return k->status[dev];
	pthread_mutex_lock(&lock);
	int st = k->fb->unloaded ? CUDA_ERROR_INVALID_HANDLE : fe_image_resolve_locked(k->fb, dev, c, k, NULL);
	pthread_mutex_unlock(&lock);
	return st ? st : k->status[dev];
}

/* A host stub nvcc registered, or a kernel record itself: CUDA 12's runtime
 * takes a cudaKernel_t (and the driver a CUkernel) where it takes a function. */
static fe_kernel *kernel_of(const void *func)
{
	pthread_mutex_lock(&lock);
	fe_kernel *k = fe_ptrmap_get(&kernels_by_stub, func);
	if (!k && func)
		k = fe_ptrmap_get(&kernel_records, func);
	pthread_mutex_unlock(&lock);
	return k;
}

fe_kernel *fe_kernel_of(const void *func) { return kernel_of(func); }

int fe_kernel_valid(const void *p)
{
	pthread_mutex_lock(&lock);
	int ok = p && fe_ptrmap_get(&kernel_records, p) != NULL;
	pthread_mutex_unlock(&lock);
	return ok;
}

int fe_symbol_lookup(const void *symbol, uint64_t *dptr, uint64_t *size)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	int dev = fe_rt_current_device();
	pthread_mutex_lock(&lock);
	fe_var *v = fe_ptrmap_get(&vars_by_shadow, symbol);
	int st = v ? load_locked(v->fb, dev, c) : cudaErrorInvalidSymbol;
	if (st == 0 && v->status[dev])
		st = cudaErrorInvalidSymbol;
	if (st == 0) {
		*dptr = v->dptr[dev];
		*size = v->size;
	}
	pthread_mutex_unlock(&lock);
	return st < 0 ? cudaErrorDevicesUnavailable : st;
}

char __cudaInitModule(void **fatCubinHandle)
{
	fe_conn *c;
	if (fe_rt_enter(&c) != cudaSuccess)
		return 0;
	pthread_mutex_lock(&lock);
	int st = load_locked((fe_fatbin *)fatCubinHandle, fe_rt_current_device(), c);
	pthread_mutex_unlock(&lock);
	return st == 0;
}

/* After fork the child starts sessions of its own: nothing the parent loaded is
 * loaded there (rt_state.c's atfork handler; single-threaded in the child). */
/* After cudaDeviceReset: that device's session has none of our modules. */
static void forget_device(int dev)
{
	if (dev < 0 || dev >= FE_MAX_DEVICES)
		return;
	pthread_mutex_lock(&lock);
	for (fe_fatbin *fb = images; fb; fb = fb->next_image) {
		fb->loaded[dev] = 0;
		for (fe_kernel *k = fb->kernels; k; k = k->next_in_fb) {
			k->attrs_valid[dev] = 0;
			k->resolved &= ~(1u << dev);
		}
		for (fe_var *v = fb->vars; v; v = v->next_in_fb)
			v->resolved &= ~(1u << dev);
	}
	pthread_mutex_unlock(&lock);
}

static void forget_sessions(void)
{
	pthread_mutex_init(&lock, NULL);
	for (fe_fatbin *fb = images; fb; fb = fb->next_image) {
		memset(fb->loaded, 0, sizeof(fb->loaded));
		for (fe_kernel *k = fb->kernels; k; k = k->next_in_fb) {
			memset(k->attrs_valid, 0, sizeof(k->attrs_valid));
			k->resolved = 0;
		}
		for (fe_var *v = fb->vars; v; v = v->next_in_fb)
			v->resolved = 0;
	}
}

/* ---- launch */

typedef struct call_config {
	dim3 grid, block;
	size_t shmem;
	cudaStream_t stream;
} call_config;

#define CONFIG_DEPTH 16
static _Thread_local call_config tls_configs[CONFIG_DEPTH];
static _Thread_local int tls_nconfigs;

unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem, struct CUstream_st *stream)
{
	if (tls_nconfigs == CONFIG_DEPTH)
		return cudaErrorInvalidConfiguration;
	tls_configs[tls_nconfigs++] = (call_config){gridDim, blockDim, sharedMem, stream};
	return 0;
}

cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem, void *stream)
{
	if (tls_nconfigs == 0)
		return cudaErrorMissingConfiguration;
	call_config *cc = &tls_configs[--tls_nconfigs];
	*gridDim = cc->grid;
	*blockDim = cc->block;
	*sharedMem = cc->shmem;
	*(cudaStream_t *)stream = cc->stream;
	return cudaSuccess;
}

static cudaError_t func_attrs(fe_kernel *k, fe_conn *c, int dev);

/* CUDA checks the configuration at the launch call: so do we, from the cached
 * device properties and function attributes, so that the error is synchronous as
 * the program expects. The CUDA 13 runtime answers cudaErrorInvalidValue for all
 * of these (measured on an H200; not cudaErrorInvalidConfiguration). */
static cudaError_t check_config(fe_kernel *k, fe_conn *c, int dev, dim3 g, dim3 b, size_t shmem)
{
	const struct cudaDeviceProp *p = &fe_rt_device(dev)->prop;
	if (!g.x || !g.y || !g.z || !b.x || !b.y || !b.z)
		return cudaErrorInvalidValue;
	if (b.x > (unsigned)p->maxThreadsDim[0] || b.y > (unsigned)p->maxThreadsDim[1] ||
	    b.z > (unsigned)p->maxThreadsDim[2] || (uint64_t)b.x * b.y * b.z > (uint64_t)p->maxThreadsPerBlock)
		return cudaErrorInvalidValue;
	if (g.x > (unsigned)p->maxGridSize[0] || g.y > (unsigned)p->maxGridSize[1] || g.z > (unsigned)p->maxGridSize[2])
		return cudaErrorInvalidValue;
	/* Past the default dynamic shared memory, the kernel's own limit (raised by
	 * cudaFuncSetAttribute) decides: one round trip per kernel, then cached. */
	if (shmem > p->sharedMemPerBlock) {
		cudaError_t e = func_attrs(k, c, dev);
		if (e != cudaSuccess)
			return e;
		if (shmem > (size_t)k->attrs[dev][CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES])
			return cudaErrorInvalidValue;
	}
	return cudaSuccess;
}

/* A launch's arguments packed by the kernel's parameter layout (padding zero),
 * or taken packed already (packed: the driver's `extra` buffer; the driver
 * takes one shorter than the parameters too: the rest is zero here), after
 * the checks a launch makes: what launches and kernel graph nodes send. The
 * error, if any, is already recorded. */
static cudaError_t pack(fe_kernel *k, fe_conn *c, dim3 g, dim3 b, void **args, const void *packed, size_t packed_len,
			size_t shmem, fe_kargs *out)
{
	if (!k)
		return fe_rt_fail(cudaErrorInvalidDeviceFunction);
	int dev = fe_rt_current_device();
	int st = kernel_ready(k, c, dev);
	if (st)
		return fe_rt_leave(st == CUDA_ERROR_NOT_FOUND ? cudaErrorInvalidDeviceFunction : st);
	if (!packed && k->nparams && !args)
		return fe_rt_fail(cudaErrorInvalidValue);
	cudaError_t e = check_config(k, c, dev, g, b, shmem);
	if (e != cudaSuccess)
		return fe_rt_fail(e);
	out->buf = out->small;
	if (k->param_size > sizeof(out->small) && !(out->buf = malloc(k->param_size)))
		return fe_rt_fail(cudaErrorMemoryAllocation);
	if (packed) {
		size_t n = packed_len < k->param_size ? packed_len : k->param_size;
		memset(out->buf + n, 0, k->param_size - n);
		if (n)
			memcpy(out->buf, packed, n);
	} else {
		memset(out->buf, 0, k->param_size);
		for (uint32_t i = 0; i < k->nparams; i++)
			memcpy(out->buf + k->off[i], args[i], k->size[i]);
	}
	out->len = k->param_size;
	out->func_id = k->func_id[dev];
	out->nparams = k->nparams;
	out->off = k->off;
	return cudaSuccess;
}

cudaError_t fe_kernel_pack(fe_conn *c, const void *func, dim3 g, dim3 b, void **args, size_t shmem, fe_kargs *out)
{
	return pack(kernel_of(func), c, g, b, args, NULL, 0, shmem, out);
}

void fe_kargs_free(fe_kargs *a)
{
	if (a->buf != a->small)
		free(a->buf);
	a->buf = NULL;
}

/* Launch attributes travel only where the server's driver takes them as they
 * are (proto_launch.h); *cooperative: a grid-wide launch. */
static cudaError_t launch_attrs(const void *attrs, size_t len, int *cooperative)
{
	*cooperative = 0;
	if (len % sizeof(CUlaunchAttribute) || (len && !attrs))
		return cudaErrorInvalidValue;
	const CUlaunchAttribute *a = attrs;
	for (size_t i = 0; i < len / sizeof(*a); i++) {
		if (!proto_launch_attr_travels(a[i].id)) {
			char what[64];
			snprintf(what, sizeof(what), "launch attribute %d", (int)a[i].id);
			rg_log_once("frontend", "not supported (it names state of this process)", what);
			return cudaErrorNotSupported;
		}
		if (a[i].id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE && a[i].value.cooperative)
			*cooperative = 1;
	}
	return cudaSuccess;
}

/* The driver refuses a cooperative grid that cannot be resident at once; the
 * launch itself is async here, so ask first and fail the call as CUDA does. */
static cudaError_t cooperative_fits(fe_conn *c, const fe_kargs *a, dim3 g, dim3 b, size_t shmem)
{
	int32_t per_sm = 0;
	int st = fe_rpc_occupancy(c, a->func_id, (int32_t)(b.x * b.y * b.z), shmem, 0, &per_sm);
	if (st)
		return fe_rt_leave(st);
	fe_device *d = fe_rt_device(fe_rt_current_device());
	if (d && (uint64_t)g.x * g.y * g.z > (uint64_t)per_sm * (uint64_t)d->prop.multiProcessorCount)
		return fe_rt_fail(cudaErrorCooperativeLaunchTooLarge);
	return cudaSuccess;
}

static cudaError_t launch(fe_api_site site, fe_kernel *k, dim3 g, dim3 b, void **args, const void *packed,
			  size_t packed_len, size_t shmem, cudaStream_t stream, const void *attrs, size_t attrs_len)
{
	fe_conn *c;
	fe_kargs a;
	int coop = 0;
	cudaError_t e = fe_rt_enter_site(&c, site);
	if (e != cudaSuccess)
		return e;
	if (attrs_len && (e = launch_attrs(attrs, attrs_len, &coop)) != cudaSuccess)
		return fe_rt_fail(e);
	if ((e = pack(k, c, g, b, args, packed, packed_len, shmem, &a)) != cudaSuccess)
		return e;
	if (coop && (e = cooperative_fits(c, &a, g, b, shmem)) != cudaSuccess) {
		fe_kargs_free(&a);
		return e;
	}
	int st = fe_rpc_launch(c, a.func_id, g.x, g.y, g.z, b.x, b.y, b.z, (uint32_t)shmem, fe_rt_stream(stream), a.buf,
			       a.len, attrs, attrs_len);
	fe_kargs_free(&a);
	return fe_rt_leave(st);
}
/* Counted under the entry point that called it (stats.h). */
#define launch(...) launch(FE_API_SITE, __VA_ARGS__)

/* ---- images loaded through the driver API (drv_module.c): modules and
 * libraries, with kernels and variables named one at a time. */

fe_fatbin *fe_image_new(const void *data, size_t size, int kind)
{
	fe_fatbin *fb = calloc(1, sizeof(*fb));
	if (!fb)
		return NULL;
	fb->data = data;
	fb->size = size;
	fb->kind = kind;
	pthread_mutex_lock(&lock);
	if (fe_ptrmap_put(&image_records, fb, fb)) {
		pthread_mutex_unlock(&lock);
		free(fb);
		return NULL;
	}
	fb->next_image = images;
	images = fb;
	pthread_mutex_unlock(&lock);
	return fb;
}

int fe_image_valid_locked(const void *p) { return p && fe_ptrmap_get(&image_records, p) != NULL; }

fe_kernel *fe_image_kernel_locked(fe_fatbin *fb, const char *name)
{
	fe_kernel *k = fb->kernels;
	while (k && strcmp(k->name, name) != 0)
		k = k->next_in_fb;
	return k;
}

fe_var *fe_image_var_locked(fe_fatbin *fb, const char *name)
{
	fe_var *v = fb->vars;
	while (v && strcmp(v->name, name) != 0)
		v = v->next_in_fb;
	return v;
}

fe_kernel *fe_image_add_kernel_locked(fe_fatbin *fb, const char *name)
{
	fe_kernel *k = calloc(1, sizeof(*k));
	if (!k || !(k->name = strdup(name)) || fe_ptrmap_put(&kernel_records, k, k)) {
		if (k)
			free(k->name);
		free(k);
		return NULL;
	}
	k->fb = fb;
	k->next_in_fb = fb->kernels;
	fb->kernels = k;
	return k;
}

fe_var *fe_image_add_var_locked(fe_fatbin *fb, const char *name)
{
	fe_var *v = calloc(1, sizeof(*v));
	if (!v || !(v->name = strdup(name))) {
		free(v);
		return NULL;
	}
	v->fb = fb;
	v->next_in_fb = fb->vars;
	fb->vars = v;
	return v;
}

cudaError_t(fe_kernel_launch_at)(fe_api_site site, fe_kernel *k, dim3 g, dim3 b, void **args, const void *buf,
				 size_t len, size_t shmem, cudaStream_t stream, const void *attrs, size_t attrs_len)
{
	return (launch)(site, k, g, b, args, buf, len, shmem, stream, attrs, attrs_len);
}

cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *func)
{
	fe_kernel *k = kernel_of(func);
	if (!kernel || !k)
		return cudaErrorInvalidDeviceFunction;
	*kernel = (cudaKernel_t)k;
	return cudaSuccess;
}

/* A kernel record is also the CUfunction and the CUkernel of the driver API
 * (drv_module.c): a runtime kernel's handles there; loaded at first use. */
static cudaError_t kernel_handle(void **out, const void *func)
{
	fe_kernel *k = kernel_of(func);
	if (!out)
		return fe_rt_fail(cudaErrorInvalidValue);
	if (!k)
		return fe_rt_fail(cudaErrorInvalidDeviceFunction);
	*out = k;
	return cudaSuccess;
}

cudaError_t cudaGetFuncBySymbol(cudaFunction_t *functionPtr, const void *symbolPtr)
{
	return kernel_handle((void **)functionPtr, symbolPtr);
}

cudaError_t cudaGetKernel(cudaKernel_t *kernelPtr, const void *entryFuncAddr)
{
	return kernel_handle((void **)kernelPtr, entryFuncAddr);
}

cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
			       cudaStream_t stream)
{
	return launch((fe_kernel *)kernel, gridDim, blockDim, args, NULL, 0, sharedMem, stream, NULL, 0);
}

cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
				    size_t sharedMem, cudaStream_t stream)
{
	return launch((fe_kernel *)kernel, gridDim, blockDim, args, NULL, 0, sharedMem, stream, NULL, 0);
}

cudaError_t cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
			     cudaStream_t stream)
{
	return launch(kernel_of(func), gridDim, blockDim, args, NULL, 0, sharedMem, stream, NULL, 0);
}

_Static_assert(sizeof(cudaLaunchAttribute) == sizeof(CUlaunchAttribute),
	       "runtime and driver launch attributes share a layout");

/* Cooperative groups' grid-wide launch: one launch attribute, as
 * cudaLaunchKernelExC would carry it. */
cudaError_t cudaLaunchCooperativeKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
					cudaStream_t stream)
{
	cudaLaunchAttribute a;
	memset(&a, 0, sizeof(a));
	a.id = cudaLaunchAttributeCooperative;
	a.val.cooperative = 1;
	return launch(kernel_of(func), gridDim, blockDim, args, NULL, 0, sharedMem, stream, &a, sizeof(a));
}

cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func, void **args)
{
	if (!config)
		return fe_rt_fail(cudaErrorInvalidValue);
	return launch(kernel_of(func), config->gridDim, config->blockDim, args, NULL, 0, config->dynamicSmemBytes,
		      config->stream, config->attrs, config->numAttrs * sizeof(cudaLaunchAttribute));
}

/* ---- function attributes and occupancy */

cudaError_t fe_kernel_attrs(fe_kernel *k, fe_conn *c, int dev) { return func_attrs(k, c, dev); }

static cudaError_t func_attrs(fe_kernel *k, fe_conn *c, int dev)
{
	if (k->attrs_valid[dev])
		return cudaSuccess;
	int32_t a[CU_FUNC_ATTRIBUTE_MAX];
	int st = fe_rpc_func_get_attrs(c, k->func_id[dev], a, sizeof(a));
	if (st == 0) {
		memcpy(k->attrs[dev], a, sizeof(a));
		k->attrs_valid[dev] = 1;
	}
	return fe_rt_leave(st);
}

/* The start of every per-function call: the channel, and func's kernel loaded
 * on the current device. bad: the caller's other arguments are wrong
 * (cudaErrorInvalidValue, once func is known). cudaSuccess, or the error,
 * already recorded. */
static cudaError_t kernel_call(fe_api_site site, const void *func, int bad, fe_conn **c, fe_kernel **k, int *dev)
{
	cudaError_t e = fe_rt_enter_site(c, site);
	if (e != cudaSuccess)
		return e;
	*k = kernel_of(func);
	if (!*k || bad)
		return fe_rt_fail(*k ? cudaErrorInvalidValue : cudaErrorInvalidDeviceFunction);
	*dev = fe_rt_current_device();
	int st = kernel_ready(*k, *c, *dev);
	return st ? fe_rt_leave(st) : cudaSuccess;
}
/* Counted under the entry point that called it (stats.h). */
#define kernel_call(...) kernel_call(FE_API_SITE, __VA_ARGS__)

cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *attr, const void *func)
{
	fe_conn *c;
	fe_kernel *k;
	int dev;
	cudaError_t e = kernel_call(func, !attr, &c, &k, &dev);
	if (e != cudaSuccess)
		return e;
	if ((e = func_attrs(k, c, dev)) != cudaSuccess)
		return e;
	const int32_t *a = k->attrs[dev];
	memset(attr, 0, sizeof(*attr));
	attr->maxThreadsPerBlock = a[CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK];
	attr->sharedSizeBytes = (size_t)a[CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES];
	attr->constSizeBytes = (size_t)a[CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES];
	attr->localSizeBytes = (size_t)a[CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES];
	attr->numRegs = a[CU_FUNC_ATTRIBUTE_NUM_REGS];
	attr->ptxVersion = a[CU_FUNC_ATTRIBUTE_PTX_VERSION];
	attr->binaryVersion = a[CU_FUNC_ATTRIBUTE_BINARY_VERSION];
	attr->cacheModeCA = a[CU_FUNC_ATTRIBUTE_CACHE_MODE_CA];
	attr->maxDynamicSharedSizeBytes = a[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES];
	attr->preferredShmemCarveout = a[CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT];
	attr->clusterDimMustBeSet = a[CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET];
	attr->requiredClusterWidth = a[CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH];
	attr->requiredClusterHeight = a[CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT];
	attr->requiredClusterDepth = a[CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH];
	attr->clusterSchedulingPolicyPreference = a[CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE];
	attr->nonPortableClusterSizeAllowed = a[CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED];
	return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value)
{
	fe_conn *c;
	fe_kernel *k;
	int dev;
	cudaError_t e = kernel_call(func, (int)attr < 0 || (int)attr >= CU_FUNC_ATTRIBUTE_MAX, &c, &k, &dev);
	if (e != cudaSuccess)
		return e;
	/* PyTorch sets the same attribute to the same value before many launches
	 * (attention kernels): what the kernel already has costs no round trip. */
	if (k->attrs_valid[dev] && k->attrs[dev][attr] == value)
		return cudaSuccess;
	/* cudaFuncAttribute and CUfunction_attribute share their numbers. */
	int st = fe_rpc_func_set_attr(c, k->func_id[dev], attr, value);
	if (st == 0 && k->attrs_valid[dev])
		k->attrs[dev][attr] = value; /* the settable attributes read back as set */
	return fe_rt_leave(st);
}

cudaError_t cudaFuncSetCacheConfig(const void *func, enum cudaFuncCache config)
{
	fe_conn *c;
	fe_kernel *k;
	int dev;
	cudaError_t e = kernel_call(func, (int)config < cudaFuncCachePreferNone || (int)config > cudaFuncCachePreferEqual,
				    &c, &k, &dev);
	if (e != cudaSuccess)
		return e;
	return fe_rt_leave(fe_rpc_func_set_cache(c, k->func_id[dev], config));
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *numBlocks, const void *func, int blockSize,
								   size_t dynamicSMemSize, unsigned int flags)
{
	fe_conn *c;
	fe_kernel *k;
	int dev;
	cudaError_t e = kernel_call(func, !numBlocks, &c, &k, &dev);
	if (e != cudaSuccess)
		return e;
	int32_t n = 0;
	int st = fe_rpc_occupancy(c, k->func_id[dev], blockSize, dynamicSMemSize, flags, &n);
	if (st == 0)
		*numBlocks = n;
	return fe_rt_leave(st);
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, const void *func, int blockSize,
							  size_t dynamicSMemSize)
{
	return cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(numBlocks, func, blockSize, dynamicSMemSize, 0);
}

_Static_assert(sizeof(cudaLaunchAttribute) == sizeof(CUlaunchAttribute), "launch attributes share their layout");

/* Cluster occupancy of a launch configuration (its attributes travel as a
 * launch's); potential: the largest cluster size instead. */
static cudaError_t occupancy_clusters(fe_api_site site, int *out, const void *func, const cudaLaunchConfig_t *cfg,
				      uint32_t potential)
{
	fe_conn *c;
	fe_kernel *k;
	int dev;
	cudaError_t e = kernel_call(func, !out || !cfg || (cfg->numAttrs && !cfg->attrs), &c, &k, &dev);
	if (e != cudaSuccess)
		return e;
	int32_t n = 0;
	int st = fe_rpc_occupancy_clusters(c, k->func_id[dev], cfg->gridDim.x, cfg->gridDim.y, cfg->gridDim.z,
					   cfg->blockDim.x, cfg->blockDim.y, cfg->blockDim.z,
					   (uint32_t)cfg->dynamicSmemBytes, cfg->attrs,
					   cfg->numAttrs * sizeof(cudaLaunchAttribute), potential, &n);
	if (st == 0)
		*out = n;
	return fe_rt_leave(st);
}

cudaError_t cudaOccupancyMaxActiveClusters(int *numClusters, const void *func, const cudaLaunchConfig_t *launchConfig)
{
	return occupancy_clusters(FE_API_SITE, numClusters, func, launchConfig, 0);
}

cudaError_t cudaOccupancyMaxPotentialClusterSize(int *clusterSize, const void *func,
						 const cudaLaunchConfig_t *launchConfig)
{
	return occupancy_clusters(FE_API_SITE, clusterSize, func, launchConfig, 1);
}

/* A reset device's session has none of our modules; after fork, no session has. */
static void forget(int dev)
{
	if (dev == FE_RT_FORK)
		forget_sessions();
	else
		forget_device(dev);
}

__attribute__((constructor)) static void register_forget(void) { fe_rt_on_forget(forget); }
