/* Allocation: device memory lives on the server; pinned host memory is ordinary
 * page-aligned memory here (over shm: a region the server maps too,
 * host_region.c), tracked so copies from it are recognised. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "managed.h"
#include "rg_log.h"
#include "rpc.h"
#include "rt.h"

cudaError_t cudaMalloc(void **devPtr, size_t size)
{
	if (!devPtr)
		return fe_rt_fail(cudaErrorInvalidValue);
	fe_conn *c;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	if ((e = fe_capture_unsafe()) != cudaSuccess) /* CUDA's rules in a capture */
		return fe_rt_fail(e);
	if (size == 0) {
		*devPtr = NULL;
		return cudaSuccess;
	}
	uint64_t p = 0;
	int st = fe_rpc_mem_alloc(c, size, &p);
	if (st == 0) {
		fe_mem_add(p, size, FE_MEM_DEVICE, fe_rt_current_device());
		*devPtr = (void *)(uintptr_t)p;
	}
	return fe_rt_leave(st);
}

cudaError_t cudaFree(void *devPtr)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	if (!devPtr)
		return cudaSuccess;
	if ((e = fe_capture_unsafe()) != cudaSuccess) /* CUDA's rules in a capture */
		return fe_rt_fail(e);
	if (fe_managed_mapped_host(devPtr, 0)) /* cudaFreeHost's, as on a GPU */
		return fe_rt_fail(cudaErrorInvalidValue);
	int mst = fe_managed_free(c, (uintptr_t)devPtr);
	if (mst >= 0)
		return fe_rt_leave(mst);
	/* Forget the range before the server frees it: once freed, another
	 * thread's cudaMalloc may get the same address back at any moment. */
	fe_range r;
	if (fe_mem_find((uintptr_t)devPtr, 0, &r) == 0 && (r.flags & FE_MEM_VMM)) /* cuMemUnmap's, not ours */
		return fe_rt_fail(cudaErrorInvalidValue);
	if (fe_mem_remove((uintptr_t)devPtr, FE_MEM_DEVICE, &r) != 0)
		return fe_rt_fail(cudaErrorInvalidValue);
	int st = fe_rpc_mem_free(c, (uintptr_t)devPtr);
	if (st != 0)
		fe_mem_add(r.base, r.size, r.kind, r.device);
	return fe_rt_leave(st);
}

cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t stream)
{
	if (!devPtr)
		return fe_rt_fail(cudaErrorInvalidValue);
	fe_conn *c;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	if (size == 0) {
		*devPtr = NULL;
		return cudaSuccess;
	}
	uint64_t p = 0;
	int st = fe_rpc_mem_alloc_async(c, size, fe_rt_stream(stream), &p);
	if (st == 0) {
		int dev = fe_rt_current_device();
		fe_mem_add_tagged(p, size, FE_MEM_DEVICE, dev, (uintptr_t)fe_mempool_current(dev), 0);
		*devPtr = (void *)(uintptr_t)p;
	}
	return fe_rt_leave(st);
}

cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t stream)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	if (!devPtr)
		return cudaSuccess;
	if (fe_mem_remove((uintptr_t)devPtr, FE_MEM_DEVICE, NULL) != 0)
		return fe_rt_fail(cudaErrorInvalidValue);
	return fe_rt_leave(fe_rpc_mem_free_async(c, (uintptr_t)devPtr, fe_rt_stream(stream)));
}

/* RDMA: pinned host memory is registered with every rdma connection (an MR), so
 * copies from and to it move by RDMA on these pages, with no bounce copy; the
 * MRs go when the memory is freed or unregistered. Nothing happens for tcp. A
 * registration that fails only costs speed (the copy takes the bounce ring). */
typedef struct pin_rec {
	void *p;
	fe_conn *conn[FE_MAX_DEVICES]; /* the connection each MR belongs to */
	transport_mr *mr[FE_MAX_DEVICES];
	struct pin_rec *next;
} pin_rec;
static pthread_mutex_t pins_lock = PTHREAD_MUTEX_INITIALIZER;
static pin_rec *pins;

static void pin(void *p, size_t size)
{
	pin_rec *r = calloc(1, sizeof(*r));
	if (!r)
		return;
	r->p = p;
	int n = fe_rt_device_count();
	for (int i = 0; i < n && i < FE_MAX_DEVICES; i++) {
		fe_device *d = fe_rt_device(i);
		if (d && d->conn && fe_conn_pin(d->conn, p, size, &r->mr[i]) == 0 && r->mr[i])
			r->conn[i] = d->conn;
	}
	pthread_mutex_lock(&pins_lock);
	r->next = pins;
	pins = r;
	pthread_mutex_unlock(&pins_lock);
}

