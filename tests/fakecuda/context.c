/*
 * context.c: contexts, the per-thread context stack, primary contexts, limits.
 *
 * Each context is separate: its allocations, streams, events, modules, functions,
 * graphs and graph execs belong to it, handles of one context are unknown in another
 * (CUDA_ERROR_INVALID_HANDLE), and cuCtxDestroy frees everything it owns.
 *
 * A fault in an emulated kernel (rgtest_fault, or a bad pointer handed to an emulated
 * kernel) makes CUDA_ERROR_ILLEGAL_ADDRESS the context's sticky error: as on a GPU,
 * every later call on that context returns it, until the context is destroyed. The
 * calls that manage contexts themselves (create, destroy, set/get current, push/pop,
 * primary context release/reset, get device) still work.
 */
#include "fake.h"

#include <stdlib.h>
#include <string.h>

#define FK_CTX_FLAGS_ALL 0xFFu

static const size_t default_limits[CU_LIMIT_MAX] = {
	[CU_LIMIT_STACK_SIZE] = 1024,
	[CU_LIMIT_PRINTF_FIFO_SIZE] = 1048576,
	[CU_LIMIT_MALLOC_HEAP_SIZE] = 8388608,
	[CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH] = 2,
	[CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT] = 2048,
	[CU_LIMIT_MAX_L2_FETCH_GRANULARITY] = 64,
	[CU_LIMIT_PERSISTING_L2_CACHE_SIZE] = 0,
};

static int flags_ok(unsigned flags)
{
	unsigned sched = flags & CU_CTX_SCHED_MASK;
	return !(flags & ~FK_CTX_FLAGS_ALL) && sched != 3 && sched < 5;
}

static fk_ctx *ctx_new(int dev, unsigned flags, int primary)
{
	fk_ctx *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	c->id = fk_handle_new(FK_CTX, c, NULL);
	if (!c->id) {
		free(c);
		return NULL;
	}
	c->dev = dev;
	c->flags = flags;
	c->primary = primary;
	c->sticky = CUDA_SUCCESS;
	c->null_stream.ctx = c;
	memcpy(c->limits, default_limits, sizeof c->limits);
	c->cache = CU_FUNC_CACHE_PREFER_NONE;
	return c;
}

static void destroy_kind(fk_ctx *c, int kind)
{
	uint64_t *ids;
	size_t n = fk_handle_list(kind, c, &ids);

	for (size_t i = 0; i < n; i++) {
		void *o = fk_handle_get(ids[i], kind, c);
		if (!o)
			continue; /* went with an object destroyed earlier in this loop */
		switch (kind) {
		case FK_STREAM: fk_stream_destroy(o); break;
		case FK_EVENT: fk_event_destroy(o); break;
		case FK_GRAPH_EXEC: fk_exec_destroy(o); break;
		case FK_GRAPH: fk_graph_destroy(o); break;
		case FK_MODULE: fk_module_destroy(o); break;
		}
	}
	free(ids);
}

void fk_ctx_destroy(fk_ctx *c)
{
	/* Streams first: a capturing stream owns its capture's graph. */
	destroy_kind(c, FK_STREAM);
	destroy_kind(c, FK_EVENT);
	destroy_kind(c, FK_GRAPH_EXEC);
	destroy_kind(c, FK_GRAPH);
	destroy_kind(c, FK_MODULE);
	fk_array_free_all(c);
	fk_mem_free_all(c);
	fk_pools_sync(c->dev);
	fk_printf_flush(c);
	fk_host_release_ctx(c);
	if (c->primary && fk_devs[c->dev].primary == c) {
		fk_devs[c->dev].primary = NULL;
		fk_devs[c->dev].primary_refs = 0;
	}
	fk_handle_del(c->id);
	free(c->allocs);
	free(c);
}

CUresult CUDAAPI cuCtxCreate(CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
                             unsigned int flags, CUdevice dev)
{
	CUresult rc = fk_begin_init();
	fk_ctx *c = NULL;

	if (rc == CUDA_SUCCESS && (!pctx || !flags_ok(flags)))
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS && (dev < 0 || dev >= fk_ndev))
		rc = CUDA_ERROR_INVALID_DEVICE;
	else if (rc == CUDA_SUCCESS && ctxCreateParams &&
	         (ctxCreateParams->numExecAffinityParams || ctxCreateParams->cigParams))
		rc = CUDA_ERROR_NOT_SUPPORTED; /* execution affinity, CIG */
	if (rc == CUDA_SUCCESS) {
		c = ctx_new(dev, flags, 0);
		if (!c) {
			rc = CUDA_ERROR_OUT_OF_MEMORY;
		} else {
			fk_tls_push(c->id);
			*pctx = (CUcontext)(uintptr_t)c->id;
		}
	}
	return fk_end(rc, __func__, "flags=%#x, dev=%d -> %#llx", flags, dev,
	              c ? (unsigned long long)c->id : 0ull);
}

