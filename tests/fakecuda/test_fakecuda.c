/*
 * test_fakecuda: unit test of the driver test double.
 *
 * Loads libcuda.so.1 with dlopen and dlsym, by the versioned names cuda.h gives the
 * functions, as remote-gpud does, and checks the behaviours the end-to-end tests rely
 * on: exports, range validation, handle staleness, memory accounting, the launch log
 * of a kernel built by nvcc with mixed parameter types, emulated kernels, capture and
 * replay, the sticky fault, context teardown, thread safety.
 *
 *   test_fakecuda          all of it
 *   test_fakecuda --env    with FAKECUDA_DEVICES=3 FAKECUDA_MEM_BYTES=64m set
 *
 * Module tests need the kernels nvcc built (FK_KERNELS_DIR); without nvcc they are
 * skipped.
 */
#include <cuda.h>
#include <cudaProfiler.h>

#include <dlfcn.h>
#include <elf.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- the driver, through dlsym ---- */

#define API(X)                                                                        \
	X(cuInit) X(cuDriverGetVersion) X(cuGetProcAddress) X(cuGetErrorName)             \
	X(cuGetErrorString) X(cuDeviceGet) X(cuDeviceGetCount) X(cuDeviceGetName)          \
	X(cuDeviceTotalMem) X(cuDeviceGetUuid) X(cuDeviceGetPCIBusId)                      \
	X(cuDeviceGetByPCIBusId) X(cuDeviceGetAttribute) X(cuDeviceCanAccessPeer)          \
	X(cuDeviceGetDefaultMemPool) X(cuMemPoolGetAttribute) X(cuMemPoolSetAttribute)     \
	X(cuMemPoolTrimTo) X(cuCtxCreate) X(cuCtxDestroy) X(cuCtxSetCurrent)               \
	X(cuCtxGetCurrent) X(cuCtxSynchronize) X(cuCtxGetDevice)                           \
	X(cuCtxGetStreamPriorityRange) X(cuCtxPushCurrent) X(cuCtxPopCurrent)              \
	X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) X(cuMemAlloc)             \
	X(cuMemFree) X(cuMemGetInfo) X(cuMemGetAddressRange) X(cuMemAllocAsync)            \
	X(cuMemFreeAsync) X(cuMemHostAlloc) X(cuMemFreeHost) X(cuMemHostRegister)          \
	X(cuMemHostUnregister) X(cuMemHostGetDevicePointer) X(cuPointerGetAttribute)       \
	X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemcpyDtoD) X(cuMemcpyHtoDAsync)               \
	X(cuMemcpyDtoHAsync) X(cuMemcpyDtoDAsync) X(cuMemcpy) X(cuMemcpy2D)                 \
	X(cuMemcpy2DAsync) X(cuMemsetD8) X(cuMemsetD16) X(cuMemsetD32)                     \
	X(cuMemsetD32Async) X(cuMemsetD2D8) X(cuMemsetD2D32Async) X(cuStreamCreate)        \
	X(cuStreamCreateWithPriority) X(cuStreamDestroy) X(cuStreamQuery)                  \
	X(cuStreamSynchronize) X(cuStreamWaitEvent) X(cuStreamGetPriority)                 \
	X(cuStreamGetFlags) X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord)            \
	X(cuEventRecordWithFlags) X(cuEventQuery) X(cuEventSynchronize)                    \
	X(cuEventElapsedTime) X(cuModuleLoadData) X(cuModuleLoadDataEx)                    \
	X(cuModuleLoadFatBinary) X(cuModuleLoad) X(cuModuleUnload) X(cuModuleGetFunction)                  \
	X(cuModuleGetGlobal) X(cuFuncGetParamInfo) X(cuFuncGetAttribute)                   \
	X(cuFuncSetAttribute) X(cuFuncGetName) X(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags) \
	X(cuOccupancyMaxPotentialBlockSize) X(cuLaunchKernel) X(cuLaunchKernelEx)          \
	X(cuLaunchHostFunc) X(cuStreamBeginCapture) X(cuStreamEndCapture)                  \
	X(cuStreamIsCapturing) X(cuStreamGetCaptureInfo) X(cuGraphInstantiate)             \
	X(cuGraphLaunch) X(cuGraphGetNodes) X(cuGraphDestroy) X(cuGraphExecDestroy)        \
	X(cuProfilerStart) X(cuProfilerStop) X(cuLibraryLoadData)

#define STR_(x) #x
#define STR(x) STR_(x)
/* p_cuMemAlloc has the type of cuMemAlloc_v2 and is looked up as "cuMemAlloc_v2" */
#define DECL(f) static __typeof__(f) *p_##f;
API(DECL)

