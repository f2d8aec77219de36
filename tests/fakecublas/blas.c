/*
 * libcublas.so.13 test double (fakeblas.h): the cuBLAS functions remote-gpu
 * forwards (api/cublas.api). Each logs its call; the float and double gemms and
 * dot products compute on the host; the batched solvers check their sizes and
 * write the host `info` as cuBLAS does; the rest only log.
 */
#include <string.h>

#include "fakeblas.h"

#define HANDLE(h)                                                     \
	fb_obj *o = fb_get(h, FB_BLAS);                               \
	if (!o) {                                                     \
		fb_log_begin(__func__);                               \
		fb_arg_obj("handle", h);                              \
		fb_log_end();                                         \
		return CUBLAS_STATUS_NOT_INITIALIZED;                 \
	}
#define DEV(o) ((o)->ptr_mode == CUBLAS_POINTER_MODE_DEVICE)

/* ---- handles and modes ---- */

cublasStatus_t cublasCreate_v2(cublasHandle_t *handle)
{
	if (!handle)
		return CUBLAS_STATUS_INVALID_VALUE;
	fb_obj *o = fb_new(FB_BLAS);
	if (!o)
		return CUBLAS_STATUS_ALLOC_FAILED;
	*handle = (cublasHandle_t)o;
	fb_log_begin(__func__);
	fb_arg_obj("new", o);
	fb_log_end();
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle)
{
	HANDLE(handle);
	fb_log_begin(__func__);
	fb_arg_obj("handle", o);
	fb_log_end();
	fb_free(o);
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId)
{
	HANDLE(handle);
	o->stream = (CUstream)streamId;
	fb_log_begin(__func__);
	fb_arg_obj("handle", o);
	fb_arg_stream("stream", (CUstream)streamId);
	fb_log_end();
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void *workspace, size_t workspaceSizeInBytes)
{
	HANDLE(handle);
	fb_log_begin(__func__);
	fb_arg_obj("handle", o);
	fb_arg_ptr("workspace", workspace);
	fb_arg_uns("size", workspaceSizeInBytes);
	fb_log_end();
	return workspaceSizeInBytes && !fb_dev_ok(workspace, workspaceSizeInBytes) ? CUBLAS_STATUS_INVALID_VALUE
										    : CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t mode)
{
	HANDLE(handle);
	fb_log_begin(__func__);
	fb_arg_obj("handle", o);
	fb_arg_int("mode", mode);
	fb_log_end();
	if (mode != CUBLAS_POINTER_MODE_HOST && mode != CUBLAS_POINTER_MODE_DEVICE)
		return CUBLAS_STATUS_INVALID_VALUE;
	o->ptr_mode = mode;
	return CUBLAS_STATUS_SUCCESS;
}

/* Queries are not logged: the server asks them itself (pointer-mode checks). */
cublasStatus_t cublasGetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t *mode)
{
	fb_obj *o = fb_get(handle, FB_BLAS);
	if (!o)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	if (!mode)
		return CUBLAS_STATUS_INVALID_VALUE;
	*mode = o->ptr_mode;
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode)
{
	HANDLE(handle);
	fb_log_begin(__func__);
	fb_arg_obj("handle", o);
	fb_arg_int("mode", mode);
	fb_log_end();
	o->math_mode = mode;
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t *mode)
{
	fb_obj *o = fb_get(handle, FB_BLAS);
	if (!o)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	if (!mode)
		return CUBLAS_STATUS_INVALID_VALUE;
	*mode = o->math_mode;
	return CUBLAS_STATUS_SUCCESS;
}

/* ---- dot products ---- */

