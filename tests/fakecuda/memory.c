/*
 * memory.c: device allocations, pinned host memory, pointer queries.
 *
 * Device memory is host memory: cuMemAlloc returns the address of a block of the
 * device arena (devmem.c, aligned to FK_ALIGN, apart from every host heap as a
 * GPU's memory is), so copies really move bytes and emulated kernels really
 * write them. Each context keeps its allocations in an array sorted by
 * base address; fk_range_ok() binary-searches it to decide whether a range lies
 * inside one allocation, which is what every copy, memset and emulated kernel checks.
 * Module globals are allocations too (kind FK_MEM_GLOBAL), valid as ranges but not
 * freeable with cuMemFree.
 *
 * Accounting: an allocation charges its size rounded up to FK_ALIGN to its device;
 * cuMemGetInfo reports free = total - charged, so a test can check that the backend
 * brought memory back to its baseline. Allocations are not zeroed (nor are a GPU's).
 *
 * Pinned host memory (cuMemHostAlloc, cuMemHostRegister) is recorded in one process-
 * wide list, so that it can be freed, unregistered, mapped and queried; it is not a
 * device range.
 */
#include "fake.h"

#include <stdlib.h>
#include <string.h>

#define FK_HOST_ALIGN 4096

typedef struct fk_host {
	uintptr_t base;
	size_t size;
	unsigned flags;
	int owned;             /* cuMemHostAlloc (1) or cuMemHostRegister (0) */
	fk_ctx *ctx;
} fk_host;

static fk_host *hosts;
static size_t nhosts, caphosts;
static uint64_t next_buffer_id = 1;

static size_t alloc_pos(const fk_ctx *c, uintptr_t p);
static fk_host *host_find(uintptr_t p);
static CUresult host_add(uintptr_t base, size_t size, unsigned flags, int owned, fk_ctx *c);

/* ---- the allocation table ---- */

