/*
 * Driver API: tensor maps (CUtensorMap, the TMA descriptors that Triton,
 * CUTLASS and cuDNN build on the host and pass to kernels by value). Their 128
 * bytes are undocumented, so the server's driver encodes them (op
 * tensor_map_encode): device addresses are the same here and there, so the map
 * comes back valid as it is.
 *
 * Checked here as an H100's driver checks, before anything travels: the map
 * pointer (non-NULL; not its alignment), the enums, the rank (1..5; 3..5 for im2col and
 * with interleave), the address's and strides' alignment (32 bytes with 32-byte
 * interleave or the 16-byte-aligned packed types, else 16), each dimension,
 * stride, box size and element stride within its limits (elementStrides[0] is
 * ignored without interleave, as the driver says), and that the tensor lies in
 * one of this process's device allocations (as the server checks too). The
 * rules between arguments (box against swizzle, packed types) are the
 * server's driver's.
 *
 * Triton encodes the same descriptor at every launch, so maps are cached by
 * their arguments (the device, the kind, the address and the packed
 * arguments, compared whole): the same call gives the same bytes, with no
 * round trip. The cache is small and direct-mapped; a hit still checks that the
 * tensor lies in live device memory, so a freed tensor fails as a miss would.
 */
#include <pthread.h>
#include <string.h>

#include "drv.h"
#include "proto_tmap.h"
#include "rpc.h"
#include "rt.h"

#define PTR(d) ((void *)(uintptr_t)(d))
#define CACHE_SLOTS 256

_Static_assert(sizeof(CUtensorMap) == PROTO_TMAP_BYTES, "a tensor map is 128 bytes");

/* ---- the cache of encoded maps */

typedef struct slot {
	int used, dev;
	uint32_t kind;
	uint64_t addr;
	size_t in_len;
	uint8_t in[sizeof(proto_tmap_params)]; /* the packed arguments, or the map to change */
	uint8_t map[PROTO_TMAP_BYTES];
} slot;

static slot cache[CACHE_SLOTS];
static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

static slot *slot_of(int dev, uint32_t kind, uint64_t addr, const void *in, size_t in_len)
{
	uint64_t h = 0xcbf29ce484222325ull;
	h = fnv(h, &dev, sizeof(dev));
	h = fnv(h, &kind, sizeof(kind));
	h = fnv(h, &addr, sizeof(addr));
	h = fnv(h, in, in_len);
	return &cache[(h ^ (h >> 32)) % CACHE_SLOTS];
}

static int cache_get(int dev, uint32_t kind, uint64_t addr, const void *in, size_t in_len, CUtensorMap *map)
{
	slot *s = slot_of(dev, kind, addr, in, in_len);
	int hit;
	pthread_mutex_lock(&cache_mu);
	hit = s->used && s->dev == dev && s->kind == kind && s->addr == addr && s->in_len == in_len &&
	      memcmp(s->in, in, in_len) == 0;
	if (hit)
		memcpy(map, s->map, sizeof(s->map));
	pthread_mutex_unlock(&cache_mu);
	return hit;
}

static void cache_put(int dev, uint32_t kind, uint64_t addr, const void *in, size_t in_len, const CUtensorMap *map)
{
	slot *s = slot_of(dev, kind, addr, in, in_len);
	pthread_mutex_lock(&cache_mu);
	s->used = 1;
	s->dev = dev;
	s->kind = kind;
	s->addr = addr;
	s->in_len = in_len;
	memcpy(s->in, in, in_len);
	memcpy(s->map, map, sizeof(s->map));
	pthread_mutex_unlock(&cache_mu);
}

/* ---- the call */

/* The map for in (kind's arguments) over [addr, addr + extent): from the cache or
 * the server. */
static cudaError_t tensor_map(fe_api_site site, CUtensorMap *map, uint32_t kind, CUdeviceptr addr, const void *in,
			      size_t in_len, uint64_t extent)
{
	fe_conn *c;
	CUtensorMap out;
	cudaError_t e = fe_rt_enter_site(&c, site);
	if (e != cudaSuccess)
		return e;
	if (extent == 0 || extent > SIZE_MAX || !fe_mem_device_ok(PTR(addr), (size_t)extent))
		return fe_rt_fail(cudaErrorInvalidValue);
	int dev = fe_rt_current_device();
	if (cache_get(dev, kind, addr, in, in_len, &out)) {
		memcpy(map, &out, sizeof(out));
		return (cudaError_t)fe_obs_leave_ret(cudaSuccess);
	}
	memset(&out, 0, sizeof(out));
	e = fe_rt_leave(fe_rpc_tensor_map_encode(c, kind, addr, in, in_len, &out, sizeof(out)));
	if (e == cudaSuccess) {
		cache_put(dev, kind, addr, in, in_len, &out);
		memcpy(map, &out, sizeof(out));
	}
	return e;
}
/* Counted under the entry point that called it (stats.h). */
#define tensor_map(...) FE_DRV(tensor_map(FE_API_SITE, __VA_ARGS__))

