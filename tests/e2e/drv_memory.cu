/*
 * drv_memory.cu: the driver API's memory, copies and memsets, with driver calls
 * only (cuInit, primary context, cuMem*, cuPointer*, cuMemPool*).
 *
 * Runs unchanged on a GPU (the real libcuda.so.1) and through libremote.so as
 * libcuda.so.1 (LD_LIBRARY_PATH=<build>/frontend/driver) against remote-gpud.
 * Where the remote path is specified to differ from a local GPU (host memory
 * cannot be mapped into a GPU on another host; synchronous memory operations
 * are not forced to complete), the expectation depends on REMOTE_GPU.
 *
 * Output and exit status as rgdrv.h says: the same lines in every mode.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "rgdrv.h"

static CUcontext ctx;

#define HD(p) ((CUdeviceptr)(uintptr_t)(p))

/* ---- allocation ---- */

static void test_alloc(void)
{
	CUdeviceptr d = 0, d2 = 0;
	size_t f0, t0, f1, t1, f2;
	expect("cuMemAlloc(size 0)", cuMemAlloc(&d, 0), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemAlloc(NULL)", cuMemAlloc(NULL, 16), CUDA_ERROR_INVALID_VALUE);
	/* either may be NULL (measured on an H100) */
	expect("cuMemGetInfo(NULL free)", cuMemGetInfo(NULL, &t0), CUDA_SUCCESS);
	expect("cuMemGetInfo(NULL total)", cuMemGetInfo(&f0, NULL), CUDA_SUCCESS);
	CK(cuMemGetInfo(&f0, &t0));
	CK(cuMemAlloc(&d, 64 << 20));
	CK(cuMemGetInfo(&f1, &t1));
	check("cuMemGetInfo: 64 MiB allocated less free", t0 == t1 && f0 - f1 >= (64u << 20), "%zu -> %zu", f0, f1);
	CK(cuMemFree(d));
	CK(cuMemGetInfo(&f2, &t1));
	check("cuMemGetInfo: freed memory back", f2 >= f1 + (64u << 20), "%zu -> %zu", f1, f2);
	expect("cuMemFree(freed)", cuMemFree(d), CUDA_ERROR_INVALID_VALUE);
	CK(cuMemAlloc(&d, 1000));
	expect("cuMemFree(inside an allocation)", cuMemFree(d + 8), CUDA_ERROR_INVALID_VALUE);
	int stack = 0;
	expect("cuMemFree(host memory)", cuMemFree(HD(&stack)), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemFree(0)", cuMemFree(0), CUDA_SUCCESS);

	/* address ranges */
	CUdeviceptr base = 0;
	size_t size = 0;
	CK(cuMemGetAddressRange(&base, &size, d + 999));
	check("cuMemGetAddressRange(last byte)", base == d && size == 1000, "size %zu", size);
	CK(cuMemGetAddressRange(&base, NULL, d + 10));
	check("cuMemGetAddressRange(base only)", base == d);
	CK(cuMemGetAddressRange(NULL, &size, d));
	check("cuMemGetAddressRange(size only)", size == 1000, "size %zu", size);
	expect("cuMemGetAddressRange(NULL, NULL)", cuMemGetAddressRange(NULL, NULL, d), CUDA_SUCCESS);
	expect("cuMemGetAddressRange(past the end)", cuMemGetAddressRange(&base, &size, d + 1000 + 4096 * 1024),
	       CUDA_ERROR_NOT_FOUND);
	expect("cuMemGetAddressRange(host memory)", cuMemGetAddressRange(&base, &size, HD(&stack)),
	       CUDA_ERROR_NOT_FOUND);

	/* pitched */
	size_t pitch = 0;
	static const size_t widths[] = {1, 100, 511, 513, 4096, 5000};
	static const unsigned elems[] = {4, 8, 16};
	for (unsigned e = 0; e < 3; e++)
		for (unsigned w = 0; w < sizeof(widths) / sizeof(*widths); w++) {
			char label[96];
			snprintf(label, sizeof(label), "cuMemAllocPitch(width %zu, elem %u)", widths[w], elems[e]);
			CK(cuMemAllocPitch(&d2, &pitch, widths[w], 3, elems[e]));
			int attr = 0;
			CK(cuDeviceGetAttribute(&attr, CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT, 0));
			CK(cuMemGetAddressRange(&base, &size, d2));
			check(label, pitch >= widths[w] && pitch % (size_t)attr == 0 && pitch % elems[e] == 0 &&
					     base == d2 && size >= pitch * 3,
			      "pitch %zu size %zu", pitch, size);
			CK(cuMemFree(d2));
		}
	expect("cuMemAllocPitch(elem 3)", cuMemAllocPitch(&d2, &pitch, 64, 2, 3), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemAllocPitch(elem 2)", cuMemAllocPitch(&d2, &pitch, 64, 2, 2), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemAllocPitch(NULL pitch)", cuMemAllocPitch(&d2, NULL, 64, 2, 4), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemAllocPitch(NULL ptr)", cuMemAllocPitch(NULL, &pitch, 64, 2, 4), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemAllocPitch(width 0)", cuMemAllocPitch(&d2, &pitch, 0, 2, 4), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemAllocPitch(height 0)", cuMemAllocPitch(&d2, &pitch, 64, 0, 4), CUDA_ERROR_INVALID_VALUE);
	CK(cuMemFree(d));
}

/* ---- pinned and registered host memory ---- */

static void test_host(void)
{
	void *h = NULL, *hp = NULL, *hw = NULL, *hm = NULL;
	unsigned flags = 99;
	expect("cuMemAllocHost(size 0)", cuMemAllocHost(&h, 0), CUDA_SUCCESS); /* as on an H100 */
	expect("cuMemAllocHost(NULL)", cuMemAllocHost(NULL, 16), CUDA_ERROR_INVALID_VALUE);
	/* A GPU here maps all pinned memory (unified addressing): the flags read
	 * DEVICEMAP and never PORTABLE (measured on an H100); a remote one maps
	 * none. */
	unsigned mapped = remote ? 0 : CU_MEMHOSTALLOC_DEVICEMAP;
	CK(cuMemAllocHost(&h, 4096));
	CK(cuMemHostGetFlags(&flags, h));
	check("cuMemHostGetFlags(cuMemAllocHost)", flags == mapped, "flags %#x", flags);
	CK(cuMemHostAlloc(&hp, 4096, CU_MEMHOSTALLOC_PORTABLE));
	CK(cuMemHostGetFlags(&flags, hp));
	check("cuMemHostGetFlags(PORTABLE)", flags == mapped, "flags %#x", flags);
	CK(cuMemHostGetFlags(&flags, (char *)hp + 100));
	check("cuMemHostGetFlags(inside PORTABLE)", flags == mapped, "flags %#x", flags);
	CK(cuMemHostAlloc(&hw, 4096, CU_MEMHOSTALLOC_WRITECOMBINED));
	CK(cuMemHostGetFlags(&flags, hw));
	check("cuMemHostGetFlags(WRITECOMBINED)", flags == (mapped | CU_MEMHOSTALLOC_WRITECOMBINED), "flags %#x", flags);
	/* Mapped host memory: one address for host and device (remote: a managed
	 * allocation, coherent at the calls); a device write seen by the host after
	 * the copy's synchronisation. */
	CUresult r = cuMemHostAlloc(&hm, 4096, CU_MEMHOSTALLOC_DEVICEMAP);
	expect("cuMemHostAlloc(DEVICEMAP)", r, CUDA_SUCCESS);
	if (r == CUDA_SUCCESS) {
		CUdeviceptr hmd = 0;
		CK(cuMemHostGetDevicePointer(&hmd, hm, 0));
		check("cuMemHostGetDevicePointer(DEVICEMAP) is the host address", hmd == (CUdeviceptr)(uintptr_t)hm,
		      "%#llx vs %p", (unsigned long long)hmd, hm);
		((unsigned char *)hm)[0] = 7;
		CK(cuMemsetD8(hmd + 1, 0x5a, 4095));
		CK(cuCtxSynchronize());
		int okb = ((unsigned char *)hm)[0] == 7;
		for (int i = 1; i < 4096; i++)
			okb &= ((unsigned char *)hm)[i] == 0x5a;
		check("DEVICEMAP memory: host and device writes both seen", okb, "bytes differ");
		CK(cuMemHostGetFlags(&flags, hm));
		check("cuMemHostGetFlags(DEVICEMAP)", flags & CU_MEMHOSTALLOC_DEVICEMAP, "flags %#x", flags);
		CK(cuMemFreeHost(hm));
	}
	expect("cuMemHostAlloc(bad flag)", cuMemHostAlloc(&hm, 4096, 0x100), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemHostAlloc(NULL)", cuMemHostAlloc(NULL, 4096, 0), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemHostAlloc(size 0)", cuMemHostAlloc(&hm, 0, 0), CUDA_SUCCESS);
	expect("cuMemFreeHost(NULL)", cuMemFreeHost(NULL), CUDA_SUCCESS);
	expect("cuMemHostGetFlags(NULL flags)", cuMemHostGetFlags(NULL, h), CUDA_ERROR_INVALID_VALUE);
	int stack = 0;
	expect("cuMemHostGetFlags(unknown)", cuMemHostGetFlags(&flags, &stack), CUDA_ERROR_INVALID_VALUE);

	CUdeviceptr dp = 0;
	expect("cuMemHostGetDevicePointer(pinned)", cuMemHostGetDevicePointer(&dp, h, 0),
	       remote ? CUDA_ERROR_NOT_SUPPORTED : CUDA_SUCCESS);
	expect("cuMemHostGetDevicePointer(flags 1)", cuMemHostGetDevicePointer(&dp, h, 1), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemHostGetDevicePointer(NULL)", cuMemHostGetDevicePointer(NULL, h, 0), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemHostGetDevicePointer(unknown)", cuMemHostGetDevicePointer(&dp, &stack, 0),
	       CUDA_ERROR_INVALID_VALUE);

	/* registered */
	size_t n = 3 * 4096;
	void *m = NULL;
	if (posix_memalign(&m, 4096, n))
		exit(1);
	expect("cuMemHostRegister(NULL)", cuMemHostRegister(NULL, n, 0), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemHostRegister(size 0)", cuMemHostRegister(m, 0, 0), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemHostRegister(bad flag)", cuMemHostRegister(m, n, 0x100), CUDA_ERROR_INVALID_VALUE);
	CK(cuMemHostRegister(m, n, CU_MEMHOSTREGISTER_PORTABLE));
	flags = 99;
	CK(cuMemHostGetFlags(&flags, m));
	check("cuMemHostGetFlags(registered PORTABLE)", flags == (mapped | CU_MEMHOSTREGISTER_PORTABLE), "flags %#x",
	      flags);
	unsigned hmapped = 9;
	CK(cuPointerGetAttribute(&hmapped, CU_POINTER_ATTRIBUTE_MAPPED, HD((char *)m + 5)));
	unsigned htype = 0;
	CK(cuPointerGetAttribute(&htype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, HD((char *)m + 5)));
	check("registered: MAPPED, MEMORY_TYPE", hmapped == 1 && htype == CU_MEMORYTYPE_HOST, "%u %u", hmapped, htype);
	expect("cuMemHostRegister(again)", cuMemHostRegister(m, n, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
	expect("cuMemHostRegister(overlapping)", cuMemHostRegister((char *)m + 4096, 4096, 0),
	       CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
	expect("cuMemHostUnregister(inside)", cuMemHostUnregister((char *)m + 4096), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemFreeHost(registered)", cuMemFreeHost(m), CUDA_ERROR_INVALID_VALUE);
	CK(cuMemHostUnregister(m));
	expect("cuMemHostUnregister(again)", cuMemHostUnregister(m), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
	CK(cuMemHostRegister((char *)m + 4096, 4096, 0));
	expect("cuMemHostRegister(covering a registered range)", cuMemHostRegister(m, n, 0),
	       CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
	CK(cuMemHostUnregister((char *)m + 4096));
	r = cuMemHostRegister(m, n, CU_MEMHOSTREGISTER_DEVICEMAP);
	expect("cuMemHostRegister(DEVICEMAP)", r, remote ? CUDA_ERROR_NOT_SUPPORTED : CUDA_SUCCESS);
	if (r == CUDA_SUCCESS)
		CK(cuMemHostUnregister(m));
	free(m);

	expect("cuMemFreeHost(inside)", cuMemFreeHost((char *)h + 16), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemFreeHost(unknown)", cuMemFreeHost(&stack), CUDA_ERROR_INVALID_VALUE);
	CK(cuMemFreeHost(h));
	CK(cuMemFreeHost(hp));
	CK(cuMemFreeHost(hw));
	expect("cuMemFreeHost(freed)", cuMemFreeHost(h), CUDA_ERROR_INVALID_VALUE);
}

/* ---- pointer attributes ---- */

static void test_pointers(void)
{
	CUdeviceptr d = 0, d2 = 0;
	CK(cuMemAlloc(&d, 5000));
	CK(cuMemAlloc(&d2, 100));
	CUcontext c = NULL;
	unsigned type = 0, managed = 9, mapped = 9;
	CUdeviceptr dp = 0;
	void *hp = (void *)1;
	int ord = -1;
	unsigned long long id = 0, id2 = 0, id3 = 0;
	CUdeviceptr start = 0;
	size_t rsize = 0;
	CUmemoryPool pool = (CUmemoryPool)1;

	CK(cuPointerGetAttribute(&c, CU_POINTER_ATTRIBUTE_CONTEXT, d + 100));
	check("device: CONTEXT", c == ctx);
	CK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d + 100));
	check("device: MEMORY_TYPE", type == CU_MEMORYTYPE_DEVICE, "%u", type);
	CK(cuPointerGetAttribute(&dp, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, d + 100));
	check("device: DEVICE_POINTER", dp == d + 100);
	expect("device: HOST_POINTER", cuPointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER, d + 100),
	       CUDA_ERROR_INVALID_VALUE);
	CK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, d + 100));
	check("device: IS_MANAGED", managed == 0, "%u", managed);
	CK(cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, d + 100));
	check("device: DEVICE_ORDINAL", ord == 0, "%d", ord);
	CK(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, d + 100));
	check("device: RANGE_START_ADDR", start == d);
	CK(cuPointerGetAttribute(&rsize, CU_POINTER_ATTRIBUTE_RANGE_SIZE, d + 100));
	check("device: RANGE_SIZE", rsize >= 5000, "%zu", rsize);
	CK(cuPointerGetAttribute(&mapped, CU_POINTER_ATTRIBUTE_MAPPED, d + 100));
	check("device: MAPPED", mapped == 1, "%u", mapped);
	CK(cuPointerGetAttribute(&pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, d));
	check("device: MEMPOOL_HANDLE NULL", pool == NULL);
	CK(cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, d));
	CK(cuPointerGetAttribute(&id2, CU_POINTER_ATTRIBUTE_BUFFER_ID, d + 4999));
	CK(cuPointerGetAttribute(&id3, CU_POINTER_ATTRIBUTE_BUFFER_ID, d2));
	check("device: BUFFER_ID per allocation", id != 0 && id == id2 && id3 != id);
	unsigned sync = 9;
	CK(cuPointerGetAttribute(&sync, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, d));
	check("device: SYNC_MEMOPS 0", sync == 0, "%u", sync);
	unsigned zero = 0, one = 1;
	expect("cuPointerSetAttribute(SYNC_MEMOPS 0)", cuPointerSetAttribute(&zero, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, d),
	       CUDA_SUCCESS);
	/* Synchronous copies here may return before the device has them (one
	 * ordered stream of work on the server): the attribute cannot be set. */
	expect("cuPointerSetAttribute(SYNC_MEMOPS 1)", cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, d),
	       remote ? CUDA_ERROR_NOT_SUPPORTED : CUDA_SUCCESS);
	if (!remote)
		CK(cuPointerSetAttribute(&zero, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, d));
	expect("cuPointerSetAttribute(MAPPED)", cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_MAPPED, d),
	       CUDA_ERROR_INVALID_VALUE);
	int stack = 0;
	expect("cuPointerSetAttribute(unknown)",
	       cuPointerSetAttribute(&zero, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, HD(&stack)), CUDA_ERROR_INVALID_VALUE);

	/* a new allocation at a freed one's address gets a new id */
	CK(cuMemFree(d2));
	CK(cuMemAlloc(&d2, 100));
	unsigned long long id4 = 0;
	CK(cuPointerGetAttribute(&id4, CU_POINTER_ATTRIBUTE_BUFFER_ID, d2));
	check("device: BUFFER_ID not reused", id4 != id3 && id4 != id);

	/* pinned host memory */
	void *h = NULL;
	CK(cuMemAllocHost(&h, 8192));
	char *hi = (char *)h + 16;
	CK(cuPointerGetAttribute(&c, CU_POINTER_ATTRIBUTE_CONTEXT, HD(hi)));
	check("pinned: CONTEXT", c == ctx);
	CK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, HD(hi)));
	check("pinned: MEMORY_TYPE", type == CU_MEMORYTYPE_HOST, "%u", type);
	CK(cuPointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER, HD(hi)));
	check("pinned: HOST_POINTER", hp == hi);
	/* not mapped into the (remote) GPU */
	CUresult r = cuPointerGetAttribute(&dp, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, HD(hi));
	expect("pinned: DEVICE_POINTER", r, remote ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS);
	CK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, HD(hi)));
	check("pinned: IS_MANAGED", managed == 0, "%u", managed);
	CK(cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, HD(hi)));
	check("pinned: DEVICE_ORDINAL", ord == 0, "%d", ord);
	CK(cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, HD(hi)));
	check("pinned: BUFFER_ID", id != 0);
	CK(cuPointerGetAttribute(&mapped, CU_POINTER_ATTRIBUTE_MAPPED, HD(hi)));
	check("pinned: MAPPED", mapped == 1, "%u", mapped);
	CK(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, HD(hi)));
	CK(cuPointerGetAttribute(&rsize, CU_POINTER_ATTRIBUTE_RANGE_SIZE, HD(hi)));
	check("pinned: RANGE", start == HD(h) && rsize >= 8192, "size %zu", rsize);

	/* unknown memory: the singular form refuses it, the plural one answers
	 * "unregistered" */
	static const CUpointer_attribute all[] = {
		CU_POINTER_ATTRIBUTE_CONTEXT,          CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
		CU_POINTER_ATTRIBUTE_DEVICE_POINTER,   CU_POINTER_ATTRIBUTE_HOST_POINTER,
		CU_POINTER_ATTRIBUTE_BUFFER_ID,        CU_POINTER_ATTRIBUTE_IS_MANAGED,
		CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,   CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
		CU_POINTER_ATTRIBUTE_RANGE_SIZE,       CU_POINTER_ATTRIBUTE_MAPPED,
		CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE,   CU_POINTER_ATTRIBUTE_SYNC_MEMOPS,
	};
	static const char *names[] = {"CONTEXT",    "MEMORY_TYPE",      "DEVICE_POINTER", "HOST_POINTER",
				      "BUFFER_ID",  "IS_MANAGED",       "DEVICE_ORDINAL", "RANGE_START_ADDR",
				      "RANGE_SIZE", "MAPPED",           "MEMPOOL_HANDLE", "SYNC_MEMOPS"};
	const unsigned na = sizeof(all) / sizeof(*all);
	unsigned long long vals[sizeof(all) / sizeof(*all)];
	void *data[sizeof(all) / sizeof(*all)];
	char label[128];
	for (unsigned i = 0; i < na; i++) {
		unsigned long long v = 0;
		snprintf(label, sizeof(label), "unknown: cuPointerGetAttribute(%s)", names[i]);
		expect(label, cuPointerGetAttribute(&v, all[i], HD(&stack)), CUDA_ERROR_INVALID_VALUE);
	}
	for (unsigned i = 0; i < na; i++) {
		vals[i] = 0xAAAAAAAAAAAAAAAAull;
		data[i] = &vals[i];
	}
	expect("unknown: cuPointerGetAttributes", cuPointerGetAttributes(na, (CUpointer_attribute *)all, data,
									  HD(&stack)),
	       CUDA_SUCCESS);
	check("unknown: CONTEXT NULL", vals[0] == 0);
	check("unknown: MEMORY_TYPE 0", (unsigned)vals[1] == 0, "%u", (unsigned)vals[1]);
	check("unknown: DEVICE_POINTER 0", vals[2] == 0, "%#llx", vals[2]);
	check("unknown: HOST_POINTER the pointer", vals[3] == HD(&stack), "%#llx", vals[3]);
	check("unknown: BUFFER_ID 0", vals[4] == 0, "%#llx", vals[4]);
	check("unknown: IS_MANAGED 0", (unsigned)vals[5] == 0, "%u", (unsigned)vals[5]);
	check("unknown: DEVICE_ORDINAL -2", (int)vals[6] == -2, "%d", (int)vals[6]);
	/* left as they were (measured on an H100) */
	check("unknown: RANGE_START_ADDR untouched", vals[7] == 0xAAAAAAAAAAAAAAAAull, "%#llx", vals[7]);
	check("unknown: RANGE_SIZE untouched", vals[8] == 0xAAAAAAAAAAAAAAAAull, "%#llx", vals[8]);
	check("unknown: MAPPED 0", (unsigned)vals[9] == 0, "%u", (unsigned)vals[9]);
	check("unknown: MEMPOOL_HANDLE NULL", vals[10] == 0, "%#llx", vals[10]);
	check("unknown: SYNC_MEMOPS 0", (unsigned)vals[11] == 0, "%u", (unsigned)vals[11]);

	/* the plural form on device memory: HOST_POINTER reads NULL there */
	for (unsigned i = 0; i < na; i++)
		vals[i] = 0xAAAAAAAAAAAAAAAAull;
	expect("device: cuPointerGetAttributes", cuPointerGetAttributes(na, (CUpointer_attribute *)all, data, d + 8),
	       CUDA_SUCCESS);
	check("device: plural CONTEXT", vals[0] == (unsigned long long)(uintptr_t)ctx);
	check("device: plural MEMORY_TYPE", (unsigned)vals[1] == CU_MEMORYTYPE_DEVICE, "%u", (unsigned)vals[1]);
	check("device: plural DEVICE_POINTER", vals[2] == d + 8);
	check("device: plural HOST_POINTER NULL", vals[3] == 0, "%#llx", vals[3]);
	check("device: plural BUFFER_ID", vals[4] != 0 && vals[4] != 0xAAAAAAAAAAAAAAAAull);
	check("device: plural DEVICE_ORDINAL", (int)vals[6] == 0, "%d", (int)vals[6]);
	check("device: plural RANGE", vals[7] == d && vals[8] >= 5000);
	check("device: plural MAPPED", (unsigned)vals[9] == 1, "%u", (unsigned)vals[9]);

	/* attributes that say what cannot be done with the memory; the value
	 * types' sizes as a GPU writes them */
	unsigned long long raw = 0xAAAAAAAAAAAAAAAAull;
	CK(cuPointerGetAttribute(&raw, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, d));
	check("device: IS_LEGACY_CUDA_IPC_CAPABLE", raw == (remote ? 0xAAAAAAAA00000000ull : 0xAAAAAAAA00000001ull),
	      "%#llx", raw);
	raw = 0xAAAAAAAAAAAAAAAAull;
	CK(cuPointerGetAttribute(&raw, CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, d));
	check("device: ALLOWED_HANDLE_TYPES", raw == 0, "%#llx", raw);
	raw = 0xAAAAAAAAAAAAAAAAull;
	CK(cuPointerGetAttribute(&raw, CU_POINTER_ATTRIBUTE_ACCESS_FLAGS, d));
	check("device: ACCESS_FLAGS", raw == (0xAAAAAAAA00000000ull | CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE),
	      "%#llx", raw);
	raw = 0xAAAAAAAAAAAAAAAAull;
	CK(cuPointerGetAttribute(&raw, CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE, d));
	check("device: IS_GPU_DIRECT_RDMA_CAPABLE", raw == 0xAAAAAAAA00000000ull || raw == 0xAAAAAAAA00000001ull,
	      "%#llx", raw);
	/* a NULL slot (measured on an H100) */
	void *slots[2] = {&vals[0], NULL};
	CUpointer_attribute two[2] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_CONTEXT};
	vals[0] = 0;
	expect("cuPointerGetAttributes(a NULL slot)", cuPointerGetAttributes(2, two, slots, d),
	       CUDA_ERROR_INVALID_VALUE);

	/* bad arguments */
	expect("cuPointerGetAttribute(NULL data)", cuPointerGetAttribute(NULL, CU_POINTER_ATTRIBUTE_CONTEXT, d),
	       CUDA_ERROR_INVALID_VALUE);
	unsigned long long v = 0;
	expect("cuPointerGetAttribute(attribute 0)", cuPointerGetAttribute(&v, (CUpointer_attribute)0, d),
	       CUDA_ERROR_INVALID_VALUE);
	expect("cuPointerGetAttribute(attribute 999)", cuPointerGetAttribute(&v, (CUpointer_attribute)999, d),
	       CUDA_ERROR_INVALID_VALUE);
	expect("cuPointerGetAttributes(NULL attributes)", cuPointerGetAttributes(1, NULL, data, d),
	       CUDA_ERROR_INVALID_VALUE);
	expect("cuPointerGetAttributes(NULL data)", cuPointerGetAttributes(1, (CUpointer_attribute *)all, NULL, d),
	       CUDA_ERROR_INVALID_VALUE);

	/* managed */
	CUdeviceptr mg = 0;
	expect("cuMemAllocManaged(size 0)", cuMemAllocManaged(&mg, 0, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemAllocManaged(flags 0)", cuMemAllocManaged(&mg, 4096, 0), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemAllocManaged(NULL)", cuMemAllocManaged(NULL, 4096, CU_MEM_ATTACH_GLOBAL),
	       CUDA_ERROR_INVALID_VALUE);
	CK(cuMemAllocManaged(&mg, 4096, CU_MEM_ATTACH_GLOBAL));
	CK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, mg + 4));
	check("managed: IS_MANAGED", managed == 1, "%u", managed);
	CK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, mg + 4));
	check("managed: MEMORY_TYPE", type == CU_MEMORYTYPE_DEVICE, "%u", type);
	CK(cuPointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER, mg + 4));
	check("managed: HOST_POINTER", hp == (void *)(uintptr_t)(mg + 4));
	CK(cuPointerGetAttribute(&dp, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, mg + 4));
	check("managed: DEVICE_POINTER", dp == mg + 4);
	unsigned char pat[64], back[64];
	fill(pat, 64, 5);
	CK(cuMemcpyHtoD(mg + 64, pat, 64));
	CK(cuCtxSynchronize());
	check("managed: host reads what cuMemcpyHtoD wrote", memcmp((char *)(uintptr_t)mg + 64, pat, 64) == 0);
	memset((char *)(uintptr_t)mg + 256, 0x3C, 64);
	CK(cuMemcpyDtoH(back, mg + 256, 64));
	memset(pat, 0x3C, 64);
	check("managed: cuMemcpyDtoH reads what the host wrote", memcmp(back, pat, 64) == 0);
	CK(cuMemFree(mg));

	CK(cuMemFreeHost(h));
	CK(cuMemFree(d));
	CK(cuMemFree(d2));
}

