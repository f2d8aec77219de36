/*
 * Observability of the client (stats*.c): where a program's time goes when its
 * GPU is remote, where the round trips are the cost.
 *
 * REMOTE_GPU_STATS=1 (or a file path; %p becomes the pid; a name ending in .json
 * gives JSON): at exit, on SIGUSR1 and from remote_gpu_stats_dump(), a table per
 * API function and calling library: calls, total/mean/max time in the call,
 * synchronous round trips, bytes sent and received; and device memory per
 * device (current, peak, live allocations), also printed when a call fails for
 * lack of device memory. Calls that wait for the server are all timed; of the
 * others a function's first 100 per thread, then one in 16 (the clock read is
 * most of the cost; REMOTE_GPU_STATS_SAMPLE=1 times every call).
 *
 * REMOTE_GPU_TRACE="cudaMalloc=1,cudaLaunchKernel=2": for the named functions
 * ("*" for all; a name alone means 3), level 1 prints each call's native
 * backtrace, with the Python frames when the process runs Python and the
 * calling thread holds the GIL; level 2 prints what the call sends (the
 * protocol op and its arguments, as the server receives them) and its result.
 *
 * The hooks: rt.h wraps fe_rt_enter/fe_rt_leave (every runtime entry that talks
 * to the server) so that each call's name (__func__) and return address reach
 * fe_obs_enter; conn.c counts round trips and bytes into the calling thread's
 * counters (fe_obs_t). With both variables unset each hook is one load of
 * fe_obs_on and a branch predicted not taken.
 */
#ifndef FE_STATS_H
#define FE_STATS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Hidden, and thread-local storage of the initial-exec model (libremote.so is
 * preloaded, so it has static TLS): each access is one instruction, where the
 * default model of a shared library calls __tls_get_addr. */
#define FE_OBS_HIDDEN __attribute__((visibility("hidden")))
#define FE_OBS_TLS __attribute__((tls_model("initial-exec"), visibility("hidden")))

/* Set once when the library loads: REMOTE_GPU_STATS or REMOTE_GPU_TRACE given. */
extern int fe_obs_on FE_OBS_HIDDEN;

/* What the calling thread's calls moved, counted by conn.c. */
typedef struct fe_obs_tls {
	uint64_t rt; /* synchronous round trips (a request whose reply the caller waits for) */
	uint64_t tx; /* frame bytes sent: header, message, payload */
	uint64_t rx; /* frame bytes received for this thread's calls */
	int trace_args; /* the call in progress is traced at level 2 */
	int timing;     /* the call in progress is being timed, since t0 */
	uint64_t t0;
	int skip;       /* calls until the next one timed from its start */
} fe_obs_tls;
extern _Thread_local fe_obs_tls fe_obs_t FE_OBS_TLS;

/* The API function a call is counted under, and the code that called it. */
typedef struct fe_api_site {
	const char *fn;
	void *ra;
} fe_api_site;
/* At an exported entry point: its name and its caller. A helper shared by
 * several entry points takes the site from them (rt_copy.c, rt_module.c). */
#define FE_API_SITE ((fe_api_site){__func__, __builtin_return_address(0)})

void fe_obs_enter(const char *fn, void *ra);
void fe_obs_leave(int status);
void fe_obs_trace_send(const void *frame, size_t len, uint64_t plen);
void fe_obs_time_from_here(void);

#define FE_OBS_ENTER(fn, ra) (__builtin_expect(fe_obs_on, 0) ? fe_obs_enter((fn), (ra)) : (void)0)

static inline int fe_obs_leave_ret(int e)
{
	if (__builtin_expect(fe_obs_on, 0))
		fe_obs_leave(e);
	return e;
}

/* conn.c: a frame of len bytes (header and message) plus plen payload bytes
 * is being sent for the calling thread. */
static inline void fe_obs_send(const void *frame, size_t len, uint64_t plen)
{
	if (__builtin_expect(fe_obs_on, 0)) {
		fe_obs_t.tx += len + plen;
		if (fe_obs_t.trace_args)
			fe_obs_trace_send(frame, len, plen);
	}
}

/* conn.c: a synchronous request is being sent (the caller will wait for its
 * reply). A call not timed from its start is timed from here (stats.c). */
static inline void fe_obs_round_trip(void)
{
	if (__builtin_expect(fe_obs_on, 0)) {
		fe_obs_t.rt++;
		if (!fe_obs_t.timing)
			fe_obs_time_from_here();
	}
}

/* conn.c: reply bytes for the calling thread's request. */
static inline void fe_obs_received(uint64_t n)
{
	if (__builtin_expect(fe_obs_on, 0))
		fe_obs_t.rx += n;
}

/* mem_ranges.c: device memory of a device grew (delta > 0) or shrank. */
void fe_obs_mem(int device, int64_t delta);

/* mem_ranges.c: copies up to max device ranges into out; returns how many
 * there are in all. */
struct fe_range;
size_t fe_mem_snapshot(struct fe_range *out, size_t max);

/* Exported: prints the statistics to f (NULL: where REMOTE_GPU_STATS says). */
void remote_gpu_stats_dump(FILE *f);

#endif
