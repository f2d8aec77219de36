/*
 * textures: CUDA arrays, copies to and from them, texture and surface objects.
 *
 * Arrays: a 2D float array and a 2D uchar4 array (cudaMallocArray), a 3D float
 * array (cudaMalloc3DArray); cudaArrayGetInfo. Copies, each checked byte for
 * byte: cudaMemcpy2DToArray/FromArray (pitched host memory, sub-boxes at
 * offsets, async on a stream, device memory on the other side),
 * cudaMemcpy2DArrayToArray, cudaMemcpyToArray/FromArray across rows,
 * cudaMemcpy3D host <-> 3D array <-> pitched device memory (whole box and a
 * sub-box). Texture objects on an array (point filtering, clamp; linear
 * filtering with normalized coordinates), on linear and on pitched memory;
 * cudaGetTextureObjectResourceDesc; a surface object written by surf2Dwrite
 * and read back with cudaMemcpy2DFromArray.
 *
 * Kernels that read textures or write surfaces run on a GPU only: their lines
 * start with "gpu: " (tests/gpu/run.sh compares them between the local and the
 * remote run; they are not in expected/textures.out). On the driver test double
 * each such launch prints an "expect launch" line instead, whose parameters
 * hold the texture object's value: the value the server's driver gave must reach
 * the kernel as it is.
 *
 * Errors: a box outside the array; a freed array and a texture object destroyed
 * twice (undefined in CUDA: through the remote only, like errors.cu's stale
 * handles). An array, a texture and a surface object are left alive at exit:
 * the server must free them when the session ends (memory back to baseline).
 */
#include "rgtest.h"

/* cudaMemcpyToArray/FromArray are deprecated, and still used: tested on purpose. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#define W 64
#define H 33
#define CW 40
#define CH 20

extern "C" __global__ void rgtest_tex_point(cudaTextureObject_t t, float *out, int w, int h)
{
	int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
	if (x < w && y < h)
		out[y * w + x] = tex2D<float>(t, x + 0.5f, y + 0.5f);
}

/* Between texels, and past the edges (clamp), in normalized coordinates. */
extern "C" __global__ void rgtest_tex_linear(cudaTextureObject_t t, float4 *out, int w, int h)
{
	int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
	if (x < w && y < h)
		out[y * w + x] = tex2D<float4>(t, (x * 1.1f - 2.0f) / w, (y * 1.3f - 1.0f) / h);
}

extern "C" __global__ void rgtest_tex_fetch(cudaTextureObject_t t, float *out, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		out[i] = tex1Dfetch<float>(t, i) * 2.0f;
}

extern "C" __global__ void rgtest_surf_write(cudaSurfaceObject_t s, int w, int h)
{
	int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
	if (x < w && y < h)
		surf2Dwrite((float)(y * 1000 + x), s, x * (int)sizeof(float), y);
}

/* The launch line the fake logs for a kernel of (handle, [pointer,] int, int):
 * the parameters back to back, as their layout has them. */
static void expect_launch(const char *name, unsigned long long obj, const void *ptr, int a, int b, dim3 g, dim3 bl)
{
	unsigned char p[24];
	unsigned long long q = (unsigned long long)(uintptr_t)ptr;
	size_t n = 0;
	memcpy(p, &obj, 8), n = 8;
	if (ptr)
		memcpy(p + n, &q, 8), n += 8;
	memcpy(p + n, &a, 4), n += 4;
	memcpy(p + n, &b, 4), n += 4;
	char hex[49];
	rg_hex(hex, p, n);
	printf("expect launch %s grid=%u,%u,%u block=%u,%u,%u shmem=0 params=%s\n", name, g.x, g.y, g.z, bl.x, bl.y,
	       bl.z, hex);
}

/* A resource description of the whole array a. */
static cudaResourceDesc array_resource(cudaArray_t a)
{
	cudaResourceDesc rd;
	memset(&rd, 0, sizeof rd);
	rd.resType = cudaResourceTypeArray;
	rd.res.array.array = a;
	return rd;
}

static float *float_image(void)
{
	float *h = (float *)malloc(W * H * sizeof(float));
	for (int i = 0; i < W * H; i++)
		h[i] = (float)((i * 37) % 1001) * 0.25f - 100.0f;
	return h;
}

