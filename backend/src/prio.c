/*
 * Latency first: admission of batch work by each session's executor.
 *
 * Sessions of different tenants are different processes with a context each,
 * and the GPU time-slices between contexts: a training job with a deep queue
 * of kernels takes half the GPU from an inference service whenever both have
 * work, whatever either asks. So the server decides what reaches the GPU:
 *
 *   - A session of a latency tenant is "busy" from the moment its executor
 *     takes frames until its executor and its waiter (the replies of
 *     synchronising calls, which wait for the GPU) both have nothing left and,
 *     after a run of many frames, the GPU has done them (a marker event on the
 *     legacy stream, which the waiter waits for), and BE_PRIO_LINGER_US longer
 *     (the gaps between a client's calls). It
 *     says so in the tenant ledger that every session process maps (its slot's
 *     busy flag, the ledger's count of busy latency sessions).
 *   - A session of a batch tenant looks at that count before each frame its
 *     executor runs. While it is not zero the executor holds the frame back,
 *     polling every BE_PRIO_POLL_US, for at most --batch-hold-ms. A hold that
 *     reaches the bound lets the session run unheld for --batch-run-ms, so a
 *     batch tenant keeps at least run/(hold+run) of the time when latency work
 *     never stops.
 *   - Holding new work is not enough: what a batch session already queued on
 *     the GPU runs ahead of the latency work that arrives. So while latency
 *     tenants have sessions, a batch session records a marker event on the
 *     legacy stream (which orders every blocking stream) every
 *     --batch-ahead/BE_PRIO_MARKS async frames, and before it records one more
 *     than BE_PRIO_MARKS waits for the oldest (polling, at most --batch-hold-ms):
 *     at most about --batch-ahead launches are ever ahead of the latency
 *     tenant's. Markers are skipped
 *     while the session captures a graph (an event on the legacy stream would
 *     break the capture).
 *   - Streams the server creates get the greatest priority for latency
 *     sessions and the least for batch ones (what the client asked is
 *     replaced): it orders the kernels of one context, so it counts where
 *     sessions share a process (--isolation thread).
 *
 * Under --priority mps (mps.c) the GPU itself runs the tenants' kernels side
 * by side, with the class as the MPS client priority, and none of the above
 * runs; mps+admit keeps it on top.
 *
 * What is held is whole frames in arrival order, so nothing a client sees
 * changes but when. Queries the loop thread answers inline (be_executor_run_inline)
 * are never held: they submit no GPU work. Counters per tenant (holds, time
 * held, holds that reached the bound, waits for work ahead, busy and held
 * sessions now) go to remote-smi and /metrics through the ledger.
 */
#include "backend.h"
#include "prio.h"
#include "tenant_ledger.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BE_PRIO_POLL_US 50
#define BE_PRIO_MARKS 4
#define BE_PRIO_MARK_BURST 16 /* latency: frames in one run that earn a marker at its end */

typedef struct be_prio_sess {
	be_ledger *l;
	uint32_t slot, klass;
	atomic_int running;  /* latency: the executor runs frames it took (be_prio_busy .. be_prio_idle) */
	uint32_t burst;      /* latency: frames run since the last be_prio_idle */
	uint64_t free_until; /* batch: no hold before this (after a hold reached the bound) */
	uint32_t since_mark, every;
	CUevent mark[BE_PRIO_MARKS]; /* oldest at head */
	unsigned head, n;
} be_prio_sess;

static struct {
	int off, mps;
	unsigned hold_ms, run_ms, ahead;
} P = {0, 0, BE_PRIO_DEFAULT_HOLD_MS, BE_PRIO_DEFAULT_RUN_MS, BE_PRIO_DEFAULT_AHEAD};

static int opt_num(const char *opt, const char *v, unsigned lo, unsigned hi, unsigned *out)
{
	char *end;
	errno = 0;
	unsigned long n = strtoul(v, &end, 10);
	if (errno || end == v || *end || *v == '-' || n < lo || n > hi) {
		fprintf(stderr, "remote-gpud: %s %s: expected a number from %u to %u\n", opt, v, lo, hi);
		return 2;
	}
	*out = (unsigned)n;
	return 0;
}

