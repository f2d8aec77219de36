/*
 * Registration cache of one rdma connection: the memory regions its user
 * registered through reg_mem (the frontend: pinned host memory from
 * cudaHostAlloc/cudaMallocHost/cudaHostRegister), looked up on every send and
 * receive to decide whether a buffer can be moved by RDMA straight from or into
 * its own pages.
 *
 * Registering pins pages and costs a system call (tens of microseconds per MiB
 * on real HCAs), so it is done once per allocation, not per copy: an MR lives
 * from reg_mem until the matching dereg_mem (the frontend calls it when the
 * allocation is freed), and registrations of the same range or of a range
 * inside an existing MR share that MR through a reference count.
 *
 * Only memory the user declared is cached. Registering arbitrary pageable
 * buffers on first use and keeping them would be unsafe: after free() and a new
 * mmap() at the same address the MR would still point at the old pages, and
 * the data would go there (real caches hook munmap/brk to notice; we need not,
 * since pageable data takes the bounce ring).
 *
 * The table is a sorted array searched by binary search; it holds one entry per
 * pinned allocation, a few hundred at most. A mutex of its own, because
 * reg_mem runs on program threads while frames go out and come in.
 */
#include <stdlib.h>
#include <string.h>

#include "rdma_int.h"
#include "rg_log.h"

struct rdma_reg {
	uintptr_t start, end;
	struct ibv_mr *mr;
	int refs;
};

void tp_rdma_regs_init(rdma_regs *r)
{
	memset(r, 0, sizeof(*r));
	pthread_mutex_init(&r->mu, NULL);
}

void tp_rdma_regs_destroy(rdma_regs *r)
{
	for (int i = 0; i < r->n; i++) {
		tp_rdma_v.dereg_mr(r->v[i]->mr);
		free(r->v[i]);
	}
	free(r->v);
	r->v = NULL;
	r->n = r->cap = 0;
	pthread_mutex_destroy(&r->mu);
}

/* Index of the first entry with start > a (caller holds mu). */
static int upper(const rdma_regs *r, uintptr_t a)
{
	int lo = 0, hi = r->n;
	while (lo < hi) {
		int mid = (lo + hi) / 2;
		if (r->v[mid]->start <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* An entry covering [a, e), or NULL. Entries may nest (a registration inside
 * another one's range gets its own only when the outer one did not exist yet),
 * so look back a little past the nearest start. */
static rdma_reg *covering(const rdma_regs *r, uintptr_t a, uintptr_t e)
{
	for (int i = upper(r, a) - 1, k = 0; i >= 0 && k < 8; i--, k++)
		if (r->v[i]->end >= e)
			return r->v[i];
	return NULL;
}

int tp_rdma_regs_add(rdma_regs *r, struct ibv_pd *pd, void *addr, size_t len, transport_mr **out)
{
	uintptr_t a = (uintptr_t)addr, e = a + len;
	transport_mr *tm;
	rdma_reg *g;

	*out = NULL;
	if (!addr || len == 0 || e < a)
		return TRANSPORT_EADDR;
	if (!(tm = calloc(1, sizeof(*tm))))
		return TRANSPORT_ENOMEM;
	pthread_mutex_lock(&r->mu);
	if ((g = covering(r, a, e))) {
		g->refs++;
		r->hits++;
	} else {
		r->misses++;
		if (r->n == r->cap) {
			int cap = r->cap ? 2 * r->cap : 16;
			rdma_reg **v = realloc(r->v, (size_t)cap * sizeof(*v));
			if (!v)
				goto nomem;
			r->v = v;
			r->cap = cap;
		}
		if (!(g = calloc(1, sizeof(*g))))
			goto nomem;
		/* REMOTE_READ: the peer pulls frames' payloads from here;
		 * LOCAL_WRITE: our READs land here. Nobody may write it remotely. */
		g->mr = tp_rdma_v.reg_mr(pd, addr, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
		if (!g->mr) {
			LOG_WARN("transport", "rdma: cannot register %zu bytes at %p: %m", len, addr);
			free(g);
			pthread_mutex_unlock(&r->mu);
			free(tm);
			return TRANSPORT_ENOMEM;
		}
		g->start = a;
		g->end = e;
		g->refs = 1;
		int i = upper(r, a);
		memmove(&r->v[i + 1], &r->v[i], (size_t)(r->n - i) * sizeof(*r->v));
		r->v[i] = g;
		__atomic_store_n(&r->n, r->n + 1, __ATOMIC_RELAXED);
	}
	tm->addr = addr;
	tm->len = len;
	tm->lkey = g->mr->lkey;
	tm->rkey = g->mr->rkey;
	tm->impl = g;
	pthread_mutex_unlock(&r->mu);
	*out = tm;
	return TRANSPORT_OK;
nomem:
	pthread_mutex_unlock(&r->mu);
	free(tm);
	return TRANSPORT_ENOMEM;
}

int tp_rdma_regs_remove(rdma_regs *r, transport_mr *tm)
{
	if (!tm)
		return TRANSPORT_OK;
	rdma_reg *g = tm->impl;
	int err = TRANSPORT_EADDR;
	pthread_mutex_lock(&r->mu);
	for (int i = 0; i < r->n; i++) {
		if (r->v[i] != g)
			continue;
		err = TRANSPORT_OK;
		if (--g->refs == 0) {
			/* The peer may still hold the rkey, but only of a frame whose
			 * send has returned: it never reads it again. */
			tp_rdma_v.dereg_mr(g->mr);
			memmove(&r->v[i], &r->v[i + 1], (size_t)(r->n - i - 1) * sizeof(*r->v));
			__atomic_store_n(&r->n, r->n - 1, __ATOMIC_RELAXED);
			free(g);
		}
		break;
	}
	pthread_mutex_unlock(&r->mu);
	if (err)
		LOG_WARN("transport", "rdma: dereg_mem of an unknown registration (%p)", tm->addr);
	free(tm);
	return err;
}

int tp_rdma_regs_find(rdma_regs *r, const void *addr, size_t len, uint32_t *lkey, uint32_t *rkey)
{
	uintptr_t a = (uintptr_t)addr;
	int found = 0;
	if (!addr || __atomic_load_n(&r->n, __ATOMIC_RELAXED) == 0)
		return 0; /* the common tcp-like case: nothing registered, no lock */
	pthread_mutex_lock(&r->mu);
	rdma_reg *g = covering(r, a, a + len);
	if (g) {
		*lkey = g->mr->lkey;
		*rkey = g->mr->rkey;
		found = 1;
	}
	pthread_mutex_unlock(&r->mu);
	return found;
}