/* ---- linear copies ---- */

/* n bytes of got as of want, the byte after them untouched (0xCD). */
static void check_copied(size_t n, const char *what, const unsigned char *got, const unsigned char *want)
{
	char label[128];
	snprintf(label, sizeof(label), "n=%zu %s", n, what);
	long d = diff(got, want, n);
	check(label, d < 0 && got[n] == 0xCD, "first difference at %ld, the byte after %#x", d, got[n]);
}

static void copies_of(size_t n)
{
	char label[128];
	size_t cap = n + 64;
	CUdeviceptr d1, d2;
	CK(cuMemAlloc(&d1, cap));
	CK(cuMemAlloc(&d2, cap));
	unsigned char *src = (unsigned char *)malloc(cap), *dst = (unsigned char *)malloc(cap);
	unsigned char *want = (unsigned char *)malloc(cap), *hsrc = (unsigned char *)malloc(cap);
	unsigned char *pin_src, *pin_dst;
	CK(cuMemAllocHost((void **)&pin_src, cap));
	CK(cuMemAllocHost((void **)&pin_dst, cap));
	fill(src, cap, (unsigned)n);
	fill(pin_src, cap, (unsigned)n + 1);
	CK(cuMemsetD8(d1, 0, cap));
	CK(cuMemsetD8(d2, 0, cap));

	/* pageable H2D at an offset, the whole allocation back */
	CK(cuMemcpyHtoD(d1 + 3, src, n));
	memset(dst, 0xCD, cap);
	CK(cuMemcpyDtoH(dst, d1, cap));
	memset(want, 0, cap);
	memcpy(want + 3, src, n);
	snprintf(label, sizeof(label), "n=%zu cuMemcpyHtoD/DtoH pageable", n);
	check_bytes(label, dst, want, cap);

	/* D2D, D2H into pinned memory */
	CK(cuMemcpyDtoD(d2 + 5, d1 + 3, n));
	memset(pin_dst, 0xCD, cap);
	CK(cuMemcpyDtoH(pin_dst, d2 + 5, n));
	check_copied(n, "cuMemcpyDtoD, DtoH pinned", pin_dst, src);

	/* async from pinned, async D2H into pageable memory */
	CK(cuMemcpyHtoDAsync(d1, pin_src, n, 0));
	memset(dst, 0xCD, cap);
	CK(cuMemcpyDtoHAsync(dst, d1, n, 0));
	CK(cuStreamSynchronize(0));
	check_copied(n, "cuMemcpyHtoDAsync pinned, DtoHAsync pageable", dst, pin_src);

	CK(cuMemcpyDtoDAsync(d2, d1, n, CU_STREAM_PER_THREAD));
	memset(pin_dst, 0xCD, cap);
	CK(cuMemcpyDtoHAsync(pin_dst, d2, n, CU_STREAM_PER_THREAD));
	CK(cuCtxSynchronize());
	check_copied(n, "cuMemcpyDtoDAsync, DtoHAsync pinned", pin_dst, pin_src);

	/* unified addressing: the direction from the pointers */
	fill(hsrc, cap, (unsigned)n + 2);
	CK(cuMemcpy(d1 + 1, HD(hsrc), n));
	CK(cuMemcpy(d2, d1 + 1, n));
	memset(dst, 0xCD, cap);
	CK(cuMemcpy(HD(dst), d2, n));
	check_copied(n, "cuMemcpy H2D, D2D, D2H", dst, hsrc);
	memset(dst, 0xCD, cap);
	CK(cuMemcpy(HD(dst), HD(src), n));
	check_copied(n, "cuMemcpy H2H", dst, src);

	CK(cuMemcpyAsync(d2, HD(pin_src), n, 0));
	CK(cuMemcpyAsync(d1, d2, n, 0));
	memset(dst, 0xCD, cap);
	CK(cuMemcpyAsync(HD(dst), d1, n, 0));
	CK(cuCtxSynchronize());
	check_copied(n, "cuMemcpyAsync H2D, D2D, D2H", dst, pin_src);

	/* same-context peer copies */
	CK(cuMemcpyPeer(d2 + 1, ctx, d1, ctx, n));
	CK(cuMemcpyPeerAsync(d1 + 2, ctx, d2 + 1, ctx, n, 0));
	memset(dst, 0xCD, cap);
	CK(cuMemcpyDtoH(dst, d1 + 2, n));
	check_copied(n, "cuMemcpyPeer, PeerAsync", dst, pin_src);

	CK(cuMemFreeHost(pin_src));
	CK(cuMemFreeHost(pin_dst));
	CK(cuMemFree(d1));
	CK(cuMemFree(d2));
	free(src);
	free(dst);
	free(want);
	free(hsrc);
}