static void *lib;

/* ---- checks ---- */

static _Atomic int failures, checks; /* bumped by several threads */

#define CHECK(cond)                                                                 \
	do {                                                                        \
		checks++;                                                           \
		if (!(cond)) {                                                      \
			failures++;                                                 \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
		}                                                                   \
	} while (0)

static const char *ename(CUresult rc)
{
	const char *s = NULL;
	if (p_cuGetErrorName(rc, &s) != CUDA_SUCCESS)
		return "?";
	return s;
}

#define CK(call, want)                                                              \
	do {                                                                        \
		CUresult rc_ = (call);                                              \
		checks++;                                                           \
		if (rc_ != (want)) {                                                \
			failures++;                                                 \
			fprintf(stderr, "%s:%d: %s = %s, want %s\n", __FILE__, __LINE__, #call, \
			        ename(rc_), ename(want));                           \
		}                                                                   \
	} while (0)

#define OK(call) CK(call, CUDA_SUCCESS)

static char log_path[256];

#ifdef FK_KERNELS_DIR
static void *read_file(const char *name, size_t *size)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", FK_KERNELS_DIR, name);
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	void *b = malloc((size_t)n + 1);
	if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
		free(b);
		b = NULL;
	}
	fclose(f);
	if (size)
		*size = (size_t)n;
	return b;
}

/* The whole launch log, and its number of lines; caller frees. */
static char *log_read(int *nlines)
{
	FILE *f = fopen(log_path, "rb");
	char *b = NULL;
	size_t n = 0;
	*nlines = 0;
	if (!f)
		return strdup("");
	fseek(f, 0, SEEK_END);
	n = (size_t)ftell(f);
	fseek(f, 0, SEEK_SET);
	b = calloc(1, n + 1);
	if (fread(b, 1, n, f) != n)
		b[0] = 0;
	fclose(f);
	for (size_t i = 0; i < n; i++)
		*nlines += b[i] == '\n';
	return b;
}

static void log_clear(void)
{
	FILE *f = fopen(log_path, "w");
	if (f)
		fclose(f);
}

static void hex(char *out, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
	out[2 * n] = 0;
}
#endif

static size_t free_mem(void)
{
	size_t f = 0, t = 0;
	OK(p_cuMemGetInfo(&f, &t));
	return f;
}

/* ---- exports ---- */

/* Every exported function is a cu* function that cuGetProcAddress finds by its base
 * name (the exported name less a _vN suffix), and nothing else is exported. */
