/*
 * link.c: the linker (cuLinkCreate, cuLinkAddData, cuLinkComplete,
 * cuLinkDestroy). The fake compiles and links nothing: a link of exactly one
 * cubin or fatbin gives that image back, which is enough to see inputs travel
 * and the result load. PTX is CUDA_ERROR_NO_BINARY_FOR_GPU (no JIT, as for
 * modules); several inputs, objects and libraries are CUDA_ERROR_NOT_SUPPORTED.
 */
#include "fake.h"

#include <stdlib.h>
#include <string.h>

typedef struct fk_link {
	void *image;
	size_t size;
	int inputs;
} fk_link;

CUresult CUDAAPI cuLinkCreate(unsigned int numOptions, CUjit_option *options, void **optionValues,
			      CUlinkState *stateOut)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	fk_link *l = NULL;
	if (rc == CUDA_SUCCESS && (!stateOut || (numOptions && (!options || !optionValues))))
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS && !(l = calloc(1, sizeof(*l))))
		rc = CUDA_ERROR_OUT_OF_MEMORY;
	if (rc == CUDA_SUCCESS)
		*stateOut = (CUlinkState)l;
	return fk_end(rc, __func__, "%u", numOptions);
}

CUresult CUDAAPI cuLinkAddData(CUlinkState state, CUjitInputType type, void *data, size_t size, const char *name,
			       unsigned int numOptions, CUjit_option *options, void **optionValues)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	fk_link *l = (fk_link *)state;
	if (rc == CUDA_SUCCESS && !l)
		rc = CUDA_ERROR_INVALID_HANDLE;
	else if (rc == CUDA_SUCCESS && (!data || size == 0))
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS && type == CU_JIT_INPUT_PTX)
		rc = CUDA_ERROR_NO_BINARY_FOR_GPU;
	else if (rc == CUDA_SUCCESS && ((type != CU_JIT_INPUT_CUBIN && type != CU_JIT_INPUT_FATBINARY) || l->inputs))
		rc = CUDA_ERROR_NOT_SUPPORTED;
	if (rc == CUDA_SUCCESS) {
		if (!(l->image = malloc(size))) {
			rc = CUDA_ERROR_OUT_OF_MEMORY;
		} else {
			memcpy(l->image, data, size);
			l->size = size;
			l->inputs++;
		}
	}
	return fk_end(rc, __func__, "%d, %zu", (int)type, size);
}

CUresult CUDAAPI cuLinkComplete(CUlinkState state, void **cubinOut, size_t *sizeOut)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	fk_link *l = (fk_link *)state;
	if (rc == CUDA_SUCCESS && !l)
		rc = CUDA_ERROR_INVALID_HANDLE;
	else if (rc == CUDA_SUCCESS && (!cubinOut || !sizeOut || !l->inputs))
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS) {
		*cubinOut = l->image;
		*sizeOut = l->size;
	}
	return fk_end(rc, __func__, "-> %zu", rc == CUDA_SUCCESS ? *sizeOut : 0);
}

CUresult CUDAAPI cuLinkDestroy(CUlinkState state)
{
	fk_link *l = (fk_link *)state;
	if (!l)
		return CUDA_ERROR_INVALID_HANDLE;
	free(l->image);
	free(l);
	return CUDA_SUCCESS;
}
