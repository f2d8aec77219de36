/*
 * copy_chunks: copies at the sizes where they are cut. libremote.so asks for
 * copies to the host 1 MiB at a time (frontend/src/copy_bytes.c): one byte
 * either side of that boundary and of 64 KiB, at unaligned device and
 * host offsets, from pageable and pinned memory, both directions, sync and
 * async. A copy whose range runs past its allocation fails with one clear
 * error, and the copies after it are exact.
 *
 * Every copy is checked byte for byte, and the bytes around its destination
 * must stay untouched; the output lists each case with its FNV-1a checksum.
 */
#include "rgtest.h"

#define KiB 1024ull
#define MiB (1024ull * 1024)
#define GUARD 0xEE

static const size_t sizes[] = {64 * KiB - 1, 64 * KiB, 64 * KiB + 1, 192 * KiB + 1, MiB - 1, MiB + 1, 3 * MiB + 7};
static const int doffs[] = {0, 3};

/* dst[hoff .. hoff+n) equals want, and the bytes just around it are GUARD. */
static void check_landed(const char *label, const unsigned char *dst, int hoff, const unsigned char *want, size_t n)
{
	rg_check_bytes(label, dst + hoff, want, n);
	REQUIRE(hoff == 0 || dst[hoff - 1] == GUARD, "%s: wrote before dst", label);
	REQUIRE(dst[hoff + n] == GUARD, "%s: wrote past dst", label);
}

static unsigned char *host_alloc(int pinned, size_t n)
{
	void *p = NULL;
	if (pinned)
		CK(cudaMallocHost(&p, n));
	else
		p = malloc(n);
	return (unsigned char *)p;
}

static void host_free(int pinned, void *p)
{
	if (pinned)
		CK(cudaFreeHost(p));
	else
		free(p);
}

/* H2D then D2H of every size at every device offset; pinned: host memory from
 * cudaMallocHost, else malloc. */
static void round_trips(int pinned)
{
	for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
		for (size_t oi = 0; oi < sizeof doffs / sizeof *doffs; oi++) {
			size_t n = sizes[si];
			int doff = doffs[oi], hoff = (int)oi * 5;
			unsigned char *src = host_alloc(pinned, n + 16), *dst = host_alloc(pinned, n + 16), *d;
			CK(cudaMalloc(&d, n + 16));
			rg_pattern(src, n + 16, si * 10 + oi + (pinned ? 100 : 0));
			memset(dst, GUARD, n + 16);
			CK(cudaMemcpy(d + doff, src + hoff, n, cudaMemcpyHostToDevice));
			CK(cudaMemcpy(dst + 5 - hoff, d + doff, n, cudaMemcpyDeviceToHost));
			char label[96];
			snprintf(label, sizeof label, "%s size=%zu doff=%d", pinned ? "pinned" : "pageable", n, doff);
			check_landed(label, dst, 5 - hoff, src + hoff, n);
			CK(cudaFree(d));
			host_free(pinned, src);
			host_free(pinned, dst);
		}
	}
}

/* Async copies to the host on a stream, several in flight, then one sync. */
static void async_in_flight(void)
{
	const size_t n = 3 * MiB + 7;
	unsigned char *src = (unsigned char *)malloc(n), *d;
	unsigned char *dst = (unsigned char *)malloc(4 * (n + 8));
	cudaStream_t st;
	CK(cudaStreamCreate(&st));
	CK(cudaMalloc(&d, n));
	rg_pattern(src, n, 77);
	memset(dst, GUARD, 4 * (n + 8));
	CK(cudaMemcpy(d, src, n, cudaMemcpyHostToDevice));
	for (int i = 0; i < 4; i++)
		CK(cudaMemcpyAsync(dst + (size_t)i * (n + 8) + 1, d + i, n - (size_t)i, cudaMemcpyDeviceToHost, st));
	CK(cudaStreamSynchronize(st));
	for (int i = 0; i < 4; i++) {
		char label[64];
		snprintf(label, sizeof label, "async d2h %d of 4", i);
		check_landed(label, dst + (size_t)i * (n + 8), 1, src + i, n - (size_t)i);
	}
	CK(cudaFree(d));
	CK(cudaStreamDestroy(st));
	free(src);
	free(dst);
}

/* A range past the allocation: one error, then exact copies again. Through
 * remote-gpu only: a local driver may let a copy run past an allocation into
 * its rounding (2 MiB pages); nothing is printed, so the output stays the
 * local run's. */
static void bad_range(void)
{
	const size_t n = 3 * MiB;
	unsigned char *src = (unsigned char *)malloc(n), *dst = (unsigned char *)malloc(n + 1), *d;
	CK(cudaMalloc(&d, n));
	rg_pattern(src, n, 99);
	CK(cudaMemcpy(d, src, n, cudaMemcpyHostToDevice));
	cudaError_t e = cudaMemcpy(dst, d + 1, n, cudaMemcpyDeviceToHost);
	REQUIRE(e == cudaErrorInvalidValue, "d2h one byte past the end: %s", cudaGetErrorName(e));
	e = cudaMemcpy(d + 1, src, n, cudaMemcpyHostToDevice);
	REQUIRE(e == cudaErrorInvalidValue, "h2d one byte past the end: %s", cudaGetErrorName(e));
	e = cudaGetLastError();
	REQUIRE(e == cudaErrorInvalidValue, "the last error: %s", cudaGetErrorName(e));
	e = cudaGetLastError();
	REQUIRE(e == cudaSuccess, "after it was read: %s", cudaGetErrorName(e));
	memset(dst, GUARD, n + 1);
	CK(cudaMemcpy(dst, d, n, cudaMemcpyDeviceToHost));
	REQUIRE(memcmp(dst, src, n) == 0 && dst[n] == GUARD, "the copy after the errors");
	CK(cudaFree(d));
	free(src);
	free(dst);
}

int main(void)
{
	CK(cudaSetDevice(0));
	round_trips(0);
	round_trips(1);
	async_in_flight();
	if (rg_remote())
		bad_range();
	return rg_finish("copy_chunks");
}