static void test_copies(void)
{
	static const size_t sizes[] = {0, 1, 7, 4093, (4u << 20) + 13, (9u << 20) + 1};
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(*sizes); i++)
		copies_of(sizes[i]);

	CUdeviceptr d;
	CK(cuMemAlloc(&d, 256));
	unsigned char buf[512];
	int stack = 0;
	expect("cuMemcpyHtoD(NULL src)", cuMemcpyHtoD(d, NULL, 16), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemcpyHtoD(0 dst)", cuMemcpyHtoD(0, buf, 16), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemcpyHtoD(past the end)", cuMemcpyHtoD(d + 200, buf, 57), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemcpyDtoH(past the end)", cuMemcpyDtoH(buf, d, 257), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemcpyDtoH(NULL dst)", cuMemcpyDtoH(NULL, d, 16), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemcpyDtoH(host src)", cuMemcpyDtoH(buf, HD(&stack), 4), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemcpyDtoD(past the end)", cuMemcpyDtoD(d, d + 128, 129), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemcpyDtoHAsync(past the end)", cuMemcpyDtoHAsync(buf, d + 1, 256, 0), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemcpyHtoDAsync(past the end)", cuMemcpyHtoDAsync(d + 1, buf, 256, 0), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemcpy(past the end)", cuMemcpy(d + 1, HD(buf), 256), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemcpyHtoD(size 0)", cuMemcpyHtoD(d, buf, 0), CUDA_SUCCESS);
	/* NULL: the current context (measured on an H100) */
	expect("cuMemcpyPeer(NULL context)", cuMemcpyPeer(d, NULL, d + 128, ctx, 16), CUDA_SUCCESS);
	CK(cuMemFree(d));
}

