/*
 * The parts of an rdma connection's core that need no device, on the host:
 *  - tp_rdma_ep_wait / tp_rdma_ep_wake: a thread sleeping on the condition is woken
 *    by a wake (well before its timeout), a wake with nobody waiting does
 *    nothing, and the count of waiters returns to zero;
 *  - released receive buffers wait for tp_rdma_ep_repost, a quarter of them
 *    triggers it at once, and a failed connection drops them without counting
 *    credits for them;
 *  - tp_rdma_ep_bulk_pending says bulk data moves exactly while READs are in
 *    flight, announced segments are unconsumed, or a frame is half received.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../unit/check.h"
#include "rdma_int.h"

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void ep_open(rdma_ep *ep)
{
	pthread_condattr_t ca;
	memset(ep, 0, sizeof(*ep));
	pthread_mutex_init(&ep->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&ep->cv, &ca);
	pthread_condattr_destroy(&ca);
}

static void ep_close(rdma_ep *ep)
{
	pthread_cond_destroy(&ep->cv);
	pthread_mutex_destroy(&ep->mu);
}

typedef struct waiter {
	rdma_ep *ep;
	uint64_t waited_ms;
} waiter;

static void *wait_main(void *arg)
{
	waiter *w = arg;
	uint64_t t0 = now_ms();
	pthread_mutex_lock(&w->ep->mu);
	tp_rdma_ep_wait(w->ep, 20000);
	pthread_mutex_unlock(&w->ep->mu);
	w->waited_ms = now_ms() - t0;
	return NULL;
}

static void test_wake(void)
{
	rdma_ep ep;
	ep_open(&ep);
	pthread_mutex_lock(&ep.mu);
	tp_rdma_ep_wake(&ep); /* nobody waits */
	pthread_mutex_unlock(&ep.mu);

	waiter w = {.ep = &ep};
	pthread_t th;
	pthread_create(&th, NULL, wait_main, &w);
	int waiting = 0;
	for (int i = 0; i < 10000 && !waiting; i++) {
		pthread_mutex_lock(&ep.mu);
		waiting = ep.cv_waiters == 1;
		if (waiting)
			tp_rdma_ep_wake(&ep);
		pthread_mutex_unlock(&ep.mu);
		if (!waiting)
			nanosleep(&(struct timespec){0, 1000000}, NULL);
	}
	CHECK(waiting);
	pthread_join(th, NULL);
	CHECK(w.waited_ms < 10000);
	CHECK_EQ(ep.cv_waiters, 0);
	ep_close(&ep);
}

static void test_release(void)
{
	rdma_ep ep;
	ep_open(&ep);
	ep.err = TRANSPORT_EIO; /* no QP: a repost must drop the buffers */
	for (unsigned i = 0; i + 1 < RDMA_NRECV / 4; i++)
		tp_rdma_ep_release_recv(&ep, i);
	CHECK_EQ(ep.rp_n, RDMA_NRECV / 4 - 1); /* not yet: they wait for a repost */
	tp_rdma_ep_release_recv(&ep, RDMA_NRECV / 4);
	CHECK_EQ(ep.rp_n, 0); /* a quarter: reposted at once (here: dropped) */
	CHECK_EQ(ep.owed, 0); /* no credit for a buffer that is not posted */
	tp_rdma_ep_release_recv(&ep, 1);
	tp_rdma_ep_repost(&ep);
	CHECK_EQ(ep.rp_n, 0);
	CHECK_EQ(ep.owed, 0);
	ep_close(&ep);
}

static void test_bulk_pending(void)
{
	rdma_ep ep;
	ep_open(&ep);
	CHECK_EQ(tp_rdma_ep_bulk_pending(&ep), 0); /* idle */
	ep.rx.rd_n = 2;
	CHECK_EQ(tp_rdma_ep_bulk_pending(&ep), 1); /* our READs in flight */
	ep.rx.rd_n = 0;
	ep.tx_segs = 5;
	ep.peer_acked = 3;
	CHECK_EQ(tp_rdma_ep_bulk_pending(&ep), 1); /* the peer reads our segments */
	ep.peer_acked = 5;
	CHECK_EQ(tp_rdma_ep_bulk_pending(&ep), 0);
	ep.tx_segs = 2; /* counters wrap: 0xffffffff + 3 */
	ep.peer_acked = 0xffffffffu;
	CHECK_EQ(tp_rdma_ep_bulk_pending(&ep), 1);
	ep.peer_acked = 2;
	ep.rx.active = 1;
	ep.rx.total = 1000;
	ep.rx.filled = 400;
	CHECK_EQ(tp_rdma_ep_bulk_pending(&ep), 1); /* segments of a frame still coming */
	ep.rx.filled = 1000;
	CHECK_EQ(tp_rdma_ep_bulk_pending(&ep), 0); /* whole, waiting to be taken */
	ep.rx.filled = 400;
	ep.err = TRANSPORT_EIO;
	CHECK_EQ(tp_rdma_ep_bulk_pending(&ep), 0); /* a failed connection moves nothing */
	ep_close(&ep);
}

int main(void)
{
	test_wake();
	test_release();
	test_bulk_pending();
	return check_summary("test_rdma_ep");
}
