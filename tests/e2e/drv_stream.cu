/*
 * drv_stream.cu: the driver API's streams, events, host functions, stream
 * capture and graphs, with driver calls only (cuInit, primary context, cuMem*,
 * cuModuleLoadData, cuLaunchKernel, cuStream*, cuEvent*, cuGraph*).
 *
 * The kernels are rgtest_kernels.cuh's (the driver test double runs them): the
 * program loads its own fatbin (the .nv_fatbin section of /proc/self/exe) with
 * cuModuleLoadData and takes them with cuModuleGetFunction.
 *
 * Runs unchanged on a GPU (the real libcuda.so.1) and through libremote.so as
 * libcuda.so.1 (LD_LIBRARY_PATH=<build>/frontend/driver) against remote-gpud.
 * Where the remote path is specified to differ from a local GPU (what the
 * runtime layer does not support; handles used after destruction, undefined on
 * a GPU), the expectation depends on REMOTE_GPU.
 *
 * Output and exit status as rgdrv.h says: the same lines in every mode.
 */
#include <elf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <atomic>

#include <cuda.h>

#include "rgdrv.h"
#include "rgtest_kernels.cuh"

static CUcontext ctx;
static CUfunction f_fill;

/* Loads the fatbin of this program that has the test kernels. */
static CUmodule load_own_kernels(void)
{
	size_t size;
	const void *img = rg_own_fatbin("rgtest_fill_u32", &size);
	CUmodule m;
	if (!img || cuModuleLoadData(&m, img) != CUDA_SUCCESS)
		return NULL;
	if (cuModuleGetFunction(&f_fill, m, "rgtest_fill_u32") != CUDA_SUCCESS) {
		cuModuleUnload(m);
		return NULL;
	}
	return m;
}

/* n words of device memory read back. */
static unsigned *readback(CUdeviceptr d, size_t n)
{
	static unsigned host[1 << 16];
	memset(host, 0xEE, n * 4);
	CK(cuMemcpyDtoH(host, d, n * 4));
	return host;
}

/* Index of the first word of d[0, n) that is not v, or -1. */
static long first_not(CUdeviceptr d, size_t from, size_t n, unsigned v)
{
	unsigned *h = readback(d, from + n);
	for (size_t i = from; i < from + n; i++)
		if (h[i] != v)
			return (long)i;
	return -1;
}

static void garbage(CUdeviceptr d, size_t n)
{
	static unsigned junk[1 << 16];
	for (size_t i = 0; i < n; i++)
		junk[i] = 0xA5A50000u + (unsigned)i;
	CK(cuMemcpyHtoD(d, junk, n * 4));
}

static void launch_fill(CUdeviceptr p, unsigned v, unsigned long long n, CUstream s)
{
	void *args[] = {&p, &v, &n};
	CK(cuLaunchKernel(f_fill, rgtest_grid(n), 1, 1, 256, 1, 1, 0, s, args, NULL));
}

/* ---- streams ---- */

