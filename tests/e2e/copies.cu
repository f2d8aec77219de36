/*
 * copies: cudaMemcpy of every kind and size. 0 B, 1 B, odd sizes at unaligned
 * offsets, 64 MiB; H2D, D2H, D2D, H2H and cudaMemcpyDefault; pageable, pinned
 * (cudaHostAlloc, cudaMallocHost) and registered (cudaHostRegister) host
 * memory; cudaMemcpyAsync on several streams; cudaMemcpy2D with pitched
 * allocations; symbols (cudaMemcpyToSymbol/FromSymbol, cudaGetSymbolAddress,
 * cudaGetSymbolSize) on __device__ and __constant__ arrays.
 *
 * Every copy is checked byte for byte against the source; the output lists
 * each case with the FNV-1a checksum of the data it moved.
 */
#include "rgtest.h"
#include "rgtest_kernels.cuh"

__device__ unsigned rg_sym[1024];
__constant__ float rg_const[64];

#define MiB (1024ull * 1024)

/* Pageable H2D then D2H at every size and offset combination. */
static void sizes_pageable(void)
{
	static const size_t sizes[] = {0, 1, 3, 8, 4097, MiB + 13};
	static const int offs[] = {0, 1, 3};
	for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
		for (size_t oi = 0; oi < 3; oi++) {
			size_t n = sizes[si];
			int off = offs[oi];
			unsigned char *src = (unsigned char *)malloc(n + 16);
			unsigned char *dst = (unsigned char *)malloc(n + 16);
			unsigned char *d;
			CK(cudaMalloc(&d, n + 16));
			rg_pattern(src, n + 16, si * 10 + oi);
			memset(dst, 0xEE, n + 16);
			CK(cudaMemcpy(d + off, src + off, n, cudaMemcpyHostToDevice));
			/* a different host offset on the way back */
			int hoff = (off + 2) % 5;
			CK(cudaMemcpy(dst + hoff, d + off, n, cudaMemcpyDeviceToHost));
			char label[96];
			snprintf(label, sizeof label, "pageable h2d+d2h size=%zu off=%d", n, off);
			rg_check_bytes(label, dst + hoff, src + off, n);
			/* bytes around the copied range stay untouched */
			REQUIRE(hoff == 0 || dst[hoff - 1] == 0xEE, "%s: wrote before dst", label);
			REQUIRE(dst[hoff + n] == 0xEE, "%s: wrote past dst", label);
			CK(cudaFree(d));
			free(src);
			free(dst);
		}
	}
}

/* D2D with unaligned source and destination offsets. */
static void d2d(void)
{
	static const size_t sizes[] = {0, 1, 4097, MiB + 5};
	for (size_t si = 0; si < 4; si++) {
		size_t n = sizes[si];
		unsigned char *src = (unsigned char *)malloc(n + 8), *dst = (unsigned char *)malloc(n + 8);
		unsigned char *a, *b;
		CK(cudaMalloc(&a, n + 8));
		CK(cudaMalloc(&b, n + 8));
		rg_pattern(src, n + 8, 100 + si);
		CK(cudaMemcpy(a, src, n + 8, cudaMemcpyHostToDevice));
		CK(cudaMemset(b, 0, n + 8));
		CK(cudaMemcpy(b + 3, a + 1, n, cudaMemcpyDeviceToDevice));
		CK(cudaMemcpy(dst, b, n + 8, cudaMemcpyDeviceToHost));
		char label[64];
		snprintf(label, sizeof label, "d2d size=%zu src+1 dst+3", n);
		rg_check_bytes(label, dst + 3, src + 1, n);
		REQUIRE(dst[0] == 0 && dst[1] == 0 && dst[2] == 0 && dst[n + 3] == 0, "%s: wrote outside", label);
		CK(cudaFree(a));
		CK(cudaFree(b));
		free(src);
		free(dst);
	}
}

