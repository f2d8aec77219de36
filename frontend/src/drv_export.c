/*
 * cuGetExportTable: the driver's private function tables, emulated here.
 *
 * The static CUDA runtime (in every nvcc-built program and inside cuDNN, cuFFT,
 * cuSOLVER, cuSPARSE, cuRAND, cuBLAS) asks for these by UUID before its first
 * call and stops without them. What each table and slot is was learned from
 * public reverse engineering (ZLUDA's "dark API", LUPINE) and checked against
 * the runtime and the libraries themselves (a slot that was called with an
 * unknown meaning shows in the log); each table's comment below says what is
 * known. Every answer is local: no table costs a round trip.
 *
 * Layout: a table is an array of pointers; slot 0 holds its size in bytes,
 * except in the context-local storage table. Slots whose meaning is unknown
 * hold a stub that logs "table, slot" once and answers CUDA_ERROR_NOT_SUPPORTED,
 * so an unexpected use is visible rather than a jump to NULL.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "drv.h"
#include "rt.h" /* FE_MAX_DEVICES */
#include "rg_log.h"

static void uuid_text(const CUuuid *id, char out[40])
{
	static const char hex[] = "0123456789abcdef";
	char *p = out;
	for (int i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			*p++ = '-';
		*p++ = hex[(uint8_t)id->bytes[i] >> 4];
		*p++ = hex[(uint8_t)id->bytes[i] & 15];
	}
	*p = 0;
}

/* ---- stubs for slots of unknown meaning: each knows its table and slot */

static CUresult slot_unknown(const char *table, int slot)
{
	char what[96];
	snprintf(what, sizeof(what), "%s slot %d", table, slot);
	rg_log_once("frontend", "driver export table entry not supported", what);
	return CUDA_ERROR_NOT_SUPPORTED;
}

#define STUB(t, n)                                                                                                     \
	static CUresult t##_##n(void) { return slot_unknown(#t, n); }

/* Large tables whose meaning is known for a few slots: a stub in every slot
 * 1..99 (ALL_STUBS), the table's slots listed with ALL_SLOTS (slot 0 its size),
 * the known ones set after them by designated initializers (LARGE_TABLE). */
