/*
 * Memory handed between tenants, the client's half (docs/TENANTS.md): the
 * server asks a batch tenant's client to give back the device memory its
 * program caches (a release event), so that a latency tenant's allocation fits.
 * The receiver thread only queues the request; a thread of ours trims every
 * device's default and current memory pool to nothing kept, calls the hook the
 * program installed (remote_gpu_set_release_hook, include/remote_gpu.h; for
 * PyTorch torch.cuda.empty_cache()), and answers release_done. Its frees went
 * out before the answer on the same connection, and the server runs them in
 * order, so what the server counts as released is what they freed.
 *
 * Graph memory is not trimmed: cudaDeviceGraphMemTrim is not forwarded (an
 * exec's reserve goes with the exec).
 */
#define _GNU_SOURCE /* pthread_setname_np */

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdlib.h>

#include "conn.h"
#include "remote_gpu.h"
#include "rg_log.h"
#include "rpc.h"
#include "rt.h"

#define RELEASE_QUEUE 16 /* connections with a request open at once */

typedef struct ask {
	fe_conn *c;
	uint64_t gen;
} ask;

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	ask q[RELEASE_QUEUE];
	int n, started;
	pthread_t thread;
	void (*hook)(void *);
	void *arg;
} R = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};

void remote_gpu_set_release_hook(void (*fn)(void *), void *arg)
{
	pthread_mutex_lock(&R.lock);
	R.hook = fn;
	R.arg = arg;
	pthread_mutex_unlock(&R.lock);
}

static void trim_pools(void)
{
	int n = 0;
	if (cudaGetDeviceCount(&n) != cudaSuccess)
		return;
	for (int d = 0; d < n; d++) {
		cudaMemPool_t def = NULL, cur = NULL;
		if (cudaDeviceGetDefaultMemPool(&def, d) == cudaSuccess)
			cudaMemPoolTrimTo(def, 0);
		if (cudaDeviceGetMemPool(&cur, d) == cudaSuccess && cur != def)
			cudaMemPoolTrimTo(cur, 0);
	}
}

static void *release_main(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "rg-release");
	pthread_mutex_lock(&R.lock);
	for (;;) {
		while (!R.n)
			pthread_cond_wait(&R.cond, &R.lock);
		ask a = R.q[0];
		R.n--;
		for (int i = 0; i < R.n; i++)
			R.q[i] = R.q[i + 1];
		void (*hook)(void *) = R.hook;
		void *harg = R.arg;
		pthread_mutex_unlock(&R.lock);
		trim_pools();
		if (hook)
			hook(harg);
		LOG_INFO("frontend", "released cached device memory at the server's request%s",
			 hook ? " (pools trimmed, hook called)" : " (pools trimmed; no hook installed)");
		fe_rpc_release_done(a.c, a.gen);
		pthread_mutex_lock(&R.lock);
	}
	return NULL;
}

/* The receiver thread: queue it (a newer request of one connection replaces
 * its older one: one release answers both). */
static void on_release(fe_conn *c, uint64_t gen)
{
	pthread_mutex_lock(&R.lock);
	int i = 0;
	while (i < R.n && R.q[i].c != c)
		i++;
	if (i == RELEASE_QUEUE) {
		pthread_mutex_unlock(&R.lock);
		LOG_WARN("frontend", "release request dropped: %d connections have one open", RELEASE_QUEUE);
		return;
	}
	R.q[i].c = c;
	R.q[i].gen = gen;
	R.n += i == R.n;
	if (!R.started && pthread_create(&R.thread, NULL, release_main, NULL) == 0) {
		pthread_detach(R.thread);
		R.started = 1;
	}
	pthread_cond_signal(&R.cond);
	pthread_mutex_unlock(&R.lock);
}

/* After fork the thread is the parent's, and so are the requests. */
static void forget(int dev)
{
	if (dev != FE_RT_FORK)
		return;
	pthread_mutex_init(&R.lock, NULL);
	pthread_cond_init(&R.cond, NULL);
	R.n = R.started = 0;
}

__attribute__((constructor)) static void register_release(void)
{
	fe_conn_on_release(on_release);
	fe_rt_on_forget(forget);
}
