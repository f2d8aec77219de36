/*
 * The executor: one thread per session that runs its frames in arrival order,
 * with the session's context current, and applies the handlers' return
 * convention (session.h).
 *
 * Queue. The loop thread appends under q_mu; the executor takes the whole list
 * at once and runs it without the lock. Before it sleeps on the condition
 * variable it spins for BE_SPIN_NS watching q_len: a client that issues calls
 * back to back (a launch right after a reply) then finds the executor awake,
 * which saves a futex wake-up (several microseconds) per call. The spin yields
 * the core between checks, so where cores are scarce the loop thread (which
 * brings the next frame) still gets to run. The loop only signals when the
 * executor is actually asleep.
 *
 * Inline runs. A sync op that never blocks (BE_OP_QUICK: a query, or a
 * synchronisation that polls briefly and leaves real waits to the waiter)
 * arriving while the queue is empty and no batch runs is run by the loop thread
 * itself (be_executor_run_inline): nothing can be ahead of it, so order is kept,
 * and the client's round trip saves the hand-off to the executor, the largest
 * cost of a query where cores are few. q_busy says a batch is running: the
 * executor sets it when it takes one, the loop claims it for an inline run.
 * Small synchronous copies (BE_OP_NOW: a D2H copy into pinned staging, a
 * copy between a registered shared region and the device) run the same way:
 * the copy is queued on its stream after everything the executor issued
 * before (all of it, as nothing is queued or running), so the GPU's stream
 * order, the legacy stream's implicit synchronisation included, is what it
 * would have been on the executor; the reply goes from the loop thread when
 * the copy's event completes within BE_FAST_NS, else from the waiter as
 * usual. A handler that would have to block (no idle staging buffer, a
 * region the driver did not register) answers BE_NOT_NOW before doing
 * anything, and the frame goes to the executor. Sessions with a priority
 * class (--tenants) run them on the executor, which holds batch work back.
 *
 * At the end (q_stop, set by on_close) whatever is still queued is dropped
 * unanswered (the connection is gone) and the executor tears the session down.
 */
#include "backend.h"

#include <inttypes.h>
#include <stdlib.h>

#include "dispatch.h"
#include "prio.h"

static void *executor_main(void *arg);
static be_req *take(be_session *s, int *stop);
static int run_frame(be_session *s, be_req *rq);
static void finish(be_session *s, be_req *rq, int sync, int st);

int be_executor_start(be_session *s, be_session_fn at_end)
{
	s->exec_at_end = at_end;
	return pthread_create(&s->exec_thread, NULL, executor_main, s) == 0 ? 0 : -1;
}

void be_executor_push(be_session *s, be_req *rq)
{
	rq->next = NULL;
	pthread_mutex_lock(&s->q_mu);
	*s->q_tail = rq;
	s->q_tail = &rq->next;
	atomic_fetch_add_explicit(&s->q_len, 1, memory_order_release);
	if (s->q_sleeping)
		pthread_cond_signal(&s->q_cv);
	pthread_mutex_unlock(&s->q_mu);
}

void be_executor_stop(be_session *s)
{
	pthread_mutex_lock(&s->q_mu);
	s->q_stop = 1;
	pthread_cond_signal(&s->q_cv);
	pthread_mutex_unlock(&s->q_mu);
}

static be_req *take(be_session *s, int *stop)
{
	be_req *batch;

	if (atomic_load_explicit(&s->q_len, memory_order_acquire) == 0) {
		rg_spin sp;
		rg_spin_start(&sp, BE_SPIN_NS);
		while (atomic_load_explicit(&s->q_len, memory_order_acquire) == 0 && !atomic_load(&s->closing) &&
		       rg_spin_on(&sp))
			be_spin_step();
	}
	pthread_mutex_lock(&s->q_mu);
	while (!s->q_head && !s->q_stop) {
		s->q_sleeping = 1;
		pthread_cond_wait(&s->q_cv, &s->q_mu);
		s->q_sleeping = 0;
	}
	batch = s->q_head;
	s->q_head = NULL;
	s->q_tail = &s->q_head;
	/* q_busy before q_len: the loop that sees the queue emptied sees the batch. */
	atomic_store_explicit(&s->q_busy, batch != NULL, memory_order_relaxed);
	atomic_store(&s->q_len, 0);
	*stop = s->q_stop;
	pthread_mutex_unlock(&s->q_mu);
	return batch;
}

static void idle(be_session *s) { atomic_store_explicit(&s->q_busy, 0, memory_order_release); }

int be_executor_idle(be_session *s)
{
	return atomic_load_explicit(&s->q_len, memory_order_acquire) == 0 &&
	       atomic_load_explicit(&s->q_busy, memory_order_acquire) == 0;
}

static _Thread_local int in_inline;

int be_inline_now(void) { return in_inline; }