/* Index of the first allocation whose base is > p. */
static size_t alloc_pos(const fk_ctx *c, uintptr_t p)
{
	size_t lo = 0, hi = c->nallocs;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (c->allocs[mid].base <= p)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

const fk_alloc *fk_mem_find(const fk_ctx *c, uintptr_t p)
{
	size_t i = alloc_pos(c, p);
	if (i == 0)
		return NULL;
	const fk_alloc *a = &c->allocs[i - 1];
	return p - a->base < a->size ? a : NULL;
}

int fk_range_ok(const fk_ctx *c, uintptr_t p, size_t len)
{
	if (len == 0)
		return 1;
	const fk_alloc *a = fk_mem_find(c, p);
	if (!a)
		return 0;
	if (len <= a->size - (p - a->base))
		return 1;
	len -= a->size - (p - a->base);
	for (size_t i = (size_t)(a - c->allocs) + 1; a->kind == FK_MEM_MAPPED && i < c->nallocs; i++) {
		const fk_alloc *nx = &c->allocs[i];
		if (nx->kind != FK_MEM_MAPPED || nx->base - a->base != a->size)
			return 0;
		if (len <= nx->size)
			return 1;
		len -= nx->size;
		a = nx;
	}
	return 0;
}

int fk_range2d_ok(const fk_ctx *c, uintptr_t p, size_t pitch, size_t width, size_t height)
{
	if (width == 0 || height == 0)
		return 1;
	if (height > 1 && pitch && (height - 1) > (SIZE_MAX - width) / pitch)
		return 0;
	return fk_range_ok(c, p, (height - 1) * pitch + width);
}

/* charge: what the device is charged (the allocation's rounded size, or for a
 * pool's the growth of its reserve). */
static CUresult mem_new(fk_ctx *c, size_t size, int kind, fk_pool *pool, uintptr_t *out)
{
	fk_dev *d = &fk_devs[c->dev];

	if (size == 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (size > SIZE_MAX - FK_ALIGN)
		return CUDA_ERROR_OUT_OF_MEMORY;
	size_t charged = (size + FK_ALIGN - 1) & ~(size_t)(FK_ALIGN - 1), charge = charged;
	if (pool) {
		if (pool->max_size && charged > pool->max_size - pool->used)
			return CUDA_ERROR_OUT_OF_MEMORY;
		size_t spare = pool->reserved - pool->used;
		charge = charged > spare ? charged - spare : 0;
	}
	if (charge > fk_dev_free(d))
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (c->nallocs == c->capallocs) {
		size_t cap = c->capallocs ? c->capallocs * 2 : 32;
		fk_alloc *a = realloc(c->allocs, cap * sizeof *a);
		if (!a)
			return CUDA_ERROR_OUT_OF_MEMORY;
		c->allocs = a;
		c->capallocs = cap;
	}
	uintptr_t base = fk_devmem_alloc(charged);
	if (!base)
		return CUDA_ERROR_OUT_OF_MEMORY;
	size_t i = alloc_pos(c, base);
	memmove(&c->allocs[i + 1], &c->allocs[i], (c->nallocs - i) * sizeof *c->allocs);
	c->allocs[i] = (fk_alloc){ base, size, charged, kind, next_buffer_id++, pool };
	c->nallocs++;
	fk_dev_charge(d, charge);
	if (pool) {
		pool->reserved += charge;
		pool->used += charged;
		pool->nallocs++;
		if (pool->used > pool->used_high)
			pool->used_high = pool->used;
		if (pool->reserved > pool->reserved_high)
			pool->reserved_high = pool->reserved;
	}
	*out = base;
	return CUDA_SUCCESS;
}

CUresult fk_mem_add_mapped(fk_ctx *c, uintptr_t base, size_t size)
{
	if (c->nallocs == c->capallocs) {
		size_t cap = c->capallocs ? c->capallocs * 2 : 32;
		fk_alloc *a = realloc(c->allocs, cap * sizeof *a);
		if (!a)
			return CUDA_ERROR_OUT_OF_MEMORY;
		c->allocs = a;
		c->capallocs = cap;
	}
	size_t i = alloc_pos(c, base);
	memmove(&c->allocs[i + 1], &c->allocs[i], (c->nallocs - i) * sizeof *c->allocs);
	c->allocs[i] = (fk_alloc){ base, size, 0, FK_MEM_MAPPED, next_buffer_id++, NULL };
	c->nallocs++;
	return CUDA_SUCCESS;
}

CUresult fk_mem_new(fk_ctx *c, size_t size, int kind, uintptr_t *out)
{
	return mem_new(c, size, kind, NULL, out);
}

CUresult fk_mem_new_pool(fk_ctx *c, size_t size, fk_pool *p, uintptr_t *out)
{
	return mem_new(c, size, FK_MEM_ASYNC, p, out);
}

static void release_at(fk_ctx *c, size_t i)
{
	fk_dev *d = &fk_devs[c->dev];
	fk_alloc a = c->allocs[i];

	memmove(&c->allocs[i], &c->allocs[i + 1], (c->nallocs - i - 1) * sizeof *c->allocs);
	c->nallocs--;
	if (a.kind == FK_MEM_MAPPED)
		return; /* the memory is the physical allocation's (vmm.c) */
	if (a.pool)
		fk_pool_put(a.pool, a.charged); /* into the pool's reserve */
	else
		fk_dev_uncharge(d, a.charged);
	fk_devmem_free(a.base, a.charged);
}

CUresult fk_mem_free(fk_ctx *c, uintptr_t p, unsigned kinds)
{
	size_t i = alloc_pos(c, p);
	if (i == 0 || c->allocs[i - 1].base != p || !(kinds & 1u << c->allocs[i - 1].kind))
		return CUDA_ERROR_INVALID_VALUE;
	release_at(c, i - 1);
	return CUDA_SUCCESS;
}

void fk_mem_free_all(fk_ctx *c)
{
	while (c->nallocs)
		release_at(c, c->nallocs - 1);
}

/* ---- device memory API ---- */

CUresult CUDAAPI cuMemAlloc(CUdeviceptr *dptr, size_t bytesize)
{
	fk_ctx *c;
	uintptr_t p = 0;
	CUresult rc = fk_begin(&c);

	if (rc == CUDA_SUCCESS && !dptr)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS)
		rc = fk_capture_unsafe_check();
	if (rc == CUDA_SUCCESS)
		rc = fk_mem_new(c, bytesize, FK_MEM_DEVICE, &p);
	if (rc == CUDA_SUCCESS)
		*dptr = p;
	return fk_end(rc, __func__, "%zu -> %#lx", bytesize, (unsigned long)p);
}

CUresult CUDAAPI cuMemAllocPitch(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                 size_t Height, unsigned int ElementSizeBytes)
{
	fk_ctx *c;
	uintptr_t p = 0;
	size_t pitch = 0;
	CUresult rc = fk_begin(&c);

	if (rc == CUDA_SUCCESS && (!dptr || !pPitch || !WidthInBytes || !Height ||
	                           (ElementSizeBytes != 4 && ElementSizeBytes != 8 &&
	                            ElementSizeBytes != 16)))
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS) {
		/* rows aligned like the texture pitch alignment of real devices */
		if (WidthInBytes > SIZE_MAX - 511)
			rc = CUDA_ERROR_OUT_OF_MEMORY;
		else
			pitch = (WidthInBytes + 511) & ~(size_t)511;
		if (rc == CUDA_SUCCESS && Height > SIZE_MAX / pitch)
			rc = CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (rc == CUDA_SUCCESS)
		rc = fk_mem_new(c, pitch * Height, FK_MEM_DEVICE, &p);
	if (rc == CUDA_SUCCESS) {
		*dptr = p;
		*pPitch = pitch;
	}
	return fk_end(rc, __func__, "%zu x %zu -> %#lx pitch %zu", WidthInBytes, Height,
	              (unsigned long)p, pitch);
}

CUresult CUDAAPI cuMemFree(CUdeviceptr dptr)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	if (rc == CUDA_SUCCESS)
		rc = fk_capture_unsafe_check();
	if (rc == CUDA_SUCCESS)
		rc = fk_mem_free(c, dptr, 1u << FK_MEM_DEVICE | 1u << FK_MEM_ASYNC);
	return fk_end(rc, __func__, "%#lx", (unsigned long)dptr);
}

