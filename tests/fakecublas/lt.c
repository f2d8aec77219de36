/*
 * libcublasLt.so.13 test double (fakeblas.h): descriptors keep the attributes a
 * float matmul needs; cublasLtMatmulAlgoGetHeuristic returns up to two made-up
 * algorithms whose bytes a test can recognise; cublasLtMatmul computes float
 * D = alpha op(A) op(B) + beta C on the host (other types: logged only).
 */
#include <string.h>

#include "fakeblas.h"

#define OBJ(var, p, kind, status)                          \
	fb_obj *var = fb_get(p, kind);                     \
	if (!var) {                                        \
		fb_log_begin(__func__);                    \
		fb_arg_obj("obj", p);                       \
		fb_log_end();                              \
		return status;                             \
	}

size_t cublasLtGetVersion(void) { return FB_VERSION; }

cublasStatus_t cublasLtCreate(cublasLtHandle_t *lightHandle)
{
	if (!lightHandle)
		return CUBLAS_STATUS_INVALID_VALUE;
	fb_obj *o = fb_new(FB_LT);
	if (!o)
		return CUBLAS_STATUS_ALLOC_FAILED;
	*lightHandle = (cublasLtHandle_t)o;
	fb_log_begin(__func__);
	fb_arg_obj("new", o);
	fb_log_end();
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle)
{
	fb_obj *o = fb_get(lightHandle, FB_LT);
	if (!o || o->kind != FB_LT) {
		fb_log_begin(__func__);
		fb_arg_obj("handle", lightHandle);
		fb_log_end();
		return CUBLAS_STATUS_NOT_INITIALIZED;
	}
	fb_log_begin(__func__);
	fb_arg_obj("handle", o);
	fb_log_end();
	fb_free(o);
	return CUBLAS_STATUS_SUCCESS;
}

/* ---- descriptors ---- */

#define CREATE(kind, out)                                  \
	if (!out)                                          \
		return CUBLAS_STATUS_INVALID_VALUE;        \
	fb_obj *o = fb_new(kind);                          \
	if (!o)                                            \
		return CUBLAS_STATUS_ALLOC_FAILED;         \
	*out = (void *)o

#define DESTROY(p, kind)                                   \
	OBJ(o, p, kind, CUBLAS_STATUS_INVALID_VALUE);      \
	fb_log_begin(__func__);                            \
	fb_arg_obj("obj", o);                              \
	fb_log_end();                                      \
	fb_free(o);                                        \
	return CUBLAS_STATUS_SUCCESS

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *matmulDesc, cublasComputeType_t computeType,
					cudaDataType_t scaleType)
{
	CREATE(FB_DESC, matmulDesc);
	o->compute = computeType;
	o->scale_type = scaleType;
	fb_log_begin(__func__);
	fb_arg_obj("new", o);
	fb_arg_int("computeType", computeType);
	fb_arg_int("scaleType", scaleType);
	fb_log_end();
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc) { DESTROY(matmulDesc, FB_DESC); }

static int32_t as_i32(const void *buf) { int32_t v; memcpy(&v, buf, sizeof(v)); return v; }

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc, cublasLtMatmulDescAttributes_t attr,
					      const void *buf, size_t sizeInBytes)
{
	OBJ(o, matmulDesc, FB_DESC, CUBLAS_STATUS_INVALID_VALUE);
	fb_log_begin(__func__);
	fb_arg_obj("desc", o);
	fb_arg_int("attr", attr);
	fb_arg_hex("buf", buf, sizeInBytes);
	fb_arg_uns("size", sizeInBytes);
	fb_log_end();
	if (!buf)
		return CUBLAS_STATUS_INVALID_VALUE;
	int32_t *field = attr == CUBLASLT_MATMUL_DESC_SCALE_TYPE    ? &o->scale_type
			 : attr == CUBLASLT_MATMUL_DESC_POINTER_MODE ? &o->lt_ptr_mode
			 : attr == CUBLASLT_MATMUL_DESC_TRANSA       ? &o->transa
			 : attr == CUBLASLT_MATMUL_DESC_TRANSB       ? &o->transb
			 : attr == CUBLASLT_MATMUL_DESC_EPILOGUE     ? &o->epilogue
								     : NULL;
	if (field) {
		if (sizeInBytes != sizeof(int32_t))
			return CUBLAS_STATUS_INVALID_VALUE;
		*field = as_i32(buf);
	}
	return CUBLAS_STATUS_SUCCESS; /* others: kept in the log only */
}

