/*
 * Driver API: contexts.
 *
 * Each remote device has one session, and so one context: its primary
 * context, with a real retain count. A thread's current context is the top of
 * its context stack, and its device is the runtime layer's current device (the
 * two move together). As CUDA's runtime does, the runtime layer binds its
 * device's primary context to a thread at its first call that needs the
 * device; before that, and before any cuCtxSetCurrent/Push, a thread has no
 * context. cudaSetDevice replaces the top of the stack with that device's
 * primary context, as in CUDA.
 *
 * cuCtxCreate gives a handle of its own (own id, flags, its place on stacks,
 * destroyed by cuCtxDestroy) that works on its device's session: what is made
 * in it (memory, streams, modules) is shared with the primary context and
 * outlives it. The primary context's last release resets its device (a new
 * session) at the next retain, unless the runtime layer uses the device (the
 * runtime holds its own reference in CUDA).
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "drv.h"
#include "ptrmap.h"
#include "rg_log.h"
#include "rt.h"

#define PRIMARY_BASE 0xC0000u

/* A context cuCtxCreate made: its handle is the record's address. */
typedef struct ctx_rec {
	int dev;
	unsigned flags;
	uint64_t id;
	int destroyed;
} ctx_rec;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static fe_ptrmap created; /* every ctx_rec ever made (never freed: a stale handle stays recognisable) */
static struct {
	int refs;
	unsigned flags;
	uint64_t id;       /* 0: none yet (a new one at the next ask) */
} prim[FE_MAX_DEVICES];
static atomic_uint_fast64_t next_ctx_id = 1;
static _Atomic(fe_drv_ctx_gone_fn) gone_fn; /* fe_drv_ctx_on_gone */

/* The thread's stack, on the heap: libremote.so's thread-locals must stay
 * small (static TLS, which a dlopen of it must find room for). */
static _Thread_local CUcontext *tls_stack;
static _Thread_local int tls_depth, tls_cap;
static pthread_key_t stack_key; /* frees a thread's stack when it exits */
static pthread_once_t stack_once = PTHREAD_ONCE_INIT;

static void stack_key_make(void) { pthread_key_create(&stack_key, free); }

static int stack_room(void)
{
	if (tls_depth < tls_cap)
		return 1;
	pthread_once(&stack_once, stack_key_make);
	int cap = tls_cap ? 2 * tls_cap : 8;
	CUcontext *s = realloc(tls_stack, (size_t)cap * sizeof(*s));
	if (!s)
		return 0;
	tls_stack = s;
	tls_cap = cap;
	pthread_setspecific(stack_key, s);
	return 1;
}

void fe_drv_ctx_on_gone(fe_drv_ctx_gone_fn fn) { atomic_store(&gone_fn, fn); }

static void ctx_gone(CUcontext ctx)
{
	fe_drv_ctx_gone_fn fn = atomic_load(&gone_fn);
	if (fn)
		fn(ctx);
}

CUcontext fe_drv_ctx_of(int dev) { return (CUcontext)(uintptr_t)(PRIMARY_BASE + dev); }

static int primary_dev(CUcontext ctx)
{
	uintptr_t v = (uintptr_t)ctx;
	return v >= PRIMARY_BASE && v < PRIMARY_BASE + FE_MAX_DEVICES && fe_rt_device((int)(v - PRIMARY_BASE))
		       ? (int)(v - PRIMARY_BASE)
		       : -1;
}

static ctx_rec *created_rec(CUcontext ctx)
{
	pthread_mutex_lock(&lock);
	ctx_rec *r = ctx ? fe_ptrmap_get(&created, ctx) : NULL;
	pthread_mutex_unlock(&lock);
	return r;
}

/* The device of a context, live or destroyed; -1 if ctx is none. */
static int dev_any(CUcontext ctx, int *destroyed)
{
	int d = primary_dev(ctx);
	*destroyed = 0;
	if (d >= 0)
		return d;
	ctx_rec *r = created_rec(ctx);
	if (!r)
		return -1;
	*destroyed = r->destroyed;
	return r->dev;
}

int fe_drv_dev_of(CUcontext ctx)
{
	int destroyed, d = dev_any(ctx, &destroyed);
	return destroyed ? -1 : d;
}

