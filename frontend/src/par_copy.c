/*
 * A large memcpy split across threads. One thread's memcpy moves about
 * 10 GB/s between the program's pageable buffer and a shared region, which is
 * less than the GPU's DMA into the region, so the bounce buffer's copies
 * (host_bounce.c) would be bound by it; REMOTE_GPU_COPY_THREADS (default 2,
 * the caller included; 1: plain memcpy) splits each chunk into that many
 * parts, the caller taking one.
 *
 * Helpers are started on first use and live as long as the process (a fork
 * child starts its own). One job at a time: a caller that finds the job slot
 * taken (another channel's copy) copies alone. A helper spins HELPER_SPIN_NS
 * for the next job before it sleeps, so a pipeline's back-to-back chunks never
 * wait for a wake-up; the caller waits for the last part by spinning, as the
 * parts are of equal size. The job's fields and part counter are read and
 * written under mu (a lock per part of 128 KiB or more costs nothing), so a
 * helper late for one job finds it taken or the next one whole.
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rg_clock.h"
#include "rt.h"

#define MAX_THREADS 8
#define MIN_SPLIT (256u << 10) /* smaller copies are not worth a hand-off */
#define HELPER_SPIN_NS 200000

static pthread_mutex_t job_mu = PTHREAD_MUTEX_INITIALIZER; /* one job at a time */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;     /* helpers' sleep */
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int nthreads = -1; /* the setting (job_mu); -1: not read yet */
static int started;       /* helpers running in this process */
static atomic_uint gen;   /* bumped per job */
static atomic_int sleeping;
static struct { /* under mu */
	uint8_t *dst;
	const uint8_t *src;
	size_t n, part;
	int parts, next;
} job;
static atomic_int parts_left; /* written under mu; the caller polls it */

static void run_parts(void)
{
	for (;;) {
		pthread_mutex_lock(&mu);
		if (job.next >= job.parts) {
			pthread_mutex_unlock(&mu);
			return;
		}
		size_t off = (size_t)job.next++ * job.part;
		size_t n = job.n - off < job.part ? job.n - off : job.part;
		uint8_t *dst = job.dst + off;
		const uint8_t *src = job.src + off;
		pthread_mutex_unlock(&mu);
		memcpy(dst, src, n);
		atomic_fetch_sub_explicit(&parts_left, 1, memory_order_release);
	}
}

static void *helper_main(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "rg-copy");
	unsigned seen = atomic_load(&gen);
	for (;;) {
		rg_spin sp;
		rg_spin_start(&sp, HELPER_SPIN_NS);
		while (atomic_load_explicit(&gen, memory_order_acquire) == seen && rg_spin_on(&sp))
			rg_cpu_relax();
		if (atomic_load_explicit(&gen, memory_order_acquire) == seen) {
			pthread_mutex_lock(&mu);
			atomic_fetch_add(&sleeping, 1);
			while (atomic_load(&gen) == seen)
				pthread_cond_wait(&cv, &mu);
			atomic_fetch_sub(&sleeping, 1);
			pthread_mutex_unlock(&mu);
		}
		seen = atomic_load_explicit(&gen, memory_order_acquire);
		run_parts();
	}
	return NULL;
}

static int setting(void)
{
	const char *v = getenv("REMOTE_GPU_COPY_THREADS");
	int n = v && *v ? atoi(v) : 2;
	return n < 1 ? 1 : n > MAX_THREADS ? MAX_THREADS : n;
}

/* job_mu held: helpers up to the setting; the number running. */
static int helpers(void)
{
	if (nthreads < 0)
		nthreads = setting();
	while (started < nthreads - 1) {
		pthread_t t;
		pthread_attr_t a;
		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		int err = pthread_create(&t, &a, helper_main, NULL);
		pthread_attr_destroy(&a);
		if (err)
			break;
		started++;
	}
	return started;
}

void fe_par_memcpy(void *dst, const void *src, size_t n)
{
	if (n < MIN_SPLIT || pthread_mutex_trylock(&job_mu) != 0) {
		memcpy(dst, src, n);
		return;
	}
	int h = helpers();
	if (h == 0) {
		pthread_mutex_unlock(&job_mu);
		memcpy(dst, src, n);
		return;
	}
	size_t part = (n / (size_t)(h + 1) + 63) & ~(size_t)63; /* whole cache lines */
	pthread_mutex_lock(&mu);
	job.dst = dst;
	job.src = src;
	job.n = n;
	job.part = part;
	job.parts = (int)((n + part - 1) / part);
	job.next = 0;
	atomic_store(&parts_left, job.parts);
	atomic_fetch_add_explicit(&gen, 1, memory_order_release);
	if (atomic_load(&sleeping))
		pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	run_parts();
	while (atomic_load_explicit(&parts_left, memory_order_acquire) > 0)
		rg_cpu_relax();
	pthread_mutex_unlock(&job_mu);
}

/* A fork child has none of the helpers (only the forking thread survives). */
static void child(void)
{
	pthread_mutex_init(&job_mu, NULL);
	pthread_mutex_init(&mu, NULL);
	pthread_cond_init(&cv, NULL);
	started = 0;
	atomic_store(&sleeping, 0);
}

__attribute__((constructor)) static void register_child(void) { pthread_atfork(NULL, NULL, child); }
