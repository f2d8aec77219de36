/*
 * drv_link: the driver's linker (cuLinkCreate, cuLinkAddData, cuLinkAddFile,
 * cuLinkComplete, cuLinkDestroy). This program's own fatbin (the one with the
 * test kernels) is linked, the image loaded and a kernel of it launched, the
 * result checked word for word; then the argument errors. Through
 * libremote.so the inputs travel at cuLinkComplete and the server's driver
 * links them (the driver test double gives a single input back).
 */
#include <unistd.h>

#include "rgdrv.h"
#include "rgtest_kernels.cuh"

#define N 4096

static void link_and_run(const void *img, size_t size, const char *how, int from_file)
{
	CUlinkState st;
	char log[256] = "x";
	CUjit_option o[2] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
	void *v[2] = {log, (void *)(uintptr_t)sizeof(log)};
	CK(cuLinkCreate(2, o, v, &st));
	if (from_file) {
		char path[] = "/tmp/drv_link.XXXXXX";
		int fd = mkstemp(path);
		FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
		if (!f || fwrite(img, 1, size, f) != size) {
			printf("FAIL %s: cannot write %s\n", how, path);
			exit(1);
		}
		fclose(f);
		CK(cuLinkAddFile(st, CU_JIT_INPUT_FATBINARY, path, 0, NULL, NULL));
		unlink(path);
	} else {
		CK(cuLinkAddData(st, CU_JIT_INPUT_FATBINARY, (void *)img, size, "own", 0, NULL, NULL));
	}
	void *out = NULL;
	size_t out_size = 0;
	CK(cuLinkComplete(st, &out, &out_size));
	check(how, out && out_size > 0, "image %p, %zu bytes", out, out_size);
	CUmodule m;
	CUfunction f;
	CK(cuModuleLoadData(&m, out));
	CK(cuLinkDestroy(st)); /* the module keeps what it needs */
	CK(cuModuleGetFunction(&f, m, "rgtest_fill_u32"));
	CUdeviceptr d;
	CK(cuMemAlloc(&d, N * 4));
	unsigned val = 0x5eed0000u + (unsigned)from_file;
	unsigned long long n = N;
	void *args[] = {&d, &val, &n};
	CK(cuLaunchKernel(f, rgtest_grid(N), 1, 1, 256, 1, 1, 0, 0, args, NULL));
	static unsigned host[N];
	CK(cuMemcpyDtoH(host, d, sizeof(host)));
	long bad = -1;
	for (long i = 0; i < N && bad < 0; i++)
		if (host[i] != val)
			bad = i;
	check("the linked kernel ran", bad < 0, "word %ld", bad);
	CK(cuMemFree(d));
	CK(cuModuleUnload(m));
}

int main(void)
{
	CUdevice dev;
	rg_start(&dev);
	size_t size = 0;
	const void *img = rg_own_fatbin("rgtest_fill_u32", &size);
	check("own fatbin found", img != NULL);
	if (!img)
		return rg_finish("drv_link");
	link_and_run(img, size, "linked from memory", 0);
	link_and_run(img, size, "linked from a file", 1);

	CUlinkState st;
	void *out;
	size_t out_size;
	expect("cuLinkCreate(NULL)", cuLinkCreate(0, NULL, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
	CK(cuLinkCreate(0, NULL, NULL, &st));
	expect("cuLinkAddData(NULL data)", cuLinkAddData(st, CU_JIT_INPUT_CUBIN, NULL, 16, "x", 0, NULL, NULL),
	       CUDA_ERROR_INVALID_VALUE);
	expect("cuLinkAddFile(missing)", cuLinkAddFile(st, CU_JIT_INPUT_CUBIN, "/nonexistent/x.cubin", 0, NULL, NULL),
	       CUDA_ERROR_FILE_NOT_FOUND);
	expect("cuLinkComplete(NULL out)", cuLinkComplete(st, NULL, &out_size), CUDA_ERROR_INVALID_VALUE);
	CK(cuLinkDestroy(st));
	(void)out;
	return rg_finish("drv_link");
}