uint64_t fe_drv_ctx_id(CUcontext ctx)
{
	int d = primary_dev(ctx);
	if (d >= 0) {
		pthread_mutex_lock(&lock);
		if (!prim[d].id)
			prim[d].id = atomic_fetch_add(&next_ctx_id, 1);
		uint64_t id = prim[d].id;
		pthread_mutex_unlock(&lock);
		return id;
	}
	ctx_rec *r = created_rec(ctx);
	return r && !r->destroyed ? r->id : 0;
}

/* The thread's current context. The runtime layer moves the thread's device
 * (cudaSetDevice): then the top of the stack becomes that device's primary
 * context, as CUDA's runtime makes it. */
CUcontext fe_drv_ctx_current(void)
{
	int cur = fe_rt_current_device(), destroyed;
	if (tls_depth) {
		CUcontext top = tls_stack[tls_depth - 1];
		if (dev_any(top, &destroyed) != cur)
			tls_stack[tls_depth - 1] = top = fe_drv_ctx_of(cur);
		return top;
	}
	return fe_rt_thread_bound() >= 0 ? fe_drv_ctx_of(cur) : NULL;
}

/* The runtime's primary context bound to the thread becomes the stack's
 * bottom before the driver changes the stack. */
static void stack_materialize(void)
{
	if (!tls_depth && fe_rt_thread_bound() >= 0 && stack_room()) {
		tls_stack[0] = fe_drv_ctx_of(fe_rt_current_device());
		tls_depth = 1;
	}
}

/* The device follows the top of the stack; an empty stack leaves the thread
 * with no context until the runtime layer binds one again. */
static void stack_changed(void)
{
	int destroyed;
	if (!tls_depth) {
		fe_rt_thread_unbind();
		return;
	}
	int d = dev_any(tls_stack[tls_depth - 1], &destroyed);
	if (d >= 0)
		fe_rt_set_current_device(d);
}

/* The current context and its device: CUDA_ERROR_INVALID_CONTEXT without one,
 * CUDA_ERROR_CONTEXT_IS_DESTROYED for one destroyed (by another thread). */
static CUresult need_current(CUcontext *ctx, int *dev)
{
	CUresult r = (CUresult)fe_rt_init();
	if (r)
		return r;
	int destroyed;
	CUcontext c = fe_drv_ctx_current();
	int d = c ? dev_any(c, &destroyed) : -1;
	if (d < 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (destroyed)
		return CUDA_ERROR_CONTEXT_IS_DESTROYED;
	if (ctx)
		*ctx = c;
	if (dev)
		*dev = d;
	return CUDA_SUCCESS;
}

/* A context argument: NULL is the current one. */
static CUresult ctx_arg(CUcontext ctx, CUcontext *out, int *dev)
{
	if (!ctx)
		return need_current(out, dev);
	CUresult r = (CUresult)fe_rt_init();
	if (r)
		return r;
	int destroyed, d = dev_any(ctx, &destroyed);
	if (d < 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (destroyed)
		return CUDA_ERROR_CONTEXT_IS_DESTROYED;
	*out = ctx;
	*dev = d;
	return CUDA_SUCCESS;
}

static CUresult check_flags(unsigned flags)
{
	unsigned sched = flags & CU_CTX_SCHED_MASK;
	if ((flags & ~(unsigned)CU_CTX_FLAGS_MASK) || sched == 3 || sched > CU_CTX_SCHED_BLOCKING_SYNC)
		return CUDA_ERROR_INVALID_VALUE;
	/* Scheduling flags concern the waiting host thread (here it always waits on
	 * its socket); memops are synchronous to the host already; mapped pinned
	 * memory and local memory resizing are the device's defaults. A core dump
	 * would be written on the server. */
	if (flags & (CU_CTX_COREDUMP_ENABLE | CU_CTX_USER_COREDUMP_ENABLE)) {
		rg_log_once("frontend", "not supported", "context flag CU_CTX_COREDUMP_ENABLE");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	return CUDA_SUCCESS;
}

static CUresult device_arg(CUdevice dev)
{
	CUresult r = (CUresult)fe_rt_init();
	if (r)
		return r;
	return fe_rt_device(dev) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

/* ---- primary contexts */

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	CUresult r = device_arg(dev);
	if (r)
		return r;
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&lock);
	prim[dev].refs++;
	pthread_mutex_unlock(&lock);
	*pctx = fe_drv_ctx_of(dev);
	return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
	CUresult r = device_arg(dev);
	if (r)
		return r;
	pthread_mutex_lock(&lock);
	int gone = 0;
	if (!prim[dev].refs) {
		r = CUDA_ERROR_INVALID_CONTEXT;
	} else if (--prim[dev].refs == 0 && !fe_rt_device_used(dev)) {
		/* The context ends for those who kept state in it (their destructors
		 * run; the next retain is a new context with a new id). Its memory stays
		 * with the session: another context or the runtime layer may share it
		 * here, which a real primary context never does. */
		prim[dev].id = 0;
		gone = 1;
	}
	pthread_mutex_unlock(&lock);
	if (gone)
		ctx_gone(fe_drv_ctx_of(dev));
	return r;
}

CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
	CUresult r = device_arg(dev);
	if (r)
		return r;
	if (!flags || !active)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&lock);
	*flags = prim[dev].flags;
	*active = prim[dev].refs > 0 || fe_rt_device_used(dev);
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags)
{
	CUresult r = device_arg(dev);
	if (r || (r = check_flags(flags)))
		return r;
	pthread_mutex_lock(&lock);
	prim[dev].flags = flags;
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

/* As cudaDeviceReset of that device: a new session, everything of the old one
 * gone. The retain count stays. */
CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
	CUresult r = device_arg(dev);
	if (r)
		return r;
	ctx_gone(fe_drv_ctx_of(dev));
	pthread_mutex_lock(&lock);
	prim[dev].id = 0;
	r = FE_DRV(fe_rt_reset_device(dev));
	pthread_mutex_unlock(&lock);
	return r;
}

