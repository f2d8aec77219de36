/* The driver test double's modules and launches, with kernels nvcc built
 * (mixed parameter types in the launch log, emulated kernels), stream capture
 * and replay, and the sticky fault (see test_fakecuda.c). */
#include <dlfcn.h>
#include <elf.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fk_check.h"

/* ---- modules and launches (kernels built by nvcc) ---- */

#ifdef FK_KERNELS_DIR
struct three {
	char c[3];
};

/* The parameter space of mixed(char, double, short, three, float *, int). */
static size_t mixed_pack(unsigned char out[36], char a, double b, short c, struct three t,
                         CUdeviceptr p, int d)
{
	memset(out, 0, 36);
	memcpy(out + 0, &a, 1);
	memcpy(out + 8, &b, 8);
	memcpy(out + 16, &c, 2);
	memcpy(out + 18, &t, 3);
	memcpy(out + 24, &p, 8);
	memcpy(out + 32, &d, 4);
	return 36;
}

static CUfunction get(CUmodule m, const char *name)
{
	CUfunction f = NULL;
	OK(p_cuModuleGetFunction(&f, m, name));
	return f;
}

void test_modules(void)
{
	size_t fb_size, ptx_size, cubin_size, before = free_mem();
	void *fb = read_file("test_kernels.fatbin", &fb_size);
	void *ptx = read_file("test_kernels_ptx.fatbin", &ptx_size);
	void *cubin = read_file("test_kernels.cubin", &cubin_size);
	CUmodule m = NULL, m2 = NULL;
	CUfunction f = NULL;
	int v = 0;
	const char *name = NULL;

	CHECK(fb && ptx && cubin);
	if (!fb || !ptx || !cubin)
		return;

	OK(p_cuModuleLoadData(&m, fb));
	CK(p_cuModuleGetFunction(&f, m, "no_such_kernel"), CUDA_ERROR_NOT_FOUND);
	f = get(m, "mixed");
	OK(p_cuFuncGetName(&name, f));
	CHECK(name && strcmp(name, "mixed") == 0);

	static const size_t off[] = { 0, 8, 16, 18, 24, 32 }, sz[] = { 1, 8, 2, 3, 8, 4 };
	for (size_t i = 0; i < 6; i++) {
		size_t o = 99, s = 99;
		OK(p_cuFuncGetParamInfo(f, i, &o, &s));
		CHECK(o == off[i] && s == sz[i]);
	}
	size_t o, s;
	CK(p_cuFuncGetParamInfo(f, 6, &o, &s), CUDA_ERROR_INVALID_VALUE);

	OK(p_cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_BINARY_VERSION, f));
	CHECK(v == 90); /* sm_90 chosen over sm_80 */
	OK(p_cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, f));
	CHECK(v == 32);
	OK(p_cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f));
	CHECK(v == 1024);
	CK(p_cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX, f), CUDA_ERROR_INVALID_VALUE);
	CUfunction sh = get(m, "with_shared");
	int shared = 0;
	OK(p_cuFuncGetAttribute(&shared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, sh));
	CHECK(shared >= 1024); /* the size of .nv.shared.with_shared (ptxas may pad it) */
	OK(p_cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, sh));
	CHECK(v == 49152 - shared);
	OK(p_cuFuncSetAttribute(sh, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 100000));
	CK(p_cuFuncSetAttribute(sh, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 300000),
	   CUDA_ERROR_INVALID_VALUE);
	CK(p_cuFuncSetAttribute(sh, CU_FUNC_ATTRIBUTE_NUM_REGS, 8), CUDA_ERROR_INVALID_VALUE);

	int nb = 0, minGrid = 0, bs = 0;
	OK(p_cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&nb, f, 256, 0, 0));
	CHECK(nb == 8);
	OK(p_cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&nb, f, 1024, 0, 0));
	CHECK(nb == 2);
	OK(p_cuOccupancyMaxPotentialBlockSize(&minGrid, &bs, f, NULL, 0, 0));
	CHECK(bs == 1024 && minGrid == 2 * 132);

	/* globals: sized, initialized from the image, valid ranges, charged */
	CUdeviceptr g;
	size_t gs = 0;
	int ints[10];
	float fl[4];
	OK(p_cuModuleGetGlobal(&g, &gs, m, "gvar"));
	CHECK(gs == 40);
	OK(p_cuMemcpyDtoH(ints, g, 40));
	CHECK(ints[0] == 0 && ints[9] == 0);
	CK(p_cuMemcpyHtoD(g, ints, 41), CUDA_ERROR_INVALID_VALUE);
	OK(p_cuMemsetD32(g, 5, 10));
	OK(p_cuModuleGetGlobal(&g, &gs, m, "ginit"));
	CHECK(gs == 4);
	OK(p_cuMemcpyDtoH(ints, g, 4));
	CHECK(ints[0] == 42);
	OK(p_cuModuleGetGlobal(&g, &gs, m, "cvals"));
	CHECK(gs == 16);
	OK(p_cuMemcpyDtoH(fl, g, 16));
	CHECK(fl[0] == 1.0f && fl[3] == 4.0f);
	CK(p_cuMemFree(g), CUDA_ERROR_INVALID_VALUE); /* not a cuMemAlloc block */
	CK(p_cuModuleGetGlobal(&g, &gs, m, "nope"), CUDA_ERROR_NOT_FOUND);
	CHECK(before - free_mem() == 3 * 256);

	/* other image forms */
	CK(p_cuModuleLoadData(&m2, ptx), CUDA_ERROR_NO_BINARY_FOR_GPU);
	CK(p_cuModuleLoadData(&m2, ".version 9.0\n.target sm_90\n"), CUDA_ERROR_NO_BINARY_FOR_GPU);
	CK(p_cuModuleLoadData(&m2, "garbage, not an image"), CUDA_ERROR_INVALID_IMAGE);
	/* a cubin read from a file, whole and truncated */
	char path[64];
	snprintf(path, sizeof path, "/tmp/fakecuda-cubin-%d", (int)getpid());
	FILE *cf = fopen(path, "wb");
	CHECK(cf && fwrite(cubin, 1, cubin_size, cf) == cubin_size);
	fclose(cf);
	OK(p_cuModuleLoad(&m2, path));
	OK(p_cuModuleUnload(m2));
	CHECK(truncate(path, (off_t)cubin_size / 2) == 0);
	CK(p_cuModuleLoad(&m2, path), CUDA_ERROR_INVALID_IMAGE);
	unlink(path);
	CK(p_cuModuleLoad(&m2, path), CUDA_ERROR_FILE_NOT_FOUND);
	OK(p_cuModuleLoadData(&m2, cubin));
	OK(p_cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_BINARY_VERSION, get(m2, "noparams")));
	CHECK(v == 90);
	OK(p_cuModuleUnload(m2));
	OK(p_cuModuleLoadDataEx(&m2, fb, 0, NULL, NULL));
	OK(p_cuModuleUnload(m2));
	/* compressed entries (nvcc -Xfatbin=-compress-all), decoded by rg_cubin */
	void *zfb = read_file("test_kernels_z.fatbin", NULL);
	CHECK(zfb != NULL);
	OK(p_cuModuleLoadData(&m2, zfb));
	for (size_t i = 0; i < 6; i++) {
		size_t o2 = 99, s2 = 99;
		OK(p_cuFuncGetParamInfo(get(m2, "mixed"), i, &o2, &s2));
		CHECK(o2 == off[i] && s2 == sz[i]);
	}
	OK(p_cuModuleGetGlobal(&g, &gs, m2, "ginit"));
	OK(p_cuMemcpyDtoH(ints, g, 4));
	CHECK(gs == 4 && ints[0] == 42);
	OK(p_cuModuleUnload(m2));
	free(zfb);
	struct { int magic, version; const void *data; void *unused; } wrapper = {
		0x466243B1, 1, fb, NULL
	};
	OK(p_cuModuleLoadFatBinary(&m2, &wrapper));

	/* unloading makes its functions and globals stale */
	CUfunction f2 = get(m2, "noparams");
	OK(p_cuModuleGetGlobal(&g, &gs, m2, "gvar"));
	OK(p_cuModuleUnload(m2));
	CK(p_cuModuleUnload(m2), CUDA_ERROR_INVALID_HANDLE);
	CK(p_cuModuleGetFunction(&f, m2, "noparams"), CUDA_ERROR_INVALID_HANDLE);
	CK(p_cuLaunchKernel(f2, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL), CUDA_ERROR_INVALID_HANDLE);
	CK(p_cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, f2), CUDA_ERROR_INVALID_HANDLE);
	CK(p_cuMemcpyDtoH(ints, g, 4), CUDA_ERROR_INVALID_VALUE);

	OK(p_cuModuleUnload(m));
	CHECK(free_mem() == before);
	free(fb);
	free(ptx);
	free(cubin);
}

