/* The clock of the benchmarks' samples (clock.c). */
#ifndef BENCH_CLOCK_H
#define BENCH_CLOCK_H

#include <stdint.h>

/* Chooses the clock, once, before any sample and before other threads start. */
void bench_clock_init(void);
/* Nanoseconds on a monotonic clock (an arbitrary origin). */
uint64_t bench_now_ns(void);
/* "tsc" or "clock_gettime", for reports. */
const char *bench_clock_name(void);

#endif
