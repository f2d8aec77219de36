/*
 * Virtual memory management: cuMemAddressReserve, cuMemCreate, cuMemMap and
 * the rest of the cuMem* VMM calls, for a session.
 *
 * Design:
 *  - A reservation is a range of the server's virtual addresses (device
 *    pointers are the server's addresses everywhere): vmm_reserve returns it,
 *    and the session keeps it so that only its own reservations can be mapped
 *    into or freed.
 *  - An allocation handle (CUmemGenericAllocationHandle) is an id the client
 *    chose, looked up in the session's table (id -> the driver's handle and how
 *    many references the client holds: cuMemCreate and each
 *    cuMemRetainAllocationHandle one, each cuMemRelease gives one back).
 *  - A mapping lies in one reservation of the session and over nothing mapped;
 *    it becomes a BE_RANGE_MAPPED range of the session's range table, so copies,
 *    memsets and launch arguments may touch it (mapped ranges back to back count
 *    as one range, as the one virtual range they are on the GPU), and is
 *    forgotten at cuMemUnmap, which must cover whole mappings.
 *  - Only device memory of the session's device, exporting no handles: the
 *    handle types that could cross to another process cannot cross hosts.
 *  - The teardown unmaps what the client left mapped, releases the references
 *    it still holds and frees its reservations, in that order: the memory goes
 *    back to the device with the session.
 */
#include "backend.h"

#include <inttypes.h>
#include <stdlib.h>

#include "ops.h"
#include "tenants.h"

typedef struct vmm_alloc {
	CUmemGenericAllocationHandle h;
	uint64_t size;
	uint64_t refs; /* the client's references: cuMemRelease calls owed */
	/* size is charged to the tenant (tenants.h) from cuMemCreate to the last
	 * release; not a record revived by a retain, whose memory was charged
	 * (and released) already, so nothing is given back twice */
	int charged;
} vmm_alloc;

typedef struct vmm_resv {
	uint64_t base, size;
	struct vmm_resv *next;
} vmm_resv;

typedef struct vmm_map {
	uint64_t base, size;
	uint64_t id;    /* the client's handle id of the allocation mapped */
	CUmemGenericAllocationHandle h;
	uint64_t asize; /* the allocation's size (a retain after its last release) */
	struct vmm_map *next;
} vmm_map;

struct be_vmm_sess {
	be_htab allocs;
	vmm_resv *resv;
	vmm_map *maps;
	size_t gran; /* the device's minimum granularity, 0 until asked */
};

static struct be_vmm_sess *vmm_of(be_session *s)
{
	if (!s->vmm && (s->vmm = calloc(1, sizeof(*s->vmm))))
		be_htab_init(&s->vmm->allocs);
	return s->vmm;
}

static int have_driver(void)
{
	return be_drv.cuMemGetAllocationGranularity && be_drv.cuMemAddressReserve && be_drv.cuMemAddressFree &&
	       be_drv.cuMemCreate && be_drv.cuMemRelease && be_drv.cuMemMap && be_drv.cuMemUnmap &&
	       be_drv.cuMemSetAccess && be_drv.cuMemGetAccess && be_drv.cuMemRetainAllocationHandle;
}

