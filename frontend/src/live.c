/* The liveness watchdog: see live.h.
 *
 * Every tick (a tenth of the timeout, 10 ms to 1 s) the thread looks at the
 * channel. Idle, or progress since the last look: the server is alive now.
 * Quiet for two ticks: ping (again every two ticks while quiet). Quiet for the
 * timeout less two ticks: dead. A tick's wait may end late and the last sign
 * of life came up to a tick before it was seen, so this is what makes a
 * waiting call fail within the timeout, never later. A live server answers a
 * ping in microseconds to milliseconds; it gets several ticks. */
#define _GNU_SOURCE /* pthread_setname_np */

#include "live.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "rg_clock.h"
#include "rg_log.h"
#include "transport.h"

#define DEFAULT_TIMEOUT_S 10.0
#define MAX_TIMEOUT_S 1e6 /* about 11 days; beyond this, wait forever with 0 */
#define TICK_MIN_NS 10000000ull
#define TICK_MAX_NS 1000000000ull

struct fe_live {
	const fe_live_ops *ops;
	void *ctx;
	double timeout_s;
	uint64_t timeout_ns, tick_ns;
	pthread_mutex_t mu;
	pthread_cond_t cv; /* on CLOCK_MONOTONIC */
	int stop;          /* (mu) */
	pthread_t thread;
};

double fe_live_timeout(void)
{
	const char *v = getenv("REMOTE_GPU_TIMEOUT");
	if (!v || !*v)
		return DEFAULT_TIMEOUT_S;
	char *end;
	double t = strtod(v, &end);
	if (end == v || *end || !(t >= 0 && t <= MAX_TIMEOUT_S)) {
		static atomic_int warned; /* read at each connect and each watchdog start */
		if (!atomic_exchange(&warned, 1))
			LOG_WARN("frontend", "REMOTE_GPU_TIMEOUT=%s is not a number of seconds (0: wait forever); using %g", v,
				 DEFAULT_TIMEOUT_S);
		return DEFAULT_TIMEOUT_S;
	}
	return t;
}

/* Waits one tick or until stopped (mu held). */
static void tick_wait(fe_live *l)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t ns = (uint64_t)ts.tv_nsec + l->tick_ns;
	ts.tv_sec += (time_t)(ns / 1000000000ull);
	ts.tv_nsec = (long)(ns % 1000000000ull);
	while (!l->stop && pthread_cond_timedwait(&l->cv, &l->mu, &ts) != ETIMEDOUT)
		;
}

static void *live_main(void *arg)
{
	fe_live *l = arg;
	pthread_setname_np(pthread_self(), "rg-live");
	uint64_t seen = l->ops->progress(l->ctx), alive = rg_clock_ns(), pinged = 0;

	pthread_mutex_lock(&l->mu);
	for (;;) {
		tick_wait(l);
		if (l->stop)
			break;
		pthread_mutex_unlock(&l->mu);
		uint64_t now = rg_clock_ns(), p = l->ops->progress(l->ctx);
		if (p != seen || !l->ops->busy(l->ctx)) {
			seen = p;
			alive = now;
		} else if (now - alive + 2 * l->tick_ns >= l->timeout_ns) {
			l->ops->dead(l->ctx, (double)(now - alive) / 1e9, l->timeout_s);
			pthread_mutex_lock(&l->mu);
			break;
		} else if (now - alive >= 2 * l->tick_ns && now - pinged >= 2 * l->tick_ns) {
			l->ops->ping(l->ctx);
			pinged = now;
		}
		pthread_mutex_lock(&l->mu);
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

int fe_live_start(const fe_live_ops *ops, void *ctx, fe_live **out)
{
	*out = NULL;
	double t = fe_live_timeout();
	if (t == 0)
		return 0;
	fe_live *l = calloc(1, sizeof(*l));
	if (!l)
		return TRANSPORT_ENOMEM;
	l->ops = ops;
	l->ctx = ctx;
	l->timeout_s = t;
	l->timeout_ns = (uint64_t)(t * 1e9);
	l->tick_ns = l->timeout_ns / 10;
	if (l->tick_ns < TICK_MIN_NS)
		l->tick_ns = TICK_MIN_NS;
	if (l->tick_ns > TICK_MAX_NS)
		l->tick_ns = TICK_MAX_NS;
	pthread_mutex_init(&l->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&l->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&l->thread, NULL, live_main, l) != 0) {
		pthread_cond_destroy(&l->cv);
		pthread_mutex_destroy(&l->mu);
		free(l);
		return TRANSPORT_ENOMEM;
	}
	LOG_DEBUG("frontend", "liveness: a waiting call fails after %g s without a sign of life", t);
	*out = l;
	return 0;
}

void fe_live_stop(fe_live *l)
{
	if (!l)
		return;
	pthread_mutex_lock(&l->mu);
	l->stop = 1;
	pthread_cond_signal(&l->cv);
	pthread_mutex_unlock(&l->mu);
	pthread_join(l->thread, NULL);
	pthread_cond_destroy(&l->cv);
	pthread_mutex_destroy(&l->mu);
	free(l);
}