int be_prio_option(const char *opt, const char *v)
{
	if (!strcmp(opt, "--priority")) {
		/* mps: the GPU runs the session processes' kernels side by side
		 * with the class's MPS client priority (mps.c), no admission;
		 * mps+admit: both. */
		if (strcmp(v, "admit") && strcmp(v, "off") && strcmp(v, "mps") && strcmp(v, "mps+admit")) {
			fprintf(stderr, "remote-gpud: --priority %s: expected admit, off, mps or mps+admit\n", v);
			return 2;
		}
		P.off = !strcmp(v, "off") || !strcmp(v, "mps");
		P.mps = !strncmp(v, "mps", 3);
		return 0;
	}
	if (!strcmp(opt, "--batch-hold-ms"))
		return opt_num(opt, v, 1, 60000, &P.hold_ms);
	if (!strcmp(opt, "--batch-run-ms"))
		return opt_num(opt, v, 0, 60000, &P.run_ms);
	if (!strcmp(opt, "--batch-ahead"))
		return opt_num(opt, v, BE_PRIO_MARKS, 1000000, &P.ahead);
	return -1;
}

int be_prio_mps(void) { return P.mps; }

void be_prio_publish(be_ledger *l)
{
	l->prio.on = !P.off;
	l->prio.ahead = P.ahead;
	l->prio.hold_ns = (uint64_t)P.hold_ms * 1000000u;
	l->prio.run_ns = (uint64_t)P.run_ms * 1000000u;
	l->prio.linger_ns = (uint64_t)BE_PRIO_LINGER_US * 1000u;
	if (l->prio.on)
		LOG_INFO(BE_LOG, "latency first: batch work held up to %u ms while latency work runs, then %u ms unheld; "
			 "at most ~%u launches ahead", P.hold_ms, P.run_ms, P.ahead);
}

static void waiter_idle(be_session *s);

void be_prio_login(be_session *s, be_ledger *l, uint32_t slot)
{
	uint32_t klass = l->slot[slot].klass;
	if (!l->prio.on || (klass != BE_TENANT_LATENCY && klass != BE_TENANT_BATCH))
		return;
	be_prio_sess *p = calloc(1, sizeof(*p));
	if (!p) {
		LOG_WARN(BE_LOG, "session %" PRIu64 ": out of memory: served without its class's priority", s->id);
		return;
	}
	p->l = l;
	p->slot = slot;
	p->klass = klass;
	p->every = l->prio.ahead / BE_PRIO_MARKS;
	s->prio = p;
	if (klass == BE_TENANT_LATENCY)
		s->w.on_idle = waiter_idle;
}

void be_prio_drop(be_session *s)
{
	be_prio_sess *p = s->prio;
	if (!p)
		return;
	for (; p->n; p->n--, p->head = (p->head + 1) % BE_PRIO_MARKS)
		be_drv.cuEventDestroy(p->mark[p->head]);
}

void be_prio_logout(be_session *s)
{
	be_prio_sess *p = s->prio;
	if (!p)
		return;
	be_ledger_busy(p->l, p->slot, 0, rg_clock_ns());
	s->w.on_idle = NULL;
	free(p);
	s->prio = NULL;
}

void be_prio_busy(be_session *s)
{
	be_prio_sess *p = s->prio;
	if (p->klass != BE_TENANT_LATENCY)
		return;
	atomic_store(&p->running, 1);
	be_ledger_busy(p->l, p->slot, 1, 0);
}

/* The legacy stream orders every blocking stream: an event recorded there is
 * past all the session's work queued so far. Not while a capture is under way
 * (it would break the capture). */
static int legacy_capturing(void)
{
	CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
	return be_drv.cuStreamIsCapturing &&
	       (be_drv.cuStreamIsCapturing(NULL, &cs) != CUDA_SUCCESS || cs != CU_STREAM_CAPTURE_STATUS_NONE);
}

static void unmark(be_prio_sess *p) { be_ledger_busy(p->l, p->slot, 0, rg_clock_ns()); }

/* The executor has run what it took, and still holds the run (q_busy): the
 * session's context is its own. The GPU may still be at the work: unless the
 * waiter has entries (which say when it is done), a marker after it goes to
 * the waiter, and the waiter's end of it makes the session quiet. Only after
 * BE_PRIO_MARK_BURST frames: a client that sends its launches one by one (a
 * token of greedy generation) keeps the GPU up with them, the linger covers
 * the rest, and a marker (an event record, a waiter wake-up: microseconds)
 * after each would slow the very session it serves. running and
 * the waiter's busy are stored and then the other read, both sequentially
 * consistent: of the executor here and the waiter ending its last entry, at
 * least one sees the other done, and unmarks. */
void be_prio_idle(be_session *s)
{
	be_prio_sess *p = s->prio;
	if (p->klass != BE_TENANT_LATENCY)
		return;
	int marker = p->burst >= BE_PRIO_MARK_BURST;
	p->burst = 0;
	if (atomic_load(&s->q_len) == 0 && be_waiter_idle(s) &&
	    (!marker || !s->ctx || legacy_capturing() || be_waiter_after(s, NULL, NULL, NULL, 0, NULL) != 0 ||
	     be_waiter_idle(s)))
		unmark(p);
	atomic_store(&p->running, 0);
	if (atomic_load(&s->q_len) == 0 && be_waiter_idle(s))
		unmark(p);
}

