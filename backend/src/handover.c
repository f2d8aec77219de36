/*
 * Memory handed between tenants (handover.h; docs/TENANTS.md).
 *
 * A batch tenant's program often holds device memory it is not using: PyTorch's
 * caching allocator keeps freed blocks, memory pools keep their reserve. When a
 * latency tenant's allocation finds the device full, its session asks every
 * batch session to have its client give that memory back, waits for the
 * answers (at most --handover-wait-ms) and tries the allocation once more.
 *
 * The sessions are separate processes, so the request goes through the tenant
 * ledger they all map: the latency session bumps each batch slot's
 * release_req, a futex word, and wakes it. A thread of each batch session
 * waits on that word and sends its client a release event; the client trims
 * its pools, runs the program's hook and answers release_done, which the
 * executor runs after the frees the client sent before it. Its handler stores
 * done = req in the slot and wakes the latency session, which waits on that
 * word. What the batch session's charge fell by since the request is what it
 * released, as the server sees it.
 *
 * A client that never answers (busy, stopped, gone) costs the latency
 * allocation the bound and no more. A batch tenant's own allocation that the
 * device cannot serve may wait for memory, trying again every millisecond for
 * at most --batch-alloc-wait-ms, unless a release is asked of it meanwhile
 * (its client could not answer while the call waits).
 */
#include "backend.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "handover.h"
#include "ops.h"
#include "rg_clock.h"
#include "tenant_ledger.h"

#define WATCH_TICK_NS 100000000ull /* the watcher looks at its stop flag this often */
#define BATCH_RETRY_NS 1000000ull  /* a waiting batch allocation tries again this often */

typedef struct be_handover_sess {
	be_session *s;
	be_ledger *l;
	uint32_t slot;
	atomic_int stop;
	pthread_t th;
} be_handover_sess;

static struct {
	unsigned wait_ms, batch_wait_ms;
	be_ledger *l; /* the session process's ledger (from the first login) */
} H = {BE_HANDOVER_DEFAULT_WAIT_MS, 0, NULL};

static void futex_wait(_Atomic uint32_t *w, uint32_t v, uint64_t ns)
{
	struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
	syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT, v, &ts, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *w) { syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE, INT_MAX, NULL, NULL, 0); }

static int opt_ms(const char *opt, const char *v, unsigned *out)
{
	char *end;
	errno = 0;
	unsigned long n = strtoul(v, &end, 10);
	if (errno || end == v || *end || *v == '-' || n > 600000) {
		fprintf(stderr, "remote-gpud: %s %s: expected a number from 0 to 600000\n", opt, v);
		return 2;
	}
	*out = (unsigned)n;
	return 0;
}

int be_handover_option(const char *opt, const char *v)
{
	if (!strcmp(opt, "--handover-wait-ms"))
		return opt_ms(opt, v, &H.wait_ms);
	if (!strcmp(opt, "--batch-alloc-wait-ms"))
		return opt_ms(opt, v, &H.batch_wait_ms);
	return -1;
}

void be_handover_publish(be_ledger *l)
{
	l->prio.handover_ns = (uint64_t)H.wait_ms * 1000000u;
	l->prio.batch_wait_ns = (uint64_t)H.batch_wait_ms * 1000000u;
}

/* ---- batch sessions: requests to the client, its answers ---- */

static void *watch_main(void *arg)
{
	be_handover_sess *h = arg;
	be_ledger_slot *sl = &h->l->slot[h->slot];
	uint32_t seen = atomic_load(&sl->release_done);

	pthread_setname_np(pthread_self(), "rg-handover");
	while (!atomic_load(&h->stop)) {
		uint32_t req = atomic_load(&sl->release_req);
		if (req == seen) {
			futex_wait(&sl->release_req, req, WATCH_TICK_NS);
			continue;
		}
		seen = req;
		sl->release_base = be_ledger_slot_charged(h->l, h->slot);
		proto_msg m;
		proto_msg_begin(&m, PROTO_OP_RELEASE, 0, 1);
		proto_msg_u64(&m, req);
		int err = be_event_send(h->s, &m);
		if (err) { /* no client to answer: nothing will be released */
			LOG_INFO(BE_LOG, "session %" PRIu64 ": release request not sent: %s", h->s->id, transport_strerror(err));
			atomic_store(&sl->release_done, req);
			futex_wake(&sl->release_done);
		} else {
			LOG_DEBUG(BE_LOG, "session %" PRIu64 ": asked its client to release (holds %" PRIu64 " bytes)",
				  h->s->id, sl->release_base);
		}
	}
	return NULL;
}

void be_handover_login(be_session *s, be_ledger *l, uint32_t slot)
{
	H.l = l;
	if (l->slot[slot].klass != BE_TENANT_BATCH)
		return;
	be_handover_sess *h = calloc(1, sizeof(*h));
	if (!h) {
		LOG_WARN(BE_LOG, "session %" PRIu64 ": out of memory: no release requests reach it", s->id);
		return;
	}
	h->s = s;
	h->l = l;
	h->slot = slot;
	if (pthread_create(&h->th, NULL, watch_main, h) != 0) {
		LOG_WARN(BE_LOG, "session %" PRIu64 ": no thread: no release requests reach it", s->id);
		free(h);
		return;
	}
	s->handover = h;
}

int be_handover_listens(const be_session *s) { return s->handover != NULL; }

