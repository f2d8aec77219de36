/* Error names and strings, from the toolkit's own table (gen/error_names.c). */
#include "errors.h"
#include "rt.h"

static const struct fe_error_text *lookup(cudaError_t e)
{
	for (size_t i = 0; i < fe_error_texts_n; i++)
		if (fe_error_texts[i].code == (int)e)
			return &fe_error_texts[i];
	return NULL;
}

const char *cudaGetErrorName(cudaError_t error)
{
	const struct fe_error_text *t = lookup(error);
	return t ? t->name : "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t error)
{
	const struct fe_error_text *t = lookup(error);
	return t ? t->text : "unknown error";
}
