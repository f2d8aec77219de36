/*
 * libhandles: NVIDIA's libraries that reach the GPU through the driver API.
 * cuDNN, cuFFT, cuSOLVER, cuSPARSE and cuRAND each carry their own copy of the
 * static CUDA runtime, which opens libcuda.so.1 (libremote.so through the
 * remote) and asks it for its entry points and private tables. Each library's
 * handle is created on a stream of the program's, a small operation is queued
 * on it where the library allows one without a GPU result to check, and the
 * handle is destroyed: every status must be success.
 *
 * rg-build-libs: -lcudnn -lcufft -lcusolver -lcusparse -lcurand
 */
#include <cudnn.h>
#include <cufft.h>
#include <curand.h>
#include <cusolverDn.h>
#include <cusparse.h>

#include "rgtest.h"

static void status(const char *label, int got)
{
	printf("%s: %d\n", label, got);
	if (got != 0)
		rg_failures++;
}

int main(void)
{
	const char *f = getenv("RGTEST_FAKE");
	int fake = f && *f == '1';
	cudaStream_t s;
	CK(cudaStreamCreate(&s));
	float *d;
	CK(cudaMalloc(&d, 1 << 20));

	cudnnHandle_t dnn;
	status("cudnnCreate", cudnnCreate(&dnn));
	status("cudnnSetStream", cudnnSetStream(dnn, s));
	cudnnTensorDescriptor_t t;
	status("cudnnCreateTensorDescriptor", cudnnCreateTensorDescriptor(&t));
	status("cudnnSetTensor4dDescriptor", cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 4, 8, 8));
	status("cudnnDestroyTensorDescriptor", cudnnDestroyTensorDescriptor(t));
	status("cudnnDestroy", cudnnDestroy(dnn));

	/* A plan JIT-compiles PTX kernels, which the driver test double cannot:
	 * on it, only the handle. */
	cufftHandle plan;
	status("cufftCreate", cufftCreate(&plan));
	status("cufftSetStream", cufftSetStream(plan, s));
	if (!fake) {
		size_t ws = 0;
		status("cufftMakePlan1d", cufftMakePlan1d(plan, 1024, CUFFT_R2C, 1, &ws));
		status("cufftExecR2C", cufftExecR2C(plan, d, (cufftComplex *)(d + 2048)));
	}
	status("cufftDestroy", cufftDestroy(plan));

	cusolverDnHandle_t sol;
	status("cusolverDnCreate", cusolverDnCreate(&sol));
	status("cusolverDnSetStream", cusolverDnSetStream(sol, s));
	int lwork = 0;
	status("cusolverDnSpotrf_bufferSize", cusolverDnSpotrf_bufferSize(sol, CUBLAS_FILL_MODE_LOWER, 64, d, 64, &lwork));
	printf("potrf workspace positive: %d\n", lwork > 0);
	status("cusolverDnDestroy", cusolverDnDestroy(sol));

	cusparseHandle_t sp;
	status("cusparseCreate", cusparseCreate(&sp));
	status("cusparseSetStream", cusparseSetStream(sp, s));
	int ver = 0;
	status("cusparseGetVersion", cusparseGetVersion(sp, &ver));
	status("cusparseDestroy", cusparseDestroy(sp));

	curandGenerator_t g;
	status("curandCreateGenerator", curandCreateGenerator(&g, CURAND_RNG_PSEUDO_PHILOX4_32_10));
	status("curandSetStream", curandSetStream(g, s));
	status("curandSetPseudoRandomGeneratorSeed", curandSetPseudoRandomGeneratorSeed(g, 1234));
	status("curandDestroyGenerator", curandDestroyGenerator(g));

	CK(cudaStreamSynchronize(s));
	CK(cudaFree(d));
	CK(cudaStreamDestroy(s));
	return rg_finish("libhandles");
}