static void test_exports(void)
{
	FILE *f = fopen(FK_LIB, "rb");
	CHECK(f != NULL);
	if (!f)
		return;
	fseek(f, 0, SEEK_END);
	size_t n = (size_t)ftell(f);
	fseek(f, 0, SEEK_SET);
	unsigned char *b = malloc(n);
	CHECK(b && fread(b, 1, n, f) == n);
	fclose(f);

	Elf64_Ehdr *eh = (Elf64_Ehdr *)b;
	Elf64_Shdr *sh = (Elf64_Shdr *)(b + eh->e_shoff);
	int nexp = 0;
	for (int i = 0; i < eh->e_shnum; i++) {
		if (sh[i].sh_type != SHT_DYNSYM)
			continue;
		Elf64_Sym *sym = (Elf64_Sym *)(b + sh[i].sh_offset);
		const char *str = (const char *)b + sh[sh[i].sh_link].sh_offset;
		for (size_t k = 0; k < sh[i].sh_size / sizeof *sym; k++) {
			const char *name = str + sym[k].st_name;
			if (sym[k].st_shndx == SHN_UNDEF || ELF64_ST_BIND(sym[k].st_info) == STB_LOCAL ||
			    !*name)
				continue;
			nexp++;
			if (strncmp(name, "cu", 2) != 0 || ELF64_ST_TYPE(sym[k].st_info) != STT_FUNC) {
				fprintf(stderr, "unexpected export %s\n", name);
				CHECK(0);
				continue;
			}
			char base[128];
			snprintf(base, sizeof base, "%s", name);
			char *v = strrchr(base, '_');
			if (v && v[1] == 'v' && v[2] >= '0' && v[2] <= '9')
				*v = 0;
			void *fn = NULL;
			CUdriverProcAddressQueryResult st;
			CUresult rc = p_cuGetProcAddress(base, &fn, 13000, 0, &st);
			if (rc != CUDA_SUCCESS || fn != dlsym(lib, name)) {
				fprintf(stderr, "cuGetProcAddress(%s) does not give %s\n", base, name);
				CHECK(0);
			}
		}
	}
	printf("exports: %d functions\n", nexp);
	CHECK(nexp > 100);
	free(b);

	void *fn = (void *)1;
	CUdriverProcAddressQueryResult st;
	OK(p_cuGetProcAddress("cuMemAlloc", &fn, 13000, 0, &st));
	CHECK(fn == dlsym(lib, "cuMemAlloc_v2") && st == CU_GET_PROC_ADDRESS_SUCCESS);
	OK(p_cuGetProcAddress("cuGraphInstantiate", &fn, 12000, 0, &st));
	CHECK(fn == dlsym(lib, "cuGraphInstantiateWithFlags"));
	CK(p_cuGetProcAddress("cuCtxCreate", &fn, 11000, 0, &st), CUDA_ERROR_NOT_FOUND);
	CHECK(fn == NULL && st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
	CK(p_cuGetProcAddress("cuNoSuchThing", &fn, 13000, 0, &st), CUDA_ERROR_NOT_FOUND);
	CHECK(st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
	/* per-thread default stream variants are the same functions here */
	OK(p_cuGetProcAddress("cuLaunchKernel", &fn, 13000,
	                      CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
	CHECK(fn == dlsym(lib, "cuLaunchKernel"));
	CHECK(dlsym(lib, "cuMemAlloc") == NULL); /* only the versioned name */
	CK(p_cuLibraryLoadData(NULL, NULL, NULL, NULL, 0, NULL, NULL, 0), CUDA_ERROR_NOT_SUPPORTED);
}

/* ---- device ---- */

static void test_device(void)
{
	int n = -1, v = 0, ver = 0;
	char name[64], bus[32];
	size_t total = 0;
	CUdevice d = -1;
	CUuuid uuid;
	const char *s;

	OK(p_cuDriverGetVersion(&ver));
	CHECK(ver == 13000);
	CK(p_cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
	CK(p_cuInit(1), CUDA_ERROR_INVALID_VALUE);
	OK(p_cuInit(0));
	OK(p_cuInit(0));
	OK(p_cuDeviceGetCount(&n));
	CHECK(n == 1);
	OK(p_cuDeviceGet(&d, 0));
	CHECK(d == 0);
	CK(p_cuDeviceGet(&d, 1), CUDA_ERROR_INVALID_DEVICE);
	OK(p_cuDeviceGetName(name, sizeof name, 0));
	CHECK(strcmp(name, "remote-gpu fake device") == 0);
	OK(p_cuDeviceTotalMem(&total, 0));
	CHECK(total == 8ull << 30);
	OK(p_cuDeviceGetUuid(&uuid, 0));
	OK(p_cuDeviceGetPCIBusId(bus, sizeof bus, 0));
	OK(p_cuDeviceGetByPCIBusId(&d, bus));
	CHECK(d == 0);

	static const struct { CUdevice_attribute a; int v; } want[] = {
		{ CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 9 },
		{ CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0 },
		{ CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 132 },
		{ CU_DEVICE_ATTRIBUTE_WARP_SIZE, 32 },
		{ CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024 },
		{ CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, 64 },
		{ CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 1 },
		{ CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 1 },
		{ CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0 },
	};
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		OK(p_cuDeviceGetAttribute(&v, want[i].a, 0));
		CHECK(v == want[i].v);
	}
	for (int a = 1; a < CU_DEVICE_ATTRIBUTE_MAX; a++)
		OK(p_cuDeviceGetAttribute(&v, (CUdevice_attribute)a, 0));
	CK(p_cuDeviceGetAttribute(&v, (CUdevice_attribute)0, 0), CUDA_ERROR_INVALID_VALUE);
	CK(p_cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX, 0), CUDA_ERROR_INVALID_VALUE);
	CK(p_cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 1), CUDA_ERROR_INVALID_DEVICE);
	OK(p_cuDeviceCanAccessPeer(&v, 0, 0));

	CUmemoryPool pool;
	cuuint64_t u = 1;
	OK(p_cuDeviceGetDefaultMemPool(&pool, 0));
	OK(p_cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &u));
	u = 0;
	OK(p_cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &u));
	CHECK(u == 1);
	u = 0; /* back to releasing everything at a synchronisation */
	OK(p_cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &u));
	CK(p_cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &u),
	   CUDA_ERROR_INVALID_VALUE);
	OK(p_cuMemPoolTrimTo(pool, 0));
	CK(p_cuMemPoolTrimTo((CUmemoryPool)(uintptr_t)0x1234, 0), CUDA_ERROR_INVALID_HANDLE);

	OK(p_cuGetErrorName(CUDA_ERROR_ILLEGAL_ADDRESS, &s));
	CHECK(strcmp(s, "CUDA_ERROR_ILLEGAL_ADDRESS") == 0);
	OK(p_cuGetErrorString(CUDA_ERROR_INVALID_VALUE, &s));
	CHECK(strcmp(s, "invalid argument") == 0);
	CK(p_cuGetErrorName((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);
	OK(p_cuProfilerStart());
	OK(p_cuProfilerStop());
}

/* ---- memory ---- */

static void test_memory(CUcontext ctx)
{
	CUdeviceptr a = 0, b = 0, base;
	size_t size, before = free_mem();
	unsigned char buf[4096], back[4096];

	OK(p_cuMemAlloc(&a, 1 << 20));
	CHECK(a % 256 == 0);
	CHECK(before - free_mem() == 1 << 20);
	OK(p_cuMemAlloc(&b, 100));
	CHECK(b % 256 == 0);
	CHECK(before - free_mem() == (1 << 20) + 256); /* charged in units of 256 */
	CK(p_cuMemAlloc(&b, 0), CUDA_ERROR_INVALID_VALUE);
	CK(p_cuMemAlloc(&b, (size_t)16 << 30), CUDA_ERROR_OUT_OF_MEMORY);
	OK(p_cuMemGetAddressRange(&base, &size, b + 50));
	CHECK(base == b && size == 100);
	CK(p_cuMemGetAddressRange(&base, &size, b + 100), CUDA_ERROR_NOT_FOUND);

	/* copies inside one allocation work and move the bytes */
	for (size_t i = 0; i < sizeof buf; i++)
		buf[i] = (unsigned char)(i * 7);
	OK(p_cuMemcpyHtoD(a + 1000, buf, sizeof buf));
	OK(p_cuMemcpyDtoD(a + 100000, a + 1000, sizeof buf));
	memset(back, 0, sizeof back);
	OK(p_cuMemcpyDtoH(back, a + 100000, sizeof back));
	CHECK(memcmp(buf, back, sizeof buf) == 0);
	OK(p_cuMemcpyHtoD(b, buf, 100));                /* exactly the allocation */
	OK(p_cuMemcpyHtoD(b + 200, buf, 0));            /* nothing touched */

	/* ranges that leave their allocation are refused, and nothing is written */
	CK(p_cuMemcpyHtoD(b, buf, 101), CUDA_ERROR_INVALID_VALUE);
	CK(p_cuMemcpyHtoD(b + 99, buf, 2), CUDA_ERROR_INVALID_VALUE);
	CK(p_cuMemcpyDtoH(back, b + 100, 1), CUDA_ERROR_INVALID_VALUE);
	CK(p_cuMemcpyDtoD(b, a, 101), CUDA_ERROR_INVALID_VALUE);
	CK(p_cuMemcpyDtoD(a + (1 << 20) - 10, b, 20), CUDA_ERROR_INVALID_VALUE);
	CK(p_cuMemcpyHtoD((CUdeviceptr)(uintptr_t)buf, buf, 16), CUDA_ERROR_INVALID_VALUE);
	CK(p_cuMemcpyHtoDAsync(b, buf, 101, NULL), CUDA_ERROR_INVALID_VALUE);
	CK(p_cuMemsetD8(b, 0, 101), CUDA_ERROR_INVALID_VALUE);
	CK(p_cuMemsetD32(b + 2, 0, 1), CUDA_ERROR_INVALID_VALUE); /* misaligned */
	CK(p_cuMemsetD32(b + 4, 0, 25), CUDA_ERROR_INVALID_VALUE);
	OK(p_cuMemsetD32(b + 4, 0xAABBCCDD, 24));
	OK(p_cuMemcpyDtoH(back, b, 100));
	CHECK(back[4] == 0xDD && back[99] == 0xAA && back[0] == buf[0]);
	OK(p_cuMemsetD8(a, 0x55, 8));
	OK(p_cuMemsetD16(a, 0x0102, 3));
	OK(p_cuMemcpyDtoH(back, a, 8));
	CHECK(back[0] == 2 && back[1] == 1 && back[5] == 1 && back[6] == 0x55);
	CK(p_cuMemsetD16(a + 1, 0, 1), CUDA_ERROR_INVALID_VALUE); /* misaligned */

	/* unified copy: direction from the pointers */
	OK(p_cuMemcpy((CUdeviceptr)(uintptr_t)back, b, 10));
	OK(p_cuMemcpy(b, (CUdeviceptr)(uintptr_t)buf, 10));
	CK(p_cuMemcpy(b + 95, (CUdeviceptr)(uintptr_t)buf, 10), CUDA_ERROR_INVALID_VALUE);

	/* 2D: rows of 16 bytes, 32 apart, 8 rows = 240 bytes from the start */
	CUDA_MEMCPY2D m = { 0 };
	m.srcMemoryType = CU_MEMORYTYPE_HOST;
	m.srcHost = buf;
	m.srcPitch = 16;
	m.dstMemoryType = CU_MEMORYTYPE_DEVICE;
	m.dstDevice = a;
	m.dstPitch = 32;
	m.WidthInBytes = 16;
	m.Height = 8;
	OK(p_cuMemcpy2D(&m));
	OK(p_cuMemcpyDtoH(back, a + 32 * 7, 16));
	CHECK(memcmp(back, buf + 16 * 7, 16) == 0);
	m.dstDevice = b;
	m.dstPitch = 12; /* pitch below width */
	CK(p_cuMemcpy2D(&m), CUDA_ERROR_INVALID_VALUE);
	m.dstPitch = 16;
	m.Height = 7; /* 6 * 16 + 16 = 112 > 100 */
	CK(p_cuMemcpy2DAsync(&m, NULL), CUDA_ERROR_INVALID_VALUE);
	m.Height = 6;
	OK(p_cuMemcpy2DAsync(&m, NULL));
	CK(p_cuMemsetD2D8(b, 16, 1, 16, 7), CUDA_ERROR_INVALID_VALUE);
	OK(p_cuMemsetD2D8(b, 16, 1, 16, 6));

	/* free: only the start of a live allocation */
	CK(p_cuMemFree(b + 1), CUDA_ERROR_INVALID_VALUE);
	CK(p_cuMemFree((CUdeviceptr)(uintptr_t)buf), CUDA_ERROR_INVALID_VALUE);
	OK(p_cuMemFree(b));
	CK(p_cuMemFree(b), CUDA_ERROR_INVALID_VALUE);
	CK(p_cuMemcpyHtoD(b, buf, 1), CUDA_ERROR_INVALID_VALUE); /* freed is not a range */
	OK(p_cuMemFree(a));
	CHECK(free_mem() == before);

	/* stream-ordered allocation from the default pool */
	CUmemoryPool pool;
	cuuint64_t used = 0;
	OK(p_cuDeviceGetDefaultMemPool(&pool, 0));
	OK(p_cuMemAllocAsync(&a, 1000, NULL));
	OK(p_cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used));
	CHECK(used == 1024);
	OK(p_cuMemsetD32Async(a, 7, 250, NULL));
	OK(p_cuMemFreeAsync(a, NULL));
	CK(p_cuMemFreeAsync(a, NULL), CUDA_ERROR_INVALID_VALUE);
	OK(p_cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used));
	CHECK(used == 0);
	/* freed memory stays in the pool's reserve until a synchronisation */
	OK(p_cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &used));
	CHECK(used == 1024);
	CHECK(free_mem() == before - 1024);
	OK(p_cuStreamSynchronize(NULL));
	OK(p_cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &used));
	CHECK(used == 0);
	CHECK(free_mem() == before);

	/* pinned host memory */
	void *h = NULL;
	CUdeviceptr hd = 0;
	unsigned mt = 0;
	CUcontext pc = NULL;
	OK(p_cuMemHostAlloc(&h, 8192, CU_MEMHOSTALLOC_DEVICEMAP));
	OK(p_cuMemHostGetDevicePointer(&hd, h, 0));
	CHECK(hd == (CUdeviceptr)(uintptr_t)h);
	OK(p_cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, hd));
	CHECK(mt == CU_MEMORYTYPE_HOST);
	CK(p_cuMemFreeHost((char *)h + 1), CUDA_ERROR_INVALID_VALUE);
	OK(p_cuMemFreeHost(h));
	CK(p_cuMemFreeHost(h), CUDA_ERROR_INVALID_VALUE);
	OK(p_cuMemHostRegister(buf, sizeof buf, 0));
	CK(p_cuMemHostRegister(buf + 10, 10, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
	OK(p_cuMemHostUnregister(buf));
	CK(p_cuMemHostUnregister(buf), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);

	OK(p_cuMemAlloc(&a, 64));
	OK(p_cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a + 8));
	CHECK(mt == CU_MEMORYTYPE_DEVICE);
	OK(p_cuPointerGetAttribute(&pc, CU_POINTER_ATTRIBUTE_CONTEXT, a));
	CHECK(pc == ctx);
	OK(p_cuMemFree(a));
	CK(p_cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a), CUDA_ERROR_INVALID_VALUE);
}

