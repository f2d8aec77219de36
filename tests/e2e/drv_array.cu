/*
 * drv_array.cu: the driver API's CUDA arrays, the copies to, from and between
 * them, texture and surface objects, and the device queries that have no
 * runtime twin, with driver calls (the runtime only where the two APIs share
 * a handle: an array or a texture made by one and read by the other).
 *
 * Runs unchanged on a GPU (the real libcuda.so.1) and through libremote.so as
 * libcuda.so.1 (LD_LIBRARY_PATH=<build>/frontend/driver) against remote-gpud.
 * Error codes are the driver's as an H100 (driver 580) answers them, where its
 * documentation says otherwise too. Where the remote path is specified to
 * differ from a local GPU (no GPUDirect RDMA, no sparse arrays, no virtual
 * memory management or IPC across hosts, a query only the server's driver
 * could answer) the expectation depends on REMOTE_GPU; calls that are
 * undefined in CUDA (a destroyed texture object) are made through the remote
 * only. RGTEST_FAKE=1 (the driver test double behind the server) leaves out
 * the texture alignment checks, which the test double does not make.
 *
 * Output and exit status as rgdrv.h says: the same lines in every mode.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime.h>

#include "rgdrv.h"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

static CUdevice dev;

static CUarray make(size_t w, size_t h, size_t d, CUarray_format f, unsigned ch, unsigned flags)
{
	CUDA_ARRAY3D_DESCRIPTOR a = {w, h, d, f, ch, flags};
	CUarray r;
	CK(cuArray3DCreate(&r, &a));
	return r;
}

/* ---- arrays and their descriptors ---- */

static void descriptors(void)
{
	CUDA_ARRAY_DESCRIPTOR d2 = {16, 4, CU_AD_FORMAT_FLOAT, 1}, g2;
	CUDA_ARRAY3D_DESCRIPTOR g3;
	CUarray a;
	expect("cuArrayCreate 16x4 float", cuArrayCreate(&a, &d2), CUDA_SUCCESS);
	memset(&g2, 0xee, sizeof g2);
	CK(cuArrayGetDescriptor(&g2, a));
	check("cuArrayGetDescriptor 16x4 float",
	      g2.Width == 16 && g2.Height == 4 && g2.Format == CU_AD_FORMAT_FLOAT && g2.NumChannels == 1,
	      "%zu x %zu format %#x channels %u", g2.Width, g2.Height, g2.Format, g2.NumChannels);
	memset(&g3, 0xee, sizeof g3);
	CK(cuArray3DGetDescriptor(&g3, a));
	check("cuArray3DGetDescriptor of a 2D array",
	      g3.Width == 16 && g3.Height == 4 && g3.Depth == 0 && g3.Format == CU_AD_FORMAT_FLOAT &&
	              g3.NumChannels == 1 && g3.Flags == 0,
	      "%zu x %zu x %zu flags %u", g3.Width, g3.Height, g3.Depth, g3.Flags);
	/* the runtime sees the same array */
	cudaChannelFormatDesc cd;
	cudaExtent ext;
	unsigned flags = 99;
	cudaError_t e = cudaArrayGetInfo(&cd, &ext, &flags, (cudaArray_t)a);
	check("cudaArrayGetInfo of a CUarray",
	      e == cudaSuccess && cd.x == 32 && cd.y == 0 && cd.f == cudaChannelFormatKindFloat && ext.width == 16 &&
	              ext.height == 4 && ext.depth == 0 && flags == 0,
	      "%s: %d %d kind %d extent %zu %zu %zu flags %u", cudaGetErrorName(e), cd.x, cd.y, (int)cd.f, ext.width,
	      ext.height, ext.depth, flags);
	expect("cuArrayDestroy", cuArrayDestroy(a), CUDA_SUCCESS);

	d2.Height = 0;
	CK(cuArrayCreate(&a, &d2));
	CK(cuArray3DGetDescriptor(&g3, a));
	check("cuArrayCreate with height 0 is 1D", g3.Width == 16 && g3.Height == 0 && g3.Depth == 0, "%zu x %zu x %zu",
	      g3.Width, g3.Height, g3.Depth);
	CK(cuArrayDestroy(a));

	a = make(9, 7, 5, CU_AD_FORMAT_UNSIGNED_INT16, 2, 0);
	CK(cuArray3DGetDescriptor(&g3, a));
	check("cuArray3DGetDescriptor 9x7x5 ushort2",
	      g3.Width == 9 && g3.Height == 7 && g3.Depth == 5 && g3.Format == CU_AD_FORMAT_UNSIGNED_INT16 &&
	              g3.NumChannels == 2,
	      "%zu x %zu x %zu format %#x channels %u", g3.Width, g3.Height, g3.Depth, g3.Format, g3.NumChannels);
	CK(cuArrayGetDescriptor(&g2, a));
	check("cuArrayGetDescriptor of a 3D array: its width and height", g2.Width == 9 && g2.Height == 7, "%zu x %zu",
	      g2.Width, g2.Height);
	CK(cuArrayDestroy(a));

	a = make(9, 0, 3, CU_AD_FORMAT_SIGNED_INT8, 4, CUDA_ARRAY3D_LAYERED);
	CK(cuArray3DGetDescriptor(&g3, a));
	check("1D layered char4: 3 layers, flags",
	      g3.Width == 9 && g3.Height == 0 && g3.Depth == 3 && g3.Flags == CUDA_ARRAY3D_LAYERED &&
	              g3.Format == CU_AD_FORMAT_SIGNED_INT8 && g3.NumChannels == 4,
	      "%zu x %zu x %zu flags %u", g3.Width, g3.Height, g3.Depth, g3.Flags);
	CK(cuArrayDestroy(a));

	/* an array the runtime made */
	cudaArray_t ra;
	cd = cudaCreateChannelDesc(16, 16, 16, 16, cudaChannelFormatKindFloat);
	e = cudaMalloc3DArray(&ra, &cd, make_cudaExtent(8, 8, 0), cudaArraySurfaceLoadStore);
	check("cudaMalloc3DArray half4 8x8", e == cudaSuccess, "%s", cudaGetErrorName(e));
	CK(cuArray3DGetDescriptor(&g3, (CUarray)ra));
	check("cuArray3DGetDescriptor of a cudaArray_t",
	      g3.Width == 8 && g3.Height == 8 && g3.Depth == 0 && g3.Format == CU_AD_FORMAT_HALF &&
	              g3.NumChannels == 4 && g3.Flags == CUDA_ARRAY3D_SURFACE_LDST,
	      "%zu x %zu x %zu format %#x channels %u flags %u", g3.Width, g3.Height, g3.Depth, g3.Format,
	      g3.NumChannels, g3.Flags);
	expect("cuArrayDestroy of a cudaArray_t", cuArrayDestroy((CUarray)ra), CUDA_SUCCESS);

	/* bad input */
	CUDA_ARRAY3D_DESCRIPTOR bad = {4, 0, 0, (CUarray_format)7, 1, 0};
	CUarray x;
	expect("cuArray3DCreate format 7", cuArray3DCreate(&x, &bad), CUDA_ERROR_INVALID_VALUE);
	bad.Format = CU_AD_FORMAT_FLOAT;
	bad.NumChannels = 3;
	expect("cuArray3DCreate 3 channels", cuArray3DCreate(&x, &bad), CUDA_ERROR_INVALID_VALUE);
	bad.NumChannels = 1;
	bad.Width = 0;
	expect("cuArray3DCreate width 0", cuArray3DCreate(&x, &bad), CUDA_ERROR_INVALID_VALUE);
	bad.Width = 4;
	bad.Depth = 3;
	expect("cuArray3DCreate depth without height, not layered", cuArray3DCreate(&x, &bad),
	       CUDA_ERROR_INVALID_VALUE);
	bad.Depth = 0;
	bad.Flags = 0x1000;
	expect("cuArray3DCreate unknown flag", cuArray3DCreate(&x, &bad), CUDA_ERROR_INVALID_VALUE);
	bad.Flags = 0;
	expect("cuArray3DCreate NULL handle", cuArray3DCreate(NULL, &bad), CUDA_ERROR_INVALID_VALUE);
	expect("cuArray3DCreate NULL descriptor", cuArray3DCreate(&x, NULL), CUDA_ERROR_INVALID_VALUE);
	expect("cuArrayCreate NULL descriptor", cuArrayCreate(&x, NULL), CUDA_ERROR_INVALID_VALUE);
	/* a sparse array needs cuMemMapArrayAsync: not across hosts */
	bad.Height = 64;
	bad.Width = 64;
	bad.Flags = CUDA_ARRAY3D_SPARSE;
	CUresult r = cuArray3DCreate(&x, &bad);
	expect("cuArray3DCreate sparse", r, remote ? CUDA_ERROR_NOT_SUPPORTED : CUDA_SUCCESS);
	if (r == CUDA_SUCCESS)
		CK(cuArrayDestroy(x));
	a = make(4, 0, 0, CU_AD_FORMAT_FLOAT, 1, 0);
	expect("cuArrayGetDescriptor NULL descriptor", cuArrayGetDescriptor(NULL, a), CUDA_ERROR_INVALID_VALUE);
	expect("cuArray3DGetDescriptor NULL descriptor", cuArray3DGetDescriptor(NULL, a), CUDA_ERROR_INVALID_VALUE);
	expect("cuArrayGetDescriptor NULL array", cuArrayGetDescriptor(&g2, NULL), CUDA_ERROR_INVALID_HANDLE);
	expect("cuArray3DGetDescriptor NULL array", cuArray3DGetDescriptor(&g3, NULL), CUDA_ERROR_INVALID_HANDLE);
	expect("cuArrayDestroy NULL", cuArrayDestroy(NULL), CUDA_ERROR_INVALID_HANDLE);
	CK(cuArrayDestroy(a));
}