#define DOT(name, T, compute)                                                                                 \
	cublasStatus_t name(cublasHandle_t handle, int n, const T *x, int incx, const T *y, int incy, T *result) \
	{                                                                                                     \
		HANDLE(handle);                                                                               \
		fb_log_begin(__func__);                                                                       \
		fb_arg_obj("handle", o);                                                                      \
		fb_arg_int("n", n);                                                                           \
		fb_arg_ptr("x", x);                                                                           \
		fb_arg_int("incx", incx);                                                                     \
		fb_arg_ptr("y", y);                                                                           \
		fb_arg_int("incy", incy);                                                                     \
		fb_arg_str("result", DEV(o) ? "dev" : "host");                                                \
		if (DEV(o))                                                                                   \
			fb_arg_ptr("at", result);                                                             \
		fb_log_end();                                                                                 \
		if (!result)                                                                                  \
			return CUBLAS_STATUS_INVALID_VALUE;                                                   \
		T acc;                                                                                        \
		memset(&acc, 0, sizeof(acc));                                                                 \
		if (compute && n > 0) {                                                                       \
			size_t sx = ((size_t)(n - 1) * (size_t)(incx > 0 ? incx : -incx) + 1) * sizeof(T);    \
			size_t sy = ((size_t)(n - 1) * (size_t)(incy > 0 ? incy : -incy) + 1) * sizeof(T);    \
			if (incx <= 0 || incy <= 0 || !fb_dev_ok(x, sx) || !fb_dev_ok(y, sy))                  \
				return CUBLAS_STATUS_EXECUTION_FAILED;                                        \
			for (int i = 0; i < n; i++)                                                           \
				DOT_ACC(acc, x[(long long)i * incx], y[(long long)i * incy]);                 \
		}                                                                                             \
		if (DEV(o) && !fb_dev_ok(result, sizeof(T)))                                                  \
			return CUBLAS_STATUS_EXECUTION_FAILED;                                                \
		memcpy(result, &acc, sizeof(acc));                                                            \
		return CUBLAS_STATUS_SUCCESS;                                                                 \
	}
#define DOT_ACC(acc, a, b) ((acc) += (a) * (b))
DOT(cublasSdot_v2, float, 1)
DOT(cublasDdot_v2, double, 1)
#undef DOT_ACC
#define DOT_ACC(acc, a, b) ((void)(a), (void)(b))
DOT(cublasCdotu_v2, cuComplex, 0)
DOT(cublasCdotc_v2, cuComplex, 0)
DOT(cublasZdotu_v2, cuDoubleComplex, 0)
DOT(cublasZdotc_v2, cuDoubleComplex, 0)
#undef DOT_ACC

static size_t dtype_size(cudaDataType t)
{
	switch (t) {
	case CUDA_R_16F: case CUDA_R_16BF: return 2;
	case CUDA_R_32F: case CUDA_C_16F: return 4;
	case CUDA_R_64F: case CUDA_C_32F: return 8;
	case CUDA_C_64F: return 16;
	default: return 4;
	}
}

cublasStatus_t cublasDotEx(cublasHandle_t handle, int n, const void *x, cudaDataType xType, int incx, const void *y,
			   cudaDataType yType, int incy, void *result, cudaDataType resultType,
			   cudaDataType executionType)
{
	HANDLE(handle);
	fb_log_begin(__func__);
	fb_arg_obj("handle", o);
	fb_arg_int("n", n);
	fb_arg_ptr("x", x);
	fb_arg_int("xType", xType);
	fb_arg_int("incx", incx);
	fb_arg_ptr("y", y);
	fb_arg_int("yType", yType);
	fb_arg_int("incy", incy);
	fb_arg_str("result", DEV(o) ? "dev" : "host");
	fb_arg_int("resultType", resultType);
	fb_arg_int("executionType", executionType);
	fb_log_end();
	if (!result)
		return CUBLAS_STATUS_INVALID_VALUE;
	/* Only the result's size matters here: a recognisable pattern of it. */
	memset(result, 0x5a, dtype_size(resultType));
	return CUBLAS_STATUS_SUCCESS;
}

/* ---- gemv, gemm, trsm ---- */

#define SCALAR(name, p, T) fb_arg_scalar(name, p, sizeof(T), DEV(o))

#define GEMV(name, T)                                                                                      \
	cublasStatus_t name(cublasHandle_t handle, cublasOperation_t trans, int m, int n, const T *alpha,     \
			    const T *A, int lda, const T *x, int incx, const T *beta, T *y, int incy)        \
	{                                                                                                  \
		HANDLE(handle);                                                                            \
		fb_log_begin(__func__);                                                                    \
		fb_arg_obj("handle", o);                                                                   \
		fb_arg_int("trans", trans);                                                                \
		fb_arg_int("m", m);                                                                        \
		fb_arg_int("n", n);                                                                        \
		SCALAR("alpha", alpha, T);                                                                 \
		fb_arg_ptr("A", A);                                                                        \
		fb_arg_int("lda", lda);                                                                    \
		fb_arg_ptr("x", x);                                                                        \
		fb_arg_int("incx", incx);                                                                  \
		SCALAR("beta", beta, T);                                                                   \
		fb_arg_ptr("y", y);                                                                        \
		fb_arg_int("incy", incy);                                                                  \
		fb_log_end();                                                                              \
		return CUBLAS_STATUS_SUCCESS;                                                              \
	}
