/*
 * End-to-end test of cuBLAS / cuBLASLt forwarding: a plain C program linked with
 * NVIDIA's libcublas, libcublasLt and libcudart, run with LD_PRELOAD=libremote.so
 * against remote-gpud on the test doubles (tests/fakecuda, tests/fakecublas). Run
 * by run_cublas.sh, which also checks what it prints:
 *
 *   expect cublas LINE            LINE is in the fake's call log ($FAKECUBLAS_LOG),
 *                                 these lines in this order, byte for byte
 *   expect-teardown cublas LINE   appears once the program has exited (the server
 *                                 destroyed what the session left alive)
 *   expect-count cublas N PREFIX  exactly N lines of the log start with PREFIX
 *   FAIL ...                      a check of a result or a status failed
 *
 * Covered: every function of api/cublas.api at least once with its arguments as
 * the library saw them (of its last section, what cuSOLVER calls besides, one of
 * each shape: solver_imports); handles, streams, workspaces; host and device pointer
 * modes (scalars and dot results); scalar sizes by data, compute and scale type;
 * results of float gemms, dots and cublasLtMatmul; host outputs of the batched
 * solvers and of the heuristic; the client's heuristics cache; errors of
 * destroyed handles and latched async failures (api/cublas.api, "Status").
 *
 *   cublas_e2e          the test
 *   cublas_e2e --free   prints the device's free memory only (baseline checks)
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#define FB_ALGO_TAG 0xa160000000000000ull /* tests/fakecublas/fakeblas.h */
#define FB_VERSION 130042

static int failures;
#define CHECK(x)                                                                        \
	do {                                                                            \
		if (!(x)) {                                                             \
			printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #x);             \
			failures++;                                                     \
		}                                                                       \
	} while (0)
#define CHECK_EQ(a, b)                                                                           \
	do {                                                                                     \
		long long a_ = (long long)(a), b_ = (long long)(b);                              \
		if (a_ != b_) {                                                                  \
			printf("FAIL %s:%d: %s == %lld, expected %lld\n", __FILE__, __LINE__, #a, a_, b_); \
			failures++;                                                              \
		}                                                                                \
	} while (0)
#define OK(x) CHECK_EQ((x), 0)
#define P(p) ((unsigned long long)(uintptr_t)(p))

static void expect(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	printf("expect cublas ");
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
}

/* Hex of n bytes in memory order; a few buffers in rotation. */
static const char *hex(const void *p, size_t n)
{
	static char bufs[8][80];
	static int next;
	char *b = bufs[next++ % 8];
	for (size_t i = 0; i < n && i < 39; i++)
		sprintf(b + 2 * i, "%02x", ((const unsigned char *)p)[i]);
	b[2 * n] = 0;
	return b;
}

static void *dalloc(size_t n)
{
	void *p = NULL;
	OK(cudaMalloc(&p, n));
	return p;
}

static void to_dev(void *d, const void *h, size_t n) { OK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice)); }
static void to_host(void *h, const void *d, size_t n) { OK(cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost)); }

/* Column-major reference: C = alpha op(A) op(B) + beta C. */
static void ref_sgemm(int ta, int tb, int m, int n, int k, float alpha, const float *A, int lda, const float *B,
		      int ldb, float beta, float *C, int ldc)
{
	for (int j = 0; j < n; j++)
		for (int i = 0; i < m; i++) {
			float acc = 0;
			for (int p = 0; p < k; p++)
				acc += (ta ? A[p + i * lda] : A[i + p * lda]) * (tb ? B[j + p * ldb] : B[p + j * ldb]);
			C[i + j * ldc] = alpha * acc + beta * C[i + j * ldc];
		}
}

static void check_floats(const char *what, const float *got, const float *want, int n)
{
	for (int i = 0; i < n; i++)
		if (got[i] != want[i]) {
			printf("FAIL %s: element %d is %g, expected %g\n", what, i, got[i], want[i]);
			failures++;
			return;
		}
}

/* Shared by the sections: a 2x3 A, a 3x2 B, a 2x2 C on the device. */
static float hA[6] = {1, 2, 3, 4, 5, 6}, hB[6] = {1, -1, 2, 0, 3, 1}, hC[4] = {1, 1, 1, 1};
static float *dA, *dB, *dC;
static cudaStream_t stream;
static int n_blas, n_lt, n_desc, n_layout, n_pref; /* the fake's serial numbers */

static void sgemm_host_and_device(cublasHandle_t h, int hn)
{
	float alpha = 2.0f, beta = 0.5f, want[4], got[4];

	/* host pointer mode, A transposed (stored 3x2, lda 3) */
	to_dev(dC, hC, sizeof(hC));
	OK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, 2, 2, 3, &alpha, dA, 3, dB, 3, &beta, dC, 2));
	expect("cublasSgemm_v2 handle=blas#%d transa=1 transb=0 m=2 n=2 k=3 alpha=h:%s A=0x%llx lda=3 B=0x%llx ldb=3 "
	       "beta=h:%s C=0x%llx ldc=2", hn, hex(&alpha, 4), P(dA), P(dB), hex(&beta, 4), P(dC));
	memcpy(want, hC, sizeof(want));
	ref_sgemm(1, 0, 2, 2, 3, alpha, hA, 3, hB, 3, beta, want, 2);
	to_host(got, dC, sizeof(got));
	check_floats("sgemm (host pointer mode)", got, want, 4);

	/* device pointer mode: alpha and beta in device memory */
	float hs[2] = {-1.0f, 3.0f};
	float *ds = dalloc(sizeof(hs));
	to_dev(ds, hs, sizeof(hs));
	OK(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_DEVICE));
	expect("cublasSetPointerMode_v2 handle=blas#%d mode=1", hn);
	cublasPointerMode_t pm = CUBLAS_POINTER_MODE_HOST;
	OK(cublasGetPointerMode(h, &pm));
	CHECK_EQ(pm, CUBLAS_POINTER_MODE_DEVICE);
	OK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, ds, dA, 2, dB, 3, ds + 1, dC, 2));
	expect("cublasSgemm_v2 handle=blas#%d transa=0 transb=0 m=2 n=2 k=3 alpha=d:0x%llx A=0x%llx lda=2 B=0x%llx "
	       "ldb=3 beta=d:0x%llx C=0x%llx ldc=2", hn, P(ds), P(dA), P(dB), P(ds + 1), P(dC));
	ref_sgemm(0, 0, 2, 2, 3, hs[0], hA, 2, hB, 3, hs[1], want, 2);
	to_host(got, dC, sizeof(got));
	check_floats("sgemm (device pointer mode)", got, want, 4);

	/* a dot product into device memory: async */
	float *dres = dalloc(sizeof(float)), res = 0;
	OK(cublasSdot(h, 3, dA, 1, dB, 1, dres));
	expect("cublasSdot_v2 handle=blas#%d n=3 x=0x%llx incx=1 y=0x%llx incy=1 result=dev at=0x%llx", hn, P(dA),
	       P(dB), P(dres));
	to_host(&res, dres, sizeof(res));
	CHECK(res == 1 * 1 + 2 * -1 + 3 * 2);

	OK(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST));
	expect("cublasSetPointerMode_v2 handle=blas#%d mode=0", hn);
	OK(cublasGetPointerMode(h, &pm));
	CHECK_EQ(pm, CUBLAS_POINTER_MODE_HOST);
	OK(cudaFree(ds));
	OK(cudaFree(dres));
}

/* A gemm inside a stream capture (PyTorch's torch.cuda.graph of a Linear): the
 * server makes the call on the capturing stream, so it goes into the graph in
 * order; nothing runs until a replay, and each replay runs it again (beta = 1
 * accumulates). */
