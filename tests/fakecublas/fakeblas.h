/*
 * fakecublas: test doubles of libcublas.so.13 and libcublasLt.so.13 for CI, where
 * remote-gpud runs on the driver test double (tests/fakecuda: device memory is
 * host RAM). README.md says what they do; in short:
 *
 *  - every call is appended to $FAKECUBLAS_LOG, one line with every argument,
 *    so a test can check byte for byte what the server handed the library;
 *  - float gemms (Sgemm, SgemmEx, GemmEx, SgemmStridedBatched, cublasLtMatmul)
 *    and dot products compute on the host, so results can be checked;
 *  - handles are objects with a kind and a serial number (blas#1, desc#2), so a
 *    server that passes the wrong object, or a stale one, is caught.
 *
 * Both libraries are built from this header and common.c; each has its own copy
 * of the helpers (hidden), and they agree on the layout of the objects, because
 * cuBLASLt accepts a cuBLAS handle where it expects its own.
 */
#ifndef FAKEBLAS_H
#define FAKEBLAS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda.h> /* CUstream and the fake driver's functions, found with dlsym */

#pragma GCC visibility push(default)
#include <cublasLt.h>
#include <cublas_api.h>
#pragma GCC visibility pop

#define FB_MAGIC 0x66616b65626c6173ull /* "fakeblas" */
#define FB_VERSION 130042              /* cublasLtGetVersion */
#define FB_ALGO_TAG 0xa160000000000000ull

enum fb_kind { FB_BLAS = 1, FB_LT, FB_DESC, FB_LAYOUT, FB_PREF };

typedef struct fb_obj {
	uint64_t magic;
	int kind;
	int serial;
	/* FB_BLAS */
	cublasPointerMode_t ptr_mode;
	cublasMath_t math_mode;
	CUstream stream;
	/* FB_DESC */
	cublasComputeType_t compute;
	int32_t scale_type, lt_ptr_mode, transa, transb, epilogue;
	/* FB_LAYOUT */
	int32_t type, order, batch;
	uint64_t rows, cols;
	int64_t ld, stride;
} fb_obj;

/* A new object (serials count per kind, from 1); NULL when out of memory. */
fb_obj *fb_new(int kind);
void fb_free(fb_obj *o);
/* The object if p is a live one of kind (FB_LT also accepts FB_BLAS), else NULL. */
fb_obj *fb_get(const void *p, int kind);

/* One log line: fb_log_begin, fb_arg_* in order, fb_log_end (one write). */
void fb_log_begin(const char *fn);
void fb_arg_int(const char *name, long long v);
void fb_arg_uns(const char *name, unsigned long long v);
void fb_arg_ptr(const char *name, const void *p);
void fb_arg_obj(const char *name, const void *o);
void fb_arg_hex(const char *name, const void *p, size_t n); /* bytes in memory order, or "null" */
/* A scalar by pointer mode: h:<hex of n bytes> or d:0x<address>. */
void fb_arg_scalar(const char *name, const void *p, size_t n, int on_device);
void fb_arg_stream(const char *name, CUstream s);
void fb_arg_str(const char *name, const char *s);
void fb_log_end(void);

/* 1 if [p, p+n) lies inside one allocation of the fake driver (or if the fake
 * driver is not there to ask). */
int fb_dev_ok(const void *p, size_t n);
/* C = alpha op(A) op(B) + beta C on float, column-major; 0 or a status. */
int fb_sgemm(int transa, int transb, int m, int n, int k, float alpha, const float *A, long long lda,
	     const float *B, long long ldb, float beta, float *C, long long ldc);
int fb_dgemm(int transa, int transb, int m, int n, int k, double alpha, const double *A, long long lda,
	     const double *B, long long ldb, double beta, double *C, long long ldc);

/* A float gemm as a library call on a stream: run now, or, when the stream is
 * capturing (the fake driver's cuStreamIsCapturing), recorded into the capture
 * as a host function node that computes it at every replay, as a real cuBLAS
 * call's kernels are captured. copy_from: D = C first (cublasLtMatmul with C !=
 * D), with copy_ld C's leading dimension; NULL for none. */
typedef struct fb_job {
	int transa, transb, m, n, k;
	float alpha, beta;
	const float *A, *B, *copy_from;
	float *C;
	long long lda, ldb, ldc, copy_ld;
	struct fb_job *next;
} fb_job;
int fb_sgemm_on(CUstream stream, const fb_job *j);

#endif