GEMV(cublasSgemv_v2, float)
GEMV(cublasDgemv_v2, double)
GEMV(cublasCgemv_v2, cuComplex)
GEMV(cublasZgemv_v2, cuDoubleComplex)

/* Reads a scalar of the handle's pointer mode (device memory is host RAM). */
#define VAL(p, T) (*(const T *)(p))

#define GEMM_LOG(T)                                \
	fb_log_begin(__func__);                    \
	fb_arg_obj("handle", o);                   \
	fb_arg_int("transa", transa);              \
	fb_arg_int("transb", transb);              \
	fb_arg_int("m", m);                        \
	fb_arg_int("n", n);                        \
	fb_arg_int("k", k);                        \
	SCALAR("alpha", alpha, T);                 \
	fb_arg_ptr("A", A);                        \
	fb_arg_int("lda", lda);                    \
	fb_arg_ptr("B", B);                        \
	fb_arg_int("ldb", ldb);                    \
	SCALAR("beta", beta, T);                   \
	fb_arg_ptr("C", C);                        \
	fb_arg_int("ldc", ldc)

/* The float gemms: on the handle's stream, captured when it is capturing. */
#define SGEMM_ON(st, al, A_, lda_, B_, ldb_, be, C_, ldc_)                                              \
	fb_sgemm_on((st), &(fb_job){.transa = transa, .transb = transb, .m = m, .n = n, .k = k, .alpha = (al), \
				    .beta = (be), .A = (A_), .lda = (lda_), .B = (B_), .ldb = (ldb_), .C = (C_),  \
				    .ldc = (ldc_)})

#define GEMM(name, T, run)                                                                                  \
	cublasStatus_t name(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,  \
			    int n, int k, const T *alpha, const T *A, int lda, const T *B, int ldb, const T *beta, \
			    T *C, int ldc)                                                                    \
	{                                                                                                   \
		HANDLE(handle);                                                                             \
		GEMM_LOG(T);                                                                                \
		fb_log_end();                                                                               \
		if (!alpha || !beta)                                                                        \
			return CUBLAS_STATUS_INVALID_VALUE;                                                 \
		return run;                                                                                 \
	}
GEMM(cublasSgemm_v2, float, SGEMM_ON(o->stream, VAL(alpha, float), A, lda, B, ldb, VAL(beta, float), C, ldc))
GEMM(cublasDgemm_v2, double, fb_dgemm(transa, transb, m, n, k, VAL(alpha, double), A, lda, B, ldb, VAL(beta, double), C, ldc))
GEMM(cublasCgemm_v2, cuComplex, CUBLAS_STATUS_SUCCESS)
GEMM(cublasZgemm_v2, cuDoubleComplex, CUBLAS_STATUS_SUCCESS)

cublasStatus_t cublasSgemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
			     int k, const float *alpha, const void *A, cudaDataType Atype, int lda, const void *B,
			     cudaDataType Btype, int ldb, const float *beta, void *C, cudaDataType Ctype, int ldc)
{
	HANDLE(handle);
	GEMM_LOG(float);
	fb_arg_int("Atype", Atype);
	fb_arg_int("Btype", Btype);
	fb_arg_int("Ctype", Ctype);
	fb_log_end();
	if (!alpha || !beta)
		return CUBLAS_STATUS_INVALID_VALUE;
	if (Atype != CUDA_R_32F || Btype != CUDA_R_32F || Ctype != CUDA_R_32F)
		return CUBLAS_STATUS_SUCCESS; /* logged only */
	return SGEMM_ON(o->stream, *alpha, A, lda, B, ldb, *beta, C, ldc);
}

static size_t compute_size(cublasComputeType_t c, cudaDataType ctype)
{
	size_t n = c == CUBLAS_COMPUTE_16F || c == CUBLAS_COMPUTE_16F_PEDANTIC ? 2
		   : c == CUBLAS_COMPUTE_64F || c == CUBLAS_COMPUTE_64F_PEDANTIC ? 8
										  : 4;
	return ctype == CUDA_C_32F || ctype == CUDA_C_64F || ctype == CUDA_C_16F ? 2 * n : n;
}