static void captured(cublasHandle_t h, int hn)
{
	float alpha = 1.0f, beta = 1.0f, want[4], got[4];
	cudaGraph_t g = NULL;
	cudaGraphExec_t x = NULL;

	to_dev(dC, hC, sizeof(hC));
	OK(cublasSetStream(h, stream));
	expect("cublasSetStream_v2 handle=blas#%d stream=prio:-3", hn);
	OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
	OK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &alpha, dA, 2, dB, 3, &beta, dC, 2));
	expect("cublasSgemm_v2 handle=blas#%d transa=0 transb=0 m=2 n=2 k=3 alpha=h:%s A=0x%llx lda=2 B=0x%llx ldb=3 "
	       "beta=h:%s C=0x%llx ldc=2", hn, hex(&alpha, 4), P(dA), P(dB), hex(&beta, 4), P(dC));
	OK(cudaStreamEndCapture(stream, &g));
	size_t nodes = 0;
	OK(cudaGraphGetNodes(g, NULL, &nodes));
	CHECK_EQ(nodes, 1);
	to_host(got, dC, sizeof(got));
	check_floats("sgemm in a capture does not run", got, hC, 4);
	OK(cudaGraphInstantiate(&x, g, 0));
	memcpy(want, hC, sizeof(want));
	for (int r = 0; r < 2; r++) {
		OK(cudaGraphLaunch(x, stream));
		OK(cudaStreamSynchronize(stream));
		ref_sgemm(0, 0, 2, 2, 3, alpha, hA, 2, hB, 3, beta, want, 2);
		to_host(got, dC, sizeof(got));
		check_floats(r ? "captured sgemm, second replay" : "captured sgemm, first replay", got, want, 4);
	}
	OK(cudaGraphExecDestroy(x));
	OK(cudaGraphDestroy(g));
	OK(cublasSetStream(h, 0));
	expect("cublasSetStream_v2 handle=blas#%d stream=null", hn);
}

static void dots(cublasHandle_t h, int hn)
{
	float fr = -7;
	OK(cublasSdot(h, 3, dA, 1, dB, 1, &fr)); /* host mode: sync, the value comes back */
	expect("cublasSdot_v2 handle=blas#%d n=3 x=0x%llx incx=1 y=0x%llx incy=1 result=host", hn, P(dA), P(dB));
	CHECK(fr == 5.0f);

	double hx[3] = {1, 2, 3}, dr = -7;
	double *dx = dalloc(sizeof(hx));
	to_dev(dx, hx, sizeof(hx));
	OK(cublasDdot(h, 3, dx, 1, dx, 1, &dr));
	expect("cublasDdot_v2 handle=blas#%d n=3 x=0x%llx incx=1 y=0x%llx incy=1 result=host", hn, P(dx), P(dx));
	CHECK(dr == 14.0);

	/* complex dots: the fake writes zeros, over a result full of garbage */
	cuComplex c;
	cuDoubleComplex z;
	memset(&c, 0x77, sizeof(c));
	memset(&z, 0x77, sizeof(z));
	OK(cublasCdotu(h, 1, (cuComplex *)dx, 1, (cuComplex *)dx, 1, &c));
	expect("cublasCdotu_v2 handle=blas#%d n=1 x=0x%llx incx=1 y=0x%llx incy=1 result=host", hn, P(dx), P(dx));
	OK(cublasCdotc(h, 1, (cuComplex *)dx, 1, (cuComplex *)dx, 1, &c));
	expect("cublasCdotc_v2 handle=blas#%d n=1 x=0x%llx incx=1 y=0x%llx incy=1 result=host", hn, P(dx), P(dx));
	CHECK(c.x == 0 && c.y == 0);
	OK(cublasZdotu(h, 1, (cuDoubleComplex *)dx, 1, (cuDoubleComplex *)dx, 1, &z));
	expect("cublasZdotu_v2 handle=blas#%d n=1 x=0x%llx incx=1 y=0x%llx incy=1 result=host", hn, P(dx), P(dx));
	memset(&z, 0x77, sizeof(z));
	OK(cublasZdotc(h, 1, (cuDoubleComplex *)dx, 1, (cuDoubleComplex *)dx, 1, &z));
	expect("cublasZdotc_v2 handle=blas#%d n=1 x=0x%llx incx=1 y=0x%llx incy=1 result=host", hn, P(dx), P(dx));
	CHECK(z.x == 0 && z.y == 0);

	/* DotEx: the result's size follows resultType (the fake fills it with 0x5a) */
	unsigned char buf[16];
	memset(buf, 0x11, sizeof(buf));
	OK(cublasDotEx(h, 3, dx, CUDA_R_64F, 1, dx, CUDA_R_64F, 1, buf, CUDA_R_64F, CUDA_R_64F));
	expect("cublasDotEx handle=blas#%d n=3 x=0x%llx xType=1 incx=1 y=0x%llx yType=1 incy=1 result=host "
	       "resultType=1 executionType=1", hn, P(dx), P(dx));
	CHECK(buf[0] == 0x5a && buf[7] == 0x5a && buf[8] == 0x11 && buf[15] == 0x11);
	OK(cudaFree(dx));
}

