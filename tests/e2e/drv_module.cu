/*
 * drv_module.cu: the driver API's contexts, modules, libraries, kernels and
 * functions, launches and occupancy, with driver calls only.
 *
 * The kernels below are this program's own: their fatbin is read back from the
 * program's .nv_fatbin section (in memory for the library, from the file for
 * the modules) and loaded with cuModuleLoadData / cuLibraryLoadData; the
 * static runtime nvcc links in never starts (no runtime call is made).
 *
 * Runs unchanged on a GPU (the real libcuda.so.1) and through libremote.so as
 * libcuda.so.1 (LD_LIBRARY_PATH=<build>/frontend/driver) against remote-gpud.
 * With RGTEST_FAKE=1 (the driver test double, which runs only the rgtest_*
 * kernels) the launches of drv_mixed are checked against the fake's launch log
 * ("expect launch" lines). Output and exit status as rgdrv.h says: the same
 * lines in every mode.
 */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda.h>

#include "rgdrv.h"
#include "rgtest_kernels.cuh"

/* Logged only on the fake: its parameter bytes are checked there. */
extern "C" __global__ void drv_mixed(char a, double b, short c, float *p, int d)
{
	if (p)
		p[threadIdx.x] = a + b + c + d;
}

extern "C" __global__ void drv_noparams(void) {}

__device__ unsigned drv_gvar[4] = {1, 2, 3, 4};
__constant__ float drv_cvals[2] = {0.5f, 0.25f};

/* A handle the program made up or destroyed: libremote.so recognises those;
 * the driver itself may crash on them, so the call is made remotely only. */
#define EXPECT_BAD(label, call, want) ONLY(remote) expect(label, call, want)

/* ---- this program's fatbin */

static const void *image_mem; /* in the mapped program */
static void *image_copy;      /* read from the file */
static size_t image_size;

static int main_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	*(uintptr_t *)arg = info->dlpi_addr; /* the first object is the program */
	return 1;
}

static void find_image(void)
{
	FILE *f = fopen("/proc/self/exe", "rb");
	if (!f) {
		printf("FAIL cannot open /proc/self/exe\n");
		exit(1);
	}
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	unsigned char *elf = (unsigned char *)malloc((size_t)n);
	if (fread(elf, 1, (size_t)n, f) != (size_t)n) {
		printf("FAIL cannot read /proc/self/exe\n");
		exit(1);
	}
	fclose(f);
	Elf64_Ehdr *eh = (Elf64_Ehdr *)elf;
	Elf64_Shdr *sh = (Elf64_Shdr *)(elf + eh->e_shoff);
	const char *names = (const char *)elf + sh[eh->e_shstrndx].sh_offset;
	for (int i = 0; i < eh->e_shnum; i++) {
		if (strcmp(names + sh[i].sh_name, ".nv_fatbin") != 0)
			continue;
		/* Fatbins back to back, 8-aligned; the static runtime brings one of
		 * its own: ours names drv_mixed (its cubin is not compressed). */
		uint64_t off = 0;
		while (off + 16 <= sh[i].sh_size) {
			const unsigned char *fb = elf + sh[i].sh_offset + off;
			uint32_t magic;
			uint16_t hsize;
			uint64_t body;
			memcpy(&magic, fb, 4);
			if (magic != 0xBA55ED50u) {
				off += 8;
				continue;
			}
			memcpy(&hsize, fb + 6, 2);
			memcpy(&body, fb + 8, 8);
			size_t size = hsize + body;
			if (memmem(fb, size, "drv_mixed", 9)) {
				image_size = size;
				image_copy = malloc(image_size);
				memcpy(image_copy, fb, image_size);
				uintptr_t base = 0;
				dl_iterate_phdr(main_object, &base);
				image_mem = (const void *)(base + sh[i].sh_addr + off);
				break;
			}
			off += (size + 7) / 8 * 8;
		}
		break;
	}
	free(elf);
	if (!image_copy || memcmp(image_copy, image_mem, image_size) != 0) {
		printf("FAIL no .nv_fatbin in this program\n");
		exit(1);
	}
}

/* ---- contexts */

static void *thread_stack(void *arg)
{
	CUcontext primary = (CUcontext)arg, c = (CUcontext)1;
	CK(cuCtxGetCurrent(&c));
	check("new thread: no current context", c == NULL);
	expect("new thread: cuCtxPopCurrent on an empty stack", cuCtxPopCurrent(&c), CUDA_ERROR_INVALID_CONTEXT);
	CK(cuCtxPushCurrent(primary));
	CK(cuCtxGetCurrent(&c));
	check("new thread: pushed context current", c == primary);
	CK(cuCtxPopCurrent(&c));
	check("new thread: popped", c == primary);
	return NULL;
}

