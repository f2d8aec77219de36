/*
 * cudaThreadExchangeStreamCaptureMode: a thread's capture mode decides which
 * "potentially unsafe" calls (cudaMalloc, cudaFreeHost, synchronous copies, ...)
 * it may make while a capture is under way. The mode is kept per client thread
 * here, as CUDA keeps it, and the rules are applied on the client
 * (fe_capture_unsafe, rt_stream.c), which knows every thread's captures.
 *
 * On the server one executor thread makes the calls of all the client's
 * threads, and it is the thread that began every capture: the driver would
 * judge each call as that thread's own, so a free from a thread in thread-local
 * mode while another captures (legal: XLA captures in thread-local mode) would
 * fail there and invalidate the capture. So the server's threads run in relaxed
 * mode and refuse nothing by mode; what the client lets through is what CUDA
 * allows. Servers since b32e268 start every thread relaxed; for older ones of
 * the same protocol version the client still asks once per session (op
 * capture_mode, async) before its first capture: drop it at the next
 * protocol version.
 */
#include "rg_log.h"
#include "rpc.h"
#include "rt.h"

static _Thread_local enum cudaStreamCaptureMode tls_mode = cudaStreamCaptureModeGlobal;

/* The sessions whose executor was put in relaxed mode. Keyed by the
 * connection: a reset device has a new one. */
#define MAX_SENT 16
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static fe_conn *relaxed[MAX_SENT];

enum cudaStreamCaptureMode fe_capture_mode_current(void) { return tls_mode; }

int fe_capture_mode_relax(fe_conn *c)
{
	int i, free_slot = -1;
	pthread_mutex_lock(&lock);
	for (i = 0; i < MAX_SENT && relaxed[i] != c; i++)
		if (!relaxed[i] && free_slot < 0)
			free_slot = i;
	int known = i < MAX_SENT;
	if (!known && free_slot >= 0)
		relaxed[free_slot] = c;
	pthread_mutex_unlock(&lock);
	/* (more than MAX_SENT sessions: said at every begin) */
	return known ? 0 : fe_rpc_capture_mode(c, (uint32_t)cudaStreamCaptureModeRelaxed);
}

cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode)
{
	if (!mode || (unsigned)*mode > cudaStreamCaptureModeRelaxed)
		return fe_rt_fail(cudaErrorInvalidValue);
	enum cudaStreamCaptureMode old = tls_mode;
	tls_mode = *mode;
	*mode = old;
	return cudaSuccess;
}

/* Sessions that end take their executor's mode with them. */
static void forget(int dev)
{
	if (dev == FE_RT_FORK) /* the child is single-threaded: the lock may be a copy held */
		pthread_mutex_init(&lock, NULL);
	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_SENT; i++)
		relaxed[i] = NULL;
	pthread_mutex_unlock(&lock);
}

__attribute__((constructor)) static void register_forget(void) { fe_rt_on_forget(forget); }