static void gemms(cublasHandle_t h, int hn)
{
	float alpha = 1.5f, beta = 0.0f, want[8], got[8];
	double da = 0.25, db = 2.0;
	cuComplex ca = {1, 2}, cb = {3, 4};
	cuDoubleComplex za = {5, 6}, zb = {7, 8};
	void *dW = dalloc(256); /* for the calls the fake only logs */

	/* GemmEx, float: computed */
	to_dev(dC, hC, sizeof(hC));
	OK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &alpha, dA, CUDA_R_32F, 2, dB, CUDA_R_32F, 3, &beta, dC,
			CUDA_R_32F, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
	expect("cublasGemmEx handle=blas#%d transa=0 transb=0 m=2 n=2 k=3 alpha=h:%s A=0x%llx Atype=0 lda=2 B=0x%llx "
	       "Btype=0 ldb=3 beta=h:%s C=0x%llx Ctype=0 ldc=2 computeType=68 algo=-1", hn, hex(&alpha, 4), P(dA),
	       P(dB), hex(&beta, 4), P(dC));
	memcpy(want, hC, sizeof(hC));
	ref_sgemm(0, 0, 2, 2, 3, alpha, hA, 2, hB, 3, beta, want, 2);
	to_host(got, dC, 4 * sizeof(float));
	check_floats("gemmex", got, want, 4);
	/* GemmEx scalars: double for COMPUTE_64F, complex float for 32F with a complex C */
	OK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &da, dW, CUDA_R_64F, 1, dW, CUDA_R_64F, 1, &db, dW,
			CUDA_R_64F, 1, CUBLAS_COMPUTE_64F, CUBLAS_GEMM_DEFAULT));
	expect("cublasGemmEx handle=blas#%d transa=0 transb=0 m=1 n=1 k=1 alpha=h:%s A=0x%llx Atype=1 lda=1 B=0x%llx "
	       "Btype=1 ldb=1 beta=h:%s C=0x%llx Ctype=1 ldc=1 computeType=70 algo=-1", hn, hex(&da, 8), P(dW), P(dW),
	       hex(&db, 8), P(dW));
	OK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &ca, dW, CUDA_C_32F, 1, dW, CUDA_C_32F, 1, &cb, dW,
			CUDA_C_32F, 1, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
	expect("cublasGemmEx handle=blas#%d transa=0 transb=0 m=1 n=1 k=1 alpha=h:%s A=0x%llx Atype=4 lda=1 B=0x%llx "
	       "Btype=4 ldb=1 beta=h:%s C=0x%llx Ctype=4 ldc=1 computeType=68 algo=-1", hn, hex(&ca, 8), P(dW), P(dW),
	       hex(&cb, 8), P(dW));

	/* SgemmEx: computed */
	to_dev(dC, hC, sizeof(hC));
	beta = 1.0f;
	OK(cublasSgemmEx(h, CUBLAS_OP_N, CUBLAS_OP_T, 2, 2, 3, &alpha, dA, CUDA_R_32F, 2, dB, CUDA_R_32F, 2, &beta, dC,
			 CUDA_R_32F, 2));
	expect("cublasSgemmEx handle=blas#%d transa=0 transb=1 m=2 n=2 k=3 alpha=h:%s A=0x%llx lda=2 B=0x%llx ldb=2 "
	       "beta=h:%s C=0x%llx ldc=2 Atype=0 Btype=0 Ctype=0", hn, hex(&alpha, 4), P(dA), P(dB), hex(&beta, 4),
	       P(dC));
	memcpy(want, hC, sizeof(hC));
	ref_sgemm(0, 1, 2, 2, 3, alpha, hA, 2, hB, 2, beta, want, 2);
	to_host(got, dC, 4 * sizeof(float));
	check_floats("sgemmex", got, want, 4);

	/* strided batched, float: two 1x1x3 products out of the same buffers */
	float *dC2 = dalloc(2 * sizeof(float));
	OK(cudaMemset(dC2, 0, 2 * sizeof(float)));
	beta = 0;
	OK(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 3, &alpha, dA, 1, 3, dB, 3, 3, &beta, dC2, 1, 1,
				     2));
	expect("cublasSgemmStridedBatched handle=blas#%d transa=0 transb=0 m=1 n=1 k=3 alpha=h:%s A=0x%llx lda=1 "
	       "B=0x%llx ldb=3 beta=h:%s C=0x%llx ldc=1 strideA=3 strideB=3 strideC=1 batchCount=2", hn,
	       hex(&alpha, 4), P(dA), P(dB), hex(&beta, 4), P(dC2));
	to_host(got, dC2, 2 * sizeof(float));
	want[0] = alpha * (1 * 1 + 2 * -1 + 3 * 2);
	want[1] = alpha * (4 * 0 + 5 * 3 + 6 * 1);
	check_floats("sgemm strided batched", got, want, 2);
	OK(cudaFree(dC2));

	OK(cublasDgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &da, (double *)dW, 1, 0, (double *)dW, 1, 0,
				     &db, (double *)dW, 1, 0, 0));
	expect("cublasDgemmStridedBatched handle=blas#%d transa=0 transb=0 m=1 n=1 k=1 alpha=h:%s A=0x%llx lda=1 "
	       "B=0x%llx ldb=1 beta=h:%s C=0x%llx ldc=1 strideA=0 strideB=0 strideC=0 batchCount=0", hn, hex(&da, 8),
	       P(dW), P(dW), hex(&db, 8), P(dW));
	OK(cublasCgemmStridedBatched(h, CUBLAS_OP_C, CUBLAS_OP_N, 1, 1, 1, &ca, dW, 1, 2, dW, 1, 2, &cb, dW, 1, 2, 1));
	expect("cublasCgemmStridedBatched handle=blas#%d transa=2 transb=0 m=1 n=1 k=1 alpha=h:%s A=0x%llx lda=1 "
	       "B=0x%llx ldb=1 beta=h:%s C=0x%llx ldc=1 strideA=2 strideB=2 strideC=2 batchCount=1", hn, hex(&ca, 8),
	       P(dW), P(dW), hex(&cb, 8), P(dW));
	OK(cublasZgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &za, dW, 1, 1LL << 33, dW, 1, 5, &zb, dW, 1,
				     6, 1));
	expect("cublasZgemmStridedBatched handle=blas#%d transa=0 transb=0 m=1 n=1 k=1 alpha=h:%s A=0x%llx lda=1 "
	       "B=0x%llx ldb=1 beta=h:%s C=0x%llx ldc=1 strideA=8589934592 strideB=5 strideC=6 batchCount=1", hn,
	       hex(&za, 16), P(dW), P(dW), hex(&zb, 16), P(dW));
	OK(cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &za, dW, CUDA_C_64F, 1, 1, dW, CUDA_C_64F, 1,
				      2, &zb, dW, CUDA_C_64F, 1, 3, 4, CUBLAS_COMPUTE_64F_PEDANTIC,
				      CUBLAS_GEMM_DEFAULT_TENSOR_OP));
	expect("cublasGemmStridedBatchedEx handle=blas#%d transa=0 transb=0 m=1 n=1 k=1 alpha=h:%s A=0x%llx Atype=5 "
	       "lda=1 strideA=1 B=0x%llx Btype=5 ldb=1 strideB=2 beta=h:%s C=0x%llx Ctype=5 ldc=1 strideC=3 "
	       "batchCount=4 computeType=71 algo=99", hn, hex(&za, 16), P(dW), P(dW), hex(&zb, 16), P(dW));

	/* Dgemm: computed (diagonal check); C and Z gemm: scalars of 8 and 16 bytes */
	double hd[2] = {3, 4};
	double *dd = dalloc(sizeof(hd));
	to_dev(dd, hd, sizeof(hd));
	OK(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &da, dd, 1, dd + 1, 1, &db, dd, 1));
	expect("cublasDgemm_v2 handle=blas#%d transa=0 transb=0 m=1 n=1 k=1 alpha=h:%s A=0x%llx lda=1 B=0x%llx ldb=1 "
	       "beta=h:%s C=0x%llx ldc=1", hn, hex(&da, 8), P(dd), P(dd + 1), hex(&db, 8), P(dd));
	to_host(hd, dd, sizeof(hd));
	CHECK(hd[0] == 0.25 * 3 * 4 + 2.0 * 3);
	OK(cudaFree(dd));
	OK(cublasCgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, 1, 1, 1, &ca, dW, 1, dW, 1, &cb, dW, 1));
	expect("cublasCgemm_v2 handle=blas#%d transa=0 transb=1 m=1 n=1 k=1 alpha=h:%s A=0x%llx lda=1 B=0x%llx ldb=1 "
	       "beta=h:%s C=0x%llx ldc=1", hn, hex(&ca, 8), P(dW), P(dW), hex(&cb, 8), P(dW));
	OK(cublasZgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &za, dW, 1, dW, 1, &zb, dW, 1));
	expect("cublasZgemm_v2 handle=blas#%d transa=0 transb=0 m=1 n=1 k=1 alpha=h:%s A=0x%llx lda=1 B=0x%llx ldb=1 "
	       "beta=h:%s C=0x%llx ldc=1", hn, hex(&za, 16), P(dW), P(dW), hex(&zb, 16), P(dW));

	/* gemv */
	OK(cublasSgemv(h, CUBLAS_OP_N, 2, 3, &alpha, dA, 2, dB, 1, &beta, dC, 1));
	expect("cublasSgemv_v2 handle=blas#%d trans=0 m=2 n=3 alpha=h:%s A=0x%llx lda=2 x=0x%llx incx=1 beta=h:%s "
	       "y=0x%llx incy=1", hn, hex(&alpha, 4), P(dA), P(dB), hex(&beta, 4), P(dC));
	OK(cublasDgemv(h, CUBLAS_OP_T, 1, 1, &da, dW, 1, dW, -1, &db, dW, 2));
	expect("cublasDgemv_v2 handle=blas#%d trans=1 m=1 n=1 alpha=h:%s A=0x%llx lda=1 x=0x%llx incx=-1 beta=h:%s "
	       "y=0x%llx incy=2", hn, hex(&da, 8), P(dW), P(dW), hex(&db, 8), P(dW));
	OK(cublasCgemv(h, CUBLAS_OP_C, 1, 1, &ca, dW, 1, dW, 1, &cb, dW, 1));
	expect("cublasCgemv_v2 handle=blas#%d trans=2 m=1 n=1 alpha=h:%s A=0x%llx lda=1 x=0x%llx incx=1 beta=h:%s "
	       "y=0x%llx incy=1", hn, hex(&ca, 8), P(dW), P(dW), hex(&cb, 8), P(dW));
	OK(cublasZgemv(h, CUBLAS_OP_N, 1, 1, &za, dW, 1, dW, 1, &zb, dW, 1));
	expect("cublasZgemv_v2 handle=blas#%d trans=0 m=1 n=1 alpha=h:%s A=0x%llx lda=1 x=0x%llx incx=1 beta=h:%s "
	       "y=0x%llx incy=1", hn, hex(&za, 16), P(dW), P(dW), hex(&zb, 16), P(dW));

	/* trsm, and its batched form (arrays of device pointers in device memory) */
	OK(cublasStrsm(h, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N, CUBLAS_DIAG_UNIT, 2, 2, &alpha, dA, 2,
		       dC, 2));
	expect("cublasStrsm_v2 handle=blas#%d side=0 uplo=1 trans=0 diag=1 m=2 n=2 alpha=h:%s A=0x%llx lda=2 "
	       "B=0x%llx ldb=2", hn, hex(&alpha, 4), P(dA), P(dC));
	OK(cublasDtrsm(h, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_T, CUBLAS_DIAG_NON_UNIT, 1, 1, &da, dW, 1,
		       dW, 1));
	expect("cublasDtrsm_v2 handle=blas#%d side=1 uplo=0 trans=1 diag=0 m=1 n=1 alpha=h:%s A=0x%llx lda=1 "
	       "B=0x%llx ldb=1", hn, hex(&da, 8), P(dW), P(dW));
	OK(cublasCtrsm(h, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_C, CUBLAS_DIAG_NON_UNIT, 1, 1, &ca, dW, 1,
		       dW, 1));
	expect("cublasCtrsm_v2 handle=blas#%d side=0 uplo=0 trans=2 diag=0 m=1 n=1 alpha=h:%s A=0x%llx lda=1 "
	       "B=0x%llx ldb=1", hn, hex(&ca, 8), P(dW), P(dW));
	OK(cublasZtrsm(h, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT, 1, 1, &za, dW, 1,
		       dW, 1));
	expect("cublasZtrsm_v2 handle=blas#%d side=0 uplo=0 trans=0 diag=0 m=1 n=1 alpha=h:%s A=0x%llx lda=1 "
	       "B=0x%llx ldb=1", hn, hex(&za, 16), P(dW), P(dW));
	void *arr = dalloc(2 * sizeof(void *));
	void *harr[2] = {dW, dW};
	to_dev(arr, harr, sizeof(harr));
	OK(cublasStrsmBatched(h, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N, CUBLAS_DIAG_UNIT, 1, 1, &alpha,
			      arr, 1, arr, 1, 2));
	expect("cublasStrsmBatched handle=blas#%d side=0 uplo=1 trans=0 diag=1 m=1 n=1 alpha=h:%s A=0x%llx lda=1 "
	       "B=0x%llx ldb=1 batchCount=2", hn, hex(&alpha, 4), P(arr), P(arr));
	OK(cublasDtrsmBatched(h, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N, CUBLAS_DIAG_UNIT, 1, 1, &da, arr,
			      1, arr, 1, 2));
	expect("cublasDtrsmBatched handle=blas#%d side=0 uplo=1 trans=0 diag=1 m=1 n=1 alpha=h:%s A=0x%llx lda=1 "
	       "B=0x%llx ldb=1 batchCount=2", hn, hex(&da, 8), P(arr), P(arr));
	OK(cublasCtrsmBatched(h, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N, CUBLAS_DIAG_UNIT, 1, 1, &ca, arr,
			      1, arr, 1, 2));
	expect("cublasCtrsmBatched handle=blas#%d side=0 uplo=1 trans=0 diag=1 m=1 n=1 alpha=h:%s A=0x%llx lda=1 "
	       "B=0x%llx ldb=1 batchCount=2", hn, hex(&ca, 8), P(arr), P(arr));
	OK(cublasZtrsmBatched(h, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N, CUBLAS_DIAG_UNIT, 1, 1, &za, arr,
			      1, arr, 1, 2));
	expect("cublasZtrsmBatched handle=blas#%d side=0 uplo=1 trans=0 diag=1 m=1 n=1 alpha=h:%s A=0x%llx lda=1 "
	       "B=0x%llx ldb=1 batchCount=2", hn, hex(&za, 16), P(arr), P(arr));
	OK(cudaFree(arr));
	OK(cudaFree(dW));
}