/* Not logged: the server asks it for the pointer mode. */
cublasStatus_t cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t matmulDesc, cublasLtMatmulDescAttributes_t attr,
					      void *buf, size_t sizeInBytes, size_t *sizeWritten)
{
	fb_obj *o = fb_get(matmulDesc, FB_DESC);
	if (!o)
		return CUBLAS_STATUS_INVALID_VALUE;
	int32_t v = attr == CUBLASLT_MATMUL_DESC_SCALE_TYPE    ? o->scale_type
		    : attr == CUBLASLT_MATMUL_DESC_POINTER_MODE ? o->lt_ptr_mode
		    : attr == CUBLASLT_MATMUL_DESC_COMPUTE_TYPE ? (int32_t)o->compute
		    : attr == CUBLASLT_MATMUL_DESC_TRANSA       ? o->transa
		    : attr == CUBLASLT_MATMUL_DESC_TRANSB       ? o->transb
								: 0;
	if (sizeWritten)
		*sizeWritten = sizeof(v);
	if (!buf || sizeInBytes != sizeof(v))
		return CUBLAS_STATUS_INVALID_VALUE;
	memcpy(buf, &v, sizeof(v));
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *matLayout, cudaDataType type, uint64_t rows,
					  uint64_t cols, int64_t ld)
{
	CREATE(FB_LAYOUT, matLayout);
	o->type = type;
	o->rows = rows;
	o->cols = cols;
	o->ld = ld;
	o->batch = 1;
	fb_log_begin(__func__);
	fb_arg_obj("new", o);
	fb_arg_int("type", type);
	fb_arg_uns("rows", rows);
	fb_arg_uns("cols", cols);
	fb_arg_int("ld", ld);
	fb_log_end();
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout) { DESTROY(matLayout, FB_LAYOUT); }

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout, cublasLtMatrixLayoutAttribute_t attr,
						const void *buf, size_t sizeInBytes)
{
	OBJ(o, matLayout, FB_LAYOUT, CUBLAS_STATUS_INVALID_VALUE);
	fb_log_begin(__func__);
	fb_arg_obj("layout", o);
	fb_arg_int("attr", attr);
	fb_arg_hex("buf", buf, sizeInBytes);
	fb_arg_uns("size", sizeInBytes);
	fb_log_end();
	if (!buf)
		return CUBLAS_STATUS_INVALID_VALUE;
	if (attr == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT && sizeInBytes == sizeof(int32_t))
		o->batch = as_i32(buf);
	else if (attr == CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET && sizeInBytes == sizeof(int64_t))
		memcpy(&o->stride, buf, sizeof(o->stride));
	else if (attr == CUBLASLT_MATRIX_LAYOUT_ORDER && sizeInBytes == sizeof(int32_t))
		o->order = as_i32(buf);
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref)
{
	CREATE(FB_PREF, pref);
	fb_log_begin(__func__);
	fb_arg_obj("new", o);
	fb_log_end();
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) { DESTROY(pref, FB_PREF); }

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
						    cublasLtMatmulPreferenceAttributes_t attr, const void *buf,
						    size_t sizeInBytes)
{
	OBJ(o, pref, FB_PREF, CUBLAS_STATUS_INVALID_VALUE);
	fb_log_begin(__func__);
	fb_arg_obj("pref", o);
	fb_arg_int("attr", attr);
	fb_arg_hex("buf", buf, sizeInBytes);
	fb_arg_uns("size", sizeInBytes);
	fb_log_end();
	return buf ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}

