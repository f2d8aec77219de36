/*
 * Clocks for hot paths and bounded spins.
 *
 * clock_gettime(CLOCK_MONOTONIC) is a vDSO read only where the kernel's clock
 * source can be read from user space. In a virtual machine without a stable TSC
 * (the qemu guest of the RDMA tests) it is a system call: measured there, eight
 * calls per round trip cost more than the round trip of ib_send_lat. So:
 *   - timestamps that only feed timeouts of milliseconds or more (keepalives,
 *     liveness) come from the coarse clock, which the vDSO always serves (its
 *     resolution is the kernel tick, 1-4 ms);
 *   - a bounded spin looks at the time only every RG_SPIN_STRIDE steps and
 *     not at all before the first stride: a wait that ends within a few steps
 *     (the common case) reads nothing. In the guest a clock read takes 0.8 us
 *     (a system call reading the HPET), blind to what the spin waits for: with
 *     steps of ~0.2 us there, a stride of 16 had the spin reading the clock a
 *     fifth of the time. On hardware a stride of 64 steps is a few microseconds,
 *     far below any spin's length.
 *   - and once the process knows the rate of the CPU's tick counter (the TSC),
 *     a spin reads that instead of the clock (common/src/clock.c). Counted in
 *     the guest, remote-gpud's 50 us spins between requests still made ~9
 *     clock system calls per round trip with the stride alone, a third of the
 *     time it waited.
 */
#ifndef RG_CLOCK_H
#define RG_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t rg_clock_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t rg_clock_coarse_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The absolute time ms milliseconds from now on clock, for the timed waits of
 * pthread (a condition's clock, or CLOCK_REALTIME for pthread_timedjoin_np). */
static inline struct timespec rg_deadline(clockid_t clock, long ms)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

/* One step of a busy wait. Keep waits to one relax per poll: a Skylake pause
 * takes ~140 cycles (64 of them delayed every wake-up by ~3 us), and under
 * qemu's TCG each pause leaves the translated code. */
static inline void rg_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

#define RG_SPIN_STRIDE 64

/* The CPU's tick counter: cheap, no system call, of a rate learned at run time
 * (rg_ticks_rate). Where there is none, 0. */
static inline uint64_t rg_ticks(void)
{
#if defined(__x86_64__) || defined(__i386__)
	return __builtin_ia32_rdtsc();
#else
	return 0;
#endif
}

typedef struct rg_spin {
	uint64_t ns;     /* how long to spin */
	uint64_t end_ns; /* deadline on the clock, set at the first stride (0: not yet) */
	uint64_t t0, end_t; /* start and deadline in ticks (rate known) */
	uint32_t rate;   /* ticks per ns (16.16) this spin goes by; 0: the clock */
	unsigned n;
} rg_spin;

static inline void rg_spin_start(rg_spin *s, uint64_t ns)
{
	s->ns = ns;
	s->end_ns = 0;
	s->n = 0;
}

/* The time check of rg_spin_on (common/src/clock.c). */
int rg_spin_check(rg_spin *s);
/* rg_ticks per nanosecond (16.16 fixed point) as learned by the spins so far;
 * 0 while unknown (and always where there is no tick counter). */
uint32_t rg_ticks_rate(void);

/* Counts one step; 0 once the spin is over. The first stride is free, so the
 * spin lasts ns plus RG_SPIN_STRIDE steps. */
static inline int rg_spin_on(rg_spin *s)
{
	if (++s->n % RG_SPIN_STRIDE)
		return 1;
	return rg_spin_check(s);
}

#endif
