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

static void check(const char *label, const float *d, float want)
{
	static float h[N];
	CK(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
	rg_check_f32(label, h, N, want);
}

static int capturing(cudaStream_t s)
{
	cudaStreamCaptureStatus st;
	CK(cudaStreamIsCapturing(s, &st));
	return (int)st;
}

/* c = v1, c *= v2 after it, then (its dependencies set back to the fill) a = v3:
 * two nodes that depend on the fill alone. */
static cudaGraph_t capture_set_deps(cudaStream_t s, float *a, float *c, float v1, float v2, float v3)
{
	cudaGraph_t g;
	cudaStreamCaptureStatus st;
	const cudaGraphNode_t *deps = NULL;
	size_t n = 0;
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	rgtest_fill_u32<<<rgtest_grid(N), 256, 0, s>>>((unsigned *)c, rg_f2u(v1), N);
	CK(cudaStreamGetCaptureInfo(s, &st, NULL, NULL, &deps, NULL, &n));
	REQUIRE(n == 1, "%zu dependencies", n);
	cudaGraphNode_t fill = deps[0];
	rgtest_scale_f32<<<rgtest_grid(N), 256, 0, s>>>(c, v2, (int)N);
	CK(cudaStreamUpdateCaptureDependencies(s, &fill, NULL, 1, cudaStreamSetCaptureDependencies));
	rgtest_fill_u32<<<rgtest_grid(N), 256, 0, s>>>((unsigned *)a, rg_f2u(v3), N);
	CK(cudaStreamEndCapture(s, &g));
	return g;
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
	rgtest_fill_u32<<<rgtest_grid(N), 256, 0, s1>>>((unsigned *)a, rg_f2u(1.0f), N);
	CK(cudaGetLastError());
	cudaGraph_t during = NULL;
	const cudaGraphNode_t *deps = NULL;
	size_t ndeps = 0;
	cudaStreamCaptureStatus st0;
	CK(cudaStreamGetCaptureInfo(s1, &st0, NULL, &during, &deps, NULL, &ndeps));
	cudaGraphNodeType t0 = cudaGraphNodeTypeCount;
	if (ndeps == 1)
		CK(cudaGraphNodeGetType(deps[0], &t0));
	printf("capture info: graph %d, %zu dependency, a kernel node %d\n", during != NULL, ndeps,
	       t0 == cudaGraphNodeTypeKernel);
	printf("s2 capturing before the fork: %d\n", capturing(s2));
	CK(cudaEventRecord(fork, s1));
	CK(cudaStreamWaitEvent(s2, fork, 0));
	printf("s2 capturing after the fork: %d\n", capturing(s2));
	cudaStreamCaptureStatus st1, st2;
	unsigned long long id1 = 0, id2 = 0;
	CK(cudaStreamGetCaptureInfo(s1, &st1, &id1, NULL, NULL, NULL, NULL));
	CK(cudaStreamGetCaptureInfo(s2, &st2, &id2, NULL, NULL, NULL, NULL));
	printf("capture info: %d %d, same id %d, id set %d\n", (int)st1, (int)st2, id1 == id2, id1 != 0);
	rgtest_fill_u32<<<rgtest_grid(N), 256, 0, s2>>>((unsigned *)b, rg_f2u(2.0f), N);
	CK(cudaGetLastError());
	CK(cudaEventRecord(join, s2));
	CK(cudaStreamWaitEvent(s1, join, 0));
	rgtest_add_f32<<<rgtest_grid(N), 256, 0, s1>>>(a, b, c, (int)N);
	CK(cudaGetLastError());
	CK(cudaStreamEndCapture(s1, &g));
	printf("capturing after the end: s1 %d s2 %d\n", capturing(s1), capturing(s2));
	printf("the capture info's graph is the captured one: %d\n", during == g);
	size_t nodes = 0;
	CK(cudaGraphGetNodes(g, NULL, &nodes));
	printf("graph nodes: %zu\n", nodes);

	/* nothing ran during the capture; each replay does */
	cudaGraphExec_t x;
	CK(cudaGraphInstantiateWithFlags(&x, g, cudaGraphInstantiateFlagAutoFreeOnLaunch));
	CK(cudaGraphUpload(x, s1));
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

	/* 3. dependencies set by hand, and an exec updated from another capture */
	cudaGraph_t g3 = capture_set_deps(s1, a, c, 4.0f, 2.0f, 5.0f);
	cudaGraphNode_t from[4], to[4];
	size_t nedges = 4;
	CK(cudaGraphGetEdges(g3, from, to, NULL, &nedges));
	printf("set dependencies: %zu edges from one node %d\n", nedges, nedges == 2 && from[0] == from[1]);
	cudaGraphExec_t x3;
	CK(cudaGraphInstantiate(&x3, g3, 0));
	CK(cudaGraphLaunch(x3, s1));
	CK(cudaStreamSynchronize(s1));
	check("graph 3, c", c, 8.0f);
	check("graph 3, a", a, 5.0f);
	cudaGraph_t g4 = capture_set_deps(s1, a, c, 1.0f, 3.0f, 6.0f);
	cudaGraphExecUpdateResultInfo info;
	memset(&info, 0xff, sizeof(info));
	EXPECT_ERR("cudaGraphExecUpdate", cudaGraphExecUpdate(x3, g4, &info), cudaSuccess);
	printf("update result: %d\n", (int)info.result);
	CK(cudaGraphLaunch(x3, s1));
	CK(cudaStreamSynchronize(s1));
	check("updated graph, c", c, 3.0f);
	check("updated graph, a", a, 6.0f);
	/* one kernel less: the topology changed */
	cudaGraph_t g5;
	CK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
	rgtest_fill_u32<<<rgtest_grid(N), 256, 0, s1>>>((unsigned *)c, rg_f2u(9.0f), N);
	CK(cudaStreamEndCapture(s1, &g5));
	memset(&info, 0, sizeof(info));
	EXPECT_ERR("cudaGraphExecUpdate, other topology", cudaGraphExecUpdate(x3, g5, &info),
		   cudaErrorGraphExecUpdateFailure);
	printf("update result: %d\n", (int)info.result);
	(void)cudaGetLastError();
	CK(cudaGraphExecDestroy(x3));
	CK(cudaGraphDestroy(g3));
	CK(cudaGraphDestroy(g4));
	CK(cudaGraphDestroy(g5));
	CK(cudaFree(a));
	CK(cudaFree(b));
	CK(cudaFree(c));
	CK(cudaEventDestroy(fork));
	CK(cudaEventDestroy(join));
	CK(cudaStreamDestroy(s1));
	CK(cudaStreamDestroy(s2));
	return rg_finish("capture");
}