void test_launch(void)
{
	void *fb = read_file("test_kernels.fatbin", NULL);
	CUmodule m;
	CUdeviceptr d;
	unsigned char packed[36];
	char want[512], hx[128];
	int n0, n1;

	if (!fb)
		return;
	OK(p_cuModuleLoadData(&m, fb));
	free(fb);
	CUfunction f = get(m, "mixed");
	OK(p_cuMemAlloc(&d, 4096));
	log_clear();

	/* kernelParams: the log shows the parameter space in layout order */
	char a = 0x11;
	double b = 2.5;
	short c = 0x1234;
	struct three t = { { 1, 2, 3 } };
	int dd = -2;
	void *params[] = { &a, &b, &c, &t, &d, &dd };
	mixed_pack(packed, a, b, c, t, d, dd);
	hex(hx, packed, 36);
	snprintf(want, sizeof want,
	         "launch mixed grid=2,3,4 block=32,2,1 shmem=128 params=%s\n", hx);
	OK(p_cuLaunchKernel(f, 2, 3, 4, 32, 2, 1, 128, NULL, params, NULL));

	/* extra: one buffer; its padding bytes are not parameters and log as zero */
	unsigned char ebuf[40];
	size_t esize = sizeof ebuf;
	memset(ebuf, 0xEE, sizeof ebuf);
	memcpy(ebuf + 0, &a, 1);
	memcpy(ebuf + 8, &b, 8);
	memcpy(ebuf + 16, &c, 2);
	memcpy(ebuf + 18, &t, 3);
	memcpy(ebuf + 24, &d, 8);
	memcpy(ebuf + 32, &dd, 4);
	void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, ebuf, CU_LAUNCH_PARAM_BUFFER_SIZE,
	                  &esize, CU_LAUNCH_PARAM_END };
	OK(p_cuLaunchKernel(f, 2, 3, 4, 32, 2, 1, 128, NULL, NULL, extra));

	CUlaunchConfig cfg = { 0 };
	CUlaunchAttribute attr = { 0 };
	attr.id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
	cfg.gridDimX = 2;
	cfg.gridDimY = 3;
	cfg.gridDimZ = 4;
	cfg.blockDimX = 32;
	cfg.blockDimY = 2;
	cfg.blockDimZ = 1;
	cfg.sharedMemBytes = 128;
	cfg.attrs = &attr;
	cfg.numAttrs = 1;
	OK(p_cuLaunchKernelEx(&cfg, f, params, NULL));
	OK(p_cuLaunchKernel(get(m, "noparams"), 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));

	char *log = log_read(&n0);
	size_t wl = strlen(want);
	CHECK(n0 == 4);
	CHECK(strncmp(log, want, wl) == 0);
	CHECK(strncmp(log + wl, want, wl) == 0);
	CHECK(strncmp(log + 2 * wl, want, wl) == 0);
	CHECK(strcmp(log + 3 * wl, "launch noparams grid=1,1,1 block=1,1,1 shmem=0 params=\n") == 0);
	if (n0 >= 1 && strncmp(log, want, wl) != 0)
		fprintf(stderr, "log:  %swant: %s", log, want);
	free(log);

	/* launches the driver refuses are refused, and not logged */
	CK(p_cuLaunchKernel(f, 0, 1, 1, 1, 1, 1, 0, NULL, params, NULL), CUDA_ERROR_INVALID_VALUE);
	CK(p_cuLaunchKernel(f, 1, 1, 1, 1025, 1, 1, 0, NULL, params, NULL), CUDA_ERROR_INVALID_VALUE);
	CK(p_cuLaunchKernel(f, 1, 1, 1, 32, 32, 2, 0, NULL, params, NULL), CUDA_ERROR_INVALID_VALUE);
	CK(p_cuLaunchKernel(f, 1, 65536, 1, 1, 1, 1, 0, NULL, params, NULL), CUDA_ERROR_INVALID_VALUE);
	CK(p_cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 60000, NULL, params, NULL), CUDA_ERROR_INVALID_VALUE);
	CK(p_cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
	CK(p_cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, params, extra), CUDA_ERROR_INVALID_VALUE);
	esize = 20;
	CK(p_cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, extra), CUDA_ERROR_INVALID_VALUE);
	CK(p_cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, (CUstream)(uintptr_t)77, params, NULL),
	   CUDA_ERROR_INVALID_HANDLE);
	CK(p_cuLaunchKernel((CUfunction)d, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL),
	   CUDA_ERROR_INVALID_HANDLE);
	log = log_read(&n1);
	CHECK(n1 == n0);
	free(log);

	/* emulated kernels */
	enum { N = 1000 };
	static unsigned u[N];
	static float x[N], y[N], z[N];
	CUdeviceptr pa, pb, pc;
	unsigned v = 0xCAFEBABE;
	unsigned long long nn = N;
	int ni = N;
	float half = 0.5f;
	OK(p_cuMemAlloc(&pa, N * 4));
	OK(p_cuMemAlloc(&pb, N * 4));
	OK(p_cuMemAlloc(&pc, N * 4));
	void *fp[] = { &pa, &v, &nn };
	OK(p_cuLaunchKernel(get(m, "rgtest_fill_u32"), 4, 1, 1, 256, 1, 1, 0, NULL, fp, NULL));
	OK(p_cuMemcpyDtoH(u, pa, sizeof u));
	int ok = 1;
	for (int i = 0; i < N; i++)
		ok &= u[i] == v;
	CHECK(ok);
	for (int i = 0; i < N; i++) {
		x[i] = (float)i;
		y[i] = (float)(2 * i);
	}
	OK(p_cuMemcpyHtoD(pa, x, sizeof x));
	OK(p_cuMemcpyHtoD(pb, y, sizeof y));
	void *ap[] = { &pa, &pb, &pc, &ni };
	OK(p_cuLaunchKernel(get(m, "rgtest_add_f32"), 4, 1, 1, 256, 1, 1, 0, NULL, ap, NULL));
	void *sp[] = { &pc, &half, &ni };
	OK(p_cuLaunchKernel(get(m, "rgtest_scale_f32"), 4, 1, 1, 256, 1, 1, 0, NULL, sp, NULL));
	OK(p_cuMemcpyDtoH(z, pc, sizeof z));
	ok = 1;
	for (int i = 0; i < N; i++)
		ok &= z[i] == 1.5f * (float)i;
	CHECK(ok);
	OK(p_cuCtxSynchronize());

	OK(p_cuMemFree(pa));
	OK(p_cuMemFree(pb));
	OK(p_cuMemFree(pc));
	OK(p_cuMemFree(d));
	OK(p_cuModuleUnload(m));
}

