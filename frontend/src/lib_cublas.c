/*
 * cuBLAS and cuBLASLt on the client, the part api/cublas.api cannot say in a line:
 * the state that decides how scalars travel, and the entry points marked `custom`,
 * which keep that state and answer what the client knows without asking.
 *
 * Pointer modes. alpha and beta are host values or device addresses as the handle's
 * pointer mode says (cublasLtMatmul: the matmul descriptor's). The client records
 * each cublasSetPointerMode, CUBLASLT_MATMUL_DESC_POINTER_MODE and the descriptor's
 * scale type (which sizes Lt's scalars); the server checks against the library's own
 * view, so a client that got it wrong is refused, not trusted.
 *
 * Answered locally: cublasGetPointerMode, cublasGetMathMode and cublasGetStream
 * (the modes and the stream change only through the calls recorded here),
 * cublasSetMatrixAsync (a copy, which the runtime layer makes), cublasLtGetVersion
 * after its first call,
 * and cublasLtMatmulAlgoGetHeuristic when asked again about descriptors in the same
 * state (below).
 *
 * Heuristics cache. PyTorch creates fresh descriptors for every Lt matmul and asks
 * for a heuristic each time: a synchronous round trip per matmul. The answer is
 * a function of the descriptors' state (creation arguments and attributes), the
 * handle and the count asked for; the client saw every call that made that state
 * (lib.h: object histories, the lines marked `record`), so it keys a cache on
 * those exact bytes (lru_cache.c: the least recently asked dropped beyond
 * HC_MAX). Only successful answers are kept. A hit does not reach the
 * server, so a status latched by an earlier async call surfaces at the next call
 * that does.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "drv.h"
#include "lib_cublas.h"
#include "lru_cache.h"
#include "rg_log.h"

enum { W_PTR_MODE = 0, W_MATH_MODE = 1, W_STREAM = 2 }; /* cublasHandle_t */
enum { W_SCALE_TYPE = 0, W_LT_PTR_MODE = 1 }; /* cublasLtMatmulDesc_t */

/* ---- pointer modes (gen/lib_cublas_gen.h) ---- */

int fe_cublas_mode_blas(uint64_t id, int which)
{
	return fe_lib_state(id, W_PTR_MODE) == CUBLAS_POINTER_MODE_DEVICE;
}

/* As the server reads it (backend/src/lib_cublas.c). */
int fe_cublas_mode_ltdesc(uint64_t id, int which)
{
	switch (fe_lib_state(id, W_LT_PTR_MODE)) {
	case CUBLASLT_POINTER_MODE_DEVICE:
	case CUBLASLT_POINTER_MODE_DEVICE_VECTOR:
	case CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_ZERO:
		return 1;
	case CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST:
		return which == 0;
	default:
		return 0;
	}
}

/* ---- scalar sizes ---- */

size_t fe_cublas_dtype_size(cudaDataType t)
{
	switch (t) {
	case CUDA_R_8I: case CUDA_R_8U: case CUDA_R_8F_E4M3: case CUDA_R_8F_E5M2: case CUDA_R_8F_UE8M0:
		return 1;
	case CUDA_R_16F: case CUDA_R_16BF: case CUDA_R_16I: case CUDA_R_16U: case CUDA_C_8I: case CUDA_C_8U:
		return 2;
	case CUDA_R_32F: case CUDA_R_32I: case CUDA_R_32U: case CUDA_C_16F: case CUDA_C_16BF: case CUDA_C_16I:
	case CUDA_C_16U:
		return 4;
	case CUDA_R_64F: case CUDA_R_64I: case CUDA_R_64U: case CUDA_C_32F: case CUDA_C_32I: case CUDA_C_32U:
		return 8;
	case CUDA_C_64F: case CUDA_C_64I: case CUDA_C_64U:
		return 16;
	default:
		rg_log_once("frontend", "data type of unknown size (scalars sent as 4 bytes)", "cuBLAS");
		return 4;
	}
}

static int is_complex(cudaDataType t)
{
	switch (t) {
	case CUDA_C_16F: case CUDA_C_16BF: case CUDA_C_32F: case CUDA_C_64F: case CUDA_C_8I: case CUDA_C_8U:
	case CUDA_C_16I: case CUDA_C_16U: case CUDA_C_32I: case CUDA_C_32U: case CUDA_C_64I: case CUDA_C_64U:
		return 1;
	default:
		return 0;
	}
}

