/* The client's view of memory it allocated: device ranges (for cudaMemcpyDefault,
 * pointer attributes and local range checks before anything is sent) and pinned or
 * registered host ranges. A sorted array: lookups are a binary search, and programs
 * (PyTorch's caching allocator above all) hold few, large allocations. */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "rg_log.h"
#include "rt.h"
#include "stats.h"

static struct {
	pthread_rwlock_t lock;
	fe_range *r;
	size_t n, cap;
} M = {PTHREAD_RWLOCK_INITIALIZER};

/* Index of the first range with base > p. */
static size_t upper(uint64_t p)
{
	size_t lo = 0, hi = M.n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (M.r[mid].base <= p)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

void fe_mem_add(uint64_t base, uint64_t size, int kind, int device) { fe_mem_add_tagged(base, size, kind, device, 0, 0); }

void fe_mem_add_tagged(uint64_t base, uint64_t size, int kind, int device, uint64_t pool, unsigned flags)
{
	static _Atomic uint64_t next_id = 1;
	uint64_t id = atomic_fetch_add(&next_id, 1);
	pthread_rwlock_wrlock(&M.lock);
	if (M.n == M.cap) {
		size_t cap = M.cap ? M.cap * 2 : 64;
		fe_range *r = realloc(M.r, cap * sizeof(*r));
		if (!r) {
			pthread_rwlock_unlock(&M.lock);
			return; /* lookups then miss: copies fall back to the server's checks */
		}
		M.r = r;
		M.cap = cap;
	}
	size_t i = upper(base);
	memmove(&M.r[i + 1], &M.r[i], (M.n - i) * sizeof(*M.r));
	M.r[i] = (fe_range){base, size, kind, device, id, pool, flags};
	M.n++;
	pthread_rwlock_unlock(&M.lock);
	if (fe_obs_on && kind == FE_MEM_DEVICE)
		fe_obs_mem(device, (int64_t)size);
}

int fe_mem_remove(uint64_t base, int kind, fe_range *out)
{
	int found = -1;
	fe_range gone = {0};
	pthread_rwlock_wrlock(&M.lock);
	size_t i = upper(base);
	/* Two ranges can start at base for a moment: cudaFree frees on the server
	 * before it forgets the range here, and another thread's cudaMalloc may get
	 * the same address in between and add its range (after the old one). The
	 * oldest of them is the one going. */
	while (i > 1 && M.r[i - 2].base == base && M.r[i - 2].kind == kind)
		i--;
	if (i > 0 && M.r[i - 1].base == base && M.r[i - 1].kind == kind) {
		gone = M.r[i - 1];
		if (out)
			*out = M.r[i - 1];
		memmove(&M.r[i - 1], &M.r[i], (M.n - i) * sizeof(*M.r));
		M.n--;
		found = 0;
	}
	pthread_rwlock_unlock(&M.lock);
	if (fe_obs_on && found == 0 && kind == FE_MEM_DEVICE)
		fe_obs_mem(gone.device, -(int64_t)gone.size);
	return found;
}

int fe_mem_find(uint64_t p, uint64_t len, fe_range *out)
{
	int found = -1;
	pthread_rwlock_rdlock(&M.lock);
	size_t i = upper(p);
	if (i > 0) {
		const fe_range *r = &M.r[i - 1];
		uint64_t off = p - r->base;
		if (off < r->size || (r->size == 0 && off == 0)) {
			if (len <= r->size - off) {
				if (out)
					*out = *r;
				found = 0;
			} else {
				found = 1; /* starts inside, runs past the end */
				if (out)
					*out = *r;
				/* cuMemMap'd ranges that follow each other are one virtual range */
				uint64_t rest = len - (r->size - off);
				for (const fe_range *q = r; (q->flags & FE_MEM_VMM) && i < M.n; i++) {
					const fe_range *nx = &M.r[i];
					if (!(nx->flags & FE_MEM_VMM) || nx->base - q->base != q->size)
						break;
					if (rest <= nx->size) {
						found = 0;
						break;
					}
					rest -= nx->size;
					q = nx;
				}
			}
		}
	}
	pthread_rwlock_unlock(&M.lock);
	return found;
}

int fe_mem_overlap(uint64_t p, uint64_t len, fe_range *out)
{
	int found = -1;
	pthread_rwlock_rdlock(&M.lock);
	size_t i = upper(p);
	if (i > 0 && M.r[i - 1].base + M.r[i - 1].size > p) /* one that starts before p */
		i--;
	if (i < M.n && M.r[i].base < p + len && M.r[i].base + M.r[i].size > p) {
		if (out)
			*out = M.r[i];
		found = 0;
	}
	pthread_rwlock_unlock(&M.lock);
	return found;
}

static void forget(int device)
{
	pthread_rwlock_wrlock(&M.lock);
	size_t j = 0;
	for (size_t i = 0; i < M.n; i++)
		if (device >= 0 && M.r[i].device != device)
			M.r[j++] = M.r[i];
		else if (device < 0 && (M.r[i].kind == FE_MEM_HOST_PINNED || M.r[i].kind == FE_MEM_HOST_REGISTERED))
			M.r[j++] = M.r[i]; /* after fork the child still owns its host memory */
		else if (fe_obs_on && M.r[i].kind == FE_MEM_DEVICE && device >= 0)
			fe_obs_mem(M.r[i].device, -(int64_t)M.r[i].size);
	M.n = j;
	pthread_rwlock_unlock(&M.lock);
}

size_t fe_mem_snapshot(fe_range *out, size_t max)
{
	pthread_rwlock_rdlock(&M.lock);
	size_t n = M.n;
	if (out)
		memcpy(out, M.r, (n < max ? n : max) * sizeof(*out));
	pthread_rwlock_unlock(&M.lock);
	return n;
}

int fe_mem_kind(const void *p)
{
	fe_range r;
	return fe_mem_find((uintptr_t)p, 0, &r) >= 0 ? r.kind : 0;
}

int fe_mem_device_ok(const void *p, size_t len)
{
	fe_range r;
	int found = fe_mem_find((uintptr_t)p, len, &r);
	if (found == 0 && fe_mem_kind_device(r.kind))
		return 1;
	/* The caller answers invalid value; what the program passed is what finding
	 * out why needs (REMOTE_GPU_LOG=debug). */
	if (found < 0)
		LOG_DEBUG("frontend", "%p + %zu bytes: in no allocation of this program", p, len);
	else
		LOG_DEBUG("frontend", "%p + %zu bytes: %s allocation %#" PRIx64 " + %" PRIu64 " (kind %d)", p, len,
			  found ? "runs past the end of" : "not device memory:", r.base, r.size, r.kind);
	return 0;
}

__attribute__((constructor)) static void register_forget(void) { fe_rt_on_forget(forget); }