/* ---- copies ---- */

/* The 1D copies: bytes of the array's first row. */
static void copies_1d(void)
{
	CUarray f = make(16, 4, 0, CU_AD_FORMAT_FLOAT, 1, 0), u = make(16, 4, 0, CU_AD_FORMAT_UNSIGNED_INT8, 4, 0);
	unsigned char in[256], out[256], want[256];
	fill(in, sizeof in, 1);
	CK(cuMemcpyHtoA(f, 0, in, 64));
	memset(out, 0, sizeof out);
	CK(cuMemcpyAtoH(out, f, 0, 64));
	check_bytes("cuMemcpyHtoA + AtoH 64 bytes (one row)", out, in, 64);
	CK(cuMemcpyHtoA(f, 16, in + 100, 32));
	memcpy(want, in, 64);
	memcpy(want + 16, in + 100, 32);
	CK(cuMemcpyAtoH(out, f, 0, 64));
	check_bytes("cuMemcpyHtoA 32 bytes at 16", out, want, 64);
	memset(out, 0, sizeof out);
	CK(cuMemcpyAtoH(out, f, 40, 24));
	check_bytes("cuMemcpyAtoH 24 bytes at 40", out, want + 40, 24);

	CUdeviceptr d;
	CK(cuMemAlloc(&d, 4096));
	CK(cuMemsetD8(d, 0, 4096));
	CK(cuMemcpyAtoD(d + 256, f, 8, 48));
	memset(out, 0xff, sizeof out);
	CK(cuMemcpyDtoH(out, d + 256, 48));
	check_bytes("cuMemcpyAtoD 48 bytes at 8", out, want + 8, 48);
	fill(in, sizeof in, 2);
	CK(cuMemcpyHtoD(d, in, 64));
	CK(cuMemcpyDtoA(u, 0, d, 64));
	CK(cuMemcpyAtoH(out, u, 0, 64));
	check_bytes("cuMemcpyDtoA 64 bytes into uchar4", out, in, 64);
	/* elements of one size, formats apart */
	CK(cuMemcpyAtoA(f, 32, u, 4, 16));
	memcpy(want + 32, in + 4, 16);
	CK(cuMemcpyAtoH(out, f, 0, 64));
	check_bytes("cuMemcpyAtoA 16 bytes uchar4 -> float", out, want, 64);

	CUstream s;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	fill(in, sizeof in, 3);
	CK(cuMemcpyHtoAAsync(u, 12, in, 40, s));
	memset(out, 0, sizeof out);
	CK(cuMemcpyAtoHAsync(out, u, 12, 40, s));
	CK(cuStreamSynchronize(s));
	check_bytes("cuMemcpyHtoAAsync + AtoHAsync 40 bytes at 12", out, in, 40);
	CK(cuStreamDestroy(s));

	expect("cuMemcpyHtoA past the first row", cuMemcpyHtoA(f, 0, in, 128), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemcpyHtoA 64 bytes at 32", cuMemcpyHtoA(f, 32, in, 64), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemcpyHtoA at the row's end", cuMemcpyHtoA(f, 64, in, 16), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemcpyAtoH past the row", cuMemcpyAtoH(out, f, 60, 8), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemcpyDtoA past the row", cuMemcpyDtoA(f, 0, d, 100), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemcpyAtoH to NULL", cuMemcpyAtoH(NULL, f, 0, 4), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemcpyHtoA from NULL", cuMemcpyHtoA(f, 0, NULL, 4), CUDA_ERROR_INVALID_VALUE);
	expect("cuMemcpyHtoA 0 bytes", cuMemcpyHtoA(f, 0, in, 0), CUDA_SUCCESS);
	CK(cuMemFree(d));
	CK(cuArrayDestroy(f));
	CK(cuArrayDestroy(u));
}