/* The alignment of the address and strides: 32 bytes with 32-byte interleave
 * and for the packed types aligned to 16 bytes, else 16. */
static uint64_t alignment(CUtensorMapDataType dtype, CUtensorMapInterleave interleave)
{
	return interleave == CU_TENSOR_MAP_INTERLEAVE_32B || dtype == CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B ||
			       dtype == CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B
		       ? 32
		       : 16;
}

/* What the three encoders share, checked and packed into p; 0 or
 * CUDA_ERROR_INVALID_VALUE. */
static CUresult common(proto_tmap_params *p, const CUtensorMap *map, CUtensorMapDataType dtype, cuuint32_t rank,
		       cuuint32_t min_rank, const void *addr, const cuuint64_t *dim, const cuuint64_t *stride,
		       const cuuint32_t *estride, CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
		       CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob)
{
	memset(p, 0, sizeof(*p));
	if (!map)
		return CUDA_ERROR_INVALID_VALUE;
	if ((unsigned)dtype > CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B ||
	    (unsigned)interleave > CU_TENSOR_MAP_INTERLEAVE_32B ||
	    (unsigned)swizzle > CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B ||
	    (unsigned)l2 > CU_TENSOR_MAP_L2_PROMOTION_L2_256B ||
	    (unsigned)oob > CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA)
		return CUDA_ERROR_INVALID_VALUE;
	if (interleave != CU_TENSOR_MAP_INTERLEAVE_NONE && min_rank < 3)
		min_rank = 3;
	if (rank < min_rank || rank > PROTO_TMAP_MAX_RANK)
		return CUDA_ERROR_INVALID_VALUE;
	uint64_t align = alignment(dtype, interleave);
	if ((uintptr_t)addr % align || !dim || !estride || !stride) /* even at rank 1 */
		return CUDA_ERROR_INVALID_VALUE;
	for (cuuint32_t i = 0; i < rank; i++) {
		if (dim[i] == 0 || dim[i] > (1ull << 32))
			return CUDA_ERROR_INVALID_VALUE;
		if ((i > 0 || interleave != CU_TENSOR_MAP_INTERLEAVE_NONE) && (estride[i] == 0 || estride[i] > 8))
			return CUDA_ERROR_INVALID_VALUE;
		p->dim[i] = dim[i];
		p->estride[i] = estride[i];
	}
	for (cuuint32_t i = 0; i + 1 < rank; i++) {
		if (stride[i] % align || stride[i] >= (1ull << 40))
			return CUDA_ERROR_INVALID_VALUE;
		p->stride[i] = stride[i];
	}
	p->dtype = dtype;
	p->rank = rank;
	p->interleave = interleave;
	p->swizzle = swizzle;
	p->l2 = l2;
	p->oob = oob;
	return CUDA_SUCCESS;
}

CUresult cuTensorMapEncodeTiled(CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType, cuuint32_t tensorRank,
				void *globalAddress, const cuuint64_t *globalDim, const cuuint64_t *globalStrides,
				const cuuint32_t *boxDim, const cuuint32_t *elementStrides,
				CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
				CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill)
{
	proto_tmap_params p;
	CUresult r = common(&p, tensorMap, tensorDataType, tensorRank, 1, globalAddress, globalDim, globalStrides,
			    elementStrides, interleave, swizzle, l2Promotion, oobFill);
	if (r)
		return r;
	if (!boxDim)
		return CUDA_ERROR_INVALID_VALUE;
	for (cuuint32_t i = 0; i < tensorRank; i++) {
		if (boxDim[i] == 0 || boxDim[i] > 256)
			return CUDA_ERROR_INVALID_VALUE;
		p.box[i] = boxDim[i];
	}
	return tensor_map(tensorMap, PROTO_TMAP_TILED, (CUdeviceptr)(uintptr_t)globalAddress, &p, sizeof(p),
			  proto_tmap_extent(&p));
}

