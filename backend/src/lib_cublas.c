/*
 * cuBLAS and cuBLASLt on the server: what api/cublas.api cannot say in a line.
 * Everything else (loading, the function table, handlers, handle tables) is
 * generated into gen/lib_cublas.c on top of lib.c.
 *
 * Pointer modes. alpha and beta (and a dot product's result) are host or device
 * pointers as the handle's pointer mode says (cublasSetPointerMode), or for
 * cublasLtMatmul the matmul descriptor's CUBLASLT_MATMUL_DESC_POINTER_MODE. The
 * client tracks the modes to know what to send; the server asks the library
 * itself, so a client that sends an address where the library expects a value
 * (or the reverse) is refused instead of making the library read server memory.
 */
#include "backend.h"

#include <stdatomic.h>

#include "lib_cublas_gen.h"

typedef cublasStatus_t (*desc_get_attr_fn)(cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t, void *, size_t,
					   size_t *);

int be_cublas_mode_blas(void *obj, int which)
{
	cublasPointerMode_t m = CUBLAS_POINTER_MODE_HOST;
	if (!be_cublas.cublasGetPointerMode_v2 ||
	    be_cublas.cublasGetPointerMode_v2((cublasHandle_t)obj, &m) != CUBLAS_STATUS_SUCCESS)
		return 0;
	return m == CUBLAS_POINTER_MODE_DEVICE;
}

int be_cublas_mode_ltdesc(void *obj, int which)
{
	/* Not a function the client calls, so not in the description: resolved here. */
	static _Atomic(desc_get_attr_fn) get;
	desc_get_attr_fn f = atomic_load(&get);
	if (!f) {
		f = (desc_get_attr_fn)be_lib_dlsym(&be_cublas_lib, BE_CUBLAS_LIB_CUBLASLT, "cublasLtMatmulDescGetAttribute");
		if (!f)
			return 0;
		atomic_store(&get, f);
	}
	int32_t m = CUBLASLT_POINTER_MODE_HOST;
	size_t written = 0;
	if (f((cublasLtMatmulDesc_t)obj, CUBLASLT_MATMUL_DESC_POINTER_MODE, &m, sizeof(m), &written) !=
	    CUBLAS_STATUS_SUCCESS)
		return 0;
	switch (m) {
	case CUBLASLT_POINTER_MODE_DEVICE:
	case CUBLASLT_POINTER_MODE_DEVICE_VECTOR:
	case CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_ZERO: /* beta is not read: passed as it came */
		return 1;
	case CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST:
		return which == 0;
	default:
		return 0;
	}
}

/* The workspace a cuBLAS handle allocates for itself at its creation (the
 * cuBLAS documentation's default: 32 MiB on compute capability 9.0 and later,
 * 4 MiB before), which its tenant pays. A client that gives the handle its own
 * (cublasSetWorkspace, as PyTorch does) allocated that with cudaMalloc, also
 * paid; the library's own is not freed by it, so the charge stays. */
uint64_t be_cublas_charge_blas(be_session *s)
{
	int major = be_cur_gpu(s)->attrs[CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR];
	return (major >= 9 ? 32u : 4u) << 20;
}