/* The float array: copies, cudaArrayGetInfo, a point-filtered texture. */
static cudaArray_t float_array(void)
{
	cudaChannelFormatDesc cd = cudaCreateChannelDesc<float>();
	printf("channel desc float: %d %d %d %d kind %d\n", cd.x, cd.y, cd.z, cd.w, (int)cd.f);
	cudaArray_t a;
	CK(cudaMallocArray(&a, &cd, W, H, cudaArraySurfaceLoadStore));
	cudaChannelFormatDesc gd;
	cudaExtent ext;
	unsigned flags;
	CK(cudaArrayGetInfo(&gd, &ext, &flags, a));
	printf("array info: %d %d %d %d kind %d extent %zu %zu %zu flags %u\n", gd.x, gd.y, gd.z, gd.w, (int)gd.f,
	       ext.width, ext.height, ext.depth, flags);

	/* in from a host pitch of W + 7 floats, out to a pitch of W + 3 */
	float *img = float_image();
	size_t sp = (W + 7) * sizeof(float), dp = (W + 3) * sizeof(float);
	float *src = (float *)calloc(1, sp * H), *dst = (float *)calloc(1, dp * H), *got = (float *)malloc(W * H * 4);
	for (int y = 0; y < H; y++)
		memcpy((char *)src + y * sp, img + y * W, W * 4);
	CK(cudaMemcpy2DToArray(a, 0, 0, src, sp, W * 4, H, cudaMemcpyHostToDevice));
	CK(cudaMemcpy2DFromArray(dst, dp, a, 0, 0, W * 4, H, cudaMemcpyDeviceToHost));
	for (int y = 0; y < H; y++)
		memcpy(got + y * W, (char *)dst + y * dp, W * 4);
	rg_check_bytes("float array 2d h2a+a2h 64x33", got, img, W * H * 4);

	/* a sub-box: 10 floats x 4 rows from (5, 7), cudaMemcpyDefault */
	float part[40];
	CK(cudaMemcpy2DFromArray(part, 10 * 4, a, 5 * 4, 7, 10 * 4, 4, cudaMemcpyDefault));
	float want[40];
	for (int y = 0; y < 4; y++)
		memcpy(want + y * 10, img + (7 + y) * W + 5, 40);
	rg_check_bytes("float array sub-box a2h 10x4 at (5,7)", part, want, sizeof part);

	/* texture: point filtering, clamp, unnormalized coordinates */
	cudaResourceDesc rd = array_resource(a);
	cudaTextureDesc td;
	memset(&td, 0, sizeof td);
	td.addressMode[0] = td.addressMode[1] = cudaAddressModeClamp;
	td.filterMode = cudaFilterModePoint;
	td.readMode = cudaReadModeElementType;
	cudaTextureObject_t t;
	CK(cudaCreateTextureObject(&t, &rd, &td, NULL));
	cudaResourceDesc back;
	CK(cudaGetTextureObjectResourceDesc(&back, t));
	printf("resource desc: type %d same array %d\n", (int)back.resType, back.res.array.array == a);
	float *d;
	CK(cudaMalloc(&d, W * H * 4));
	CK(cudaMemset(d, 0, W * H * 4));
	dim3 g(1, H), b(W);
	rgtest_tex_point<<<g, b>>>(t, d, W, H);
	CK(cudaGetLastError());
	CK(cudaDeviceSynchronize());
	if (rg_fake()) {
		expect_launch("rgtest_tex_point", t, d, W, H, g, b);
	} else {
		CK(cudaMemcpy(got, d, W * H * 4, cudaMemcpyDeviceToHost));
		printf("gpu: tex2D point float 64x33: %s\n", memcmp(got, img, W * H * 4) ? "MISMATCH" : "ok");
	}
	CK(cudaDestroyTextureObject(t));
	CK(cudaFree(d));
	free(img);
	free(src);
	free(dst);
	free(got);
	return a;
}

/* The surface: surf2Dwrite into the float array, read back. */
static void surface(cudaArray_t a)
{
	cudaResourceDesc rd = array_resource(a);
	cudaSurfaceObject_t s;
	CK(cudaCreateSurfaceObject(&s, &rd));
	dim3 g(1, H), b(W);
	rgtest_surf_write<<<g, b>>>(s, W, H);
	CK(cudaGetLastError());
	CK(cudaDeviceSynchronize());
	float *got = (float *)malloc(W * H * 4);
	CK(cudaMemcpy2DFromArray(got, W * 4, a, 0, 0, W * 4, H, cudaMemcpyDeviceToHost));
	if (rg_fake()) {
		expect_launch("rgtest_surf_write", s, NULL, W, H, g, b);
	} else {
		int ok = 1;
		for (int y = 0; y < H; y++)
			for (int x = 0; x < W; x++)
				ok &= got[y * W + x] == (float)(y * 1000 + x);
		printf("gpu: surf2Dwrite 64x33, read by cudaMemcpy2DFromArray: %s\n", ok ? "ok" : "MISMATCH");
	}
	CK(cudaDestroySurfaceObject(s));
	free(got);
}

