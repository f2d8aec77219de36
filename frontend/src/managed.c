/*
 * Managed memory (cudaMallocManaged) on a host without the GPU.
 *
 * An allocation is device memory on the server, and this process maps
 * anonymous pages at the same address, so one pointer is good in kernels and
 * in host code. The two copies are kept coherent at the calls, with page
 * protection telling us when the host touches its copy (a whole allocation at
 * a time):
 *
 *   HOST    the host copy is the newer (or they are equal): pages read-write;
 *           uploaded before the next call that may run device work
 *   CLEAN   both are equal: pages read-only; a host write makes it HOST
 *   DEVICE  the device may have changed it: pages inaccessible; a host access
 *           faults, and the handler copies the allocation back with a
 *           synchronous copy on the legacy stream (it waits for the work
 *           before it, as the program's own synchronisation does): CLEAN.
 *           Mapped host memory (pinned memory to the program, which waits for
 *           nothing when the host reads it), and any access from a host
 *           function (its stream, and so the legacy stream, waits for it), is
 *           copied back by op managed_fetch instead, which the server serves
 *           outside its executor on a stream of its own (backend/src/fetch.c):
 *           the executor may itself be waiting for the host function's
 *           stream (inside cuLaunchHostFunc on the driver test double, in a
 *           freeing or synchronous call on a GPU).
 *
 * Before any forwarded call that is not a query or a wait (a launch, a copy, a
 * library call: which memory it touches cannot be seen from here) every HOST
 * allocation is uploaded (on our non-blocking stream, then synchronised: a
 * host function's stream may be waiting for the call) and every allocation
 * becomes DEVICE. These are the
 * rules of a device without concurrent managed access, which is what the
 * device attributes report (cudaDevAttrConcurrentManagedAccess 0): the host
 * touches managed memory only while no device work that uses it runs.
 *
 * Limits: a system call does not fault on our behalf, so read() into managed
 * memory in the DEVICE state fails with EFAULT (touch it first); the memory
 * belongs to the device current at allocation; __managed__ variables are not
 * supported.
 */
#include "managed.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "errors.h"
#include "rg_log.h"
#include "rpc.h"
#include "rt.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define MAP_TRIES 4 /* device addresses tried when the first is taken here */

enum { MG_HOST, MG_CLEAN, MG_DEVICE };

typedef struct region {
	uintptr_t base;  /* page-aligned, the pointer the program got */
	size_t size;     /* page-rounded */
	uint64_t alloc;  /* the server's allocation (base rounded down into it) */
	int device;
	int state;
	int mapped_host; /* cudaHostAlloc(cudaHostAllocMapped), small pinned: freed by cudaFreeHost */
	struct region *next;
} region;

static pthread_mutex_t mg_lock = PTHREAD_MUTEX_INITIALIZER;
static region *regions;
static atomic_int nregions;
static atomic_int nhost; /* regions not in the DEVICE state: a call has something to hand over */
static _Thread_local int in_managed; /* our own copies must not recurse */
static struct sigaction old_segv;
/* (mg_lock) each device's non-blocking stream of ours, and its connection */
static uint64_t own_stream[FE_MAX_DEVICES];
static fe_conn *own_conn[FE_MAX_DEVICES];
static pthread_once_t segv_once = PTHREAD_ONCE_INIT;

static size_t page_size(void)
{
	static size_t pg;
	if (!pg)
		pg = (size_t)sysconf(_SC_PAGESIZE);
	return pg;
}

static region *find_locked(uintptr_t a)
{
	for (region *r = regions; r; r = r->next)
		if (a >= r->base && a < r->base + r->size)
			return r;
	return NULL;
}

static fe_conn *conn_of(const region *r)
{
	fe_device *d = fe_rt_device(r->device);
	return d ? d->conn : NULL;
}

static int protect(region *r, int prot, int state)
{
	if (mprotect((void *)r->base, r->size, prot) != 0)
		return -1;
	atomic_fetch_add(&nhost, (state != MG_DEVICE) - (r->state != MG_DEVICE));
	r->state = state;
	return 0;
}

/* (mg_lock held, in_managed set) r's device's stream that waits for no other
 * work, created at its first use; 0 if that failed. */