/* Batched solvers: device pivot/info arrays for getrf, host info elsewhere. */
static void solvers(cublasHandle_t h, int hn)
{
	void *arr = dalloc(2 * sizeof(void *)), *dW = dalloc(256);
	int *dP = dalloc(16 * sizeof(int)), *dInfo = dalloc(2 * sizeof(int)), hinfo[2] = {7, 7};
	void *harr[2] = {dW, dW};
	to_dev(arr, harr, sizeof(harr));
	to_dev(dInfo, hinfo, sizeof(hinfo));
	OK(cublasSgetrfBatched(h, 2, (float **)arr, 2, dP, dInfo, 2));
	expect("cublasSgetrfBatched handle=blas#%d n=2 A=0x%llx lda=2 P=0x%llx info=0x%llx batchSize=2", hn, P(arr),
	       P(dP), P(dInfo));
	to_host(hinfo, dInfo, sizeof(hinfo));
	CHECK(hinfo[0] == 0 && hinfo[1] == 0); /* written by the fake in device memory */
	OK(cublasDgetrfBatched(h, 1, (double **)arr, 1, dP, dInfo, 1));
	expect("cublasDgetrfBatched handle=blas#%d n=1 A=0x%llx lda=1 P=0x%llx info=0x%llx batchSize=1", hn, P(arr),
	       P(dP), P(dInfo));
	OK(cublasCgetrfBatched(h, 1, (cuComplex **)arr, 1, NULL, dInfo, 1));
	expect("cublasCgetrfBatched handle=blas#%d n=1 A=0x%llx lda=1 P=0x0 info=0x%llx batchSize=1", hn, P(arr),
	       P(dInfo));
	OK(cublasZgetrfBatched(h, 1, (cuDoubleComplex **)arr, 1, dP, dInfo, 1));
	expect("cublasZgetrfBatched handle=blas#%d n=1 A=0x%llx lda=1 P=0x%llx info=0x%llx batchSize=1", hn, P(arr),
	       P(dP), P(dInfo));

	/* getrs: host info; a bad n is refused with info = -2 */
	int info = 99;
	CHECK_EQ(cublasSgetrsBatched(h, CUBLAS_OP_N, -1, 1, (const float **)arr, 1, dP, (float **)arr, 1, &info, 1),
		 CUBLAS_STATUS_INVALID_VALUE);
	CHECK_EQ(info, -2);
	expect("cublasSgetrsBatched handle=blas#%d trans=0 n=-1 nrhs=1 Aarray=0x%llx lda=1 devIpiv=0x%llx "
	       "Barray=0x%llx ldb=1 batchSize=1", hn, P(arr), P(dP), P(arr));
	info = 99;
	OK(cublasDgetrsBatched(h, CUBLAS_OP_T, 2, 1, (const double **)arr, 2, dP, (double **)arr, 2, &info, 2));
	CHECK_EQ(info, 0);
	expect("cublasDgetrsBatched handle=blas#%d trans=1 n=2 nrhs=1 Aarray=0x%llx lda=2 devIpiv=0x%llx "
	       "Barray=0x%llx ldb=2 batchSize=2", hn, P(arr), P(dP), P(arr));
	info = 99;
	CHECK_EQ(cublasCgetrsBatched(h, CUBLAS_OP_N, 2, 1, (const cuComplex **)arr, 1, dP, (cuComplex **)arr, 2, &info,
				     1), CUBLAS_STATUS_INVALID_VALUE);
	CHECK_EQ(info, -5);
	expect("cublasCgetrsBatched handle=blas#%d trans=0 n=2 nrhs=1 Aarray=0x%llx lda=1 devIpiv=0x%llx "
	       "Barray=0x%llx ldb=2 batchSize=1", hn, P(arr), P(dP), P(arr));
	info = 99;
	OK(cublasZgetrsBatched(h, CUBLAS_OP_N, 1, 1, (const cuDoubleComplex **)arr, 1, dP, (cuDoubleComplex **)arr, 1,
			       &info, 1));
	CHECK_EQ(info, 0);
	expect("cublasZgetrsBatched handle=blas#%d trans=0 n=1 nrhs=1 Aarray=0x%llx lda=1 devIpiv=0x%llx "
	       "Barray=0x%llx ldb=1 batchSize=1", hn, P(arr), P(dP), P(arr));

	/* geqrf: host info */
	info = 99;
	CHECK_EQ(cublasSgeqrfBatched(h, -3, 1, (float **)arr, 1, (float **)arr, &info, 1), CUBLAS_STATUS_INVALID_VALUE);
	CHECK_EQ(info, -1);
	expect("cublasSgeqrfBatched handle=blas#%d m=-3 n=1 Aarray=0x%llx lda=1 TauArray=0x%llx batchSize=1", hn,
	       P(arr), P(arr));
	info = 99;
	OK(cublasDgeqrfBatched(h, 2, 2, (double **)arr, 2, (double **)arr, &info, 2));
	CHECK_EQ(info, 0);
	expect("cublasDgeqrfBatched handle=blas#%d m=2 n=2 Aarray=0x%llx lda=2 TauArray=0x%llx batchSize=2", hn, P(arr),
	       P(arr));
	OK(cublasCgeqrfBatched(h, 1, 1, (cuComplex **)arr, 1, (cuComplex **)arr, &info, 1));
	expect("cublasCgeqrfBatched handle=blas#%d m=1 n=1 Aarray=0x%llx lda=1 TauArray=0x%llx batchSize=1", hn, P(arr),
	       P(arr));
	OK(cublasZgeqrfBatched(h, 1, 1, (cuDoubleComplex **)arr, 1, (cuDoubleComplex **)arr, &info, 1));
	expect("cublasZgeqrfBatched handle=blas#%d m=1 n=1 Aarray=0x%llx lda=1 TauArray=0x%llx batchSize=1", hn, P(arr),
	       P(arr));

	/* gels: host info, device info array */
	info = 99;
	CHECK_EQ(cublasSgelsBatched(h, CUBLAS_OP_T, 2, 2, 1, (float **)arr, 2, (float **)arr, 2, &info, dInfo, 1),
		 CUBLAS_STATUS_INVALID_VALUE);
	CHECK_EQ(info, -1);
	expect("cublasSgelsBatched handle=blas#%d trans=1 m=2 n=2 nrhs=1 Aarray=0x%llx lda=2 Carray=0x%llx ldc=2 "
	       "devInfoArray=0x%llx batchSize=1", hn, P(arr), P(arr), P(dInfo));
	info = 99;
	OK(cublasDgelsBatched(h, CUBLAS_OP_N, 3, 2, 1, (double **)arr, 3, (double **)arr, 3, &info, dInfo, 2));
	CHECK_EQ(info, 0);
	expect("cublasDgelsBatched handle=blas#%d trans=0 m=3 n=2 nrhs=1 Aarray=0x%llx lda=3 Carray=0x%llx ldc=3 "
	       "devInfoArray=0x%llx batchSize=2", hn, P(arr), P(arr), P(dInfo));
	OK(cublasCgelsBatched(h, CUBLAS_OP_N, 1, 1, 1, (cuComplex **)arr, 1, (cuComplex **)arr, 1, &info, dInfo, 1));
	expect("cublasCgelsBatched handle=blas#%d trans=0 m=1 n=1 nrhs=1 Aarray=0x%llx lda=1 Carray=0x%llx ldc=1 "
	       "devInfoArray=0x%llx batchSize=1", hn, P(arr), P(arr), P(dInfo));
	OK(cublasZgelsBatched(h, CUBLAS_OP_N, 1, 1, 1, (cuDoubleComplex **)arr, 1, (cuDoubleComplex **)arr, 1, &info,
			      dInfo, 1));
	expect("cublasZgelsBatched handle=blas#%d trans=0 m=1 n=1 nrhs=1 Aarray=0x%llx lda=1 Carray=0x%llx ldc=1 "
	       "devInfoArray=0x%llx batchSize=1", hn, P(arr), P(arr), P(dInfo));
	OK(cudaFree(arr));
	OK(cudaFree(dW));
	OK(cudaFree(dP));
	OK(cudaFree(dInfo));
}

