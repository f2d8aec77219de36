/*
 * The clock of one-call samples. perftest times its iterations with the TSC
 * (get_cycles), and so do we on x86-64 when the kernel's clocksource is not
 * the TSC. There clock_gettime is a system call that reads another device: in
 * the Soft-RoCE guest (HPET) one read takes about 0.8 us, and each sample of a
 * ~20 us round trip carried about a microsecond of clock reading that
 * ib_send_lat's samples do not. Where the kernel uses the TSC, clock_gettime is
 * a vDSO read of it and is kept.
 */
#include "bench_clock.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

static int use_tsc;
static uint64_t tsc0, ns0;
static double ns_per_tick;

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int kernel_on_tsc(void)
{
	char name[64] = "";
	FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
	if (!f)
		return 1; /* unknown: keep clock_gettime */
	if (!fgets(name, sizeof(name), f))
		name[0] = 0;
	fclose(f);
	return strncmp(name, "tsc", 3) == 0;
}

void bench_clock_init(void)
{
#if defined(__x86_64__)
	if (use_tsc || kernel_on_tsc())
		return;
	/* 20 ms against CLOCK_MONOTONIC: a read's error is then 4e-5 of it. */
	uint64_t n0 = mono_ns(), t0 = __rdtsc(), n1, t1;
	do {
		n1 = mono_ns();
		t1 = __rdtsc();
	} while (n1 - n0 < 20000000u);
	if (t1 <= t0)
		return;
	ns_per_tick = (double)(n1 - n0) / (double)(t1 - t0);
	tsc0 = t1;
	ns0 = n1;
	use_tsc = 1;
#endif
}

uint64_t bench_now_ns(void)
{
#if defined(__x86_64__)
	if (use_tsc)
		return ns0 + (uint64_t)((double)(__rdtsc() - tsc0) * ns_per_tick);
#endif
	return mono_ns();
}

const char *bench_clock_name(void) { return use_tsc ? "tsc" : "clock_gettime"; }
