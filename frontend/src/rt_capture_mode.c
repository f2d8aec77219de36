/*
 * cudaThreadExchangeStreamCaptureMode: a thread's capture mode decides which
 * "potentially unsafe" calls (cudaMalloc, synchronous copies, ...) it may make
 * while a capture is under way. The calls run on the server, on the session's
 * executor thread, so that thread must be in the mode of the client thread that
 * made them: PyTorch's caching allocator calls cudaMalloc during a global capture
 * in relaxed mode (legal), which in the executor's default global mode fails with
 * cudaErrorStreamCaptureUnsupported and invalidates the capture.
 *
 * The mode is kept per client thread here, as CUDA keeps it, and sent to the
 * server (async, op capture_mode) when a thread sets one that differs from the
 * one the executor has, so outside of captures, where programs rarely change it,
 * nothing travels. The executor has one mode for all the client's threads: a
 * thread that calls while another has set a different mode runs in that one
 * (PyTorch sets relaxed mode only around its own calls and restores it).
 */
#include "rg_log.h"
#include "rpc.h"
#include "rt.h"

static _Thread_local enum cudaStreamCaptureMode tls_mode = cudaStreamCaptureModeGlobal;

/* The mode each session's executor runs in, as last sent (a session starts in
 * global mode). Keyed by the connection: a reset device has a new one. */
#define MAX_SENT 16
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	fe_conn *c;
	enum cudaStreamCaptureMode mode;
} sent[MAX_SENT];

/* Whether the executor behind c must be told m (and records that it was). */
static int must_send(fe_conn *c, enum cudaStreamCaptureMode m)
{
	int i, free_slot = -1, r;
	pthread_mutex_lock(&lock);
	for (i = 0; i < MAX_SENT && sent[i].c != c; i++)
		if (!sent[i].c && free_slot < 0)
			free_slot = i;
	if (i == MAX_SENT && free_slot >= 0) {
		/* not known (a new session, or forgotten): say it once */
		i = free_slot;
		sent[i].c = c;
		r = 1;
	} else {
		r = i == MAX_SENT || sent[i].mode != m;
	}
	if (i < MAX_SENT)
		sent[i].mode = m;
	pthread_mutex_unlock(&lock);
	return r;
}

cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode)
{
	if (!mode || (unsigned)*mode > cudaStreamCaptureModeRelaxed)
		return fe_rt_fail(cudaErrorInvalidValue);
	enum cudaStreamCaptureMode old = tls_mode;
	tls_mode = *mode;
	*mode = old;
	fe_device *d = fe_rt_device(fe_rt_current_device());
	if (!d || !d->conn || !must_send(d->conn, tls_mode))
		return cudaSuccess;
	fe_conn *c;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	return fe_rt_leave(fe_rpc_capture_mode(c, (uint32_t)tls_mode));
}

/* Sessions that end take their executor's mode with them. */
static void forget(int dev)
{
	if (dev == FE_RT_FORK) /* the child is single-threaded: the lock may be a copy held */
		pthread_mutex_init(&lock, NULL);
	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_SENT; i++)
		sent[i].c = NULL;
	pthread_mutex_unlock(&lock);
}

__attribute__((constructor)) static void register_forget(void) { fe_rt_on_forget(forget); }
