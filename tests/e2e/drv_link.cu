/*
 * drv_link: the driver's linker (cuLinkCreate, cuLinkAddData, cuLinkAddFile,
 * cuLinkComplete, cuLinkDestroy). A kernel is linked, the image loaded and the
 * kernel launched, the result checked word for word; then the argument errors.
 * Through libremote.so the inputs travel at cuLinkComplete and the server's
 * driver links them. The input is PTX on a GPU (as CuPy links), and this
 * program's own fatbin on the driver test double, which compiles nothing and
 * gives a single input back (a real driver links no executable cubin:
 * CUDA_ERROR_NO_BINARY_FOR_GPU).
 */
#include <unistd.h>

#include "rgdrv.h"
#include "rgtest_kernels.cuh"

#define N 4096

/* rgtest_fill_u32 (rgtest_kernels.cuh) without its grid-stride loop. */
static const char fill_ptx[] = ".version 8.0\n"
			       ".target sm_75\n"
			       ".address_size 64\n"
			       ".visible .entry rgtest_fill_u32(.param .u64 p, .param .u32 v, .param .u64 n)\n"
			       "{\n"
			       "	.reg .pred %q;\n"
			       "	.reg .b32 %r<5>;\n"
			       "	.reg .b64 %d<7>;\n"
			       "	ld.param.u64 %d1, [p];\n"
			       "	ld.param.u32 %r1, [v];\n"
			       "	ld.param.u64 %d2, [n];\n"
			       "	cvta.to.global.u64 %d1, %d1;\n"
			       "	mov.u32 %r2, %ctaid.x;\n"
			       "	mov.u32 %r3, %ntid.x;\n"
			       "	mov.u32 %r4, %tid.x;\n"
			       "	cvt.u64.u32 %d3, %r4;\n"
			       "	mad.wide.u32 %d4, %r2, %r3, %d3;\n"
			       "	setp.ge.u64 %q, %d4, %d2;\n"
			       "	@%q bra done;\n"
			       "	shl.b64 %d5, %d4, 2;\n"
			       "	add.s64 %d6, %d1, %d5;\n"
			       "	st.global.u32 [%d6], %r1;\n"
			       "done:\n"
			       "	ret;\n"
			       "}\n";

static void link_and_run(CUjitInputType type, const void *img, size_t size, const char *how, int from_file)
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
		CK(cuLinkAddFile(st, type, path, 0, NULL, NULL));
		unlink(path);
	} else {
		CK(cuLinkAddData(st, type, (void *)img, size, "own", 0, NULL, NULL));
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
	CUjitInputType type = CU_JIT_INPUT_PTX;
	size_t size = sizeof(fill_ptx);
	const void *img = fill_ptx;
	if (fake) {
		type = CU_JIT_INPUT_FATBINARY;
		img = rg_own_fatbin("rgtest_fill_u32", &size);
	}
	check("input found", img != NULL);
	if (!img)
		return rg_finish("drv_link");
	link_and_run(type, img, size, "linked from memory", 0);
	link_and_run(type, img, size, "linked from a file", 1);

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
