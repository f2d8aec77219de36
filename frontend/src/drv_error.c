/* The driver's error codes: names and texts, and the driver's code for what the
 * runtime layer answered on a driver entry point's behalf. */
#include "drv.h"
#include "errors.h"
#include "rg_log.h"

CUresult fe_drv_result(cudaError_t e)
{
	/* Most codes are the same number in both APIs; the runtime's own (bad
	 * pitch, direction, symbol, configuration...) are invalid values to the
	 * driver. (Success, every driver call's usual answer, first.) */
	if (e == cudaSuccess)
		return CUDA_SUCCESS;
	if (fe_error_lookup(fe_drv_error_texts, fe_drv_error_texts_n, (int)e))
		return (CUresult)e;
	switch (e) {
	case cudaErrorInvalidDeviceFunction:
		return CUDA_ERROR_INVALID_HANDLE;
	case cudaErrorInvalidSymbol:
		return CUDA_ERROR_NOT_FOUND;
	case cudaErrorInsufficientDriver:
		return CUDA_ERROR_NOT_INITIALIZED;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
}

CUresult(fe_drv_end_at)(cudaError_t e, const char *fn)
{
	fe_drv_done();
	CUresult r = fe_drv_result(e);
	if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY)
		LOG_DEBUG("frontend", "%s: %d", fn, (int)r);
	return r;
}

/* As the driver: a code it does not define is an invalid value, *pStr NULL. */
CUresult cuGetErrorName(CUresult error, const char **pStr)
{
	if (!pStr)
		return CUDA_ERROR_INVALID_VALUE;
	const struct fe_error_text *t = fe_error_lookup(fe_drv_error_texts, fe_drv_error_texts_n, error);
	*pStr = t ? t->name : NULL;
	return t ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorString(CUresult error, const char **pStr)
{
	if (!pStr)
		return CUDA_ERROR_INVALID_VALUE;
	const struct fe_error_text *t = fe_error_lookup(fe_drv_error_texts, fe_drv_error_texts_n, error);
	if (!t) {
		*pStr = NULL;
		return CUDA_ERROR_INVALID_VALUE;
	}
	const char *server = fe_error_server_text(error);
	*pStr = server ? server : t->text;
	return CUDA_SUCCESS;
}