CUresult CUDAAPI cuMemGetInfo(size_t *free, size_t *total)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	if (rc == CUDA_SUCCESS && (!free || !total))
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS) {
		*total = fk_devs[c->dev].total;
		*free = fk_dev_free(&fk_devs[c->dev]);
	}
	return fk_end(rc, __func__, NULL);
}

CUresult CUDAAPI cuMemGetAddressRange(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	const fk_alloc *a = rc == CUDA_SUCCESS ? fk_mem_find(c, dptr) : NULL;

	if (rc == CUDA_SUCCESS && !a)
		rc = CUDA_ERROR_NOT_FOUND;
	if (rc == CUDA_SUCCESS) {
		if (pbase)
			*pbase = a->base;
		if (psize)
			*psize = a->size;
	}
	return fk_end(rc, __func__, "%#lx", (unsigned long)dptr);
}

static CUresult alloc_async(fk_ctx *c, CUdeviceptr *dptr, size_t size, fk_pool *pool, CUstream hStream)
{
	fk_stream *s = fk_stream_get(c, hStream);
	uintptr_t p;
	CUresult rc;

	if (!dptr)
		return CUDA_ERROR_INVALID_VALUE;
	if (!s)
		return CUDA_ERROR_INVALID_HANDLE;
	if ((rc = fk_stream_legacy_check(c, hStream)) != CUDA_SUCCESS)
		return rc;
	if ((rc = fk_mem_new_pool(c, size, pool, &p)) != CUDA_SUCCESS)
		return rc;
	if (s->cap && (rc = fk_capture_mem_node(s, CU_GRAPH_NODE_TYPE_MEM_ALLOC, p, size)) != CUDA_SUCCESS) {
		fk_mem_free(c, p, 1u << FK_MEM_DEVICE | 1u << FK_MEM_ASYNC);
		return rc;
	}
	*dptr = p;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	if (rc == CUDA_SUCCESS)
		rc = alloc_async(c, dptr, bytesize, fk_devs[c->dev].cur_pool, hStream);
	return fk_end(rc, __func__, "%zu -> %#lx", bytesize,
	              rc == CUDA_SUCCESS ? (unsigned long)*dptr : 0ul);
}

