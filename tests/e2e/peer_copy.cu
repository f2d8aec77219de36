/*
 * Copies between devices of two servers (REMOTE_GPU=a,b: device 0 on a,
 * device 1 on b), for run_e2e.sh's peer_s2s, which runs it once where the
 * servers copy to each other directly and once where the source's server
 * cannot reach the destination's (the client stages); the bytes must be the
 * same either way, and the log says which way they went.
 *   - cudaMemcpyPeer both ways at sizes around the servers' 4 MiB chunk and
 *     past the window of chunks in flight, at odd offsets, exact bytes;
 *   - cudaMemcpyPeerAsync on a stream of the destination's device, between a
 *     memset before it and one after it on that stream (order on B), and on a
 *     stream of the source's device after a memset there (order on A);
 *   - cudaMemcpy with cudaMemcpyDefault between the two;
 *   - the driver API's cuMemcpyPeer and cuMemcpyPeerAsync (primary contexts);
 *   - a stream of one server waiting for an event of the other (PyTorch's
 *     cross-device copies do, both ways): the work after the wait sees the
 *     event's;
 *   - two threads copying the opposite ways at once, many times (each
 *     server pushing while the other pushes to it);
 *   - each device's free memory back where it started.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "rgtest.h"

#define BIG (21u << 20) /* five chunks and more: past the window of four */

static unsigned char *h_src, *h_got;

static void pattern(unsigned char *p, size_t n, unsigned seed)
{
	uint32_t x = seed * 2654435761u + 1;
	for (size_t i = 0; i < n; i++) {
		x = x * 1664525u + 1013904223u;
		p[i] = (unsigned char)(x >> 24);
	}
}

/* size n from src+so on device sd to dst+do_ on device dd; the bytes around
 * the destination range stay what they were. */
static int one(unsigned char *dst, int dd, unsigned char *src, int sd, size_t so, size_t do_, size_t n, unsigned seed)
{
	pattern(h_src, BIG + 8192, seed);
	CK(cudaSetDevice(sd));
	CK(cudaMemcpy(src, h_src, BIG + 8192, cudaMemcpyHostToDevice));
	CK(cudaSetDevice(dd));
	CK(cudaMemset(dst, 0x5a, BIG + 8192));
	CK(cudaMemcpyPeer(dst + do_, dd, src + so, sd, n));
	CK(cudaMemcpy(h_got, dst, BIG + 8192, cudaMemcpyDeviceToHost));
	for (size_t i = 0; i < BIG + 8192; i++) {
		unsigned char want = i >= do_ && i < do_ + n ? h_src[so + i - do_] : 0x5a;
		if (h_got[i] != want) {
			printf("copy %d -> %d of %zu bytes (%zu -> %zu): byte %zu is %02x, want %02x\n", sd, dd, n, so, do_,
			       i, h_got[i], want);
			return 0;
		}
	}
	return 1;
}

/* One direction of the concurrent copies: 5 MiB from the start of src's
 * buffer to 8 MiB into dst's, again and again. */
typedef struct way {
	unsigned char *dst, *src;
	int dd, sd, err;
} way;

static void *copy_way(void *arg)
{
	way *w = (way *)arg;
	cudaSetDevice(w->sd);
	for (int i = 0; i < 12 && !w->err; i++)
		w->err = cudaMemcpyPeer(w->dst + (8u << 20), w->dd, w->src, w->sd, 5u << 20);
	return NULL;
}

