/*
 * hostnode: host functions in graphs. A host function captured in a stream
 * capture between kernels, and host nodes added with cudaGraphAddHostNode, run
 * at every replay of every exec, in the graph's order, with the user's data
 * pointer; execs keep running them after their graph (and other execs holding
 * the same nodes) are destroyed; node parameters (get, set, exec set), an exec
 * update and a child graph carry them. Each host function appends its tag to a
 * log that is printed, and emptied, after each synchronisation.
 */
#include "rgtest.h"
#include "rgtest_kernels.cuh"

#define N 4096u

typedef struct tag {
	int v;
} tag;

static tag T[] = {{1}, {2}, {10}, {11}, {20}, {21}, {30}, {31}};
#define NT (sizeof(T) / sizeof(T[0]))

static int calls[512];
static int ncalls, bad_data;

static void CUDART_CB note(void *arg)
{
	tag *t = (tag *)arg;
	if (t < T || t >= T + NT) {
		bad_data++;
		return;
	}
	if (ncalls < 512)
		calls[ncalls++] = t->v;
}

/* Prints and empties the log. */
static void show(const char *label)
{
	printf("%s:", label);
	for (int i = 0; i < ncalls; i++)
		printf(" %d", calls[i]);
	printf("\n");
	ncalls = 0;
}