static cublasLtMatrixLayout_t layout(int rows, int cols, int ld, int *serial)
{
	cublasLtMatrixLayout_t l = NULL;
	OK(cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, rows, cols, ld));
	*serial = ++n_layout;
	expect("cublasLtMatrixLayoutCreate new=layout#%d type=0 rows=%d cols=%d ld=%d", *serial, rows, cols, ld);
	return l;
}

/* cublasLt: descriptors and their attributes, heuristics, matmul with host and
 * device scalars, scale types, PyTorch's cuBLAS handle as the Lt handle. */
static void lt(cublasHandle_t h, int hn)
{
	CHECK_EQ(cublasLtGetVersion(), FB_VERSION);
	CHECK_EQ(cublasLtGetVersion(), FB_VERSION); /* the second is answered locally */

	cublasLtHandle_t lh = NULL;
	OK(cublasLtCreate(&lh));
	int ln = ++n_lt;
	expect("cublasLtCreate new=lt#%d", ln);

	cublasLtMatmulDesc_t desc = NULL;
	OK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
	int dn = ++n_desc;
	expect("cublasLtMatmulDescCreate new=desc#%d computeType=68 scaleType=0", dn);
	int32_t op_t = CUBLAS_OP_T;
	OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof(op_t)));
	expect("cublasLtMatmulDescSetAttribute desc=desc#%d attr=3 buf=01000000 size=4", dn);

	int an, bn, cn, dln;
	cublasLtMatrixLayout_t la = layout(3, 2, 3, &an), lb = layout(3, 2, 3, &bn), lc = layout(2, 2, 2, &cn),
			       ld = layout(2, 2, 2, &dln);
	int32_t order = CUBLASLT_ORDER_COL;
	OK(cublasLtMatrixLayoutSetAttribute(la, CUBLASLT_MATRIX_LAYOUT_ORDER, &order, sizeof(order)));
	expect("cublasLtMatrixLayoutSetAttribute layout=layout#%d attr=1 buf=00000000 size=4", an);

	cublasLtMatmulPreference_t pref = NULL;
	OK(cublasLtMatmulPreferenceCreate(&pref));
	int pn = ++n_pref;
	expect("cublasLtMatmulPreferenceCreate new=pref#%d", pn);
	uint64_t ws_max = 4096;
	OK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_max,
						sizeof(ws_max)));
	expect("cublasLtMatmulPreferenceSetAttribute pref=pref#%d attr=%d buf=0010000000000000 size=8", pn,
	       (int)CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES);

	/* heuristics: the fake offers two algorithms */
	cublasLtMatmulHeuristicResult_t res[3];
	memset(res, 0xee, sizeof(res));
	int nres = -1;
	OK(cublasLtMatmulAlgoGetHeuristic(lh, desc, la, lb, lc, ld, pref, 3, res, &nres));
	expect("cublasLtMatmulAlgoGetHeuristic handle=lt#%d desc=desc#%d A=layout#%d B=layout#%d C=layout#%d "
	       "D=layout#%d pref=pref#%d requested=3", ln, dn, an, bn, cn, dln, pn);
	CHECK_EQ(nres, 2);
	CHECK(res[0].algo.data[0] == FB_ALGO_TAG && res[0].algo.data[7] == (FB_ALGO_TAG | 7));
	CHECK(res[1].algo.data[0] == (FB_ALGO_TAG | 16) && res[1].workspaceSize == 2048);
	CHECK(res[0].state == CUBLAS_STATUS_SUCCESS && res[1].wavesCount == 2.0f);

	/* matmul, host scalars: D = 2 A^T B + C */
	float alpha = 2.0f, beta = 1.0f, want[4], got[4];
	float *dD = dalloc(4 * sizeof(float)), *ws = dalloc(1024);
	to_dev(dC, hC, sizeof(hC));
	OK(cublasLtMatmul(lh, desc, &alpha, dA, la, dB, lb, &beta, dC, lc, dD, ld, &res[0].algo, ws, 1024, stream));
	expect("cublasLtMatmul handle=lt#%d desc=desc#%d alpha=h:%s A=0x%llx Adesc=layout#%d B=0x%llx Bdesc=layout#%d "
	       "beta=h:%s C=0x%llx Cdesc=layout#%d D=0x%llx Ddesc=layout#%d algo=%s workspace=0x%llx "
	       "workspaceSize=1024 stream=prio:-3", ln, dn, hex(&alpha, 4), P(dA), an, P(dB), bn, hex(&beta, 4), P(dC),
	       cn, P(dD), dln, hex(&res[0].algo, 8), P(ws));
	memcpy(want, hC, sizeof(hC));
	ref_sgemm(1, 0, 2, 2, 3, alpha, hA, 3, hB, 3, beta, want, 2);
	OK(cudaStreamSynchronize(stream));
	to_host(got, dD, sizeof(got));
	check_floats("cublasLtMatmul (host scalars)", got, want, 4);

	/* PyTorch's way: its cuBLAS handle as the Lt handle; device scalars; no algo */
	int32_t pm = CUBLASLT_POINTER_MODE_DEVICE;
	OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, &pm, sizeof(pm)));
	expect("cublasLtMatmulDescSetAttribute desc=desc#%d attr=2 buf=01000000 size=4", dn);
	float hs[2] = {0.5f, 0.0f};
	float *ds = dalloc(sizeof(hs));
	to_dev(ds, hs, sizeof(hs));
	OK(cublasLtMatmul((cublasLtHandle_t)h, desc, ds, dA, la, dB, lb, ds + 1, dC, lc, dD, ld, NULL, NULL, 0, 0));
	expect("cublasLtMatmul handle=blas#%d desc=desc#%d alpha=d:0x%llx A=0x%llx Adesc=layout#%d B=0x%llx "
	       "Bdesc=layout#%d beta=d:0x%llx C=0x%llx Cdesc=layout#%d D=0x%llx Ddesc=layout#%d algo=null "
	       "workspace=0x0 workspaceSize=0 stream=null", hn, dn, P(ds), P(dA), an, P(dB), bn, P(ds + 1), P(dC), cn,
	       P(dD), dln);
	memcpy(want, hC, sizeof(hC));
	ref_sgemm(1, 0, 2, 2, 3, hs[0], hA, 3, hB, 3, hs[1], want, 2);
	to_host(got, dD, sizeof(got));
	check_floats("cublasLtMatmul (device scalars, cuBLAS handle)", got, want, 4);

	/* scale type: double scalars for a CUDA_R_64F descriptor (logged only), then
	 * the attribute switches it to float (computed) */
	cublasLtMatmulDesc_t desc2 = NULL;
	OK(cublasLtMatmulDescCreate(&desc2, CUBLAS_COMPUTE_64F, CUDA_R_64F));
	int d2n = ++n_desc;
	expect("cublasLtMatmulDescCreate new=desc#%d computeType=70 scaleType=1", d2n);
	double a64 = 3.0, b64 = -1.0;
	OK(cublasLtMatmul(lh, desc2, &a64, dA, la, dB, lb, &b64, dC, lc, dD, ld, NULL, NULL, 0, stream));
	expect("cublasLtMatmul handle=lt#%d desc=desc#%d alpha=h:%s A=0x%llx Adesc=layout#%d B=0x%llx Bdesc=layout#%d "
	       "beta=h:%s C=0x%llx Cdesc=layout#%d D=0x%llx Ddesc=layout#%d algo=null workspace=0x0 "
	       "workspaceSize=0 stream=prio:-3", ln, d2n, hex(&a64, 8), P(dA), an, P(dB), bn, hex(&b64, 8), P(dC), cn,
	       P(dD), dln);
	int32_t r32f = CUDA_R_32F;
	OK(cublasLtMatmulDescSetAttribute(desc2, CUBLASLT_MATMUL_DESC_SCALE_TYPE, &r32f, sizeof(r32f)));
	expect("cublasLtMatmulDescSetAttribute desc=desc#%d attr=1 buf=00000000 size=4", d2n);
	alpha = 1.0f;
	beta = 0.0f;
	OK(cublasLtMatmul(lh, desc2, &alpha, dA, lc, dB, lc, &beta, dC, lc, dD, ld, NULL, NULL, 0, stream));
	expect("cublasLtMatmul handle=lt#%d desc=desc#%d alpha=h:%s A=0x%llx Adesc=layout#%d B=0x%llx Bdesc=layout#%d "
	       "beta=h:%s C=0x%llx Cdesc=layout#%d D=0x%llx Ddesc=layout#%d algo=null workspace=0x0 "
	       "workspaceSize=0 stream=prio:-3", ln, d2n, hex(&alpha, 4), P(dA), cn, P(dB), cn, hex(&beta, 4), P(dC),
	       cn, P(dD), dln);
	memcpy(want, hC, sizeof(hC));
	ref_sgemm(0, 0, 2, 2, 2, alpha, hA, 2, hB, 2, beta, want, 2);
	to_host(got, dD, sizeof(got));
	check_floats("cublasLtMatmul (scale type from the attribute)", got, want, 4);

	/* the same question about descriptors in the same state: answered from the
	 * client's cache, the library is not asked again */
	{
		cublasLtMatmulDesc_t d3 = NULL;
		cublasLtMatmulPreference_t p3 = NULL;
		OK(cublasLtMatmulDescCreate(&d3, CUBLAS_COMPUTE_32F, CUDA_R_32F));
		int d3n = ++n_desc;
		OK(cublasLtMatmulDescSetAttribute(d3, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof(op_t)));
		int a3, b3, c3, e3;
		cublasLtMatrixLayout_t la3 = layout(3, 2, 3, &a3), lb3 = layout(3, 2, 3, &b3), lc3 = layout(2, 2, 2, &c3),
				       ld3 = layout(2, 2, 2, &e3);
		OK(cublasLtMatrixLayoutSetAttribute(la3, CUBLASLT_MATRIX_LAYOUT_ORDER, &order, sizeof(order)));
		OK(cublasLtMatmulPreferenceCreate(&p3));
		++n_pref;
		OK(cublasLtMatmulPreferenceSetAttribute(p3, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_max,
							sizeof(ws_max)));
		cublasLtMatmulHeuristicResult_t res3[3];
		memset(res3, 0, sizeof(res3));
		nres = -1;
		OK(cublasLtMatmulAlgoGetHeuristic(lh, d3, la3, lb3, lc3, ld3, p3, 3, res3, &nres));
		CHECK_EQ(nres, 2);
		CHECK(!memcmp(res3, res, 2 * sizeof(res[0])));
		/* one attribute more: another state, the library is asked (once) */
		int32_t epi = CUBLASLT_EPILOGUE_BIAS;
		OK(cublasLtMatmulDescSetAttribute(d3, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
		OK(cublasLtMatmulAlgoGetHeuristic(lh, d3, la3, lb3, lc3, ld3, p3, 3, res3, &nres));
		OK(cublasLtMatmulAlgoGetHeuristic(lh, d3, la3, lb3, lc3, ld3, p3, 3, res3, &nres));
		/* of the three questions about desc#d3n, only the second reached the library */
		printf("expect-count cublas 1 cublasLtMatmulAlgoGetHeuristic handle=lt#%d desc=desc#%d\n", ln, d3n);
		OK(cublasLtMatmulDescDestroy(d3));
		OK(cublasLtMatrixLayoutDestroy(la3));
		OK(cublasLtMatrixLayoutDestroy(lb3));
		OK(cublasLtMatrixLayoutDestroy(lc3));
		OK(cublasLtMatrixLayoutDestroy(ld3));
		OK(cublasLtMatmulPreferenceDestroy(p3));
	}

	/* destroys; a destroyed preference is refused by the server's table (sync) */
	OK(cublasLtMatmulPreferenceDestroy(pref));
	expect("cublasLtMatmulPreferenceDestroy obj=pref#%d", pn);
	nres = -1;
	CHECK_EQ(cublasLtMatmulAlgoGetHeuristic(lh, desc, la, lb, lc, ld, pref, 1, res, &nres),
		 CUBLAS_STATUS_INVALID_VALUE);
	CHECK_EQ(nres, -1);
	OK(cublasLtMatmulDescDestroy(desc));
	expect("cublasLtMatmulDescDestroy obj=desc#%d", dn);
	OK(cublasLtMatmulDescDestroy(desc)); /* again: async, latched ... */
	nres = -1;
	/* ... and reported by the next sync call, whose own work still happened */
	CHECK_EQ(cublasLtMatmulAlgoGetHeuristic(lh, desc2, la, lb, lc, ld, pref, 1, res, &nres),
		 CUBLAS_STATUS_INVALID_VALUE); /* its own: pref is gone */
	pref = NULL;
	OK(cublasLtMatmulPreferenceCreate(&pref));
	pn = ++n_pref;
	expect("cublasLtMatmulPreferenceCreate new=pref#%d", pn);
	nres = -1;
	CHECK_EQ(cublasLtMatmulAlgoGetHeuristic(lh, desc2, la, lb, lc, ld, pref, 1, res, &nres),
		 CUBLAS_STATUS_INVALID_VALUE); /* the latched one */
	CHECK_EQ(nres, 1);
	expect("cublasLtMatmulAlgoGetHeuristic handle=lt#%d desc=desc#%d A=layout#%d B=layout#%d C=layout#%d "
	       "D=layout#%d pref=pref#%d requested=1", ln, d2n, an, bn, cn, dln, pn);
	OK(cublasLtMatmulAlgoGetHeuristic(lh, desc2, la, lb, lc, ld, pref, 1, res, &nres)); /* taken: clean again */

	OK(cublasLtMatrixLayoutDestroy(la));
	expect("cublasLtMatrixLayoutDestroy obj=layout#%d", an);
	OK(cublasLtMatrixLayoutDestroy(lb));
	OK(cublasLtMatrixLayoutDestroy(lc));
	OK(cublasLtMatrixLayoutDestroy(ld));
	expect("cublasLtMatrixLayoutDestroy obj=layout#%d", dln);
	OK(cublasLtMatmulPreferenceDestroy(pref));
	OK(cublasLtDestroy(lh));
	expect("cublasLtDestroy handle=lt#%d", ln);
	/* desc2 is left alive: the session's teardown destroys it */
	printf("expect-teardown cublas cublasLtMatmulDescDestroy obj=desc#%d\n", d2n);
	OK(cudaFree(dD));
	OK(cudaFree(ws));
	OK(cudaFree(ds));
}

/* A destroyed handle: async calls on it succeed here and fail on the server; the
 * failure comes back at the next sync call (which still does its work). */
static void handle_errors(cublasHandle_t h, int hn)
{
	cublasHandle_t h2 = NULL;
	OK(cublasCreate(&h2));
	int h2n = ++n_blas;
	expect("cublasCreate_v2 new=blas#%d", h2n);
	OK(cublasDestroy(h2));
	expect("cublasDestroy_v2 handle=blas#%d", h2n);

	float alpha = 1, beta = 0, r = 0;
	OK(cublasSgemm(h2, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &alpha, dA, 2, dB, 3, &beta, dC, 2));
	CHECK_EQ(cublasSdot(h, 3, dA, 1, dB, 1, &r), CUBLAS_STATUS_NOT_INITIALIZED);
	CHECK(r == 5.0f);
	expect("cublasSdot_v2 handle=blas#%d n=3 x=0x%llx incx=1 y=0x%llx incy=1 result=host", hn, P(dA), P(dB));
	r = 0;
	OK(cublasSdot(h, 3, dA, 1, dB, 1, &r));
	CHECK(r == 5.0f);

	/* sync on the destroyed handle: its own status, at once */
	int info = 99;
	CHECK_EQ(cublasSgetrsBatched(h2, CUBLAS_OP_N, 1, 1, NULL, 1, NULL, NULL, 1, &info, 1),
		 CUBLAS_STATUS_NOT_INITIALIZED);
	CHECK_EQ(info, 99);
	cublasPointerMode_t pm;
	CHECK_EQ(cublasGetPointerMode(h2, &pm), CUBLAS_STATUS_NOT_INITIALIZED);

	/* a failure of the library itself (lda < m), latched the same way */
	OK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &alpha, dA, 1, dB, 3, &beta, dC, 2));
	expect("cublasSgemm_v2 handle=blas#%d transa=0 transb=0 m=2 n=2 k=3 alpha=h:%s A=0x%llx lda=1 B=0x%llx ldb=3 "
	       "beta=h:%s C=0x%llx ldc=2", hn, hex(&alpha, 4), P(dA), P(dB), hex(&beta, 4), P(dC));
	CHECK_EQ(cublasSdot(h, 3, dA, 1, dB, 1, &r), CUBLAS_STATUS_INVALID_VALUE);
	OK(cublasSdot(h, 3, dA, 1, dB, 1, &r));

	/* the CUDA runtime does not see library failures */
	OK(cublasSgemm(h2, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &alpha, dA, 2, dB, 3, &beta, dC, 2));
	OK(cudaDeviceSynchronize());
	OK(cudaGetLastError());
	CHECK_EQ(cublasSdot(h, 3, dA, 1, dB, 1, &r), CUBLAS_STATUS_NOT_INITIALIZED);
}

