/*
 * drv_tensormap.cu: tensor maps (TMA descriptors) with driver calls:
 * cuTensorMapEncodeTiled and cuTensorMapEncodeIm2col over cuMemAlloc'd
 * memory, cuTensorMapReplaceAddress, and the errors cuda.h documents for bad
 * input. A map is 128 opaque bytes, so only relations are checked: the same
 * arguments give the same bytes, other arguments or another address other
 * bytes, an address replaced and replaced back the first map.
 *
 * Runs unchanged on a GPU (the real libcuda.so.1, compute capability 9.0 or
 * later) and through libremote.so as libcuda.so.1 against remote-gpud. Through
 * the remote a tensor must lie in the process's device memory (a GPU's driver
 * does not look): those checks run with REMOTE_GPU only. With RGTEST_FAKE=1
 * (the driver test double behind the server) the fake's encoding is checked
 * too (the address in the first word), and cuTensorMapEncodeIm2colWide, which
 * needs compute capability 10.0 on a GPU.
 *
 * Output and exit status as rgdrv.h says: the same lines in every mode.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "rgdrv.h"

#define BAD CUDA_ERROR_INVALID_VALUE

static CUdevice dev;
static CUdeviceptr A, B; /* 64 x 64 floats each */

/* A tiled map of A-like shape: 64 x 64 floats, rows 256 bytes apart, box 32 x 8. */
struct tiled {
	CUtensorMapDataType dtype = CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
	cuuint32_t rank = 2;
	CUdeviceptr addr = 0;
	cuuint64_t dim[5] = {64, 64, 1, 1, 1};
	cuuint64_t stride[4] = {256, 256 * 64, 256 * 64, 256 * 64};
	cuuint32_t box[5] = {32, 8, 1, 1, 1};
	cuuint32_t estride[5] = {1, 1, 1, 1, 1};
	CUtensorMapInterleave interleave = CU_TENSOR_MAP_INTERLEAVE_NONE;
	CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_NONE;
	CUtensorMapL2promotion l2 = CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
	CUtensorMapFloatOOBfill oob = CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE;

	CUresult encode(CUtensorMap *m) const
	{
		return cuTensorMapEncodeTiled(m, dtype, rank, (void *)addr, dim, stride, box, estride, interleave,
					      swizzle, l2, oob);
	}
};

static int same(const CUtensorMap &a, const CUtensorMap &b) { return memcmp(&a, &b, sizeof a) == 0; }

static void tiled_maps(void)
{
	alignas(128) CUtensorMap m1, m2, mb, r;
	tiled t;
	t.addr = A;
	memset(&m1, 0, sizeof m1);
	expect("cuTensorMapEncodeTiled 64x64 float, box 32x8", t.encode(&m1), CUDA_SUCCESS);
	memset(&m2, 0xee, sizeof m2);
	CK(t.encode(&m2));
	check_bytes("the same arguments give the same 128 bytes", &m2, &m1, sizeof m1);
	ONLY(fake) check("the fake's map holds the address", m1.opaque[0] == A, "%#llx",
			 (unsigned long long)m1.opaque[0]);

	tiled u = t;
	u.box[1] = 16;
	CK(u.encode(&m2));
	check("another box gives another map", !same(m2, m1));
	u = t;
	u.swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
	CK(u.encode(&m2));
	check("another swizzle gives another map", !same(m2, m1));
	u = t;
	u.rank = 3;
	u.dim[2] = 1;
	expect("tiled: rank 3 with a last dimension of 1", u.encode(&m2), CUDA_SUCCESS);
	u = t;
	u.rank = 1;
	u.dim[0] = 4096;
	/* Rank 1 uses no stride, but an H100's driver refuses NULL strides. */
	expect("rank 1, NULL strides", cuTensorMapEncodeTiled(&m2, u.dtype, 1, (void *)A, u.dim, NULL, u.box, u.estride,
							      u.interleave, u.swizzle, u.l2, u.oob),
	       BAD);
	cuuint64_t none = 0;
	expect("rank 1, no strides", cuTensorMapEncodeTiled(&m2, u.dtype, 1, (void *)A, u.dim, &none, u.box, u.estride,
							    u.interleave, u.swizzle, u.l2, u.oob),
	       CUDA_SUCCESS);

	t.addr = B;
	CK(t.encode(&mb));
	check("another address gives another map", !same(mb, m1));
	t.addr = A;

	r = m1;
	expect("cuTensorMapReplaceAddress to the second buffer", cuTensorMapReplaceAddress(&r, (void *)B),
	       CUDA_SUCCESS);
	check("the replaced map changed", !same(r, m1));
	check_bytes("the replaced map is the map encoded there", &r, &mb, sizeof r);
	ONLY(fake) check("the fake's replaced map holds the new address", r.opaque[0] == B);
	CK(cuTensorMapReplaceAddress(&r, (void *)A));
	check_bytes("replaced back: the first map", &r, &m1, sizeof r);
	CK(cuTensorMapReplaceAddress(&r, (void *)(A + 256)));
	check("replaced by the address of the second row: another map", !same(r, m1));

	/* as Triton finds it: through cuGetProcAddress */
	void *fn = NULL;
	CUdriverProcAddressQueryResult q;
	expect("cuGetProcAddress cuTensorMapEncodeTiled",
	       cuGetProcAddress("cuTensorMapEncodeTiled", &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &q), CUDA_SUCCESS);
	if (fn) {
		typedef CUresult (*enc_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
					   const cuuint64_t *, const cuuint32_t *, const cuuint32_t *,
					   CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion,
					   CUtensorMapFloatOOBfill);
		memset(&m2, 0, sizeof m2);
		expect("cuTensorMapEncodeTiled through cuGetProcAddress",
		       ((enc_fn)fn)(&m2, t.dtype, t.rank, (void *)A, t.dim, t.stride, t.box, t.estride, t.interleave,
				    t.swizzle, t.l2, t.oob),
		       CUDA_SUCCESS);
		check_bytes("the same map through cuGetProcAddress", &m2, &m1, sizeof m1);
	}
}