CUresult CUDAAPI cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize,
                                         CUmemoryPool pool, CUstream hStream)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	fk_pool *p = rc == CUDA_SUCCESS ? fk_handle_get(FK_H(pool), FK_POOL, NULL) : NULL;
	if (rc == CUDA_SUCCESS && !p)
		rc = CUDA_ERROR_INVALID_HANDLE;
	else if (rc == CUDA_SUCCESS && p->dev != c->dev)
		rc = CUDA_ERROR_NOT_SUPPORTED; /* another device's pool: peer access is not emulated */
	if (rc == CUDA_SUCCESS)
		rc = alloc_async(c, dptr, bytesize, p, hStream);
	return fk_end(rc, __func__, "%zu -> %#lx", bytesize,
	              rc == CUDA_SUCCESS ? (unsigned long)*dptr : 0ul);
}

CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	fk_stream *s = rc == CUDA_SUCCESS ? fk_stream_get(c, hStream) : NULL;

	if (rc == CUDA_SUCCESS && !s)
		rc = CUDA_ERROR_INVALID_HANDLE;
	if (rc == CUDA_SUCCESS)
		rc = fk_stream_legacy_check(c, hStream);
	if (rc == CUDA_SUCCESS && s->cap)
		rc = fk_capture_mem_node(s, CU_GRAPH_NODE_TYPE_MEM_FREE, dptr, 0);
	if (rc == CUDA_SUCCESS)
		rc = fk_mem_free(c, dptr, 1u << FK_MEM_DEVICE | 1u << FK_MEM_ASYNC);
	return fk_end(rc, __func__, "%#lx", (unsigned long)dptr);
}

/* ---- pinned host memory ---- */

static fk_host *host_find(uintptr_t p)
{
	for (size_t i = 0; i < nhosts; i++)
		if (p - hosts[i].base < hosts[i].size)
			return &hosts[i];
	return NULL;
}

static CUresult host_add(uintptr_t base, size_t size, unsigned flags, int owned, fk_ctx *c)
{
	if (nhosts == caphosts) {
		size_t cap = caphosts ? caphosts * 2 : 16;
		fk_host *h = realloc(hosts, cap * sizeof *h);
		if (!h)
			return CUDA_ERROR_OUT_OF_MEMORY;
		hosts = h;
		caphosts = cap;
	}
	hosts[nhosts++] = (fk_host){ base, size, flags, owned, c };
	return CUDA_SUCCESS;
}

static void host_del(fk_host *h)
{
	size_t i = (size_t)(h - hosts);
	if (h->owned)
		free((void *)h->base);
	memmove(&hosts[i], &hosts[i + 1], (nhosts - i - 1) * sizeof *hosts);
	nhosts--;
}

void fk_host_release_ctx(fk_ctx *c)
{
	for (size_t i = nhosts; i-- > 0;)
		if (hosts[i].ctx == c)
			host_del(&hosts[i]);
}

CUresult CUDAAPI cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
	fk_ctx *c;
	void *mem = NULL;
	CUresult rc = fk_begin(&c);

	if (rc == CUDA_SUCCESS && (!pp || !bytesize ||
	                           (Flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE |
	                                                CU_MEMHOSTALLOC_DEVICEMAP |
	                                                CU_MEMHOSTALLOC_WRITECOMBINED))))
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS && posix_memalign(&mem, FK_HOST_ALIGN, bytesize) != 0)
		rc = CUDA_ERROR_OUT_OF_MEMORY;
	if (rc == CUDA_SUCCESS) {
		rc = host_add((uintptr_t)mem, bytesize, Flags, 1, c);
		if (rc != CUDA_SUCCESS)
			free(mem);
		else
			*pp = mem;
	}
	return fk_end(rc, __func__, "%zu, %#x -> %p", bytesize, Flags, mem);
}