static int is_32f(cublasComputeType_t c)
{
	return c == CUBLAS_COMPUTE_32F || c == CUBLAS_COMPUTE_32F_PEDANTIC || c == CUBLAS_COMPUTE_32F_FAST_TF32 ||
	       c == CUBLAS_COMPUTE_32F_FAST_16F || c == CUBLAS_COMPUTE_32F_FAST_16BF;
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
			    int k, const void *alpha, const void *A, cudaDataType Atype, int lda, const void *B,
			    cudaDataType Btype, int ldb, const void *beta, void *C, cudaDataType Ctype, int ldc,
			    cublasComputeType_t computeType, cublasGemmAlgo_t algo)
{
	HANDLE(handle);
	size_t sz = compute_size(computeType, Ctype);
	fb_log_begin(__func__);
	fb_arg_obj("handle", o);
	fb_arg_int("transa", transa);
	fb_arg_int("transb", transb);
	fb_arg_int("m", m);
	fb_arg_int("n", n);
	fb_arg_int("k", k);
	fb_arg_scalar("alpha", alpha, sz, DEV(o));
	fb_arg_ptr("A", A);
	fb_arg_int("Atype", Atype);
	fb_arg_int("lda", lda);
	fb_arg_ptr("B", B);
	fb_arg_int("Btype", Btype);
	fb_arg_int("ldb", ldb);
	fb_arg_scalar("beta", beta, sz, DEV(o));
	fb_arg_ptr("C", C);
	fb_arg_int("Ctype", Ctype);
	fb_arg_int("ldc", ldc);
	fb_arg_int("computeType", computeType);
	fb_arg_int("algo", algo);
	fb_log_end();
	if (!alpha || !beta)
		return CUBLAS_STATUS_INVALID_VALUE;
	if (Atype != CUDA_R_32F || Btype != CUDA_R_32F || Ctype != CUDA_R_32F || !is_32f(computeType))
		return CUBLAS_STATUS_SUCCESS; /* logged only */
	return SGEMM_ON(o->stream, VAL(alpha, float), A, lda, B, ldb, VAL(beta, float), C, ldc);
}

#define GEMM_SB(name, T, run)                                                                                \
	cublasStatus_t name(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,   \
			    int n, int k, const T *alpha, const T *A, int lda, long long int strideA, const T *B, \
			    int ldb, long long int strideB, const T *beta, T *C, int ldc, long long int strideC,   \
			    int batchCount)                                                                    \
	{                                                                                                    \
		HANDLE(handle);                                                                              \
		GEMM_LOG(T);                                                                                 \
		fb_arg_int("strideA", strideA);                                                              \
		fb_arg_int("strideB", strideB);                                                              \
		fb_arg_int("strideC", strideC);                                                              \
		fb_arg_int("batchCount", batchCount);                                                        \
		fb_log_end();                                                                                \
		if (!alpha || !beta || batchCount < 0)                                                       \
			return CUBLAS_STATUS_INVALID_VALUE;                                                  \
		for (int b = 0; b < batchCount; b++) {                                                       \
			int r = run;                                                                         \
			if (r)                                                                               \
				return r;                                                                    \
		}                                                                                            \
		return CUBLAS_STATUS_SUCCESS;                                                                \
	}
GEMM_SB(cublasSgemmStridedBatched, float,
	fb_sgemm(transa, transb, m, n, k, VAL(alpha, float), A + b * strideA, lda, B + b * strideB, ldb,
		 VAL(beta, float), C + b * strideC, ldc))
GEMM_SB(cublasDgemmStridedBatched, double,
	fb_dgemm(transa, transb, m, n, k, VAL(alpha, double), A + b * strideA, lda, B + b * strideB, ldb,
		 VAL(beta, double), C + b * strideC, ldc))
