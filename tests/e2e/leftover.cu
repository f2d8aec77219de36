/*
 * leftover: does a fresh device allocation show what another client left?
 *   leftover write MIB [hold]  fills MIB with a pattern, frees it; with "hold"
 *                              prints "ready" and stays connected until stdin
 *                              closes
 *   leftover read MIB          allocates MIB and prints how many of its words
 *                              hold the pattern: "pattern words N of M"
 * The GPU suite runs a writer then a reader as two clients (tests/gpu/run.sh,
 * fresh_memory): in every isolation mode the reader must see none.
 */
#include <string.h>

#include "rgtest.h"
#include "rgtest_kernels.cuh"

#define PATTERN 0x5eedf00du

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: leftover write|read MIB [hold]\n");
		return 2;
	}
	size_t n = (size_t)strtoull(argv[2], NULL, 10) << 18; /* words */
	unsigned *d;
	CK(cudaSetDevice(0));
	CK(cudaMalloc(&d, n * 4));
	if (!strcmp(argv[1], "write")) {
		rgtest_fill_u32<<<rgtest_grid(n), 256>>>(d, PATTERN, n);
		CK(cudaGetLastError());
		CK(cudaDeviceSynchronize());
		CK(cudaFree(d));
		if (argc > 3) {
			printf("ready\n");
			fflush(stdout);
			char buf[256];
			while (fread(buf, 1, sizeof buf, stdin) > 0)
				;
		}
		return 0;
	}
	unsigned *h = (unsigned *)malloc(n * 4);
	REQUIRE(h != NULL, "out of host memory");
	CK(cudaMemcpy(h, d, n * 4, cudaMemcpyDeviceToHost));
	size_t seen = 0;
	for (size_t i = 0; i < n; i++)
		seen += h[i] == PATTERN;
	printf("pattern words %zu of %zu\n", seen, n);
	CK(cudaFree(d));
	free(h);
	return 0;
}