/* ---- 2D and 3D copies ---- */

static void test_2d(void)
{
	const size_t W = 37, H = 5, rows = 8, spitch = 50, dpitch2 = 45;
	CUdeviceptr dp, dq;
	size_t pitch, qpitch;
	CK(cuMemAllocPitch(&dp, &pitch, 64, rows, 4));
	CK(cuMemAllocPitch(&dq, &qpitch, 64, rows, 4));
	CK(cuMemsetD8(dp, 0, pitch * rows));
	CK(cuMemsetD8(dq, 0, qpitch * rows));
	unsigned char *hs = (unsigned char *)malloc(spitch * rows), *img = (unsigned char *)malloc(pitch * rows);
	unsigned char *want = (unsigned char *)malloc(pitch * rows);
	fill(hs, spitch * rows, 77);

	CUDA_MEMCPY2D c = copy2d(at(on_host(hs, spitch), 2, 1), at(on_device(dp, pitch), 5, 2), W, H);
	CK(cuMemcpy2D(&c));
	CK(cuMemcpyDtoH(img, dp, pitch * rows));
	memset(want, 0, pitch * rows);
	for (size_t y = 0; y < H; y++)
		memcpy(want + (2 + y) * pitch + 5, hs + (1 + y) * spitch + 2, W);
	check_bytes("cuMemcpy2D host -> device", img, want, pitch * rows);

	/* device -> host, another pitch, offsets on both sides */
	unsigned char *ho = (unsigned char *)malloc(dpitch2 * rows), *hwant = (unsigned char *)malloc(dpitch2 * rows);
	memset(ho, 0xEE, dpitch2 * rows);
	memset(hwant, 0xEE, dpitch2 * rows);
	c = copy2d(at(on_device(dp, pitch), 5, 2), at(on_host(ho, dpitch2), 4, 1), W, H);
	CK(cuMemcpy2D(&c));
	for (size_t y = 0; y < H; y++)
		memcpy(hwant + (1 + y) * dpitch2 + 4, hs + (1 + y) * spitch + 2, W);
	check_bytes("cuMemcpy2D device -> host", ho, hwant, dpitch2 * rows);

	/* device -> device, async */
	c = copy2d(at(on_device(dp, pitch), 5, 2), on_device(dq, qpitch), W, H);
	CK(cuMemcpy2DAsync(&c, 0));
	CK(cuCtxSynchronize());
	unsigned char *qimg = (unsigned char *)malloc(qpitch * rows), *qwant = (unsigned char *)calloc(qpitch, rows);
	CK(cuMemcpyDtoH(qimg, dq, qpitch * rows));
	for (size_t y = 0; y < H; y++)
		memcpy(qwant + y * qpitch, hs + (1 + y) * spitch + 2, W);
	check_bytes("cuMemcpy2DAsync device -> device", qimg, qwant, qpitch * rows);

	/* unified on both sides: host -> device, then device -> host */
	unsigned char *hs2 = (unsigned char *)malloc(spitch * rows);
	fill(hs2, spitch * rows, 78);
	c = copy2d(on_unified(HD(hs2), spitch), at(on_unified(dq, qpitch), 0, 3), W, H);
	CK(cuMemcpy2DUnaligned(&c));
	memset(ho, 0xEE, dpitch2 * rows);
	c = copy2d(at(on_unified(dq, qpitch), 0, 3), on_unified(HD(ho), dpitch2), W, H);
	CK(cuMemcpy2DAsync(&c, 0));
	CK(cuStreamSynchronize(0));
	memset(hwant, 0xEE, dpitch2 * rows);
	for (size_t y = 0; y < H; y++)
		memcpy(hwant + y * dpitch2, hs2 + y * spitch, W);
	check_bytes("cuMemcpy2DUnaligned/2DAsync unified", ho, hwant, dpitch2 * rows);

	/* host -> host */
	memset(ho, 0xEE, dpitch2 * rows);
	c = copy2d(on_host(hs, spitch), on_host(ho, dpitch2), W, H);
	CK(cuMemcpy2D(&c));
	memset(hwant, 0xEE, dpitch2 * rows);
	for (size_t y = 0; y < H; y++)
		memcpy(hwant + y * dpitch2, hs + y * spitch, W);
	check_bytes("cuMemcpy2D host -> host", ho, hwant, dpitch2 * rows);

	/* bad arguments */
	expect("cuMemcpy2D(NULL)", cuMemcpy2D(NULL), CUDA_ERROR_INVALID_VALUE);
	c = copy2d(on_host(hs, spitch), on_device(dp, pitch), W, H);
	CUDA_MEMCPY2D b = c;
	b.srcXInBytes = spitch - W + 1;
	expect("cuMemcpy2D(srcX + width > srcPitch)", cuMemcpy2D(&b), CUDA_ERROR_INVALID_VALUE);
	b = c;
	b.dstXInBytes = pitch - W + 1;
	expect("cuMemcpy2D(dstX + width > dstPitch)", cuMemcpy2D(&b), CUDA_ERROR_INVALID_VALUE);
	b = c;
	b.dstMemoryType = (CUmemorytype)0;
	expect("cuMemcpy2D(memory type 0)", cuMemcpy2D(&b), CUDA_ERROR_INVALID_VALUE);
	b = c;
	b.srcMemoryType = (CUmemorytype)7;
	expect("cuMemcpy2D(memory type 7)", cuMemcpy2D(&b), CUDA_ERROR_INVALID_VALUE);
	b = c;
	b.dstY = rows - H + 1;
	expect("cuMemcpy2D(past the allocation)", cuMemcpy2D(&b), CUDA_ERROR_INVALID_VALUE);
	b = c;
	b.WidthInBytes = 0;
	expect("cuMemcpy2D(width 0)", cuMemcpy2D(&b), CUDA_SUCCESS);
	b = c;
	b.Height = 0;
	expect("cuMemcpy2D(height 0)", cuMemcpy2D(&b), CUDA_SUCCESS);
	b = c;
	b.Height = 1;
	b.srcPitch = 0;
	b.dstPitch = 0;
	expect("cuMemcpy2D(one row, pitches 0)", cuMemcpy2D(&b), CUDA_SUCCESS); /* as on an H100 */

	CK(cuMemFree(dp));
	CK(cuMemFree(dq));
	free(hs), free(hs2), free(img), free(want), free(ho), free(hwant), free(qimg), free(qwant);
}