#define STUB10(t, a)                                                                                                   \
	STUB(t, a##0) STUB(t, a##1) STUB(t, a##2) STUB(t, a##3) STUB(t, a##4) STUB(t, a##5) STUB(t, a##6) STUB(t, a##7) \
	STUB(t, a##8) STUB(t, a##9)
#define ALL_STUBS(t)                                                                                                   \
	STUB(t, 1) STUB(t, 2) STUB(t, 3) STUB(t, 4) STUB(t, 5) STUB(t, 6) STUB(t, 7) STUB(t, 8) STUB(t, 9) STUB10(t, 1) \
	STUB10(t, 2) STUB10(t, 3) STUB10(t, 4) STUB10(t, 5) STUB10(t, 6) STUB10(t, 7) STUB10(t, 8) STUB10(t, 9)
#define SLOT10(t, a)                                                                                                   \
	(void *)t##_##a##0, (void *)t##_##a##1, (void *)t##_##a##2, (void *)t##_##a##3, (void *)t##_##a##4,           \
		(void *)t##_##a##5, (void *)t##_##a##6, (void *)t##_##a##7, (void *)t##_##a##8, (void *)t##_##a##9
#define ALL_SLOTS(t, n)                                                                                                \
	(void *)((n) * sizeof(void *)), (void *)t##_1, (void *)t##_2, (void *)t##_3, (void *)t##_4, (void *)t##_5,      \
		(void *)t##_6, (void *)t##_7, (void *)t##_8, (void *)t##_9, SLOT10(t, 1), SLOT10(t, 2), SLOT10(t, 3),  \
		SLOT10(t, 4), SLOT10(t, 5), SLOT10(t, 6), SLOT10(t, 7), SLOT10(t, 8), SLOT10(t, 9)
/* n slots served (slot 0 says so; 100 are there), the known ones after: */
#define LARGE_TABLE(t, n, ...)                                                                                         \
	_Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Woverride-init\"")                            \
	static const void *const t##_table[100] = {ALL_SLOTS(t, n), __VA_ARGS__};                                      \
	_Pragma("GCC diagnostic pop")

/* ---- CUDART_INTERFACE (6bd5fb6c-5bf4-e74a-8987-d93912fd9df9): primary
 * contexts and modules from fatbins */

#define FATBIN_WRAPPER_MAGIC 0x466243B1u
typedef struct fatbin_wrapper {
	uint32_t magic, version;
	const void *data;
	void *filename_or_fatbins;
} fatbin_wrapper;

/* The device's primary context, not retained (the runtime retains it itself
 * when it makes it current). */
static CUresult cudart_primary_ctx(CUcontext *pctx, CUdevice dev)
{
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	int n = 0;
	CUresult r = cuDeviceGetCount(&n);
	if (r)
		return r;
	if (dev < 0 || dev >= n)
		return CUDA_ERROR_INVALID_DEVICE;
	*pctx = fe_drv_ctx_of(dev);
	return CUDA_SUCCESS;
}

static CUresult module_from_wrapper(CUmodule *out, const fatbin_wrapper *w)
{
	if (!out || !w)
		return CUDA_ERROR_INVALID_VALUE;
	if (w->magic != FATBIN_WRAPPER_MAGIC || (w->version != 1 && w->version != 2) || !w->data)
		return CUDA_ERROR_INVALID_IMAGE;
	if (w->version == 2 && w->filename_or_fatbins) {
		/* -rdc: a list of prelinked fatbins to link with the image */
		rg_log_once("frontend", "not supported", "module from a relocatable (-rdc) fatbin list");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	return cuModuleLoadData(out, w->data);
}

static CUresult cudart_module_load(CUmodule *out, const fatbin_wrapper *w) { return module_from_wrapper(out, w); }

static CUresult cudart_module_load_ext(CUmodule *out, const fatbin_wrapper *w, void *a, void *b, unsigned n)
{
	if (a || b || n) {
		rg_log_once("frontend", "not supported", "CUDART_INTERFACE module load with extra arguments");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	return module_from_wrapper(out, w);
}

static CUresult cudart_module_load_image(const void *image, CUmodule *out, void *a, void *b, unsigned n)
{
	if (a || b || n) {
		rg_log_once("frontend", "not supported", "CUDART_INTERFACE module load with extra arguments");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	if (!image || !out)
		return CUDA_ERROR_INVALID_VALUE;
	return cuModuleLoadData(out, image);
}

static void cudart_module_unload(CUmodule m)
{
	if (m)
		cuModuleUnload(m);
}

/* CUDA 13.1 runtimes ask the driver to load its JIT compilers here; they are
 * the server's. */
static CUresult cudart_load_compilers(void) { return CUDA_SUCCESS; }

STUB(cudart, 3) STUB(cudart, 4) STUB(cudart, 5) STUB(cudart, 9) STUB(cudart, 10) STUB(cudart, 11)

static const void *const cudart_table[13] = {
	(void *)(13 * sizeof(void *)),
	(void *)cudart_module_load,
	(void *)cudart_primary_ctx,
	(void *)cudart_3,
	(void *)cudart_4,
	(void *)cudart_5,
	(void *)cudart_module_load_ext,
	(void *)cudart_module_unload,
	(void *)cudart_module_load_image,
	(void *)cudart_9,
	(void *)cudart_10,
	(void *)cudart_11,
	(void *)cudart_load_compilers,
};

/* ---- TOOLS_TLS (42d85a81-23f6-cb47-8298-f6e78a3aecdc) */

static CUresult tls_current_ctx(CUcontext *out)
{
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	return cuCtxGetCurrent(out);
}

STUB(tools_tls, 1) STUB(tools_tls, 3)

static const void *const tools_tls_table[4] = {
	(void *)(4 * sizeof(void *)),
	(void *)tools_tls_1,
	(void *)tls_current_ctx,
	(void *)tools_tls_3,
};

/* ---- TOOLS_RUNTIME_CALLBACK_HOOKS (a094798c-2e74-2e74-93f2-0800200c0a66):
 * two zeroed buffers the runtime keeps tool-callback state in */

static uint64_t hooks_buf1[1024], hooks_buf2[14];

static void hooks_buffer1(void **p, size_t *size)
{
	if (p)
		*p = hooks_buf1;
	if (size)
		*size = 1024;
}

static void hooks_buffer2(void **p, size_t *size)
{
	if (p)
		*p = hooks_buf2;
	if (size)
		*size = 14;
}

STUB(hooks, 1) STUB(hooks, 3) STUB(hooks, 4) STUB(hooks, 5)

static const void *const hooks_table[7] = {
	(void *)(7 * sizeof(void *)), (void *)hooks_1, (void *)hooks_buffer1, (void *)hooks_3,
	(void *)hooks_4,	      (void *)hooks_5, (void *)hooks_buffer2,
};

/* ---- CONTEXT_LOCAL_STORAGE_INTERFACE_V0301 (c693336e-1121-df11-a8c3-68f355d89593):
 * the runtime keeps its per-context state here and asks for it on nearly
 * every call. No size slot. */

typedef void (*cls_dtor)(CUcontext ctx, void *key, void *value);
typedef struct cls_entry {
	CUcontext ctx;
	void *key, *value;
	cls_dtor dtor;
} cls_entry;

static pthread_rwlock_t cls_lock = PTHREAD_RWLOCK_INITIALIZER;
static cls_entry *cls;
static size_t cls_n, cls_cap;

static CUresult cls_ctx(CUcontext *ctx)
{
	if (*ctx)
		return fe_drv_dev_of(*ctx) >= 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
	CUresult r = cuCtxGetCurrent(ctx);
	if (r)
		return r;
	return *ctx ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

static cls_entry *cls_find(CUcontext ctx, void *key)
{
	for (size_t i = 0; i < cls_n; i++)
		if (cls[i].ctx == ctx && cls[i].key == key)
			return &cls[i];
	return NULL;
}

static CUresult cls_put(CUcontext ctx, void *key, void *value, cls_dtor dtor)
{
	CUresult r = cls_ctx(&ctx);
	if (r)
		return r;
	pthread_rwlock_wrlock(&cls_lock);
	cls_entry *e = cls_find(ctx, key);
	if (!e && cls_n == cls_cap) {
		size_t cap = cls_cap ? 2 * cls_cap : 16;
		cls_entry *n = realloc(cls, cap * sizeof(*n));
		if (!n) {
			pthread_rwlock_unlock(&cls_lock);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		cls = n;
		cls_cap = cap;
	}
	if (!e)
		e = &cls[cls_n++];
	*e = (cls_entry){ctx, key, value, dtor};
	pthread_rwlock_unlock(&cls_lock);
	return CUDA_SUCCESS;
}

/* The runtime frees its value itself: no destructor call. */
static CUresult cls_delete(CUcontext ctx, void *key)
{
	CUresult r = cls_ctx(&ctx);
	if (r)
		return r;
	pthread_rwlock_wrlock(&cls_lock);
	cls_entry *e = cls_find(ctx, key);
	if (e)
		*e = cls[--cls_n];
	pthread_rwlock_unlock(&cls_lock);
	return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* A miss is an error: the runtime then makes its state and puts it. */
static CUresult cls_get(void **value, CUcontext ctx, void *key)
{
	if (!value)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult r = cls_ctx(&ctx);
	if (r)
		return r;
	pthread_rwlock_rdlock(&cls_lock);
	cls_entry *e = cls_find(ctx, key);
	if (e)
		*value = e->value;
	pthread_rwlock_unlock(&cls_lock);
	return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* A context ended (reset or destroyed, drv_ctx.c): the values the runtime
 * kept for it are dropped, their destructors called. */
static void cls_context_gone(CUcontext ctx)
{
	for (;;) {
		pthread_rwlock_wrlock(&cls_lock);
		cls_entry e = {0};
		for (size_t i = 0; i < cls_n; i++)
			if (cls[i].ctx == ctx) {
				e = cls[i];
				cls[i] = cls[--cls_n];
				break;
			}
		pthread_rwlock_unlock(&cls_lock);
		if (!e.ctx)
			return;
		if (e.dtor) /* outside the lock: it may call back into the table */
			e.dtor(e.ctx, e.key, e.value);
	}
}

static const void *const cls_table[4] = {(void *)cls_put, (void *)cls_delete, (void *)cls_get, NULL};

/* A device reset by the runtime layer (cudaDeviceReset of a program on the
 * shared runtime) ends its primary context for the static runtimes in the
 * libraries too: their destructors run, as a real driver's reset runs them.
 * After fork the child's entries are left alone (its CUDA starts over). */
static void cls_forget(int dev)
{
	if (dev != FE_RT_FORK)
		cls_context_gone(fe_drv_ctx_of(dev));
}

__attribute__((constructor)) static void cls_register(void)
{
	fe_rt_on_forget(cls_forget);
	fe_drv_ctx_on_gone(cls_context_gone);
}

/* ---- CONTEXT_CHECKS (263e8860-7cd2-6143-92f6-bbd5006dfa7e): whether a
 * context wraps another; none here does */

static CUresult checks_wrapped(CUcontext ctx, uint32_t *wrapped, CUcontext *inner)
{
	if (wrapped)
		*wrapped = 0;
	return CUDA_SUCCESS;
}

static uint32_t checks_3(void) { return 0; }

STUB(checks, 1)

static const void *const checks_table[4] = {
	(void *)(4 * sizeof(void *)),
	(void *)checks_1,
	(void *)checks_wrapped,
	(void *)checks_3,
};

/* ---- INTEGRITY_CHECK (d4082055-bde6-704b-8d34-ba123c66e1f2)
 *
 * The runtime asks for a keyed hash over what it can also learn from this
 * driver (its version, the devices' UUIDs and PCI ids) plus the process, the
 * thread, a time and these tables' addresses, computes the same itself and
 * refuses to run (cudaErrorSoftwareValidityNotEstablished) when they differ.
 * The hash is HMAC-MD2 with a fixed key; versions ending in 0 or 1 get fixed
 * answers. It must be computed here, on the calling thread. */

static CUresult integrity_check(uint32_t version, uint64_t seconds, uint64_t out[2]);

static const void *const integrity_table[3] = {
	(void *)(3 * sizeof(void *)),
	(void *)integrity_check,
	NULL,
};

static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

static CUresult integrity_check(uint32_t version, uint64_t seconds, uint64_t out[2])
{
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	switch (version % 10) {
	case 0:
		out[0] = 0x3341181C03CB675Cull;
		out[1] = 0x8ED383AA1F4CD1E8ull;
		return CUDA_SUCCESS;
	case 1:
		out[0] = 0x1841181C03CB675Cull;
		out[1] = 0x8ED383AA1F4CD1E8ull;
		return CUDA_SUCCESS;
	}
	/* the process, the tables, the time, then a record per device */
	uint8_t msg[48 + 28 * FE_MAX_DEVICES];
	int drv = 0, n = 0;
	CUresult r = cuDriverGetVersion(&drv);
	if (!r)
		r = cuDeviceGetCount(&n);
	if (r)
		return r;
	if (n > FE_MAX_DEVICES)
		n = FE_MAX_DEVICES;
	put32(msg, (uint32_t)drv);
	put32(msg + 4, version);
	put32(msg + 8, (uint32_t)getpid());
	put32(msg + 12, (uint32_t)pthread_self());
	put64(msg + 16, (uint64_t)(uintptr_t)cudart_table);
	put64(msg + 24, (uint64_t)(uintptr_t)integrity_table);
	put64(msg + 32, (uint64_t)(uintptr_t)integrity_table[1]);
	put64(msg + 40, seconds);
	for (int d = 0; d < n; d++) {
		uint8_t *rec = msg + 48 + 28 * d;
		CUuuid id;
		int dom = 0, bus = 0, dev = 0;
		if ((r = cuDeviceGetUuid(&id, d)) || (r = cuDeviceGetAttribute(&dom, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, d)) ||
		    (r = cuDeviceGetAttribute(&bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, d)) ||
		    (r = cuDeviceGetAttribute(&dev, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, d)))
			return r;
		memcpy(rec, id.bytes, 16);
		put32(rec + 16, (uint32_t)dom);
		put32(rec + 20, (uint32_t)bus);
		put32(rec + 24, (uint32_t)dev);
	}
	uint8_t digest[16];
	fe_drv_integrity_digest(msg, 48 + 28 * (size_t)n, digest);
	memcpy(out, digest, sizeof(digest));
	return CUDA_SUCCESS;
}

/* ---- TOOLS_CONTEXT (21318c60-9714-3248-8ca6-41ff7324c8f2): cuBLAS, cuBLASLt
 * and cuFFT ask for it; slot 4 gives a context's id */

static CUresult toolsctx_id(CUcontext ctx, uint64_t *id)
{
	if (!id)
		return CUDA_ERROR_INVALID_VALUE;
	return cuCtxGetId(ctx, (unsigned long long *)id);
}

ALL_STUBS(toolsctx)
LARGE_TABLE(toolsctx, 95, [4] = (void *)toolsctx_id)

/* ---- TOOLS_MODULE (6e163fbe-b958-444d-835c-e182aff1991e): cuFFT walks the
 * functions of a module it loaded through slot 7, calling back
 * cb(opaque, function, owner) for each and checking the count returned. */

typedef void (*module_fn_cb)(void *opaque, CUfunction f, uint64_t owner);

static uint64_t toolsmod_each_function(CUcontext ctx, CUmodule mod, module_fn_cb cb, void *opaque)
{
	unsigned n = 0;
	CUresult r = mod && cb ? cuModuleGetFunctionCount(&n, mod) : CUDA_ERROR_INVALID_VALUE;
	if (r != CUDA_SUCCESS || n == 0) {
		LOG_DEBUG("frontend", "TOOLS_MODULE: the functions of module %p: %d (%u)", (void *)mod, (int)r, n);
		return 0;
	}
	CUfunction *fs = calloc(n, sizeof(*fs));
	if (!fs)
		return 0;
	uint64_t done = 0;
	if (cuModuleEnumerateFunctions(fs, n, mod) == CUDA_SUCCESS)
		for (; done < n; done++)
			cb(opaque, fs[done], (uint64_t)(uintptr_t)mod);
	free(fs);
	return done;
}

ALL_STUBS(toolsmod)
LARGE_TABLE(toolsmod, 64, [7] = (void *)toolsmod_each_function)

/* ---- COMPILER (1734dc26-800d-4745-8726-c0f1e7dd8bca): asked for by NVRTC,
 * nvJitLink and cuBLASLt; its meaning is not known. A caller crashed on the
 * refusal (cuDNN's engines, ResNet-50 through libremote.so on an H100), so it
 * is served, every slot a stub that logs its number once and answers
 * CUDA_ERROR_NOT_SUPPORTED. */

ALL_STUBS(compiler)
LARGE_TABLE(compiler, 64)

/* ---- the tables by UUID */

typedef struct export_table {
	uint8_t id[16];
	const char *name;
	const void *const *table; /* NULL: known, and answered "not supported" quietly */
} export_table;

static const export_table tables[] = {
	{{0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a, 0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d, 0xf9},
	 "CUDART_INTERFACE",
	 cudart_table},
	{{0x42, 0xd8, 0x5a, 0x81, 0x23, 0xf6, 0xcb, 0x47, 0x82, 0x98, 0xf6, 0xe7, 0x8a, 0x3a, 0xec, 0xdc},
	 "TOOLS_TLS",
	 tools_tls_table},
	{{0xa0, 0x94, 0x79, 0x8c, 0x2e, 0x74, 0x2e, 0x74, 0x93, 0xf2, 0x08, 0x00, 0x20, 0x0c, 0x0a, 0x66},
	 "TOOLS_RUNTIME_CALLBACK_HOOKS",
	 hooks_table},
	{{0xc6, 0x93, 0x33, 0x6e, 0x11, 0x21, 0xdf, 0x11, 0xa8, 0xc3, 0x68, 0xf3, 0x55, 0xd8, 0x95, 0x93},
	 "CONTEXT_LOCAL_STORAGE",
	 cls_table},
	{{0x26, 0x3e, 0x88, 0x60, 0x7c, 0xd2, 0x61, 0x43, 0x92, 0xf6, 0xbb, 0xd5, 0x00, 0x6d, 0xfa, 0x7e},
	 "CONTEXT_CHECKS",
	 checks_table},
	{{0xd4, 0x08, 0x20, 0x55, 0xbd, 0xe6, 0x70, 0x4b, 0x8d, 0x34, 0xba, 0x12, 0x3c, 0x66, 0xe1, 0xf2},
	 "INTEGRITY_CHECK",
	 integrity_table},
	{{0x21, 0x31, 0x8c, 0x60, 0x97, 0x14, 0x32, 0x48, 0x8c, 0xa6, 0x41, 0xff, 0x73, 0x24, 0xc8, 0xf2},
	 "TOOLS_CONTEXT",
	 toolsctx_table},
	{{0x6e, 0x16, 0x3f, 0xbe, 0xb9, 0x58, 0x44, 0x4d, 0x83, 0x5c, 0xe1, 0x82, 0xaf, 0xf1, 0x99, 0x1e},
	 "TOOLS_MODULE",
	 toolsmod_table},
	{{0x17, 0x34, 0xdc, 0x26, 0x80, 0x0d, 0x47, 0x45, 0x87, 0x26, 0xc0, 0xf1, 0xe7, 0xdd, 0x8b, 0xca},
	 "COMPILER",
	 compiler_table},
	/* Asked for before cuInit by CUDA 13 runtimes and by cuBLAS; they go on
	 * without it. */
	{{0xf8, 0xcf, 0xf9, 0x51, 0x21, 0x46, 0x8b, 0x4e, 0xb9, 0xe2, 0xfb, 0x46, 0x9e, 0x7c, 0x0d, 0xd9},
	 "REQUIREMENTS",
	 NULL},
};

CUresult cuGetExportTable(const void **table, const CUuuid *id)
{
	if (!table || !id)
		return CUDA_ERROR_INVALID_VALUE;
	*table = NULL;
	char text[40];
	for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
		if (memcmp(tables[i].id, id->bytes, 16) != 0)
			continue;
		*table = (const void *)tables[i].table;
		if (!tables[i].table) {
			LOG_DEBUG("frontend", "cuGetExportTable(%s): not provided", tables[i].name);
			return CUDA_ERROR_NOT_SUPPORTED;
		}
		return CUDA_SUCCESS;
	}
	uuid_text(id, text);
	rg_log_once("frontend", "driver export table not supported", text);
	return CUDA_ERROR_NOT_SUPPORTED;
}