GEMM_SB(cublasCgemmStridedBatched, cuComplex, CUBLAS_STATUS_SUCCESS)
GEMM_SB(cublasZgemmStridedBatched, cuDoubleComplex, CUBLAS_STATUS_SUCCESS)

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
					  int m, int n, int k, const void *alpha, const void *A, cudaDataType Atype,
					  int lda, long long int strideA, const void *B, cudaDataType Btype, int ldb,
					  long long int strideB, const void *beta, void *C, cudaDataType Ctype, int ldc,
					  long long int strideC, int batchCount, cublasComputeType_t computeType,
					  cublasGemmAlgo_t algo)
{
	HANDLE(handle);
	size_t sz = compute_size(computeType, Ctype);
	fb_log_begin(__func__);
	fb_arg_obj("handle", o);
	fb_arg_int("transa", transa);
	fb_arg_int("transb", transb);
	fb_arg_int("m", m);
	fb_arg_int("n", n);
	fb_arg_int("k", k);
	fb_arg_scalar("alpha", alpha, sz, DEV(o));
	fb_arg_ptr("A", A);
	fb_arg_int("Atype", Atype);
	fb_arg_int("lda", lda);
	fb_arg_int("strideA", strideA);
	fb_arg_ptr("B", B);
	fb_arg_int("Btype", Btype);
	fb_arg_int("ldb", ldb);
	fb_arg_int("strideB", strideB);
	fb_arg_scalar("beta", beta, sz, DEV(o));
	fb_arg_ptr("C", C);
	fb_arg_int("Ctype", Ctype);
	fb_arg_int("ldc", ldc);
	fb_arg_int("strideC", strideC);
	fb_arg_int("batchCount", batchCount);
	fb_arg_int("computeType", computeType);
	fb_arg_int("algo", algo);
	fb_log_end();
	return alpha && beta ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}

#define TRSM_LOG(T)                          \
	fb_log_begin(__func__);              \
	fb_arg_obj("handle", o);             \
	fb_arg_int("side", side);            \
	fb_arg_int("uplo", uplo);            \
	fb_arg_int("trans", trans);          \
	fb_arg_int("diag", diag);            \
	fb_arg_int("m", m);                  \
	fb_arg_int("n", n);                  \
	SCALAR("alpha", alpha, T);           \
	fb_arg_ptr("A", A);                  \
	fb_arg_int("lda", lda);              \
	fb_arg_ptr("B", B);                  \
	fb_arg_int("ldb", ldb)

#define TRSM(name, T)                                                                                          \
	cublasStatus_t name(cublasHandle_t handle, cublasSideMode_t side, cublasFillMode_t uplo,                 \
			    cublasOperation_t trans, cublasDiagType_t diag, int m, int n, const T *alpha, const T *A, \
			    int lda, T *B, int ldb)                                                              \
	{                                                                                                      \
		HANDLE(handle);                                                                                \
		TRSM_LOG(T);                                                                                   \
		fb_log_end();                                                                                  \
		return CUBLAS_STATUS_SUCCESS;                                                                  \
	}
TRSM(cublasStrsm_v2, float)
TRSM(cublasDtrsm_v2, double)
TRSM(cublasCtrsm_v2, cuComplex)
TRSM(cublasZtrsm_v2, cuDoubleComplex)

#define TRSM_BATCHED(name, T)                                                                                  \
	cublasStatus_t name(cublasHandle_t handle, cublasSideMode_t side, cublasFillMode_t uplo,                 \
			    cublasOperation_t trans, cublasDiagType_t diag, int m, int n, const T *alpha,         \
			    const T *const A[], int lda, T *const B[], int ldb, int batchCount)                  \
	{                                                                                                      \
		HANDLE(handle);                                                                                \
		TRSM_LOG(T);                                                                                   \
		fb_arg_int("batchCount", batchCount);                                                          \
		fb_log_end();                                                                                  \
		return CUBLAS_STATUS_SUCCESS;                                                                  \
	}
TRSM_BATCHED(cublasStrsmBatched, float)
TRSM_BATCHED(cublasDtrsmBatched, double)
TRSM_BATCHED(cublasCtrsmBatched, cuComplex)
TRSM_BATCHED(cublasZtrsmBatched, cuDoubleComplex)

/* ---- batched solvers: cuBLAS's parameter checks; `info` (host) is minus the
 * position of the first bad parameter, not counting the handle ---- */

#define MAX1(x) ((x) > 1 ? (x) : 1)
#define INFO(v)                                                                 \
	do {                                                                    \
		if (info)                                                       \
			*info = (v);                                            \
		return (v) ? CUBLAS_STATUS_INVALID_VALUE : CUBLAS_STATUS_SUCCESS; \
	} while (0)

