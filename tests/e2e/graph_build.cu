/*
 * graph_build: a graph built by hand (an empty root, a memset node, a kernel
 * node, a device-to-device memcpy node; edges added explicitly, one added and
 * removed again), its nodes, roots, edges and node types (printed by type, so
 * the order CUDA lists them in does not matter), launched three times; a kernel
 * node's parameters read back, changed in the exec graph and in the graph, a
 * clone of the changed graph; a child graph node and event nodes; errors: a node
 * of another graph as a dependency or edge end, a destroyed node (through the
 * remote only: the real runtime would read freed memory).
 */
#include <stdlib.h>

#include "rgtest.h"
#include "rgtest_kernels.cuh"

#define N (1u << 16)

static float *h;

static void check_q(const char *label, const float *q, float want)
{
	CK(cudaMemcpy(h, q, N * 4, cudaMemcpyDeviceToHost));
	rg_check_f32(label, h, N, want);
}

static int cmp_str(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

/* Nodes by type, roots by type, edges as "type -> type", sorted. */
static void describe(const char *name, cudaGraph_t g)
{
	cudaGraphNode_t nodes[16], roots[16], from[16], to[16];
	size_t n = 0, nr = 0, ne = 0;
	CK(cudaGraphGetNodes(g, NULL, &n));
	printf("%s: %zu nodes", name, n);
	size_t cap = 16;
	CK(cudaGraphGetNodes(g, nodes, &cap));
	int count[16] = {0};
	for (size_t i = 0; i < cap; i++) {
		cudaGraphNodeType t;
		CK(cudaGraphNodeGetType(nodes[i], &t));
		count[(int)t & 15]++;
	}
	for (int t = 0; t < 16; t++)
		if (count[t])
			printf(", %d of type %d", count[t], t);
	printf("\n");
	CK(cudaGraphGetRootNodes(g, NULL, &nr));
	cap = 16;
	CK(cudaGraphGetRootNodes(g, roots, &cap));
	printf("%s: %zu roots:", name, nr);
	for (size_t i = 0; i < cap; i++) {
		cudaGraphNodeType t;
		CK(cudaGraphNodeGetType(roots[i], &t));
		printf(" type %d", (int)t);
	}
	printf("\n");
	CK(cudaGraphGetEdges(g, NULL, NULL, NULL, &ne));
	cap = 16;
	CK(cudaGraphGetEdges(g, from, to, NULL, &cap));
	char lines[16][32];
	for (size_t i = 0; i < cap; i++) {
		cudaGraphNodeType a, b;
		CK(cudaGraphNodeGetType(from[i], &a));
		CK(cudaGraphNodeGetType(to[i], &b));
		snprintf(lines[i], sizeof lines[i], "%d -> %d", (int)a, (int)b);
	}
	qsort(lines, cap, sizeof lines[0], cmp_str);
	printf("%s: %zu edges:", name, ne);
	for (size_t i = 0; i < cap; i++)
		printf(" [%s]", lines[i]);
	printf("\n");
	/* a list longer than the graph's: NULL past the end, the count it holds */
	cudaGraphNode_t more[8];
	memset(more, 0xAB, sizeof more);
	cap = 8;
	CK(cudaGraphGetNodes(g, more, &cap));
	printf("%s: long list: %zu, slot 7 %s\n", name, cap, more[7] ? "set" : "NULL");
}

int main(void)
{
	CK(cudaSetDevice(0));
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	float *p, *q;
	CK(cudaMalloc(&p, N * 4));
	CK(cudaMalloc(&q, N * 4));
	h = (float *)malloc(N * 4);

	cudaGraph_t g;
	CK(cudaGraphCreate(&g, 0));
	cudaGraphNode_t e, m, k, c;
	CK(cudaGraphAddEmptyNode(&e, g, NULL, 0));
	struct cudaMemsetParams mp;
	memset(&mp, 0, sizeof mp);
	mp.dst = p;
	mp.value = rg_f2u(1.0f);
	mp.elementSize = 4;
	mp.width = N;
	mp.height = 1;
	CK(cudaGraphAddMemsetNode(&m, g, NULL, 0, &mp));
	CK(cudaGraphAddDependencies(g, &e, &m, NULL, 1));
	float scale = 3.0f;
	int n = (int)N;
	void *args[] = {&p, &scale, &n};
	cudaKernelNodeParams kp;
	kp = cudaKernelNodeParams();
	kp.func = (void *)rgtest_scale_f32;
	kp.gridDim = dim3(rgtest_grid(N));
	kp.blockDim = dim3(256);
	kp.kernelParams = args;
	CK(cudaGraphAddKernelNode(&k, g, &m, 1, &kp));
	CK(cudaGraphAddMemcpyNode1D(&c, g, NULL, 0, q, p, N * 4, cudaMemcpyDeviceToDevice));
	CK(cudaGraphAddDependencies(g, &k, &c, NULL, 1));
	/* an edge added and taken away again */
	CK(cudaGraphAddDependencies(g, &e, &c, NULL, 1));
	CK(cudaGraphRemoveDependencies(g, &e, &c, NULL, 1));
	describe("graph", g);

	/* the parameters of the kernel node, as set */
	struct cudaKernelNodeParams got;
	got = cudaKernelNodeParams();
	CK(cudaGraphKernelNodeGetParams(k, &got));
	printf("kernel node: func %s, grid %u, block %u, scale %g, n %d\n",
	       got.func == (void *)rgtest_scale_f32 ? "rgtest_scale_f32" : "?", got.gridDim.x, got.blockDim.x,
	       *(float *)got.kernelParams[1], *(int *)got.kernelParams[2]);

	cudaGraphExec_t x;
	CK(cudaGraphInstantiate(&x, g, 0));
	for (int i = 1; i <= 3; i++) {
		CK(cudaMemset(q, 0, N * 4));
		CK(cudaGraphLaunch(x, s));
		CK(cudaStreamSynchronize(s));
		char label[64];
		snprintf(label, sizeof label, "launch %d: q", i);
		check_q(label, q, 3.0f);
	}

	/* new parameters for the exec's copy of the kernel node only */
	scale = 5.0f;
	CK(cudaGraphExecKernelNodeSetParams(x, k, &kp));
	CK(cudaGraphLaunch(x, s));
	CK(cudaStreamSynchronize(s));
	check_q("exec with scale 5: q", q, 5.0f);

	/* the graph's node, then a clone of the graph */
	scale = 2.0f;
	CK(cudaGraphKernelNodeSetParams(k, &kp));
	got = cudaKernelNodeParams();
	CK(cudaGraphKernelNodeGetParams(k, &got));
	printf("kernel node after set: scale %g\n", *(float *)got.kernelParams[1]);
	cudaGraph_t g2;
	CK(cudaGraphClone(&g2, g));
	describe("clone", g2);
	cudaGraphExec_t x2;
	CK(cudaGraphInstantiateWithFlags(&x2, g2, 0));
	CK(cudaGraphLaunch(x2, s));
	CK(cudaStreamSynchronize(s));
	check_q("clone: q", q, 2.0f);
	CK(cudaGraphLaunch(x, s));
	CK(cudaStreamSynchronize(s));
	check_q("first exec again: q", q, 5.0f);

	/* a graph holding g2 as a child, after an event record node; a wait node after */
	cudaEvent_t ev;
	CK(cudaEventCreate(&ev));
	cudaGraph_t g3;
	CK(cudaGraphCreate(&g3, 0));
	cudaGraphNode_t rec, child, wait;
	CK(cudaGraphAddEventRecordNode(&rec, g3, NULL, 0, ev));
	CK(cudaGraphAddChildGraphNode(&child, g3, &rec, 1, g2));
	CK(cudaGraphAddEventWaitNode(&wait, g3, &child, 1, ev));
	describe("parent", g3);
	cudaGraphExec_t x3;
	CK(cudaGraphInstantiate(&x3, g3, 0));
	CK(cudaMemset(q, 0, N * 4));
	CK(cudaGraphLaunch(x3, s));
	CK(cudaStreamSynchronize(s));
	check_q("parent: q", q, 2.0f);
	CK(cudaEventSynchronize(ev));

	/* errors: nodes of another graph */
	cudaGraph_t other;
	CK(cudaGraphCreate(&other, 0));
	cudaGraphNode_t o1, o2;
	CK(cudaGraphAddEmptyNode(&o1, other, NULL, 0));
	EXPECT_ERR("dependency of another graph", cudaGraphAddEmptyNode(&o2, other, &k, 1), cudaErrorInvalidValue);
	EXPECT_ERR("edge to another graph", cudaGraphAddDependencies(g, &k, &o1, NULL, 1), cudaErrorInvalidValue);
	EXPECT_ERR("edge not there", cudaGraphRemoveDependencies(g, &e, &c, NULL, 1), cudaErrorInvalidValue);
	cudaGetLastError(); /* the errors above, taken */
	CK(cudaGraphAddEmptyNode(&o2, other, &o1, 1));
	CK(cudaGraphDestroyNode(o2));
	size_t cnt = 0;
	CK(cudaGraphGetNodes(other, NULL, &cnt));
	printf("other after destroying a node: %zu nodes\n", cnt);
	if (rg_remote()) {
		EXPECT_ERR("destroyed node as dependency", cudaGraphAddEmptyNode(&o2, other, &o2, 1),
			   cudaErrorInvalidValue);
	} else {
		printf("destroyed node as dependency: cudaErrorInvalidValue\n");
	}
	cudaGetLastError(); /* the errors above, taken */
	/* host memory in a memcpy node cannot reach the graph on the server */
	if (rg_remote()) {
		cudaGraphNode_t bad;
		cudaError_t r = cudaGraphAddMemcpyNode1D(&bad, other, NULL, 0, q, h, 16, cudaMemcpyHostToDevice);
		if (r != cudaErrorNotSupported) {
			fprintf(stderr, "host memcpy node: %s\n", cudaGetErrorName(r));
			rg_failures++;
		}
		cudaGetLastError();
	}

	CK(cudaGraphExecDestroy(x));
	CK(cudaGraphExecDestroy(x2));
	CK(cudaGraphExecDestroy(x3));
	CK(cudaGraphDestroy(g));
	CK(cudaGraphDestroy(g2));
	CK(cudaGraphDestroy(g3));
	/* "other" is left for the session's end */
	CK(cudaEventDestroy(ev));
	CK(cudaStreamDestroy(s));
	CK(cudaFree(p));
	CK(cudaFree(q));
	free(h);
	return rg_finish("graph_build");
}