int main(void)
{
	int n = 0;
	size_t fr0[2], fr1[2], tot;
	unsigned char *buf[2];

	CK(cudaGetDeviceCount(&n));
	REQUIRE(n == 2, "two devices (one of each server), not %d", n);
	h_src = (unsigned char *)malloc(BIG + 8192);
	h_got = (unsigned char *)malloc(BIG + 8192);
	REQUIRE(h_src && h_got, "host memory");
	for (int d = 0; d < 2; d++) {
		CK(cudaSetDevice(d));
		CK(cudaMemGetInfo(&fr0[d], &tot));
		CK(cudaMalloc(&buf[d], BIG + 8192));
	}

	static const size_t sizes[] = {1, 4095, 4u << 20, (4u << 20) + 3, BIG};
	static const size_t offs[][2] = {{0, 0}, {1, 4097}, {4097, 3}};
	int ok = 1;
	unsigned seed = 1;
	for (int dir = 0; dir < 2; dir++)
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
			for (size_t j = 0; j < sizeof(offs) / sizeof(offs[0]); j++)
				ok &= one(buf[1 - dir], 1 - dir, buf[dir], dir, offs[j][0], offs[j][1], sizes[i], seed++);
	printf("peer copies, both ways, 5 sizes x 3 offsets: %s\n", ok ? "ok" : "WRONG");

	/* Order on the destination's stream: memset, copy, memset of the second half. */
	size_t half = (6u << 20) + 5;
	cudaStream_t sb, sa;
	pattern(h_src, BIG + 8192, 77);
	CK(cudaSetDevice(0));
	CK(cudaMemcpy(buf[0], h_src, 2 * half, cudaMemcpyHostToDevice));
	CK(cudaSetDevice(1));
	CK(cudaStreamCreateWithFlags(&sb, cudaStreamNonBlocking));
	CK(cudaMemsetAsync(buf[1], 0x11, 2 * half, sb));
	CK(cudaMemcpyPeerAsync(buf[1], 1, buf[0], 0, 2 * half, sb));
	CK(cudaMemsetAsync(buf[1] + half, 0x22, half, sb));
	CK(cudaStreamSynchronize(sb));
	CK(cudaMemcpy(h_got, buf[1], 2 * half, cudaMemcpyDeviceToHost));
	int ordb = !memcmp(h_got, h_src, half);
	for (size_t i = half; i < 2 * half && ordb; i++)
		ordb = h_got[i] == 0x22;
	/* Order on the source's stream: a memset there, then the copy reads it. */
	CK(cudaSetDevice(0));
	CK(cudaStreamCreateWithFlags(&sa, cudaStreamNonBlocking));
	CK(cudaMemsetAsync(buf[0], 0x33, half, sa));
	CK(cudaMemcpyPeerAsync(buf[1], 1, buf[0], 0, half, sa));
	CK(cudaStreamSynchronize(sa));
	CK(cudaSetDevice(1));
	CK(cudaMemcpy(h_got, buf[1], half, cudaMemcpyDeviceToHost));
	int orda = 1;
	for (size_t i = 0; i < half && orda; i++)
		orda = h_got[i] == 0x33;
	printf("peer copy async: order on the destination's stream %s, on the source's %s\n", ordb ? "ok" : "WRONG",
	       orda ? "ok" : "WRONG");

	/* A stream on A waits for an event on B, then copies from B what the
	 * work before the event wrote there. */
	cudaEvent_t evb;
	CK(cudaSetDevice(1));
	CK(cudaEventCreateWithFlags(&evb, cudaEventDisableTiming));
	CK(cudaMemsetAsync(buf[1], 0x44, half, sb));
	CK(cudaEventRecord(evb, sb));
	CK(cudaSetDevice(0));
	CK(cudaStreamWaitEvent(sa, evb, 0));
	CK(cudaMemcpyPeerAsync(buf[0], 0, buf[1], 1, half, sa));
	CK(cudaStreamSynchronize(sa));
	CK(cudaMemcpy(h_got, buf[0], half, cudaMemcpyDeviceToHost));
	int evw = 1;
	for (size_t i = 0; i < half && evw; i++)
		evw = h_got[i] == 0x44;
	CK(cudaSetDevice(1));
	CK(cudaEventDestroy(evb));
	printf("a stream of one server waiting for an event of the other: %s\n", evw ? "ok" : "WRONG");

	/* cudaMemcpyDefault between the two servers' devices. */
	pattern(h_src, BIG + 8192, 99);
	CK(cudaSetDevice(1));
	CK(cudaMemcpy(buf[1], h_src, 12345, cudaMemcpyHostToDevice));
	CK(cudaSetDevice(0));
	CK(cudaMemcpy(buf[0] + 7, buf[1], 12345, cudaMemcpyDefault));
	CK(cudaMemcpy(h_got, buf[0] + 7, 12345, cudaMemcpyDeviceToHost));
	int def = !memcmp(h_got, h_src, 12345);
	printf("cudaMemcpyDefault between the servers: %s\n", def ? "ok" : "WRONG");

	/* Both ways at once. */
	unsigned char *h1 = (unsigned char *)malloc(5u << 20);
	REQUIRE(h1, "host memory");
	pattern(h_src, 5u << 20, 501);
	pattern(h1, 5u << 20, 502);
	CK(cudaSetDevice(0));
	CK(cudaMemcpy(buf[0], h_src, 5u << 20, cudaMemcpyHostToDevice));
	CK(cudaSetDevice(1));
	CK(cudaMemcpy(buf[1], h1, 5u << 20, cudaMemcpyHostToDevice));
	way w[2] = {{buf[1], buf[0], 1, 0, 0}, {buf[0], buf[1], 0, 1, 0}};
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		REQUIRE(pthread_create(&th[i], NULL, copy_way, &w[i]) == 0, "pthread_create");
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	CK(cudaMemcpy(h_got, buf[1] + (8u << 20), 5u << 20, cudaMemcpyDeviceToHost));
	int both = !w[0].err && !w[1].err && !memcmp(h_got, h_src, 5u << 20);
	CK(cudaSetDevice(0));
	CK(cudaMemcpy(h_got, buf[0] + (8u << 20), 5u << 20, cudaMemcpyDeviceToHost));
	both &= !memcmp(h_got, h1, 5u << 20);
	free(h1);
	printf("copies both ways at once, 2 threads x 12: %s\n", both ? "ok" : "WRONG");

	/* The driver API: cuMemcpyPeer 0 -> 1, cuMemcpyPeerAsync 1 -> 0. */
	typedef CUresult (*retain_fn)(CUcontext *, CUdevice);
	typedef CUresult (*release_fn)(CUdevice);
	typedef CUresult (*peer_fn)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t);
	typedef CUresult (*peer_async_fn)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream);
	void *f[4];
	const char *names[4] = {"cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRelease", "cuMemcpyPeer",
				"cuMemcpyPeerAsync"};
	for (int i = 0; i < 4; i++) {
		cudaDriverEntryPointQueryResult q;
		CK(cudaGetDriverEntryPointByVersion(names[i], &f[i], 12000, cudaEnableDefault, &q));
		REQUIRE(q == cudaDriverEntryPointSuccess && f[i], "%s not found", names[i]);
	}
	CUcontext c0, c1;
	REQUIRE(((retain_fn)f[0])(&c0, 0) == CUDA_SUCCESS && ((retain_fn)f[0])(&c1, 1) == CUDA_SUCCESS,
		"cuDevicePrimaryCtxRetain");
	pattern(h_src, BIG + 8192, 123);
	CK(cudaSetDevice(0));
	CK(cudaMemcpy(buf[0], h_src, 3 << 20, cudaMemcpyHostToDevice));
	CUresult r1 = ((peer_fn)f[2])((CUdeviceptr)buf[1] + 11, c1, (CUdeviceptr)buf[0], c0, 3 << 20);
	CK(cudaSetDevice(1));
	CK(cudaMemcpy(h_got, buf[1] + 11, 3 << 20, cudaMemcpyDeviceToHost));
	int drv1 = r1 == CUDA_SUCCESS && !memcmp(h_got, h_src, 3 << 20);
	CUresult r2 = ((peer_async_fn)f[3])((CUdeviceptr)buf[0] + 5, c0, (CUdeviceptr)buf[1] + 11, c1, 3 << 20, 0);
	CK(cudaDeviceSynchronize());
	CK(cudaSetDevice(0));
	CK(cudaMemcpy(h_got, buf[0] + 5, 3 << 20, cudaMemcpyDeviceToHost));
	int drv2 = r2 == CUDA_SUCCESS && !memcmp(h_got, h_src, 3 << 20);
	REQUIRE(((release_fn)f[1])(0) == CUDA_SUCCESS && ((release_fn)f[1])(1) == CUDA_SUCCESS,
		"cuDevicePrimaryCtxRelease");
	printf("driver: cuMemcpyPeer 0 -> 1 %s, cuMemcpyPeerAsync 1 -> 0 %s\n", drv1 ? "ok" : "WRONG",
	       drv2 ? "ok" : "WRONG");

	CK(cudaSetDevice(0));
	CK(cudaStreamDestroy(sa));
	CK(cudaSetDevice(1));
	CK(cudaStreamDestroy(sb));
	int mem = 1;
	for (int d = 0; d < 2; d++) {
		CK(cudaSetDevice(d));
		CK(cudaFree(buf[d]));
		CK(cudaDeviceSynchronize());
		CK(cudaMemGetInfo(&fr1[d], &tot));
		mem &= fr1[d] == fr0[d];
	}
	printf("free memory back to where it started: %s\n", mem ? "ok" : "CHANGED");
	free(h_src);
	free(h_got);
	if (!(ok && ordb && orda && def && mem && drv1 && drv2 && evw && both))
		rg_failures++;
	return rg_finish("peer_copy");
}
