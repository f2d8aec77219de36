/* Driver API: modules, functions, launches. */
#include <string.h>

#include "drv.h"
#include "rg_log.h"
#include "rt.h"

void *fe_module_from_image(const void *image, size_t size);
int fe_module_get_kernel(void *module, const char *name, void **out);
cudaError_t fe_kernel_launch(void *kernel, dim3 g, dim3 b, void **args, size_t shmem, cudaStream_t stream);

static CUresult drv_status(int st)
{
	return st < 0 ? CUDA_ERROR_DEVICE_UNAVAILABLE : (CUresult)st;
}

static CUresult drv_enter(void)
{
	fe_conn *c;
	return (CUresult)fe_rt_enter(&c);
}

static size_t image_size(const void *image)
{
	const uint8_t *p = image;
	if (p[0] == 0x7f && p[1] == 'E' && p[2] == 'L' && p[3] == 'F') {
		uint64_t shoff, n, ent;
		memcpy(&shoff, p + 0x28, 8);
		n = (uint16_t)(p[0x3c] | p[0x3d] << 8);
		ent = (uint16_t)(p[0x3a] | p[0x3b] << 8);
		return (size_t)(shoff + n * ent);
	}
	uint32_t magic;
	memcpy(&magic, p, 4);
	if (magic == 0xBA55ED50u) {
		uint16_t h;
		uint64_t body;
		memcpy(&h, p + 6, 2);
		memcpy(&body, p + 8, 8);
		return h + body;
	}
	return strlen(image) + 1; /* PTX text */
}

CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
	CUresult r = drv_enter();
	if (r)
		return r;
	if (!module || !image)
		return CUDA_ERROR_INVALID_VALUE;
	void *m = fe_module_from_image(image, image_size(image));
	if (!m)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*module = (CUmodule)m;
	return CUDA_SUCCESS;
}

CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int n, CUjit_option *o, void **v)
{
	return cuModuleLoadData(module, image);
}

CUresult cuModuleUnload(CUmodule module)
{
	/* The server keeps the module until the session ends; the client record
	 * stays too (functions of it may still be in flight). */
	return module ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuModuleGetFunction(CUfunction *f, CUmodule module, const char *name)
{
	if (!f || !module || !name)
		return CUDA_ERROR_INVALID_VALUE;
	void *k;
	int st = fe_module_get_kernel(module, name, &k);
	if (st)
		return drv_status(st);
	*f = (CUfunction)k;
	return CUDA_SUCCESS;
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
			unsigned int by, unsigned int bz, unsigned int shmem, CUstream stream, void **params, void **extra)
{
	if (extra) {
		rg_log_once("frontend", "not supported", "cuLaunchKernel(extra)");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	dim3 g = {gx, gy, gz}, b = {bx, by, bz};
	return (CUresult)fe_kernel_launch(f, g, b, params, shmem, (cudaStream_t)stream);
}