CUresult CUDAAPI cuCtxDestroy(CUcontext ctx)
{
	CUresult rc = fk_begin_init();
	fk_ctx *c = rc == CUDA_SUCCESS ? fk_handle_get(FK_H(ctx), FK_CTX, NULL) : NULL;

	if (rc == CUDA_SUCCESS && (!c || c->primary))
		rc = CUDA_ERROR_INVALID_CONTEXT;
	if (rc == CUDA_SUCCESS) {
		if (fk_tls_top() == c->id)
			fk_tls_pop();
		fk_ctx_destroy(c);
	}
	return fk_end(rc, __func__, "%#llx", (unsigned long long)FK_H(ctx));
}

CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx)
{
	CUresult rc = fk_begin_init();
	if (rc == CUDA_SUCCESS) {
		if (!ctx)
			fk_tls_pop();
		else if (!fk_handle_get(FK_H(ctx), FK_CTX, NULL))
			rc = CUDA_ERROR_INVALID_CONTEXT;
		else
			fk_tls_set(FK_H(ctx));
	}
	return fk_end(rc, __func__, "%#llx", (unsigned long long)FK_H(ctx));
}

CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pctx)
{
	CUresult rc = fk_begin_init();
	if (rc == CUDA_SUCCESS && !pctx)
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS)
		*pctx = (CUcontext)(uintptr_t)fk_tls_top();
	return fk_end(rc, __func__, NULL);
}

CUresult CUDAAPI cuCtxPushCurrent(CUcontext ctx)
{
	CUresult rc = fk_begin_init();
	if (rc == CUDA_SUCCESS && !fk_handle_get(FK_H(ctx), FK_CTX, NULL))
		rc = CUDA_ERROR_INVALID_CONTEXT;
	else if (rc == CUDA_SUCCESS)
		fk_tls_push(FK_H(ctx));
	return fk_end(rc, __func__, "%#llx", (unsigned long long)FK_H(ctx));
}

CUresult CUDAAPI cuCtxPopCurrent(CUcontext *pctx)
{
	CUresult rc = fk_begin_init();
	if (rc == CUDA_SUCCESS && !fk_tls_top())
		rc = CUDA_ERROR_INVALID_CONTEXT;
	if (rc == CUDA_SUCCESS) {
		uint64_t id = fk_tls_pop();
		if (pctx)
			*pctx = (CUcontext)(uintptr_t)id;
	}
	return fk_end(rc, __func__, NULL);
}

CUresult CUDAAPI cuCtxSynchronize(void)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);

	/* Streams run eagerly, so there is never anything to wait for; but a capture in
	 * progress forbids synchronizing the whole context, and is invalidated. */
	if (rc == CUDA_SUCCESS) {
		for (fk_capture *cap = fk_captures; cap; cap = cap->next) {
			if (cap->origin->ctx == c && !cap->invalidated) {
				cap->invalidated = 1;
				rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
			}
		}
	}
	if (rc == CUDA_SUCCESS) {
		fk_pools_sync(c->dev);
		fk_printf_flush(c);
	}
	return fk_end(rc, __func__, NULL);
}

CUresult CUDAAPI cuCtxGetDevice(CUdevice *device)
{
	fk_ctx *c;
	CUresult rc = fk_begin_any(&c);
	if (rc == CUDA_SUCCESS && !device)
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS)
		*device = c->dev;
	return fk_end(rc, __func__, NULL);
}

CUresult CUDAAPI cuCtxGetFlags(unsigned int *flags)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	if (rc == CUDA_SUCCESS && !flags)
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS)
		*flags = c->flags;
	return fk_end(rc, __func__, NULL);
}

CUresult CUDAAPI cuCtxSetFlags(unsigned int flags)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	if (rc == CUDA_SUCCESS && !flags_ok(flags))
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS)
		c->flags = flags;
	return fk_end(rc, __func__, "%#x", flags);
}

CUresult CUDAAPI cuCtxGetId(CUcontext ctx, unsigned long long *ctxId)
{
	fk_ctx *c = NULL;
	CUresult rc = fk_begin_init();

	if (rc == CUDA_SUCCESS) {
		c = ctx ? fk_handle_get(FK_H(ctx), FK_CTX, NULL) : fk_current();
		if (!c)
			rc = CUDA_ERROR_INVALID_CONTEXT;
		else if (!ctxId)
			rc = CUDA_ERROR_INVALID_VALUE;
		else
			*ctxId = (c->id & 0x00FFFFFFFFFFFFFFull) >> 8; /* the serial */
	}
	return fk_end(rc, __func__, NULL);
}

CUresult CUDAAPI cuCtxGetLimit(size_t *pvalue, CUlimit limit)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	if (rc == CUDA_SUCCESS && (!pvalue || (unsigned)limit >= CU_LIMIT_MAX))
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS)
		*pvalue = c->limits[limit];
	return fk_end(rc, __func__, "%d", (int)limit);
}

