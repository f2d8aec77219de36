/*
 * capture_modes: CUDA's rules for "potentially unsafe" calls during a stream
 * capture, by the capture's mode and the calling thread's
 * (cudaThreadExchangeStreamCaptureMode), with the exact error codes. Through
 * the remote one server thread makes every client thread's calls, so these
 * rules are the client's to apply. A second thread (the helper) makes calls
 * while the main thread captures: global captures forbid them to a thread in
 * global mode, thread-local ones only to their own thread, relaxed ones never.
 * A forbidden call answers cudaErrorStreamCaptureUnsupported and invalidates the
 * capture (its end: cudaErrorStreamCaptureInvalidated); a synchronous copy is
 * not one of them. Only a relaxed capture may be ended by another thread; the
 * attempt on another one ends it (its own thread's end: cudaErrorIllegalState).
 * Last, a memset whose address is no
 * allocation is recorded by a capture, as a GPU records it (XLA traces library
 * calls so); replaying it through the remote fails with cudaErrorIllegalAddress
 * (a GPU faults there too; not run locally).
 */
#include <pthread.h>

#include "rgtest.h"

/* What the helper thread does, in its own capture mode. */
enum job { MALLOC_FREE, HOST_ALLOC_FREE, SYNC_COPY, END_CAPTURE };

typedef struct task {
	enum job job;
	cudaStreamCaptureMode mode;
	cudaStream_t stream;
	cudaError_t r1, r2;
} task;

static void *helper(void *arg)
{
	task *t = (task *)arg;
	cudaStreamCaptureMode m = t->mode;
	CK(cudaThreadExchangeStreamCaptureMode(&m));
	void *p = NULL;
	static char host[64];
	switch (t->job) {
	case MALLOC_FREE:
		t->r1 = cudaMalloc(&p, 256);
		t->r2 = p ? cudaFree(p) : cudaSuccess;
		break;
	case HOST_ALLOC_FREE:
		t->r1 = cudaMallocHost(&p, 8); /* XLA's autotuner's few bytes */
		t->r2 = p ? cudaFreeHost(p) : cudaSuccess;
		break;
	case SYNC_COPY: {
		void *d = NULL;
		m = cudaStreamCaptureModeRelaxed; /* the allocation is not what is checked */
		CK(cudaThreadExchangeStreamCaptureMode(&m));
		CK(cudaMalloc(&d, sizeof(host)));
		CK(cudaThreadExchangeStreamCaptureMode(&m));
		t->r1 = cudaMemcpy(host, d, sizeof(host), cudaMemcpyDeviceToHost);
		m = cudaStreamCaptureModeRelaxed;
		CK(cudaThreadExchangeStreamCaptureMode(&m));
		CK(cudaFree(d));
		CK(cudaThreadExchangeStreamCaptureMode(&m));
		t->r2 = cudaSuccess;
		break;
	}
	case END_CAPTURE: {
		cudaGraph_t g = NULL;
		t->r1 = cudaStreamEndCapture(t->stream, &g);
		t->r2 = g ? cudaGraphDestroy(g) : cudaSuccess;
		break;
	}
	}
	(void)cudaGetLastError();
	return NULL;
}

static void on_helper(task *t)
{
	pthread_t th;
	REQUIRE(pthread_create(&th, NULL, helper, t) == 0, "pthread_create");
	pthread_join(th, NULL);
}

static const char *mode_name(cudaStreamCaptureMode m)
{
	return m == cudaStreamCaptureModeGlobal ? "global" : m == cudaStreamCaptureModeThreadLocal ? "thread-local" : "relaxed";
}

static const char *job_name(enum job j)
{
	return j == MALLOC_FREE ? "cudaMalloc" : j == HOST_ALLOC_FREE ? "cudaMallocHost" : "cudaMemcpy";
}

/* The main thread captures in cap mode; the helper, in its mode, does job. */
static void other_thread(cudaStream_t s, float *a, cudaStreamCaptureMode cap, cudaStreamCaptureMode mode, enum job job,
			 cudaError_t want, cudaError_t want_end)
{
	char label[160];
	cudaGraph_t g = NULL;
	CK(cudaStreamBeginCapture(s, cap));
	CK(cudaMemsetAsync(a, 1, 64, s));
	task t = {job, mode, s, cudaSuccess, cudaSuccess};
	on_helper(&t);
	snprintf(label, sizeof(label), "%s capture, %s from a thread in %s mode", mode_name(cap), job_name(job),
		 mode_name(mode));
	EXPECT_ERR(label, t.r1, want);
	if (t.r1 == cudaSuccess && job != SYNC_COPY) {
		snprintf(label, sizeof(label), "%s capture, its free from a thread in %s mode", mode_name(cap),
			 mode_name(mode));
		EXPECT_ERR(label, t.r2, want);
	}
	cudaStreamCaptureStatus st;
	CK(cudaStreamIsCapturing(s, &st));
	printf("  capture status after it: %d\n", (int)st);
	snprintf(label, sizeof(label), "  its end");
	EXPECT_ERR(label, cudaStreamEndCapture(s, &g), want_end);
	if (g)
		CK(cudaGraphDestroy(g));
	(void)cudaGetLastError();
}