/* Arrays on one side: x in bytes, in whole elements. */
static void test_array(void)
{
	CUDA_ARRAY_DESCRIPTOR ad;
	memset(&ad, 0, sizeof(ad));
	ad.Width = 16;
	ad.Height = 8;
	ad.Format = CU_AD_FORMAT_FLOAT;
	ad.NumChannels = 1;
	CUarray arr;
	CK(cuArrayCreate(&arr, &ad));
	float h[8][16], back[8][16];
	for (int y = 0; y < 8; y++)
		for (int x = 0; x < 16; x++)
			h[y][x] = (float)(y * 100 + x);
	CUDA_MEMCPY2D c = copy2d(on_host(h, sizeof(h[0])), on_array(arr), sizeof(h[0]), 8);
	CK(cuMemcpy2D(&c));

	/* a box of 3 x 4 from (2, 1) into device memory, pitch 20, x 4 */
	CUdeviceptr dv;
	CK(cuMemAlloc(&dv, 1024));
	CK(cuMemsetD8(dv, 0, 1024));
	c = copy2d(at(on_array(arr), 8, 1), at(on_device(dv, 20), 4), 12, 4);
	CK(cuMemcpy2DAsync(&c, 0));
	unsigned char out[80];
	CK(cuMemcpyDtoH(out, dv, sizeof(out)));
	int ok = 1;
	for (int y = 0; y < 4; y++)
		for (int x = 0; x < 3; x++) {
			float v;
			memcpy(&v, out + y * 20 + 4 + 4 * x, 4);
			ok &= v == (float)((1 + y) * 100 + 2 + x);
		}
	check("cuMemcpy2D host -> array -> device", ok);
	/* cuda.h asks for whole elements; an H100 copies any bytes. Refused here. */
	c.srcXInBytes = 6;
	expect("cuMemcpy2D(array x not in whole elements)", cuMemcpy2D(&c),
	       remote ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS);

	CUDA_MEMCPY3D m = copy3d(on_array(arr), on_host(back, sizeof(back[0]), 8), sizeof(back[0]), 8, 1);
	memset(back, 0, sizeof(back));
	CK(cuMemcpy3D(&m));
	check("cuMemcpy3D array -> host", memcmp(back, h, sizeof(h)) == 0);
	m.WidthInBytes += 4;
	expect("cuMemcpy3D(wider than the array)", cuMemcpy3D(&m), CUDA_ERROR_INVALID_VALUE);
	CK(cuMemFree(dv));
	CK(cuArrayDestroy(arr));
}