/* The session's vmm state, or a CUresult why there is none. */
static int enter(be_session *s, struct be_vmm_sess **v)
{
	if (!have_driver())
		return CUDA_ERROR_NOT_SUPPORTED;
	if (!(*v = vmm_of(s)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	return 0;
}

static CUmemAllocationProp device_prop(CUdevice dev, uint32_t type)
{
	CUmemAllocationProp p = {0};
	p.type = (CUmemAllocationType)type;
	p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
	p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	p.location.id = dev;
	return p;
}

/* What the session may ask for: pinned device memory of its own device, no
 * export handles. */
static int check_prop(be_session *s, uint32_t type, uint32_t handle_types, uint32_t loc_type, const char *what)
{
	if (type != CU_MEM_ALLOCATION_TYPE_PINNED)
		return CUDA_ERROR_INVALID_VALUE;
	if (handle_types != CU_MEM_HANDLE_TYPE_NONE || loc_type != CU_MEM_LOCATION_TYPE_DEVICE) {
		LOG_INFO(BE_LOG, "session %" PRIu64 ": %s: handle types 0x%x, location type %u: not supported", s->id,
			 what, handle_types, loc_type);
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	return 0;
}

static size_t granularity(struct be_vmm_sess *v)
{
	if (!v->gran) {
		CUmemAllocationProp p = device_prop(be_srv.gpu[0].dev, CU_MEM_ALLOCATION_TYPE_PINNED) /* (served devices alike) */;
		size_t g = 0;
		if (be_drv.cuMemGetAllocationGranularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS)
			v->gran = g;
	}
	return v->gran;
}

static vmm_resv *resv_of(struct be_vmm_sess *v, uint64_t p, uint64_t len)
{
	for (vmm_resv *r = v->resv; r; r = r->next)
		if (p - r->base < r->size && len <= r->size - (p - r->base))
			return r;
	return NULL;
}

static vmm_map *map_at(struct be_vmm_sess *v, uint64_t p)
{
	for (vmm_map *m = v->maps; m; m = m->next)
		if (p - m->base < m->size)
			return m;
	return NULL;
}

/* [p, p + len) is covered by mappings of the session. */
static int mapped(struct be_vmm_sess *v, uint64_t p, uint64_t len)
{
	if (len == 0 || len - 1 > UINT64_MAX - p)
		return 0;
	uint64_t end = p + len;
	while (p < end) {
		vmm_map *m = map_at(v, p);
		if (!m)
			return 0;
		p = m->base + m->size;
	}
	return 1;
}

static int get_alloc(be_session *s, struct be_vmm_sess *v, uint64_t id, vmm_alloc **out)
{
	void *o = NULL;
	int r = be_htab_get(&v->allocs, id, &o, NULL);
	if (r != BE_H_OK) {
		LOG_INFO(BE_LOG, "session %" PRIu64 ": allocation handle %" PRIu64 ": %s", s->id, id, be_h_strerror(r));
		return CUDA_ERROR_INVALID_VALUE;
	}
	*out = o;
	return 0;
}

int be_op_vmm_granularity(be_session *s, be_req *rq, uint32_t type, uint32_t handle_types, uint32_t loc_type,
			  uint32_t option)
{
	struct be_vmm_sess *v;
	int err;
	size_t g = 0;
	CUresult r;

	if ((err = enter(s, &v)) || (err = check_prop(s, type, handle_types, loc_type, "vmm_granularity")))
		return err;
	CUmemAllocationProp p = device_prop(be_cur_gpu(s)->dev, type);
	if ((r = be_drv.cuMemGetAllocationGranularity(&g, &p, (CUmemAllocationGranularity_flags)option)) !=
	    CUDA_SUCCESS)
		return r;
	return be_reply_u64(s, rq, g);
}

int be_op_vmm_reserve(be_session *s, be_req *rq, uint64_t size, uint64_t align, uint64_t addr, uint64_t flags)
{
	struct be_vmm_sess *v;
	CUdeviceptr p = 0;
	int err;
	CUresult r;

	if ((err = enter(s, &v)))
		return err;
	if (size == 0 || flags != 0 || (align & (align - 1)))
		return CUDA_ERROR_INVALID_VALUE;
	vmm_resv *rv = malloc(sizeof(*rv));
	if (!rv)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if ((r = be_drv.cuMemAddressReserve(&p, (size_t)size, (size_t)align, (CUdeviceptr)addr, 0)) != CUDA_SUCCESS) {
		free(rv);
		return r;
	}
	*rv = (vmm_resv){(uint64_t)p, size, v->resv};
	v->resv = rv;
	return be_reply_u64(s, rq, (uint64_t)p);
}

int be_op_vmm_free(be_session *s, be_req *rq, CUdeviceptr ptr, uint64_t size)
{
	struct be_vmm_sess *v;
	int err;
	CUresult r;

	if ((err = enter(s, &v)))
		return err;
	vmm_resv **pp = &v->resv;
	while (*pp && ((*pp)->base != (uint64_t)ptr || (*pp)->size != size))
		pp = &(*pp)->next;
	if (!*pp) {
		LOG_INFO(BE_LOG, "session %" PRIu64 ": vmm_free(0x%llx, %" PRIu64 "): no such reservation", s->id,
			 (unsigned long long)ptr, size);
		return CUDA_ERROR_INVALID_VALUE;
	}
	for (vmm_map *m = v->maps; m; m = m->next)
		if (m->base - (uint64_t)ptr < size)
			return CUDA_ERROR_INVALID_VALUE; /* still mapped: unmap first */
	if ((r = be_drv.cuMemAddressFree(ptr, (size_t)size)) != CUDA_SUCCESS)
		return r;
	vmm_resv *gone = *pp;
	*pp = gone->next;
	free(gone);
	return CUDA_SUCCESS;
}

int be_op_vmm_create(be_session *s, be_req *rq, uint64_t id, uint64_t size, uint32_t type, uint32_t handle_types,
		     uint32_t loc_type, uint32_t compression, uint32_t usage, uint64_t flags)
{
	struct be_vmm_sess *v;
	int err;
	CUresult r;

	if ((err = enter(s, &v)) || (err = check_prop(s, type, handle_types, loc_type, "vmm_create")))
		return err;
	size_t g = granularity(v);
	if (id == 0 || size == 0 || flags != 0 || !g || size % g || compression > 0xff || usage > 0xffff)
		return CUDA_ERROR_INVALID_VALUE;
	if (be_htab_get(&v->allocs, id, NULL, NULL) == BE_H_OK)
		return CUDA_ERROR_INVALID_VALUE;
	vmm_alloc *a = calloc(1, sizeof(*a));
	if (!a)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUmemAllocationProp p = device_prop(be_cur_gpu(s)->dev, type);
	p.allocFlags.compressionType = (unsigned char)compression;
	p.allocFlags.usage = (unsigned short)usage;
	if ((err = be_tenant_charge(s, size))) {
		free(a);
		return err;
	}
	if ((r = be_drv.cuMemCreate(&a->h, (size_t)size, &p, 0)) != CUDA_SUCCESS) {
		be_tenant_uncharge(s, size);
		free(a);
		return r;
	}
	a->size = size;
	a->refs = 1;
	a->charged = 1;
	if (be_htab_add(&v->allocs, id, a, 0) != BE_H_OK) {
		be_drv.cuMemRelease(a->h);
		be_tenant_uncharge(s, size);
		free(a);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	return CUDA_SUCCESS;
}

int be_op_vmm_release(be_session *s, be_req *rq, uint64_t id)
{
	struct be_vmm_sess *v;
	vmm_alloc *a;
	int err;
	CUresult r;

	if ((err = enter(s, &v)) || (err = get_alloc(s, v, id, &a)))
		return err;
	/* Mapped memory stays until its last unmap (the driver keeps it). */
	if ((r = be_drv.cuMemRelease(a->h)) != CUDA_SUCCESS)
		return r;
	if (--a->refs == 0) {
		be_htab_del(&v->allocs, id, NULL, NULL);
		if (a->charged)
			be_tenant_uncharge(s, a->size);
		free(a);
	}
	return CUDA_SUCCESS;
}

int be_op_vmm_map(be_session *s, be_req *rq, CUdeviceptr ptr, uint64_t size, uint64_t offset, uint64_t id,
		  uint64_t flags)
{
	struct be_vmm_sess *v;
	vmm_alloc *a;
	int err;
	CUresult r;

	if ((err = enter(s, &v)) || (err = get_alloc(s, v, id, &a)))
		return err;
	if (size == 0 || flags != 0 || offset > a->size || size > a->size - offset || !resv_of(v, ptr, size))
		return CUDA_ERROR_INVALID_VALUE;
	for (vmm_map *m = v->maps; m; m = m->next)
		if (m->base - (uint64_t)ptr < size || (uint64_t)ptr - m->base < m->size) {
			LOG_INFO(BE_LOG, "session %" PRIu64 ": vmm_map(0x%llx, %" PRIu64 "): over a mapped range", s->id,
				 (unsigned long long)ptr, size);
			return CUDA_ERROR_INVALID_VALUE;
		}
	vmm_map *m = malloc(sizeof(*m));
	if (!m)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if ((r = be_drv.cuMemMap(ptr, (size_t)size, (size_t)offset, a->h, 0)) != CUDA_SUCCESS) {
		free(m);
		return r;
	}
	pthread_mutex_lock(&s->ranges_mu); /* fetch.c reads them on its thread */
	int added = be_ranges_add(&s->ranges, (uint64_t)ptr, size, BE_RANGE_MAPPED);
	pthread_mutex_unlock(&s->ranges_mu);
	if (added != BE_R_OK) {
		be_drv.cuMemUnmap(ptr, (size_t)size);
		free(m);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*m = (vmm_map){(uint64_t)ptr, size, id, a->h, a->size, v->maps};
	v->maps = m;
	return CUDA_SUCCESS;
}

int be_op_vmm_unmap(be_session *s, be_req *rq, CUdeviceptr ptr, uint64_t size)
{
	struct be_vmm_sess *v;
	int err;
	CUresult r;

	if ((err = enter(s, &v)))
		return err;
	/* Whole mappings only, from the first one's start to the last one's end. */
	if (!mapped(v, ptr, size))
		return CUDA_ERROR_INVALID_VALUE;
	vmm_map *first = map_at(v, ptr), *last = map_at(v, ptr + size - 1);
	if (first->base != (uint64_t)ptr || last->base + last->size != (uint64_t)ptr + size)
		return CUDA_ERROR_INVALID_VALUE;
	/* One driver call per mapping: the driver unmaps what one cuMemMap mapped. */
	for (vmm_map **pp = &v->maps; *pp;) {
		vmm_map *m = *pp;
		if (m->base - (uint64_t)ptr < size) {
			/* forgotten first: no copy outside the executor reads it then (fetch.c) */
			pthread_mutex_lock(&s->ranges_mu);
			be_ranges_remove(&s->ranges, m->base, NULL);
			pthread_mutex_unlock(&s->ranges_mu);
			if ((r = be_drv.cuMemUnmap((CUdeviceptr)m->base, (size_t)m->size)) != CUDA_SUCCESS) {
				pthread_mutex_lock(&s->ranges_mu);
				be_ranges_add(&s->ranges, m->base, m->size, BE_RANGE_MAPPED);
				pthread_mutex_unlock(&s->ranges_mu);
				return r;
			}
			*pp = m->next;
			free(m);
		} else {
			pp = &m->next;
		}
	}
	return CUDA_SUCCESS;
}

int be_op_vmm_set_access(be_session *s, be_req *rq, CUdeviceptr ptr, uint64_t size, uint32_t loc_type,
			 uint64_t flags)
{
	struct be_vmm_sess *v;
	int err;

	if ((err = enter(s, &v)))
		return err;
	if (loc_type != CU_MEM_LOCATION_TYPE_DEVICE) {
		LOG_INFO(BE_LOG, "session %" PRIu64 ": vmm_set_access: location type %u: not supported", s->id, loc_type);
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	if (!mapped(v, ptr, size))
		return CUDA_ERROR_INVALID_VALUE;
	CUmemAccessDesc d = {{CU_MEM_LOCATION_TYPE_DEVICE, be_cur_gpu(s)->dev}, (CUmemAccess_flags)flags};
	return be_drv.cuMemSetAccess(ptr, (size_t)size, &d, 1);
}

int be_op_vmm_get_access(be_session *s, be_req *rq, CUdeviceptr ptr, uint32_t loc_type)
{
	struct be_vmm_sess *v;
	unsigned long long flags = 0;
	int err;
	CUresult r;

	if ((err = enter(s, &v)))
		return err;
	if (loc_type != CU_MEM_LOCATION_TYPE_DEVICE)
		return CUDA_ERROR_NOT_SUPPORTED;
	if (!map_at(v, ptr))
		return CUDA_ERROR_INVALID_VALUE;
	CUmemLocation loc = {CU_MEM_LOCATION_TYPE_DEVICE, be_cur_gpu(s)->dev};
	if ((r = be_drv.cuMemGetAccess(&flags, &loc, ptr)) != CUDA_SUCCESS)
		return r;
	return be_reply_u64(s, rq, flags);
}

int be_op_vmm_retain(be_session *s, be_req *rq, CUdeviceptr ptr)
{
	struct be_vmm_sess *v;
	vmm_map *m;
	int err;
	CUresult r;
	CUmemGenericAllocationHandle h;

	if ((err = enter(s, &v)))
		return err;
	if (!(m = map_at(v, ptr)))
		return CUDA_ERROR_INVALID_VALUE;
	void *o = NULL;
	vmm_alloc *a = be_htab_get(&v->allocs, m->id, &o, NULL) == BE_H_OK ? o : NULL;
	vmm_alloc *fresh = NULL;
	if (!a && !(a = fresh = calloc(1, sizeof(*a))))
		return CUDA_ERROR_OUT_OF_MEMORY;
	if ((r = be_drv.cuMemRetainAllocationHandle(&h, (void *)(uintptr_t)ptr)) != CUDA_SUCCESS) {
		free(fresh);
		return r;
	}
	if (fresh) { /* every reference was given back: the id lives again */
		*fresh = (vmm_alloc){h, m->asize, 0};
		if (be_htab_add(&v->allocs, m->id, fresh, 0) != BE_H_OK) {
			be_drv.cuMemRelease(h);
			free(fresh);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
	}
	a->refs++;
	return be_reply_u64(s, rq, m->id);
}

static void td_alloc(void *ctx, uint64_t id, void *obj, uint64_t aux)
{
	unsigned *failed = ctx;
	vmm_alloc *a = obj;
	for (; a->refs; a->refs--)
		*failed += be_drv.cuMemRelease(a->h) != CUDA_SUCCESS;
	free(a);
}

void be_vmm_teardown(be_session *s)
{
	struct be_vmm_sess *v = s->vmm;
	unsigned nmap = 0, nres = 0, nalloc = 0, failed = 0;

	if (!v)
		return;
	while (v->maps) {
		vmm_map *m = v->maps;
		v->maps = m->next;
		failed += be_drv.cuMemUnmap((CUdeviceptr)m->base, (size_t)m->size) != CUDA_SUCCESS;
		be_ranges_remove(&s->ranges, m->base, NULL);
		free(m);
		nmap++;
	}
	nalloc = be_htab_count(&v->allocs);
	be_htab_each(&v->allocs, td_alloc, &failed);
	be_htab_free(&v->allocs);
	while (v->resv) {
		vmm_resv *r = v->resv;
		v->resv = r->next;
		failed += be_drv.cuMemAddressFree((CUdeviceptr)r->base, (size_t)r->size) != CUDA_SUCCESS;
		free(r);
		nres++;
	}
	if (nmap || nalloc || nres)
		LOG_INFO(BE_LOG, "session %" PRIu64 ": unmapped %u ranges, released %u allocation handles, freed %u "
			 "reservations%s", s->id, nmap, nalloc, nres, failed ? " (some failed)" : "");
	free(v);
	s->vmm = NULL;
}