/* The waiter finished its last entry (its on_idle, registered at login). */
static void waiter_idle(be_session *s)
{
	be_prio_sess *p = s->prio;
	if (p->klass == BE_TENANT_LATENCY && !atomic_load(&p->running) && atomic_load(&s->q_len) == 0)
		unmark(p);
}

/* Latency work under way, or ended less than the linger ago. */
static int latency_busy(const be_ledger *l, uint64_t now)
{
	if (atomic_load_explicit(&l->prio.busy, memory_order_acquire))
		return 1;
	uint64_t q = atomic_load_explicit(&l->prio.quiet_ns, memory_order_relaxed);
	return q && now < q + l->prio.linger_ns;
}

void be_prio_admit(be_session *s)
{
	be_prio_sess *p = s->prio;
	be_ledger *l = p->l;
	if (p->klass != BE_TENANT_BATCH || (!atomic_load_explicit(&l->prio.busy, memory_order_relaxed) &&
					      !atomic_load_explicit(&l->prio.quiet_ns, memory_order_relaxed)))
		return;
	uint64_t t0 = rg_clock_ns(), now = t0;
	if (now < p->free_until || !latency_busy(l, now))
		return;
	be_ledger_tenant *t = &l->t[l->slot[p->slot].tenant];
	atomic_fetch_add(&t->holds, 1);
	atomic_fetch_add(&t->held_now, 1);
	int timed_out = 0;
	while (latency_busy(l, now) && !atomic_load(&s->closing)) {
		if (now - t0 >= l->prio.hold_ns) {
			timed_out = 1;
			break;
		}
		struct timespec ts = {0, BE_PRIO_POLL_US * 1000};
		nanosleep(&ts, NULL);
		now = rg_clock_ns();
	}
	atomic_fetch_add(&t->held_ns, now - t0);
	atomic_fetch_sub(&t->held_now, 1);
	if (timed_out) {
		atomic_fetch_add(&t->hold_timeouts, 1);
		p->free_until = now + l->prio.run_ns;
	}
}

/* A marker after the work queued so far; the oldest waited for when there
 * are BE_PRIO_MARKS. */
static void mark(be_session *s, be_prio_sess *p)
{
	if (legacy_capturing())
		return;
	if (p->n == BE_PRIO_MARKS) {
		CUevent old = p->mark[p->head];
		if (be_drv.cuEventQuery(old) == CUDA_ERROR_NOT_READY) {
			be_ledger_tenant *t = &p->l->t[p->l->slot[p->slot].tenant];
			atomic_fetch_add(&t->ahead_waits, 1);
			/* Polled, and no longer than a hold: the GPU work behind the
			 * marker may wait on something only a later frame brings (a
			 * stream waiting on a value a later copy writes). */
			uint64_t t0 = rg_clock_ns();
			while (be_drv.cuEventQuery(old) == CUDA_ERROR_NOT_READY && !atomic_load(&s->closing) &&
			       rg_clock_ns() - t0 < p->l->prio.hold_ns) {
				struct timespec ts = {0, BE_PRIO_POLL_US * 1000};
				nanosleep(&ts, NULL);
			}
		}
		be_drv.cuEventDestroy(old);
		p->head = (p->head + 1) % BE_PRIO_MARKS;
		p->n--;
	}
	CUevent ev;
	if (be_drv.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
		return;
	if (be_drv.cuEventRecord(ev, NULL) != CUDA_SUCCESS) {
		be_drv.cuEventDestroy(ev);
		return;
	}
	p->mark[(p->head + p->n) % BE_PRIO_MARKS] = ev;
	p->n++;
}

void be_prio_ran(be_session *s, int async)
{
	be_prio_sess *p = s->prio;
	p->burst++;
	if (p->klass != BE_TENANT_BATCH || !async || !s->ctx ||
	    !atomic_load_explicit(&p->l->prio.latency_sessions, memory_order_relaxed))
		return;
	if (++p->since_mark < p->every)
		return;
	p->since_mark = 0;
	mark(s, p);
}

int be_prio_stream_priority(be_session *s, int asked)
{
	be_prio_sess *p = s->prio;
	int least, greatest;
	if (!p || be_drv.cuCtxGetStreamPriorityRange(&least, &greatest) != CUDA_SUCCESS)
		return asked;
	return p->klass == BE_TENANT_LATENCY ? greatest : least;
}