CUresult cuTensorMapEncodeIm2col(CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType, cuuint32_t tensorRank,
				 void *globalAddress, const cuuint64_t *globalDim, const cuuint64_t *globalStrides,
				 const int *pixelBoxLowerCorner, const int *pixelBoxUpperCorner,
				 cuuint32_t channelsPerPixel, cuuint32_t pixelsPerColumn,
				 const cuuint32_t *elementStrides, CUtensorMapInterleave interleave,
				 CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion,
				 CUtensorMapFloatOOBfill oobFill)
{
	/* The corners' range by rank: one offset of 16 bits, two of 8, three of 5. */
	static const int lim[] = {0, 0, 0, 32768, 128, 16};
	proto_tmap_params p;
	CUresult r = common(&p, tensorMap, tensorDataType, tensorRank, 3, globalAddress, globalDim, globalStrides,
			    elementStrides, interleave, swizzle, l2Promotion, oobFill);
	if (r)
		return r;
	if (!pixelBoxLowerCorner || !pixelBoxUpperCorner || channelsPerPixel > 256 || pixelsPerColumn > 1024)
		return CUDA_ERROR_INVALID_VALUE;
	for (cuuint32_t i = 0; i + 2 < tensorRank; i++) {
		int lo = pixelBoxLowerCorner[i], up = pixelBoxUpperCorner[i], m = lim[tensorRank];
		if (lo < -m || lo >= m || up < -m || up >= m)
			return CUDA_ERROR_INVALID_VALUE;
		p.lower[i] = lo;
		p.upper[i] = up;
	}
	p.channels = channelsPerPixel;
	p.pixels = pixelsPerColumn;
	return tensor_map(tensorMap, PROTO_TMAP_IM2COL, (CUdeviceptr)(uintptr_t)globalAddress, &p, sizeof(p),
			  proto_tmap_extent(&p));
}

CUresult cuTensorMapEncodeIm2colWide(CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType,
				     cuuint32_t tensorRank, void *globalAddress, const cuuint64_t *globalDim,
				     const cuuint64_t *globalStrides, int pixelBoxLowerCornerWidth,
				     int pixelBoxUpperCornerWidth, cuuint32_t channelsPerPixel,
				     cuuint32_t pixelsPerColumn, const cuuint32_t *elementStrides,
				     CUtensorMapInterleave interleave, CUtensorMapIm2ColWideMode mode,
				     CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion,
				     CUtensorMapFloatOOBfill oobFill)
{
	proto_tmap_params p;
	CUresult r = common(&p, tensorMap, tensorDataType, tensorRank, 3, globalAddress, globalDim, globalStrides,
			    elementStrides, interleave, swizzle, l2Promotion, oobFill);
	if (r)
		return r;
	if ((unsigned)mode > CU_TENSOR_MAP_IM2COL_WIDE_MODE_W128 || channelsPerPixel > 256 || pixelsPerColumn > 1024 ||
	    pixelBoxLowerCornerWidth < -32768 || pixelBoxLowerCornerWidth > 32767 ||
	    pixelBoxUpperCornerWidth < -32768 || pixelBoxUpperCornerWidth > 32767)
		return CUDA_ERROR_INVALID_VALUE;
	p.lower[0] = pixelBoxLowerCornerWidth;
	p.upper[0] = pixelBoxUpperCornerWidth;
	p.channels = channelsPerPixel;
	p.pixels = pixelsPerColumn;
	p.mode = mode;
	return tensor_map(tensorMap, PROTO_TMAP_IM2COL_WIDE, (CUdeviceptr)(uintptr_t)globalAddress, &p, sizeof(p),
			  proto_tmap_extent(&p));
}

/* The map's own alignment rule for the address (32 bytes for some) is in its
 * opaque bytes: the server's driver judges it; 16 bytes is every map's. */
CUresult cuTensorMapReplaceAddress(CUtensorMap *tensorMap, void *globalAddress)
{
	if (!tensorMap || (uintptr_t)tensorMap % 64 || (uintptr_t)globalAddress % 16)
		return CUDA_ERROR_INVALID_VALUE;
	CUtensorMap in;
	memcpy(&in, tensorMap, sizeof(in));
	return tensor_map(tensorMap, PROTO_TMAP_REPLACE, (CUdeviceptr)(uintptr_t)globalAddress, &in, sizeof(in), 1);
}