static void contexts(void)
{
	CUcontext c = (CUcontext)1, p, p2, made, popped;
	unsigned flags = 99, v;
	int active = 99;
	unsigned long long id_p, id_made, id;
	CUdevice dev = -1;

	CK(cuCtxGetCurrent(&c));
	check("no current context before any is set", c == NULL);
	expect("cuCtxGetDevice without a context", cuCtxGetDevice(&dev), CUDA_ERROR_INVALID_CONTEXT);
	expect("cuCtxSynchronize without a context", cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT);
	expect("cuCtxGetCurrent(NULL)", cuCtxGetCurrent(NULL), CUDA_ERROR_INVALID_VALUE);

	CK(cuDevicePrimaryCtxGetState(0, &flags, &active));
	check("primary context inactive before retain", active == 0 && (flags & CU_CTX_SCHED_MASK) == 0,
	      "active %d flags %#x", active, flags);
	expect("cuDevicePrimaryCtxGetState(NULL flags)", cuDevicePrimaryCtxGetState(0, NULL, &active),
	       CUDA_ERROR_INVALID_VALUE);
	expect("cuDevicePrimaryCtxGetState(device 99)", cuDevicePrimaryCtxGetState(99, &flags, &active),
	       CUDA_ERROR_INVALID_DEVICE);
	expect("cuDevicePrimaryCtxRelease before retain", cuDevicePrimaryCtxRelease(0), CUDA_ERROR_INVALID_CONTEXT);
	expect("cuDevicePrimaryCtxRetain(NULL)", cuDevicePrimaryCtxRetain(NULL, 0), CUDA_ERROR_INVALID_VALUE);
	expect("cuDevicePrimaryCtxRetain(device 99)", cuDevicePrimaryCtxRetain(&p, 99), CUDA_ERROR_INVALID_DEVICE);
	expect("cuDevicePrimaryCtxSetFlags(bad scheduling)", cuDevicePrimaryCtxSetFlags(0, 3), CUDA_ERROR_INVALID_VALUE);
	CK(cuDevicePrimaryCtxSetFlags(0, CU_CTX_SCHED_BLOCKING_SYNC));

	CK(cuDevicePrimaryCtxRetain(&p, 0));
	CK(cuDevicePrimaryCtxRetain(&p2, 0));
	check("retain gives the one primary context", p != NULL && p == p2);
	CK(cuDevicePrimaryCtxGetState(0, &flags, &active));
	check("primary context active, flags as set", active == 1 && (flags & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_BLOCKING_SYNC,
	      "active %d flags %#x", active, flags);
	CK(cuDevicePrimaryCtxRelease(0));
	CK(cuDevicePrimaryCtxGetState(0, &flags, &active));
	check("still active with one retain left", active == 1);
	CK(cuCtxGetCurrent(&c));
	check("retain does not make it current", c == NULL);

	CK(cuCtxSetCurrent(p));
	CK(cuCtxGetCurrent(&c));
	check("cuCtxSetCurrent(primary)", c == p);
	CK(cuCtxGetDevice(&dev));
	check("cuCtxGetDevice", dev == 0);
	CK(cuCtxGetFlags(&v));
	check("cuCtxGetFlags of the primary context", (v & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_BLOCKING_SYNC, "%#x", v);
	CK(cuCtxGetId(p, &id_p));
	CK(cuCtxGetId(NULL, &id));
	check("cuCtxGetId: the current one's for NULL, nonzero", id_p != 0 && id == id_p);
	expect("cuCtxGetId(NULL id)", cuCtxGetId(p, NULL), CUDA_ERROR_INVALID_VALUE);
	EXPECT_BAD("cuCtxGetId(not a context)", cuCtxGetId((CUcontext)0x1234, &id), CUDA_ERROR_INVALID_CONTEXT);
	CK(cuCtxGetApiVersion(p, &v));
	check("cuCtxGetApiVersion", v == 3020, "%u", v);
	CK(cuCtxSynchronize());

	expect("cuCtxCreate(bad flags)", cuCtxCreate(&made, NULL, 0x100, 0), CUDA_ERROR_INVALID_VALUE);
	expect("cuCtxCreate(device 99)", cuCtxCreate(&made, NULL, 0, 99), CUDA_ERROR_INVALID_DEVICE);
	expect("cuCtxCreate(NULL)", cuCtxCreate(NULL, NULL, 0, 0), CUDA_ERROR_INVALID_VALUE);
	CK(cuCtxCreate(&made, NULL, CU_CTX_SCHED_YIELD, 0));
	CK(cuCtxGetCurrent(&c));
	check("cuCtxCreate: a new handle, made current", made != p && c == made);
	CK(cuCtxGetId(made, &id_made));
	check("a created context has an id of its own", id_made != 0 && id_made != id_p);
	CK(cuCtxGetFlags(&v));
	check("cuCtxGetFlags of the created context", (v & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_YIELD, "%#x", v);
	CK(cuCtxSetFlags(CU_CTX_SCHED_SPIN));
	CK(cuCtxGetFlags(&v));
	check("cuCtxSetFlags", (v & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_SPIN, "%#x", v);
	expect("cuCtxSetFlags(bad scheduling)", cuCtxSetFlags(3), CUDA_ERROR_INVALID_VALUE);
	CK(cuCtxGetDevice(&dev));
	check("cuCtxGetDevice of the created context", dev == 0);

	CK(cuCtxPopCurrent(&popped));
	CK(cuCtxGetCurrent(&c));
	check("cuCtxPopCurrent: the created one, the primary under it", popped == made && c == p);
	CK(cuCtxPushCurrent(made));
	CK(cuCtxGetCurrent(&c));
	check("cuCtxPushCurrent", c == made);
	CK(cuCtxSetCurrent(p));
	CK(cuCtxPopCurrent(&popped));
	check("cuCtxSetCurrent replaces the top", popped == p);
	CK(cuCtxGetCurrent(&c));
	check("under it the primary again", c == p);
	expect("cuCtxPushCurrent(NULL)", cuCtxPushCurrent(NULL), CUDA_ERROR_INVALID_VALUE);
	EXPECT_BAD("cuCtxSetCurrent(not a context)", cuCtxSetCurrent((CUcontext)0x1234), CUDA_ERROR_INVALID_CONTEXT);

	CK(cuCtxPushCurrent(made));
	expect("cuCtxDestroy(primary)", cuCtxDestroy(p), CUDA_ERROR_INVALID_CONTEXT);
	expect("cuCtxDestroy(NULL)", cuCtxDestroy(NULL), CUDA_ERROR_INVALID_VALUE);
	CK(cuCtxDestroy(made));
	CK(cuCtxGetCurrent(&c));
	check("cuCtxDestroy pops the current one", c == p);
	EXPECT_BAD("cuCtxDestroy twice", cuCtxDestroy(made), CUDA_ERROR_INVALID_CONTEXT);
	EXPECT_BAD("cuCtxGetId(destroyed)", cuCtxGetId(made, &id), CUDA_ERROR_CONTEXT_IS_DESTROYED);

	CK(cuCtxSetCurrent(NULL));
	CK(cuCtxGetCurrent(&c));
	check("cuCtxSetCurrent(NULL) pops", c == NULL);
	expect("cuCtxPopCurrent on an empty stack", cuCtxPopCurrent(&c), CUDA_ERROR_INVALID_CONTEXT);
	CK(cuCtxSetCurrent(p));

	pthread_t t;
	pthread_create(&t, NULL, thread_stack, p);
	pthread_join(t, NULL);
	CK(cuCtxGetCurrent(&c));
	check("this thread's stack untouched", c == p);

	size_t lim = 0;
	CK(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 4096));
	CK(cuCtxGetLimit(&lim, CU_LIMIT_STACK_SIZE));
	check("cuCtxSetLimit/GetLimit", lim >= 4096, "%zu", lim);
	expect("cuCtxGetLimit(NULL)", cuCtxGetLimit(NULL, CU_LIMIT_STACK_SIZE), CUDA_ERROR_INVALID_VALUE);
	CUfunc_cache cc;
	CK(cuCtxSetCacheConfig(CU_FUNC_CACHE_PREFER_SHARED));
	CK(cuCtxGetCacheConfig(&cc));
	check("cuCtxSetCacheConfig/GetCacheConfig", cc == CU_FUNC_CACHE_PREFER_SHARED, "%d", (int)cc);
	expect("cuCtxSetCacheConfig(7)", cuCtxSetCacheConfig((CUfunc_cache)7), CUDA_ERROR_INVALID_VALUE);
	CK(cuCtxSetCacheConfig(CU_FUNC_CACHE_PREFER_NONE));
	CUmoduleLoadingMode mode;
	CK(cuModuleGetLoadingMode(&mode));
	check("cuModuleGetLoadingMode", mode == CU_MODULE_LAZY_LOADING || mode == CU_MODULE_EAGER_LOADING);
}

/* ---- modules */

static void hex(char *out, const void *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", ((const unsigned char *)p)[i]);
}

static void modules(void)
{
	CUmodule mod, bad = (CUmodule)0x1234;
	CUfunction fill, fill2, mixed, none, f;
	CUdeviceptr gvar, cvals, buf;
	size_t bytes = 0, off, size;

	expect("cuModuleLoadData(NULL)", cuModuleLoadData(&mod, NULL), CUDA_ERROR_INVALID_VALUE);
	static const unsigned char garbage[64] = {1, 2, 3, 4, 5, 6, 7, 8};
	expect("cuModuleLoadData(garbage)", cuModuleLoadData(&mod, garbage), CUDA_ERROR_INVALID_IMAGE);

	/* A copy of the image, gone once the load returns: the module must not
	 * need it. */
	void *tmp = malloc(image_size);
	memcpy(tmp, image_copy, image_size);
	CK(cuModuleLoadData(&mod, tmp));
	memset(tmp, 0, image_size);
	free(tmp);

	CK(cuModuleGetFunction(&fill, mod, "rgtest_fill_u32"));
	CK(cuModuleGetFunction(&fill2, mod, "rgtest_fill_u32"));
	check("cuModuleGetFunction: one handle per name", fill == fill2);
	expect("cuModuleGetFunction(unknown name)", cuModuleGetFunction(&f, mod, "no_such_kernel"), CUDA_ERROR_NOT_FOUND);
	expect("cuModuleGetFunction(NULL name)", cuModuleGetFunction(&f, mod, NULL), CUDA_ERROR_INVALID_VALUE);
	expect("cuModuleGetFunction(NULL out)", cuModuleGetFunction(NULL, mod, "rgtest_fill_u32"),
	       CUDA_ERROR_INVALID_VALUE);
	EXPECT_BAD("cuModuleGetFunction(not a module)", cuModuleGetFunction(&f, bad, "rgtest_fill_u32"),
	       CUDA_ERROR_INVALID_HANDLE);

	const char *name = NULL;
	CK(cuFuncGetName(&name, fill));
	check("cuFuncGetName", name && strcmp(name, "rgtest_fill_u32") == 0, "%s", name ? name : "(null)");
	CUmodule m2 = NULL;
	CK(cuFuncGetModule(&m2, fill));
	check("cuFuncGetModule", m2 == mod);
	EXPECT_BAD("cuFuncGetName(not a function)", cuFuncGetName(&name, (CUfunction)0x1234), CUDA_ERROR_INVALID_HANDLE);
	CUfunctionLoadingState st;
	CK(cuFuncIsLoaded(&st, fill));
	check("cuFuncIsLoaded", st == CU_FUNCTION_LOADING_STATE_LOADED);
	CK(cuFuncLoad(fill));

	/* Enumeration: the six kernels of this program, handles as named. */
	unsigned count = 0;
	CK(cuModuleGetFunctionCount(&count, mod));
	CUfunction fns[8] = {0};
	CK(cuModuleEnumerateFunctions(fns, 8, mod));
	int named = 0, same = 0;
	for (unsigned i = 0; i < count && i < 8; i++) {
		const char *nm = NULL;
		CK(cuFuncGetName(&nm, fns[i]));
		named += strcmp(nm, "drv_mixed") == 0 || strcmp(nm, "drv_noparams") == 0 || strncmp(nm, "rgtest_", 7) == 0;
		same += fns[i] == fill;
	}
	check("cuModuleGetFunctionCount, cuModuleEnumerateFunctions", count == 6 && named == 6 && same == 1,
	      "%u kernels, %d named, %d the one cuModuleGetFunction gave", count, named, same);
	expect("cuModuleGetFunctionCount(NULL)", cuModuleGetFunctionCount(NULL, mod), CUDA_ERROR_INVALID_VALUE);
	EXPECT_BAD("cuModuleGetFunctionCount(not a module)", cuModuleGetFunctionCount(&count, bad), CUDA_ERROR_INVALID_HANDLE);

	/* Parameter layouts, from the image. */
	size_t want_fill[3][2] = {{0, 8}, {8, 4}, {16, 8}};
	int ok = 1;
	for (int i = 0; i < 3; i++) {
		CK(cuFuncGetParamInfo(fill, i, &off, &size));
		ok &= off == want_fill[i][0] && size == want_fill[i][1];
	}
	check("cuFuncGetParamInfo(rgtest_fill_u32)", ok);
	expect("cuFuncGetParamInfo past the last", cuFuncGetParamInfo(fill, 3, &off, &size), CUDA_ERROR_INVALID_VALUE);
	CK(cuModuleGetFunction(&mixed, mod, "drv_mixed"));
	size_t want_mixed[5][2] = {{0, 1}, {8, 8}, {16, 2}, {24, 8}, {32, 4}};
	ok = 1;
	for (int i = 0; i < 5; i++) {
		CK(cuFuncGetParamInfo(mixed, i, &off, &size));
		ok &= off == want_mixed[i][0] && size == want_mixed[i][1];
	}
	check("cuFuncGetParamInfo(drv_mixed)", ok);
	CK(cuModuleGetFunction(&none, mod, "drv_noparams"));
	expect("cuFuncGetParamInfo of a kernel without parameters", cuFuncGetParamInfo(none, 0, &off, &size),
	       CUDA_ERROR_INVALID_VALUE);

	/* Attributes, as the device reports them. */
	int a = 0, regs = 0, bin = 0;
	CK(cuFuncGetAttribute(&a, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fill));
	CK(cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, fill));
	CK(cuFuncGetAttribute(&bin, CU_FUNC_ATTRIBUTE_BINARY_VERSION, fill));
	check("cuFuncGetAttribute", a > 0 && a <= 1024 && regs > 0 && bin == 90, "max threads %d, regs %d, binary %d",
	      a, regs, bin);
	expect("cuFuncGetAttribute(attribute 99)", cuFuncGetAttribute(&a, (CUfunction_attribute)99, fill),
	       CUDA_ERROR_INVALID_VALUE);
	expect("cuFuncGetAttribute(NULL)", cuFuncGetAttribute(NULL, CU_FUNC_ATTRIBUTE_NUM_REGS, fill),
	       CUDA_ERROR_INVALID_VALUE);
	EXPECT_BAD("cuFuncGetAttribute(not a function)",
	       cuFuncGetAttribute(&a, CU_FUNC_ATTRIBUTE_NUM_REGS, (CUfunction)0x1234), CUDA_ERROR_INVALID_HANDLE);
	CK(cuFuncSetAttribute(fill, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 65536));
	CK(cuFuncGetAttribute(&a, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, fill));
	check("cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)", a == 65536, "%d", a);
	CK(cuFuncSetCacheConfig(fill, CU_FUNC_CACHE_PREFER_L1));

	/* Globals: initialised from the image, the module's own memory. */
	CK(cuModuleGetGlobal(&gvar, &bytes, mod, "drv_gvar"));
	unsigned g[4] = {0};
	CK(cuMemcpyDtoH(g, gvar, sizeof(g)));
	check("cuModuleGetGlobal: size and initial value", bytes == 16 && g[0] == 1 && g[1] == 2 && g[2] == 3 && g[3] == 4,
	      "%zu bytes", bytes);
	CK(cuModuleGetGlobal(&cvals, &bytes, mod, "drv_cvals"));
	float cv[2] = {0, 0};
	CK(cuMemcpyDtoH(cv, cvals, sizeof(cv)));
	check("cuModuleGetGlobal(__constant__)", bytes == 8 && cv[0] == 0.5f && cv[1] == 0.25f);
	expect("cuModuleGetGlobal(unknown name)", cuModuleGetGlobal(&buf, &bytes, mod, "no_such_var"),
	       CUDA_ERROR_NOT_FOUND);
	bytes = 0;
	CK(cuModuleGetGlobal(NULL, &bytes, mod, "drv_gvar"));
	check("cuModuleGetGlobal(size only)", bytes == 16);
	expect("cuModuleGetGlobal(neither pointer)", cuModuleGetGlobal(NULL, NULL, mod, "drv_gvar"),
	       CUDA_ERROR_INVALID_VALUE);
	expect("cuModuleGetGlobal(NULL name)", cuModuleGetGlobal(&buf, &bytes, mod, NULL), CUDA_ERROR_INVALID_VALUE);

	/* A kernel writes the global: the same module instance as the function. */
	unsigned long long n4 = 4;
	unsigned seven = 7;
	void *gargs[] = {&gvar, &seven, &n4};
	CK(cuLaunchKernel(fill, 1, 1, 1, 32, 1, 1, 0, NULL, gargs, NULL));
	CK(cuMemcpyDtoH(g, gvar, sizeof(g)));
	check("a kernel fills the module's global", g[0] == 7 && g[1] == 7 && g[2] == 7 && g[3] == 7);

	/* Launches: kernelParams, then the packed `extra` buffer. */
	enum { N = 4096 };
	unsigned *host = (unsigned *)malloc(N * sizeof(unsigned));
	unsigned long long n = N;
	unsigned v = 0xA5A5A5A5u;
	CK(cuMemAlloc(&buf, N * sizeof(unsigned)));
	void *args[] = {&buf, &v, &n};
	CK(cuLaunchKernel(fill, rgtest_grid(N), 1, 1, 256, 1, 1, 0, NULL, args, NULL));
	CK(cuMemcpyDtoH(host, buf, N * sizeof(unsigned)));
	ok = 1;
	for (int i = 0; i < N; i++)
		ok &= host[i] == v;
	check("cuLaunchKernel(kernelParams)", ok);

	unsigned char packed[32];
	memset(packed, 0, sizeof(packed));
	unsigned v2 = 0x01020304u;
	memcpy(packed, &buf, 8);
	memcpy(packed + 8, &v2, 4);
	memcpy(packed + 16, &n, 8);
	size_t psize = 24;
	void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &psize, CU_LAUNCH_PARAM_END};
	CK(cuLaunchKernel(fill, rgtest_grid(N), 1, 1, 256, 1, 1, 0, NULL, NULL, extra));
	CK(cuMemcpyDtoH(host, buf, N * sizeof(unsigned)));
	ok = 1;
	for (int i = 0; i < N; i++)
		ok &= host[i] == v2;
	check("cuLaunchKernel(extra)", ok);
	expect("cuLaunchKernel(kernelParams and extra)", cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, NULL, args, extra),
	       CUDA_ERROR_INVALID_VALUE);
	void *extra_bad[] = {(void *)0x77, packed, CU_LAUNCH_PARAM_END};
	expect("cuLaunchKernel(unknown extra key)", cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, extra_bad),
	       CUDA_ERROR_INVALID_VALUE);
	expect("cuLaunchKernel(no parameters given)", cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL),
	       CUDA_ERROR_INVALID_VALUE);
	EXPECT_BAD("cuLaunchKernel(not a function)", cuLaunchKernel((CUfunction)0x1234, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL),
	       CUDA_ERROR_INVALID_HANDLE);
	expect("cuLaunchKernel(block of 2048)", cuLaunchKernel(fill, 1, 1, 1, 2048, 1, 1, 0, NULL, args, NULL),
	       CUDA_ERROR_INVALID_VALUE);
	CK(cuLaunchKernel(none, 2, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));

	/* drv_mixed's parameter space, byte for byte (on the fake, its log). */
	char a8 = 0x11;
	double b8 = 1.5;
	short c8 = 0x2233;
	float *p8 = NULL;
	int d8 = 0x44556677;
	void *margs[] = {&a8, &b8, &c8, &p8, &d8};
	CK(cuLaunchKernel(mixed, 3, 1, 1, 64, 1, 1, 128, NULL, margs, NULL));
	unsigned char mbuf[40];
	memset(mbuf, 0, sizeof(mbuf));
	mbuf[0] = 0x11;
	memcpy(mbuf + 8, &b8, 8);
	memcpy(mbuf + 16, &c8, 2);
	memcpy(mbuf + 32, &d8, 4);
	size_t msize = 36;
	void *mextra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, mbuf, CU_LAUNCH_PARAM_BUFFER_SIZE, &msize, CU_LAUNCH_PARAM_END};
	CK(cuLaunchKernel(mixed, 1, 2, 1, 32, 1, 1, 0, NULL, NULL, mextra));
	CK(cuCtxSynchronize());
	if (fake) {
		char h[2 * 36 + 1];
		hex(h, mbuf, 36);
		printf("expect launch drv_noparams grid=2,1,1 block=1,1,1 shmem=0 params=\n");
		printf("expect launch drv_mixed grid=3,1,1 block=64,1,1 shmem=128 params=%s\n", h);
		printf("expect launch drv_mixed grid=1,2,1 block=32,1,1 shmem=0 params=%s\n", h);
	}

	/* cuLaunchKernelEx: attributes that travel, one that does not. */
	CUlaunchAttribute at[2];
	memset(at, 0, sizeof(at));
	at[0].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
	at[0].value.priority = 0;
	at[1].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
	at[1].value.programmaticStreamSerializationAllowed = 0;
	CUlaunchConfig cfg;
	memset(&cfg, 0, sizeof(cfg));
	cfg.gridDimX = rgtest_grid(N);
	cfg.gridDimY = cfg.gridDimZ = 1;
	cfg.blockDimX = 256;
	cfg.blockDimY = cfg.blockDimZ = 1;
	cfg.attrs = at;
	cfg.numAttrs = 2;
	unsigned v3 = 0xCAFEF00Du;
	void *args3[] = {&buf, &v3, &n};
	CK(cuLaunchKernelEx(&cfg, fill, args3, NULL));
	CK(cuMemcpyDtoH(host, buf, N * sizeof(unsigned)));
	ok = 1;
	for (int i = 0; i < N; i++)
		ok &= host[i] == v3;
	check("cuLaunchKernelEx(priority, programmatic serialization)", ok);
	v2 = 0x0BADBEEFu;
	memcpy(packed + 8, &v2, 4);
	CK(cuLaunchKernelEx(&cfg, fill, NULL, extra));
	CK(cuMemcpyDtoH(host, buf, N * sizeof(unsigned)));
	ok = 1;
	for (int i = 0; i < N; i++)
		ok &= host[i] == v2;
	check("cuLaunchKernelEx(extra)", ok);
	expect("cuLaunchKernelEx(NULL config)", cuLaunchKernelEx(NULL, fill, args3, NULL), CUDA_ERROR_INVALID_VALUE);
	ONLY(remote) {
		/* Carries an address: the remote path refuses it. */
		at[0].id = CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW;
		at[0].value.accessPolicyWindow.base_ptr = (void *)buf;
		at[0].value.accessPolicyWindow.num_bytes = 4096;
		at[0].value.accessPolicyWindow.hitRatio = 1.0f;
		cfg.numAttrs = 1;
		expect("cuLaunchKernelEx(access policy window)", cuLaunchKernelEx(&cfg, fill, args3, NULL),
		       CUDA_ERROR_NOT_SUPPORTED);
	}

	/* Cooperative launches: a grid that fits, one that cannot. */
	int per_sm = 0, sms = 0;
	CK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fill, 256, 0));
	CK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0));
	CK(cuLaunchCooperativeKernel(fill, 1, 1, 1, 256, 1, 1, 0, NULL, args));
	CK(cuMemcpyDtoH(host, buf, N * sizeof(unsigned)));
	check("cuLaunchCooperativeKernel", host[0] == v && host[N - 1] == v);
	expect("cuLaunchCooperativeKernel(grid too large)",
	       cuLaunchCooperativeKernel(fill, per_sm * sms + 1, 1, 1, 256, 1, 1, 0, NULL, args),
	       CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);

	/* Occupancy. */
	check("cuOccupancyMaxActiveBlocksPerMultiprocessor", per_sm > 0, "%d", per_sm);
	expect("cuOccupancyMaxActiveBlocksPerMultiprocessor(NULL)",
	       cuOccupancyMaxActiveBlocksPerMultiprocessor(NULL, fill, 256, 0), CUDA_ERROR_INVALID_VALUE);
	int min_grid = 0, bs = 0, at_bs = 0;
	CK(cuOccupancyMaxPotentialBlockSize(&min_grid, &bs, fill, NULL, 0, 0));
	CK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&at_bs, fill, bs, 0));
	check("cuOccupancyMaxPotentialBlockSize", bs > 0 && bs <= 1024 && bs % 32 == 0 && min_grid == at_bs * sms,
	      "block %d, min grid %d", bs, min_grid);
	CK(cuOccupancyMaxPotentialBlockSize(&min_grid, &bs, fill, NULL, 0, 96));
	check("cuOccupancyMaxPotentialBlockSize(limit 96)", bs > 0 && bs <= 96, "block %d", bs);
	/* On a kernel with no preferences set (a cache preference changes the
	 * carveout the occupancy of a launch assumes). */
	CUfunction scale;
	CK(cuModuleGetFunction(&scale, mod, "rgtest_scale_f32"));
	size_t dyn = 0;
	int at_dyn = 0, over = 0;
	CK(cuOccupancyAvailableDynamicSMemPerBlock(&dyn, scale, 2, 256));
	CK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&at_dyn, scale, 256, dyn));
	CK(cuFuncGetAttribute(&a, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, scale));
	/* Remotely it is found by bisection: one byte more must not fit. */
	if ((int)dyn < a && remote)
		CK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&over, scale, 256, dyn + 1));
	check("cuOccupancyAvailableDynamicSMemPerBlock", dyn > 0 && at_dyn >= 2 && over < 2,
	      "%zu bytes, %d blocks there, %d with a byte more", dyn, at_dyn, over);

	/* Other ways to load. */
	CUmodule mf, mfat;
	char path[] = "/tmp/drv_module_XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0 || write(fd, image_copy, image_size) != (ssize_t)image_size) {
		printf("FAIL cannot write %s\n", path);
		exit(1);
	}
	close(fd);
	CK(cuModuleLoad(&mf, path));
	unlink(path);
	CK(cuModuleGetFunction(&f, mf, "rgtest_scale_f32"));
	check("cuModuleLoad(file)", f != NULL && f != fill);
	expect("cuModuleLoad(no such file)", cuModuleLoad(&mf, "/nonexistent/drv_module.fatbin"),
	       CUDA_ERROR_FILE_NOT_FOUND);
	CK(cuModuleLoadFatBinary(&mfat, image_copy));
	CK(cuModuleGetFunction(&f, mfat, "rgtest_fill_u32"));
	check("cuModuleLoadFatBinary", f != fill);
	CUmodule mex;
	char log[64];
	memset(log, 'x', sizeof(log));
	CUjit_option o[3] = {CU_JIT_MAX_REGISTERS, CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
	void *ov[3] = {(void *)(uintptr_t)64, log, (void *)(uintptr_t)sizeof(log)};
	CK(cuModuleLoadDataEx(&mex, image_copy, 3, o, ov));
	check("cuModuleLoadDataEx(JIT options): an empty error log", log[0] == 0);
	CK(cuModuleGetFunction(&f, mex, "rgtest_add_f32"));

	/* Unloading. */
	CK(cuModuleUnload(mex));
	EXPECT_BAD("cuModuleUnload twice", cuModuleUnload(mex), CUDA_ERROR_INVALID_HANDLE);
	EXPECT_BAD("cuModuleGetFunction(unloaded module)", cuModuleGetFunction(&f, mex, "rgtest_add_f32"),
	       CUDA_ERROR_INVALID_HANDLE);
	EXPECT_BAD("cuModuleUnload(not a module)", cuModuleUnload(bad), CUDA_ERROR_INVALID_HANDLE);
	CK(cuModuleUnload(mf));
	CK(cuModuleUnload(mfat));
	CK(cuMemFree(buf));
	free(host);
	/* mod stays loaded until the context goes */
}