#define GETRF(name, T)                                                                                   \
	cublasStatus_t name(cublasHandle_t handle, int n, T *const A[], int lda, int *P, int *info,        \
			    int batchSize)                                                                \
	{                                                                                                \
		HANDLE(handle);                                                                          \
		fb_log_begin(__func__);                                                                  \
		fb_arg_obj("handle", o);                                                                 \
		fb_arg_int("n", n);                                                                      \
		fb_arg_ptr("A", A);                                                                      \
		fb_arg_int("lda", lda);                                                                  \
		fb_arg_ptr("P", P);                                                                      \
		fb_arg_ptr("info", info);                                                                \
		fb_arg_int("batchSize", batchSize);                                                      \
		fb_log_end();                                                                            \
		/* info is a device array here: written when it is one */                                \
		if (batchSize > 0 && fb_dev_ok(info, (size_t)batchSize * sizeof(int)))                   \
			memset(info, 0, (size_t)batchSize * sizeof(int));                                \
		return n < 0 || lda < MAX1(n) || batchSize < 0 ? CUBLAS_STATUS_INVALID_VALUE             \
							       : CUBLAS_STATUS_SUCCESS;                  \
	}
GETRF(cublasSgetrfBatched, float)
GETRF(cublasDgetrfBatched, double)
GETRF(cublasCgetrfBatched, cuComplex)
GETRF(cublasZgetrfBatched, cuDoubleComplex)

#define GETRS(name, T)                                                                                     \
	cublasStatus_t name(cublasHandle_t handle, cublasOperation_t trans, int n, int nrhs,                 \
			    const T *const Aarray[], int lda, const int *devIpiv, T *const Barray[], int ldb,  \
			    int *info, int batchSize)                                                       \
	{                                                                                                  \
		HANDLE(handle);                                                                            \
		fb_log_begin(__func__);                                                                    \
		fb_arg_obj("handle", o);                                                                   \
		fb_arg_int("trans", trans);                                                                \
		fb_arg_int("n", n);                                                                        \
		fb_arg_int("nrhs", nrhs);                                                                  \
		fb_arg_ptr("Aarray", Aarray);                                                              \
		fb_arg_int("lda", lda);                                                                    \
		fb_arg_ptr("devIpiv", devIpiv);                                                            \
		fb_arg_ptr("Barray", Barray);                                                              \
		fb_arg_int("ldb", ldb);                                                                    \
		fb_arg_int("batchSize", batchSize);                                                        \
		fb_log_end();                                                                              \
		if (!info)                                                                                 \
			return CUBLAS_STATUS_INVALID_VALUE;                                                \
		INFO(n < 0 ? -2 : nrhs < 0 ? -3 : lda < MAX1(n) ? -5 : ldb < MAX1(n) ? -8 : batchSize < 0 ? -10 : 0); \
	}
GETRS(cublasSgetrsBatched, float)
GETRS(cublasDgetrsBatched, double)
GETRS(cublasCgetrsBatched, cuComplex)
GETRS(cublasZgetrsBatched, cuDoubleComplex)

#define GEQRF(name, T)                                                                                       \
	cublasStatus_t name(cublasHandle_t handle, int m, int n, T *const Aarray[], int lda, T *const TauArray[], \
			    int *info, int batchSize)                                                         \
	{                                                                                                    \
		HANDLE(handle);                                                                              \
		fb_log_begin(__func__);                                                                      \
		fb_arg_obj("handle", o);                                                                     \
		fb_arg_int("m", m);                                                                          \
		fb_arg_int("n", n);                                                                          \
		fb_arg_ptr("Aarray", Aarray);                                                                \
		fb_arg_int("lda", lda);                                                                      \
		fb_arg_ptr("TauArray", TauArray);                                                            \
		fb_arg_int("batchSize", batchSize);                                                          \
		fb_log_end();                                                                                \
		if (!info)                                                                                   \
			return CUBLAS_STATUS_INVALID_VALUE;                                                  \
		INFO(m < 0 ? -1 : n < 0 ? -2 : lda < MAX1(m) ? -4 : batchSize < 0 ? -7 : 0);                 \
	}
GEQRF(cublasSgeqrfBatched, float)
GEQRF(cublasDgeqrfBatched, double)
GEQRF(cublasCgeqrfBatched, cuComplex)
GEQRF(cublasZgeqrfBatched, cuDoubleComplex)

