/*
 * obs-hooks-bench: what the statistics hooks cost one call, measured alone. It
 * links frontend/src/stats*.c (nothing else of libremote.so) and runs, in a loop,
 * what every forwarded runtime call does around its work: the entry hook (as
 * rt.h's fe_rt_enter expands it), one frame sent (conn.c's fe_obs_send), the
 * exit hook (fe_rt_leave). REMOTE_GPU_STATS decides on or off, as in a program.
 *
 *   obs-hooks-bench [CALLS]    prints "hooks <on|off>: N.NN ns per call"
 *
 * bench/obs-overhead.sh runs it both ways and relates the difference to the
 * time of one launch.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "rt.h"
#include "stats.h"

/* What stats*.c use of the rest of libremote.so. */
size_t fe_mem_snapshot(struct fe_range *out, size_t max) { return 0; }
fe_device *fe_rt_device(int ordinal) { return NULL; }
int fe_rt_current_device(void) { return 0; }
const char *cudaGetErrorName(cudaError_t e) { return "?"; }

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* An entry point: the hooks and nothing else. */
__attribute__((noinline)) int cudaBenchCall(void)
{
	static const unsigned char frame[64];
	FE_OBS_ENTER(__func__, __builtin_return_address(0));
	fe_obs_send(frame, 40, 24);
	return fe_obs_leave_ret(0);
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 20000000;
	for (int i = 0; i < 100000; i++) /* past the calls that are all timed */
		cudaBenchCall();
	uint64_t t0 = now_ns();
	for (long i = 0; i < n; i++)
		cudaBenchCall();
	uint64_t t1 = now_ns();
	printf("hooks %s: %.2f ns per call\n", fe_obs_on ? "on" : "off", (double)(t1 - t0) / (double)n);
	return 0;
}