/* ---- libraries */

static void libraries(void)
{
	CUlibrary lib;
	CUkernel add, k;
	CUfunction f;
	CUmodule m;
	CUdeviceptr gvar;
	size_t bytes = 0, off, size;

	expect("cuLibraryLoadData(NULL)", cuLibraryLoadData(&lib, NULL, NULL, NULL, 0, NULL, NULL, 0),
	       CUDA_ERROR_INVALID_VALUE);
	/* an option that takes no value, without a values array (as cuBLASLt loads) */
	CUlibraryOption preserved = CU_LIBRARY_BINARY_IS_PRESERVED;
	expect("cuLibraryLoadData(BINARY_IS_PRESERVED, no values)",
	       cuLibraryLoadData(&lib, image_mem, NULL, NULL, 0, &preserved, NULL, 1), CUDA_SUCCESS);
	CK(cuLibraryUnload(lib));
	CK(cuLibraryLoadData(&lib, image_mem, NULL, NULL, 0, NULL, NULL, 0));
	CK(cuLibraryGetKernel(&add, lib, "rgtest_add_f32"));
	expect("cuLibraryGetKernel(unknown name)", cuLibraryGetKernel(&k, lib, "no_such_kernel"), CUDA_ERROR_NOT_FOUND);
	expect("cuLibraryGetKernel(NULL name)", cuLibraryGetKernel(&k, lib, NULL), CUDA_ERROR_INVALID_VALUE);
	CK(cuKernelGetFunction(&f, add));
	CUlibrary back;
	CK(cuKernelGetLibrary(&back, add));
	check("cuKernelGetFunction, cuKernelGetLibrary", f != NULL && back == lib);
	const char *name = NULL;
	CK(cuKernelGetName(&name, add));
	check("cuKernelGetName", name && strcmp(name, "rgtest_add_f32") == 0);
	unsigned count = 0;
	CUkernel ks[8] = {0};
	CK(cuLibraryGetKernelCount(&count, lib));
	CK(cuLibraryEnumerateKernels(ks, 2, lib));
	CK(cuLibraryEnumerateKernels(ks, 8, lib));
	int same = 0;
	for (unsigned i = 0; i < count && i < 8; i++)
		same += ks[i] == add;
	check("cuLibraryGetKernelCount, cuLibraryEnumerateKernels", count == 6 && same == 1, "%u kernels", count);
	CK(cuLibraryGetModule(&m, lib));
	CK(cuModuleGetFunction(&f, m, "rgtest_add_f32"));
	check("cuLibraryGetModule", m != NULL);
	CK(cuKernelGetParamInfo(add, 3, &off, &size));
	check("cuKernelGetParamInfo", off == 24 && size == 4, "%zu %zu", off, size);
	int a = 0;
	CK(cuKernelGetAttribute(&a, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, add, 0));
	check("cuKernelGetAttribute", a > 0 && a <= 1024, "%d", a);
	expect("cuKernelGetAttribute(device 99)", cuKernelGetAttribute(&a, CU_FUNC_ATTRIBUTE_NUM_REGS, add, 99),
	       CUDA_ERROR_INVALID_DEVICE);
	CK(cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 32768, add, 0));
	CK(cuKernelGetAttribute(&a, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, add, 0));
	check("cuKernelSetAttribute", a == 32768, "%d", a);
	CK(cuLibraryGetGlobal(&gvar, &bytes, lib, "drv_gvar"));
	unsigned g[4] = {0};
	CK(cuMemcpyDtoH(g, gvar, sizeof(g)));
	check("cuLibraryGetGlobal: a fresh instance of the image", bytes == 16 && g[0] == 1 && g[3] == 4);

	/* A CUkernel launches as a CUfunction. */
	enum { N = 1000 };
	float ha[N], hb[N], hc[N];
	for (int i = 0; i < N; i++) {
		ha[i] = (float)i;
		hb[i] = (float)(3 * i) + 0.5f;
	}
	CUdeviceptr da, db, dc;
	CK(cuMemAlloc(&da, sizeof(ha)));
	CK(cuMemAlloc(&db, sizeof(hb)));
	CK(cuMemAlloc(&dc, sizeof(hc)));
	CK(cuMemcpyHtoD(da, ha, sizeof(ha)));
	CK(cuMemcpyHtoD(db, hb, sizeof(hb)));
	int n = N;
	void *args[] = {&da, &db, &dc, &n};
	CK(cuLaunchKernel((CUfunction)add, rgtest_grid(N), 1, 1, 256, 1, 1, 0, NULL, args, NULL));
	CK(cuMemcpyDtoH(hc, dc, sizeof(hc)));
	int ok = 1;
	for (int i = 0; i < N; i++)
		ok &= hc[i] == ha[i] + hb[i];
	check("cuLaunchKernel((CUfunction)CUkernel)", ok);

	CK(cuLibraryUnload(lib));
	EXPECT_BAD("cuLibraryUnload twice", cuLibraryUnload(lib), CUDA_ERROR_INVALID_HANDLE);
	EXPECT_BAD("cuLibraryGetKernel(unloaded)", cuLibraryGetKernel(&k, lib, "rgtest_add_f32"), CUDA_ERROR_INVALID_HANDLE);
	CK(cuMemFree(da));
	CK(cuMemFree(db));
	CK(cuMemFree(dc));
}