static void tiled_errors(void)
{
	alignas(128) unsigned char raw[256];
	alignas(128) CUtensorMap m, keep;
	tiled t, u;
	t.addr = A;
	CK(t.encode(&keep));

	expect("tiled: NULL map", t.encode(NULL), BAD);
	/* cuda.h asks for a 64-byte aligned map; an H100's driver writes one 32 bytes past. */
	expect("tiled: a map 32 bytes past 64-byte alignment", t.encode((CUtensorMap *)(raw + 32)), CUDA_SUCCESS);
	u = t;
	u.rank = 0;
	expect("tiled: rank 0", u.encode(&m), BAD);
	u.rank = 6;
	expect("tiled: rank 6", u.encode(&m), BAD);
	u = t;
	u.addr = A + 8;
	expect("tiled: address 8 bytes past 16-byte alignment", u.encode(&m), BAD);
	u = t;
	u.stride[0] = 264;
	expect("tiled: stride not a multiple of 16", u.encode(&m), BAD);
	u = t;
	u.stride[0] = 1ull << 40;
	expect("tiled: stride 2^40", u.encode(&m), BAD);
	u = t;
	u.dim[1] = 0;
	expect("tiled: a dimension of 0", u.encode(&m), BAD);
	u = t;
	u.box[1] = 0;
	expect("tiled: box 0", u.encode(&m), BAD);
	u.box[1] = 257;
	expect("tiled: box 257", u.encode(&m), BAD);
	u = t;
	u.estride[1] = 0;
	expect("tiled: element stride 0", u.encode(&m), BAD);
	u.estride[1] = 9;
	expect("tiled: element stride 9", u.encode(&m), BAD);
	u = t;
	u.dtype = (CUtensorMapDataType)99;
	expect("tiled: data type 99", u.encode(&m), BAD);
	u = t;
	u.interleave = (CUtensorMapInterleave)7;
	expect("tiled: interleave 7", u.encode(&m), BAD);
	u = t;
	u.swizzle = (CUtensorMapSwizzle)99;
	expect("tiled: swizzle 99", u.encode(&m), BAD);
	u = t;
	u.l2 = (CUtensorMapL2promotion)9;
	expect("tiled: L2 promotion 9", u.encode(&m), BAD);
	u = t;
	u.oob = (CUtensorMapFloatOOBfill)5;
	expect("tiled: OOB fill 5", u.encode(&m), BAD);
	u = t;
	u.interleave = CU_TENSOR_MAP_INTERLEAVE_16B;
	expect("tiled: interleave with rank 2", u.encode(&m), BAD);
	/* the rules between arguments: the driver's (behind the server through the remote) */
	u = t;
	u.box[0] = 2;
	expect("tiled: box row of 8 bytes (not a multiple of 16)", u.encode(&m), BAD);
	u = t;
	u.swizzle = CU_TENSOR_MAP_SWIZZLE_32B;
	expect("tiled: box row of 128 bytes with 32-byte swizzle", u.encode(&m), BAD);
	u = t;
	u.rank = 3;
	u.dim[0] = 8;
	u.dim[2] = 8;
	u.box[0] = 8;
	u.stride[0] = 32;
	u.stride[1] = 32 * 64;
	u.interleave = CU_TENSOR_MAP_INTERLEAVE_32B;
	/* cuda.h asks for the 32-byte swizzle here; an H100's driver does not. */
	expect("tiled: 32-byte interleave without 32-byte swizzle", u.encode(&m), CUDA_SUCCESS);
	u = t;
	u.dtype = CU_TENSOR_MAP_DATA_TYPE_UINT32;
	u.oob = CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA;
	expect("tiled: NaN fill of an integer type", u.encode(&m), BAD);

	/* Not cuTensorMapReplaceAddress(NULL, ...): an H100's driver crashes on it. */
	m = keep;
	expect("replace: address 8 bytes past 16-byte alignment", cuTensorMapReplaceAddress(&m, (void *)(B + 8)), BAD);
	check_bytes("a refused replace leaves the map", &m, &keep, sizeof m);

	/* Through the remote a tensor lies in this process's device memory. */
	ONLY(remote)
	{
		u = t;
		u.dim[1] = 65;
		expect("tiled: a tensor past its allocation's end", u.encode(&m), BAD);
		u = t;
		u.addr = 0x10000;
		expect("tiled: an address that is no allocation", u.encode(&m), BAD);
		CUdeviceptr c;
		CK(cuMemAlloc(&c, 64 * 256));
		u = t;
		u.addr = c;
		expect("tiled: a live buffer", u.encode(&m), CUDA_SUCCESS);
		CK(cuMemFree(c));
		expect("tiled: the same arguments once the buffer is freed", u.encode(&m), BAD);
		m = keep;
		expect("replace: a freed address", cuTensorMapReplaceAddress(&m, (void *)c), BAD);
	}
}