/* The uchar4 array: async, device-side and linear copies, array to array, a
 * texture with linear filtering and normalized coordinates. */
static void uchar4_array(void)
{
	cudaChannelFormatDesc cd = cudaCreateChannelDesc<uchar4>();
	printf("channel desc uchar4: %d %d %d %d kind %d\n", cd.x, cd.y, cd.z, cd.w, (int)cd.f);
	cudaArray_t a, a2;
	CK(cudaMallocArray(&a, &cd, CW, CH));
	CK(cudaMallocArray(&a2, &cd, CW, CH));
	cudaChannelFormatDesc gd;
	CK(cudaGetChannelDesc(&gd, a2));
	printf("cudaGetChannelDesc uchar4 array: %d %d %d %d kind %d\n", gd.x, gd.y, gd.z, gd.w, (int)gd.f);
	size_t n = CW * CH * 4;
	unsigned char *img = (unsigned char *)malloc(n), *got = (unsigned char *)malloc(n);
	rg_pattern(img, n, 900);
	cudaStream_t st;
	CK(cudaStreamCreate(&st));
	CK(cudaMemcpy2DToArrayAsync(a, 0, 0, img, CW * 4, CW * 4, CH, cudaMemcpyHostToDevice, st));
	memset(got, 0, n);
	CK(cudaMemcpy2DFromArrayAsync(got, CW * 4, a, 0, 0, CW * 4, CH, cudaMemcpyDeviceToHost, st));
	CK(cudaStreamSynchronize(st));
	rg_check_bytes("uchar4 array async h2a+a2h 40x20", got, img, n);

	/* device -> array (a sub-box at (3, 2)) -> device, pitched */
	unsigned char *d;
	size_t pitch;
	CK(cudaMallocPitch(&d, &pitch, CW * 4, CH));
	CK(cudaMemcpy2D(d, pitch, img, CW * 4, CW * 4, CH, cudaMemcpyHostToDevice));
	CK(cudaMemcpy2DToArray(a2, 3 * 4, 2, d, pitch, 20 * 4, 9, cudaMemcpyDeviceToDevice));
	CK(cudaMemset2D(d, pitch, 0, CW * 4, CH));
	CK(cudaMemcpy2DFromArray(d, pitch, a2, 3 * 4, 2, 20 * 4, 9, cudaMemcpyDeviceToDevice));
	unsigned char *back = (unsigned char *)malloc(20 * 4 * 9), *want = (unsigned char *)malloc(20 * 4 * 9);
	CK(cudaMemcpy2D(back, 80, d, pitch, 80, 9, cudaMemcpyDeviceToHost));
	for (int y = 0; y < 9; y++)
		memcpy(want + y * 80, img + y * CW * 4, 80);
	rg_check_bytes("uchar4 d2a+a2d sub-box 20x9 at (3,2)", back, want, 80 * 9);

	/* array -> array: the whole of a into a2 */
	CK(cudaMemcpy2DArrayToArray(a2, 0, 0, a, 0, 0, CW * 4, CH, cudaMemcpyDeviceToDevice));
	memset(got, 0, n);
	CK(cudaMemcpy2DFromArray(got, CW * 4, a2, 0, 0, CW * 4, CH, cudaMemcpyDeviceToHost));
	rg_check_bytes("uchar4 a2a 40x20", got, img, n);

	/* deprecated linear copies: 300 bytes from the middle of row 2 wrap
	 * into rows 3 and 4 */
	unsigned char lin[300], lout[300];
	rg_pattern(lin, sizeof lin, 901);
	CK(cudaMemcpyToArray(a2, 100, 2, lin, sizeof lin, cudaMemcpyHostToDevice));
	memcpy(img + 2 * CW * 4 + 100, lin, sizeof lin);
	memset(lout, 0, sizeof lout);
	CK(cudaMemcpyFromArray(lout, a2, 100, 2, sizeof lout, cudaMemcpyDeviceToHost));
	rg_check_bytes("uchar4 to/from array 300 bytes at (100,2)", lout, lin, sizeof lout);
	memset(got, 0, n);
	CK(cudaMemcpy2DFromArray(got, CW * 4, a2, 0, 0, CW * 4, CH, cudaMemcpyDeviceToHost));
	rg_check_bytes("uchar4 whole after the linear copy", got, img, n);

	/* texture: linear filtering, normalized coordinates, read as floats */
	cudaResourceDesc rd = array_resource(a2);
	cudaTextureDesc td;
	memset(&td, 0, sizeof td);
	td.addressMode[0] = cudaAddressModeClamp;
	td.addressMode[1] = cudaAddressModeWrap;
	td.filterMode = cudaFilterModeLinear;
	td.readMode = cudaReadModeNormalizedFloat;
	td.normalizedCoords = 1;
	cudaTextureObject_t t;
	CK(cudaCreateTextureObject(&t, &rd, &td, NULL));
	cudaTextureDesc tback;
	CK(cudaGetTextureObjectTextureDesc(&tback, t));
	printf("texture desc: filter %d read %d normalized %d address %d %d\n", (int)tback.filterMode,
	       (int)tback.readMode, tback.normalizedCoords, (int)tback.addressMode[0], (int)tback.addressMode[1]);
	float4 *out;
	CK(cudaMalloc(&out, CW * CH * sizeof(float4)));
	dim3 g(1, CH), b(CW);
	rgtest_tex_linear<<<g, b, 0, st>>>(t, out, CW, CH);
	CK(cudaGetLastError());
	CK(cudaStreamSynchronize(st));
	if (rg_fake()) {
		expect_launch("rgtest_tex_linear", t, out, CW, CH, g, b);
	} else {
		float4 *h = (float4 *)malloc(CW * CH * sizeof(float4));
		CK(cudaMemcpy(h, out, CW * CH * sizeof(float4), cudaMemcpyDeviceToHost));
		printf("gpu: tex2D linear normalized uchar4 40x20: fnv=%016llx first %.6f %.6f last %.6f\n",
		       (unsigned long long)rg_fnv(h, CW * CH * sizeof(float4)), h[0].x, h[0].w, h[CW * CH - 1].y);
		free(h);
	}
	CK(cudaDestroyTextureObject(t));
	CK(cudaFree(out));
	CK(cudaFree(d));
	CK(cudaStreamDestroy(st));
	CK(cudaFreeArray(a));
	CK(cudaFreeArray(a2));
	free(img);
	free(got);
	free(back);
	free(want);
}