void be_handover_logout(be_session *s)
{
	be_handover_sess *h = s->handover;
	if (!h)
		return;
	atomic_store(&h->stop, 1);
	futex_wake(&h->l->slot[h->slot].release_req);
	pthread_join(h->th, NULL);
	be_ledger_slot *sl = &h->l->slot[h->slot];
	atomic_store(&sl->release_done, atomic_load(&sl->release_req));
	futex_wake(&sl->release_done);
	s->handover = NULL;
	free(h);
}

int be_op_release_done(be_session *s, be_req *rq, uint64_t gen)
{
	(void)rq;
	be_handover_sess *h = s->handover;
	if (!h)
		return CUDA_SUCCESS; /* no request was sent: nothing to answer */
	be_ledger_slot *sl = &h->l->slot[h->slot];
	uint64_t now = be_ledger_slot_charged(h->l, h->slot);
	uint64_t freed = sl->release_base > now ? sl->release_base - now : 0;
	be_ledger_tenant *t = &h->l->t[sl->tenant];
	atomic_fetch_add(&t->releases, 1);
	atomic_fetch_add(&t->released_bytes, freed);
	LOG_INFO(BE_LOG, "session %" PRIu64 ": its client released %" PRIu64 " bytes", s->id, freed);
	atomic_store(&sl->release_done, (uint32_t)gen);
	futex_wake(&sl->release_done);
	return CUDA_SUCCESS;
}

int be_op_release(be_session *s, be_req *rq, uint64_t gen)
{
	(void)rq;
	(void)gen;
	LOG_INFO(BE_LOG, "session %" PRIu64 ": release is an event of the server's, not a request", s->id);
	return CUDA_ERROR_NOT_SUPPORTED;
}

/* ---- latency sessions: ask, wait ---- */

typedef struct asked {
	uint32_t slot, gen;
	int64_t pid;
} asked;

static int answered(be_ledger *l, const asked *a)
{
	const be_ledger_slot *sl = &l->slot[a->slot];
	return atomic_load(&sl->pid) != a->pid || (int32_t)(atomic_load(&sl->release_done) - a->gen) >= 0;
}

/* Asks every batch session; 1 once all answered, 0 at the bound, -1 if none
 * was there to ask. */
static int ask_batch(be_session *s, be_ledger *l)
{
	asked *a = malloc(sizeof(*a) * BE_LEDGER_SLOTS);
	size_t n = 0;
	if (!a)
		return -1;
	for (uint32_t i = 0; i < BE_LEDGER_SLOTS; i++) {
		be_ledger_slot *sl = &l->slot[i];
		int64_t pid = atomic_load(&sl->pid);
		if (!pid || sl->klass != BE_TENANT_BATCH || i == s->tenant_slot - 1)
			continue;
		a[n].slot = i;
		a[n].pid = pid;
		a[n].gen = atomic_fetch_add(&sl->release_req, 1) + 1;
		futex_wake(&sl->release_req);
		n++;
	}
	if (!n) {
		free(a);
		return -1;
	}
	LOG_INFO(BE_LOG, "session %" PRIu64 ": an allocation does not fit the device: asking %zu batch sessions to release",
		 s->id, n);
	uint64_t deadline = rg_clock_ns() + l->prio.handover_ns;
	int all = 0;
	for (;;) {
		size_t k = 0;
		while (k < n && answered(l, &a[k]))
			k++;
		if ((all = k == n))
			break;
		uint64_t now = rg_clock_ns();
		if (now >= deadline)
			break;
		uint64_t left = deadline - now;
		uint32_t done = atomic_load(&l->slot[a[k].slot].release_done);
		if (!answered(l, &a[k]))
			futex_wait(&l->slot[a[k].slot].release_done, done, left < 1000000u ? left : 1000000u);
	}
	free(a);
	return all;
}

CUresult be_handover_alloc(be_session *s, CUresult r, be_alloc_again_fn again, void *ctx)
{
	be_ledger *l = H.l;
	if (r != CUDA_ERROR_OUT_OF_MEMORY || !s->tenant_slot || !l)
		return r;
	be_ledger_slot *me = &l->slot[s->tenant_slot - 1];
	be_ledger_tenant *t = &l->t[me->tenant];
	if (me->klass == BE_TENANT_LATENCY && l->prio.handover_ns) {
		uint64_t t0 = rg_clock_ns();
		int all = ask_batch(s, l);
		if (all < 0)
			return r;
		atomic_fetch_add(&t->handovers, 1);
		if (!all)
			atomic_fetch_add(&t->handover_timeouts, 1);
		r = again(ctx);
		if (r == CUDA_SUCCESS)
			atomic_fetch_add(&t->handover_ok, 1);
		LOG_INFO(BE_LOG, "session %" PRIu64 ": handover %s in %.1f ms: the allocation %s", s->id,
			 all ? "answered" : "reached --handover-wait-ms", (double)(rg_clock_ns() - t0) / 1e6,
			 r == CUDA_SUCCESS ? "fits now" : "still does not fit");
		return r;
	}
	if (me->klass == BE_TENANT_BATCH && l->prio.batch_wait_ns) {
		uint64_t deadline = rg_clock_ns() + l->prio.batch_wait_ns;
		atomic_fetch_add(&t->alloc_waits, 1);
		while (r == CUDA_ERROR_OUT_OF_MEMORY && rg_clock_ns() < deadline &&
		       atomic_load(&me->release_req) == atomic_load(&me->release_done)) {
			struct timespec ts = {0, (long)BATCH_RETRY_NS};
			nanosleep(&ts, NULL);
			r = again(ctx);
		}
	}
	return r;
}