static void test_3d(void)
{
	/* device box: pitch 16, 6 rows a slice, 4 slices; host: pitch 12, 5 rows a slice, 4 slices */
	const size_t dpitch = 16, dh = 6, dd = 4, hpitch = 12, hh = 5, hd = 4, W = 10, H = 3, D = 2;
	CUdeviceptr dv, dv2;
	CK(cuMemAlloc(&dv, dpitch * dh * dd));
	CK(cuMemAlloc(&dv2, dpitch * dh * dd));
	CK(cuMemsetD8(dv, 0, dpitch * dh * dd));
	CK(cuMemsetD8(dv2, 0, dpitch * dh * dd));
	unsigned char hs[12 * 5 * 4], img[16 * 6 * 4], want[16 * 6 * 4];
	fill(hs, sizeof(hs), 33);

	CUDA_MEMCPY3D m = copy3d(at(on_host(hs, hpitch, hh), 1, 1, 1), at(on_device(dv, dpitch, dh), 3, 2, 1), W, H, D);
	CK(cuMemcpy3D(&m));
	CK(cuMemcpyDtoH(img, dv, sizeof(img)));
	memset(want, 0, sizeof(want));
	for (size_t z = 0; z < D; z++)
		for (size_t y = 0; y < H; y++)
			memcpy(want + ((1 + z) * dh + 2 + y) * dpitch + 3, hs + ((1 + z) * hh + 1 + y) * hpitch + 1, W);
	check_bytes("cuMemcpy3D host -> device", img, want, sizeof(img));

	/* device -> device (async), then device -> host */
	CUDA_MEMCPY3D m2 = copy3d(at(on_device(dv, dpitch, dh), 3, 2, 1), on_unified(dv2, dpitch, dh), W, H, D);
	CK(cuMemcpy3DAsync(&m2, 0));
	unsigned char ho[12 * 5 * 4], hwant[12 * 5 * 4];
	memset(ho, 0xEE, sizeof(ho));
	m = copy3d(on_device(dv2, dpitch, dh), at(on_host(ho, hpitch, hh), 0, 0, 2), W, H, D);
	CK(cuMemcpy3D(&m));
	memset(hwant, 0xEE, sizeof(hwant));
	for (size_t z = 0; z < D; z++)
		for (size_t y = 0; y < H; y++)
			memcpy(hwant + ((2 + z) * hh + y) * hpitch, hs + ((1 + z) * hh + 1 + y) * hpitch + 1, W);
	check_bytes("cuMemcpy3DAsync device -> device, cuMemcpy3D device -> host", ho, hwant, sizeof(ho));
	(void)hd;

	/* one slice: heights may be 0 */
	m = copy3d(on_host(hs, hpitch), on_device(dv, dpitch), W, H, 1);
	expect("cuMemcpy3D(one slice, heights 0)", cuMemcpy3D(&m), CUDA_SUCCESS);

	expect("cuMemcpy3D(NULL)", cuMemcpy3D(NULL), CUDA_ERROR_INVALID_VALUE);
	CUDA_MEMCPY3D b = m;
	/* ignored for linear memory (measured on an H100) */
	b.srcLOD = 1;
	expect("cuMemcpy3D(srcLOD 1)", cuMemcpy3D(&b), CUDA_SUCCESS);
	b = m;
	b.reserved1 = &b;
	expect("cuMemcpy3D(reserved1 set)", cuMemcpy3D(&b), CUDA_SUCCESS);
	b = m;
	b.Depth = 2;
	b.srcHeight = hh;
	b.dstHeight = H - 1;
	expect("cuMemcpy3D(dstHeight < Height)", cuMemcpy3D(&b), CUDA_ERROR_INVALID_VALUE);
	b = m;
	b.Depth = dd + 1;
	b.srcHeight = hh;
	b.dstHeight = dh;
	expect("cuMemcpy3D(past the allocation)", cuMemcpy3D(&b), CUDA_ERROR_INVALID_VALUE);
	CK(cuMemFree(dv));
	CK(cuMemFree(dv2));
}