/* ---- streams, events, handles ---- */

static void host_inc(void *p)
{
	(*(int *)p)++;
}

static void test_handles(void)
{
	CUstream s, s2;
	CUevent e1, e2, e3;
	int lo = 1, hi = 1, prio = 1;
	unsigned flags = 9;
	float ms = -1;

	OK(p_cuCtxGetStreamPriorityRange(&lo, &hi));
	CHECK(lo == 0 && hi == -5);
	OK(p_cuStreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, -10));
	OK(p_cuStreamGetPriority(s, &prio));
	CHECK(prio == -5); /* clamped */
	OK(p_cuStreamGetFlags(s, &flags));
	CHECK(flags == CU_STREAM_NON_BLOCKING);
	OK(p_cuStreamQuery(s));
	OK(p_cuStreamSynchronize(s));
	OK(p_cuStreamSynchronize(NULL));
	OK(p_cuStreamSynchronize(CU_STREAM_PER_THREAD));
	CK(p_cuStreamCreate(&s2, 0x10), CUDA_ERROR_INVALID_VALUE);
	OK(p_cuStreamDestroy(s));
	CK(p_cuStreamQuery(s), CUDA_ERROR_INVALID_HANDLE);
	CK(p_cuStreamSynchronize(s), CUDA_ERROR_INVALID_HANDLE);
	CK(p_cuStreamDestroy(s), CUDA_ERROR_INVALID_HANDLE);
	CK(p_cuStreamDestroy(NULL), CUDA_ERROR_INVALID_HANDLE);
	/* a new stream never takes an old handle's value */
	OK(p_cuStreamCreate(&s2, 0));
	CHECK(s2 != s);
	CK(p_cuStreamSynchronize((CUstream)(uintptr_t)0xdeadbeef), CUDA_ERROR_INVALID_HANDLE);

	OK(p_cuEventCreate(&e1, 0));
	OK(p_cuEventCreate(&e2, 0));
	OK(p_cuEventCreate(&e3, CU_EVENT_DISABLE_TIMING));
	CK(p_cuEventCreate(&e3, CU_EVENT_INTERPROCESS), CUDA_ERROR_INVALID_VALUE);
	CK(p_cuEventElapsedTime(&ms, e1, e2), CUDA_ERROR_INVALID_HANDLE); /* never recorded */
	OK(p_cuEventQuery(e1));
	OK(p_cuEventRecord(e1, s2));
	struct timespec ts = { 0, 20 * 1000 * 1000 };
	nanosleep(&ts, NULL);
	OK(p_cuEventRecordWithFlags(e2, NULL, 0));
	OK(p_cuEventSynchronize(e2));
	OK(p_cuEventElapsedTime(&ms, e1, e2));
	CHECK(ms >= 19.0f && ms < 5000.0f);
	OK(p_cuEventRecord(e3, s2));
	CK(p_cuEventElapsedTime(&ms, e1, e3), CUDA_ERROR_INVALID_HANDLE); /* no timing */
	OK(p_cuStreamWaitEvent(s2, e1, 0));
	OK(p_cuEventDestroy(e1));
	CK(p_cuEventRecord(e1, s2), CUDA_ERROR_INVALID_HANDLE);
	CK(p_cuEventQuery(e1), CUDA_ERROR_INVALID_HANDLE);
	CK(p_cuStreamWaitEvent(s2, e1, 0), CUDA_ERROR_INVALID_HANDLE);
	CK(p_cuEventDestroy(e1), CUDA_ERROR_INVALID_HANDLE);
	CK(p_cuEventRecord(e2, (CUstream)e2), CUDA_ERROR_INVALID_HANDLE); /* wrong kind */
	OK(p_cuEventDestroy(e2));
	OK(p_cuEventDestroy(e3));

	/* host functions run at once, on this thread */
	int called = 0;
	OK(p_cuLaunchHostFunc(s2, host_inc, &called));
	CHECK(called == 1);
	CK(p_cuLaunchHostFunc(s2, NULL, &called), CUDA_ERROR_INVALID_VALUE);
	OK(p_cuStreamDestroy(s2));
}

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

