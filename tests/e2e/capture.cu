/*
 * capture: stream capture as PyTorch uses it. A cudaMalloc during a global
 * capture is refused and invalidates it; in relaxed mode
 * (cudaThreadExchangeStreamCaptureMode, as PyTorch's caching allocator does) it
 * is allowed and the capture goes on. A second stream joins the capture through
 * an event (fork) and the first waits for it (join); cudaStreamIsCapturing and
 * cudaStreamGetCaptureInfo answer for both, the graph replays with the inputs of
 * the moment, and the calls CUDA forbids during a capture answer its errors.
 */
#include "rgtest.h"
#include "rgtest_kernels.cuh"

#define N 4096u

static unsigned f2u(float f)
{
	unsigned u;
	memcpy(&u, &f, 4);
	return u;
}

static void check(const char *label, const float *d, float want)
{
	static float h[N];
	CK(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
	for (unsigned i = 0; i < N; i++)
		if (h[i] != want) {
			fprintf(stderr, "%s: element %u = %g, want %g\n", label, i, h[i], want);
			printf("%s: MISMATCH\n", label);
			rg_failures++;
			return;
		}
	printf("%s: ok (%g)\n", label, want);
}

static int capturing(cudaStream_t s)
{
	cudaStreamCaptureStatus st;
	CK(cudaStreamIsCapturing(s, &st));
	return (int)st;
}

int main(void)
{
	CK(cudaSetDevice(0));
	cudaStream_t s1, s2;
	cudaEvent_t fork, join;
	float *a, *b, *c = NULL;
	void *p = NULL;
	CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
	CK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
	CK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
	CK(cudaMalloc(&a, N * 4));
	CK(cudaMalloc(&b, N * 4));

	/* 1. global mode: an allocation is an unsafe call */
	cudaGraph_t g = NULL;
	CK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
	EXPECT_ERR("cudaMalloc in a global capture", cudaMalloc(&p, 256), cudaErrorStreamCaptureUnsupported);
	EXPECT_ERR("end of the invalidated capture", cudaStreamEndCapture(s1, &g), cudaErrorStreamCaptureInvalidated);
	printf("capturing after the end: %d\n", capturing(s1));
	(void)cudaGetLastError();

	/* 2. relaxed mode around the allocation; fork and join through events */
	CK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
	cudaStreamCaptureMode m = cudaStreamCaptureModeRelaxed;
	CK(cudaThreadExchangeStreamCaptureMode(&m));
	printf("mode before relaxed: %d\n", (int)m);
	CK(cudaMalloc(&c, N * 4));
	CK(cudaThreadExchangeStreamCaptureMode(&m));
	printf("mode restored from: %d\n", (int)m);
	rgtest_fill_u32<<<rgtest_grid(N), 256, 0, s1>>>((unsigned *)a, f2u(1.0f), N);
	CK(cudaGetLastError());
	printf("s2 capturing before the fork: %d\n", capturing(s2));
	CK(cudaEventRecord(fork, s1));
	CK(cudaStreamWaitEvent(s2, fork, 0));
	printf("s2 capturing after the fork: %d\n", capturing(s2));
	cudaStreamCaptureStatus st1, st2;
	unsigned long long id1 = 0, id2 = 0;
	CK(cudaStreamGetCaptureInfo(s1, &st1, &id1, NULL, NULL, NULL, NULL));
	CK(cudaStreamGetCaptureInfo(s2, &st2, &id2, NULL, NULL, NULL, NULL));
	printf("capture info: %d %d, same id %d, id set %d\n", (int)st1, (int)st2, id1 == id2, id1 != 0);
	rgtest_fill_u32<<<rgtest_grid(N), 256, 0, s2>>>((unsigned *)b, f2u(2.0f), N);
	CK(cudaGetLastError());
	CK(cudaEventRecord(join, s2));
	CK(cudaStreamWaitEvent(s1, join, 0));
	rgtest_add_f32<<<rgtest_grid(N), 256, 0, s1>>>(a, b, c, (int)N);
	CK(cudaGetLastError());
	CK(cudaStreamEndCapture(s1, &g));
	printf("capturing after the end: s1 %d s2 %d\n", capturing(s1), capturing(s2));
	size_t nodes = 0;
	CK(cudaGraphGetNodes(g, NULL, &nodes));
	printf("graph nodes: %zu\n", nodes);

	/* nothing ran during the capture; each replay does */
	cudaGraphExec_t x;
	CK(cudaGraphInstantiateWithFlags(&x, g, cudaGraphInstantiateFlagAutoFreeOnLaunch));
	CK(cudaMemset(c, 0, N * 4));
	check("before a replay", c, 0.0f);
	CK(cudaGraphLaunch(x, s1));
	CK(cudaStreamSynchronize(s1));
	check("first replay", c, 3.0f);
	CK(cudaMemset(c, 0, N * 4));
	CK(cudaGraphLaunch(x, s1));
	CK(cudaStreamSynchronize(s1));
	check("second replay", c, 3.0f);

	CK(cudaGraphExecDestroy(x));
	CK(cudaGraphDestroy(g));
	CK(cudaFree(a));
	CK(cudaFree(b));
	CK(cudaFree(c));
	CK(cudaEventDestroy(fork));
	CK(cudaEventDestroy(join));
	CK(cudaStreamDestroy(s1));
	CK(cudaStreamDestroy(s2));
	return rg_finish("capture");
}
