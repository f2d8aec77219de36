/*
 * Pinned host memory in shared regions (shm://). When a server of this
 * program is reached over shm, cudaMallocHost, cudaHostAlloc and
 * cuMemAllocHost/cuMemHostAlloc take their memory from a sealed memfd
 * (page-rounded, mapped shared here) and hand it to every such server as a
 * shared region (transport_region_share, then region_add: the server maps it
 * and registers it with its driver). A copy whose host side lies in such an
 * allocation is then one small frame naming (region, offset, length): the
 * server copies between its mapping of these very pages and the device, and
 * no byte crosses the rings. A synchronous copy is the _wait form of the
 * frame, answered once the copy is done (one round trip, which the server
 * serves on the thread that received it when nothing is ahead), so that it
 * returns once the bytes moved, as cudaMemcpy does. Except a synchronous
 * copy to the device of fewer than REMOTE_GPU_REGION_SYNC_MIN bytes (1 MiB):
 * it goes as bytes in a frame, as from pageable memory and as over tcp, and
 * returns once they are sent, where the wait for the DMA costs a round trip
 * (rt_copy.c; a 4 KiB copy: 0.3 against 6 GB/s on an H200). The bytes are
 * taken at the call, and the copy is in stream order as any other.
 *
 * Lifetime: cudaFreeHost drops the region on each server (which waits for
 * its devices' work first, as cudaFreeHost synchronizes) before the memory
 * is unmapped here. A session that ends (cudaDeviceReset) or a fork child
 * forgets the shares: the memory stays usable, and its copies go through the
 * rings. A server reached over tcp, tls or rdma is never asked; rdma has its
 * own registration (rt_memory.c's pin).
 *
 * The memory is a shared mapping: a child made by fork shares these pages
 * with the parent (where a local driver's pinned memory is private to each).
 */
#define _GNU_SOURCE /* memfd_create */
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rg_log.h"
#include "rpc.h"
#include "rt.h"

typedef struct share {
	fe_conn *conn; /* the channel's own view (device 0 of its server) */
	int dev;       /* the ordinal it was reached through (forgotten at its reset) */
	uint32_t id;
} share;

typedef struct region {
	uint8_t *base;
	size_t len; /* mapped: the size asked for, page-rounded */
	int nshares;
	share shares[FE_MAX_DEVICES];
	struct region *next;
} region;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static region *regions;

/* Whether some device's server is reached over a transport with shared
 * regions (the first share answers; a no from the transport costs nothing). */
static int wanted(void)
{
	int n = fe_rt_device_count();
	for (int i = 0; i < n; i++) {
		fe_device *d = fe_rt_device(i);
		if (d && d->conn && (fe_conn_caps(d->conn) & TRANSPORT_CAP_REGIONS))
			return 1;
	}
	return 0;
}

/* Shares r with the server of every device reached over a transport with
 * shared regions (shm), or only with only's server. */
static void share_all(region *r, int fd, fe_conn *only)
{
	int n = fe_rt_device_count();
	for (int i = 0; i < n && r->nshares < FE_MAX_DEVICES; i++) {
		fe_device *d = fe_rt_device(i);
		int seen = 0;
		if (!d || !d->conn || !(fe_conn_caps(d->conn) & TRANSPORT_CAP_REGIONS) || (only && !fe_conn_same(d->conn, only)))
			continue;
		for (int k = 0; k < r->nshares; k++)
			seen |= fe_conn_same(r->shares[k].conn, d->conn);
		uint32_t id;
		if (seen || fe_conn_region_share(d->conn, fd, r->len, &id) != 0)
			continue;
		/* A region the server does not take is only slower: its copies go
		 * through the rings. */
		int st = fe_rpc_region_add(d->conn, id, r->len);
		if (st != 0) {
			LOG_INFO("frontend", "device %d: shared region of %zu bytes refused (%d): pinned copies go through "
				 "the rings", i, r->len, st);
			continue;
		}
		r->shares[r->nshares++] = (share){d->conn, i, id};
	}
}