/* ---- heuristics and matmul ---- */

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc,
					      cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
					      cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
					      cublasLtMatmulPreference_t preference, int requestedAlgoCount,
					      cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
					      int *returnAlgoCount)
{
	fb_log_begin(__func__);
	fb_arg_obj("handle", lightHandle);
	fb_arg_obj("desc", operationDesc);
	fb_arg_obj("A", Adesc);
	fb_arg_obj("B", Bdesc);
	fb_arg_obj("C", Cdesc);
	fb_arg_obj("D", Ddesc);
	fb_arg_obj("pref", preference);
	fb_arg_int("requested", requestedAlgoCount);
	fb_log_end();
	if (!fb_get(lightHandle, FB_LT))
		return CUBLAS_STATUS_NOT_INITIALIZED;
	if (!fb_get(operationDesc, FB_DESC) || !fb_get(Adesc, FB_LAYOUT) || !fb_get(Bdesc, FB_LAYOUT) ||
	    !fb_get(Cdesc, FB_LAYOUT) || !fb_get(Ddesc, FB_LAYOUT) || !fb_get(preference, FB_PREF) ||
	    requestedAlgoCount < 1 || !heuristicResultsArray || !returnAlgoCount)
		return CUBLAS_STATUS_INVALID_VALUE;
	int n = requestedAlgoCount < 2 ? requestedAlgoCount : 2;
	for (int i = 0; i < n; i++) {
		cublasLtMatmulHeuristicResult_t *r = &heuristicResultsArray[i];
		memset(r, 0, sizeof(*r));
		for (int j = 0; j < 8; j++)
			r->algo.data[j] = FB_ALGO_TAG | (uint64_t)(i * 16 + j);
		r->workspaceSize = 1024u * (size_t)(i + 1);
		r->state = CUBLAS_STATUS_SUCCESS;
		r->wavesCount = 1.0f + (float)i;
	}
	*returnAlgoCount = n;
	return CUBLAS_STATUS_SUCCESS;
}

static int lt_dev(const fb_obj *d, int which)
{
	switch (d->lt_ptr_mode) {
	case CUBLASLT_POINTER_MODE_HOST: return 0;
	case CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST: return which == 0;
	default: return 1;
	}
}

static size_t scale_size(int32_t t)
{
	return t == CUDA_R_64F || t == CUDA_C_32F ? 8 : t == CUDA_C_64F ? 16 : t == CUDA_R_16F || t == CUDA_R_16BF ? 2 : 4;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc, const void *alpha,
			      const void *A, cublasLtMatrixLayout_t Adesc, const void *B, cublasLtMatrixLayout_t Bdesc,
			      const void *beta, const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
			      cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo, void *workspace,
			      size_t workspaceSizeInBytes, cudaStream_t stream)
{
	fb_obj *d = fb_get(computeDesc, FB_DESC);
	size_t sz = d ? scale_size(d->scale_type) : 4;
	fb_log_begin(__func__);
	fb_arg_obj("handle", lightHandle);
	fb_arg_obj("desc", computeDesc);
	fb_arg_scalar("alpha", alpha, sz, d && lt_dev(d, 0));
	fb_arg_ptr("A", A);
	fb_arg_obj("Adesc", Adesc);
	fb_arg_ptr("B", B);
	fb_arg_obj("Bdesc", Bdesc);
	fb_arg_scalar("beta", beta, sz, d && lt_dev(d, 1));
	fb_arg_ptr("C", C);
	fb_arg_obj("Cdesc", Cdesc);
	fb_arg_ptr("D", D);
	fb_arg_obj("Ddesc", Ddesc);
	fb_arg_hex("algo", algo, algo ? 8 : 0);
	fb_arg_ptr("workspace", workspace);
	fb_arg_uns("workspaceSize", workspaceSizeInBytes);
	fb_arg_stream("stream", (CUstream)stream);
	fb_log_end();
	fb_obj *a = fb_get(Adesc, FB_LAYOUT), *b = fb_get(Bdesc, FB_LAYOUT), *c = fb_get(Cdesc, FB_LAYOUT),
	       *dd = fb_get(Ddesc, FB_LAYOUT);
	if (!fb_get(lightHandle, FB_LT))
		return CUBLAS_STATUS_NOT_INITIALIZED;
	if (!d || !a || !b || !c || !dd || !alpha || !beta)
		return CUBLAS_STATUS_INVALID_VALUE;
	if (workspaceSizeInBytes && !fb_dev_ok(workspace, workspaceSizeInBytes))
		return CUBLAS_STATUS_EXECUTION_FAILED;
	if (a->type != CUDA_R_32F || b->type != CUDA_R_32F || c->type != CUDA_R_32F || dd->type != CUDA_R_32F ||
	    d->scale_type != CUDA_R_32F)
		return CUBLAS_STATUS_SUCCESS; /* logged only */
	int m = (int)dd->rows, n = (int)dd->cols, k = (int)(d->transa ? a->rows : a->cols);
	/* C != D: D = C first, then in place */
	return fb_sgemm_on((CUstream)stream,
			   &(fb_job){.transa = d->transa, .transb = d->transb, .m = m, .n = n, .k = k,
				     .alpha = *(const float *)alpha, .beta = *(const float *)beta, .A = A, .lda = a->ld,
				     .B = B, .ldb = b->ld, .C = D, .ldc = dd->ld,
				     .copy_from = C != D ? (const float *)C : NULL, .copy_ld = c->ld});
}