/* Exported by libcublas.so.13, declared by no header (api/cublas.api: @proto). */
cublasStatus_t cublasSetEnvironmentMode(cublasHandle_t handle, int mode);

/* What cuSOLVER calls besides the functions above: its setters, the stream answered
 * by the client, cublasSetMatrixAsync made by the runtime layer, results by pointer
 * mode of another type (norm, index), two scalars of one call (rot), real scalars
 * of a complex function (herk), alpha and beta around a matrix (geam). */
static void solver_imports(cublasHandle_t h, int hn)
{
	OK(cublasSetEnvironmentMode(h, 1));
	expect("cublasSetEnvironmentMode handle=blas#%d mode=1", hn);
	OK(cublasSetAtomicsMode(h, CUBLAS_ATOMICS_ALLOWED));
	expect("cublasSetAtomicsMode handle=blas#%d mode=1", hn);
	OK(cublasSetEmulationStrategy(h, CUBLAS_EMULATION_STRATEGY_EAGER));
	expect("cublasSetEmulationStrategy handle=blas#%d strategy=2", hn);

	/* the stream as the program set it, with no round trip */
	cudaStream_t got = (cudaStream_t)1;
	OK(cublasGetStream(h, &got));
	CHECK(got == NULL);
	OK(cublasSetStream(h, stream));
	expect("cublasSetStream_v2 handle=blas#%d stream=prio:-3", hn);
	OK(cublasGetStream(h, &got));
	CHECK(got == stream);
	OK(cublasSetStream(h, 0));
	expect("cublasSetStream_v2 handle=blas#%d stream=null", hn);
	OK(cublasGetStream(h, &got));
	CHECK(got == NULL);
	CHECK_EQ(cublasGetStream(h, NULL), CUBLAS_STATUS_INVALID_VALUE);
	CHECK_EQ(cublasGetStream((cublasHandle_t)(uintptr_t)0x5eed, &got), CUBLAS_STATUS_NOT_INITIALIZED);

	/* a 2x3 host matrix with lda 3 into a device one with ldb 2, on the stream */
	float hm[9] = {1, 2, -1, 3, 4, -1, 5, 6, -1}, want[6] = {1, 2, 3, 4, 5, 6}, back[6] = {0};
	float *dm = dalloc(sizeof(want));
	OK(cublasSetMatrixAsync(2, 3, sizeof(float), hm, 3, dm, 2, stream));
	OK(cudaStreamSynchronize(stream));
	to_host(back, dm, sizeof(back));
	check_floats("cublasSetMatrixAsync", back, want, 6);
	CHECK_EQ(cublasSetMatrixAsync(-1, 3, sizeof(float), hm, 3, dm, 2, stream), CUBLAS_STATUS_INVALID_VALUE);
	CHECK_EQ(cublasSetMatrixAsync(2, 3, sizeof(float), hm, 3, dm, 0, stream), CUBLAS_STATUS_INVALID_VALUE);
	OK(cublasSetMatrixAsync(0, 3, sizeof(float), hm, 3, NULL, 2, stream));
	/* a destination that is not device memory: a mapping error, and not the runtime's */
	CHECK_EQ(cublasSetMatrixAsync(2, 3, sizeof(float), hm, 3, hm, 2, stream), CUBLAS_STATUS_MAPPING_ERROR);
	OK(cudaGetLastError());

	/* norm and index: host mode (sync, the value comes back), then device mode */
	float hv[4] = {3, 4, 0, -12}, nrm = -1;
	int imax = -1;
	float *dv = dalloc(sizeof(hv) + sizeof(float) + sizeof(int));
	to_dev(dv, hv, sizeof(hv));
	OK(cublasSnrm2(h, 2, dv, 1, &nrm));
	expect("cublasSnrm2_v2 handle=blas#%d n=2 x=0x%llx incx=1 result=host", hn, P(dv));
	CHECK(nrm == 5.0f);
	OK(cublasIsamax(h, 4, dv, 1, &imax));
	expect("cublasIsamax_v2 handle=blas#%d n=4 x=0x%llx incx=1 result=host", hn, P(dv));
	CHECK_EQ(imax, 4);
	OK(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_DEVICE));
	expect("cublasSetPointerMode_v2 handle=blas#%d mode=1", hn);
	float *dnrm = dv + 4;
	int *dimax = (int *)(dv + 5);
	OK(cublasSnrm2(h, 2, dv, 1, dnrm));
	expect("cublasSnrm2_v2 handle=blas#%d n=2 x=0x%llx incx=1 result=dev at=0x%llx", hn, P(dv), P(dnrm));
	OK(cublasIsamax(h, 4, dv, 1, dimax));
	expect("cublasIsamax_v2 handle=blas#%d n=4 x=0x%llx incx=1 result=dev at=0x%llx", hn, P(dv), P(dimax));
	OK(cudaDeviceSynchronize());
	to_host(&nrm, dnrm, sizeof(nrm));
	to_host(&imax, dimax, sizeof(imax));
	CHECK(nrm == 5.0f);
	CHECK_EQ(imax, 4);
	OK(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST));
	expect("cublasSetPointerMode_v2 handle=blas#%d mode=0", hn);

	float c = 1, sn = 0.5f, alpha = 2, beta = 1;
	OK(cublasSrot_64(h, 2, dv, 1, dv + 2, 1, &c, &sn));
	expect("cublasSrot_v2_64 handle=blas#%d n=2 x=0x%llx incx=1 y=0x%llx incy=1 c=h:%s s=h:%s", hn, P(dv),
	       P(dv + 2), hex(&c, 4), hex(&sn, 4));
	OK(cublasCherk(h, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, 1, 1, &alpha, (cuComplex *)dv, 1, &beta,
		       (cuComplex *)dv, 1));
	expect("cublasCherk_v2 handle=blas#%d uplo=0 trans=0 n=1 k=1 alpha=h:%s A=0x%llx lda=1 beta=h:%s C=0x%llx ldc=1",
	       hn, hex(&alpha, 4), P(dv), hex(&beta, 4), P(dv));

	/* C = 2 A + 1 B, computed by the fake */
	OK(cublasSgeam(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 3, &alpha, dA, 2, &beta, dB, 2, dm, 2));
	expect("cublasSgeam handle=blas#%d transa=0 transb=0 m=2 n=3 alpha=h:%s A=0x%llx lda=2 beta=h:%s B=0x%llx ldb=2 "
	       "C=0x%llx ldc=2", hn, hex(&alpha, 4), P(dA), hex(&beta, 4), P(dB), P(dm));
	for (int i = 0; i < 6; i++)
		want[i] = 2 * hA[i] + hB[i];
	to_host(back, dm, sizeof(back));
	check_floats("cublasSgeam", back, want, 6);

	/* a function the fake lacks: the server's library answers not supported */
	double dn = -1;
	CHECK_EQ(cublasDnrm2(h, 1, (double *)dv, 1, &dn), CUBLAS_STATUS_NOT_SUPPORTED);
	OK(cudaFree(dm));
	OK(cudaFree(dv));
}