/* The main thread's own call in its own capture of mode cap, itself in mode. */
static void own_thread(cudaStream_t s, cudaStreamCaptureMode cap, cudaStreamCaptureMode mode, cudaError_t want,
		       cudaError_t want_end)
{
	char label[160];
	cudaGraph_t g = NULL;
	void *p = NULL;
	CK(cudaStreamBeginCapture(s, cap));
	cudaStreamCaptureMode m = mode;
	CK(cudaThreadExchangeStreamCaptureMode(&m));
	cudaError_t r = cudaMalloc(&p, 256);
	snprintf(label, sizeof(label), "own %s capture, cudaMalloc in %s mode", mode_name(cap), mode_name(mode));
	EXPECT_ERR(label, r, want);
	if (p)
		EXPECT_ERR("  its cudaFree", cudaFree(p), cudaSuccess);
	CK(cudaThreadExchangeStreamCaptureMode(&m));
	EXPECT_ERR("  its end", cudaStreamEndCapture(s, &g), want_end);
	if (g)
		CK(cudaGraphDestroy(g));
	(void)cudaGetLastError();
}

int main(void)
{
	const cudaError_t ok = cudaSuccess, unsup = cudaErrorStreamCaptureUnsupported,
			  inval = cudaErrorStreamCaptureInvalidated;
	const cudaStreamCaptureMode G = cudaStreamCaptureModeGlobal, T = cudaStreamCaptureModeThreadLocal,
				    R = cudaStreamCaptureModeRelaxed;
	CK(cudaSetDevice(0));
	cudaStream_t s;
	float *a;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaMalloc(&a, 4096));

	/* another thread's capture: only a global one, and only to a thread in global mode */
	other_thread(s, a, G, G, MALLOC_FREE, unsup, inval);
	other_thread(s, a, G, T, MALLOC_FREE, ok, ok);
	other_thread(s, a, G, R, MALLOC_FREE, ok, ok);
	other_thread(s, a, T, G, MALLOC_FREE, ok, ok);
	other_thread(s, a, R, G, MALLOC_FREE, ok, ok);
	other_thread(s, a, G, G, HOST_ALLOC_FREE, unsup, inval);
	other_thread(s, a, T, G, HOST_ALLOC_FREE, ok, ok);
	/* a synchronous copy is no such call (an H200's driver lets it through) */
	other_thread(s, a, G, G, SYNC_COPY, ok, ok);
	other_thread(s, a, G, T, SYNC_COPY, ok, ok);

	/* the thread's own capture: forbidden unless the capture or the thread is relaxed */
	own_thread(s, G, G, unsup, inval);
	own_thread(s, G, T, unsup, inval);
	own_thread(s, T, G, unsup, inval);
	own_thread(s, G, R, ok, ok);
	own_thread(s, R, G, ok, ok);

	/* ending from another thread: only a relaxed capture */
	cudaGraph_t g = NULL;
	cudaStreamCaptureMode modes[] = {G, T, R};
	for (int i = 0; i < 3; i++) {
		CK(cudaStreamBeginCapture(s, modes[i]));
		CK(cudaMemsetAsync(a, 2, 64, s));
		task t = {END_CAPTURE, G, s, cudaSuccess, cudaSuccess};
		on_helper(&t);
		char label[96];
		snprintf(label, sizeof(label), "%s capture ended by another thread", mode_name(modes[i]));
		EXPECT_ERR(label, t.r1, modes[i] == R ? ok : cudaErrorStreamCaptureWrongThread);
		if (modes[i] != R) /* the driver ended it, graph and all */
			EXPECT_ERR("  then by its own", cudaStreamEndCapture(s, &g), cudaErrorIllegalState);
		(void)cudaGetLastError();
	}

	/* a memset the capture records though its address is no allocation */
	CK(cudaStreamBeginCapture(s, G));
	EXPECT_ERR("captured memset of no allocation", cudaMemsetAsync((void *)0x80, 0, 4096, s), ok);
	CK(cudaMemsetAsync(a, 3, 64, s));
	EXPECT_ERR("  its end", cudaStreamEndCapture(s, &g), ok);
	size_t n = 0;
	CK(cudaGraphGetNodes(g, NULL, &n));
	printf("  nodes: %zu\n", n);
	/* the driver refuses it when the graph is instantiated (an H200's does) */
	cudaGraphExec_t x = NULL;
	EXPECT_ERR("  instantiated", cudaGraphInstantiate(&x, g, 0), cudaErrorInvalidValue);
	(void)cudaGetLastError();
	EXPECT_ERR("outside a capture, the same memset", cudaMemsetAsync((void *)0x80, 0, 4096, s), cudaErrorInvalidValue);
	(void)cudaGetLastError();
	CK(cudaGraphDestroy(g));
	CK(cudaFree(a));
	CK(cudaStreamDestroy(s));
	return rg_finish("capture_modes");
}
