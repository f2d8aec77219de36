/*
 * texture_blur: a 3x3 box blur of a 256x192 grey image read through a texture
 * object with linear filtering: each output pixel averages nine bilinear
 * samples taken half a pixel apart, so the hardware's interpolation does part
 * of the work. The image lives in a CUDA array (cudaMallocArray,
 * cudaMemcpy2DToArray); borders clamp. Prints a checksum of the result and a
 * few pixels, the same on every run on one GPU (the texture unit's 8-bit
 * interpolation weights are the GPU's own), and a check of the mean against
 * the CPU (a blur keeps the mean, up to the clamped border).
 *
 *   nvcc -cudart shared -o texture_blur texture_blur.cu
 *   REMOTE_GPU=gpu-node:7420 LD_PRELOAD=libremote.so ./texture_blur
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime.h>

#define CK(call)                                                                          \
	do {                                                                                  \
		cudaError_t e_ = (call);                                                          \
		if (e_ != cudaSuccess) {                                                          \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
			exit(1);                                                                      \
		}                                                                                 \
	} while (0)

#define W 256
#define H 192

__global__ void blur(cudaTextureObject_t img, float *out, int w, int h)
{
	int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
	if (x >= w || y >= h)
		return;
	float s = 0.0f;
	for (int dy = -1; dy <= 1; dy++)
		for (int dx = -1; dx <= 1; dx++)
			s += tex2D<float>(img, x + 0.5f + dx * 0.5f, y + 0.5f + dy * 0.5f);
	out[y * w + x] = s / 9.0f;
}

static uint64_t fnv(const void *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ull;
	return h;
}

int main(void)
{
	float *img = (float *)malloc(W * H * sizeof(float)), *out = (float *)malloc(W * H * sizeof(float));
	uint32_t seed = 12345;
	double mean_in = 0;
	for (int i = 0; i < W * H; i++) {
		seed = seed * 1664525u + 1013904223u;
		/* smooth gradients plus a little noise, in [0, 1] */
		int x = i % W, y = i / W;
		img[i] = 0.5f * (float)x / W + 0.3f * (float)y / H + 0.2f * (float)(seed >> 24) / 255.0f;
		mean_in += img[i];
	}
	mean_in /= W * H;

	cudaChannelFormatDesc cd = cudaCreateChannelDesc<float>();
	cudaArray_t arr;
	CK(cudaMallocArray(&arr, &cd, W, H));
	CK(cudaMemcpy2DToArray(arr, 0, 0, img, W * sizeof(float), W * sizeof(float), H, cudaMemcpyHostToDevice));

	cudaResourceDesc rd = {};
	rd.resType = cudaResourceTypeArray;
	rd.res.array.array = arr;
	cudaTextureDesc td = {};
	td.addressMode[0] = td.addressMode[1] = cudaAddressModeClamp;
	td.filterMode = cudaFilterModeLinear;
	td.readMode = cudaReadModeElementType;
	cudaTextureObject_t tex;
	CK(cudaCreateTextureObject(&tex, &rd, &td, NULL));

	float *d;
	CK(cudaMalloc(&d, W * H * sizeof(float)));
	dim3 b(16, 16), g((W + 15) / 16, (H + 15) / 16);
	blur<<<g, b>>>(tex, d, W, H);
	CK(cudaGetLastError());
	CK(cudaMemcpy(out, d, W * H * sizeof(float), cudaMemcpyDeviceToHost));

	double mean_out = 0;
	for (int i = 0; i < W * H; i++)
		mean_out += out[i];
	mean_out /= W * H;
	printf("blur %dx%d: fnv=%016llx\n", W, H, (unsigned long long)fnv(out, W * H * sizeof(float)));
	printf("pixels: (0,0) %.6f (100,50) %.6f (255,191) %.6f\n", out[0], out[50 * W + 100], out[W * H - 1]);
	int ok = fabs(mean_out - mean_in) < 1e-3;
	printf("mean in %.4f out %.4f: %s\n", mean_in, mean_out, ok ? "ok" : "MISMATCH");

	CK(cudaDestroyTextureObject(tex));
	CK(cudaFreeArray(arr));
	CK(cudaFree(d));
	free(img);
	free(out);
	return ok ? 0 : 1;
}
