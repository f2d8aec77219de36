/*
 * test_fakecuda: unit test of the driver test double.
 *
 * Loads libcuda.so.1 with dlopen and dlsym, by the versioned names cuda.h gives the
 * functions, as remote-gpud does, and checks the behaviours the end-to-end tests rely
 * on: exports, range validation, handle staleness, memory accounting, the launch log
 * of a kernel built by nvcc with mixed parameter types, emulated kernels, capture and
 * replay, the sticky fault, context teardown, thread safety.
 *
 *   test_fakecuda          all of it
 *   test_fakecuda --env    with FAKECUDA_DEVICES=3 FAKECUDA_MEM_BYTES=64m set
 *
 * Module tests need the kernels nvcc built (FK_KERNELS_DIR); without nvcc they are
 * skipped.
 */
#include <dlfcn.h>
#include <elf.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fk_check.h"

int main(int argc, char **argv)
{
	CUcontext ctx;

	setvbuf(stdout, NULL, _IONBF, 0);
	lib = dlopen(FK_LIB, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "dlopen %s: %s\n", FK_LIB, dlerror());
		return 1;
	}
#define LOAD(f)                                                                  \
	if (!(p_##f = (__typeof__(p_##f))dlsym(lib, STR(f)))) {                      \
		fprintf(stderr, "missing export %s\n", STR(f));                    \
		failures++;                                                        \
	}
	API(LOAD)
	if (failures)
		return 1;

	if (argc > 1 && strcmp(argv[1], "--env") == 0) {
		if (!getenv("FAKECUDA_DEVICES") || !getenv("FAKECUDA_MEM_BYTES")) {
			fprintf(stderr, "--env wants FAKECUDA_DEVICES=3 FAKECUDA_MEM_BYTES=64m\n");
			return 2;
		}
		test_env();
	} else {
		snprintf(log_path, sizeof log_path, "/tmp/fakecuda-launch-%d.log", (int)getpid());
		setenv("FAKECUDA_LAUNCH_LOG", log_path, 1);
		test_exports();
		test_device();
		{
			CUdeviceptr d;
			CK(p_cuMemAlloc(&d, 16), CUDA_ERROR_INVALID_CONTEXT);
		}
		CK(p_cuCtxCreate(&ctx, NULL, 0x100, 0), CUDA_ERROR_INVALID_VALUE);
		OK(p_cuCtxCreate(&ctx, NULL, 0, 0));
		test_memory(ctx);
		test_memory_placement();
		test_handles();
#ifdef FK_KERNELS_DIR
		test_modules();
		test_launch();
		test_capture();
		test_fault(ctx);
#else
		printf("nvcc was not found: module, launch, capture and fault tests skipped\n");
#endif
		test_contexts(ctx);
		test_threads(ctx);
		OK(p_cuCtxDestroy(ctx));
		unlink(log_path);
	}
	printf("%d checks, %d failed\n", checks, failures);
	return failures != 0;
}