static uint64_t own_stream_locked(const region *r, fe_conn *c)
{
	if (r->device < 0 || r->device >= FE_MAX_DEVICES)
		return 0;
	if (own_conn[r->device] != c) {
		uint64_t id = fe_rt_new_id();
		if (fe_rpc_stream_create(c, id, cudaStreamNonBlocking, 0) != 0) {
			LOG_ERROR("frontend", "managed memory: cannot create a stream of its own");
			return 0;
		}
		own_stream[r->device] = id;
		own_conn[r->device] = c;
	}
	return own_stream[r->device];
}

/* DEVICE -> CLEAN: the device's bytes into the host pages (mg_lock held). */
static int fetch_locked(region *r)
{
	fe_conn *c = conn_of(r);
	if (!c || mprotect((void *)r->base, r->size, PROT_READ | PROT_WRITE) != 0)
		return -1;
	in_managed = 1;
	int st;
	if (r->mapped_host || fe_hostfn_in_thread()) /* served outside the server's executor */
		st = fe_rpc_managed_fetch(c, r->base, r->size, (void *)r->base, r->size);
	else
		st = fe_copy_dtoh(c, (uint8_t *)r->base, r->base, r->size, 0, 0);
	in_managed = 0;
	if (st != 0) {
		mprotect((void *)r->base, r->size, PROT_NONE); /* still DEVICE: stale bytes stay unreadable */
		return -1;
	}
	return protect(r, PROT_READ, MG_CLEAN);
}

/* A host access to an allocation: 0 when it may be retried. */
static int on_access(uintptr_t a)
{
	pthread_mutex_lock(&mg_lock);
	region *r = find_locked(a);
	int rc = -1;
	if (r) {
		switch (r->state) {
		case MG_DEVICE:
			rc = fetch_locked(r);
			break;
		case MG_CLEAN: /* a write */
			rc = protect(r, PROT_READ | PROT_WRITE, MG_HOST);
			break;
		default: /* another thread got there first */
			rc = 0;
			break;
		}
	}
	pthread_mutex_unlock(&mg_lock);
	return rc;
}

static void on_segv(int sig, siginfo_t *si, void *uc)
{
	int saved = errno;
	if (!in_managed && on_access((uintptr_t)si->si_addr) == 0) {
		errno = saved;
		return; /* the access runs again, now allowed */
	}
	/* Not ours, or the copy back failed: what the program had before. */
	if ((old_segv.sa_flags & SA_SIGINFO) && old_segv.sa_sigaction) {
		old_segv.sa_sigaction(sig, si, uc);
	} else if (old_segv.sa_handler != SIG_DFL && old_segv.sa_handler != SIG_IGN) {
		old_segv.sa_handler(sig);
	} else {
		/* the access faults again and the default action ends the process */
		signal(SIGSEGV, SIG_DFL);
	}
	errno = saved;
}

static void install_segv(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_segv;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSEGV, &sa, &old_segv) != 0)
		LOG_ERROR("frontend", "managed memory: sigaction(SIGSEGV) failed: host access will crash");
}

/* Device memory whose page-aligned part can be mapped here at the same address. */
static int map_alloc(fe_conn *c, size_t size, region *r)
{
	size_t pg = page_size();
	uint64_t tried[MAP_TRIES];
	int ntried = 0, st = 0;
	for (; ntried < MAP_TRIES; ntried++) {
		uint64_t p = 0;
		if ((st = fe_rpc_mem_alloc(c, size + pg, &p)) != 0)
			break;
		tried[ntried] = p;
		uintptr_t base = (uintptr_t)((p + pg - 1) & ~(uint64_t)(pg - 1));
		void *m = mmap((void *)base, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
			       -1, 0);
		if (m == (void *)base) {
			r->base = base;
			r->alloc = p;
			ntried++;
			break;
		}
		if (m != MAP_FAILED)
			munmap(m, size); /* a kernel without MAP_FIXED_NOREPLACE put it elsewhere */
	}
	int ok = r->base != 0;
	for (int i = 0; i < ntried - ok; i++)
		fe_rpc_mem_free(c, tried[i]);
	if (!ok && st == 0) {
		LOG_WARN("frontend", "cudaMallocManaged(%zu): the device addresses are taken in this process", size);
		st = CUDA_ERROR_OUT_OF_MEMORY;
	}
	return st;
}

