/*
 * multi_gpu: several devices in one program (needs 2 or more). Run on one
 * server that serves several GPUs (remote-gpud --device all), on the driver
 * test double with FAKECUDA_DEVICES=2, or on two such servers at once
 * (REMOTE_GPU=a:p,b:q: four devices, two of each server). Prints what must
 * equal a local run on the same GPUs:
 *   - the device count, each device's properties (name, capability, memory),
 *     and cudaDeviceCanAccessPeer for every pair;
 *   - cudaSetDevice routing: an allocation on device d takes device d's free
 *     memory only, its pointer attributes name d, a kernel on d fills it;
 *   - copies between every ordered pair of devices, byte for byte, by
 *     cudaMemcpyPeer, cudaMemcpyPeerAsync, cudaMemcpy with cudaMemcpyDefault
 *     and with cudaMemcpyDeviceToDevice (from the current device);
 *   - peer access: enable, enable again, disable, disable again, own device,
 *     bad flags, and a pair that cannot (an error each);
 *   - invalid ordinals;
 *   - the driver API's side (through cudaGetDriverEntryPointByVersion):
 *     cuDeviceCanAccessPeer, cuCtxEnablePeerAccess / cuCtxDisablePeerAccess on
 *     the primary contexts, cuMemcpyPeer and cuMemcpyPeerAsync;
 *   - with peer access on, a kernel on one device adding the other's memory
 *     (a GPU only: lines start with "gpu: ");
 *   - every device's free memory back at its start after the frees.
 */
#include <cuda.h>

#include "rgtest.h"
#include "rgtest_kernels.cuh"

#define N (1u << 20) /* bytes per buffer */

/* A word for a check's outcome; a bad one counts as a failure. */
static const char *said(int ok, const char *good, const char *bad)
{
	if (!ok)
		rg_failures++;
	return ok ? good : bad;
}

/* Fills and waits: a copy on another device's stream afterwards is ordered
 * after it on a GPU too. */
static void fill(int dev, unsigned *p, unsigned v)
{
	CK(cudaSetDevice(dev));
	rgtest_fill_u32<<<rgtest_grid(N / 4), 256>>>(p, v, N / 4);
	CK(cudaGetLastError());
	CK(cudaDeviceSynchronize());
}

/* The N bytes at p, on device dev, all v? */
static int all_equal(int dev, const unsigned *p, unsigned v, unsigned *host)
{
	CK(cudaSetDevice(dev));
	CK(cudaMemcpy(host, p, N, cudaMemcpyDeviceToHost));
	for (unsigned i = 0; i < N / 4; i++)
		if (host[i] != v)
			return 0;
	return 1;
}

