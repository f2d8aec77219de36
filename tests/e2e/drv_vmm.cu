/*
 * drv_vmm.cu: the driver API's virtual memory management (cuMemAddressReserve,
 * cuMemCreate, cuMemMap, cuMemSetAccess, ...): two physical allocations mapped
 * back to back in one reservation are one range for memsets, copies and a
 * kernel; pointer attributes of a mapped address; an unmapped range is no
 * memory any more; references (create, retain, release); bad input.
 *
 * Through the remote, allocations that export handles are refused (handles do
 * not cross hosts): those expectations depend on REMOTE_GPU. Output and exit
 * status as rgdrv.h says: the same lines in every mode.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "rgdrv.h"
#include "rgtest_kernels.cuh"

static CUdevice dev;

static CUmemAllocationProp device_prop(void)
{
	CUmemAllocationProp p;
	memset(&p, 0, sizeof(p));
	p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	p.location.id = dev;
	p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
	return p;
}

int main(void)
{
	rg_start(&dev);
	CUmemAllocationProp prop = device_prop();
	int vmm = 0;
	CK(cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev));
	check("VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED", vmm == 1, "%d", vmm);

	/* ---- granularity */
	size_t g = 0, rec = 0;
	CK(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
	CK(cuMemGetAllocationGranularity(&rec, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
	check("granularity: a power of two, recommended a multiple", g && !(g & (g - 1)) && rec % g == 0,
	      "%zu %zu", g, rec);
	expect("granularity(NULL)", cuMemGetAllocationGranularity(NULL, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
	       CUDA_ERROR_INVALID_VALUE);

	/* ---- reserve 3 granules, 2 physical allocations mapped back to back */
	CUdeviceptr va = 0;
	CK(cuMemAddressReserve(&va, 3 * g, 0, 0, 0));
	check("reservation aligned", va && va % g == 0);
	CUmemGenericAllocationHandle h1 = 0, h2 = 0;
	expect("cuMemCreate(unaligned size)", cuMemCreate(&h1, g + 1, &prop, 0), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemCreate(NULL prop)", cuMemCreate(&h1, g, NULL, 0), CUDA_ERROR_INVALID_VALUE);
	size_t f0, f1, t;
	CK(cuMemGetInfo(&f0, &t));
	CK(cuMemCreate(&h1, g, &prop, 0));
	CK(cuMemCreate(&h2, g, &prop, 0));
	CK(cuMemGetInfo(&f1, &t));
	check("cuMemCreate takes device memory", f0 - f1 >= 2 * g, "%zu -> %zu", f0, f1);
	check("handles differ", h1 != h2);
	CUmemAllocationProp got;
	memset(&got, 0xff, sizeof(got));
	CK(cuMemGetAllocationPropertiesFromHandle(&got, h1));
	check("properties from the handle", got.type == CU_MEM_ALLOCATION_TYPE_PINNED &&
						    got.location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
						    got.location.id == dev &&
						    got.requestedHandleTypes == CU_MEM_HANDLE_TYPE_NONE);

	CK(cuMemMap(va, g, 0, h1, 0));
	CK(cuMemMap(va + g, g, 0, h2, 0));
	CUresult r = cuMemMap(va, g, 0, h2, 0);
	check("cuMemMap over a mapped range fails", r != CUDA_SUCCESS, "%s", en(r));
	ONLY(remote) expect("cuMemMap over a mapped range", r, CUDA_ERROR_INVALID_VALUE);
	CUmemAccessDesc acc;
	memset(&acc, 0, sizeof(acc));
	acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	acc.location.id = dev;
	acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	expect("cuMemSetAccess(NULL)", cuMemSetAccess(va, 2 * g, NULL, 1), CUDA_ERROR_INVALID_VALUE);
	CK(cuMemSetAccess(va, 2 * g, &acc, 1));
	unsigned long long fl = 0;
	CK(cuMemGetAccess(&fl, &acc.location, va + g + 5));
	check("cuMemGetAccess: read/write", fl == CU_MEM_ACCESS_FLAGS_PROT_READWRITE, "%llu", fl);

	/* ---- memset, copies and a kernel across the boundary between the two */
	const size_t n = 1 << 20; /* 1 MiB on each side of it */
	CUdeviceptr mid = va + g - n;
	unsigned char *want = (unsigned char *)malloc(2 * n), *back = (unsigned char *)malloc(2 * n);
	CK(cuMemsetD8(mid, 0x5a, 2 * n));
	CK(cuMemcpyDtoH(back, mid, 2 * n));
	memset(want, 0x5a, 2 * n);
	check_bytes("memset across the boundary", back, want, 2 * n);
	fill(want, 2 * n, 1);
	CK(cuMemcpyHtoD(mid, want, 2 * n));
	memset(back, 0, 2 * n);
	CK(cuMemcpyDtoH(back, mid, 2 * n));
	check_bytes("H2D/D2H across the boundary", back, want, 2 * n);
	CUdeviceptr plain = 0;
	CK(cuMemAlloc(&plain, 2 * n));
	fill(want, 2 * n, 2);
	CK(cuMemcpyHtoD(plain, want, 2 * n));
	CK(cuMemcpyDtoD(mid, plain, 2 * n));
	memset(back, 0, 2 * n);
	CK(cuMemcpyDtoH(back, mid, 2 * n));
	check_bytes("cuMemcpyDtoD from cuMemAlloc memory into the mapping", back, want, 2 * n);
	CK(cuMemcpy(plain, va + g - 7, 14)); /* unified: 14 bytes across */
	unsigned char small[14];
	CK(cuMemcpyDtoH(small, plain, 14));
	check_bytes("cuMemcpy (unified) across the boundary", small, want + n - 7, 14);
	/* a kernel writing both sides */
	const unsigned long long words = (2 * n) / 4;
	rgtest_fill_u32<<<rgtest_grid(words), 256>>>((unsigned *)(uintptr_t)mid, 0xabcd1234u, words);
	CK(cuCtxSynchronize());
	CK(cuMemcpyDtoH(back, mid, 2 * n));
	int ok = 1;
	for (size_t i = 0; i < words; i++)
		ok &= ((unsigned *)back)[i] == 0xabcd1234u;
	check("kernel across the boundary", ok);
	/* the third granule is not mapped: refused through the remote (on a GPU
	 * such a memset faults, a sticky error) */
	ONLY(remote) expect("memset past the mapped ranges", cuMemsetD8(va + 2 * g - 4, 0, 8), CUDA_ERROR_INVALID_VALUE);

	/* ---- pointer attributes of a mapped address */
	CUmemorytype mt = (CUmemorytype)0;
	CK(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, va + g + 100));
	check("pointer attribute: device memory", mt == CU_MEMORYTYPE_DEVICE, "%d", (int)mt);
	int ord = -1;
	CK(cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, va + 100));
	check("pointer attribute: device ordinal", ord == dev, "%d", ord);
	CUdeviceptr dp = 0;
	CK(cuPointerGetAttribute(&dp, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, va + 100));
	check("pointer attribute: device pointer", dp == va + 100);
	expect("cuMemFree(a mapped address)", cuMemFree(va), CUDA_ERROR_INVALID_VALUE);

	/* ---- references */
	CUmemGenericAllocationHandle hr = 0;
	CK(cuMemRetainAllocationHandle(&hr, (void *)(uintptr_t)(va + g + 64)));
	check("cuMemRetainAllocationHandle: the mapped allocation's handle", hr == h2);
	CK(cuMemRelease(hr));
	expect("cuMemRetainAllocationHandle(unmapped address)",
	       cuMemRetainAllocationHandle(&hr, (void *)(uintptr_t)(va + 2 * g)), CUDA_ERROR_INVALID_VALUE);

	/* ---- unmap the second: copies there fail, the first still works */
	expect("cuMemUnmap(part of a mapping)", cuMemUnmap(va + g, g / 2), CUDA_ERROR_INVALID_VALUE);
	CK(cuMemUnmap(va + g, g));
	ONLY(remote) { /* on a GPU: a fault */
		expect("copy to an unmapped range", cuMemcpyHtoD(va + g, want, 64), CUDA_ERROR_INVALID_VALUE);
		expect("copy across into an unmapped range", cuMemcpyDtoH(back, mid, 2 * n), CUDA_ERROR_INVALID_VALUE);
		expect("D2D into an unmapped range", cuMemcpyDtoD(va + g, plain, 64), CUDA_ERROR_INVALID_VALUE);
	}
	CK(cuMemcpyDtoH(back, mid, 64));
	check("the first mapping still reads", ((unsigned *)back)[0] == 0xabcd1234u);
	/* mapped again at once: what it held is still there */
	CK(cuMemMap(va + 2 * g, g, 0, h2, 0));
	CK(cuMemSetAccess(va + 2 * g, g, &acc, 1));
	CK(cuMemcpyDtoH(back, va + 2 * g, 64));
	check("remapped elsewhere, same bytes", ((unsigned *)back)[0] == 0xabcd1234u);

	/* ---- release while mapped (the memory stays), unmap, free */
	CK(cuMemRelease(h2));
	CK(cuMemcpyDtoH(back, va + 2 * g, 64));
	check("released but mapped: still readable", ((unsigned *)back)[0] == 0xabcd1234u);
	CK(cuMemUnmap(va + 2 * g, g));
	CK(cuMemUnmap(va, g));
	CK(cuMemRelease(h1));
	ONLY(remote) expect("cuMemRelease(released)", cuMemRelease(h1), CUDA_ERROR_INVALID_VALUE);
	ONLY(remote) expect("cuMemMap(unknown handle)", cuMemMap(va, g, 0, 0x1234567, 0), CUDA_ERROR_INVALID_VALUE);
	CK(cuMemAddressFree(va, 3 * g));
	size_t f2;
	CK(cuMemFree(plain));
	CK(cuMemGetInfo(&f2, &t));
	check("memory back after release and unmap", f2 >= f0, "%zu -> %zu", f0, f2);

	/* ---- a POSIX fd handle asked for (as PyTorch's expandable segments do): the
	 * allocation is made and keeps the request in its properties; through the
	 * remote only its export is refused. FABRIC handles: refused remotely. */
	CUmemAllocationProp fd = device_prop();
	fd.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	CUmemGenericAllocationHandle hx = 0;
	CK(cuMemCreate(&hx, g, &fd, 0));
	CUmemAllocationProp fdp;
	memset(&fdp, 0, sizeof(fdp));
	CK(cuMemGetAllocationPropertiesFromHandle(&fdp, hx));
	check("POSIX fd allocation keeps its request", fdp.requestedHandleTypes == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
	      "%d", (int)fdp.requestedHandleTypes);
	int shareable = -1;
	ONLY(remote) expect("cuMemExportToShareableHandle", cuMemExportToShareableHandle(&shareable, hx,
		CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0), CUDA_ERROR_NOT_SUPPORTED);
	CK(cuMemRelease(hx));
	CUmemAllocationProp fab = device_prop();
	fab.requestedHandleTypes = CU_MEM_HANDLE_TYPE_FABRIC;
	ONLY(remote) expect("cuMemCreate(FABRIC handles)", cuMemCreate(&hx, g, &fab, 0), CUDA_ERROR_NOT_SUPPORTED);

	/* ---- left for the session's end: a reservation with a mapping and a live handle */
	CUdeviceptr va2 = 0;
	CUmemGenericAllocationHandle h3 = 0;
	CK(cuMemAddressReserve(&va2, g, 0, 0, 0));
	CK(cuMemCreate(&h3, g, &prop, 0));
	CK(cuMemMap(va2, g, 0, h3, 0));
	CK(cuMemSetAccess(va2, g, &acc, 1));
	CK(cuMemsetD32(va2, 7, g / 4));
	free(want);
	free(back);
	return rg_finish("drv_vmm");
}