static void im2col(void)
{
	/* NHWC half: 64 channels (128 bytes a pixel), 8 x 8 pixels, 2 images: 16 KiB of A */
	alignas(128) CUtensorMap m1, m2;
	const cuuint64_t dim[4] = {64, 8, 8, 2};
	const cuuint64_t stride[3] = {128, 128 * 8, 128 * 64};
	const cuuint32_t es[4] = {1, 1, 1, 1};
	int lo[2] = {0, 0}, up[2] = {0, 0};
	const CUtensorMapDataType h = CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
	const CUtensorMapInterleave n = CU_TENSOR_MAP_INTERLEAVE_NONE;
	const CUtensorMapSwizzle sw = CU_TENSOR_MAP_SWIZZLE_128B;
	const CUtensorMapL2promotion l2 = CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
	const CUtensorMapFloatOOBfill oob = CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE;
#define IM2COL(map, rank, lo, up, ch) \
	cuTensorMapEncodeIm2col(map, h, rank, (void *)A, dim, stride, lo, up, ch, 32, es, n, sw, l2, oob)

	expect("cuTensorMapEncodeIm2col NHWC half, 64 channels", IM2COL(&m1, 4, lo, up, 64), CUDA_SUCCESS);
	memset(&m2, 0xee, sizeof m2);
	CK(IM2COL(&m2, 4, lo, up, 64));
	check_bytes("im2col: the same arguments give the same 128 bytes", &m2, &m1, sizeof m1);
	lo[0] = lo[1] = -1;
	up[0] = up[1] = -1;
	CK(IM2COL(&m2, 4, lo, up, 64));
	check("im2col: other corners give another map", !same(m2, m1));
	expect("im2col: rank 2", IM2COL(&m2, 2, lo, up, 64), BAD);
	expect("im2col: rank 6", IM2COL(&m2, 6, lo, up, 64), BAD);
	/* Not a NULL corner: an H100's driver crashes on it. */
	lo[0] = -129;
	expect("im2col: corner -129 with rank 4", IM2COL(&m2, 4, lo, up, 64), BAD);
	lo[0] = 128;
	expect("im2col: corner 128 with rank 4", IM2COL(&m2, 4, lo, up, 64), BAD);
	lo[0] = -1;
	expect("im2col: 257 channels", IM2COL(&m2, 4, lo, up, 257), BAD);
	expect("im2col: NULL map", IM2COL(NULL, 4, lo, up, 64), BAD);
#undef IM2COL

	/* Im2colWide needs compute capability 10.0: on the fake only (an H100 class device otherwise) */
	ONLY(fake)
	{
		const cuuint32_t es3[3] = {1, 1, 1};
		expect("cuTensorMapEncodeIm2colWide",
		       cuTensorMapEncodeIm2colWide(&m1, h, 3, (void *)A, dim, stride, 0, 0, 64, 32, es3, n,
						   CU_TENSOR_MAP_IM2COL_WIDE_MODE_W, sw, l2, oob),
		       CUDA_SUCCESS);
		CK(cuTensorMapEncodeIm2colWide(&m2, h, 3, (void *)A, dim, stride, 0, 0, 64, 32, es3, n,
					       CU_TENSOR_MAP_IM2COL_WIDE_MODE_W, sw, l2, oob));
		check_bytes("im2col-wide: the same arguments give the same 128 bytes", &m2, &m1, sizeof m1);
		expect("im2col-wide: mode 2",
		       cuTensorMapEncodeIm2colWide(&m2, h, 3, (void *)A, dim, stride, 0, 0, 64, 32, es3, n,
						   (CUtensorMapIm2ColWideMode)2, sw, l2, oob),
		       BAD);
		expect("im2col-wide: no swizzle",
		       cuTensorMapEncodeIm2colWide(&m2, h, 3, (void *)A, dim, stride, 0, 0, 64, 32, es3, n,
						   CU_TENSOR_MAP_IM2COL_WIDE_MODE_W, CU_TENSOR_MAP_SWIZZLE_NONE, l2,
						   oob),
		       BAD);
	}
}

int main(void)
{
	rg_start(&dev);
	CK(cuMemAlloc(&A, 64 * 256));
	CK(cuMemAlloc(&B, 64 * 256));
	tiled_maps();
	tiled_errors();
	im2col();
	CK(cuMemFree(A));
	CK(cuMemFree(B));
	CK(cuDevicePrimaryCtxRelease(dev));
	return rg_finish("drv_tensormap");
}