CUresult CUDAAPI cuCtxSetLimit(CUlimit limit, size_t value)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);

	if (rc == CUDA_SUCCESS) {
		switch (limit) {
		case CU_LIMIT_STACK_SIZE:
		case CU_LIMIT_PRINTF_FIFO_SIZE:
		case CU_LIMIT_MALLOC_HEAP_SIZE:
		case CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH:
		case CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT:
			c->limits[limit] = value;
			break;
		case CU_LIMIT_MAX_L2_FETCH_GRANULARITY: /* a hint, 0..128 */
			c->limits[limit] = value > 128 ? 128 : value;
			break;
		case CU_LIMIT_PERSISTING_L2_CACHE_SIZE:
			c->limits[limit] = value > 34603008 ? 34603008 : value;
			break;
		case CU_LIMIT_SHMEM_SIZE:
		case CU_LIMIT_CIG_ENABLED:
		case CU_LIMIT_CIG_SHMEM_FALLBACK_ENABLED:
			rc = CUDA_ERROR_NOT_SUPPORTED;
			break;
		default:
			rc = CUDA_ERROR_INVALID_VALUE;
		}
	}
	return fk_end(rc, __func__, "%d, %zu", (int)limit, value);
}

CUresult CUDAAPI cuCtxGetCacheConfig(CUfunc_cache *pconfig)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	if (rc == CUDA_SUCCESS && !pconfig)
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS)
		*pconfig = c->cache;
	return fk_end(rc, __func__, NULL);
}

CUresult CUDAAPI cuCtxSetCacheConfig(CUfunc_cache config)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	if (rc == CUDA_SUCCESS && (unsigned)config > CU_FUNC_CACHE_PREFER_EQUAL)
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS)
		c->cache = config;
	return fk_end(rc, __func__, "%d", (int)config);
}

CUresult CUDAAPI cuCtxGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	if (rc == CUDA_SUCCESS) {
		if (leastPriority)
			*leastPriority = FK_STREAM_PRIO_LEAST;
		if (greatestPriority)
			*greatestPriority = FK_STREAM_PRIO_GREATEST;
	}
	return fk_end(rc, __func__, NULL);
}

/* ---- primary contexts ---- */

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	CUresult rc = fk_begin_init();

	if (rc == CUDA_SUCCESS && !pctx)
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS && (dev < 0 || dev >= fk_ndev))
		rc = CUDA_ERROR_INVALID_DEVICE;
	if (rc == CUDA_SUCCESS) {
		fk_dev *d = &fk_devs[dev];
		if (!d->primary)
			d->primary = ctx_new(dev, d->primary_flags, 1);
		if (!d->primary) {
			rc = CUDA_ERROR_OUT_OF_MEMORY;
		} else {
			d->primary_refs++;
			*pctx = (CUcontext)(uintptr_t)d->primary->id;
		}
	}
	return fk_end(rc, __func__, "%d", dev);
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev)
{
	CUresult rc = fk_begin_init();

	if (rc == CUDA_SUCCESS && (dev < 0 || dev >= fk_ndev))
		rc = CUDA_ERROR_INVALID_DEVICE;
	else if (rc == CUDA_SUCCESS && !fk_devs[dev].primary_refs)
		rc = CUDA_ERROR_INVALID_CONTEXT;
	else if (rc == CUDA_SUCCESS && --fk_devs[dev].primary_refs == 0)
		fk_ctx_destroy(fk_devs[dev].primary);
	return fk_end(rc, __func__, "%d", dev);
}

CUresult CUDAAPI cuDevicePrimaryCtxReset(CUdevice dev)
{
	CUresult rc = fk_begin_init();

	if (rc == CUDA_SUCCESS && (dev < 0 || dev >= fk_ndev))
		rc = CUDA_ERROR_INVALID_DEVICE;
	else if (rc == CUDA_SUCCESS && fk_devs[dev].primary)
		fk_ctx_destroy(fk_devs[dev].primary);
	return fk_end(rc, __func__, "%d", dev);
}

CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
	CUresult rc = fk_begin_init();

	if (rc == CUDA_SUCCESS && (!flags || !active))
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS && (dev < 0 || dev >= fk_ndev))
		rc = CUDA_ERROR_INVALID_DEVICE;
	if (rc == CUDA_SUCCESS) {
		*flags = fk_devs[dev].primary_flags;
		*active = fk_devs[dev].primary != NULL;
	}
	return fk_end(rc, __func__, "%d", dev);
}

CUresult CUDAAPI cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags)
{
	CUresult rc = fk_begin_init();

	if (rc == CUDA_SUCCESS && !flags_ok(flags))
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS && (dev < 0 || dev >= fk_ndev))
		rc = CUDA_ERROR_INVALID_DEVICE;
	if (rc == CUDA_SUCCESS) {
		fk_devs[dev].primary_flags = flags;
		if (fk_devs[dev].primary)
			fk_devs[dev].primary->flags = flags;
	}
	return fk_end(rc, __func__, "%d, %#x", dev, flags);
}