/* ---- the thread's context stack */

static CUresult ctx_create(CUcontext *pctx, unsigned flags, CUdevice dev)
{
	CUresult r = device_arg(dev);
	if (r)
		return r;
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = check_flags(flags)))
		return r;
	stack_materialize();
	if (!stack_room())
		return CUDA_ERROR_OUT_OF_MEMORY;
	ctx_rec *c = calloc(1, sizeof(*c));
	if (!c)
		return CUDA_ERROR_OUT_OF_MEMORY;
	c->dev = dev;
	c->flags = flags;
	c->id = atomic_fetch_add(&next_ctx_id, 1);
	pthread_mutex_lock(&lock);
	int err = fe_ptrmap_put(&created, c, c);
	pthread_mutex_unlock(&lock);
	if (err) {
		free(c);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	tls_stack[tls_depth++] = (CUcontext)c;
	stack_changed();
	*pctx = (CUcontext)c;
	return CUDA_SUCCESS;
}

CUresult cuCtxCreate(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags, CUdevice dev)
{
	if (params && (params->numExecAffinityParams || params->execAffinityParams || params->cigParams)) {
		rg_log_once("frontend", "not supported", "cuCtxCreate(execution affinity or CIG parameters)");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	return ctx_create(pctx, flags, dev);
}

CUresult fe_drv_ctx_create_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	return ctx_create(pctx, flags, dev);
}

CUresult fe_drv_ctx_create_v1(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	return ctx_create(pctx, flags, dev);
}