/* cuMemcpy2D with an array side: a row of 64 bytes, 4 rows. */
static void copies_2d(void)
{
	CUarray f = make(16, 4, 0, CU_AD_FORMAT_FLOAT, 1, 0), u = make(16, 4, 0, CU_AD_FORMAT_UNSIGNED_INT8, 4, 0),
	        h = make(16, 4, 0, CU_AD_FORMAT_UNSIGNED_INT16, 1, 0);
	unsigned char src[68 * 4], out[256], want[256];
	fill(src, sizeof src, 4);
	/* from a pitch of 68, 4 bytes in */
	CUDA_MEMCPY2D m = copy2d(at(on_host(src, 68), 4), on_array(f), 64, 4);
	CK(cuMemcpy2D(&m));
	for (int y = 0; y < 4; y++)
		memcpy(want + y * 64, src + y * 68 + 4, 64);
	CUDA_MEMCPY2D b = copy2d(on_array(f), on_host(out, 64), 64, 4);
	memset(out, 0, sizeof out);
	CK(cuMemcpy2D(&b));
	check_bytes("cuMemcpy2D host (pitch 68, x 4) -> array -> host", out, want, 256);
	/* a sub-box: 32 bytes x 2 rows from (8, 1) */
	b = copy2d(at(on_array(f), 8, 1), on_host(out, 40), 32, 2);
	memset(out, 0, sizeof out);
	CK(cuMemcpy2DUnaligned(&b));
	long d0 = diff(out, want + 72, 32), d1 = diff(out + 40, want + 136, 32);
	check("cuMemcpy2DUnaligned sub-box 32x2 at (8,1)", d0 < 0 && d1 < 0, "rows differ at %ld, %ld", d0, d1);
	/* array -> array, one element size: the whole of f into u, async */
	CUstream s;
	CK(cuStreamCreate(&s, 0));
	m = copy2d(on_array(f), on_array(u), 64, 4);
	CK(cuMemcpy2DAsync(&m, s));
	b = copy2d(on_array(u), on_host(out, 64), 64, 4);
	memset(out, 0, sizeof out);
	CK(cuMemcpy2DAsync(&b, s));
	CK(cuStreamSynchronize(s));
	check_bytes("cuMemcpy2DAsync array -> array -> host", out, want, 256);
	CK(cuStreamDestroy(s));
	/* device memory, pitched, on the other side: a 24 x 3 box at (12, 1) */
	CUdeviceptr d;
	size_t dp;
	CK(cuMemAllocPitch(&d, &dp, 64, 4, 4));
	m = copy2d(at(on_array(u), 12, 1), on_device(d, dp), 24, 3);
	CK(cuMemsetD2D8(d, dp, 0, 64, 4));
	CK(cuMemcpy2D(&m));
	m = copy2d(on_device(d, dp), on_array(f), 64, 4);
	CK(cuMemcpy2D(&m));
	b = copy2d(on_array(f), on_host(out, 64), 64, 4);
	CK(cuMemcpy2D(&b));
	unsigned char w2[256];
	memset(w2, 0, sizeof w2);
	for (int y = 0; y < 3; y++)
		memcpy(w2 + y * 64, want + (1 + y) * 64 + 12, 24);
	check_bytes("cuMemcpy2D array sub-box -> device (pitched) -> array", out, w2, 256);
	CK(cuMemFree(d));

	/* bad input (f is 64 bytes x 4 rows) */
	m = copy2d(on_host(src, 60), on_array(f), 64, 2);
	expect("2D pitch below the width", cuMemcpy2D(&m), CUDA_ERROR_INVALID_VALUE);
	m = copy2d(at(on_host(src, 64), 4), on_array(f), 64, 2);
	expect("2D pitch below x + width", cuMemcpy2D(&m), CUDA_ERROR_INVALID_VALUE);
	m = copy2d(at(on_host(src, 64), 52), on_array(f), 16, 1);
	expect("2D one row past its pitch", cuMemcpy2D(&m), CUDA_ERROR_INVALID_VALUE);
	m = copy2d(on_host(src, 64), on_array(f), 64, 2);
	m.dstXInBytes = 2;
	expect("2D array x not on an element", cuMemcpy2D(&m), CUDA_ERROR_INVALID_VALUE);
	m.dstXInBytes = 0;
	m.dstY = 3;
	expect("2D past the array's rows", cuMemcpy2D(&m), CUDA_ERROR_INVALID_VALUE);
	m.dstY = 0;
	m.srcMemoryType = (CUmemorytype)9;
	expect("2D memory type 9", cuMemcpy2D(&m), CUDA_ERROR_INVALID_VALUE);
	m.srcMemoryType = CU_MEMORYTYPE_HOST;
	m.dstArray = NULL;
	expect("2D NULL array", cuMemcpy2D(&m), CUDA_ERROR_INVALID_VALUE);
	m.dstArray = f;
	m.WidthInBytes = 0;
	expect("2D width 0", cuMemcpy2D(&m), CUDA_SUCCESS);
	/* no pitch: rows packed from the origin (the pitch is x + width) */
	m = copy2d(at(on_host(src, 0), 8), on_array(f), 32, 2);
	CK(cuMemcpy2D(&m));
	b = copy2d(on_array(f), on_host(out, 64), 64, 2);
	CK(cuMemcpy2D(&b));
	d0 = diff(out, src + 8, 32);
	d1 = diff(out + 64, src + 48, 32);
	check("2D pitch 0: rows of x + width bytes", d0 < 0 && d1 < 0, "rows differ at %ld, %ld", d0, d1);
	/* between arrays of other element sizes (h has rows of 32 bytes) */
	m = copy2d(on_array(f), on_array(h), 32, 2);
	expect("2D float array -> ushort array", cuMemcpy2D(&m), CUDA_SUCCESS);
	b = copy2d(on_array(h), on_host(out + 128, 32), 32, 2);
	CK(cuMemcpy2D(&b));
	d0 = diff(out + 128, out, 32);
	d1 = diff(out + 160, out + 64, 32);
	check("  its bytes", d0 < 0 && d1 < 0, "rows differ at %ld, %ld", d0, d1);
	m.WidthInBytes = 64;
	expect("2D past the narrower array's rows", cuMemcpy2D(&m), CUDA_ERROR_INVALID_VALUE);
	CK(cuArrayDestroy(f));
	CK(cuArrayDestroy(u));
	CK(cuArrayDestroy(h));
}

