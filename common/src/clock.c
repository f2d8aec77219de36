/*
 * Bounded spins by the CPU's tick counter (rg_clock.h).
 *
 * The counter's rate is learned, not read: from two (clock, ticks) pairs at
 * least CAL_NS apart, taken by spins that read the clock anyway. Until it is
 * known, spins go by the clock. A spin that goes by ticks still reads the clock
 * every CLOCK_EVERY checks: a wrong rate, or a counter that jumps (a thread moved
 * between sockets whose counters differ), then ends it within ns plus
 * CLOCK_EVERY strides at worst, never later.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "rg_clock.h"

#define CAL_NS 20000000ull        /* a clock read's error (0.8 us in the guest) is 4e-5 of it */
#define CAL_MAX_NS 10000000000ull /* older pairs start over: (ticks << 16) stays in 64 bits */
#define RATE_MAX (256u << 16)     /* ticks per ns (16.16) beyond any counter */
#define CLOCK_EVERY 64            /* tick checks per clock check */

static _Atomic uint32_t tick_rate; /* ticks per ns, 16.16; 0 while unknown */
static pthread_mutex_t cal_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t cal_ns, cal_t;     /* (cal_mu) the first pair */

static void rate_learn(uint64_t now_ns)
{
	uint64_t t = rg_ticks();
	if (!t)
		return;
	pthread_mutex_lock(&cal_mu);
	uint64_t dns = now_ns - cal_ns;
	if (cal_ns && t > cal_t && dns >= CAL_NS && dns <= CAL_MAX_NS) {
		uint64_t q = ((t - cal_t) << 16) / dns;
		if (q > 0 && q <= RATE_MAX)
			atomic_store_explicit(&tick_rate, (uint32_t)q, memory_order_relaxed);
	} else if (!cal_ns || t <= cal_t || dns > CAL_MAX_NS) {
		cal_ns = now_ns;
		cal_t = t;
	}
	pthread_mutex_unlock(&cal_mu);
}

uint32_t rg_ticks_rate(void) { return atomic_load_explicit(&tick_rate, memory_order_relaxed); }

/* ns * rate / 2^16 without overflow for any spin length. */
static uint64_t ns_to_ticks(uint64_t ns, uint32_t rate)
{
	return (ns >> 16) * rate + (((ns & 0xffff) * rate) >> 16);
}

int rg_spin_check(rg_spin *s)
{
	unsigned k = s->n / RG_SPIN_STRIDE; /* 1 at a spin's first check */
	if (k == 1) {
		s->rate = atomic_load_explicit(&tick_rate, memory_order_relaxed);
		if (s->rate) {
			s->t0 = rg_ticks();
			s->end_t = s->t0 + ns_to_ticks(s->ns, s->rate);
			return 1;
		}
	}
	if (s->rate) {
		uint64_t t = rg_ticks();
		if (t < s->t0 || t >= s->end_t)
			return 0;
		if (k % CLOCK_EVERY)
			return 1;
	}
	uint64_t now = rg_clock_ns();
	if (!s->rate)
		rate_learn(now);
	if (!s->end_ns)
		s->end_ns = now + s->ns;
	return now < s->end_ns;
}