CUresult fe_drv_ctx_create_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams, unsigned int flags,
			      CUdevice dev)
{
	if (numParams < 0 || (numParams && !paramsArray))
		return CUDA_ERROR_INVALID_VALUE;
	if (numParams) {
		rg_log_once("frontend", "not supported", "cuCtxCreate_v3(execution affinity)");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	return ctx_create(pctx, flags, dev);
}

/* Only contexts cuCtxCreate made; what was made in one stays (it is the
 * device's session's). Threads that still have it current get
 * CUDA_ERROR_CONTEXT_IS_DESTROYED. */
CUresult cuCtxDestroy(CUcontext ctx)
{
	CUresult r = (CUresult)fe_rt_init();
	if (r)
		return r;
	if (!ctx)
		return CUDA_ERROR_INVALID_VALUE;
	ctx_rec *c = created_rec(ctx);
	pthread_mutex_lock(&lock);
	int ok = c && !c->destroyed;
	if (ok)
		c->destroyed = 1;
	pthread_mutex_unlock(&lock);
	if (!ok)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (tls_depth && tls_stack[tls_depth - 1] == ctx) {
		tls_depth--;
		stack_changed();
	}
	ctx_gone(ctx);
	return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent(CUcontext ctx)
{
	CUresult r = (CUresult)fe_rt_init();
	if (r)
		return r;
	if (!ctx)
		return CUDA_ERROR_INVALID_VALUE; /* as the driver answers (an H100, CUDA 13) */
	if (fe_drv_dev_of(ctx) < 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	stack_materialize();
	if (!stack_room())
		return CUDA_ERROR_OUT_OF_MEMORY;
	tls_stack[tls_depth++] = ctx;
	stack_changed();
	return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent(CUcontext *pctx)
{
	CUresult r = (CUresult)fe_rt_init();
	if (r)
		return r;
	fe_drv_ctx_current(); /* the top follows the runtime's device */
	stack_materialize();
	if (!tls_depth)
		return CUDA_ERROR_INVALID_CONTEXT;
	CUcontext top = tls_stack[--tls_depth];
	stack_changed();
	if (pctx)
		*pctx = top;
	return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx)
{
	CUresult r = (CUresult)fe_rt_init();
	if (r)
		return r;
	if (ctx && fe_drv_dev_of(ctx) < 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	stack_materialize();
	if (!ctx) { /* pops the top, if any */
		if (tls_depth)
			tls_depth--;
	} else if (tls_depth) {
		tls_stack[tls_depth - 1] = ctx;
	} else {
		if (!stack_room())
			return CUDA_ERROR_OUT_OF_MEMORY;
		tls_stack[tls_depth++] = ctx;
	}
	stack_changed();
	return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *pctx)
{
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult r = (CUresult)fe_rt_init();
	if (r)
		return r;
	*pctx = fe_drv_ctx_current();
	return CUDA_SUCCESS;
}

/* ---- peer access: the current context's to peerContext's device (rt_peer.c) */

CUresult cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags)
{
	int dev, peer;
	CUresult r = need_current(NULL, &dev);
	if (r)
		return r;
	if ((peer = fe_drv_dev_of(peerContext)) < 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	return FE_DRV(fe_peer_access(dev, peer, 1, Flags));
}

CUresult cuCtxDisablePeerAccess(CUcontext peerContext)
{
	int dev, peer;
	CUresult r = need_current(NULL, &dev);
	if (r)
		return r;
	if ((peer = fe_drv_dev_of(peerContext)) < 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	return FE_DRV(fe_peer_access(dev, peer, 0, 0));
}

/* ---- the current context's properties */

CUresult cuCtxGetDevice(CUdevice *device)
{
	int dev;
	CUresult r = need_current(NULL, &dev);
	if (r)
		return r;
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	*device = dev;
	return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
	CUcontext c;
	int dev;
	CUresult r = ctx_arg(ctx, &c, &dev);
	if (r)
		return r;
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	*device = dev;
	return CUDA_SUCCESS;
}

CUresult cuCtxGetFlags(unsigned int *flags)
{
	CUcontext c;
	int dev;
	CUresult r = need_current(&c, &dev);
	if (r)
		return r;
	if (!flags)
		return CUDA_ERROR_INVALID_VALUE;
	ctx_rec *rec = created_rec(c);
	pthread_mutex_lock(&lock);
	*flags = rec ? rec->flags : prim[dev].flags;
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

CUresult cuCtxSetFlags(unsigned int flags)
{
	CUcontext c;
	int dev;
	CUresult r = need_current(&c, &dev);
	if (r || (r = check_flags(flags)))
		return r;
	ctx_rec *rec = created_rec(c);
	pthread_mutex_lock(&lock);
	if (rec)
		rec->flags = flags;
	else
		prim[dev].flags = flags;
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

CUresult cuCtxGetId(CUcontext ctx, unsigned long long *ctxId)
{
	CUcontext c;
	int dev;
	CUresult r = ctx_arg(ctx, &c, &dev);
	if (r)
		return r;
	if (!ctxId)
		return CUDA_ERROR_INVALID_VALUE;
	*ctxId = fe_drv_ctx_id(c);
	return CUDA_SUCCESS;
}

/* Contexts made through the CUDA 3.2 interface (every one since). */
CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned int *version)
{
	CUcontext c;
	int dev;
	CUresult r = ctx_arg(ctx, &c, &dev);
	if (r)
		return r;
	if (!version)
		return CUDA_ERROR_INVALID_VALUE;
	*version = 3020;
	return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void)
{
	CUresult r = need_current(NULL, NULL);
	return r ? r : FE_DRV(cudaDeviceSynchronize());
}

CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
	CUcontext c;
	int dev;
	CUresult r = ctx_arg(ctx, &c, &dev);
	if (r)
		return r;
	int saved = fe_rt_current_device();
	fe_rt_set_current_device(dev);
	r = FE_DRV(cudaDeviceSynchronize());
	fe_rt_set_current_device(saved);
	return r;
}

/* Limits and the cache preference are the session's context's, on the
 * server; the runtime's and the driver's enums share their numbers. */
CUresult cuCtxSetLimit(CUlimit limit, size_t value)
{
	CUresult r = need_current(NULL, NULL);
	return r ? r : FE_DRV(cudaDeviceSetLimit((enum cudaLimit)limit, value));
}

CUresult cuCtxGetLimit(size_t *pvalue, CUlimit limit)
{
	CUresult r = need_current(NULL, NULL);
	if (r)
		return r;
	if (!pvalue)
		return CUDA_ERROR_INVALID_VALUE;
	return FE_DRV(cudaDeviceGetLimit(pvalue, (enum cudaLimit)limit));
}

CUresult cuCtxSetCacheConfig(CUfunc_cache config)
{
	CUresult r = need_current(NULL, NULL);
	return r ? r : FE_DRV(cudaDeviceSetCacheConfig((enum cudaFuncCache)config));
}

CUresult cuCtxGetCacheConfig(CUfunc_cache *pconfig)
{
	CUresult r = need_current(NULL, NULL);
	if (r)
		return r;
	if (!pconfig)
		return CUDA_ERROR_INVALID_VALUE;
	return FE_DRV(cudaDeviceGetCacheConfig((enum cudaFuncCache *)pconfig));
}

/* Shared memory banks have been four bytes wide since Maxwell, not
 * configurable: the driver answers so on those devices. */
CUresult cuCtxGetSharedMemConfig(CUsharedconfig *pConfig)
{
	CUresult r = need_current(NULL, NULL);
	if (r)
		return r;
	if (!pConfig)
		return CUDA_ERROR_INVALID_VALUE;
	*pConfig = CU_SHARED_MEM_CONFIG_FOUR_BYTE_BANK_SIZE;
	return CUDA_SUCCESS;
}

CUresult cuCtxSetSharedMemConfig(CUsharedconfig config)
{
	CUresult r = need_current(NULL, NULL);
	if (r)
		return r;
	return (unsigned)config > CU_SHARED_MEM_CONFIG_EIGHT_BYTE_BANK_SIZE ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

/* The unversioned symbols: their _v2 kept the ABI. */
extern __typeof__(cuDevicePrimaryCtxRelease) cuDevicePrimaryCtxRelease_v1 __asm__("cuDevicePrimaryCtxRelease")
	__attribute__((alias("cuDevicePrimaryCtxRelease_v2")));
extern __typeof__(cuDevicePrimaryCtxReset) cuDevicePrimaryCtxReset_v1 __asm__("cuDevicePrimaryCtxReset")
	__attribute__((alias("cuDevicePrimaryCtxReset_v2")));
extern __typeof__(cuDevicePrimaryCtxSetFlags) cuDevicePrimaryCtxSetFlags_v1 __asm__("cuDevicePrimaryCtxSetFlags")
	__attribute__((alias("cuDevicePrimaryCtxSetFlags_v2")));
extern __typeof__(cuCtxDestroy) cuCtxDestroy_v1 __asm__("cuCtxDestroy") __attribute__((alias("cuCtxDestroy_v2")));
extern __typeof__(cuCtxPushCurrent) cuCtxPushCurrent_v1 __asm__("cuCtxPushCurrent")
	__attribute__((alias("cuCtxPushCurrent_v2")));
extern __typeof__(cuCtxPopCurrent) cuCtxPopCurrent_v1 __asm__("cuCtxPopCurrent")
	__attribute__((alias("cuCtxPopCurrent_v2")));