static void test_modules(void)
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

static void test_launch(void)
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
static void test_capture(void)
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
static void test_fault(CUcontext main_ctx)
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

/* ---- contexts ---- */

static void *no_ctx_thread(void *arg)
{
	CUdeviceptr d;
	CUcontext cur = (CUcontext)1;
	CK(p_cuMemAlloc(&d, 16), CUDA_ERROR_INVALID_CONTEXT);
	OK(p_cuCtxGetCurrent(&cur));
	CHECK(cur == NULL);
	/* make the main thread's context current here, and use it */
	OK(p_cuCtxSetCurrent((CUcontext)arg));
	OK(p_cuMemAlloc(&d, 16));
	OK(p_cuMemFree(d));
	return NULL;
}

static void test_contexts(CUcontext main_ctx)
{
	size_t before = free_mem();
	CUcontext c4, c5, cur;
	CUdeviceptr d, d1;
	CUstream s, s1;
	CUevent e;
	pthread_t t;

	pthread_create(&t, NULL, no_ctx_thread, main_ctx);
	pthread_join(t, NULL);

	/* destroying a context frees what it owns and makes its handles stale */
	OK(p_cuCtxCreate(&c4, NULL, 0, 0));
	OK(p_cuCtxGetCurrent(&cur));
	CHECK(cur == c4);
	OK(p_cuMemAlloc(&d, 1 << 20));
	OK(p_cuStreamCreate(&s, 0));
	OK(p_cuEventCreate(&e, 0));
#ifdef FK_KERNELS_DIR
	void *fb = read_file("test_kernels.fatbin", NULL);
	CUmodule m;
	OK(p_cuModuleLoadData(&m, fb));
	free(fb);
#endif
	CHECK(free_mem() < before);
	OK(p_cuCtxDestroy(c4));
	OK(p_cuCtxGetCurrent(&cur));
	CHECK(cur == main_ctx); /* c4 was popped */
	CHECK(free_mem() == before);
	CK(p_cuStreamSynchronize(s), CUDA_ERROR_INVALID_HANDLE);
	CK(p_cuEventRecord(e, NULL), CUDA_ERROR_INVALID_HANDLE);
	CK(p_cuMemFree(d), CUDA_ERROR_INVALID_VALUE);
#ifdef FK_KERNELS_DIR
	CK(p_cuModuleUnload(m), CUDA_ERROR_INVALID_HANDLE);
#endif
	CK(p_cuCtxDestroy(c4), CUDA_ERROR_INVALID_CONTEXT);
	CK(p_cuCtxSetCurrent(c4), CUDA_ERROR_INVALID_CONTEXT);

	/* handles and memory of one context are not valid in another */
	OK(p_cuStreamCreate(&s1, 0));
	OK(p_cuMemAlloc(&d1, 256));
	OK(p_cuCtxCreate(&c5, NULL, 0, 0));
	CK(p_cuStreamSynchronize(s1), CUDA_ERROR_INVALID_HANDLE);
	CK(p_cuMemsetD8(d1, 0, 1), CUDA_ERROR_INVALID_VALUE);
	CK(p_cuMemFree(d1), CUDA_ERROR_INVALID_VALUE);
	CK(p_cuMemcpy(d1, d1, 8), CUDA_ERROR_INVALID_VALUE); /* another context's memory */
	OK(p_cuCtxPopCurrent(&cur));
	CHECK(cur == c5);
	OK(p_cuCtxPushCurrent(c5));
	OK(p_cuCtxDestroy(c5));
	OK(p_cuStreamDestroy(s1));
	OK(p_cuMemFree(d1));

	/* primary context */
	CUcontext p1, p2;
	OK(p_cuDevicePrimaryCtxRetain(&p1, 0));
	OK(p_cuDevicePrimaryCtxRetain(&p2, 0));
	CHECK(p1 == p2);
	CK(p_cuCtxDestroy(p1), CUDA_ERROR_INVALID_CONTEXT);
	OK(p_cuDevicePrimaryCtxRelease(0));
	OK(p_cuCtxPushCurrent(p1));
	OK(p_cuMemAlloc(&d, 64));
	OK(p_cuCtxPopCurrent(NULL));
	OK(p_cuDevicePrimaryCtxRelease(0));
	CK(p_cuDevicePrimaryCtxRelease(0), CUDA_ERROR_INVALID_CONTEXT);
	CK(p_cuCtxPushCurrent(p1), CUDA_ERROR_INVALID_CONTEXT);
	CHECK(free_mem() == before);
}

