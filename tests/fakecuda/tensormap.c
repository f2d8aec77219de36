/*
 * tensormap.c: tensor maps (cuTensorMapEncodeTiled, cuTensorMapEncodeIm2col,
 * cuTensorMapEncodeIm2colWide, cuTensorMapReplaceAddress).
 *
 * A real map's 128 bytes are undocumented; the fake's are deterministic, so a
 * test can see what reached it: opaque[0] is the global address (what
 * cuTensorMapReplaceAddress changes), opaque[1] a tag ("FKTM", the encoder, the
 * 32-byte alignment rule, the data type and the rank), opaque[2..15] a hash of
 * every other argument. The arguments are checked as cuda.h documents them
 * (each error CUDA_ERROR_INVALID_VALUE), the rules between them included; the
 * address is not looked up in the allocations (a driver encodes any aligned
 * address). The fake device is compute capability 9.0, but im2col-wide (10.0
 * and later on a GPU) is encoded too, so the path to it can be tested.
 */
#include "fake.h"

#include <string.h>

#define TAG 0x464b544d00000000ull /* "FKTM" in the high half */

enum { TILED = 1, IM2COL, WIDE };

/* The arguments as hashed: everything but the map and the address, unused fields 0. */
typedef struct args {
	uint32_t kind, dtype, rank, interleave, swizzle, l2, oob, mode;
	uint64_t dim[5], stride[4];
	uint32_t box[5], estride[5];
	int32_t lower[3], upper[3];
	uint32_t channels, pixels;
} args;

/* Bits a value takes in memory: the packed types aligned to 16 bytes pad 16
 * values to 16 bytes. */
static unsigned bits_of(unsigned dtype)
{
	static const unsigned bits[] = {8, 16, 32, 32, 64, 64, 16, 32, 64, 16, 32, 32, 32, 4, 8, 8};
	return bits[dtype];
}

static int is_float(unsigned t)
{
	return t == CU_TENSOR_MAP_DATA_TYPE_FLOAT16 || t == CU_TENSOR_MAP_DATA_TYPE_FLOAT32 ||
	       t == CU_TENSOR_MAP_DATA_TYPE_FLOAT64 || t == CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 ||
	       t == CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ || t == CU_TENSOR_MAP_DATA_TYPE_TFLOAT32 ||
	       t == CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ;
}

static int packed16(unsigned t)
{
	return t == CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B || t == CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B;
}

static int align32(const args *a) { return a->interleave == CU_TENSOR_MAP_INTERLEAVE_32B || packed16(a->dtype); }

/* The span a swizzle mode allows the box's inner dimension (bytes); 0 for none. */
static unsigned swizzle_span(unsigned s)
{
	switch (s) {
	case CU_TENSOR_MAP_SWIZZLE_32B: return 32;
	case CU_TENSOR_MAP_SWIZZLE_64B: return 64;
	case CU_TENSOR_MAP_SWIZZLE_NONE: return 0;
	default: return 128;
	}
}