/* cuMemcpy3D with a 3D array: host -> array -> pitched device -> host, a sub-box. */
static void copies_3d(void)
{
	const size_t X = 9, Y = 7, Z = 5, row = X * 4, n = row * Y * Z;
	CUarray a = make(X, Y, Z, CU_AD_FORMAT_FLOAT, 1, 0);
	unsigned char *h = (unsigned char *)malloc(n + 128), *got = (unsigned char *)calloc(1, n),
	              *want = (unsigned char *)calloc(1, n);
	fill(h, n + 128, 5);
	CUDA_MEMCPY3D m = copy3d(on_host(h, row, Y), on_array(a), row, Y, Z);
	expect("cuMemcpy3D host -> 9x7x5 array", cuMemcpy3D(&m), CUDA_SUCCESS);
	CUdeviceptr d;
	const size_t dp = 64, dh = 8; /* rows of 64 bytes, 8 rows a slice */
	CK(cuMemAlloc(&d, dp * dh * Z));
	CK(cuMemsetD8(d, 0, dp * dh * Z));
	CUDA_MEMCPY3D t = copy3d(on_array(a), on_device(d, dp, dh), row, Y, Z);
	CK(cuMemcpy3D(&t));
	t = copy3d(on_device(d, dp, dh), on_host(got, row, Y), row, Y, Z);
	CK(cuMemcpy3D(&t));
	check_bytes("cuMemcpy3D host -> array -> device (pitch 64, height 8) -> host", got, h, n);

	/* the box at (2 floats, 1, 1) of 4 floats x 3 x 2, async, into the
	 * same place of a host copy */
	memset(got, 0, n);
	t = copy3d(at(on_array(a), 8, 1, 1), at(on_host(got, row, Y), 8, 1, 1), 16, 3, 2);
	CK(cuMemcpy3DAsync(&t, 0));
	CK(cuCtxSynchronize());
	for (size_t z = 1; z < 3; z++)
		for (size_t y = 1; y < 4; y++)
			memcpy(want + z * row * Y + y * row + 8, h + z * row * Y + y * row + 8, 16);
	check_bytes("cuMemcpy3DAsync array sub-box 16x3x2 at (8,1,1) -> host", got, want, n);

	/* no height across slices: slices packed */
	CK(cuMemsetD8(d, 0, dp * dh * Z));
	CUDA_MEMCPY3D p0 = m;
	p0.srcHeight = 0;
	p0.srcPitch = 0;
	p0.srcHost = h + 100;
	expect("cuMemcpy3D host pitch 0 height 0 -> array", cuMemcpy3D(&p0), CUDA_SUCCESS);
	t = copy3d(on_array(a), on_unified(d, dp, dh), row, Y, Z);
	CK(cuMemcpy3D(&t));
	memset(got, 0, n);
	CK(cuMemcpyDtoH(got, d + 3 * dp * dh + 2 * dp, row));
	check_bytes("  slice 3 row 2, read through a unified pointer", got, h + 100 + 3 * row * Y + 2 * row, row);

	/* bad input */
	m.srcHeight = Y - 1;
	expect("3D host height below the copy's", cuMemcpy3D(&m), CUDA_ERROR_INVALID_VALUE);
	m.srcHeight = 0;
	m.Depth = 1;
	expect("3D one slice needs no height", cuMemcpy3D(&m), CUDA_SUCCESS);
	m.srcHeight = Y;
	m.Depth = Z;
	m.dstLOD = 1;
	expect("3D array LOD 1", cuMemcpy3D(&m), CUDA_ERROR_INVALID_VALUE);
	m.dstLOD = 0;
	m.dstZ = 1;
	expect("3D past the array's slices", cuMemcpy3D(&m), CUDA_ERROR_INVALID_VALUE);
	m.dstZ = 0;
	m.srcY = 1;
	expect("3D host y + height past its height", cuMemcpy3D(&m), CUDA_ERROR_INVALID_VALUE);
	m.srcY = 0;
	t.dstXInBytes = 52;
	t.dstPitch = 64;
	t.dstY = t.dstZ = 0;
	t.Height = t.Depth = 1;
	expect("3D one row past the host pitch", cuMemcpy3D(&t), CUDA_ERROR_INVALID_VALUE);
	CK(cuMemFree(d));
	CK(cuArrayDestroy(a));
	free(h);
	free(got);
	free(want);
}

/* ---- texture and surface objects ---- */

static CUDA_RESOURCE_DESC array_res(CUarray a)
{
	CUDA_RESOURCE_DESC r;
	memset(&r, 0, sizeof r);
	r.resType = CU_RESOURCE_TYPE_ARRAY;
	r.res.array.hArray = a;
	return r;
}

