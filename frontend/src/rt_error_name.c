/*
 * Error names, from the toolkit's enums (gen/error_names.c): the runtime's
 * cudaGetErrorName and the names logs give a channel's status. Local tables
 * only: the strings the server's driver gives are rt_error.c's.
 */
#include "errors.h"
#include "rt.h"

const struct fe_error_text *fe_error_lookup(const struct fe_error_text *table, size_t n, int code)
{
	for (size_t i = 0; i < n; i++)
		if (table[i].code == code)
			return &table[i];
	return NULL;
}

const char *fe_status_name(int status)
{
	if (status == FE_EDEAD)
		return "FE_EDEAD";
	if (status < 0)
		return transport_err_name(status);
	const struct fe_error_text *t = fe_error_lookup(fe_drv_error_texts, fe_drv_error_texts_n, status);
	return t ? t->name : "CUresult ?";
}

const char *cudaGetErrorName(cudaError_t error)
{
	const struct fe_error_text *t = fe_error_lookup(fe_error_texts, fe_error_texts_n, error);
	return t ? t->name : "cudaErrorUnknown";
}
