/*
 * pinned_shm: copies of pinned host memory, byte for byte, for
 * tests/e2e/shm_pinned.sh (over shm:// they go through shared regions: the
 * server copies from and to the client's own pages).
 *   pinned_shm copies   cudaMallocHost, cudaHostAlloc (default, portable,
 *                       write-combined): H2D and D2H, synchronous and async,
 *                       sizes 1 B .. 16 MiB + 3 at offsets 0, 1, 777, 4096,
 *                       the other direction's bytes checked; memory freed.
 *                       Then synchronous copies of pageable memory of 1 MiB
 *                       and more (over shm through the channel's bounce
 *                       region): 1 MiB, 5 MiB + 7, 17 MiB + 3 at offset 3.
 *   pinned_shm die      a 64 MiB async H2D and a D2H from pinned memory in
 *                       flight, then SIGKILL (the server must let go of all).
 *   pinned_shm loop     synchronous 17 MiB copies of pageable memory (the
 *                       bounce pipeline), both ways, until one fails: prints
 *                       "looping" after the first round, and the error of the
 *                       copy that failed (a server killed meanwhile), exit 0.
 */
#include <signal.h>

#include "rgtest.h"

static void one(uint8_t *h, size_t off, size_t n, uint8_t *d, cudaStream_t s, int async, uint64_t seed)
{
	static uint8_t *want, *dev2;
	static size_t cap;
	if (cap < off + n) {
		free(want);
		cap = off + n;
		want = (uint8_t *)malloc(cap);
	}
	if (!dev2)
		CK(cudaMalloc(&dev2, (16u << 20) + 4096 + 8));
	rg_pattern(h + off, n, seed);
	memcpy(want, h + off, n);
	/* to the device from pinned memory, moved on the device, and back into
	 * the same pinned bytes after they were scribbled over */
	if (async) {
		CK(cudaMemcpyAsync(d, h + off, n, cudaMemcpyHostToDevice, s));
		CK(cudaStreamSynchronize(s));
	} else {
		CK(cudaMemcpy(d, h + off, n, cudaMemcpyHostToDevice));
	}
	CK(cudaMemcpy(dev2 + 3, d, n, cudaMemcpyDeviceToDevice));
	memset(h + off, 0x5a, n);
	uint8_t before = off ? h[off - 1] : 0, after = h[off + n];
	if (async) {
		CK(cudaMemcpyAsync(h + off, dev2 + 3, n, cudaMemcpyDeviceToHost, s));
		CK(cudaStreamSynchronize(s));
	} else {
		CK(cudaMemcpy(h + off, dev2 + 3, n, cudaMemcpyDeviceToHost));
	}
	char label[96];
	snprintf(label, sizeof(label), "%zu bytes at %zu (%s)", n, off, async ? "async" : "sync");
	rg_check_bytes(label, h + off, want, n);
	REQUIRE((!off || h[off - 1] == before) && h[off + n] == after, "%s: a byte around it changed", label);
}

static void copies(void)
{
	static const size_t sizes[] = {1, 4095, 4096, 65537, (1u << 20) + 3, 16u << 20};
	static const size_t offs[] = {0, 1, 777, 4096};
	static const unsigned flags[] = {cudaHostAllocDefault, cudaHostAllocPortable, cudaHostAllocWriteCombined};
	cudaStream_t s;
	uint8_t *d;
	CK(cudaStreamCreate(&s));
	CK(cudaMalloc(&d, (16u << 20) + 4096));
	for (int kind = 0; kind < 4; kind++) {
		uint8_t *h;
		size_t cap = (16u << 20) + 4096 + 8;
		if (kind == 0)
			CK(cudaMallocHost(&h, cap));
		else
			CK(cudaHostAlloc(&h, cap, flags[kind - 1]));
		memset(h, 0, cap);
		uint64_t seed = 1;
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
			for (size_t j = 0; j < sizeof(offs) / sizeof(offs[0]); j++)
				for (int async = 0; async < 2; async++)
					one(h, offs[j], sizes[i], d, s, async, seed++);
		CK(cudaFreeHost(h));
		printf("kind %d: copies equal\n", kind);
	}
	/* async copies in flight when the memory is freed: cudaFreeHost waits */
	uint8_t *h;
	CK(cudaMallocHost(&h, 1u << 20));
	rg_pattern(h, 1u << 20, 99);
	CK(cudaMemcpyAsync(d, h, 1u << 20, cudaMemcpyHostToDevice, s));
	CK(cudaFreeHost(h));
	uint8_t *back, *want = (uint8_t *)malloc(1u << 20);
	CK(cudaMallocHost(&back, 1u << 20));
	rg_pattern(want, 1u << 20, 99);
	CK(cudaMemcpy(back, d, 1u << 20, cudaMemcpyDeviceToHost));
	rg_check_bytes("freed while in flight", back, want, 1u << 20);
	CK(cudaFreeHost(back));
	/* pageable, synchronous, large: one round of slots and more */
	static const size_t big[] = {1u << 20, (5u << 20) + 7, (17u << 20) + 3};
	uint8_t *pg = (uint8_t *)malloc((17u << 20) + 32), *pw = (uint8_t *)malloc((17u << 20) + 32), *d2;
	CK(cudaMalloc(&d2, (17u << 20) + 16));
	for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++) {
		rg_pattern(pg + 3, big[i], 500 + i);
		memcpy(pw, pg + 3, big[i]);
		CK(cudaMemcpy(d2 + 5, pg + 3, big[i], cudaMemcpyHostToDevice));
		memset(pg, 0x77, big[i] + 16);
		CK(cudaMemcpy(pg + 3, d2 + 5, big[i], cudaMemcpyDeviceToHost));
		char label[64];
		snprintf(label, sizeof(label), "pageable %zu bytes", big[i]);
		rg_check_bytes(label, pg + 3, pw, big[i]);
		REQUIRE(pg[2] == 0x77 && pg[3 + big[i]] == 0x77, "%s: a byte around it changed", label);
	}
	CK(cudaFree(d2));
	free(pg);
	free(pw);
	CK(cudaFree(d));
	CK(cudaStreamDestroy(s));
}

static void die(void)
{
	uint8_t *h, *h2, *d;
	cudaStream_t s;
	size_t n = 64u << 20;
	CK(cudaStreamCreate(&s));
	CK(cudaMalloc(&d, n));
	CK(cudaMallocHost(&h, n));
	CK(cudaMallocHost(&h2, 4u << 20));
	rg_pattern(h, n, 5);
	CK(cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, s));
	CK(cudaMemcpyAsync(h2, d, 4u << 20, cudaMemcpyDeviceToHost, s));
	printf("dying\n");
	raise(SIGKILL);
}

static int loop(void)
{
	size_t n = (17u << 20) + 3;
	uint8_t *pg = (uint8_t *)malloc(n), *d;
	CK(cudaMalloc(&d, n));
	rg_pattern(pg, n, 9);
	for (unsigned i = 0;; i++) {
		cudaError_t e = cudaMemcpy(d, pg, n, cudaMemcpyHostToDevice);
		if (e == cudaSuccess)
			e = cudaMemcpy(pg, d, n, cudaMemcpyDeviceToHost);
		if (e != cudaSuccess) {
			printf("copy failed: %s\n", cudaGetErrorName(e));
			return 0;
		}
		if (i == 0) {
			printf("looping\n");
			fflush(stdout);
		}
	}
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "die") == 0)
		die();
	if (argc > 1 && strcmp(argv[1], "loop") == 0)
		return loop();
	copies();
	return rg_finish("pinned_shm");
}
