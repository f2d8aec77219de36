/*
 * obs_counts: a CUDA program whose calls are known exactly, for the statistics
 * and trace tests (run_obs.sh checks what libremote.so reports about it).
 *
 *   obs_counts [counts [signal]]   the known sequence (below); with "signal" it
 *                                  also sends itself SIGUSR1 in the middle
 *   obs_counts logsync             prints a line, makes one call, prints a line,
 *                                  with stdout fully buffered (as into a file)
 *   obs_counts oom                 holds 3 x 1 MiB, then asks for 1 TiB
 *
 * The counts sequence, by function (all called from this program):
 *   cudaMalloc             7 (3 here through do_alloc, 4 in a second thread)
 *   cudaFree               7
 *   cudaMemcpy             4: 2 x 1 MiB to the device, 2 x 1 MiB back
 *   cudaMemsetAsync        4 x 4 KiB
 *   kernel launches       10
 *   cudaDeviceSynchronize  1
 * Device memory peaks at 3 MiB + 4 KiB and ends at 0. Between the launches and
 * the frees it prints remote_gpu_stats_dump(stdout) between "--- dump" and
 * "--- end" (when libremote.so is there).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include "rgtest.h"
#include "rgtest_kernels.cuh"

#define MIB (1u << 20)

/* Not inlined: the trace test finds this function in the backtrace. */
__attribute__((noinline)) void do_alloc(void **p, size_t n)
{
	CK(cudaMalloc(p, n));
	__asm__ volatile(""); /* keeps the call from becoming a tail call */
}

static void *worker(void *arg)
{
	for (int i = 0; i < 4; i++) {
		void *p;
		CK(cudaMalloc(&p, 4096));
		CK(cudaFree(p));
	}
	return NULL;
}

static int logsync(void)
{
	static char buf[1 << 16];
	void *p;
	setvbuf(stdout, buf, _IOFBF, sizeof(buf)); /* as when stdout is a file */
	printf("before the call\n");
	do_alloc(&p, 4096);
	printf("after the call\n");
	CK(cudaFree(p));
	return 0;
}

static int oom(void)
{
	void *d[3], *big = NULL;
	for (int i = 0; i < 3; i++)
		do_alloc(&d[i], MIB);
	cudaError_t e = cudaMalloc(&big, (size_t)1 << 40);
	printf("1 TiB: %s\n", cudaGetErrorName(e));
	cudaGetLastError();
	for (int i = 0; i < 3; i++)
		CK(cudaFree(d[i]));
	return e == cudaErrorMemoryAllocation ? 0 : 1;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "counts";
	if (!strcmp(mode, "logsync"))
		return logsync();
	if (!strcmp(mode, "oom"))
		return oom();

	void *d[3];
	for (int i = 0; i < 3; i++)
		do_alloc(&d[i], MIB);
	unsigned char *h = (unsigned char *)malloc(MIB);
	rg_pattern(h, MIB, 1);
	uint64_t sum = rg_fnv(h, MIB);
	for (int i = 0; i < 2; i++)
		CK(cudaMemcpy(d[0], h, MIB, cudaMemcpyHostToDevice));
	memset(h, 0, MIB);
	for (int i = 0; i < 2; i++)
		CK(cudaMemcpy(h, d[0], MIB, cudaMemcpyDeviceToHost));
	REQUIRE(rg_fnv(h, MIB) == sum, "the data came back changed");
	for (int i = 0; i < 4; i++)
		CK(cudaMemsetAsync(d[1], 0, 4096, 0));
	for (int i = 0; i < 10; i++)
		rgtest_fill_u32<<<1, 32>>>((unsigned *)d[2], (unsigned)i, 32);
	CK(cudaGetLastError());
	CK(cudaDeviceSynchronize());

	pthread_t th;
	REQUIRE(pthread_create(&th, NULL, worker, NULL) == 0, "pthread_create");
	pthread_join(th, NULL);

	void (*dump)(FILE *) = (void (*)(FILE *))dlsym(RTLD_DEFAULT, "remote_gpu_stats_dump");
	if (dump) {
		printf("--- dump\n");
		dump(stdout);
		printf("--- end\n");
	}
	if (argc > 2 && !strcmp(argv[2], "signal")) {
		kill(getpid(), SIGUSR1);
		usleep(500000); /* the statistics thread prints meanwhile */
	}
	for (int i = 0; i < 3; i++)
		CK(cudaFree(d[i]));
	free(h);
	return rg_finish("obs_counts");
}