size_t fe_cublas_compute_size(cublasComputeType_t compute, cudaDataType ctype)
{
	size_t n;
	switch (compute) {
	case CUBLAS_COMPUTE_16F: case CUBLAS_COMPUTE_16F_PEDANTIC:
		n = 2;
		break;
	case CUBLAS_COMPUTE_64F: case CUBLAS_COMPUTE_64F_PEDANTIC: case CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT:
		n = 8;
		break;
	case CUBLAS_COMPUTE_32I: case CUBLAS_COMPUTE_32I_PEDANTIC:
		return 4;
	default: /* the 32F family */
		n = 4;
		break;
	}
	return is_complex(ctype) ? 2 * n : n;
}

size_t fe_cublas_lt_scale_size(uint64_t desc)
{
	return fe_cublas_dtype_size((cudaDataType)fe_lib_state(desc, W_SCALE_TYPE));
}

/* ---- entry points with client state ---- */

cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t mode)
{
	if (mode != CUBLAS_POINTER_MODE_HOST && mode != CUBLAS_POINTER_MODE_DEVICE)
		return CUBLAS_STATUS_INVALID_VALUE;
	cublasStatus_t st = fe_lib_cublasSetPointerMode_v2(handle, mode);
	if (st == CUBLAS_STATUS_SUCCESS)
		fe_lib_set_state(fe_lib_id(handle), W_PTR_MODE, (uint64_t)mode);
	return st;
}

cublasStatus_t cublasGetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t *mode)
{
	if (fe_lib_kind(fe_lib_id(handle)) != FE_CUBLAS_K_BLAS)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	if (!mode)
		return CUBLAS_STATUS_INVALID_VALUE;
	*mode = (cublasPointerMode_t)fe_lib_state(fe_lib_id(handle), W_PTR_MODE);
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode)
{
	cublasStatus_t st = fe_lib_cublasSetMathMode(handle, mode);
	if (st == CUBLAS_STATUS_SUCCESS)
		fe_lib_set_state(fe_lib_id(handle), W_MATH_MODE, (uint64_t)mode);
	return st;
}

cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t *mode)
{
	if (fe_lib_kind(fe_lib_id(handle)) != FE_CUBLAS_K_BLAS)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	if (!mode)
		return CUBLAS_STATUS_INVALID_VALUE;
	*mode = (cublasMath_t)fe_lib_state(fe_lib_id(handle), W_MATH_MODE);
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId)
{
	cublasStatus_t st = fe_lib_cublasSetStream_v2(handle, streamId);
	if (st == CUBLAS_STATUS_SUCCESS)
		fe_lib_set_state(fe_lib_id(handle), W_STREAM, (uint64_t)(uintptr_t)streamId);
	return st;
}

/* The stream as the program passed it (the server knows only its own handle of it). */
cublasStatus_t cublasGetStream_v2(cublasHandle_t handle, cudaStream_t *streamId)
{
	if (fe_lib_kind(fe_lib_id(handle)) != FE_CUBLAS_K_BLAS)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	if (!streamId)
		return CUBLAS_STATUS_INVALID_VALUE;
	*streamId = (cudaStream_t)(uintptr_t)fe_lib_state(fe_lib_id(handle), W_STREAM);
	return CUBLAS_STATUS_SUCCESS;
}

/* As libcublas.so.13 does it: the checks below, then the runtime's copy on the
 * stream; any failure of the copy is a mapping error. FE_DRV keeps the program's
 * cudaGetLastError out of it, as cuBLAS's own copy of the runtime does. */
cublasStatus_t cublasSetMatrixAsync(int rows, int cols, int elemSize, const void *A, int lda, void *B, int ldb,
				    cudaStream_t stream)
{
	if (rows < 0 || cols < 0 || elemSize <= 0 || lda <= 0 || ldb <= 0)
		return CUBLAS_STATUS_INVALID_VALUE;
	if (!rows || !cols)
		return CUBLAS_STATUS_SUCCESS;
	size_t es = (size_t)elemSize;
	CUresult r = lda == rows && ldb == rows
		? FE_DRV(cudaMemcpyAsync(B, A, (size_t)rows * (size_t)cols * es, cudaMemcpyHostToDevice, stream))
		: FE_DRV(cudaMemcpy2DAsync(B, (size_t)ldb * es, A, (size_t)lda * es, (size_t)rows * es, (size_t)cols,
					   cudaMemcpyHostToDevice, stream));
	return r == CUDA_SUCCESS ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_MAPPING_ERROR;
}