int main(int argc, char **argv)
{
	size_t free_b = 0, total = 0;
	OK(cudaMemGetInfo(&free_b, &total));
	printf("free=%zu\n", free_b);
	if (argc > 1 && !strcmp(argv[1], "--free"))
		return failures ? 1 : 0;

	OK(cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking, -3));
	dA = dalloc(sizeof(hA));
	dB = dalloc(sizeof(hB));
	dC = dalloc(sizeof(hC));
	to_dev(dA, hA, sizeof(hA));
	to_dev(dB, hB, sizeof(hB));

	cublasHandle_t h = NULL;
	OK(cublasCreate(&h));
	int hn = ++n_blas;
	expect("cublasCreate_v2 new=blas#%d", hn);
	OK(cublasSetStream(h, stream));
	expect("cublasSetStream_v2 handle=blas#%d stream=prio:-3", hn);
	void *ws = dalloc(4096);
	OK(cublasSetWorkspace(h, ws, 4096));
	expect("cublasSetWorkspace_v2 handle=blas#%d workspace=0x%llx size=4096", hn, P(ws));
	OK(cublasSetMathMode(h, CUBLAS_TF32_TENSOR_OP_MATH));
	expect("cublasSetMathMode handle=blas#%d mode=3", hn);
	cublasMath_t mm = CUBLAS_DEFAULT_MATH;
	OK(cublasGetMathMode(h, &mm));
	CHECK_EQ(mm, CUBLAS_TF32_TENSOR_OP_MATH);
	cublasPointerMode_t pm = CUBLAS_POINTER_MODE_DEVICE;
	OK(cublasGetPointerMode(h, &pm));
	CHECK_EQ(pm, CUBLAS_POINTER_MODE_HOST);
	OK(cublasSetStream(h, 0));
	expect("cublasSetStream_v2 handle=blas#%d stream=null", hn);

	sgemm_host_and_device(h, hn);
	captured(h, hn);
	dots(h, hn);
	solver_imports(h, hn);
	gemms(h, hn);
	solvers(h, hn);
	lt(h, hn);
	handle_errors(h, hn);

	/* a handle left alive, with its stream: the teardown destroys it */
	cublasHandle_t h3 = NULL;
	OK(cublasCreate(&h3));
	int h3n = ++n_blas;
	expect("cublasCreate_v2 new=blas#%d", h3n);
	OK(cublasSetStream(h3, stream));
	printf("expect-teardown cublas cublasDestroy_v2 handle=blas#%d\n", h3n);

	OK(cublasDestroy(h));
	expect("cublasDestroy_v2 handle=blas#%d", hn);
	OK(cudaFree(ws));
	OK(cudaFree(dA));
	OK(cudaFree(dB));
	OK(cudaFree(dC));
	OK(cudaDeviceSynchronize());
	printf("%s\n", failures ? "cublas_e2e: FAILED" : "cublas_e2e: ok");
	return failures ? 1 : 0;
}