CUresult CUDAAPI cuMemAllocHost(void **pp, size_t bytesize)
{
	fk_ctx *c;
	void *mem = NULL;
	CUresult rc = fk_begin(&c);

	if (rc == CUDA_SUCCESS && (!pp || !bytesize))
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS && posix_memalign(&mem, FK_HOST_ALIGN, bytesize) != 0)
		rc = CUDA_ERROR_OUT_OF_MEMORY;
	if (rc == CUDA_SUCCESS) {
		rc = host_add((uintptr_t)mem, bytesize, 0, 1, c);
		if (rc != CUDA_SUCCESS)
			free(mem);
		else
			*pp = mem;
	}
	return fk_end(rc, __func__, "%zu -> %p", bytesize, mem);
}

CUresult CUDAAPI cuMemFreeHost(void *p)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	fk_host *h = rc == CUDA_SUCCESS ? host_find((uintptr_t)p) : NULL;

	if (rc == CUDA_SUCCESS && (!h || !h->owned || h->base != (uintptr_t)p))
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS)
		host_del(h);
	return fk_end(rc, __func__, "%p", p);
}

CUresult CUDAAPI cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	uintptr_t b = (uintptr_t)p;

	if (rc == CUDA_SUCCESS &&
	    (!p || !bytesize || b > UINTPTR_MAX - bytesize ||
	     (Flags & ~(unsigned)(CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
	                          CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY))))
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS && (Flags & CU_MEMHOSTREGISTER_IOMEMORY))
		rc = CUDA_ERROR_NOT_SUPPORTED;
	if (rc == CUDA_SUCCESS) {
		for (size_t i = 0; i < nhosts; i++)
			if (b < hosts[i].base + hosts[i].size && hosts[i].base < b + bytesize)
				rc = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
	}
	if (rc == CUDA_SUCCESS)
		rc = host_add(b, bytesize, Flags, 0, c);
	return fk_end(rc, __func__, "%p, %zu, %#x", p, bytesize, Flags);
}

CUresult CUDAAPI cuMemHostUnregister(void *p)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	fk_host *h = rc == CUDA_SUCCESS ? host_find((uintptr_t)p) : NULL;

	if (rc == CUDA_SUCCESS && (!h || h->owned || h->base != (uintptr_t)p))
		rc = CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
	if (rc == CUDA_SUCCESS)
		host_del(h);
	return fk_end(rc, __func__, "%p", p);
}

CUresult CUDAAPI cuMemHostGetDevicePointer(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
	/* Unified addressing: pinned memory is mapped at its host address. */
	fk_ctx *c;
	CUresult rc = fk_begin(&c);

	if (rc == CUDA_SUCCESS && (!pdptr || Flags != 0 || !host_find((uintptr_t)p)))
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS)
		*pdptr = (CUdeviceptr)(uintptr_t)p;
	return fk_end(rc, __func__, "%p", p);
}

CUresult CUDAAPI cuMemHostGetFlags(unsigned int *pFlags, void *p)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	fk_host *h = rc == CUDA_SUCCESS ? host_find((uintptr_t)p) : NULL;

	if (rc == CUDA_SUCCESS && (!pFlags || !h || !h->owned))
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS)
		*pFlags = h->flags;
	return fk_end(rc, __func__, "%p", p);
}

/* ---- pointer attributes ---- */

typedef struct ptr_info {
	int type;              /* 0 unknown, CU_MEMORYTYPE_DEVICE or _HOST */
	fk_ctx *ctx;
	uintptr_t base;
	size_t size;
	uint64_t buffer_id;
	fk_pool *pool;         /* stream-ordered allocations */
} ptr_info;