int main(void)
{
	int n = 0;
	CK(cudaGetDeviceCount(&n));
	printf("devices: %d\n", n);
	REQUIRE(n >= 2, "needs 2 devices or more, has %d", n);
	if (n > 8)
		n = 8;
	unsigned *host = (unsigned *)malloc(N);
	REQUIRE(host, "no memory");

	size_t base_free[8], start_free[8], fr, tot;
	for (int d = 0; d < n; d++) {
		cudaDeviceProp p;
		CK(cudaGetDeviceProperties(&p, d));
		printf("device %d: %s, cc %d.%d, %d SMs, unified addressing %d\n", d, p.name, p.major, p.minor,
		       p.multiProcessorCount, p.unifiedAddressing);
		CK(cudaSetDevice(d));
		CK(cudaFree(0));
	}
	for (int d = 0; d < n; d++) {
		CK(cudaSetDevice(d));
		CK(cudaMemGetInfo(&base_free[d], &tot));
		start_free[d] = base_free[d];
	}
	int can[8][8];
	for (int a = 0; a < n; a++)
		for (int b = 0; b < n; b++) {
			CK(cudaDeviceCanAccessPeer(&can[a][b], a, b));
			printf("can access peer %d -> %d: %d\n", a, b, can[a][b]);
		}

	/* Routing: each device's allocation, attributes, kernel. */
	unsigned *buf[8];
	for (int d = 0; d < n; d++) {
		CK(cudaSetDevice(d));
		CK(cudaMalloc(&buf[d], N));
		int others_same = 1, own_less = 0;
		for (int e = 0; e < n; e++) {
			CK(cudaSetDevice(e));
			CK(cudaMemGetInfo(&fr, &tot));
			if (e == d)
				own_less = fr + N <= base_free[e];
			else if (fr != base_free[e])
				others_same = 0;
		}
		cudaPointerAttributes at;
		CK(cudaPointerGetAttributes(&at, buf[d]));
		fill(d, buf[d], 0xd0000000u + d);
		printf("alloc on %d: its memory %s, others' %s, attributes device %d, kernel %s\n", d,
		       said(own_less, "less", "SAME"), said(others_same, "same", "CHANGED"), at.device,
		       said(all_equal(d, buf[d], 0xd0000000u + d, host), "ok", "WRONG"));
		if (at.device != d)
			rg_failures++;
		CK(cudaSetDevice(d)); /* what the next devices' checks compare with */
		CK(cudaMemGetInfo(&base_free[d], &tot));
	}

	/* Copies between every ordered pair. */
	cudaStream_t st;
	CK(cudaSetDevice(0));
	CK(cudaStreamCreate(&st));
	for (int a = 0; a < n; a++)
		for (int b = 0; b < n; b++) {
			if (a == b)
				continue;
			unsigned v = 0xa0000000u + 16u * a + b;
			fill(a, buf[a], v);
			fill(b, buf[b], 0);
			CK(cudaMemcpyPeer(buf[b], b, buf[a], a, N));
			int ok1 = all_equal(b, buf[b], v, host);
			fill(a, buf[a], v + 1);
			CK(cudaSetDevice(0));
			CK(cudaMemcpyPeerAsync(buf[b], b, buf[a], a, N, st));
			CK(cudaStreamSynchronize(st));
			int ok2 = all_equal(b, buf[b], v + 1, host);
			fill(a, buf[a], v + 2);
			CK(cudaSetDevice(a));
			CK(cudaMemcpy(buf[b], buf[a], N, cudaMemcpyDefault));
			int ok3 = all_equal(b, buf[b], v + 2, host);
			fill(a, buf[a], v + 3);
			CK(cudaSetDevice(b));
			CK(cudaMemcpy(buf[b], buf[a], N, cudaMemcpyDeviceToDevice));
			CK(cudaDeviceSynchronize());
			int ok4 = all_equal(b, buf[b], v + 3, host);
			printf("copy %d -> %d: peer %s, peer async %s, default %s, device to device %s\n", a, b,
			       said(ok1, "ok", "WRONG"), said(ok2, "ok", "WRONG"), said(ok3, "ok", "WRONG"),
			       said(ok4, "ok", "WRONG"));
		}
	CK(cudaSetDevice(0));
	CK(cudaStreamDestroy(st));

	/* Peer access. */
	char label[96];
	for (int a = 0; a < n; a++)
		for (int b = 0; b < n; b++) {
			if (a == b)
				continue;
			CK(cudaSetDevice(a));
			if (!can[a][b]) {
				snprintf(label, sizeof label, "enable %d -> %d (cannot)", a, b);
				EXPECT_ERR(label, cudaDeviceEnablePeerAccess(b, 0), cudaErrorPeerAccessUnsupported);
				continue;
			}
			snprintf(label, sizeof label, "enable %d -> %d", a, b);
			EXPECT_ERR(label, cudaDeviceEnablePeerAccess(b, 0), cudaSuccess);
			snprintf(label, sizeof label, "enable %d -> %d again", a, b);
			EXPECT_ERR(label, cudaDeviceEnablePeerAccess(b, 0), cudaErrorPeerAccessAlreadyEnabled);
			(void)cudaGetLastError();
			if (!rg_fake()) {
				/* a kernel on a reads b's memory and writes a's: 2 + 1 = 3 */
				fill(a, buf[a], 0x40000000u); /* 2.0f */
				fill(b, buf[b], 0x3f800000u); /* 1.0f */
				float *fa = (float *)buf[a], *fb = (float *)buf[b];
				CK(cudaSetDevice(a));
				rgtest_add_f32<<<rgtest_grid(N / 4), 256>>>(fa, fb, fa, N / 4);
				CK(cudaDeviceSynchronize());
				printf("gpu: kernel on %d with %d's memory: %s\n", a, b,
				       said(all_equal(a, buf[a], 0x40400000u, host), "ok", "WRONG"));
				CK(cudaSetDevice(a));
			}
			snprintf(label, sizeof label, "disable %d -> %d", a, b);
			EXPECT_ERR(label, cudaDeviceDisablePeerAccess(b), cudaSuccess);
			snprintf(label, sizeof label, "disable %d -> %d again", a, b);
			EXPECT_ERR(label, cudaDeviceDisablePeerAccess(b), cudaErrorPeerAccessNotEnabled);
			(void)cudaGetLastError();
		}
	CK(cudaSetDevice(0));
	/* an H100 answers this, not the documented cudaErrorInvalidDevice */
	EXPECT_ERR("enable own device", cudaDeviceEnablePeerAccess(0, 0), cudaErrorPeerAccessUnsupported);
	if (can[0][1])
		EXPECT_ERR("enable with flags 1", cudaDeviceEnablePeerAccess(1, 1), cudaErrorInvalidValue);
	(void)cudaGetLastError();

	/* Invalid ordinals. */
	int c;
	EXPECT_ERR("set device n", cudaSetDevice(n), cudaErrorInvalidDevice);
	EXPECT_ERR("can access peer n", cudaDeviceCanAccessPeer(&c, 0, n), cudaErrorInvalidDevice);
	EXPECT_ERR("memcpy peer to device n", cudaMemcpyPeer(buf[1], n, buf[0], 0, N), cudaErrorInvalidDevice);
	EXPECT_ERR("enable peer n", cudaDeviceEnablePeerAccess(n, 0), cudaErrorInvalidDevice);
	(void)cudaGetLastError();

	/* The driver API: devices 0 and 1, their primary contexts. */
	{
		typedef CUresult (*can_fn)(int *, CUdevice, CUdevice);
		typedef CUresult (*retain_fn)(CUcontext *, CUdevice);
		typedef CUresult (*release_fn)(CUdevice);
		typedef CUresult (*ctx_fn)(CUcontext);
		typedef CUresult (*enable_fn)(CUcontext, unsigned);
		typedef CUresult (*peer_fn)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t);
		typedef CUresult (*peer_async_fn)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream);
		void *f[8];
		const char *names[8] = {"cuDeviceCanAccessPeer", "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRelease",
					"cuCtxSetCurrent", "cuCtxEnablePeerAccess", "cuCtxDisablePeerAccess",
					"cuMemcpyPeer", "cuMemcpyPeerAsync"};
		for (int i = 0; i < 8; i++) {
			cudaDriverEntryPointQueryResult q;
			CK(cudaGetDriverEntryPointByVersion(names[i], &f[i], 12000, cudaEnableDefault, &q));
			REQUIRE(q == cudaDriverEntryPointSuccess && f[i], "%s not found", names[i]);
		}
		int dcan = -1;
		REQUIRE(((can_fn)f[0])(&dcan, 0, 1) == CUDA_SUCCESS, "cuDeviceCanAccessPeer");
		printf("driver: can access peer 0 -> 1: %d\n", dcan);
		CUcontext c0, c1;
		REQUIRE(((retain_fn)f[1])(&c0, 0) == CUDA_SUCCESS && ((retain_fn)f[1])(&c1, 1) == CUDA_SUCCESS,
			"cuDevicePrimaryCtxRetain");
		REQUIRE(((ctx_fn)f[3])(c0) == CUDA_SUCCESS, "cuCtxSetCurrent");
		if (dcan) {
			CUresult r1 = ((enable_fn)f[4])(c1, 0), r2 = ((enable_fn)f[4])(c1, 0);
			CUresult r3 = ((ctx_fn)f[5])(c1), r4 = ((ctx_fn)f[5])(c1);
			printf("driver: enable 0 -> 1: %d, again: %d, disable: %d, again: %d\n", (int)r1, (int)r2, (int)r3,
			       (int)r4);
			if (r1 != CUDA_SUCCESS || r2 != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED || r3 != CUDA_SUCCESS ||
			    r4 != CUDA_ERROR_PEER_ACCESS_NOT_ENABLED)
				rg_failures++;
		}
		fill(0, buf[0], 0x5eed0001u);
		fill(1, buf[1], 0);
		CK(cudaSetDevice(0));
		REQUIRE(((ctx_fn)f[3])(c0) == CUDA_SUCCESS, "cuCtxSetCurrent");
		CUresult r = ((peer_fn)f[6])((CUdeviceptr)buf[1], c1, (CUdeviceptr)buf[0], c0, N);
		int ok1 = r == CUDA_SUCCESS && all_equal(1, buf[1], 0x5eed0001u, host);
		fill(1, buf[1], 0x5eed0002u);
		CK(cudaSetDevice(0));
		REQUIRE(((ctx_fn)f[3])(c0) == CUDA_SUCCESS, "cuCtxSetCurrent");
		CUresult ra = ((peer_async_fn)f[7])((CUdeviceptr)buf[0], c0, (CUdeviceptr)buf[1], c1, N, 0);
		CK(cudaDeviceSynchronize());
		int ok2 = ra == CUDA_SUCCESS && all_equal(0, buf[0], 0x5eed0002u, host);
		printf("driver: cuMemcpyPeer 0 -> 1 %s, cuMemcpyPeerAsync 1 -> 0 %s\n", said(ok1, "ok", "WRONG"),
		       said(ok2, "ok", "WRONG"));
		REQUIRE(((release_fn)f[2])(0) == CUDA_SUCCESS && ((release_fn)f[2])(1) == CUDA_SUCCESS,
			"cuDevicePrimaryCtxRelease");
		CK(cudaSetDevice(0));
	}

	/* Frees: every device's memory back. */
	for (int d = 0; d < n; d++) {
		CK(cudaSetDevice(d));
		CK(cudaFree(buf[d]));
	}
	for (int d = 0; d < n; d++) {
		CK(cudaSetDevice(d));
		CK(cudaDeviceSynchronize());
		CK(cudaMemGetInfo(&fr, &tot));
		/* A GPU keeps some memory after peer access was used (device 0 of two
		 * H100s, locally as remotely; how much is on stderr): up to 64 MiB is
		 * taken as back. The test double keeps nothing. */
		size_t slack = rg_fake() ? 0 : (size_t)64 << 20;
		fprintf(stderr, "device %d: free %zu, at the start %zu\n", d, fr, start_free[d]);
		printf("device %d memory back: %s\n", d, said(fr + slack >= start_free[d], "yes", "NO"));
	}
	free(host);
	return rg_finish("multi_gpu");
}