/* cudaMemcpyDefault (the direction inferred from the pointers) and H2H. */
static void default_kind(void)
{
	size_t n = 100003;
	unsigned char *src = (unsigned char *)malloc(n), *dst = (unsigned char *)malloc(n);
	unsigned char *h2 = (unsigned char *)malloc(n);
	unsigned char *a, *b;
	CK(cudaMalloc(&a, n));
	CK(cudaMalloc(&b, n));
	rg_pattern(src, n, 200);
	CK(cudaMemcpy(a, src, n, cudaMemcpyDefault));
	CK(cudaMemcpy(b, a, n, cudaMemcpyDefault));
	memset(dst, 0, n);
	CK(cudaMemcpy(dst, b, n, cudaMemcpyDefault));
	rg_check_bytes("default h2d,d2d,d2h size=100003", dst, src, n);
	/* interior pointers */
	memset(dst, 0, n);
	CK(cudaMemcpy(dst + 7, a + 7, 1000, cudaMemcpyDefault));
	rg_check_bytes("default d2h interior +7 size=1000", dst + 7, src + 7, 1000);
	memset(h2, 0, n);
	CK(cudaMemcpy(h2, src, n, cudaMemcpyDefault));
	rg_check_bytes("default h2h size=100003", h2, src, n);
	memset(h2, 0, n);
	CK(cudaMemcpy(h2 + 1, src + 2, 4099, cudaMemcpyHostToHost));
	rg_check_bytes("h2h size=4099", h2 + 1, src + 2, 4099);
	CK(cudaFree(a));
	CK(cudaFree(b));
	free(src);
	free(dst);
	free(h2);
}

/* 64 MiB each way, pageable and pinned. */
static void big(void)
{
	size_t n = 64 * MiB;
	unsigned char *src = (unsigned char *)malloc(n), *dst = (unsigned char *)malloc(n);
	unsigned char *pin, *a, *b;
	CK(cudaMalloc(&a, n));
	CK(cudaMalloc(&b, n));
	CK(cudaMallocHost(&pin, n));
	rg_pattern(src, n, 300);
	CK(cudaMemcpy(a, src, n, cudaMemcpyHostToDevice));
	CK(cudaMemcpy(b, a, n, cudaMemcpyDeviceToDevice));
	memset(dst, 0, n);
	CK(cudaMemcpy(dst, b, n, cudaMemcpyDeviceToHost));
	rg_check_bytes("64MiB pageable h2d,d2d,d2h", dst, src, n);
	memset(pin, 0, n);
	CK(cudaMemcpy(pin, a, n, cudaMemcpyDeviceToHost));
	rg_check_bytes("64MiB pinned d2h", pin, src, n);
	rg_pattern(pin, n, 301);
	CK(cudaMemcpy(b, pin, n, cudaMemcpyHostToDevice));
	CK(cudaMemcpy(dst, b, n, cudaMemcpyDeviceToHost));
	rg_check_bytes("64MiB pinned h2d", dst, pin, n);
	CK(cudaFreeHost(pin));
	CK(cudaFree(a));
	CK(cudaFree(b));
	free(src);
	free(dst);
}