int be_executor_run_inline(be_session *s, be_req *rq)
{
	/* The loop thread is the queue's only producer: with nothing queued, only
	 * a batch the executor took can be ahead, and q_busy says so. The claim
	 * needs no q_mu, and its acquire sees what that batch did (the context
	 * hello made). q_stop is the loop thread's own. */
	int idle0 = 0;
	if (atomic_load_explicit(&s->q_len, memory_order_acquire) != 0 ||
	    !atomic_compare_exchange_strong_explicit(&s->q_busy, &idle0, 1, memory_order_acquire, memory_order_relaxed))
		return 0;
	if (s->q_stop || !s->ctx) {
		idle(s);
		return 0;
	}
	if (!atomic_load(&s->closing)) {
		in_inline = 1;
		s->run_more = rq->frame.followed; /* the next request is in already */
		int ran = run_frame(s, rq);
		in_inline = 0;
		if (be_ops[rq->view.op].flags & BE_OP_NOW)
			atomic_fetch_add_explicit(ran ? &s->now_inline : &s->now_handed, 1, memory_order_relaxed);
		if (!ran) {
			idle(s);
			return 0;
		}
	}
	be_frame_free(s, be_frame_of(rq));
	idle(s); /* the loop is the only producer and was busy here: nothing was pushed */
	return 1;
}

static void *executor_main(void *arg)
{
	be_session *s = arg;
	pthread_setname_np(pthread_self(), "rg-exec");
	be_driver_thread_relaxed();

	for (;;) {
		int stop;
		be_req *rq = take(s, &stop);
		if (rq && s->prio)
			be_prio_busy(s);
		while (rq) {
			be_req *next = rq->next;
			if (!stop && !atomic_load(&s->closing)) {
				if (s->prio)
					be_prio_admit(s);
				s->run_more = next != NULL;
				run_frame(s, rq);
				if (s->prio)
					be_prio_ran(s, (be_frame_of(rq)->flags & PROTO_F_ASYNC) != 0);
			}
			be_frame_free(s, be_frame_of(rq));
			rq = next;
		}
		if (s->prio)
			be_prio_idle(s);
		idle(s);
		if (stop)
			break;
		if (s->ctx)
			be_staging_grow(&s->staging, 0);
	}
	s->exec_at_end(s);
	/* The loop joins this thread in on_done: nothing of s is touched after. */
	uv_async_send(&s->done_async);
	return NULL;
}

/* The return convention of session.h. */
static void finish(be_session *s, be_req *rq, int sync, int st)
{
	if (st == BE_REPLIED || st == BE_DEFERRED)
		return;
	if (st == BE_EPROTO) {
		LOG_WARN(BE_LOG, "session %" PRIu64 ": %s (seq %" PRIu64 "): malformed arguments", s->id,
			 proto_op_name(rq->view.op), rq->seq);
		st = CUDA_ERROR_INVALID_VALUE;
	}
	if (st < 0) {
		/* a reply that could not be sent (TRANSPORT_E*): the connection is closing */
		if (st > TRANSPORT_EIO || st <= -200)
			LOG_ERROR(BE_LOG, "session %" PRIu64 ": %s (seq %" PRIu64 "): the handler returned %d, outside "
				  "session.h's convention: no reply", s->id, proto_op_name(rq->view.op), rq->seq, st);
		return;
	}
	/* module_load's FILE_NOT_FOUND asks for the image: part of the protocol */
	if (st != CUDA_SUCCESS && !(st == CUDA_ERROR_FILE_NOT_FOUND && rq->view.op == PROTO_OP_MODULE_LOAD))
		be_stat_error(s->stat);
	if (st != CUDA_SUCCESS)
		LOG_DEBUG(BE_LOG, "session %" PRIu64 ": %s (seq %" PRIu64 "): %s", s->id, proto_op_name(rq->view.op),
			  rq->seq, be_errname(st));
	if (sync)
		be_reply_status(s, rq, st);
	else
		be_latch(s, st);
}

/* 0: a +now handler run inline found it would block (BE_NOT_NOW). */
static int run_frame(be_session *s, be_req *rq)
{
	be_frame *fr = be_frame_of(rq);
	uint32_t op = rq->view.op;

	if (atomic_load(&s->rejected))
		return 1;
	if (op == PROTO_OP_REPLY || op >= PROTO_OP_COUNT || !be_ops[op].run) {
		if (!s->unknown_logged) {
			s->unknown_logged = 1;
			LOG_WARN(BE_LOG, "session %" PRIu64 ": unknown op %" PRIu32 " (answered not supported; "
				 "later unknown ops of this session are not logged)", s->id, op);
		}
		if (!atomic_load(&s->hello_ok)) {
			be_reply_status(s, rq, CUDA_ERROR_NOT_INITIALIZED);
			be_session_reject(s, "unknown op before hello");
			return 1;
		}
		finish(s, rq, !(fr->flags & PROTO_F_ASYNC), CUDA_ERROR_NOT_SUPPORTED);
		return 1;
	}
	const be_op_desc *d = &be_ops[op];
	int sync = (d->flags & BE_OP_SYNC) != 0;
	if (op != PROTO_OP_HELLO && !atomic_load(&s->hello_ok)) {
		be_reply_status(s, rq, CUDA_ERROR_NOT_INITIALIZED);
		be_session_reject(s, "op before a successful hello");
		return 1;
	}
	/* A request's status field names its device (proto.h); hello makes the
	 * contexts, so it runs before any is selected. */
	int st = op == PROTO_OP_HELLO ? CUDA_SUCCESS : be_session_select(s, (uint32_t)rq->view.status);
	if (st == CUDA_SUCCESS)
		st = fr->payload_lost ? CUDA_ERROR_OUT_OF_MEMORY : d->run(s, rq);
	if (st == BE_NOT_NOW && in_inline)
		return 0;
	finish(s, rq, sync, st);
	be_stat_mem(s->stat, s->ranges.bytes);
	return 1;
}
