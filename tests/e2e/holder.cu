/*
 * holder: another client for errors' foreign-pointer test. Allocates 1 MiB,
 * fills it, prints the device address (hex, one line), and holds the
 * allocation until its stdin closes; then checks the memory was not changed by
 * anyone else and frees it. Exit status 0 if the data is intact.
 */
#include "rgtest.h"
#include "rgtest_kernels.cuh"

int main(void)
{
	unsigned *d, h[256];
	size_t n = 1 << 18; /* elements: 1 MiB */
	CK(cudaSetDevice(0));
	CK(cudaMalloc(&d, n * 4));
	rgtest_fill_u32<<<rgtest_grid(n), 256>>>(d, 0xF0F0F0F0u, n);
	CK(cudaGetLastError());
	CK(cudaDeviceSynchronize());
	printf("%llx\n", (unsigned long long)(size_t)d);
	fflush(stdout);
	char buf[256];
	while (fread(buf, 1, sizeof buf, stdin) > 0)
		;
	CK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
	for (int i = 0; i < 256; i++)
		REQUIRE(h[i] == 0xF0F0F0F0u, "foreign client changed my memory at %d: %08x", i, h[i]);
	CK(cudaFree(d));
	return 0;
}