/* Pinned (cudaHostAlloc with flags, cudaMallocHost) and registered memory. */
static void pinned(void)
{
	size_t n = MiB + 123;
	unsigned char *h1, *h2, *d;
	CK(cudaHostAlloc(&h1, n + 8, cudaHostAllocDefault));
	CK(cudaHostAlloc(&h2, n + 8, cudaHostAllocPortable));
	CK(cudaMalloc(&d, n + 8));
	rg_pattern(h1, n + 8, 400);
	memset(h2, 0, n + 8);
	CK(cudaMemcpy(d + 1, h1 + 5, n, cudaMemcpyHostToDevice));
	CK(cudaMemcpy(h2 + 3, d + 1, n, cudaMemcpyDeviceToHost));
	rg_check_bytes("hostalloc h2d+d2h size=1048699 unaligned", h2 + 3, h1 + 5, n);
	CK(cudaFreeHost(h1));
	CK(cudaFreeHost(h2));

	/* cudaHostRegister on malloc'd memory, used with async copies */
	unsigned char *r1 = (unsigned char *)malloc(n), *r2 = (unsigned char *)malloc(n);
	CK(cudaHostRegister(r1, n, cudaHostRegisterDefault));
	CK(cudaHostRegister(r2, n, cudaHostRegisterDefault));
	rg_pattern(r1, n, 401);
	memset(r2, 0, n);
	cudaStream_t s;
	CK(cudaStreamCreate(&s));
	CK(cudaMemcpyAsync(d, r1, n, cudaMemcpyHostToDevice, s));
	CK(cudaMemcpyAsync(r2, d, n, cudaMemcpyDeviceToHost, s));
	CK(cudaStreamSynchronize(s));
	rg_check_bytes("hostregister async h2d+d2h size=1048699", r2, r1, n);
	CK(cudaHostUnregister(r1));
	CK(cudaHostUnregister(r2));
	/* still usable as pageable memory after unregistering */
	memset(r2, 0, n);
	CK(cudaMemcpy(r2, d, n, cudaMemcpyDeviceToHost));
	rg_check_bytes("after unregister d2h size=1048699", r2, r1, n);
	CK(cudaStreamDestroy(s));
	CK(cudaFree(d));
	free(r1);
	free(r2);
}

/* cudaMemcpyAsync on four streams, pinned and pageable. */
static void async_streams(void)
{
	enum { NS = 4 };
	size_t chunk = MiB + 17, n = chunk * NS;
	unsigned char *src, *dst, *d;
	CK(cudaMallocHost(&src, n));
	CK(cudaMallocHost(&dst, n));
	CK(cudaMalloc(&d, n));
	rg_pattern(src, n, 500);
	memset(dst, 0, n);
	cudaStream_t s[NS];
	for (int i = 0; i < NS; i++)
		CK(cudaStreamCreateWithFlags(&s[i], i % 2 ? cudaStreamNonBlocking : cudaStreamDefault));
	for (int i = 0; i < NS; i++) {
		CK(cudaMemcpyAsync(d + i * chunk, src + i * chunk, chunk, cudaMemcpyHostToDevice, s[i]));
		CK(cudaMemcpyAsync(dst + i * chunk, d + i * chunk, chunk, cudaMemcpyDeviceToHost, s[i]));
	}
	for (int i = 0; i < NS; i++)
		CK(cudaStreamSynchronize(s[i]));
	rg_check_bytes("async pinned 4 streams size=4194372", dst, src, n);

	/* pageable memory with async copies: complete at stream sync */
	unsigned char *p1 = (unsigned char *)malloc(n), *p2 = (unsigned char *)malloc(n);
	rg_pattern(p1, n, 501);
	memset(p2, 0, n);
	CK(cudaMemcpyAsync(d, p1, n, cudaMemcpyHostToDevice, s[1]));
	CK(cudaMemcpyAsync(p2, d, n, cudaMemcpyDeviceToHost, s[1]));
	CK(cudaStreamSynchronize(s[1]));
	rg_check_bytes("async pageable size=4194372", p2, p1, n);
	/* async on the NULL stream */
	memset(p2, 0, n);
	CK(cudaMemcpyAsync(p2, d, n, cudaMemcpyDeviceToHost, 0));
	CK(cudaDeviceSynchronize());
	rg_check_bytes("async null stream d2h size=4194372", p2, p1, n);
	for (int i = 0; i < NS; i++)
		CK(cudaStreamDestroy(s[i]));
	CK(cudaFreeHost(src));
	CK(cudaFreeHost(dst));
	CK(cudaFree(d));
	free(p1);
	free(p2);
}