static cudaError_t managed_alloc(void **devPtr, size_t size, int mapped_host)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	if ((e = fe_capture_unsafe()) != cudaSuccess) /* CUDA's rules in a capture */
		return fe_rt_fail(e);
	if (size == 0) { /* as the CUDA runtime does (its manual says otherwise) */
		*devPtr = NULL;
		return cudaSuccess;
	}
	region *r = calloc(1, sizeof(*r));
	if (!r)
		return fe_rt_fail(cudaErrorMemoryAllocation);
	size_t pg = page_size();
	r->size = (size + pg - 1) & ~(pg - 1);
	r->device = fe_rt_current_device();
	r->mapped_host = mapped_host;
	r->state = MG_HOST; /* zero pages here; uploaded before the device's first use */
	in_managed = 1; /* allocating touches no managed memory: nothing to hand over */
	int st = map_alloc(c, r->size, r);
	in_managed = 0;
	if (st != 0) {
		free(r);
		return fe_rt_leave(st);
	}
	pthread_once(&segv_once, install_segv);
	fe_mem_add(r->base, r->size, FE_MEM_MANAGED, r->device);
	pthread_mutex_lock(&mg_lock);
	r->next = regions;
	regions = r;
	atomic_fetch_add(&nregions, 1);
	atomic_fetch_add(&nhost, 1); /* MG_HOST */
	pthread_mutex_unlock(&mg_lock);
	*devPtr = (void *)r->base;
	return cudaSuccess;
}

cudaError_t cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
	if (!devPtr || (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost))
		return fe_rt_fail(cudaErrorInvalidValue);
	return managed_alloc(devPtr, size, 0);
}

/* Mapped host memory is the device's too: one address good in kernels and in
 * host code, which is what a managed allocation is here, under the same rules
 * of coherence (at the calls, not while a kernel runs). cuDNN keeps a status
 * word the GPU writes in such memory. */
cudaError_t fe_managed_alloc_mapped(void **p, size_t size) { return managed_alloc(p, size, 1); }

int fe_managed_mapped_host(const void *p, int start)
{
	if (atomic_load(&nregions) == 0)
		return 0;
	uintptr_t a = (uintptr_t)p;
	pthread_mutex_lock(&mg_lock);
	region *r = find_locked(a);
	int yes = r && r->mapped_host && (!start || r->base == a);
	pthread_mutex_unlock(&mg_lock);
	return yes;
}

int fe_managed_free(fe_conn *c, uintptr_t p)
{
	if (atomic_load(&nregions) == 0)
		return -1;
	pthread_mutex_lock(&mg_lock);
	region **pp = &regions, *r = NULL;
	for (; *pp; pp = &(*pp)->next)
		if ((*pp)->base == p) {
			r = *pp;
			*pp = r->next;
			atomic_fetch_sub(&nregions, 1);
			atomic_fetch_sub(&nhost, r->state != MG_DEVICE);
			break;
		}
	pthread_mutex_unlock(&mg_lock);
	if (!r)
		return -1;
	fe_mem_remove(r->base, FE_MEM_MANAGED, NULL);
	munmap((void *)r->base, r->size);
	in_managed = 1;
	int st = fe_rpc_mem_free(c, r->alloc);
	in_managed = 0;
	free(r);
	return st;
}

static void forget_device(int dev)
{
	pthread_mutex_lock(&mg_lock);
	for (region **pp = &regions; *pp;) {
		region *r = *pp;
		if (r->device != dev) {
			pp = &r->next;
			continue;
		}
		*pp = r->next;
		atomic_fetch_sub(&nregions, 1);
		atomic_fetch_sub(&nhost, r->state != MG_DEVICE);
		munmap((void *)r->base, r->size);
		free(r);
	}
	if (dev >= 0 && dev < FE_MAX_DEVICES)
		own_conn[dev] = NULL;
	pthread_mutex_unlock(&mg_lock);
}

int fe_managed_any(void) { return atomic_load(&nregions) > 0; }

static int managed_is(const void *p)
{
	fe_range r;
	return fe_managed_any() && fe_mem_find((uintptr_t)p, 0, &r) >= 0 && r.kind == FE_MEM_MANAGED;
}

