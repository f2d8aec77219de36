/*
 * vmm.c: virtual memory management (cuMemAddressReserve, cuMemCreate, cuMemMap,
 * ...), emulated with the host's own virtual memory.
 *
 *  - A reservation is an mmap'd PROT_NONE region (aligned to the granularity,
 *    2 MiB), so its addresses are stable and touching an unmapped part faults
 *    as it would on a GPU.
 *  - A physical allocation (cuMemCreate) is a memfd of its size, charged to its
 *    device like cuMemAlloc's memory; its handle is an id from a counter.
 *  - cuMemMap maps the memfd at the address with MAP_FIXED and records the range
 *    as an allocation of kind FK_MEM_MAPPED of the current context (memory.c):
 *    copies, memsets and emulated kernels accept it, and ranges mapped back to
 *    back as one. cuMemUnmap maps PROT_NONE there again.
 *  - The memory goes (memfd closed, device uncharged) once its handle is
 *    released as many times as it was created and retained and nothing maps it.
 * Only pinned device memory without export handle types (others answer
 * CUDA_ERROR_NOT_SUPPORTED); access flags are recorded, not enforced.
 */
#define _GNU_SOURCE
#include "fake.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define FK_VMM_GRAN ((size_t)2 << 20)
#define FK_VMM_HANDLE_BASE 0x7000000000000000ull /* handles look like nothing else */

typedef struct fk_phys {
	uint64_t id;
	int fd, dev;
	size_t size;
	CUmemAllocationProp prop;
	unsigned refs, maps;
	struct fk_phys *next;
} fk_phys;

typedef struct fk_vmap {
	uintptr_t base;
	size_t size;
	fk_phys *phys;
	fk_ctx *ctx;
	unsigned long long access;
	struct fk_vmap *next;
} fk_vmap;

typedef struct fk_resv {
	uintptr_t base;
	size_t size;
	struct fk_resv *next;
} fk_resv;

static fk_phys *physs;
static fk_vmap *vmaps;
static fk_resv *resvs;
static uint64_t next_handle = 1;

static fk_phys *phys_get(CUmemGenericAllocationHandle h)
{
	for (fk_phys *p = physs; p; p = p->next)
		if (p->id == h && p->refs)
			return p;
	return NULL;
}

/* Gone once released and unmapped. */
static void phys_put(fk_phys *p)
{
	if (p->refs || p->maps)
		return;
	for (fk_phys **pp = &physs; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	fk_dev_uncharge(&fk_devs[p->dev], p->size);
	close(p->fd);
	free(p);
}

static fk_vmap *vmap_at(uintptr_t a)
{
	for (fk_vmap *m = vmaps; m; m = m->next)
		if (a - m->base < m->size)
			return m;
	return NULL;
}

/* [a, a + n) is covered by mappings. */
static int vmapped(uintptr_t a, size_t n)
{
	if (n == 0 || n - 1 > UINTPTR_MAX - a)
		return 0;
	for (uintptr_t end = a + n; a < end;) {
		fk_vmap *m = vmap_at(a);
		if (!m)
			return 0;
		a = m->base + m->size;
	}
	return 1;
}

static CUresult check_prop(const CUmemAllocationProp *p)
{
	if (!p || p->type != CU_MEM_ALLOCATION_TYPE_PINNED || p->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
	    p->location.id < 0 || p->location.id >= fk_ndev)
		return CUDA_ERROR_INVALID_VALUE;
	if (p->requestedHandleTypes != CU_MEM_HANDLE_TYPE_NONE)
		return CUDA_ERROR_NOT_SUPPORTED;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                               CUmemAllocationGranularity_flags option)
{
	CUresult rc = fk_begin_init();
	if (rc == CUDA_SUCCESS && (!granularity || (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
	                                            option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)))
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS)
		rc = check_prop(prop);
	if (rc == CUDA_SUCCESS)
		*granularity = FK_VMM_GRAN;
	return fk_end(rc, __func__, "%d", (int)option);
}

CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                     unsigned long long flags)
{
	fk_ctx *c;
	uintptr_t base = 0;
	CUresult rc = fk_begin(&c);
	(void)addr; /* a hint: the host's mmap places the region */

	if (alignment == 0)
		alignment = FK_VMM_GRAN;
	if (rc == CUDA_SUCCESS && (!ptr || size == 0 || size % FK_VMM_GRAN || flags ||
	                           (alignment & (alignment - 1)) || alignment % FK_VMM_GRAN ||
	                           size > SIZE_MAX - alignment))
		rc = CUDA_ERROR_INVALID_VALUE;
	fk_resv *r = rc == CUDA_SUCCESS ? malloc(sizeof *r) : NULL;
	if (rc == CUDA_SUCCESS && !r)
		rc = CUDA_ERROR_OUT_OF_MEMORY;
	if (rc == CUDA_SUCCESS) {
		void *m = mmap(NULL, size + alignment, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (m == MAP_FAILED) {
			free(r);
			rc = CUDA_ERROR_OUT_OF_MEMORY;
		} else {
			uintptr_t raw = (uintptr_t)m;
			base = (raw + alignment - 1) & ~(uintptr_t)(alignment - 1);
			if (base > raw)
				munmap(m, base - raw);
			if (raw + size + alignment > base + size)
				munmap((void *)(base + size), raw + size + alignment - (base + size));
			*r = (fk_resv){ base, size, resvs };
			resvs = r;
			*ptr = base;
		}
	}
	return fk_end(rc, __func__, "%zu -> %#lx", size, (unsigned long)base);
}

CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	fk_resv **pp = &resvs;

	while (rc == CUDA_SUCCESS && *pp && ((*pp)->base != ptr || (*pp)->size != size))
		pp = &(*pp)->next;
	if (rc == CUDA_SUCCESS && !*pp)
		rc = CUDA_ERROR_INVALID_VALUE;
	for (fk_vmap *m = vmaps; rc == CUDA_SUCCESS && m; m = m->next)
		if (m->base - ptr < size)
			rc = CUDA_ERROR_INVALID_VALUE; /* still mapped */
	if (rc == CUDA_SUCCESS) {
		fk_resv *r = *pp;
		*pp = r->next;
		munmap((void *)r->base, r->size);
		free(r);
	}
	return fk_end(rc, __func__, "%#lx %zu", (unsigned long)ptr, size);
}

CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                             unsigned long long flags)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	fk_phys *p = NULL;

	if (rc == CUDA_SUCCESS && (!handle || size == 0 || size % FK_VMM_GRAN || flags))
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS)
		rc = check_prop(prop);
	if (rc == CUDA_SUCCESS && size > fk_dev_free(&fk_devs[prop->location.id]))
		rc = CUDA_ERROR_OUT_OF_MEMORY;
	if (rc == CUDA_SUCCESS && !(p = calloc(1, sizeof *p)))
		rc = CUDA_ERROR_OUT_OF_MEMORY;
	if (rc == CUDA_SUCCESS) {
		p->fd = memfd_create("fakecuda-vmm", MFD_CLOEXEC);
		if (p->fd < 0 || ftruncate(p->fd, (off_t)size) != 0) {
			if (p->fd >= 0)
				close(p->fd);
			free(p);
			rc = CUDA_ERROR_OUT_OF_MEMORY;
		}
	}
	if (rc == CUDA_SUCCESS) {
		p->id = FK_VMM_HANDLE_BASE + next_handle++;
		p->dev = prop->location.id;
		p->size = size;
		p->prop = *prop;
		p->refs = 1;
		p->next = physs;
		physs = p;
		fk_dev_charge(&fk_devs[p->dev], size);
		*handle = p->id;
	}
	return fk_end(rc, __func__, "%zu -> %#llx", size, p && rc == CUDA_SUCCESS ? (unsigned long long)p->id : 0ull);
}

CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	fk_phys *p = rc == CUDA_SUCCESS ? phys_get(handle) : NULL;

	if (rc == CUDA_SUCCESS && !p)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS) {
		p->refs--;
		phys_put(p);
	}
	return fk_end(rc, __func__, "%#llx", (unsigned long long)handle);
}

CUresult CUDAAPI cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop, CUmemGenericAllocationHandle handle)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	fk_phys *p = rc == CUDA_SUCCESS ? phys_get(handle) : NULL;

	if (rc == CUDA_SUCCESS && (!prop || !p))
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS)
		*prop = p->prop;
	return fk_end(rc, __func__, "%#llx", (unsigned long long)handle);
}

CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                          unsigned long long flags)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	fk_phys *p = rc == CUDA_SUCCESS ? phys_get(handle) : NULL;
	fk_vmap *m = NULL;
	int inside = 0;

	if (rc == CUDA_SUCCESS && (!p || flags || size == 0 || ptr % FK_VMM_GRAN || size % FK_VMM_GRAN ||
	                           offset % FK_VMM_GRAN || offset > p->size || size > p->size - offset))
		rc = CUDA_ERROR_INVALID_VALUE;
	for (fk_resv *r = resvs; rc == CUDA_SUCCESS && r; r = r->next)
		inside |= ptr - r->base < r->size && size <= r->size - (ptr - r->base);
	if (rc == CUDA_SUCCESS && !inside)
		rc = CUDA_ERROR_INVALID_VALUE;
	for (fk_vmap *o = vmaps; rc == CUDA_SUCCESS && o; o = o->next)
		if (o->base - ptr < size || ptr - o->base < o->size)
			rc = CUDA_ERROR_INVALID_VALUE; /* already mapped */
	if (rc == CUDA_SUCCESS && !(m = calloc(1, sizeof *m)))
		rc = CUDA_ERROR_OUT_OF_MEMORY;
	if (rc == CUDA_SUCCESS && mmap((void *)ptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, p->fd,
	                               (off_t)offset) == MAP_FAILED) {
		free(m);
		rc = CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (rc == CUDA_SUCCESS && (rc = fk_mem_add_mapped(c, ptr, size)) != CUDA_SUCCESS) {
		mmap((void *)ptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
		free(m);
	}
	if (rc == CUDA_SUCCESS) {
		*m = (fk_vmap){ ptr, size, p, c, 0, vmaps };
		vmaps = m;
		p->maps++;
	}
	return fk_end(rc, __func__, "%#lx %zu %#llx", (unsigned long)ptr, size, (unsigned long long)handle);
}

CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);

	/* whole mappings, from the first one's start to the last one's end */
	if (rc == CUDA_SUCCESS && (!vmapped(ptr, size) || vmap_at(ptr)->base != ptr ||
	                           vmap_at(ptr + size - 1)->base + vmap_at(ptr + size - 1)->size != ptr + size))
		rc = CUDA_ERROR_INVALID_VALUE;
	for (fk_vmap **pp = &vmaps; rc == CUDA_SUCCESS && *pp;) {
		fk_vmap *m = *pp;
		if (m->base - ptr >= size) {
			pp = &m->next;
			continue;
		}
		mmap((void *)m->base, m->size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
		fk_mem_free(c, m->base, 1u << FK_MEM_MAPPED); /* c's record, if mapped under c */
		*pp = m->next;
		m->phys->maps--;
		phys_put(m->phys);
		free(m);
	}
	return fk_end(rc, __func__, "%#lx %zu", (unsigned long)ptr, size);
}

CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);

	if (rc == CUDA_SUCCESS && (!desc || count == 0 || !vmapped(ptr, size)))
		rc = CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; rc == CUDA_SUCCESS && i < count; i++)
		if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE)
			rc = CUDA_ERROR_NOT_SUPPORTED;
		else if (desc[i].location.id < 0 || desc[i].location.id >= fk_ndev)
			rc = CUDA_ERROR_INVALID_DEVICE;
		else if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE && desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
		         desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
			rc = CUDA_ERROR_INVALID_VALUE;
	for (uintptr_t a = ptr; rc == CUDA_SUCCESS && a < ptr + size;) {
		fk_vmap *m = vmap_at(a);
		m->access = desc[count - 1].flags;
		a = m->base + m->size;
	}
	return fk_end(rc, __func__, "%#lx %zu", (unsigned long)ptr, size);
}

CUresult CUDAAPI cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location, CUdeviceptr ptr)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	fk_vmap *m = rc == CUDA_SUCCESS ? vmap_at(ptr) : NULL;

	if (rc == CUDA_SUCCESS && (!flags || !location || !m || location->type != CU_MEM_LOCATION_TYPE_DEVICE ||
	                           location->id < 0 || location->id >= fk_ndev))
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS)
		*flags = m->access;
	return fk_end(rc, __func__, "%#lx", (unsigned long)ptr);
}

CUresult CUDAAPI cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	fk_vmap *m = rc == CUDA_SUCCESS ? vmap_at((uintptr_t)addr) : NULL;

	if (rc == CUDA_SUCCESS && (!handle || !m))
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS) {
		m->phys->refs++;
		*handle = m->phys->id;
	}
	return fk_end(rc, __func__, "%p", addr);
}
