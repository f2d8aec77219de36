/*
 * Host functions run in a client thread when the server says a stream reached
 * them (a hostfn event); the stream waits until we answer hostfn_done. The
 * receiver thread only queues them (a slow host function must not hold up every
 * reply); one thread of ours runs them in the order the server reached them.
 *
 * Each function the server may call has an id: one of a stream
 * (cudaLaunchHostFunc) is called once and forgotten; one of a graph's host node
 * (captured, or cudaGraphAddHostNode) is called at every replay and kept until
 * the server says no graph or exec holds it any more (a hostfn_forget event), or
 * the call that registered it failed.
 */
#define _GNU_SOURCE /* pthread_setname_np */

#include <stdlib.h>

#include "rg_log.h"
#include "rpc.h"
#include "rt.h"

typedef struct hostfn {
	uint64_t id;
	uint64_t after_seq; /* async copies to host sent before it must land first */
	void (*fn)(void *);
	void *data;
	fe_device *dev;
	int node; /* a host node's: called at every replay, kept until forgotten */
	struct hostfn *next;
} hostfn;

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	hostfn *registered, *ready, **ready_tail;
	int started;
	pthread_t thread;
} H = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};
static _Thread_local int on_thread; /* this is the thread that runs them */

/* While a host function runs, its stream (and, through the legacy stream's
 * implicit synchronisation, every call on the legacy stream) waits for it:
 * our own calls on its behalf (managed coherence) must use a stream that waits
 * for nothing. */
int fe_hostfn_in_thread(void) { return on_thread; }

static void *hostfn_main(void *arg)
{
	pthread_setname_np(pthread_self(), "rg-hostfn");
	on_thread = 1;
	for (;;) {
		pthread_mutex_lock(&H.lock);
		while (!H.ready)
			pthread_cond_wait(&H.cond, &H.lock);
		hostfn *h = H.ready;
		H.ready = h->next;
		pthread_mutex_unlock(&H.lock);
		/* The stream reached the host function, so every copy to host queued
		 * before it is done on the GPU: let its bytes land before user code
		 * looks at them. */
		fe_conn_drain_detached_before(h->dev->conn, h->after_seq);
		if (h->fn)
			h->fn(h->data);
		fe_rpc_hostfn_done(h->dev->conn, h->id);
		free(h);
	}
	return NULL;
}

/* After fork the callback thread is the parent's, and the functions waiting for
 * the parent's sessions are gone (a reset device's are dropped by its calls as
 * they fail). */
static void forget(int dev)
{
	if (dev != FE_RT_FORK)
		return;
	pthread_mutex_init(&H.lock, NULL);
	pthread_cond_init(&H.cond, NULL);
	H.registered = H.ready = NULL;
	H.started = 0;
}

static uint64_t add(void (*fn)(void *), void *data, uint64_t after_seq, int node)
{
	hostfn *h = calloc(1, sizeof(*h));
	if (!h)
		return 0;
	h->id = fe_rt_new_id();
	h->after_seq = after_seq;
	h->fn = fn;
	h->data = data;
	h->node = node;
	pthread_mutex_lock(&H.lock);
	if (!H.started) {
		pthread_attr_t a;
		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		H.started = pthread_create(&H.thread, &a, hostfn_main, NULL) == 0;
		pthread_attr_destroy(&a);
	}
	h->next = H.registered;
	H.registered = h;
	pthread_mutex_unlock(&H.lock);
	return H.started ? h->id : 0;
}

uint64_t fe_hostfn_register(void (*fn)(void *), void *data, uint64_t after_seq)
{
	return add(fn, data, after_seq, 0);
}

/* A host node's function: with no launch to order it after, it waits for no
 * copy (docs/STATUS.md). */
uint64_t fe_hostnode_register(void (*fn)(void *), void *data) { return add(fn, data, 0, 1); }

/* (H.lock) The registered function id, unlinked if unlink. */
static hostfn *find_locked(uint64_t id, int unlink)
{
	hostfn **pp = &H.registered;
	while (*pp && (*pp)->id != id)
		pp = &(*pp)->next;
	hostfn *h = *pp;
	if (h && unlink)
		*pp = h->next;
	return h;
}

void fe_hostnode_drop(uint64_t id)
{
	pthread_mutex_lock(&H.lock);
	hostfn *h = find_locked(id, 1);
	pthread_mutex_unlock(&H.lock);
	free(h);
}

int fe_hostnode_lookup(uint64_t id, void (**fn)(void *), void **data)
{
	pthread_mutex_lock(&H.lock);
	hostfn *h = find_locked(id, 0);
	if (h) {
		*fn = h->fn;
		*data = h->data;
	}
	pthread_mutex_unlock(&H.lock);
	return h != NULL;
}

/* Called by the receiver thread: must not run user code itself. gone: the
 * server forgot a host node's function. */
static void dispatch(void *ctx, uint64_t id, int gone)
{
	hostfn *run = NULL;
	pthread_mutex_lock(&H.lock);
	hostfn *h = find_locked(id, 0);
	if (h && !gone && h->node) {
		/* A replay: a call of its own; the function stays. */
		if ((run = malloc(sizeof(*run)))) {
			*run = *h;
			run->node = 0;
		}
	} else if (h) {
		find_locked(id, 1);
		run = gone ? NULL : h;
	} else if (!gone && (run = calloc(1, sizeof(*run)))) {
		run->id = id; /* unknown: answered all the same, or the stream would wait for good */
	}
	if (run) {
		run->next = NULL;
		run->dev = ctx;
		hostfn **tail = &H.ready;
		while (*tail)
			tail = &(*tail)->next;
		*tail = run;
		pthread_cond_signal(&H.cond);
	}
	pthread_mutex_unlock(&H.lock);
	if (gone)
		free(h);
	if (!h)
		LOG_WARN("frontend", "server %s unknown host function %llu", gone ? "forgot" : "reached",
			 (unsigned long long)id);
	if (!gone && !run)
		LOG_ERROR("frontend", "out of memory: host function %llu not called", (unsigned long long)id);
}

__attribute__((constructor)) static void register_hooks(void)
{
	fe_rt_on_forget(forget);
	fe_rt_on_hostfn(dispatch);
}