size_t cublasLtGetVersion(void)
{
	static atomic_size_t version;
	size_t v = atomic_load(&version);
	if (!v && (v = fe_lib_cublasLtGetVersion()))
		atomic_store(&version, v);
	return v;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *matmulDesc, cublasComputeType_t computeType,
					cudaDataType_t scaleType)
{
	cublasStatus_t st = fe_lib_cublasLtMatmulDescCreate(matmulDesc, computeType, scaleType);
	if (st == CUBLAS_STATUS_SUCCESS)
		fe_lib_set_state(fe_lib_id(*matmulDesc), W_SCALE_TYPE, (uint64_t)scaleType);
	return st;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc, cublasLtMatmulDescAttributes_t attr,
					      const void *buf, size_t sizeInBytes)
{
	cublasStatus_t st = fe_lib_cublasLtMatmulDescSetAttribute(matmulDesc, attr, buf, sizeInBytes);
	if (st != CUBLAS_STATUS_SUCCESS || !buf || sizeInBytes != sizeof(int32_t))
		return st;
	int32_t v;
	memcpy(&v, buf, sizeof(v));
	if (attr == CUBLASLT_MATMUL_DESC_SCALE_TYPE)
		fe_lib_set_state(fe_lib_id(matmulDesc), W_SCALE_TYPE, (uint64_t)v);
	else if (attr == CUBLASLT_MATMUL_DESC_POINTER_MODE)
		fe_lib_set_state(fe_lib_id(matmulDesc), W_LT_PTR_MODE, (uint64_t)v);
	return st;
}

/* ---- heuristics cache ---- */

/* Entries: about 0.5-1 KiB each (the histories of six objects and one result per
 * algorithm asked for). GPT-2-small generating 64 tokens without a KV cache asks
 * about 3,000 distinct questions a round (48 biased matmuls a token, each layer's
 * bias address in its descriptor, one sequence length a token), all asked again
 * the next round: the bound keeps a few such working sets. */
#define HC_MAX 16384
#define HC_MAX_ALGOS 64 /* larger requests are not cached */

typedef struct hc_head {
	cublasStatus_t st;
	int count;
} hc_head;

static fe_lru *HC;
static pthread_once_t hc_once = PTHREAD_ONCE_INIT;

static void hc_init(void) { HC = fe_lru_new(HC_MAX); }

static int hc_key(fe_lib_buf *k, cublasLtHandle_t lh, const uint64_t objs[6], int requested)
{
	uint64_t head[2] = {fe_lib_id(lh), (uint64_t)requested};
	if (fe_lib_buf_put(k, head, sizeof(head)))
		return -1;
	for (int i = 0; i < 6; i++)
		if (fe_lib_history(objs[i], k))
			return -1;
	return 0;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc,
					      cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
					      cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
					      cublasLtMatmulPreference_t preference, int requestedAlgoCount,
					      cublasLtMatmulHeuristicResult_t heuristicResultsArray[], int *returnAlgoCount)
{
	const uint64_t objs[6] = {fe_lib_id(operationDesc), fe_lib_id(Adesc), fe_lib_id(Bdesc),
				  fe_lib_id(Cdesc), fe_lib_id(Ddesc), fe_lib_id(preference)};
	size_t bytes = (size_t)requestedAlgoCount * sizeof(*heuristicResultsArray);
	fe_lib_buf key = {0};
	pthread_once(&hc_once, hc_init);
	int cacheable = HC && requestedAlgoCount > 0 && requestedAlgoCount <= HC_MAX_ALGOS && heuristicResultsArray &&
			returnAlgoCount && hc_key(&key, lightHandle, objs, requestedAlgoCount) == 0;
	/* the value: status and count, then the whole array as the server wrote it */
	unsigned char val[sizeof(hc_head) + HC_MAX_ALGOS * sizeof(*heuristicResultsArray)];
	size_t vlen;
	if (cacheable && fe_lru_get(HC, key.p, key.len, val, sizeof(val), &vlen) && vlen == sizeof(hc_head) + bytes) {
		hc_head hd;
		memcpy(&hd, val, sizeof(hd));
		memcpy(heuristicResultsArray, val + sizeof(hd), bytes);
		*returnAlgoCount = hd.count;
		free(key.p);
		return hd.st;
	}
	cublasStatus_t st = fe_lib_cublasLtMatmulAlgoGetHeuristic(lightHandle, operationDesc, Adesc, Bdesc, Cdesc,
								 Ddesc, preference, requestedAlgoCount,
								 heuristicResultsArray, returnAlgoCount);
	if (cacheable && st == CUBLAS_STATUS_SUCCESS) {
		hc_head hd = {st, *returnAlgoCount};
		memcpy(val, &hd, sizeof(hd));
		memcpy(val + sizeof(hd), heuristicResultsArray, bytes);
		fe_lru_put(HC, key.p, key.len, val, sizeof(hd) + bytes); /* out of memory: not kept */
	}
	free(key.p);
	return st;
}