static void *region_new(size_t size, fe_conn *only)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	if (size > SIZE_MAX - page)
		return NULL;
	size_t len = (size + page - 1) / page * page;
	region *r = calloc(1, sizeof(*r));
	int fd = memfd_create("remote-gpu-pinned", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	void *p = MAP_FAILED;
	/* Sealed before the server sees it: we cannot shrink it under the
	 * server's mapping either (the server checks). */
	if (!r || fd < 0 || ftruncate(fd, (off_t)len) != 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0 ||
	    (p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
		if (fd >= 0)
			close(fd);
		free(r);
		return NULL;
	}
	r->base = p;
	r->len = len;
	share_all(r, fd, only);
	close(fd); /* the mappings keep it */
	pthread_mutex_lock(&lock);
	r->next = regions;
	regions = r;
	pthread_mutex_unlock(&lock);
	return p;
}

void *fe_region_alloc(size_t size) { return wanted() ? region_new(size, NULL) : NULL; }

void *fe_region_alloc_conn(fe_conn *c, size_t size) { return region_new(size, c); }

int fe_region_free(void *p)
{
	region *r = NULL;
	pthread_mutex_lock(&lock);
	for (region **pp = &regions; *pp; pp = &(*pp)->next)
		if ((*pp)->base == p) {
			r = *pp;
			*pp = r->next;
			break;
		}
	pthread_mutex_unlock(&lock);
	if (!r)
		return 0;
	for (int k = 0; k < r->nshares; k++) {
		int st = fe_rpc_region_drop(r->shares[k].conn, r->shares[k].id);
		if (st != 0)
			LOG_DEBUG("frontend", "region_drop %u: %d", r->shares[k].id, st);
	}
	munmap(r->base, r->len);
	free(r);
	return 1;
}

int fe_region_find(fe_conn *c, const void *p, size_t len, uint32_t *id, uint64_t *off)
{
	uintptr_t a = (uintptr_t)p;
	int found = 0;
	pthread_mutex_lock(&lock);
	for (region *r = regions; r && !found; r = r->next) {
		uintptr_t b = (uintptr_t)r->base;
		if (a < b || a - b > r->len || len > r->len - (a - b))
			continue;
		for (int k = 0; k < r->nshares && !found; k++)
			if (fe_conn_same(r->shares[k].conn, c)) {
				*id = r->shares[k].id;
				*off = a - b;
				found = 1;
			}
		break; /* regions do not overlap */
	}
	pthread_mutex_unlock(&lock);
	return found;
}

int fe_region_copy(fe_conn *c, int to_device, uint64_t dptr, const void *host, size_t len, uint64_t sid, int async,
		   int *st)
{
	uint32_t id;
	uint64_t off;
	if (!__atomic_load_n(&regions, __ATOMIC_RELAXED) || !fe_region_find(c, host, len, &id, &off))
		return 0;
	if (async)
		*st = to_device ? fe_rpc_memcpy_htod_region(c, dptr, id, off, len, sid)
				: fe_rpc_memcpy_dtoh_region(c, dptr, id, off, len, sid);
	else
		*st = to_device ? fe_rpc_memcpy_htod_region_wait(c, dptr, id, off, len, sid)
				: fe_rpc_memcpy_dtoh_region_wait(c, dptr, id, off, len, sid);
	return 1;
}

size_t fe_region_sync_min(void)
{
	static size_t min = SIZE_MAX; /* not read yet */
	size_t m = __atomic_load_n(&min, __ATOMIC_RELAXED);
	if (m == SIZE_MAX) {
		const char *v = getenv("REMOTE_GPU_REGION_SYNC_MIN");
		char *end;
		unsigned long long n = v && *v ? strtoull(v, &end, 0) : 0;
		m = v && *v && !*end ? (size_t)n : (size_t)1 << 20;
		if (m == SIZE_MAX)
			m--;
		__atomic_store_n(&min, m, __ATOMIC_RELAXED);
	}
	return m;
}

/* A reset device's session, or every session in a fork child: its shares
 * name regions of a session that is gone. */
static void forget(int dev)
{
	pthread_mutex_lock(&lock);
	for (region *r = regions; r; r = r->next)
		for (int k = 0; k < r->nshares;)
			if (dev == FE_RT_FORK || r->shares[k].dev == dev)
				r->shares[k] = r->shares[--r->nshares];
			else
				k++;
	pthread_mutex_unlock(&lock);
}

__attribute__((constructor)) static void register_forget(void) { fe_rt_on_forget(forget); }