static void check(const char *label, const float *d, float want)
{
	static float h[N];
	CK(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
	rg_check_f32(label, h, N, want);
}

static cudaHostNodeParams hp(int i)
{
	cudaHostNodeParams p;
	memset(&p, 0, sizeof(p));
	p.fn = note;
	p.userData = &T[i];
	return p;
}

/* A node of rgtest_scale_f32 over N floats, its arguments at args. */
static cudaKernelNodeParams scale_node(void **args)
{
	cudaKernelNodeParams p = {};
	p.func = (void *)rgtest_scale_f32;
	p.gridDim = dim3(rgtest_grid(N));
	p.blockDim = dim3(256);
	p.kernelParams = args;
	return p;
}

/* host(a) -> scale(d, 2) -> host(b), built node by node; *first and *last: the host nodes. */
static cudaGraph_t build(int a, int b, float *d, cudaGraphNode_t *first, cudaGraphNode_t *last)
{
	static float two = 2.0f;
	static int n = (int)N;
	cudaGraph_t g;
	cudaGraphNode_t k;
	CK(cudaGraphCreate(&g, 0));
	cudaHostNodeParams pa = hp(a), pb = hp(b);
	CK(cudaGraphAddHostNode(first, g, NULL, 0, &pa));
	void *args[3] = {(void *)&d, (void *)&two, (void *)&n};
	cudaKernelNodeParams kp = scale_node(args);
	CK(cudaGraphAddKernelNode(&k, g, first, 1, &kp));
	CK(cudaGraphAddHostNode(last, g, &k, 1, &pb));
	return g;
}

static int count_host_nodes(cudaGraph_t g, cudaGraphNode_t *one)
{
	cudaGraphNode_t nodes[16];
	size_t n = 16;
	int host = 0;
	CK(cudaGraphGetNodes(g, nodes, &n));
	for (size_t i = 0; i < n; i++) {
		cudaGraphNodeType t;
		CK(cudaGraphNodeGetType(nodes[i], &t));
		if (t == cudaGraphNodeTypeHost) {
			host++;
			*one = nodes[i];
		}
	}
	return host;
}

int main(void)
{
	CK(cudaSetDevice(0));
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	float *p, *q, *r, *c;
	CK(cudaMalloc(&p, N * 4));
	CK(cudaMalloc(&q, N * 4));
	CK(cudaMalloc(&r, N * 4));
	CK(cudaMalloc(&c, N * 4));

	/* 1. captured: fill p, host 1, p *= 2, q *= 2, host 2 */
	rgtest_fill_u32<<<rgtest_grid(N), 256, 0, s>>>((unsigned *)q, rg_f2u(1.0f), N);
	CK(cudaGetLastError());
	CK(cudaStreamSynchronize(s));
	cudaGraph_t g1;
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	rgtest_fill_u32<<<rgtest_grid(N), 256, 0, s>>>((unsigned *)p, rg_f2u(1.0f), N);
	CK(cudaLaunchHostFunc(s, note, &T[0]));
	rgtest_scale_f32<<<rgtest_grid(N), 256, 0, s>>>(p, 2.0f, (int)N);
	rgtest_scale_f32<<<rgtest_grid(N), 256, 0, s>>>(q, 2.0f, (int)N);
	CK(cudaLaunchHostFunc(s, note, &T[1]));
	CK(cudaGetLastError());
	CK(cudaStreamEndCapture(s, &g1));
	CK(cudaStreamSynchronize(s));
	show("during the capture");
	size_t nodes = 0;
	CK(cudaGraphGetNodes(g1, NULL, &nodes));
	cudaGraphNode_t captured = NULL;
	int nhost = count_host_nodes(g1, &captured);
	printf("captured graph: %zu nodes, %d host nodes\n", nodes, nhost);
	cudaHostNodeParams got;
	memset(&got, 0, sizeof(got));
	CK(cudaGraphHostNodeGetParams(captured, &got));
	printf("a captured host node's parameters: fn %d, data %d\n", got.fn == note,
	       got.userData == &T[0] || got.userData == &T[1]);

	cudaGraphExec_t x1, x1b;
	CK(cudaGraphInstantiate(&x1, g1, 0));
	for (int i = 0; i < 3; i++)
		CK(cudaGraphLaunch(x1, s));
	CK(cudaStreamSynchronize(s));
	show("three replays");
	check("three replays, p", p, 2.0f);
	check("three replays, q", q, 8.0f);

	/* 2. a clone's exec and the first one outlive both graphs and each other */
	cudaGraph_t g1c;
	CK(cudaGraphClone(&g1c, g1));
	CK(cudaGraphInstantiate(&x1b, g1c, 0));
	CK(cudaGraphDestroy(g1));
	CK(cudaGraphDestroy(g1c));
	CK(cudaGraphLaunch(x1, s));
	CK(cudaGraphExecDestroy(x1));
	CK(cudaGraphLaunch(x1b, s));
	CK(cudaStreamSynchronize(s));
	show("graphs destroyed, then the first exec");
	CK(cudaGraphLaunch(x1b, s));
	CK(cudaStreamSynchronize(s));
	show("the clone's exec alone");
	CK(cudaGraphExecDestroy(x1b));
	check("after six replays, q", q, 64.0f);

	/* 3. built node by node: host 10 -> r *= 2 -> host 11 */
	rgtest_fill_u32<<<rgtest_grid(N), 256, 0, s>>>((unsigned *)r, rg_f2u(1.0f), N);
	CK(cudaGetLastError());
	cudaGraphNode_t h1, h2;
	cudaGraph_t g2 = build(2, 3, r, &h1, &h2);
	memset(&got, 0, sizeof(got));
	CK(cudaGraphHostNodeGetParams(h1, &got));
	printf("get params: fn %d, data %d\n", got.fn == note, got.userData == &T[2]);
	cudaGraphExec_t xa, xb, xc;
	CK(cudaGraphInstantiate(&xa, g2, 0));
	CK(cudaGraphInstantiate(&xb, g2, 0));
	cudaHostNodeParams set = hp(4);
	CK(cudaGraphHostNodeSetParams(h1, &set)); /* the graph's node: later execs */
	memset(&got, 0, sizeof(got));
	CK(cudaGraphHostNodeGetParams(h1, &got));
	printf("get params after set: data %d\n", got.userData == &T[4]);
	CK(cudaGraphInstantiate(&xc, g2, 0));
	set = hp(5);
	CK(cudaGraphExecHostNodeSetParams(xb, h2, &set)); /* xb's copy alone */
	CK(cudaGraphDestroy(g2));
	CK(cudaGraphLaunch(xa, s));
	CK(cudaGraphLaunch(xb, s));
	CK(cudaGraphLaunch(xc, s));
	CK(cudaStreamSynchronize(s));
	show("three execs of one graph");
	CK(cudaGraphExecDestroy(xa));
	CK(cudaGraphLaunch(xb, s));
	CK(cudaStreamSynchronize(s));
	show("the second exec, the first destroyed");
	CK(cudaGraphExecDestroy(xb));
	CK(cudaGraphLaunch(xc, s));
	CK(cudaStreamSynchronize(s));
	show("the third exec alone");
	check("after five launches, r", r, 32.0f);

	/* 4. an exec update takes the other graph's host functions */
	cudaGraphNode_t u1, u2;
	cudaGraph_t g3 = build(6, 7, r, &u1, &u2);
	cudaGraphExecUpdateResultInfo info;
	memset(&info, 0, sizeof(info));
	EXPECT_ERR("cudaGraphExecUpdate", cudaGraphExecUpdate(xc, g3, &info), cudaSuccess);
	printf("update result: %d\n", (int)info.result);
	CK(cudaGraphDestroy(g3));
	CK(cudaGraphLaunch(xc, s));
	CK(cudaGraphLaunch(xc, s));
	CK(cudaStreamSynchronize(s));
	show("the updated exec, twice");
	CK(cudaGraphExecDestroy(xc));
	check("after seven launches, r", r, 128.0f);

	/* 5. a child graph's host node, the child and parent graphs destroyed */
	cudaGraph_t gc, gp;
	cudaGraphNode_t hn, child, k;
	CK(cudaGraphCreate(&gc, 0));
	cudaHostNodeParams pc = hp(0);
	CK(cudaGraphAddHostNode(&hn, gc, NULL, 0, &pc));
	CK(cudaGraphCreate(&gp, 0));
	CK(cudaGraphAddChildGraphNode(&child, gp, NULL, 0, gc));
	CK(cudaGraphDestroy(gc));
	float two = 2.0f;
	int n = (int)N;
	void *args[3] = {(void *)&c, (void *)&two, (void *)&n};
	cudaKernelNodeParams kp = scale_node(args);
	CK(cudaGraphAddKernelNode(&k, gp, &child, 1, &kp));
	cudaHostNodeParams pe = hp(1);
	CK(cudaGraphAddHostNode(&hn, gp, &k, 1, &pe));
	rgtest_fill_u32<<<rgtest_grid(N), 256, 0, s>>>((unsigned *)c, rg_f2u(3.0f), N);
	CK(cudaGetLastError());
	cudaGraphExec_t xp;
	CK(cudaGraphInstantiate(&xp, gp, 0));
	CK(cudaGraphDestroy(gp));
	CK(cudaGraphLaunch(xp, s));
	CK(cudaGraphLaunch(xp, s));
	CK(cudaStreamSynchronize(s));
	show("a child graph's host node, twice");
	CK(cudaGraphExecDestroy(xp));
	check("child graph, c", c, 12.0f);

	/* 6. what CUDA refuses */
	cudaGraph_t ge;
	cudaGraphNode_t bad;
	CK(cudaGraphCreate(&ge, 0));
	cudaHostNodeParams nofn;
	memset(&nofn, 0, sizeof(nofn));
	EXPECT_ERR("host node without a function", cudaGraphAddHostNode(&bad, ge, NULL, 0, &nofn),
		   cudaErrorInvalidValue);
	cudaGetLastError();
	CK(cudaGraphDestroy(ge));

	printf("wrong data pointers: %d\n", bad_data);
	if (bad_data)
		rg_failures++;
	CK(cudaStreamDestroy(s));
	CK(cudaFree(p));
	CK(cudaFree(q));
	CK(cudaFree(r));
	CK(cudaFree(c));
	return rg_finish("hostnode");
}