/* cudaMemcpy2D: host pitch != device pitch, D2D between pitched allocations. */
static void copy2d(void)
{
	size_t w = 100, h = 37, hp = 128, hp2 = 101;
	unsigned char *src = (unsigned char *)malloc(hp * h), *dst = (unsigned char *)malloc(hp2 * h);
	unsigned char *want = (unsigned char *)malloc(w * h), *got = (unsigned char *)malloc(w * h);
	unsigned char *a, *b;
	size_t pa, pb;
	CK(cudaMallocPitch(&a, &pa, w, h));
	CK(cudaMallocPitch(&b, &pb, w + 3, h + 1));
	REQUIRE(pa >= w && pb >= w + 3, "pitch too small");
	rg_pattern(src, hp * h, 600);
	memset(dst, 0, hp2 * h);
	CK(cudaMemcpy2D(a, pa, src, hp, w, h, cudaMemcpyHostToDevice));
	/* into b at (row 1, column 3) */
	CK(cudaMemcpy2D(b + pb + 3, pb, a, pa, w, h, cudaMemcpyDeviceToDevice));
	CK(cudaMemcpy2D(dst, hp2, b + pb + 3, pb, w, h, cudaMemcpyDeviceToHost));
	for (size_t r = 0; r < h; r++) {
		memcpy(want + r * w, src + r * hp, w);
		memcpy(got + r * w, dst + r * hp2, w);
	}
	rg_check_bytes("memcpy2d h2d,d2d,d2h 100x37", got, want, w * h);
	/* async 2D, and the default kind */
	cudaStream_t s;
	CK(cudaStreamCreate(&s));
	memset(dst, 0, hp2 * h);
	CK(cudaMemcpy2DAsync(dst, hp2, a, pa, w, h, cudaMemcpyDefault, s));
	CK(cudaStreamSynchronize(s));
	for (size_t r = 0; r < h; r++)
		memcpy(got + r * w, dst + r * hp2, w);
	rg_check_bytes("memcpy2dasync default d2h 100x37", got, want, w * h);
	CK(cudaStreamDestroy(s));
	CK(cudaFree(a));
	CK(cudaFree(b));
	free(src);
	free(dst);
	free(want);
	free(got);
}

/* cudaMalloc3D, cudaMemcpy3D both ways (whole box, and a sub-box at an offset,
 * async), cudaMemset3D of a sub-box. */
static void copy3d(void)
{
	const size_t W = 37, H = 5, D = 4, n = W * H * D;
	struct cudaExtent ext = make_cudaExtent(W, H, D);
	struct cudaPitchedPtr d;
	CK(cudaMalloc3D(&d, ext));
	REQUIRE(d.pitch >= W && d.ysize == H, "cudaMalloc3D pitch");
	unsigned char *h = (unsigned char *)malloc(n), *back = (unsigned char *)malloc(n), *want = (unsigned char *)malloc(n);
	rg_pattern(h, n, 700);
	memcpy(want, h, n);
	struct cudaMemcpy3DParms p;
	memset(&p, 0, sizeof(p));
	p.srcPtr = make_cudaPitchedPtr(h, W, W, H);
	p.dstPtr = d;
	p.extent = ext;
	p.kind = cudaMemcpyHostToDevice;
	CK(cudaMemcpy3D(&p));
	CK(cudaMemset3D(d, 0x77, make_cudaExtent(10, 2, 3)));
	for (size_t z = 0; z < 3; z++)
		for (size_t y = 0; y < 2; y++)
			memset(want + z * W * H + y * W, 0x77, 10);
	memset(&p, 0, sizeof(p));
	p.srcPtr = d;
	p.dstPtr = make_cudaPitchedPtr(back, W, W, H);
	p.extent = ext;
	p.kind = cudaMemcpyDeviceToHost;
	CK(cudaMemcpy3D(&p));
	rg_check_bytes("memcpy3d/memset3d 37x5x4", back, want, n);
	/* the sub-box at (3, 1, 1) of 20 x 3 x 2, async, into the same place here */
	memset(back, 0, n);
	memset(&p, 0, sizeof(p));
	p.srcPtr = d;
	p.srcPos = make_cudaPos(3, 1, 1);
	p.dstPtr = make_cudaPitchedPtr(back, W, W, H);
	p.dstPos = make_cudaPos(3, 1, 1);
	p.extent = make_cudaExtent(20, 3, 2);
	p.kind = cudaMemcpyDefault;
	CK(cudaMemcpy3DAsync(&p, 0));
	CK(cudaStreamSynchronize(0));
	memset(h, 0, n);
	for (size_t z = 1; z < 3; z++)
		for (size_t y = 1; y < 4; y++)
			memcpy(h + z * W * H + y * W + 3, want + z * W * H + y * W + 3, 20);
	rg_check_bytes("memcpy3dasync sub-box 20x3x2 at (3,1,1)", back, h, n);
	CK(cudaFree(d.ptr));
	free(h);
	free(back);
	free(want);
}