/* Texture objects on linear and pitched memory. */
static void linear_textures(void)
{
	enum { N = 1000 };
	float h[N], *d;
	for (int i = 0; i < N; i++)
		h[i] = i * 0.5f - 7.0f;
	CK(cudaMalloc(&d, N * sizeof(float)));
	CK(cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice));
	cudaResourceDesc rd;
	memset(&rd, 0, sizeof rd);
	rd.resType = cudaResourceTypeLinear;
	rd.res.linear.devPtr = d;
	rd.res.linear.desc = cudaCreateChannelDesc<float>();
	rd.res.linear.sizeInBytes = N * sizeof(float);
	cudaTextureDesc td;
	memset(&td, 0, sizeof td);
	td.readMode = cudaReadModeElementType;
	cudaTextureObject_t t;
	CK(cudaCreateTextureObject(&t, &rd, &td, NULL));
	cudaResourceDesc back;
	CK(cudaGetTextureObjectResourceDesc(&back, t));
	printf("linear resource desc: type %d size %zu same pointer %d\n", (int)back.resType,
	       back.res.linear.sizeInBytes, back.res.linear.devPtr == d);
	float *out;
	CK(cudaMalloc(&out, N * sizeof(float)));
	dim3 g((N + 255) / 256), b(256);
	rgtest_tex_fetch<<<g, b>>>(t, out, N);
	CK(cudaGetLastError());
	CK(cudaDeviceSynchronize());
	if (rg_fake()) {
		unsigned char p[20];
		unsigned long long v = t, q = (unsigned long long)(uintptr_t)out;
		int n = N;
		memcpy(p, &v, 8);
		memcpy(p + 8, &q, 8);
		memcpy(p + 16, &n, 4);
		char hex[41];
		rg_hex(hex, p, 20);
		printf("expect launch rgtest_tex_fetch grid=%u,1,1 block=256,1,1 shmem=0 params=%s\n", g.x, hex);
	} else {
		float o[N];
		CK(cudaMemcpy(o, out, sizeof o, cudaMemcpyDeviceToHost));
		int ok = 1;
		for (int i = 0; i < N; i++)
			ok &= o[i] == h[i] * 2.0f;
		printf("gpu: tex1Dfetch linear 1000: %s\n", ok ? "ok" : "MISMATCH");
	}
	CK(cudaDestroyTextureObject(t));

	/* pitched memory: 2D texture on a cudaMallocPitch allocation */
	float *p2;
	size_t pitch;
	CK(cudaMallocPitch(&p2, &pitch, 32 * sizeof(float), 16));
	memset(&rd, 0, sizeof rd);
	rd.resType = cudaResourceTypePitch2D;
	rd.res.pitch2D.devPtr = p2;
	rd.res.pitch2D.desc = cudaCreateChannelDesc<float>();
	rd.res.pitch2D.width = 32;
	rd.res.pitch2D.height = 16;
	rd.res.pitch2D.pitchInBytes = pitch;
	CK(cudaCreateTextureObject(&t, &rd, &td, NULL));
	CK(cudaGetTextureObjectResourceDesc(&back, t));
	printf("pitch2D resource desc: type %d %zux%zu\n", (int)back.resType, back.res.pitch2D.width,
	       back.res.pitch2D.height);
	CK(cudaDestroyTextureObject(t));
	CK(cudaFree(p2));
	CK(cudaFree(out));
	CK(cudaFree(d));
}