/* Looks p up in every context (unified addressing) and in the pinned host list. */
static void ptr_lookup(uintptr_t p, ptr_info *pi)
{
	uint64_t *ids;
	size_t n = fk_handle_list(FK_CTX, NULL, &ids);

	memset(pi, 0, sizeof *pi);
	for (size_t i = 0; i < n && !pi->type; i++) {
		fk_ctx *c = fk_handle_get(ids[i], FK_CTX, NULL);
		const fk_alloc *a = c ? fk_mem_find(c, p) : NULL;
		if (a)
			*pi = (ptr_info){ CU_MEMORYTYPE_DEVICE, c, a->base, a->size, a->buffer_id, a->pool };
	}
	free(ids);
	if (!pi->type) {
		fk_host *h = host_find(p);
		if (h)
			*pi = (ptr_info){ CU_MEMORYTYPE_HOST, h->ctx, h->base, h->size, 0, NULL };
	}
}

static CUresult ptr_attr(const ptr_info *pi, CUpointer_attribute attr, void *data, uintptr_t p)
{
	int dev = pi->type == CU_MEMORYTYPE_DEVICE;

	switch (attr) {
	case CU_POINTER_ATTRIBUTE_CONTEXT:
		*(CUcontext *)data = (CUcontext)(uintptr_t)(pi->ctx ? pi->ctx->id : 0);
		break;
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
		*(unsigned *)data = (unsigned)pi->type;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
		*(CUdeviceptr *)data = pi->type ? p : 0;
		break;
	case CU_POINTER_ATTRIBUTE_HOST_POINTER:
		if (dev)
			return CUDA_ERROR_INVALID_VALUE;
		*(void **)data = pi->type ? (void *)p : NULL;
		break;
	case CU_POINTER_ATTRIBUTE_BUFFER_ID:
	case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
		*(unsigned long long *)data = pi->buffer_id;
		break;
	case CU_POINTER_ATTRIBUTE_IS_MANAGED:
	case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
	case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
		*(unsigned *)data = 0;
		break;
	case CU_POINTER_ATTRIBUTE_MAPPED:
		*(unsigned *)data = pi->type != 0;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
		*(int *)data = pi->ctx ? pi->ctx->dev : -2;
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
	case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
		*(void **)data = (void *)pi->base;
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
	case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
		*(size_t *)data = pi->size;
		break;
	case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
		*(unsigned long long *)data = 0;
		break;
	case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
		*(unsigned long long *)data = pi->type ? CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE
		                                       : CU_POINTER_ATTRIBUTE_ACCESS_FLAG_NONE;
		break;
	case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
		*(CUmemoryPool *)data = pi->pool ? (CUmemoryPool)(uintptr_t)pi->pool->id : NULL;
		break;
	case CU_POINTER_ATTRIBUTE_P2P_TOKENS:
	case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
		return CUDA_ERROR_NOT_SUPPORTED;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
	ptr_info pi;
	CUresult rc = fk_begin_init();

	if (rc == CUDA_SUCCESS && !data)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS) {
		ptr_lookup(ptr, &pi);
		rc = pi.type ? ptr_attr(&pi, attribute, data, ptr) : CUDA_ERROR_INVALID_VALUE;
	}
	return fk_end(rc, __func__, "%d, %#lx", (int)attribute, (unsigned long)ptr);
}

CUresult CUDAAPI cuPointerGetAttributes(unsigned int numAttributes,
                                        CUpointer_attribute *attributes, void **data,
                                        CUdeviceptr ptr)
{
	/* Unlike the singular form, an unknown pointer is not an error here: its
	 * attributes read as zero (memory type 0, "unregistered"). */
	ptr_info pi;
	CUresult rc = fk_begin_init();

	if (rc == CUDA_SUCCESS && (!attributes || !data))
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS) {
		ptr_lookup(ptr, &pi);
		for (unsigned i = 0; i < numAttributes && rc == CUDA_SUCCESS; i++) {
			if (!data[i])
				continue;
			if (attributes[i] == CU_POINTER_ATTRIBUTE_HOST_POINTER &&
			    pi.type == CU_MEMORYTYPE_DEVICE)
				*(void **)data[i] = NULL;
			else
				rc = ptr_attr(&pi, attributes[i], data[i], ptr);
		}
	}
	return fk_end(rc, __func__, "%u, %#lx", numAttributes, (unsigned long)ptr);
}