/* ---- the primary context's reset and release */

static void primary_end(void)
{
	CUlibrary lib;
	CUkernel fill;
	CK(cuLibraryLoadData(&lib, image_mem, NULL, NULL, 0, NULL, NULL, 0));
	CK(cuLibraryGetKernel(&fill, lib, "rgtest_fill_u32"));
	CK(cuDevicePrimaryCtxReset(0));
	expect("cuDevicePrimaryCtxReset(device 99)", cuDevicePrimaryCtxReset(99), CUDA_ERROR_INVALID_DEVICE);
	/* The reset destroyed the context current here: made current again. */
	CUcontext again;
	CK(cuDevicePrimaryCtxRetain(&again, 0));
	CK(cuCtxSetCurrent(again));

	/* A library is loaded again in the new context as it is used. */
	CUdeviceptr buf;
	unsigned host[256], v = 42;
	unsigned long long n = 256;
	CK(cuMemAlloc(&buf, sizeof(host)));
	void *args[] = {&buf, &v, &n};
	CK(cuLaunchKernel((CUfunction)fill, 1, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
	CK(cuMemcpyDtoH(host, buf, sizeof(host)));
	check("a library's kernel after the reset", host[0] == 42 && host[255] == 42);
	CK(cuMemFree(buf));
	CK(cuLibraryUnload(lib));

	int active = 0;
	unsigned flags;
	CK(cuDevicePrimaryCtxRelease(0));
	CK(cuDevicePrimaryCtxGetState(0, &flags, &active));
	check("one retain left: active", active == 1);
	CK(cuDevicePrimaryCtxRelease(0));
	CK(cuDevicePrimaryCtxGetState(0, &flags, &active));
	check("released for good: inactive", active == 0);
	expect("cuDevicePrimaryCtxRelease once more", cuDevicePrimaryCtxRelease(0), CUDA_ERROR_INVALID_CONTEXT);
}

int main(void)
{
	find_image();
	expect("cuInit", cuInit(0), CUDA_SUCCESS);
	contexts();
	modules();
	libraries();
	primary_end();
	free(image_copy);
	return rg_finish("drv_module");
}