/* After cudaDeviceReset: that device's connection, and its MRs, are gone. */
static void forget_device(int dev)
{
	if (dev < 0 || dev >= FE_MAX_DEVICES)
		return;
	pthread_mutex_lock(&pins_lock);
	for (pin_rec *r = pins; r; r = r->next) {
		r->conn[dev] = NULL;
		r->mr[dev] = NULL;
	}
	pthread_mutex_unlock(&pins_lock);
}

static void unpin(void *p)
{
	pin_rec *r = NULL;
	pthread_mutex_lock(&pins_lock);
	for (pin_rec **pp = &pins; *pp; pp = &(*pp)->next)
		if ((*pp)->p == p) {
			r = *pp;
			*pp = r->next;
			break;
		}
	pthread_mutex_unlock(&pins_lock);
	if (!r)
		return;
	for (int i = 0; i < FE_MAX_DEVICES; i++) {
		fe_device *d = r->conn[i] ? fe_rt_device(i) : NULL;
		/* a fork child has connections of its own: the parent's MRs are not its */
		if (d && d->conn == r->conn[i])
			fe_conn_unpin(r->conn[i], r->mr[i]);
	}
	free(r);
}

/* REMOTE_GPU_MAPPED_PINNED_MAX: pinned allocations of at most this many bytes
 * (default 4095; 0: none) are mapped host memory (managed.c), which a kernel
 * may write through the host address as on a GPU of this host, where all
 * pinned memory is mapped (XLA's autotuner hands a kernel 8 pinned bytes for
 * its result). A host function that reads such memory after device work gets
 * its bytes outside the server's executor (op managed_fetch). Larger ones stay
 * plain host memory: copies move them at full speed, and over shm they are
 * shared regions. */
#define MAPPED_PINNED_MAX_DEFAULT 4095
static size_t mapped_pinned_max(void)
{
	static size_t max = (size_t)-1;
	if (max == (size_t)-1) {
		const char *v = getenv("REMOTE_GPU_MAPPED_PINNED_MAX");
		char *end = NULL;
		unsigned long long n = v && *v ? strtoull(v, &end, 0) : MAPPED_PINNED_MAX_DEFAULT;
		if (v && *v && *end) {
			LOG_WARN("frontend", "REMOTE_GPU_MAPPED_PINNED_MAX=%s is not a number: %d", v,
				 MAPPED_PINNED_MAX_DEFAULT);
			n = MAPPED_PINNED_MAX_DEFAULT;
		}
		max = (size_t)n;
	}
	return max;
}

static cudaError_t host_alloc(void **p, size_t size, unsigned flags)
{
	if (!p)
		return fe_rt_fail(cudaErrorInvalidValue);
	cudaError_t e = fe_rt_init();
	if (e != cudaSuccess)
		return fe_rt_fail(e);
	if ((e = fe_capture_unsafe()) != cudaSuccess) /* CUDA's rules in a capture */
		return fe_rt_fail(e);
	if (size == 0) {
		*p = NULL;
		return cudaSuccess;
	}
	/* Small: mapped, before a shared region (a kernel's write beats zero
	 * copies of a few bytes). */
	if (size <= mapped_pinned_max())
		return fe_managed_alloc_mapped(p, size);
	/* Over shm, memory the server maps too (host_region.c); else
	 * page-aligned so a later RDMA registration covers whole pages. */
	void *m = fe_region_alloc(size);
	if (!m && posix_memalign(&m, (size_t)sysconf(_SC_PAGESIZE), size) != 0)
		return fe_rt_fail(cudaErrorMemoryAllocation);
	fe_mem_add_tagged((uintptr_t)m, size, FE_MEM_HOST_PINNED, fe_rt_current_device(), 0,
			  flags & cudaHostAllocWriteCombined);
	pin(m, size);
	*p = m;
	return cudaSuccess;
}

cudaError_t cudaMallocHost(void **ptr, size_t size) { return host_alloc(ptr, size, 0); }

cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
	if (flags & ~(unsigned)(cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined))
		return fe_rt_fail(cudaErrorInvalidValue);
	if (flags & cudaHostAllocMapped) {
		if (!pHost)
			return fe_rt_fail(cudaErrorInvalidValue);
		return fe_managed_alloc_mapped(pHost, size);
	}
	return host_alloc(pHost, size, flags);
}

cudaError_t cudaFreeHost(void *ptr)
{
	if (!ptr)
		return cudaSuccess;
	cudaError_t e = fe_capture_unsafe(); /* CUDA's rules in a capture */
	if (e != cudaSuccess)
		return fe_rt_fail(e);
	if (fe_managed_mapped_host(ptr, 1)) {
		fe_conn *c;
		e = fe_rt_enter(&c);
		return e != cudaSuccess ? e : fe_rt_leave(fe_managed_free(c, (uintptr_t)ptr));
	}
	if (fe_mem_remove((uintptr_t)ptr, FE_MEM_HOST_PINNED, NULL) != 0)
		return fe_rt_fail(cudaErrorInvalidValue);
	unpin(ptr);
	if (!fe_region_free(ptr))
		free(ptr);
	return cudaSuccess;
}

cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
	if (!ptr || size == 0)
		return fe_rt_fail(cudaErrorInvalidValue);
	if (flags & cudaHostRegisterMapped) {
		rg_log_once("frontend", "not supported (host memory cannot be mapped into a remote GPU)",
			    "cudaHostRegister(cudaHostRegisterMapped)");
		return fe_rt_fail(cudaErrorNotSupported);
	}
	if (fe_mem_find((uintptr_t)ptr, size, NULL) == 0)
		return fe_rt_fail(cudaErrorHostMemoryAlreadyRegistered);
	fe_mem_add_tagged((uintptr_t)ptr, size, FE_MEM_HOST_REGISTERED, fe_rt_current_device(), 0,
			  flags & cudaHostRegisterPortable);
	pin(ptr, size);
	return cudaSuccess;
}

cudaError_t cudaHostUnregister(void *ptr)
{
	if (fe_mem_remove((uintptr_t)ptr, FE_MEM_HOST_REGISTERED, NULL) != 0)
		return fe_rt_fail(cudaErrorHostMemoryNotRegistered);
	unpin(ptr);
	return cudaSuccess;
}

/* Mapped allocations have one address for both sides; other host memory cannot
 * be mapped into a GPU on another host. */
cudaError_t cudaHostGetDevicePointer(void **pDevice, void *pHost, unsigned int flags)
{
	if (!pDevice || flags)
		return fe_rt_fail(cudaErrorInvalidValue);
	if (fe_managed_mapped_host(pHost, 0)) {
		*pDevice = pHost;
		return cudaSuccess;
	}
	rg_log_once("frontend", "not supported (host memory cannot be mapped into a remote GPU)",
		    "cudaHostGetDevicePointer");
	return fe_rt_fail(cudaErrorNotSupported);
}

cudaError_t cudaMallocPitch(void **devPtr, size_t *pitch, size_t width, size_t height)
{
	if (!pitch)
		return fe_rt_fail(cudaErrorInvalidValue);
	fe_device *d = fe_rt_device(fe_rt_current_device());
	size_t align = d && d->prop.texturePitchAlignment ? d->prop.texturePitchAlignment : 512;
	size_t p = (width + align - 1) / align * align;
	cudaError_t e = cudaMalloc(devPtr, p * height);
	if (e == cudaSuccess)
		*pitch = p;
	return e;
}

/* Pitched 3D memory: depth slices of height rows, one pitched allocation. */
cudaError_t cudaMalloc3D(struct cudaPitchedPtr *p, struct cudaExtent e)
{
	if (!p)
		return fe_rt_fail(cudaErrorInvalidValue);
	void *ptr = NULL;
	size_t pitch = 0;
	cudaError_t r = cudaMallocPitch(&ptr, &pitch, e.width, e.height * e.depth);
	if (r == cudaSuccess)
		*p = (struct cudaPitchedPtr){.ptr = ptr, .pitch = pitch, .xsize = e.width, .ysize = e.height};
	return r;
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attr, const void *ptr)
{
	if (!attr)
		return fe_rt_fail(cudaErrorInvalidValue);
	memset(attr, 0, sizeof(*attr));
	fe_range r;
	attr->device = -2;
	if (fe_mem_find((uintptr_t)ptr, 0, &r) < 0) {
		/* As CUDA does for memory it does not know: host memory by default. */
		attr->type = cudaMemoryTypeUnregistered;
		attr->hostPointer = (void *)ptr;
		return cudaSuccess;
	}
	attr->device = r.device;
	if (r.kind == FE_MEM_MANAGED && fe_managed_mapped_host(ptr, 0)) {
		/* mapped host memory: host memory to the program, at one address */
		attr->type = cudaMemoryTypeHost;
		attr->devicePointer = attr->hostPointer = (void *)ptr;
	} else if (r.kind == FE_MEM_MANAGED) {
		attr->type = cudaMemoryTypeManaged;
		attr->devicePointer = attr->hostPointer = (void *)ptr;
	} else if (r.kind == FE_MEM_DEVICE || r.kind == FE_MEM_MODULE) {
		attr->type = cudaMemoryTypeDevice;
		attr->devicePointer = (void *)ptr;
	} else {
		attr->type = cudaMemoryTypeHost;
		attr->hostPointer = (void *)ptr;
	}
	return cudaSuccess;
}

/* A reset device's MRs went with its connection; the child after fork has
 * none to forget (its records are the parent's, never used again). */
static void forget(int dev)
{
	if (dev != FE_RT_FORK)
		forget_device(dev);
}

__attribute__((constructor)) static void register_forget(void) { fe_rt_on_forget(forget); }