#define GELS(name, T)                                                                                         \
	cublasStatus_t name(cublasHandle_t handle, cublasOperation_t trans, int m, int n, int nrhs,             \
			    T *const Aarray[], int lda, T *const Carray[], int ldc, int *info, int *devInfoArray, \
			    int batchSize)                                                                     \
	{                                                                                                     \
		HANDLE(handle);                                                                               \
		fb_log_begin(__func__);                                                                       \
		fb_arg_obj("handle", o);                                                                      \
		fb_arg_int("trans", trans);                                                                   \
		fb_arg_int("m", m);                                                                           \
		fb_arg_int("n", n);                                                                           \
		fb_arg_int("nrhs", nrhs);                                                                     \
		fb_arg_ptr("Aarray", Aarray);                                                                 \
		fb_arg_int("lda", lda);                                                                       \
		fb_arg_ptr("Carray", Carray);                                                                 \
		fb_arg_int("ldc", ldc);                                                                       \
		fb_arg_ptr("devInfoArray", devInfoArray);                                                     \
		fb_arg_int("batchSize", batchSize);                                                           \
		fb_log_end();                                                                                 \
		if (!info)                                                                                    \
			return CUBLAS_STATUS_INVALID_VALUE;                                                   \
		INFO(trans != CUBLAS_OP_N ? -1 : m < 0 ? -2 : n < 0 || n > m ? -3 : nrhs < 0 ? -4             \
			: lda < MAX1(m) ? -6 : ldc < MAX1(m) ? -8 : batchSize < 0 ? -11 : 0);                 \
	}
GELS(cublasSgelsBatched, float)
GELS(cublasDgelsBatched, double)
GELS(cublasCgelsBatched, cuComplex)
GELS(cublasZgelsBatched, cuDoubleComplex)

/* ---- what cuSOLVER calls besides (api/cublas.api, its last section): one of each
 * shape of line; the rest of that section is not here (answered not supported) ---- */

/* Exported by libcublas.so.13, declared by no header (api/cublas.api: @proto).
 * As the library: a mode above 1 is INVALID_VALUE. */
__attribute__((visibility("default"))) cublasStatus_t cublasSetEnvironmentMode(cublasHandle_t handle, int mode);