/* Capture on a stream, then replay. */
void test_capture(void)
{
	void *fb = read_file("test_kernels.fatbin", NULL);
	CUmodule m;
	CUstream s, blocking, s3;
	CUdeviceptr x;
	CUgraph g = NULL;
	CUgraphExec ge = NULL;
	CUstreamCaptureStatus st;
	cuuint64_t cid = 0;
	CUgraph cg = NULL;
	const CUgraphNode *deps = NULL;
	size_t ndeps = 9, nnodes = 0;
	unsigned host[256], back[256];
	int count = 0, lines = 0;
	char *log;

	if (!fb)
		return;
	OK(p_cuModuleLoadData(&m, fb));
	free(fb);
	CUfunction fill = get(m, "rgtest_fill_u32");
	OK(p_cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	OK(p_cuMemAlloc(&x, sizeof host));
	OK(p_cuMemsetD32(x, 9, 256));
	memset(host, 0, sizeof host);
	log_clear();

	CK(p_cuStreamBeginCapture(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL),
	   CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	OK(p_cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	CK(p_cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_ILLEGAL_STATE);
	OK(p_cuStreamIsCapturing(s, &st));
	CHECK(st == CU_STREAM_CAPTURE_STATUS_ACTIVE);
	OK(p_cuStreamGetCaptureInfo(s, &st, &cid, &cg, &deps, NULL, &ndeps));
	CHECK(cid != 0 && cg != NULL && ndeps == 0);

	unsigned v = 7;
	unsigned long long n = 128;
	void *fp[] = { &x, &v, &n };
	OK(p_cuMemsetD32Async(x, 1, 256, s));
	OK(p_cuLaunchKernel(fill, 1, 1, 1, 128, 1, 1, 0, s, fp, NULL));
	OK(p_cuLaunchHostFunc(s, host_inc, &count));
	OK(p_cuMemcpyDtoHAsync(host, x, sizeof host, s));
	OK(p_cuStreamGetCaptureInfo(s, &st, NULL, NULL, &deps, NULL, &ndeps));
	CHECK(ndeps == 1 && deps && deps[0]);

	/* nothing ran: memory, host function, log, destination all untouched; the legacy
	 * stream may still be used, as no blocking stream captures */
	OK(p_cuMemcpyDtoH(back, x, sizeof back));
	CHECK(back[0] == 9 && back[255] == 9);
	CHECK(count == 0 && host[0] == 0);
	log = log_read(&lines);
	CHECK(lines == 0);
	free(log);

	OK(p_cuStreamEndCapture(s, &g));
	OK(p_cuStreamIsCapturing(s, &st));
	CHECK(st == CU_STREAM_CAPTURE_STATUS_NONE);
	OK(p_cuGraphGetNodes(g, NULL, &nnodes));
	CHECK(nnodes == 4);
	OK(p_cuGraphInstantiate(&ge, g, 0));
	OK(p_cuGraphDestroy(g)); /* the exec keeps its own copy */
	CK(p_cuGraphGetNodes(g, NULL, &nnodes), CUDA_ERROR_INVALID_HANDLE);

	for (int round = 1; round <= 2; round++) {
		OK(p_cuMemsetD32(x, 0, 256));
		memset(host, 0, sizeof host);
		OK(p_cuGraphLaunch(ge, s));
		OK(p_cuStreamSynchronize(s));
		CHECK(count == round);
		CHECK(host[0] == 7 && host[127] == 7 && host[128] == 1 && host[255] == 1);
		log = log_read(&lines);
		CHECK(lines == round);
		CHECK(strncmp(log, "launch rgtest_fill_u32 grid=1,1,1 block=128,1,1 shmem=0 params=", 63) == 0);
		free(log);
	}
	OK(p_cuGraphExecDestroy(ge));
	CK(p_cuGraphLaunch(ge, s), CUDA_ERROR_INVALID_HANDLE);

	/* a synchronizing call invalidates the capture */
	OK(p_cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
	CK(p_cuStreamSynchronize(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	OK(p_cuStreamIsCapturing(s, &st));
	CHECK(st == CU_STREAM_CAPTURE_STATUS_INVALIDATED);
	CK(p_cuMemsetD32Async(x, 1, 256, s), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
	CK(p_cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
	CHECK(g == NULL);
	CK(p_cuStreamEndCapture(s, &g), CUDA_ERROR_ILLEGAL_STATE);

	/* legacy-stream work while a blocking stream captures */
	OK(p_cuStreamCreate(&blocking, 0));
	OK(p_cuStreamBeginCapture(blocking, CU_STREAM_CAPTURE_MODE_GLOBAL));
	CK(p_cuMemsetD32(x, 0, 256), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
	CK(p_cuStreamEndCapture(blocking, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);

	/* fork and join through events */
	CUevent e1, e2;
	OK(p_cuEventCreate(&e1, CU_EVENT_DISABLE_TIMING));
	OK(p_cuEventCreate(&e2, CU_EVENT_DISABLE_TIMING));
	OK(p_cuStreamCreate(&s3, CU_STREAM_NON_BLOCKING));
	OK(p_cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
	OK(p_cuMemsetD32Async(x, 3, 256, s));
	OK(p_cuEventRecord(e1, s));
	OK(p_cuStreamWaitEvent(s3, e1, 0));
	OK(p_cuStreamIsCapturing(s3, &st));
	CHECK(st == CU_STREAM_CAPTURE_STATUS_ACTIVE);
	OK(p_cuLaunchKernel(fill, 1, 1, 1, 128, 1, 1, 0, s3, fp, NULL));
	OK(p_cuEventRecord(e2, s3));
	OK(p_cuStreamWaitEvent(s, e2, 0));
	CK(p_cuStreamEndCapture(s3, &g), CUDA_ERROR_STREAM_CAPTURE_UNMATCHED);
	CK(p_cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
	OK(p_cuStreamIsCapturing(s3, &st));
	CHECK(st == CU_STREAM_CAPTURE_STATUS_NONE);
	OK(p_cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
	OK(p_cuMemsetD32Async(x, 3, 256, s));
	OK(p_cuEventRecord(e1, s));
	OK(p_cuStreamWaitEvent(s3, e1, 0));
	OK(p_cuLaunchKernel(fill, 1, 1, 1, 128, 1, 1, 0, s3, fp, NULL));
	OK(p_cuEventRecord(e2, s3));
	OK(p_cuStreamWaitEvent(s, e2, 0));
	OK(p_cuStreamEndCapture(s, &g));
	OK(p_cuStreamIsCapturing(s3, &st));
	CHECK(st == CU_STREAM_CAPTURE_STATUS_NONE);
	OK(p_cuGraphGetNodes(g, NULL, &nnodes));
	CHECK(nnodes == 2);
	OK(p_cuGraphInstantiate(&ge, g, 0));
	OK(p_cuGraphLaunch(ge, NULL));
	OK(p_cuMemcpyDtoH(back, x, sizeof back));
	CHECK(back[0] == 7 && back[200] == 3);
	OK(p_cuGraphExecDestroy(ge));
	OK(p_cuGraphDestroy(g));

	OK(p_cuEventDestroy(e1));
	OK(p_cuEventDestroy(e2));
	OK(p_cuStreamDestroy(s3));
	OK(p_cuStreamDestroy(blocking));
	OK(p_cuStreamDestroy(s));
	OK(p_cuMemFree(x));
	OK(p_cuModuleUnload(m));
}

/* A device fault is sticky for its context, and only for it. */
void test_fault(CUcontext main_ctx)
{
	void *fb = read_file("test_kernels.fatbin", NULL);
	size_t before = free_mem();
	CUcontext c2;
	CUmodule m;
	CUdeviceptr p, q;
	CUstream s;
	CUdevice dev = -1;

	if (!fb)
		return;
	for (int variant = 0; variant < 2; variant++) {
		OK(p_cuCtxCreate(&c2, NULL, 0, 0));
		OK(p_cuModuleLoadData(&m, fb));
		OK(p_cuMemAlloc(&p, 64));
		if (variant == 0) {
			void *args[] = { &p };
			OK(p_cuLaunchKernel(get(m, "rgtest_fault"), 1, 1, 1, 1, 1, 1, 0, NULL, args,
			                    NULL));
		} else {
			/* an emulated kernel told to write past its buffer */
			unsigned v = 1;
			unsigned long long n = 17;
			void *args[] = { &p, &v, &n };
			OK(p_cuLaunchKernel(get(m, "rgtest_fill_u32"), 1, 1, 1, 32, 1, 1, 0, NULL, args,
			                    NULL));
		}
		CK(p_cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
		CK(p_cuMemAlloc(&q, 64), CUDA_ERROR_ILLEGAL_ADDRESS);
		CK(p_cuStreamCreate(&s, 0), CUDA_ERROR_ILLEGAL_ADDRESS);
		CK(p_cuMemFree(p), CUDA_ERROR_ILLEGAL_ADDRESS);
		CK(p_cuMemsetD8(p, 0, 1), CUDA_ERROR_ILLEGAL_ADDRESS);
		OK(p_cuCtxGetDevice(&dev));
		/* the other context is fine */
		OK(p_cuCtxSetCurrent(main_ctx));
		OK(p_cuCtxSynchronize());
		OK(p_cuCtxSetCurrent(c2));
		CK(p_cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
		OK(p_cuCtxDestroy(c2)); /* clears it, with everything the context had */
		OK(p_cuCtxSetCurrent(main_ctx));
		CHECK(free_mem() == before);
	}
	free(fb);
}
#endif /* FK_KERNELS_DIR */
