/* The driver test double's exports, devices, memory (ranges, accounting,
 * copies, memsets), streams, events and handle staleness (see test_fakecuda.c). */
#include <dlfcn.h>
#include <elf.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fk_check.h"

/* ---- exports ---- */

/* Every exported function is a cu* function that cuGetProcAddress finds by its base
 * name (the exported name less a _vN suffix), and nothing else is exported. */
void test_exports(void)
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

void test_device(void)
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
		{ CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1 },
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

/* Whether writing one byte at p kills a child process with a signal. */
static int write_faults(uintptr_t p)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		signal(SIGSEGV, SIG_DFL); /* not a sanitizer's handler, which exits */
		*(volatile unsigned char *)p = 1;
		_exit(0);
	}
	int st = 0;
	return pid > 0 && waitpid(pid, &st, 0) == pid && WIFSIGNALED(st);
}

/* The line of /proc/self/maps whose range holds p, into line ("" if none). */
static void mapping_of(uintptr_t p, char *line, size_t cap)
{
	FILE *f = fopen("/proc/self/maps", "r");
	line[0] = 0;
	while (f && fgets(line, (int)cap, f)) {
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && p >= lo && p < hi) {
			fclose(f);
			return;
		}
	}
	line[0] = 0;
	if (f)
		fclose(f);
}

/* Device memory lies apart from the host heap (a pointer of one is never a
 * pointer of the other, as on a GPU), its end is followed by a guard page, and
 * freed memory is gone. */
void test_memory_placement(void)
{
	CUdeviceptr d = 0;
	char line[512];
	void *h = malloc(1000);

	OK(p_cuMemAlloc(&d, 1000));
	mapping_of((uintptr_t)d, line, sizeof line);
	CHECK(line[0] != 0);
	CHECK(strstr(line, "[heap]") == NULL && strchr(line, '/') == NULL); /* anonymous */
	char hline[512];
	mapping_of((uintptr_t)h, hline, sizeof hline);
	CHECK(strcmp(line, hline) != 0);
	CHECK((uintptr_t)d >= 0x7d0000000000ull && (uintptr_t)d < 0x7e0000000000ull); /* the hint */
	free(h);

	OK(p_cuMemsetD8(d, 0x5a, 1000));
	CHECK(((volatile unsigned char *)(uintptr_t)d)[999] == 0x5a);
	CHECK(!write_faults((uintptr_t)d + 1023));   /* the charged size is usable */
	CHECK(write_faults((uintptr_t)d + 1024));    /* the guard page after it */
	OK(p_cuMemFree(d));
	CHECK(write_faults((uintptr_t)d));           /* a use after free faults */
}

void test_memory(CUcontext ctx)
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

void test_handles(void)
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