/* The checks every encoder shares; a is filled. */
static CUresult common(args *a, int kind, const CUtensorMap *map, unsigned dtype, cuuint32_t rank, const void *addr,
                       const cuuint64_t *dim, const cuuint64_t *stride, const cuuint32_t *estride,
                       unsigned interleave, unsigned swizzle, unsigned l2, unsigned oob)
{
	memset(a, 0, sizeof *a);
	if (!map) /* not its alignment: an H100's driver writes a map 32 bytes past 64 */
		return CUDA_ERROR_INVALID_VALUE;
	if (dtype > CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B || interleave > CU_TENSOR_MAP_INTERLEAVE_32B ||
	    swizzle > CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B || l2 > CU_TENSOR_MAP_L2_PROMOTION_L2_256B ||
	    oob > CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA)
		return CUDA_ERROR_INVALID_VALUE;
	a->kind = kind;
	a->dtype = dtype;
	a->rank = rank;
	a->interleave = interleave;
	a->swizzle = swizzle;
	a->l2 = l2;
	a->oob = oob;
	cuuint32_t min = kind != TILED || interleave != CU_TENSOR_MAP_INTERLEAVE_NONE ? 3 : 1;
	if (rank < min || rank > 5)
		return CUDA_ERROR_INVALID_VALUE;
	unsigned al = align32(a) ? 32 : 16;
	if (!addr || (uintptr_t)addr % al || !dim || !estride || !stride) /* even at rank 1, which has none */
		return CUDA_ERROR_INVALID_VALUE;
	for (cuuint32_t i = 0; i < rank; i++) {
		if (dim[i] == 0 || dim[i] > (1ull << 32))
			return CUDA_ERROR_INVALID_VALUE;
		if ((i > 0 || interleave != CU_TENSOR_MAP_INTERLEAVE_NONE) && (estride[i] == 0 || estride[i] > 8))
			return CUDA_ERROR_INVALID_VALUE;
		a->dim[i] = dim[i];
		a->estride[i] = estride[i];
	}
	for (cuuint32_t i = 0; i + 1 < rank; i++) {
		if (stride[i] % al || stride[i] >= (1ull << 40))
			return CUDA_ERROR_INVALID_VALUE;
		a->stride[i] = stride[i];
	}
	if ((packed16(dtype) && dim[0] % 128) || (dtype == CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B && dim[0] % 2))
		return CUDA_ERROR_INVALID_VALUE;
	if (oob == CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA && !is_float(dtype))
		return CUDA_ERROR_INVALID_VALUE;
	if (dtype == CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B && interleave != CU_TENSOR_MAP_INTERLEAVE_NONE)
		return CUDA_ERROR_INVALID_VALUE;
	/* The packed types take a few swizzle modes only (the 6-bit one also the 64-byte atom, to store). */
	if (packed16(dtype) && swizzle != CU_TENSOR_MAP_SWIZZLE_128B &&
	    swizzle != CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B &&
	    !(kind != WIDE && swizzle == CU_TENSOR_MAP_SWIZZLE_NONE) &&
	    !(kind != WIDE && dtype == CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B &&
	      swizzle == CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B))
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

/* The box's inner dimension (inner elements) against the swizzle span. */
static CUresult inner(const args *a, uint64_t n)
{
	unsigned span = swizzle_span(a->swizzle);
	if (a->interleave == CU_TENSOR_MAP_INTERLEAVE_NONE && span && n * bits_of(a->dtype) > span * 8ull)
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static void encode(CUtensorMap *map, const args *a, const void *addr)
{
	uint64_t h = 0xcbf29ce484222325ull;
	const uint8_t *b = (const uint8_t *)a;
	for (size_t i = 0; i < sizeof *a; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	map->opaque[0] = (uint64_t)(uintptr_t)addr;
	map->opaque[1] = TAG | (uint64_t)a->kind << 24 | (uint64_t)align32(a) << 16 | a->dtype << 8 | a->rank;
	for (int i = 2; i < CU_TENSOR_MAP_NUM_QWORDS; i++)
		map->opaque[i] = mix(h + (uint64_t)i);
}

CUresult CUDAAPI cuTensorMapEncodeTiled(CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType,
                                        cuuint32_t tensorRank, void *globalAddress, const cuuint64_t *globalDim,
                                        const cuuint64_t *globalStrides, const cuuint32_t *boxDim,
                                        const cuuint32_t *elementStrides, CUtensorMapInterleave interleave,
                                        CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion,
                                        CUtensorMapFloatOOBfill oobFill)
{
	fk_ctx *c;
	args a;
	CUresult rc = fk_begin(&c);
	if (rc == CUDA_SUCCESS)
		rc = common(&a, TILED, tensorMap, tensorDataType, tensorRank, globalAddress, globalDim, globalStrides,
		            elementStrides, interleave, swizzle, l2Promotion, oobFill);
	if (rc == CUDA_SUCCESS && !boxDim)
		rc = CUDA_ERROR_INVALID_VALUE;
	for (cuuint32_t i = 0; rc == CUDA_SUCCESS && i < tensorRank; i++) {
		if (boxDim[i] == 0 || boxDim[i] > 256)
			rc = CUDA_ERROR_INVALID_VALUE;
		a.box[i] = boxDim[i];
	}
	if (rc == CUDA_SUCCESS) {
		/* Without interleave the inner box is whole 16-byte units; the packed types load 128 at a time. */
		if ((interleave == CU_TENSOR_MAP_INTERLEAVE_NONE && (a.box[0] * bits_of(a.dtype)) % 128) ||
		    (packed16(a.dtype) && a.box[0] != 128))
			rc = CUDA_ERROR_INVALID_VALUE;
		else
			rc = inner(&a, a.box[0]);
	}
	if (rc == CUDA_SUCCESS)
		encode(tensorMap, &a, globalAddress);
	return fk_end(rc, __func__, "%p, %d, %u, %p", (void *)tensorMap, (int)tensorDataType, tensorRank,
	              globalAddress);
}

CUresult CUDAAPI cuTensorMapEncodeIm2col(CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType,
                                         cuuint32_t tensorRank, void *globalAddress, const cuuint64_t *globalDim,
                                         const cuuint64_t *globalStrides, const int *pixelBoxLowerCorner,
                                         const int *pixelBoxUpperCorner, cuuint32_t channelsPerPixel,
                                         cuuint32_t pixelsPerColumn, const cuuint32_t *elementStrides,
                                         CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                                         CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill)
{
	static const int lim[] = {0, 0, 0, 32768, 128, 16}; /* corner offsets by rank: 16, 8, 5 bits */
	fk_ctx *c;
	args a;
	CUresult rc = fk_begin(&c);
	if (rc == CUDA_SUCCESS)
		rc = common(&a, IM2COL, tensorMap, tensorDataType, tensorRank, globalAddress, globalDim, globalStrides,
		            elementStrides, interleave, swizzle, l2Promotion, oobFill);
	if (rc == CUDA_SUCCESS && (!pixelBoxLowerCorner || !pixelBoxUpperCorner || channelsPerPixel > 256 ||
	                           pixelsPerColumn > 1024 || (packed16(a.dtype) && channelsPerPixel != 128)))
		rc = CUDA_ERROR_INVALID_VALUE;
	for (cuuint32_t i = 0; rc == CUDA_SUCCESS && i + 2 < tensorRank; i++) {
		int lo = pixelBoxLowerCorner[i], up = pixelBoxUpperCorner[i], m = lim[tensorRank];
		if (lo < -m || lo >= m || up < -m || up >= m)
			rc = CUDA_ERROR_INVALID_VALUE;
		a.lower[i] = lo;
		a.upper[i] = up;
	}
	if (rc == CUDA_SUCCESS) {
		a.channels = channelsPerPixel;
		a.pixels = pixelsPerColumn;
		rc = inner(&a, channelsPerPixel);
	}
	if (rc == CUDA_SUCCESS)
		encode(tensorMap, &a, globalAddress);
	return fk_end(rc, __func__, "%p, %d, %u, %p", (void *)tensorMap, (int)tensorDataType, tensorRank,
	              globalAddress);
}

CUresult CUDAAPI cuTensorMapEncodeIm2colWide(CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType,
                                             cuuint32_t tensorRank, void *globalAddress,
                                             const cuuint64_t *globalDim, const cuuint64_t *globalStrides,
                                             int pixelBoxLowerCornerWidth, int pixelBoxUpperCornerWidth,
                                             cuuint32_t channelsPerPixel, cuuint32_t pixelsPerColumn,
                                             const cuuint32_t *elementStrides, CUtensorMapInterleave interleave,
                                             CUtensorMapIm2ColWideMode mode, CUtensorMapSwizzle swizzle,
                                             CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill)
{
	fk_ctx *c;
	args a;
	CUresult rc = fk_begin(&c);
	if (rc == CUDA_SUCCESS)
		rc = common(&a, WIDE, tensorMap, tensorDataType, tensorRank, globalAddress, globalDim, globalStrides,
		            elementStrides, interleave, swizzle, l2Promotion, oobFill);
	/* Only the 64- and 128-byte swizzles (16-byte chunks, or 32-byte atoms in 128 bytes). */
	if (rc == CUDA_SUCCESS &&
	    ((unsigned)mode > CU_TENSOR_MAP_IM2COL_WIDE_MODE_W128 || channelsPerPixel > 256 || pixelsPerColumn > 1024 ||
	     pixelBoxLowerCornerWidth < -32768 || pixelBoxLowerCornerWidth > 32767 ||
	     pixelBoxUpperCornerWidth < -32768 || pixelBoxUpperCornerWidth > 32767 ||
	     (packed16(a.dtype) && channelsPerPixel != 128) ||
	     (swizzle != CU_TENSOR_MAP_SWIZZLE_64B && swizzle != CU_TENSOR_MAP_SWIZZLE_128B &&
	      swizzle != CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B)))
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS) {
		a.mode = mode;
		a.lower[0] = pixelBoxLowerCornerWidth;
		a.upper[0] = pixelBoxUpperCornerWidth;
		a.channels = channelsPerPixel;
		a.pixels = pixelsPerColumn;
		rc = inner(&a, channelsPerPixel);
	}
	if (rc == CUDA_SUCCESS)
		encode(tensorMap, &a, globalAddress);
	return fk_end(rc, __func__, "%p, %d, %u, %p", (void *)tensorMap, (int)tensorDataType, tensorRank,
	              globalAddress);
}

/* The map must be one the fake encoded; the address follows its alignment rule. */
CUresult CUDAAPI cuTensorMapReplaceAddress(CUtensorMap *tensorMap, void *globalAddress)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	if (rc == CUDA_SUCCESS &&
	    (!tensorMap || (uintptr_t)tensorMap % 64 || (tensorMap->opaque[1] & 0xffffffff00000000ull) != TAG ||
	     !globalAddress || (uintptr_t)globalAddress % ((tensorMap->opaque[1] >> 16 & 1) ? 32 : 16)))
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS)
		tensorMap->opaque[0] = (uint64_t)(uintptr_t)globalAddress;
	return fk_end(rc, __func__, "%p, %p", (void *)tensorMap, globalAddress);
}