/* A 3D array: host -> array -> pitched device memory -> host, and a sub-box. */
static void array3d(void)
{
	const size_t X = 9, Y = 7, Z = 5, n = X * Y * Z;
	cudaChannelFormatDesc cd = cudaCreateChannelDesc<float>();
	cudaArray_t a;
	CK(cudaMalloc3DArray(&a, &cd, make_cudaExtent(X, Y, Z)));
	cudaExtent ext;
	CK(cudaArrayGetInfo(NULL, &ext, NULL, a));
	printf("3d array extent %zu %zu %zu\n", ext.width, ext.height, ext.depth);
	float *h = (float *)malloc(n * 4), *got = (float *)calloc(n, 4);
	for (size_t i = 0; i < n; i++)
		h[i] = (float)i * 1.5f + 0.25f;
	cudaMemcpy3DParms p;
	memset(&p, 0, sizeof p);
	p.srcPtr = make_cudaPitchedPtr(h, X * 4, X, Y);
	p.dstArray = a;
	p.extent = make_cudaExtent(X, Y, Z);
	p.kind = cudaMemcpyHostToDevice;
	CK(cudaMemcpy3D(&p));
	cudaPitchedPtr d;
	CK(cudaMalloc3D(&d, make_cudaExtent(X * 4, Y, Z)));
	memset(&p, 0, sizeof p);
	p.srcArray = a;
	p.dstPtr = d;
	p.extent = make_cudaExtent(X, Y, Z);
	p.kind = cudaMemcpyDeviceToDevice;
	CK(cudaMemcpy3D(&p));
	memset(&p, 0, sizeof p);
	p.srcPtr = d;
	p.dstPtr = make_cudaPitchedPtr(got, X * 4, X, Y);
	p.extent = make_cudaExtent(X * 4, Y, Z);
	p.kind = cudaMemcpyDeviceToHost;
	CK(cudaMemcpy3D(&p));
	rg_check_bytes("3d array h2a, a2d, d2h 9x7x5 float", got, h, n * 4);

	/* the sub-box at (2, 1, 1) of 4 x 3 x 2, async, into the same place here:
	 * with an array in the copy, the pointer's position counts in the array's
	 * elements too (CUDA refuses x = 8 here: 8 floats + 4 pass the pitch) */
	memset(got, 0, n * 4);
	memset(&p, 0, sizeof p);
	p.srcArray = a;
	p.srcPos = make_cudaPos(2, 1, 1);
	p.dstPtr = make_cudaPitchedPtr(got, X * 4, X, Y);
	p.dstPos = make_cudaPos(2, 1, 1);
	p.extent = make_cudaExtent(4, 3, 2);
	p.kind = cudaMemcpyDeviceToHost;
	CK(cudaMemcpy3DAsync(&p, 0));
	CK(cudaStreamSynchronize(0));
	float *want = (float *)calloc(n, 4);
	for (size_t z = 1; z < 3; z++)
		for (size_t y = 1; y < 4; y++)
			memcpy(want + z * X * Y + y * X + 2, h + z * X * Y + y * X + 2, 16);
	rg_check_bytes("3d array a2h sub-box 4x3x2 at (2,1,1)", got, want, n * 4);
	CK(cudaFree(d.ptr));
	CK(cudaFreeArray(a));
	free(h);
	free(got);
	free(want);
}