/* Symbols: copies by symbol with offsets, and through the symbol's address. */
static void symbols(void)
{
	unsigned h[1024], g[1024];
	size_t sz = 0;
	CK(cudaGetSymbolSize(&sz, rg_sym));
	printf("symbol size rg_sym=%zu\n", sz);
	rg_pattern(h, sizeof h, 700);
	CK(cudaMemcpyToSymbol(rg_sym, h, sizeof h));
	memset(g, 0, sizeof g);
	CK(cudaMemcpyFromSymbol(g, rg_sym, sizeof g));
	rg_check_bytes("to/from symbol 4096", g, h, sizeof h);
	/* offsets: overwrite bytes [100, 300) and read back [96, 304) */
	unsigned char part[200];
	rg_pattern(part, sizeof part, 701);
	CK(cudaMemcpyToSymbol(rg_sym, part, sizeof part, 100, cudaMemcpyHostToDevice));
	memcpy((unsigned char *)h + 100, part, sizeof part);
	unsigned char back[208];
	CK(cudaMemcpyFromSymbol(back, rg_sym, sizeof back, 96, cudaMemcpyDeviceToHost));
	rg_check_bytes("symbol offset 100 size 200", back, (unsigned char *)h + 96, sizeof back);

	/* the address: a kernel writes through it, copies read it back */
	unsigned *addr = NULL;
	CK(cudaGetSymbolAddress((void **)&addr, rg_sym));
	REQUIRE(addr != NULL, "null symbol address");
	rgtest_fill_u32<<<4, 256>>>(addr + 512, 0xC0FFEEu, 512);
	CK(cudaGetLastError());
	CK(cudaDeviceSynchronize());
	for (int i = 512; i < 1024; i++)
		h[i] = 0xC0FFEEu;
	memset(g, 0, sizeof g);
	CK(cudaMemcpy(g, addr, sizeof g, cudaMemcpyDeviceToHost));
	rg_check_bytes("fill through symbol address, d2h", g, h, sizeof h);
	memset(g, 0, sizeof g);
	CK(cudaMemcpyFromSymbol(g, rg_sym, sizeof g));
	rg_check_bytes("fill through symbol address, from symbol", g, h, sizeof h);
	/* D2D into the symbol from an allocation */
	unsigned *d;
	CK(cudaMalloc(&d, sizeof h));
	rg_pattern(h, sizeof h, 702);
	CK(cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice));
	CK(cudaMemcpyToSymbol(rg_sym, d, sizeof h, 0, cudaMemcpyDeviceToDevice));
	memset(g, 0, sizeof g);
	CK(cudaMemcpyFromSymbol(g, rg_sym, sizeof g));
	rg_check_bytes("d2d to symbol", g, h, sizeof h);
	CK(cudaFree(d));

	/* __constant__ memory */
	float cf[64], cg[64];
	for (int i = 0; i < 64; i++)
		cf[i] = i * 0.5f - 3.0f;
	CK(cudaMemcpyToSymbol(rg_const, cf, sizeof cf));
	memset(cg, 0, sizeof cg);
	CK(cudaMemcpyFromSymbol(cg, rg_const, sizeof cg));
	rg_check_bytes("constant symbol 256", cg, cf, sizeof cf);
	CK(cudaGetSymbolSize(&sz, rg_const));
	printf("symbol size rg_const=%zu\n", sz);
}

int main(void)
{
	CK(cudaSetDevice(0));
	sizes_pageable();
	d2d();
	default_kind();
	pinned();
	async_streams();
	copy2d();
	copy3d();
	symbols();
	big();
	return rg_finish("copies");
}