static void textures(void)
{
	CUarray f = make(16, 4, 0, CU_AD_FORMAT_FLOAT, 1, CUDA_ARRAY3D_SURFACE_LDST),
	        u = make(16, 4, 0, CU_AD_FORMAT_UNSIGNED_INT8, 4, 0);
	CUDA_RESOURCE_DESC rd = array_res(u), rb;
	CUDA_TEXTURE_DESC td, tb;
	memset(&td, 0, sizeof td);
	td.addressMode[0] = CU_TR_ADDRESS_MODE_BORDER;
	td.addressMode[1] = CU_TR_ADDRESS_MODE_MIRROR;
	td.filterMode = CU_TR_FILTER_MODE_LINEAR;
	td.flags = CU_TRSF_NORMALIZED_COORDINATES | CU_TRSF_SRGB;
	td.maxAnisotropy = 4;
	td.mipmapFilterMode = CU_TR_FILTER_MODE_LINEAR;
	td.mipmapLevelBias = 0.5f;
	td.maxMipmapLevelClamp = 3.0f;
	CUtexObject t;
	expect("cuTexObjectCreate on a uchar4 array", cuTexObjectCreate(&t, &rd, &td, NULL), CUDA_SUCCESS);
	memset(&tb, 0, sizeof tb);
	CK(cuTexObjectGetTextureDesc(&tb, t));
	/* (the driver does not answer the border color) */
	check("cuTexObjectGetTextureDesc round trip",
	      tb.addressMode[0] == td.addressMode[0] && tb.addressMode[1] == td.addressMode[1] &&
	              tb.addressMode[2] == td.addressMode[2] && tb.filterMode == td.filterMode &&
	              tb.flags == td.flags && tb.maxAnisotropy == 4 && tb.mipmapFilterMode == td.mipmapFilterMode &&
	              tb.mipmapLevelBias == 0.5f && tb.minMipmapLevelClamp == 0.0f && tb.maxMipmapLevelClamp == 3.0f,
	      "address %d %d %d filter %d flags %u aniso %u", tb.addressMode[0], tb.addressMode[1], tb.addressMode[2],
	      tb.filterMode, tb.flags, tb.maxAnisotropy);
	memset(&rb, 0, sizeof rb);
	CK(cuTexObjectGetResourceDesc(&rb, t));
	CUDA_RESOURCE_VIEW_DESC none;
	memset(&none, 0xee, sizeof none);
	expect("cuTexObjectGetResourceViewDesc without a view", cuTexObjectGetResourceViewDesc(&none, t), CUDA_SUCCESS);
	check("  nothing written",
	      ((unsigned char *)&none)[0] == 0xee && ((unsigned char *)&none)[sizeof none - 1] == 0xee);
	check("cuTexObjectGetResourceDesc: the array",
	      rb.resType == CU_RESOURCE_TYPE_ARRAY && rb.res.array.hArray == u && rb.flags == 0, "type %d flags %u",
	      rb.resType, rb.flags);
	/* the runtime reads the driver's object: integers without
	 * CU_TRSF_READ_AS_INTEGER are normalized floats */
	cudaTextureDesc rt;
	cudaError_t e = cudaGetTextureObjectTextureDesc(&rt, (cudaTextureObject_t)t);
	check("cudaGetTextureObjectTextureDesc of a CUtexObject",
	      e == cudaSuccess && rt.readMode == cudaReadModeNormalizedFloat && rt.normalizedCoords == 1 &&
	              rt.sRGB == 1 && rt.filterMode == cudaFilterModeLinear &&
	              rt.addressMode[0] == cudaAddressModeBorder,
	      "%s: read %d normalized %d srgb %d", cudaGetErrorName(e), (int)rt.readMode, rt.normalizedCoords, rt.sRGB);
	cudaResourceDesc rr;
	e = cudaGetTextureObjectResourceDesc(&rr, (cudaTextureObject_t)t);
	check("cudaGetTextureObjectResourceDesc of a CUtexObject",
	      e == cudaSuccess && rr.resType == cudaResourceTypeArray && rr.res.array.array == (cudaArray_t)u, "%s",
	      cudaGetErrorName(e));
	expect("cuTexObjectDestroy", cuTexObjectDestroy(t), CUDA_SUCCESS);

	/* a runtime texture read by the driver: element type on integers is
	 * CU_TRSF_READ_AS_INTEGER */
	cudaResourceDesc rres;
	memset(&rres, 0, sizeof rres);
	rres.resType = cudaResourceTypeArray;
	rres.res.array.array = (cudaArray_t)u;
	cudaTextureDesc rtex;
	memset(&rtex, 0, sizeof rtex);
	rtex.readMode = cudaReadModeElementType;
	rtex.addressMode[0] = cudaAddressModeClamp;
	cudaTextureObject_t rto;
	e = cudaCreateTextureObject(&rto, &rres, &rtex, NULL);
	check("cudaCreateTextureObject on a CUarray", e == cudaSuccess, "%s", cudaGetErrorName(e));
	memset(&tb, 0, sizeof tb);
	expect("cuTexObjectGetTextureDesc of a cudaTextureObject_t", cuTexObjectGetTextureDesc(&tb, (CUtexObject)rto),
	       CUDA_SUCCESS);
	check("  its flags: read as integer",
	      tb.flags == CU_TRSF_READ_AS_INTEGER && tb.addressMode[0] == CU_TR_ADDRESS_MODE_CLAMP,
	      "flags %u address %d", tb.flags, tb.addressMode[0]);
	expect("cuTexObjectDestroy of a cudaTextureObject_t", cuTexObjectDestroy((CUtexObject)rto), CUDA_SUCCESS);

	/* with a resource view */
	CUDA_RESOURCE_VIEW_DESC vd, vb;
	memset(&vd, 0, sizeof vd);
	vd.format = CU_RES_VIEW_FORMAT_UINT_4X8;
	vd.width = 16;
	vd.height = 4;
	memset(&td, 0, sizeof td);
	td.flags = CU_TRSF_READ_AS_INTEGER;
	CK(cuTexObjectCreate(&t, &rd, &td, &vd));
	memset(&vb, 0xee, sizeof vb);
	expect("cuTexObjectGetResourceViewDesc", cuTexObjectGetResourceViewDesc(&vb, t), CUDA_SUCCESS);
	check_bytes("  the view as given", &vb, &vd, sizeof vd);
	CK(cuTexObjectDestroy(t));

	/* linear and pitched memory */
	CUdeviceptr d;
	CK(cuMemAlloc(&d, 1 << 16));
	memset(&rd, 0, sizeof rd);
	rd.resType = CU_RESOURCE_TYPE_LINEAR;
	rd.res.linear.devPtr = d;
	rd.res.linear.format = CU_AD_FORMAT_FLOAT;
	rd.res.linear.numChannels = 2;
	rd.res.linear.sizeInBytes = 4096;
	memset(&td, 0, sizeof td);
	expect("cuTexObjectCreate on linear memory", cuTexObjectCreate(&t, &rd, &td, NULL), CUDA_SUCCESS);
	memset(&rb, 0, sizeof rb);
	CK(cuTexObjectGetResourceDesc(&rb, t));
	check("  its resource",
	      rb.resType == CU_RESOURCE_TYPE_LINEAR && rb.res.linear.devPtr == d &&
	              rb.res.linear.format == CU_AD_FORMAT_FLOAT && rb.res.linear.numChannels == 2 &&
	              rb.res.linear.sizeInBytes == 4096,
	      "type %d format %#x channels %u size %zu", rb.resType, rb.res.linear.format, rb.res.linear.numChannels,
	      rb.res.linear.sizeInBytes);
	CK(cuTexObjectDestroy(t));
	rd.res.linear.devPtr = d + 4;
	ONLY(!fake) /* the server's driver checks the alignments; the test double does not */
		expect("linear memory off the texture alignment", cuTexObjectCreate(&t, &rd, &td, NULL),
		       CUDA_ERROR_INVALID_VALUE);
	rd.res.linear.devPtr = d;
	rd.res.linear.numChannels = 3;
	expect("linear with 3 channels", cuTexObjectCreate(&t, &rd, &td, NULL), CUDA_ERROR_INVALID_VALUE);
	rd.res.linear.numChannels = 1;
	rd.res.linear.format = (CUarray_format)7;
	expect("linear format 7", cuTexObjectCreate(&t, &rd, &td, NULL), CUDA_ERROR_INVALID_VALUE);
	memset(&rd, 0, sizeof rd);
	rd.resType = CU_RESOURCE_TYPE_PITCH2D;
	rd.res.pitch2D.devPtr = d;
	rd.res.pitch2D.format = CU_AD_FORMAT_UNSIGNED_INT16;
	rd.res.pitch2D.numChannels = 4;
	rd.res.pitch2D.width = 32;
	rd.res.pitch2D.height = 16;
	rd.res.pitch2D.pitchInBytes = 512;
	expect("cuTexObjectCreate on pitched memory", cuTexObjectCreate(&t, &rd, &td, NULL), CUDA_SUCCESS);
	memset(&rb, 0, sizeof rb);
	CK(cuTexObjectGetResourceDesc(&rb, t));
	check("  its resource",
	      rb.resType == CU_RESOURCE_TYPE_PITCH2D && rb.res.pitch2D.devPtr == d && rb.res.pitch2D.width == 32 &&
	              rb.res.pitch2D.height == 16 && rb.res.pitch2D.pitchInBytes == 512 &&
	              rb.res.pitch2D.format == CU_AD_FORMAT_UNSIGNED_INT16 && rb.res.pitch2D.numChannels == 4,
	      "type %d %zu x %zu", rb.resType, rb.res.pitch2D.width, rb.res.pitch2D.height);
	CK(cuTexObjectDestroy(t));
	rd.res.pitch2D.pitchInBytes = 500;
	ONLY(!fake)
		expect("pitched memory off the pitch alignment", cuTexObjectCreate(&t, &rd, &td, NULL),
		       CUDA_ERROR_INVALID_VALUE);

	/* bad input */
	rd = array_res(u);
	rd.flags = 1;
	expect("cuTexObjectCreate resource flags 1", cuTexObjectCreate(&t, &rd, &td, NULL), CUDA_ERROR_INVALID_VALUE);
	rd.flags = 0;
	expect("cuTexObjectCreate NULL texture desc", cuTexObjectCreate(&t, &rd, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
	expect("cuTexObjectCreate NULL resource desc", cuTexObjectCreate(&t, NULL, &td, NULL),
	       CUDA_ERROR_INVALID_VALUE);
	expect("cuTexObjectCreate NULL object", cuTexObjectCreate(NULL, &rd, &td, NULL), CUDA_ERROR_INVALID_VALUE);
	rd.resType = (CUresourcetype)7;
	expect("cuTexObjectCreate resource type 7", cuTexObjectCreate(&t, &rd, &td, NULL), CUDA_ERROR_INVALID_VALUE);
	rd = array_res(u);
	CK(cuTexObjectCreate(&t, &rd, &td, NULL));
	expect("cuTexObjectGetResourceDesc NULL", cuTexObjectGetResourceDesc(NULL, t), CUDA_ERROR_INVALID_VALUE);
	expect("cuTexObjectGetTextureDesc NULL", cuTexObjectGetTextureDesc(NULL, t), CUDA_ERROR_INVALID_VALUE);
	CK(cuTexObjectDestroy(t));
	ONLY(remote) /* undefined in CUDA */
		expect("cuTexObjectDestroy twice", cuTexObjectDestroy(t), CUDA_ERROR_INVALID_VALUE);
	expect("cuTexObjectDestroy(0)", cuTexObjectDestroy(0), CUDA_SUCCESS);

	/* a surface */
	CUsurfObject s;
	rd = array_res(f);
	expect("cuSurfObjectCreate", cuSurfObjectCreate(&s, &rd), CUDA_SUCCESS);
	memset(&rb, 0, sizeof rb);
	CK(cuSurfObjectGetResourceDesc(&rb, s));
	check("cuSurfObjectGetResourceDesc", rb.resType == CU_RESOURCE_TYPE_ARRAY && rb.res.array.hArray == f,
	      "type %d", rb.resType);
	expect("cuSurfObjectGetResourceDesc NULL", cuSurfObjectGetResourceDesc(NULL, s), CUDA_ERROR_INVALID_VALUE);
	expect("cuSurfObjectDestroy", cuSurfObjectDestroy(s), CUDA_SUCCESS);
	expect("cuSurfObjectDestroy(0)", cuSurfObjectDestroy(0), CUDA_SUCCESS);
	rd.flags = 1;
	expect("cuSurfObjectCreate flags 1", cuSurfObjectCreate(&s, &rd), CUDA_ERROR_INVALID_VALUE);
	memset(&rd, 0, sizeof rd);
	rd.resType = CU_RESOURCE_TYPE_LINEAR;
	rd.res.linear.devPtr = d;
	rd.res.linear.format = CU_AD_FORMAT_FLOAT;
	rd.res.linear.numChannels = 1;
	rd.res.linear.sizeInBytes = 4096;
	expect("cuSurfObjectCreate on linear memory", cuSurfObjectCreate(&s, &rd), CUDA_ERROR_INVALID_VALUE);
	expect("cuSurfObjectCreate NULL resource", cuSurfObjectCreate(&s, NULL), CUDA_ERROR_INVALID_VALUE);
	CK(cuMemFree(d));
	CK(cuArrayDestroy(f));
	CK(cuArrayDestroy(u));
}

/* ---- device queries ---- */

static int attr(CUdevice_attribute a)
{
	int v = -1;
	CK(cuDeviceGetAttribute(&v, a, dev));
	return v;
}

static void devices(void)
{
	int n = 0, v;
	CK(cuDeviceGetCount(&n));
	CUdevice bad = n; /* one past the last */

	char bus[64], id[64];
	CK(cuDeviceGetPCIBusId(bus, sizeof bus, dev));
	CUdevice got = -1;
	expect("cuDeviceGetByPCIBusId of its own id", cuDeviceGetByPCIBusId(&got, bus), CUDA_SUCCESS);
	check("  the device", got == dev, "%d", got);
	for (char *p = bus; *p; p++)
		if (*p >= 'A' && *p <= 'F')
			*p += 32;
	got = -1;
	cuDeviceGetByPCIBusId(&got, bus);
	check("cuDeviceGetByPCIBusId lower case", got == dev, "%d", got);
	unsigned dom, b, d, fn;
	sscanf(bus, "%x:%x:%x.%x", &dom, &b, &d, &fn);
	snprintf(id, sizeof id, "%x:%x.%x", b, d, fn);
	got = -1;
	expect("cuDeviceGetByPCIBusId bus:device.function", cuDeviceGetByPCIBusId(&got, id),
	       dom ? CUDA_ERROR_INVALID_DEVICE : CUDA_SUCCESS);
	snprintf(id, sizeof id, "%x:%x:%x", dom, b, d);
	got = -1;
	cuDeviceGetByPCIBusId(&got, id);
	check("cuDeviceGetByPCIBusId domain:bus:device", got == dev, "%d", got);
	expect("cuDeviceGetByPCIBusId of no device", cuDeviceGetByPCIBusId(&got, "7fff:ff:1f.7"),
	       CUDA_ERROR_INVALID_DEVICE);
	expect("cuDeviceGetByPCIBusId garbage", cuDeviceGetByPCIBusId(&got, "garbage"), CUDA_ERROR_INVALID_VALUE);
	expect("cuDeviceGetByPCIBusId empty", cuDeviceGetByPCIBusId(&got, ""), CUDA_ERROR_INVALID_VALUE);
	expect("cuDeviceGetByPCIBusId NULL id", cuDeviceGetByPCIBusId(&got, NULL), CUDA_ERROR_INVALID_VALUE);
	expect("cuDeviceGetByPCIBusId NULL device", cuDeviceGetByPCIBusId(NULL, bus), CUDA_ERROR_INVALID_VALUE);

	v = -1;
	expect("cuDeviceCanAccessPeer itself", cuDeviceCanAccessPeer(&v, dev, dev), CUDA_SUCCESS);
	check("  no", v == 0, "%d", v);
	expect("cuDeviceCanAccessPeer NULL", cuDeviceCanAccessPeer(NULL, dev, dev), CUDA_ERROR_INVALID_VALUE);
	expect("cuDeviceCanAccessPeer no device", cuDeviceCanAccessPeer(&v, dev, bad), CUDA_ERROR_INVALID_DEVICE);
	expect("cuDeviceGetP2PAttribute itself",
	       cuDeviceGetP2PAttribute(&v, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, dev, dev),
	       CUDA_ERROR_INVALID_DEVICE);
	expect("cuDeviceGetP2PAttribute NULL",
	       cuDeviceGetP2PAttribute(NULL, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, dev, dev),
	       CUDA_ERROR_INVALID_VALUE);
	expect("cuDeviceGetP2PAttribute no device",
	       cuDeviceGetP2PAttribute(&v, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, dev, bad),
	       CUDA_ERROR_INVALID_DEVICE);

	CUatomicOperation ops[CU_ATOMIC_OPERATION_MAX];
	unsigned caps[CU_ATOMIC_OPERATION_MAX];
	for (int i = 0; i < CU_ATOMIC_OPERATION_MAX; i++)
		ops[i] = (CUatomicOperation)i, caps[i] = 0xdead;
	expect("cuDeviceGetHostAtomicCapabilities",
	       cuDeviceGetHostAtomicCapabilities(caps, ops, CU_ATOMIC_OPERATION_MAX, dev), CUDA_SUCCESS);
	int none = 1;
	for (int i = 0; i < CU_ATOMIC_OPERATION_MAX; i++)
		none &= caps[i] == 0;
	ONLY(remote || !attr(CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED))
		check("  none natively", none, "op 0: %#x", caps[0]);
	expect("cuDeviceGetHostAtomicCapabilities count 0", cuDeviceGetHostAtomicCapabilities(caps, ops, 0, dev),
	       CUDA_ERROR_INVALID_VALUE);
	expect("cuDeviceGetHostAtomicCapabilities NULL", cuDeviceGetHostAtomicCapabilities(NULL, ops, 1, dev),
	       CUDA_ERROR_INVALID_VALUE);
	ops[0] = CU_ATOMIC_OPERATION_MAX;
	expect("cuDeviceGetHostAtomicCapabilities unknown operation",
	       cuDeviceGetHostAtomicCapabilities(caps, ops, 1, dev), CUDA_ERROR_INVALID_VALUE);
	ops[0] = CU_ATOMIC_OPERATION_INTEGER_ADD;
	expect("cuDeviceGetHostAtomicCapabilities no device", cuDeviceGetHostAtomicCapabilities(caps, ops, 1, bad),
	       CUDA_ERROR_INVALID_DEVICE);
	expect("cuDeviceGetP2PAtomicCapabilities itself", cuDeviceGetP2PAtomicCapabilities(caps, ops, 1, dev, dev),
	       CUDA_ERROR_INVALID_DEVICE);
	expect("cuDeviceGetP2PAtomicCapabilities count 0", cuDeviceGetP2PAtomicCapabilities(caps, ops, 0, dev, dev),
	       CUDA_ERROR_INVALID_VALUE);

	char luid[8];
	unsigned mask;
	expect("cuDeviceGetLuid (Windows only)", cuDeviceGetLuid(luid, &mask, dev), CUDA_ERROR_NOT_SUPPORTED);
	char sci[64] = {0};
	expect("cuDeviceGetNvSciSyncAttributes NULL list", cuDeviceGetNvSciSyncAttributes(NULL, dev, 1),
	       CUDA_ERROR_INVALID_HANDLE);
	expect("cuDeviceGetNvSciSyncAttributes", cuDeviceGetNvSciSyncAttributes(sci, dev, 1), CUDA_ERROR_NOT_SUPPORTED);
	v = -1;
	expect("cuDeviceGetExecAffinitySupport SM count",
	       cuDeviceGetExecAffinitySupport(&v, CU_EXEC_AFFINITY_TYPE_SM_COUNT, dev), CUDA_SUCCESS);
	check("  no", v == 0, "%d", v);
	expect("cuDeviceGetExecAffinitySupport NULL",
	       cuDeviceGetExecAffinitySupport(NULL, CU_EXEC_AFFINITY_TYPE_SM_COUNT, dev), CUDA_ERROR_INVALID_VALUE);
	expect("cuDeviceGetExecAffinitySupport no device",
	       cuDeviceGetExecAffinitySupport(&v, CU_EXEC_AFFINITY_TYPE_SM_COUNT, bad), CUDA_ERROR_INVALID_DEVICE);

	CUdevprop p;
	memset(&p, 0, sizeof p);
	expect("cuDeviceGetProperties", cuDeviceGetProperties(&p, dev), CUDA_SUCCESS);
	check("  as the attributes",
	      p.maxThreadsPerBlock == attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK) &&
	              p.maxThreadsDim[2] == attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z) &&
	              p.maxGridSize[0] == attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X) &&
	              p.sharedMemPerBlock == attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK) &&
	              p.totalConstantMemory == attr(CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY) &&
	              p.SIMDWidth == attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE) &&
	              p.memPitch == attr(CU_DEVICE_ATTRIBUTE_MAX_PITCH) &&
	              p.regsPerBlock == attr(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK) &&
	              p.clockRate == attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE) &&
	              p.textureAlign == attr(CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT),
	      "threads %d warp %d", p.maxThreadsPerBlock, p.SIMDWidth);
	expect("cuDeviceGetProperties NULL", cuDeviceGetProperties(NULL, dev), CUDA_ERROR_INVALID_VALUE);
	expect("cuDeviceGetProperties no device", cuDeviceGetProperties(&p, bad), CUDA_ERROR_INVALID_DEVICE);
	int maj = -1, min = -1;
	expect("cuDeviceComputeCapability", cuDeviceComputeCapability(&maj, &min, dev), CUDA_SUCCESS);
	check("  as the attributes",
	      maj == attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) &&
	              min == attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR),
	      "%d.%d", maj, min);
	expect("cuDeviceComputeCapability NULL", cuDeviceComputeCapability(NULL, &min, dev), CUDA_ERROR_INVALID_VALUE);

	expect("cuDeviceGetAttribute CU_DEVICE_ATTRIBUTE_MAX", cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX, dev),
	       CUDA_ERROR_INVALID_VALUE);
	expect("cuDeviceGetAttribute 0", cuDeviceGetAttribute(&v, (CUdevice_attribute)0, dev),
	       CUDA_ERROR_INVALID_VALUE);
	expect("cuDeviceGetAttribute NULL", cuDeviceGetAttribute(NULL, CU_DEVICE_ATTRIBUTE_WARP_SIZE, dev),
	       CUDA_ERROR_INVALID_VALUE);
	expect("cuDeviceGetAttribute no device", cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, bad),
	       CUDA_ERROR_INVALID_DEVICE);
	int all = 1, first = 0;
	for (int a = 1; a < CU_DEVICE_ATTRIBUTE_MAX; a++) {
		CUresult r = cuDeviceGetAttribute(&v, (CUdevice_attribute)a, dev);
		if (r != CUDA_SUCCESS && all)
			all = 0, first = a;
	}
	check("cuDeviceGetAttribute answers every attribute", all, "attribute %d", first);
	ONLY(remote) {
		/* what cannot work across hosts reads absent */
		check("remote: no IPC, sparse arrays, RDMA (virtual memory management: drv_vmm)",
		      !attr(CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED) &&
		              !attr(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED) &&
		              !attr(CU_DEVICE_ATTRIBUTE_SPARSE_CUDA_ARRAY_SUPPORTED) &&
		              !attr(CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED) &&
		              !attr(CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY) &&
		              attr(CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY) == 1);
	}

	size_t w = 0;
	expect("cuDeviceGetTexture1DLinearMaxWidth float",
	       cuDeviceGetTexture1DLinearMaxWidth(&w, CU_AD_FORMAT_FLOAT, 1, dev),
	       remote ? CUDA_ERROR_NOT_SUPPORTED : CUDA_SUCCESS);
	expect("cuDeviceGetTexture1DLinearMaxWidth 3 channels",
	       cuDeviceGetTexture1DLinearMaxWidth(&w, CU_AD_FORMAT_FLOAT, 3, dev), CUDA_ERROR_INVALID_VALUE);
	expect("cuDeviceGetTexture1DLinearMaxWidth format 7",
	       cuDeviceGetTexture1DLinearMaxWidth(&w, (CUarray_format)7, 1, dev), CUDA_ERROR_INVALID_VALUE);
	expect("cuDeviceGetTexture1DLinearMaxWidth NULL",
	       cuDeviceGetTexture1DLinearMaxWidth(NULL, CU_AD_FORMAT_FLOAT, 1, dev), CUDA_ERROR_INVALID_VALUE);
	expect("cuDeviceGetTexture1DLinearMaxWidth no device",
	       cuDeviceGetTexture1DLinearMaxWidth(&w, CU_AD_FORMAT_FLOAT, 1, bad), CUDA_ERROR_INVALID_DEVICE);
	expect("cuFlushGPUDirectRDMAWrites",
	       cuFlushGPUDirectRDMAWrites(CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX,
	                                  CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER),
	       remote ? CUDA_ERROR_NOT_SUPPORTED : CUDA_SUCCESS);
	expect("cuFlushGPUDirectRDMAWrites scope 5",
	       cuFlushGPUDirectRDMAWrites(CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX,
	                                  (CUflushGPUDirectRDMAWritesScope)5),
	       CUDA_ERROR_INVALID_VALUE);
	expect("cuDriverGetVersion NULL", cuDriverGetVersion(NULL), CUDA_ERROR_INVALID_VALUE);
	v = 0;
	CK(cuDriverGetVersion(&v));
	check("cuDriverGetVersion", v >= 12000, "%d", v);
}

int main(void)
{
	rg_start(&dev);
	descriptors();
	copies_1d();
	copies_2d();
	copies_3d();
	textures();
	devices();
	CK(cuDevicePrimaryCtxRelease(dev));
	return rg_finish("drv_array");
}