/* ---- threads ---- */

static void *worker(void *arg)
{
	CUcontext ctx = arg, own = NULL;
	unsigned char buf[512], back[512];

	if (ctx)
		OK(p_cuCtxSetCurrent(ctx)); /* threads sharing one context */
	else
		OK(p_cuCtxCreate(&own, NULL, 0, 0));
	for (int i = 0; i < 300; i++) {
		CUdeviceptr d;
		CUstream s;
		CUevent e;
		memset(buf, i & 0xFF, sizeof buf);
		OK(p_cuMemAlloc(&d, sizeof buf));
		OK(p_cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
		OK(p_cuEventCreate(&e, 0));
		OK(p_cuMemcpyHtoDAsync(d, buf, sizeof buf, s));
		OK(p_cuEventRecord(e, s));
		OK(p_cuStreamWaitEvent(NULL, e, 0));
		OK(p_cuMemcpyDtoHAsync(back, d, sizeof back, s));
		OK(p_cuStreamSynchronize(s));
		CHECK(memcmp(buf, back, sizeof buf) == 0);
		OK(p_cuEventDestroy(e));
		OK(p_cuStreamDestroy(s));
		OK(p_cuMemFree(d));
	}
	if (own)
		OK(p_cuCtxDestroy(own));
	return NULL;
}

static void test_threads(CUcontext main_ctx)
{
	size_t before = free_mem();
	pthread_t t[8];

	for (int i = 0; i < 8; i++)
		pthread_create(&t[i], NULL, worker, i % 2 ? main_ctx : NULL);
	for (int i = 0; i < 8; i++)
		pthread_join(t[i], NULL);
	CHECK(free_mem() == before);
}

/* ---- FAKECUDA_DEVICES / FAKECUDA_MEM_BYTES (run with both set) ---- */

static void test_env(void)
{
	int n = 0;
	size_t total = 0, fr = 0;
	CUcontext c;
	CUdevice dev = -1;
	CUdeviceptr a, b;

	OK(p_cuInit(0));
	OK(p_cuDeviceGetCount(&n));
	CHECK(n == 3);
	OK(p_cuDeviceTotalMem(&total, 2));
	CHECK(total == 64u << 20);
	OK(p_cuCtxCreate(&c, NULL, 0, 2));
	OK(p_cuCtxGetDevice(&dev));
	CHECK(dev == 2);
	CK(p_cuMemAlloc(&a, (64u << 20) + 1), CUDA_ERROR_OUT_OF_MEMORY);
	OK(p_cuMemAlloc(&a, 64u << 20));
	CK(p_cuMemAlloc(&b, 1), CUDA_ERROR_OUT_OF_MEMORY);
	OK(p_cuMemGetInfo(&fr, &total));
	CHECK(fr == 0);
	OK(p_cuMemFree(a));
	OK(p_cuCtxDestroy(c));
	CK(p_cuCtxCreate(&c, NULL, 0, 3), CUDA_ERROR_INVALID_DEVICE);
}

int main(int argc, char **argv)
{
	CUcontext ctx;

	setvbuf(stdout, NULL, _IONBF, 0);
	lib = dlopen(FK_LIB, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "dlopen %s: %s\n", FK_LIB, dlerror());
		return 1;
	}
#define LOAD(f)                                                                  \
	if (!(p_##f = (__typeof__(p_##f))dlsym(lib, STR(f)))) {                      \
		fprintf(stderr, "missing export %s\n", STR(f));                    \
		failures++;                                                        \
	}
	API(LOAD)
	if (failures)
		return 1;

	if (argc > 1 && strcmp(argv[1], "--env") == 0) {
		if (!getenv("FAKECUDA_DEVICES") || !getenv("FAKECUDA_MEM_BYTES")) {
			fprintf(stderr, "--env wants FAKECUDA_DEVICES=3 FAKECUDA_MEM_BYTES=64m\n");
			return 2;
		}
		test_env();
	} else {
		snprintf(log_path, sizeof log_path, "/tmp/fakecuda-launch-%d.log", (int)getpid());
		setenv("FAKECUDA_LAUNCH_LOG", log_path, 1);
		test_exports();
		test_device();
		{
			CUdeviceptr d;
			CK(p_cuMemAlloc(&d, 16), CUDA_ERROR_INVALID_CONTEXT);
		}
		CK(p_cuCtxCreate(&ctx, NULL, 0x100, 0), CUDA_ERROR_INVALID_VALUE);
		OK(p_cuCtxCreate(&ctx, NULL, 0, 0));
		test_memory(ctx);
		test_handles();
#ifdef FK_KERNELS_DIR
		test_modules();
		test_launch();
		test_capture();
		test_fault(ctx);
#else
		printf("nvcc was not found: module, launch, capture and fault tests skipped\n");
#endif
		test_contexts(ctx);
		test_threads(ctx);
		OK(p_cuCtxDestroy(ctx));
		unlink(log_path);
	}
	printf("%d checks, %d failed\n", checks, failures);
	return failures != 0;
}