static void test_streams(void)
{
	CUstream s, nb, sd, sp;
	unsigned flags = 99;
	expect("cuStreamCreate(DEFAULT)", cuStreamCreate(&s, CU_STREAM_DEFAULT), CUDA_SUCCESS);
	CK(cuStreamGetFlags(s, &flags));
	check("cuStreamGetFlags(DEFAULT) = 0", flags == 0, "%u", flags);
	expect("cuStreamCreate(NON_BLOCKING)", cuStreamCreate(&nb, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
	CK(cuStreamGetFlags(nb, &flags));
	check("cuStreamGetFlags(NON_BLOCKING)", flags == CU_STREAM_NON_BLOCKING, "%u", flags);
	expect("cuStreamCreate(unknown flag)", cuStreamCreate(&sd, 0x8), CUDA_ERROR_INVALID_VALUE);
	expect("cuStreamCreate(NULL)", cuStreamCreate(NULL, 0), CUDA_ERROR_INVALID_VALUE);
	expect("cuStreamGetFlags(NULL flags)", cuStreamGetFlags(s, NULL), CUDA_ERROR_INVALID_VALUE);
	expect("cuStreamGetPriority(NULL priority)", cuStreamGetPriority(s, NULL), CUDA_ERROR_INVALID_VALUE);

	int least = 99, greatest = 99, prio = 99;
	CK(cuCtxGetStreamPriorityRange(&least, &greatest));
	check("cuCtxGetStreamPriorityRange: greatest <= 0 <= least", greatest <= 0 && least >= 0, "[%d, %d]", least,
	      greatest);
	expect("cuCtxGetStreamPriorityRange(NULL, NULL)", cuCtxGetStreamPriorityRange(NULL, NULL), CUDA_SUCCESS);
	CK(cuStreamCreateWithPriority(&sp, CU_STREAM_NON_BLOCKING, greatest - 10));
	CK(cuStreamGetPriority(sp, &prio));
	check("cuStreamCreateWithPriority: clamped to the greatest", prio == greatest, "%d", prio);
	CK(cuStreamGetFlags(sp, &flags));
	check("cuStreamCreateWithPriority: flags kept", flags == CU_STREAM_NON_BLOCKING, "%u", flags);
	CK(cuStreamDestroy(sp));
	CK(cuStreamCreateWithPriority(&sp, 0, least + 10));
	CK(cuStreamGetPriority(sp, &prio));
	check("cuStreamCreateWithPriority: clamped to the least", prio == least, "%d", prio);
	CK(cuStreamDestroy(sp));
	CK(cuStreamGetPriority(s, &prio));
	check("cuStreamGetPriority(created) = 0", prio == 0, "%d", prio);

	CUcontext c = NULL;
	CK(cuStreamGetCtx(s, &c));
	check("cuStreamGetCtx(created) = the primary context", c == ctx);
	c = NULL;
	CK(cuStreamGetCtx(CU_STREAM_LEGACY, &c));
	check("cuStreamGetCtx(CU_STREAM_LEGACY) = the current context", c == ctx);
	c = NULL;
	CUgreenCtx green = (CUgreenCtx)1;
	CK(cuStreamGetCtx_v2(nb, &c, &green));
	check("cuStreamGetCtx_v2: the context, no green one", c == ctx && green == NULL);
	CUdevice dev = -1;
	CK(cuStreamGetDevice(s, &dev));
	check("cuStreamGetDevice = 0", dev == 0, "%d", dev);
	unsigned long long id1 = 0, id2 = 0, idl = 0;
	CK(cuStreamGetId(s, &id1));
	CK(cuStreamGetId(nb, &id2));
	CK(cuStreamGetId(CU_STREAM_LEGACY, &idl));
	check("cuStreamGetId: distinct ids", id1 != id2 && id1 != idl && id2 != idl);
	expect("cuStreamGetId(NULL id)", cuStreamGetId(s, NULL), CUDA_ERROR_INVALID_VALUE);

	expect("cuStreamQuery(idle)", cuStreamQuery(s), CUDA_SUCCESS);
	expect("cuStreamQuery(CU_STREAM_LEGACY)", cuStreamQuery(CU_STREAM_LEGACY), CUDA_SUCCESS);
	expect("cuStreamSynchronize(CU_STREAM_PER_THREAD)", cuStreamSynchronize(CU_STREAM_PER_THREAD), CUDA_SUCCESS);
	expect("cuStreamSynchronize(NULL stream)", cuStreamSynchronize(NULL), CUDA_SUCCESS);

	CK(cuStreamCreate(&sd, 0));
	expect("cuStreamDestroy", cuStreamDestroy(sd), CUDA_SUCCESS);
	ONLY(remote) { /* undefined on a GPU */
		expect("cuStreamQuery(destroyed)", cuStreamQuery(sd), CUDA_ERROR_INVALID_HANDLE);
		expect("cuStreamSynchronize(destroyed)", cuStreamSynchronize(sd), CUDA_ERROR_INVALID_HANDLE);
		expect("cuStreamGetFlags(destroyed)", cuStreamGetFlags(sd, &flags), CUDA_ERROR_INVALID_HANDLE);
		expect("cuStreamGetId(destroyed)", cuStreamGetId(sd, &id1), CUDA_ERROR_INVALID_HANDLE);
		expect("cuStreamDestroy(destroyed)", cuStreamDestroy(sd), CUDA_ERROR_INVALID_HANDLE);
		expect("cuStreamQuery(unknown)", cuStreamQuery((CUstream)(uintptr_t)0x7777), CUDA_ERROR_INVALID_HANDLE);
	}
	CK(cuStreamDestroy(s));
	CK(cuStreamDestroy(nb));
}

/* ---- events ---- */

static void test_events(CUdeviceptr a, CUdeviceptr b, size_t n)
{
	CUevent e, t0, t1, nt, never;
	expect("cuEventCreate(unknown flag)", cuEventCreate(&e, 0x10), CUDA_ERROR_INVALID_VALUE);
	expect("cuEventCreate(NULL)", cuEventCreate(NULL, 0), CUDA_ERROR_INVALID_VALUE);
	expect("cuEventCreate(INTERPROCESS without DISABLE_TIMING)", cuEventCreate(&e, CU_EVENT_INTERPROCESS),
	       CUDA_ERROR_INVALID_VALUE);
	CUresult r = cuEventCreate(&e, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING);
	expect("cuEventCreate(INTERPROCESS)", r, CUDA_SUCCESS);
	if (r == CUDA_SUCCESS)
		CK(cuEventDestroy(e));

	CUstream s1, s2;
	CK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
	CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
	CK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
	CK(cuEventCreate(&t0, CU_EVENT_DEFAULT));
	CK(cuEventCreate(&t1, CU_EVENT_BLOCKING_SYNC));
	CK(cuEventCreate(&nt, CU_EVENT_DISABLE_TIMING));
	CK(cuEventCreate(&never, 0));

	/* s2 copies what s1 wrote, after s1's event */
	garbage(a, n);
	garbage(b, n);
	CK(cuEventRecord(t0, s1));
	launch_fill(a, 0x1234567u, n, s1);
	CK(cuEventRecord(e, s1));
	CK(cuEventRecord(t1, s1));
	expect("cuStreamWaitEvent", cuStreamWaitEvent(s2, e, 0), CUDA_SUCCESS);
	expect("cuStreamWaitEvent(unknown flag)", cuStreamWaitEvent(s2, e, 0x10), CUDA_ERROR_INVALID_VALUE);
	CK(cuMemcpyDtoDAsync(b, a, n * 4, s2));
	CK(cuStreamSynchronize(s2));
	long bad = first_not(b, 0, n, 0x1234567u);
	check("event orders a copy on another stream after a kernel", bad < 0, "word %ld", bad);

	expect("cuEventSynchronize", cuEventSynchronize(t1), CUDA_SUCCESS);
	expect("cuEventQuery(done)", cuEventQuery(t1), CUDA_SUCCESS);
	float ms = -1;
	expect("cuEventElapsedTime", cuEventElapsedTime(&ms, t0, t1), CUDA_SUCCESS);
	check("cuEventElapsedTime >= 0", ms >= 0.0f);
	/* the driver's answer (measured on an H100) */
	expect("cuEventElapsedTime(NULL ms)", cuEventElapsedTime(NULL, t0, t1), CUDA_ERROR_INVALID_HANDLE);
	expect("cuEventElapsedTime(DISABLE_TIMING)", cuEventElapsedTime(&ms, t0, e), CUDA_ERROR_INVALID_HANDLE);
	expect("cuEventElapsedTime(never recorded)", cuEventElapsedTime(&ms, never, t1), CUDA_ERROR_INVALID_HANDLE);
	expect("cuEventRecordWithFlags(DEFAULT)", cuEventRecordWithFlags(nt, s1, CU_EVENT_RECORD_DEFAULT),
	       CUDA_SUCCESS);
	expect("cuEventRecordWithFlags(unknown flag)", cuEventRecordWithFlags(nt, s1, 0x8), CUDA_ERROR_INVALID_VALUE);
	expect("cuEventRecord(CU_STREAM_LEGACY)", cuEventRecord(nt, CU_STREAM_LEGACY), CUDA_SUCCESS);
	expect("cuEventSynchronize(legacy record)", cuEventSynchronize(nt), CUDA_SUCCESS);

	expect("cuEventDestroy", cuEventDestroy(nt), CUDA_SUCCESS);
	ONLY(remote) { /* undefined on a GPU */
		expect("cuEventQuery(destroyed)", cuEventQuery(nt), CUDA_ERROR_INVALID_HANDLE);
		expect("cuEventRecord(destroyed)", cuEventRecord(nt, s1), CUDA_ERROR_INVALID_HANDLE);
		expect("cuEventSynchronize(destroyed)", cuEventSynchronize(nt), CUDA_ERROR_INVALID_HANDLE);
		expect("cuStreamWaitEvent(destroyed event)", cuStreamWaitEvent(s1, nt, 0), CUDA_ERROR_INVALID_HANDLE);
		expect("cuEventDestroy(destroyed)", cuEventDestroy(nt), CUDA_ERROR_INVALID_HANDLE);
	}
	CK(cuEventDestroy(e));
	CK(cuEventDestroy(t0));
	CK(cuEventDestroy(t1));
	CK(cuEventDestroy(never));
	CK(cuStreamDestroy(s1));
	CK(cuStreamDestroy(s2));
}

/* ---- host functions ---- */

static int order[16];
static std::atomic<int> norder;
static CUstream cb_stream;
static int cb_bad;

static void note(void *p) { order[norder++] = (int)(uintptr_t)p; }

static void CUDA_CB callback(CUstream s, CUresult status, void *p)
{
	if (s != cb_stream || status != CUDA_SUCCESS)
		cb_bad = 1;
	note(p);
}

/* A host function that holds its stream until released (or a second passed:
 * a driver that runs host functions at once, as the test double does). */
static std::atomic<int> gate_open, gate_passed;

static void gate(void *unused)
{
	for (int i = 0; i < 1000 && !gate_open; i++) {
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
	gate_passed = 1;
}

static void test_hostfn(CUdeviceptr a, size_t n)
{
	CUstream s;
	CK(cuStreamCreate(&s, 0));
	cb_stream = s;
	norder = 0;
	CK(cuLaunchHostFunc(s, note, (void *)1));
	launch_fill(a, 7, n, s);
	CK(cuLaunchHostFunc(s, note, (void *)2));
	CK(cuStreamAddCallback(s, callback, (void *)3, 0));
	CK(cuLaunchHostFunc(s, note, (void *)4));
	CK(cuStreamSynchronize(s));
	check("host functions and callbacks run in stream order",
	      norder == 4 && order[0] == 1 && order[1] == 2 && order[2] == 3 && order[3] == 4, "%d calls: %d %d %d %d",
	      (int)norder, order[0], order[1], order[2], order[3]);
	check("cuStreamAddCallback: its stream and CUDA_SUCCESS", !cb_bad);
	expect("cuLaunchHostFunc(NULL fn)", cuLaunchHostFunc(s, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
	expect("cuStreamAddCallback(NULL callback)", cuStreamAddCallback(s, NULL, NULL, 0), CUDA_ERROR_INVALID_VALUE);
	expect("cuStreamAddCallback(flags 1)", cuStreamAddCallback(s, callback, NULL, 1), CUDA_ERROR_INVALID_VALUE);

	/* Work behind a blocked host function is not done: a query says so (or, on a
	 * driver that runs host functions at once, answers only after it ends). */
	CUevent e;
	CK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
	gate_open = gate_passed = 0;
	CK(cuLaunchHostFunc(s, gate, NULL));
	CK(cuEventRecord(e, s));
	CUresult qs = cuStreamQuery(s);
	int passed_s = gate_passed;
	CUresult qe = cuEventQuery(e);
	int passed_e = gate_passed;
	gate_open = 1;
	check("cuStreamQuery behind a blocked host function: not done before it",
	      qs == CUDA_ERROR_NOT_READY || (qs == CUDA_SUCCESS && passed_s), "%s", en(qs));
	check("cuEventQuery behind a blocked host function: not done before it",
	      qe == CUDA_ERROR_NOT_READY || (qe == CUDA_SUCCESS && passed_e), "%s", en(qe));
	CK(cuStreamSynchronize(s));
	expect("cuStreamQuery after it", cuStreamQuery(s), CUDA_SUCCESS);
	expect("cuEventQuery after it", cuEventQuery(e), CUDA_SUCCESS);
	CK(cuEventDestroy(e));
	CK(cuStreamDestroy(s));
}

/* ---- capture ---- */

static void test_capture(CUdeviceptr a, size_t n)
{
	CUstream s;
	CUgraph g = NULL;
	CUgraphExec x = NULL;
	CUstreamCaptureStatus st = (CUstreamCaptureStatus)99;
	cuuint64_t id = 0;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));

	expect("cuStreamIsCapturing(idle)", cuStreamIsCapturing(s, &st), CUDA_SUCCESS);
	check("  status NONE", st == CU_STREAM_CAPTURE_STATUS_NONE, "%d", (int)st);
	expect("cuStreamIsCapturing(NULL status)", cuStreamIsCapturing(s, NULL), CUDA_ERROR_INVALID_VALUE);
	expect("cuStreamBeginCapture(CU_STREAM_LEGACY)",
	       cuStreamBeginCapture(CU_STREAM_LEGACY, CU_STREAM_CAPTURE_MODE_GLOBAL),
	       CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	expect("cuStreamBeginCapture(bad mode)", cuStreamBeginCapture(s, (CUstreamCaptureMode)7),
	       CUDA_ERROR_INVALID_VALUE);

	CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
	CK(cuThreadExchangeStreamCaptureMode(&mode));
	check("cuThreadExchangeStreamCaptureMode: GLOBAL before", mode == CU_STREAM_CAPTURE_MODE_GLOBAL, "%d",
	      (int)mode);
	CK(cuThreadExchangeStreamCaptureMode(&mode));
	check("cuThreadExchangeStreamCaptureMode: RELAXED back", mode == CU_STREAM_CAPTURE_MODE_RELAXED, "%d",
	      (int)mode);
	/* (NULL crashes the driver: not asked) */

	expect("cuStreamBeginCapture", cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
	CK(cuStreamIsCapturing(s, &st));
	check("cuStreamIsCapturing: ACTIVE", st == CU_STREAM_CAPTURE_STATUS_ACTIVE, "%d", (int)st);
	st = (CUstreamCaptureStatus)99;
	expect("cuStreamGetCaptureInfo(status, id)", cuStreamGetCaptureInfo(s, &st, &id, NULL, NULL, NULL, NULL),
	       CUDA_SUCCESS);
	check("  ACTIVE with an id", st == CU_STREAM_CAPTURE_STATUS_ACTIVE && id != 0, "%d", (int)st);
	expect("cuStreamGetCaptureInfo(NULL status)", cuStreamGetCaptureInfo(s, NULL, &id, NULL, NULL, NULL, NULL),
	       CUDA_ERROR_INVALID_VALUE);
	/* captured: the whole buffer set to 5, then its first half filled with 9 */
	CK(cuMemsetD32Async(a, 5, n, s));
	launch_fill(a, 9, n / 2, s);
	expect("cuStreamEndCapture", cuStreamEndCapture(s, &g), CUDA_SUCCESS);
	CK(cuStreamIsCapturing(s, &st));
	check("cuStreamIsCapturing after the end: NONE", st == CU_STREAM_CAPTURE_STATUS_NONE, "%d", (int)st);
	id = 1;
	CK(cuStreamGetCaptureInfo(s, &st, &id, NULL, NULL, NULL, NULL));
	check("cuStreamGetCaptureInfo after the end: NONE", st == CU_STREAM_CAPTURE_STATUS_NONE, "%d", (int)st);

	size_t nn = 0, ne = 0, nr = 0;
	CK(cuGraphGetNodes(g, NULL, &nn));
	CUgraphNode nodes[4] = {};
	size_t cap = 4;
	CK(cuGraphGetNodes(g, nodes, &cap));
	CK(cuGraphGetRootNodes(g, NULL, &nr));
	CK(cuGraphGetEdges(g, NULL, NULL, NULL, &ne));
	check("captured graph: 2 nodes, 1 root, 1 edge", nn == 2 && cap == 2 && nr == 1 && ne == 1, "%zu %zu %zu", nn,
	      nr, ne);
	CUgraphNodeType t0 = (CUgraphNodeType)99, t1 = (CUgraphNodeType)99;
	CK(cuGraphNodeGetType(nodes[0], &t0));
	CK(cuGraphNodeGetType(nodes[1], &t1));
	check("captured graph: a memset node and a kernel node",
	      (t0 == CU_GRAPH_NODE_TYPE_MEMSET && t1 == CU_GRAPH_NODE_TYPE_KERNEL) ||
		      (t1 == CU_GRAPH_NODE_TYPE_MEMSET && t0 == CU_GRAPH_NODE_TYPE_KERNEL),
	      "%d %d", (int)t0, (int)t1);

	expect("cuGraphInstantiate", cuGraphInstantiate(&x, g, 0), CUDA_SUCCESS);
	for (int round = 1; round <= 2; round++) {
		garbage(a, n);
		expect(round == 1 ? "cuGraphLaunch (1)" : "cuGraphLaunch (2)", cuGraphLaunch(x, s), CUDA_SUCCESS);
		CK(cuStreamSynchronize(s));
		long b1 = first_not(a, 0, n / 2, 9), b2 = first_not(a, n / 2, n - n / 2, 5);
		check(round == 1 ? "graph launch 1: 9s then 5s, byte exact" : "graph launch 2: 9s then 5s, byte exact",
		      b1 < 0 && b2 < 0, "word %ld / %ld", b1, b2);
	}
	/* the legacy stream takes graph launches too */
	garbage(a, n);
	CK(cuGraphLaunch(x, CU_STREAM_LEGACY));
	CK(cuCtxSynchronize());
	check("graph launch on CU_STREAM_LEGACY",
	      first_not(a, 0, n / 2, 9) < 0 && first_not(a, n / 2, n - n / 2, 5) < 0);

	expect("cuGraphExecDestroy", cuGraphExecDestroy(x), CUDA_SUCCESS);
	expect("cuGraphDestroy", cuGraphDestroy(g), CUDA_SUCCESS);
	expect("cuGraphExecDestroy(NULL)", cuGraphExecDestroy(NULL), CUDA_ERROR_INVALID_VALUE);
	expect("cuGraphDestroy(NULL)", cuGraphDestroy(NULL), CUDA_ERROR_INVALID_VALUE);
	CK(cuStreamDestroy(s));
}

/* ---- graphs built node by node ---- */

/* A kernel node's parameters (of either ABI) for rgtest_fill_u32 over cnt words, args its arguments. */
template <typename P> static P fill_node(void **args, unsigned long long cnt)
{
	P kp = {};
	kp.func = f_fill;
	kp.gridDimX = rgtest_grid(cnt);
	kp.gridDimY = kp.gridDimZ = 1;
	kp.blockDimX = 256;
	kp.blockDimY = kp.blockDimZ = 1;
	kp.kernelParams = args;
	return kp;
}

static void test_graph(CUdeviceptr a, CUdeviceptr b, size_t n)
{
	CUstream s;
	CUgraph g, gc;
	CUgraphExec x, xc;
	CUgraphNode ms, kn, cp, em;
	CK(cuStreamCreate(&s, 0));
	expect("cuGraphCreate(flags 1)", cuGraphCreate(&g, 1), CUDA_ERROR_INVALID_VALUE);
	expect("cuGraphCreate", cuGraphCreate(&g, 0), CUDA_SUCCESS);

	/* a = 3 (memset) -> a[0, n/2) = 11 (kernel) -> b = a (copy); an empty node after the kernel */
	CUDA_MEMSET_NODE_PARAMS mp = {};
	mp.dst = a;
	mp.pitch = 0;
	mp.value = 3;
	mp.elementSize = 4;
	mp.width = n;
	mp.height = 1;
	expect("cuGraphAddMemsetNode", cuGraphAddMemsetNode(&ms, g, NULL, 0, &mp, ctx), CUDA_SUCCESS);
	mp.elementSize = 3;
	CUgraphNode junk;
	expect("cuGraphAddMemsetNode(elementSize 3)", cuGraphAddMemsetNode(&junk, g, NULL, 0, &mp, ctx),
	       CUDA_ERROR_INVALID_VALUE);
	expect("cuGraphAddMemsetNode(NULL params)", cuGraphAddMemsetNode(&junk, g, NULL, 0, NULL, ctx),
	       CUDA_ERROR_INVALID_VALUE);

	CUdeviceptr p = a;
	unsigned v = 11;
	unsigned long long cnt = n / 2;
	void *args[] = {&p, &v, &cnt};
	CUDA_KERNEL_NODE_PARAMS kp = fill_node<CUDA_KERNEL_NODE_PARAMS>(args, cnt);
	expect("cuGraphAddKernelNode", cuGraphAddKernelNode(&kn, g, &ms, 1, &kp), CUDA_SUCCESS);
	expect("cuGraphAddKernelNode(NULL params)", cuGraphAddKernelNode(&junk, g, NULL, 0, NULL),
	       CUDA_ERROR_INVALID_VALUE);
	v = 0xDEAD; /* the node keeps the values it was given */

	CUDA_MEMCPY3D cp3 = copy3d(on_device(a, n * 4), on_device(b, n * 4), n * 4, 1, 1);
	expect("cuGraphAddMemcpyNode(device to device)", cuGraphAddMemcpyNode(&cp, g, &kn, 1, &cp3, ctx), CUDA_SUCCESS);
	static unsigned hostbuf[16];
	CUDA_MEMCPY3D hp = cp3;
	hp.srcMemoryType = CU_MEMORYTYPE_HOST;
	hp.srcHost = hostbuf;
	hp.WidthInBytes = sizeof(hostbuf);
	CUgraph gh;
	CK(cuGraphCreate(&gh, 0));
	CUresult r = cuGraphAddMemcpyNode(&junk, gh, NULL, 0, &hp, ctx);
	expect("cuGraphAddMemcpyNode(host to device)", r, remote ? CUDA_ERROR_NOT_SUPPORTED : CUDA_SUCCESS);
	CK(cuGraphDestroy(gh));
	hp = cp3;
	hp.srcMemoryType = (CUmemorytype)9;
	expect("cuGraphAddMemcpyNode(bad memory type)", cuGraphAddMemcpyNode(&junk, g, NULL, 0, &hp, ctx),
	       CUDA_ERROR_INVALID_VALUE);

	expect("cuGraphAddEmptyNode", cuGraphAddEmptyNode(&em, g, NULL, 0), CUDA_SUCCESS);
	expect("cuGraphAddDependencies(kernel -> empty)", cuGraphAddDependencies(g, &kn, &em, NULL, 1), CUDA_SUCCESS);
	size_t nn = 0, ne = 0, nr = 0;
	CK(cuGraphGetNodes(g, NULL, &nn));
	CK(cuGraphGetEdges(g, NULL, NULL, NULL, &ne));
	CK(cuGraphGetRootNodes(g, NULL, &nr));
	check("built graph: 4 nodes, 3 edges, 1 root", nn == 4 && ne == 3 && nr == 1, "%zu %zu %zu", nn, ne, nr);
	CUgraphNode from[4], to[4];
	size_t ecap = 4;
	CK(cuGraphGetEdges(g, from, to, NULL, &ecap));
	int found = 0;
	for (size_t i = 0; i < ecap; i++)
		found += (from[i] == ms && to[i] == kn) + (from[i] == kn && to[i] == cp) +
			 (from[i] == kn && to[i] == em);
	check("built graph: its edges", ecap == 3 && found == 3, "%zu edges, %d known", ecap, found);
	CUgraphNodeType t = (CUgraphNodeType)99;
	CK(cuGraphNodeGetType(cp, &t));
	check("cuGraphNodeGetType(memcpy)", t == CU_GRAPH_NODE_TYPE_MEMCPY, "%d", (int)t);
	CK(cuGraphNodeGetType(em, &t));
	check("cuGraphNodeGetType(empty)", t == CU_GRAPH_NODE_TYPE_EMPTY, "%d", (int)t);
	expect("cuGraphNodeGetType(NULL type)", cuGraphNodeGetType(em, NULL), CUDA_ERROR_INVALID_VALUE);

	CUDA_KERNEL_NODE_PARAMS got = {};
	expect("cuGraphKernelNodeGetParams", cuGraphKernelNodeGetParams(kn, &got), CUDA_SUCCESS);
	check("  its function, geometry and arguments",
	      got.func == f_fill && got.gridDimX == kp.gridDimX && got.blockDimX == 256 && got.kernelParams &&
		      *(CUdeviceptr *)got.kernelParams[0] == a && *(unsigned *)got.kernelParams[1] == 11 &&
		      *(unsigned long long *)got.kernelParams[2] == cnt);

	expect("cuGraphInstantiate", cuGraphInstantiate(&x, g, 0), CUDA_SUCCESS);
	expect("cuGraphInstantiate(NULL exec)", cuGraphInstantiate(NULL, g, 0), CUDA_ERROR_INVALID_VALUE);
	garbage(a, n);
	garbage(b, n);
	CK(cuGraphLaunch(x, s));
	CK(cuStreamSynchronize(s));
	long b1 = first_not(b, 0, n / 2, 11), b2 = first_not(b, n / 2, n - n / 2, 3);
	check("built graph: memset, kernel, copy, byte exact", b1 < 0 && b2 < 0, "word %ld / %ld", b1, b2);

	/* the exec's kernel node takes new arguments; the graph keeps its own */
	v = 12;
	expect("cuGraphExecKernelNodeSetParams", cuGraphExecKernelNodeSetParams(x, kn, &kp), CUDA_SUCCESS);
	garbage(b, n);
	CK(cuGraphLaunch(x, s));
	CK(cuStreamSynchronize(s));
	b1 = first_not(b, 0, n / 2, 12);
	check("exec after cuGraphExecKernelNodeSetParams: 12s", b1 < 0, "word %ld", b1);
	CK(cuGraphKernelNodeGetParams(kn, &got));
	check("  the graph's node still has 11", *(unsigned *)got.kernelParams[1] == 11);

	/* the graph's node too, then a clone and a fresh exec of it */
	v = 13;
	expect("cuGraphKernelNodeSetParams", cuGraphKernelNodeSetParams(kn, &kp), CUDA_SUCCESS);
	expect("cuGraphClone", cuGraphClone(&gc, g), CUDA_SUCCESS);
	size_t cn = 0;
	CK(cuGraphGetNodes(gc, NULL, &cn));
	check("the clone has 4 nodes", cn == 4, "%zu", cn);
	CUDA_GRAPH_INSTANTIATE_PARAMS ip = {};
	ip.flags = 0;
	ip.result_out = (CUgraphInstantiateResult)99;
	expect("cuGraphInstantiateWithParams", cuGraphInstantiateWithParams(&xc, gc, &ip), CUDA_SUCCESS);
	check("  result SUCCESS", ip.result_out == CUDA_GRAPH_INSTANTIATE_SUCCESS, "%d", (int)ip.result_out);
	cuuint64_t xflags = 99;
	expect("cuGraphExecGetFlags", cuGraphExecGetFlags(xc, &xflags), CUDA_SUCCESS);
	check("  0 as instantiated", xflags == 0, "%llu", (unsigned long long)xflags);
	expect("cuGraphExecGetFlags(NULL flags)", cuGraphExecGetFlags(xc, NULL), CUDA_ERROR_INVALID_VALUE);
	CUgraphExec xa;
	expect("cuGraphInstantiate(AUTO_FREE_ON_LAUNCH)",
	       cuGraphInstantiate(&xa, gc, CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH), CUDA_SUCCESS);
	CK(cuGraphExecGetFlags(xa, &xflags));
	check("  its flags", xflags == CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH, "%llu",
	      (unsigned long long)xflags);
	CK(cuGraphExecDestroy(xa));
	garbage(b, n);
	CK(cuGraphLaunch(xc, s));
	CK(cuStreamSynchronize(s));
	b1 = first_not(b, 0, n / 2, 13);
	b2 = first_not(b, n / 2, n - n / 2, 3);
	check("the clone's exec: 13s then 3s", b1 < 0 && b2 < 0, "word %ld / %ld", b1, b2);

	/* an exec updated from its own graph */
	CUgraphExecUpdateResultInfo info;
	memset(&info, 0xff, sizeof(info));
	r = cuGraphExecUpdate(x, g, &info);
	expect("cuGraphExecUpdate", r, CUDA_SUCCESS);
	check("  its result", info.result == CU_GRAPH_EXEC_UPDATE_SUCCESS, "%d", (int)info.result);

	CK(cuGraphExecDestroy(xc));
	CK(cuGraphExecDestroy(x));
	CK(cuGraphDestroy(gc));
	CK(cuGraphDestroy(g));
	CK(cuStreamDestroy(s));
}

/* ---- older ABI variants, as the runtimes of older toolkits ask for them ---- */

typedef CUresult (*capture_info_v2_t)(CUstream, CUstreamCaptureStatus *, cuuint64_t *, CUgraph *,
				      const CUgraphNode **, size_t *);
typedef CUresult (*instantiate_v1_t)(CUgraphExec *, CUgraph, CUgraphNode *, char *, size_t);
typedef CUresult (*add_kernel_v1_t)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
				    const CUDA_KERNEL_NODE_PARAMS_v1 *);

static void test_old_variants(CUdeviceptr a, size_t n)
{
	void *fn = NULL;
	CUdriverProcAddressQueryResult q;
	CK(cuGetProcAddress("cuStreamGetCaptureInfo", &fn, 11030, CU_GET_PROC_ADDRESS_DEFAULT, &q));
	capture_info_v2_t info_v2 = (capture_info_v2_t)fn;
	CK(cuGetProcAddress("cuGraphInstantiate", &fn, 11000, CU_GET_PROC_ADDRESS_DEFAULT, &q));
	instantiate_v1_t inst_v1 = (instantiate_v1_t)fn;
	CK(cuGetProcAddress("cuGraphAddKernelNode", &fn, 11080, CU_GET_PROC_ADDRESS_DEFAULT, &q));
	add_kernel_v1_t add_v1 = (add_kernel_v1_t)fn;

	CUstream s;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CUstreamCaptureStatus st = (CUstreamCaptureStatus)99;
	cuuint64_t id = 1;
	expect("cuStreamGetCaptureInfo_v2 (CUDA 11.3)", info_v2(s, &st, &id, NULL, NULL, NULL), CUDA_SUCCESS);
	check("  NONE", st == CU_STREAM_CAPTURE_STATUS_NONE, "%d", (int)st);

	CUgraph g;
	CUgraphNode kn;
	CK(cuGraphCreate(&g, 0));
	CUdeviceptr p = a;
	unsigned v = 21;
	unsigned long long cnt = n;
	void *args[] = {&p, &v, &cnt};
	CUDA_KERNEL_NODE_PARAMS_v1 kp = fill_node<CUDA_KERNEL_NODE_PARAMS_v1>(args, cnt);
	expect("cuGraphAddKernelNode (CUDA 10 parameters)", add_v1(&kn, g, NULL, 0, &kp), CUDA_SUCCESS);
	CUgraphExec x;
	CUgraphNode err = (CUgraphNode)1;
	char log[16] = "junk";
	expect("cuGraphInstantiate (CUDA 10 arguments)", inst_v1(&x, g, &err, log, sizeof(log)), CUDA_SUCCESS);
	check("  no error node, empty log", err == NULL && log[0] == 0);
	garbage(a, n);
	CK(cuGraphLaunch(x, s));
	CK(cuStreamSynchronize(s));
	long bad = first_not(a, 0, n, 21);
	check("  its launch: 21s", bad < 0, "word %ld", bad);
	CK(cuGraphExecDestroy(x));
	CK(cuGraphDestroy(g));
	CK(cuStreamDestroy(s));
}

int main(void)
{
	CUdevice dev;
	ctx = rg_start(&dev);

	CUmodule mod = load_own_kernels();
	if (!mod) {
		printf("FAIL no fatbin with rgtest_fill_u32 in /proc/self/exe\n");
		return 1;
	}

	const size_t n = 4096;
	CUdeviceptr a, b;
	CK(cuMemAlloc(&a, n * 4));
	CK(cuMemAlloc(&b, n * 4));

	test_streams();
	test_events(a, b, n);
	test_hostfn(a, n);
	test_capture(a, n);
	test_graph(a, b, n);
	test_old_variants(a, n);

	CK(cuMemFree(a));
	CK(cuMemFree(b));
	CK(cuModuleUnload(mod));
	CK(cuDevicePrimaryCtxRelease(dev));
	return rg_finish("drv_stream");
}