/* ---- memsets ---- */

/* What a memset leaves at p: h rows (pitch apart) of w elements of elem bytes, value v (little endian). */
static void want_set(unsigned char *p, size_t pitch, unsigned elem, unsigned v, size_t w, size_t h)
{
	for (size_t y = 0; y < h; y++)
		for (size_t x = 0; x < w; x++)
			memcpy(p + y * pitch + x * elem, &v, elem);
}

static void test_memsets(void)
{
	const size_t N = 8192;
	CUdeviceptr m;
	CK(cuMemAlloc(&m, N));
	unsigned char *img = (unsigned char *)malloc(N), *want = (unsigned char *)malloc(N);
	CK(cuMemsetD8(m, 0x11, N));
	memset(want, 0x11, N);
	CK(cuMemsetD8(m + 1, 0xAB, 1001));
	want_set(want + 1, 0, 1, 0xAB, 1001, 1);
	CK(cuMemsetD16(m + 1100, 0xBEEF, 333));
	want_set(want + 1100, 0, 2, 0xBEEF, 333, 1);
	CK(cuMemsetD32(m + 2000, 0xDEADBEEF, 401));
	want_set(want + 2000, 0, 4, 0xDEADBEEF, 401, 1);
	CK(cuMemsetD8Async(m + 4001, 0x5C, 77, 0));
	want_set(want + 4001, 0, 1, 0x5C, 77, 1);
	CK(cuMemsetD16Async(m + 4200, 0x0102, 99, 0));
	want_set(want + 4200, 0, 2, 0x0102, 99, 1);
	CK(cuMemsetD32Async(m + 4600, 0xA0B0C0D0, 501, CU_STREAM_PER_THREAD));
	want_set(want + 4600, 0, 4, 0xA0B0C0D0, 501, 1);
	CK(cuCtxSynchronize());
	CK(cuMemcpyDtoH(img, m, N));
	check_bytes("cuMemsetD8/D16/D32 (+Async) exact", img, want, N);

	expect("cuMemsetD16(odd address)", cuMemsetD16(m + 1, 0, 4), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemsetD32(address 2 mod 4)", cuMemsetD32(m + 2, 0, 4), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemsetD8(past the end)", cuMemsetD8(m, 0, N + 1), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemsetD32(past the end)", cuMemsetD32(m + 4, 0, N / 4), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemsetD8(0)", cuMemsetD8(0, 0, 4), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemsetD8(count 0)", cuMemsetD8(m, 0, 0), CUDA_SUCCESS);
	CK(cuMemcpyDtoH(img, m, N));
	check_bytes("refused memsets changed nothing", img, want, N);

	/* larger than one chunk */
	const size_t big = (5u << 20) + 12;
	CUdeviceptr bm;
	CK(cuMemAlloc(&bm, big));
	CK(cuMemsetD8(bm, 0x77, big));
	CK(cuMemsetD32(bm + 4, 0x01020304, (big - 8) / 4));
	unsigned char *bimg = (unsigned char *)malloc(big), *bwant = (unsigned char *)malloc(big);
	memset(bwant, 0x77, big);
	want_set(bwant + 4, 0, 4, 0x01020304, (big - 8) / 4, 1);
	CK(cuMemcpyDtoH(bimg, bm, big));
	check_bytes("cuMemsetD32 5 MiB", bimg, bwant, big);
	CK(cuMemFree(bm));
	free(bimg), free(bwant);

	/* 2D */
	CUdeviceptr p;
	size_t pitch;
	const size_t rows = 12;
	CK(cuMemAllocPitch(&p, &pitch, 100, rows, 4));
	unsigned char *pimg = (unsigned char *)malloc(pitch * rows), *pwant = (unsigned char *)malloc(pitch * rows);
	CK(cuMemsetD8(p, 0x22, pitch * rows));
	memset(pwant, 0x22, pitch * rows);
	CK(cuMemsetD2D8(p + pitch + 3, pitch, 0x5A, 40, 3));
	want_set(pwant + pitch + 3, pitch, 1, 0x5A, 40, 3);
	CK(cuMemsetD2D16(p + 4 * pitch + 2, pitch, 0x1234, 20, 2));
	want_set(pwant + 4 * pitch + 2, pitch, 2, 0x1234, 20, 2);
	CK(cuMemsetD2D32(p + 6 * pitch + 8, pitch, 0xCAFEF00D, 17, 2));
	want_set(pwant + 6 * pitch + 8, pitch, 4, 0xCAFEF00D, 17, 2);
	CK(cuMemsetD2D8Async(p + 8 * pitch, pitch, 0x01, 1, 1, 0));
	want_set(pwant + 8 * pitch, pitch, 1, 0x01, 1, 1);
	CK(cuMemsetD2D16Async(p + 9 * pitch, pitch, 0xFFEE, 50, 1, 0));
	want_set(pwant + 9 * pitch, pitch, 2, 0xFFEE, 50, 1);
	CK(cuMemsetD2D32Async(p + 10 * pitch + 4, pitch, 0x89ABCDEF, 24, 2, 0));
	want_set(pwant + 10 * pitch + 4, pitch, 4, 0x89ABCDEF, 24, 2);
	CK(cuStreamSynchronize(0));
	CK(cuMemcpyDtoH(pimg, p, pitch * rows));
	check_bytes("cuMemsetD2D8/16/32 (+Async) exact", pimg, pwant, pitch * rows);

	expect("cuMemsetD2D8(width > pitch)", cuMemsetD2D8(p, 64, 0, 65, 2), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemsetD2D16(2 * width > pitch)", cuMemsetD2D16(p, 64, 0, 33, 2), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemsetD2D32(4 * width > pitch)", cuMemsetD2D32(p, 64, 0, 17, 2), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemsetD2D16(odd address)", cuMemsetD2D16(p + 1, pitch, 0, 4, 2), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemsetD2D32(address 2 mod 4)", cuMemsetD2D32(p + 2, pitch, 0, 4, 2), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemsetD2D8(past the allocation)", cuMemsetD2D8(p, pitch, 0, 4, rows + 1), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemsetD2D8(height 0)", cuMemsetD2D8(p, pitch, 0, 4, 0), CUDA_SUCCESS);
	CK(cuMemcpyDtoH(pimg, p, pitch * rows));
	check_bytes("refused 2D memsets changed nothing", pimg, pwant, pitch * rows);
	CK(cuMemFree(p));
	CK(cuMemFree(m));
	free(img), free(want), free(pimg), free(pwant);
}

/* ---- memory pools ---- */

static void test_pools(void)
{
	CUmemoryPool def = NULL, cur = NULL, pool = NULL, got = NULL;
	CK(cuDeviceGetDefaultMemPool(&def, 0));
	check("cuDeviceGetDefaultMemPool", def != NULL);
	expect("cuDeviceGetDefaultMemPool(device 99)", cuDeviceGetDefaultMemPool(&cur, 99), CUDA_ERROR_INVALID_DEVICE);
	expect("cuDeviceGetDefaultMemPool(NULL)", cuDeviceGetDefaultMemPool(NULL, 0), CUDA_ERROR_INVALID_VALUE);
	CK(cuDeviceGetMemPool(&cur, 0));
	check("cuDeviceGetMemPool: the default", cur == def);

	CUmemPoolProps props;
	memset(&props, 0, sizeof(props));
	props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	props.location.id = 0;
	expect("cuMemPoolCreate(NULL props)", cuMemPoolCreate(&pool, NULL), CUDA_ERROR_INVALID_VALUE);
	CK(cuMemPoolCreate(&pool, &props));
	cuuint64_t thr = ~0ull;
	CK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr));
	thr = 0;
	CK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr));
	check("cuMemPoolGetAttribute(RELEASE_THRESHOLD)", thr == ~0ull);
	expect("cuMemPoolGetAttribute(NULL)", cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, NULL),
	       CUDA_ERROR_INVALID_VALUE);

	CUdeviceptr a = 0, b = 0, c = 0;
	expect("cuMemAllocFromPoolAsync(NULL)", cuMemAllocFromPoolAsync(NULL, 4096, pool, 0), CUDA_ERROR_INVALID_VALUE);
	CK(cuMemAllocFromPoolAsync(&a, 1 << 20, pool, 0));
	CK(cuPointerGetAttribute(&got, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, a + 5));
	check("pool allocation: MEMPOOL_HANDLE", got == pool);
	CUcontext pc = (CUcontext)1;
	int pord = -1;
	CK(cuPointerGetAttribute(&pc, CU_POINTER_ATTRIBUTE_CONTEXT, a));
	CK(cuPointerGetAttribute(&pord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, a));
	check("pool allocation: no CONTEXT, DEVICE_ORDINAL 0", pc == NULL && pord == 0);
	CK(cuMemAllocAsync(&b, 4096, 0));
	CK(cuPointerGetAttribute(&got, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, b));
	check("cuMemAllocAsync: MEMPOOL_HANDLE the default", got == def);
	unsigned char pat[256], back[256];
	fill(pat, sizeof(pat), 9);
	CK(cuMemcpyHtoDAsync(a + 1000, pat, sizeof(pat), 0));
	CK(cuMemcpyDtoDAsync(b, a + 1000, sizeof(pat), 0));
	CK(cuMemcpyDtoHAsync(back, b, sizeof(pat), 0));
	CK(cuStreamSynchronize(0));
	check("pool allocations copy", memcmp(pat, back, sizeof(pat)) == 0);

	CK(cuDeviceSetMemPool(0, pool));
	CK(cuDeviceGetMemPool(&cur, 0));
	check("cuDeviceSetMemPool/GetMemPool", cur == pool);
	CK(cuMemAllocAsync(&c, 4096, 0));
	CK(cuPointerGetAttribute(&got, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, c));
	check("cuMemAllocAsync from the current pool: MEMPOOL_HANDLE", got == pool);
	CK(cuDeviceSetMemPool(0, def));

	cuuint64_t used = 0, reserved = 0;
	CK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used));
	check("pool USED_MEM_CURRENT", used >= (1u << 20) + 4096, "%llu", (unsigned long long)used);
	CK(cuMemFreeAsync(a, 0));
	CK(cuMemFreeAsync(c, 0));
	CK(cuMemFreeAsync(b, 0));
	expect("cuMemFreeAsync(freed)", cuMemFreeAsync(b, 0), CUDA_ERROR_INVALID_VALUE);
	CK(cuStreamSynchronize(0));
	CK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used));
	CK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved));
	check("freed: nothing used, memory kept", used == 0 && reserved >= (1u << 20), "used %llu reserved %llu",
	      (unsigned long long)used, (unsigned long long)reserved);
	CK(cuMemPoolTrimTo(pool, 0));
	CK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved));
	check("cuMemPoolTrimTo(0): nothing kept", reserved == 0, "reserved %llu", (unsigned long long)reserved);

	CUmemAccessDesc acc;
	memset(&acc, 0, sizeof(acc));
	acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	acc.location.id = 0;
	acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	expect("cuMemPoolSetAccess(own device)", cuMemPoolSetAccess(pool, &acc, 1), CUDA_SUCCESS);
	CUmemAccess_flags af = CU_MEM_ACCESS_FLAGS_PROT_NONE;
	CK(cuMemPoolGetAccess(&af, pool, &acc.location));
	check("cuMemPoolGetAccess(own device)", af == CU_MEM_ACCESS_FLAGS_PROT_READWRITE, "%d", (int)af);
	expect("cuMemAllocAsync(NULL)", cuMemAllocAsync(NULL, 16, 0), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemAllocAsync(size 0)", cuMemAllocAsync(&a, 0, 0), CUDA_SUCCESS); /* as on an H100 */
	expect("cuMemFreeAsync(0)", cuMemFreeAsync(0, 0), CUDA_SUCCESS);
	CK(cuMemPoolDestroy(pool));
}

int main(void)
{
	CUdevice dev;
	ctx = rg_start(&dev);

	test_alloc();
	test_host();
	test_pointers();
	test_copies();
	test_2d();
	test_3d();
	test_array();
	test_memsets();
	test_pools();

	CK(cuDevicePrimaryCtxRelease(dev));
	return rg_finish("drv_memory");
}