/* HOST -> uploaded; then everything DEVICE (mg_lock held). */
static int hand_over_locked(region *only)
{
	int err = 0;
	uint64_t synced[FE_MAX_DEVICES] = {0};
	in_managed = 1;
	for (region *r = regions; r && !err; r = r->next) {
		if (only && r != only)
			continue;
		fe_conn *c = conn_of(r);
		if (!c) {
			err = CUDA_ERROR_INVALID_CONTEXT;
			break;
		}
		if (r->state == MG_HOST) {
			/* Read-only first: another thread's write (a host function's)
			 * now waits for mg_lock instead of landing after the upload. */
			uint64_t sid = own_stream_locked(r, c);
			if (!sid || mprotect((void *)r->base, r->size, PROT_READ) != 0)
				err = CUDA_ERROR_UNKNOWN;
			else if ((err = fe_copy_htod(c, r->base, (const uint8_t *)r->base, r->size, sid)) != 0)
				/* Still HOST: writable again, or the next write's fault
				 * would find nothing to change and fault forever. */
				mprotect((void *)r->base, r->size, PROT_READ | PROT_WRITE);
			if (!err)
				synced[r->device] = sid;
		}
		if (!err && r->state != MG_DEVICE && protect(r, PROT_NONE, MG_DEVICE) != 0)
			err = CUDA_ERROR_UNKNOWN;
	}
	/* The uploads ran on our stream: the next call's work must find them
	 * done. */
	for (int d = 0; d < FE_MAX_DEVICES && !err; d++)
		if (synced[d])
			err = fe_rpc_stream_sync(own_conn[d], synced[d]);
	in_managed = 0;
	return err;
}

/* Before a forwarded call (conn.c calls it for every frame): uploads what the
 * host wrote, and takes the host's access away until it asks again. A query or
 * a wait changes nothing. */
static void before_call(uint32_t op)
{
	/* Every allocation already the device's (the common case between host
	 * accesses, and always without managed memory): nothing to hand over. */
	if (atomic_load_explicit(&nhost, memory_order_relaxed) == 0 || in_managed || proto_op_quick(op))
		return;
	pthread_mutex_lock(&mg_lock);
	int err = hand_over_locked(NULL);
	pthread_mutex_unlock(&mg_lock);
	if (err)
		LOG_ERROR("frontend", "managed memory: upload before %s failed: %s (%d)", proto_op_name(op),
			  fe_status_name(err), err);
}

static cudaError_t prefetch(const void *p, size_t count, int to_host)
{
	if (!managed_is(p) || count == 0)
		return fe_rt_fail(cudaErrorInvalidValue);
	pthread_mutex_lock(&mg_lock);
	region *r = find_locked((uintptr_t)p);
	int err = 0;
	if (r && to_host && r->state == MG_DEVICE)
		err = fetch_locked(r) ? CUDA_ERROR_UNKNOWN : 0;
	else if (r && !to_host)
		err = hand_over_locked(r);
	pthread_mutex_unlock(&mg_lock);
	return fe_rt_leave(err);
}

cudaError_t cudaMemPrefetchAsync(const void *devPtr, size_t count, struct cudaMemLocation location,
				 unsigned int flags, cudaStream_t stream)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	int to_host = location.type == cudaMemLocationTypeHost || location.type == cudaMemLocationTypeHostNuma ||
		      location.type == cudaMemLocationTypeHostNumaCurrent;
	return prefetch(devPtr, count, to_host);
}

cudaError_t cudaMemAdvise(const void *devPtr, size_t count, enum cudaMemoryAdvise advice,
			  struct cudaMemLocation location)
{
	/* Advice changes where pages live, never what a program reads: with one
	 * copy on each side and whole-allocation coherence there is nothing to
	 * move, so valid advice is taken and has no effect. */
	if (!managed_is(devPtr) || count == 0 || advice < cudaMemAdviseSetReadMostly ||
	    advice > cudaMemAdviseUnsetAccessedBy)
		return fe_rt_fail(cudaErrorInvalidValue);
	return cudaSuccess;
}

/* A reset device's regions are gone; the child after fork keeps its mappings
 * (its own memory now, with no session behind it), as before, and has none of
 * the parent's streams. */
static void forget(int dev)
{
	if (dev != FE_RT_FORK) {
		forget_device(dev);
		return;
	}
	pthread_mutex_init(&mg_lock, NULL);
	memset(own_conn, 0, sizeof(own_conn));
}

__attribute__((constructor)) static void register_forget(void) { fe_rt_on_forget(forget); }

__attribute__((constructor)) static void register_before_call(void) { fe_conn_on_before_send(before_call); }
