/*
 * Driver API: the linker (cuLinkCreate, cuLinkAddData, cuLinkAddFile,
 * cuLinkComplete, cuLinkDestroy). The inputs are kept here until
 * cuLinkComplete, which sends them in one request (op link); the server links
 * them with its driver for its GPU and answers the image, kept here until
 * cuLinkDestroy. The program then loads it like any image (by content hash).
 *
 * An input is checked when the link completes, not when it is added: a bad
 * PTX input fails cuLinkComplete here where the driver would fail its
 * cuLinkAddData.
 */
#include <stdlib.h>
#include <string.h>

#include "drv.h"
#include "rg_log.h"
#include "rpc.h"
#include "rt.h"

typedef struct link_input {
	uint32_t type, zero;
	uint64_t len;
} link_input;

typedef struct link_state {
	link_input *in;
	uint8_t *data; /* the inputs back to back */
	size_t n, cap, bytes, data_cap;
	void *image;   /* the linked image, from cuLinkComplete */
	size_t size;
} link_state;

CUresult cuLinkCreate(unsigned int numOptions, CUjit_option *options, void **optionValues, CUlinkState *stateOut)
{
	if (!stateOut)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult r = fe_drv_jit_options(numOptions, options, optionValues);
	if (r)
		return r;
	link_state *l = calloc(1, sizeof(*l));
	if (!l)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*stateOut = (CUlinkState)l;
	return CUDA_SUCCESS;
}

CUresult cuLinkAddData(CUlinkState state, CUjitInputType type, void *data, size_t size, const char *name,
		       unsigned int numOptions, CUjit_option *options, void **optionValues)
{
	link_state *l = (link_state *)state;
	if (!l)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!data || size == 0 || (unsigned)type > CU_JIT_INPUT_NVVM)
		return CUDA_ERROR_INVALID_VALUE;
	if (type == CU_JIT_INPUT_NVVM) {
		rg_log_once("frontend", "not supported", "cuLinkAddData(CU_JIT_INPUT_NVVM)");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	CUresult r = fe_drv_jit_options(numOptions, options, optionValues);
	if (r)
		return r;
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 8;
		link_input *in = realloc(l->in, cap * sizeof(*in));
		if (!in)
			return CUDA_ERROR_OUT_OF_MEMORY;
		l->in = in;
		l->cap = cap;
	}
	if (l->bytes + size > l->data_cap) {
		size_t cap = l->data_cap ? l->data_cap : 1 << 16;
		while (cap < l->bytes + size)
			cap *= 2;
		uint8_t *d = realloc(l->data, cap);
		if (!d)
			return CUDA_ERROR_OUT_OF_MEMORY;
		l->data = d;
		l->data_cap = cap;
	}
	memcpy(l->data + l->bytes, data, size);
	l->bytes += size;
	l->in[l->n++] = (link_input){(uint32_t)type, 0, size};
	return CUDA_SUCCESS;
}

CUresult cuLinkAddFile(CUlinkState state, CUjitInputType type, const char *path, unsigned int numOptions,
		       CUjit_option *options, void **optionValues)
{
	if (!state)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!path)
		return CUDA_ERROR_INVALID_VALUE;
	void *buf;
	size_t n;
	CUresult r = fe_drv_read_file(path, &buf, &n);
	if (r)
		return r;
	r = cuLinkAddData(state, type, buf, n, path, numOptions, options, optionValues);
	free(buf);
	return r;
}

CUresult cuLinkComplete(CUlinkState state, void **cubinOut, size_t *sizeOut)
{
	link_state *l = (link_state *)state;
	if (!l)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!cubinOut || !sizeOut || l->n == 0)
		return CUDA_ERROR_INVALID_VALUE;
	fe_conn *c;
	fe_drv_begin();
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return fe_drv_end(e);
	proto_msg m;
	proto_msg_begin(&m, PROTO_OP_LINK, fe_conn_next_seq(c), 1);
	proto_msg_bin(&m, l->in, l->n * sizeof(*l->in));
	fe_reply rp;
	int st = fe_conn_call(c, &m, l->data, l->bytes, NULL, 0, &rp);
	if (st == 0) {
		const void *p;
		size_t n;
		void *img = NULL;
		if (proto_arg_bin(&rp.view, PROTO_REPLY_FIRST, &p, &n) || n == 0)
			st = CUDA_ERROR_INVALID_IMAGE;
		else if (!(img = malloc(n)))
			st = CUDA_ERROR_OUT_OF_MEMORY;
		else
			memcpy(img, p, n);
		fe_reply_free(&rp);
		if (img) {
			free(l->image);
			l->image = img;
			l->size = n;
		}
	}
	CUresult r = fe_drv_end(fe_rt_leave(st));
	if (r == CUDA_SUCCESS) {
		*cubinOut = l->image;
		*sizeOut = l->size;
	}
	return r;
}

CUresult cuLinkDestroy(CUlinkState state)
{
	link_state *l = (link_state *)state;
	if (!l)
		return CUDA_ERROR_INVALID_HANDLE;
	free(l->in);
	free(l->data);
	free(l->image);
	free(l);
	return CUDA_SUCCESS;
}

/* CUDA 5.5's symbols: the same ABI (cuda.h maps the names to the _v2 ones). */
extern __typeof__(cuLinkCreate) cuLinkCreate_v1 __asm__("cuLinkCreate") __attribute__((alias("cuLinkCreate_v2")));
extern __typeof__(cuLinkAddData) cuLinkAddData_v1 __asm__("cuLinkAddData") __attribute__((alias("cuLinkAddData_v2")));
extern __typeof__(cuLinkAddFile) cuLinkAddFile_v1 __asm__("cuLinkAddFile") __attribute__((alias("cuLinkAddFile_v2")));
