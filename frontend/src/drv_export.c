/* cuGetExportTable: the driver's private function tables. */
#include "drv.h"
#include "rg_log.h"

CUresult cuGetExportTable(const void **table, const CUuuid *id)
{
	if (table)
		*table = NULL;
	rg_log_once("frontend", "not supported", "cuGetExportTable");
	return id ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_VALUE;
}