/* A call that is undefined in CUDA (a freed array, a destroyed texture): made
 * through the remote only; a local run prints what the remote answers. */
static void undefined(const char *label, cudaError_t (*call)(void *), void *arg, cudaError_t want)
{
	if (rg_remote()) {
		EXPECT_ERR(label, call(arg), want);
		(void)cudaGetLastError();
	} else {
		printf("%s: %s\n", label, cudaGetErrorName(want));
	}
}

static cudaError_t copy_to_freed(void *arg)
{
	float v = 1.0f;
	return cudaMemcpy2DToArray((cudaArray_t)arg, 0, 0, &v, 4, 4, 1, cudaMemcpyHostToDevice);
}

static cudaError_t free_freed(void *arg) { return cudaFreeArray((cudaArray_t)arg); }
static cudaError_t destroy_tex(void *arg) { return cudaDestroyTextureObject((cudaTextureObject_t)(uintptr_t)arg); }

static void errors(void)
{
	cudaChannelFormatDesc cd = cudaCreateChannelDesc<float>();
	cudaArray_t a;
	CK(cudaMallocArray(&a, &cd, 16, 4));
	float v[80] = {0};
	EXPECT_ERR("copy past the array's width", cudaMemcpy2DToArray(a, 8 * 4, 0, v, 80, 10 * 4, 2,
	           cudaMemcpyHostToDevice), cudaErrorInvalidValue);
	(void)cudaGetLastError();
	EXPECT_ERR("copy past the array's height", cudaMemcpy2DFromArray(v, 16 * 4, a, 0, 2, 16 * 4, 3,
	           cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
	(void)cudaGetLastError();
	/* the pointer's position counts in floats: 13 + 4 of them pass its pitch */
	cudaMemcpy3DParms p3;
	memset(&p3, 0, sizeof p3);
	p3.srcArray = a;
	p3.dstPtr = make_cudaPitchedPtr(v, 16 * 4, 16, 4);
	p3.dstPos = make_cudaPos(13, 0, 0);
	p3.extent = make_cudaExtent(4, 1, 1);
	p3.kind = cudaMemcpyDeviceToHost;
	EXPECT_ERR("3d copy past the pointer's pitch", cudaMemcpy3D(&p3), cudaErrorInvalidValue);
	(void)cudaGetLastError();
	EXPECT_ERR("cudaFreeArray(NULL)", cudaFreeArray(NULL), cudaSuccess);
	cudaResourceDesc rd = array_resource(a);
	cudaTextureDesc td;
	memset(&td, 0, sizeof td);
	cudaTextureObject_t t;
	CK(cudaCreateTextureObject(&t, &rd, &td, NULL));
	CK(cudaDestroyTextureObject(t));
	undefined("texture object destroyed twice", destroy_tex, (void *)(uintptr_t)t, cudaErrorInvalidValue);
	CK(cudaFreeArray(a));
	undefined("copy to a freed array", copy_to_freed, a, cudaErrorInvalidResourceHandle);
	undefined("free a freed array", free_freed, a, cudaErrorInvalidResourceHandle);
	CK(cudaDeviceSynchronize());
}

int main(void)
{
	CK(cudaSetDevice(0));
	cudaArray_t a = float_array();
	surface(a);
	uchar4_array();
	linear_textures();
	array3d();
	errors();

	/* left alive on purpose: the session's end must free them */
	cudaResourceDesc rd = array_resource(a);
	cudaTextureDesc td;
	memset(&td, 0, sizeof td);
	cudaTextureObject_t t;
	cudaSurfaceObject_t s;
	CK(cudaCreateTextureObject(&t, &rd, &td, NULL));
	CK(cudaCreateSurfaceObject(&s, &rd));
	return rg_finish("textures");
}