cublasStatus_t cublasSetEnvironmentMode(cublasHandle_t handle, int mode)
{
	HANDLE(handle);
	fb_log_begin(__func__);
	fb_arg_obj("handle", o);
	fb_arg_int("mode", mode);
	fb_log_end();
	return (unsigned)mode > 1 ? CUBLAS_STATUS_INVALID_VALUE : CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetAtomicsMode(cublasHandle_t handle, cublasAtomicsMode_t mode)
{
	HANDLE(handle);
	fb_log_begin(__func__);
	fb_arg_obj("handle", o);
	fb_arg_int("mode", mode);
	fb_log_end();
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetEmulationStrategy(cublasHandle_t handle, cublasEmulationStrategy_t emulationStrategy)
{
	HANDLE(handle);
	fb_log_begin(__func__);
	fb_arg_obj("handle", o);
	fb_arg_int("strategy", emulationStrategy);
	fb_log_end();
	return CUBLAS_STATUS_SUCCESS;
}

/* A vector of n floats at stride inc lies in one allocation. */
static int vec_ok(const float *x, int n, int inc)
{
	return n <= 0 || (inc > 0 && fb_dev_ok(x, ((size_t)(n - 1) * (size_t)inc + 1) * sizeof(float)));
}

/* The result by pointer mode, as the dot products. */
static cublasStatus_t put_result(fb_obj *o, void *result, const void *v, size_t n)
{
	if (!result)
		return CUBLAS_STATUS_INVALID_VALUE;
	if (DEV(o) && !fb_dev_ok(result, n))
		return CUBLAS_STATUS_EXECUTION_FAILED;
	memcpy(result, v, n);
	return CUBLAS_STATUS_SUCCESS;
}

#define RESULT_LOG(o, result)                                   \
	fb_arg_str("result", DEV(o) ? "dev" : "host");          \
	if (DEV(o))                                             \
		fb_arg_ptr("at", result)

/* Sum of squares, without cuBLAS's scaling (the tests use small values). */
cublasStatus_t cublasSnrm2_v2(cublasHandle_t handle, int n, const float *x, int incx, float *result)
{
	HANDLE(handle);
	fb_log_begin(__func__);
	fb_arg_obj("handle", o);
	fb_arg_int("n", n);
	fb_arg_ptr("x", x);
	fb_arg_int("incx", incx);
	RESULT_LOG(o, result);
	fb_log_end();
	if (!vec_ok(x, n, incx))
		return CUBLAS_STATUS_EXECUTION_FAILED;
	double acc = 0;
	for (int i = 0; i < n; i++)
		acc += (double)x[(long long)i * incx] * x[(long long)i * incx];
	float r = 0;
	while ((double)(r + 1) * (r + 1) <= acc) /* floor of the root: exact for the tests' squares */
		r++;
	return put_result(o, result, &r, sizeof(r));
}

/* 1-based index of the first largest |x[i]|. */
cublasStatus_t cublasIsamax_v2(cublasHandle_t handle, int n, const float *x, int incx, int *result)
{
	HANDLE(handle);
	fb_log_begin(__func__);
	fb_arg_obj("handle", o);
	fb_arg_int("n", n);
	fb_arg_ptr("x", x);
	fb_arg_int("incx", incx);
	RESULT_LOG(o, result);
	fb_log_end();
	if (!vec_ok(x, n, incx))
		return CUBLAS_STATUS_EXECUTION_FAILED;
	int best = 0;
	for (int i = 0; i < n; i++) {
		float a = x[(long long)i * incx], b = best ? x[(long long)(best - 1) * incx] : 0;
		if (!best || (a < 0 ? -a : a) > (b < 0 ? -b : b))
			best = i + 1;
	}
	return put_result(o, result, &best, sizeof(best));
}

/* Two scalars by pointer mode, 64-bit sizes. */
cublasStatus_t cublasSrot_v2_64(cublasHandle_t handle, int64_t n, float *x, int64_t incx, float *y, int64_t incy,
				const float *c, const float *s)
{
	HANDLE(handle);
	fb_log_begin(__func__);
	fb_arg_obj("handle", o);
	fb_arg_int("n", n);
	fb_arg_ptr("x", x);
	fb_arg_int("incx", incx);
	fb_arg_ptr("y", y);
	fb_arg_int("incy", incy);
	SCALAR("c", c, float);
	SCALAR("s", s, float);
	fb_log_end();
	return CUBLAS_STATUS_SUCCESS;
}

/* Real alpha and beta of a complex function. */
cublasStatus_t cublasCherk_v2(cublasHandle_t handle, cublasFillMode_t uplo, cublasOperation_t trans, int n, int k,
			      const float *alpha, const cuComplex *A, int lda, const float *beta, cuComplex *C, int ldc)
{
	HANDLE(handle);
	fb_log_begin(__func__);
	fb_arg_obj("handle", o);
	fb_arg_int("uplo", uplo);
	fb_arg_int("trans", trans);
	fb_arg_int("n", n);
	fb_arg_int("k", k);
	SCALAR("alpha", alpha, float);
	fb_arg_ptr("A", A);
	fb_arg_int("lda", lda);
	SCALAR("beta", beta, float);
	fb_arg_ptr("C", C);
	fb_arg_int("ldc", ldc);
	fb_log_end();
	return CUBLAS_STATUS_SUCCESS;
}

/* C = alpha op(A) + beta op(B), computed without transposes. */
cublasStatus_t cublasSgeam(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
			   const float *alpha, const float *A, int lda, const float *beta, const float *B, int ldb,
			   float *C, int ldc)
{
	HANDLE(handle);
	fb_log_begin(__func__);
	fb_arg_obj("handle", o);
	fb_arg_int("transa", transa);
	fb_arg_int("transb", transb);
	fb_arg_int("m", m);
	fb_arg_int("n", n);
	SCALAR("alpha", alpha, float);
	fb_arg_ptr("A", A);
	fb_arg_int("lda", lda);
	SCALAR("beta", beta, float);
	fb_arg_ptr("B", B);
	fb_arg_int("ldb", ldb);
	fb_arg_ptr("C", C);
	fb_arg_int("ldc", ldc);
	fb_log_end();
	if (!alpha || !beta)
		return CUBLAS_STATUS_INVALID_VALUE;
	if (transa != CUBLAS_OP_N || transb != CUBLAS_OP_N || m <= 0 || n <= 0)
		return CUBLAS_STATUS_SUCCESS; /* logged only */
#define SPAN(ld) (((size_t)(n - 1) * (size_t)(ld) + (size_t)m) * sizeof(float))
	if (lda < m || ldb < m || ldc < m || !fb_dev_ok(A, SPAN(lda)) || !fb_dev_ok(B, SPAN(ldb)) ||
	    !fb_dev_ok(C, SPAN(ldc)))
		return CUBLAS_STATUS_EXECUTION_FAILED;
#undef SPAN
	float a = VAL(alpha, float), b = VAL(beta, float);
	for (int j = 0; j < n; j++)
		for (int i = 0; i < m; i++)
			C[i + (long long)j * ldc] = a * A[i + (long long)j * lda] + b * B[i + (long long)j * ldb];
	return CUBLAS_STATUS_SUCCESS;
}
