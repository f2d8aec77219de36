/*
 * What both fake libraries share (fakeblas.h): objects, the call log, range
 * checks against the fake driver, float and double gemm on the host.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fakeblas.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int serials[8];

/* ---- objects ---- */

fb_obj *fb_new(int kind)
{
	fb_obj *o = calloc(1, sizeof(*o));
	if (!o)
		return NULL;
	o->magic = FB_MAGIC;
	o->kind = kind;
	pthread_mutex_lock(&mu);
	o->serial = ++serials[kind];
	pthread_mutex_unlock(&mu);
	return o;
}

void fb_free(fb_obj *o)
{
	o->magic = 0; /* a later use of the handle reads as "bad", not as live */
	free(o);
}

fb_obj *fb_get(const void *p, int kind)
{
	const fb_obj *o = p;
	if (!o || o->magic != FB_MAGIC)
		return NULL;
	if (o->kind == kind || (kind == FB_LT && o->kind == FB_BLAS))
		return (fb_obj *)o;
	return NULL;
}

/* ---- the log ---- */

static _Thread_local char line[8192];
static _Thread_local size_t len;

static void put(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line + len, sizeof(line) - len, fmt, ap);
	va_end(ap);
	if (n > 0)
		len = len + (size_t)n < sizeof(line) ? len + (size_t)n : sizeof(line) - 1;
}

void fb_log_begin(const char *fn)
{
	len = 0;
	put("%s", fn);
}

void fb_arg_int(const char *name, long long v) { put(" %s=%lld", name, v); }
void fb_arg_uns(const char *name, unsigned long long v) { put(" %s=%llu", name, v); }
void fb_arg_ptr(const char *name, const void *p) { put(" %s=0x%llx", name, (unsigned long long)(uintptr_t)p); }
void fb_arg_str(const char *name, const char *s) { put(" %s=%s", name, s); }

void fb_arg_obj(const char *name, const void *p)
{
	static const char *const names[] = {"?", "blas", "lt", "desc", "layout", "pref"};
	const fb_obj *o = p;
	if (!o)
		put(" %s=null", name);
	else if (o->magic != FB_MAGIC || o->kind < FB_BLAS || o->kind > FB_PREF)
		put(" %s=bad", name);
	else
		put(" %s=%s#%d", name, names[o->kind], o->serial);
}

void fb_arg_hex(const char *name, const void *p, size_t n)
{
	if (!p) {
		put(" %s=null", name);
		return;
	}
	put(" %s=", name);
	for (size_t i = 0; i < n; i++)
		put("%02x", ((const unsigned char *)p)[i]);
}

void fb_arg_scalar(const char *name, const void *p, size_t n, int on_device)
{
	if (on_device || !p) {
		put(" %s=d:0x%llx", name, (unsigned long long)(uintptr_t)p);
		return;
	}
	put(" %s=h:", name);
	for (size_t i = 0; i < n; i++)
		put("%02x", ((const unsigned char *)p)[i]);
}

/* The fake driver (loaded by remote-gpud) knows its objects; find its functions
 * without linking to it. */
static void *driver_sym(const char *name)
{
	static void *drv;
	if (!drv)
		drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	return drv ? dlsym(drv, name) : NULL;
}

void fb_arg_stream(const char *name, CUstream s)
{
	CUresult (*prio)(CUstream, int *) = (CUresult(*)(CUstream, int *))driver_sym("cuStreamGetPriority");
	int p;
	if (!s)
		put(" %s=null", name);
	else if (prio && prio(s, &p) == CUDA_SUCCESS)
		put(" %s=prio:%d", name, p);
	else
		put(" %s=0x%llx", name, (unsigned long long)(uintptr_t)s);
}

void fb_log_end(void)
{
	const char *path = getenv("FAKECUBLAS_LOG");
	put("\n");
	if (!path || !*path)
		return;
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	ssize_t w = write(fd, line, len);
	(void)w;
	close(fd);
}

/* ---- device ranges ---- */

int fb_dev_ok(const void *p, size_t n)
{
	CUresult (*range)(CUdeviceptr *, size_t *, CUdeviceptr) =
		(CUresult(*)(CUdeviceptr *, size_t *, CUdeviceptr))driver_sym("cuMemGetAddressRange_v2");
	CUdeviceptr base;
	size_t size;
	if (!range)
		return 1;
	if (!p || range(&base, &size, (CUdeviceptr)(uintptr_t)p) != CUDA_SUCCESS)
		return 0;
	return (uintptr_t)p + n <= base + size;
}

/* ---- gemm ---- */

/* Bytes spanned by a column-major matrix of rows x cols with leading dimension ld. */
static size_t span(long long rows, long long cols, long long ld, size_t elem)
{
	return rows <= 0 || cols <= 0 ? 0 : ((size_t)(cols - 1) * (size_t)ld + (size_t)rows) * elem;
}

#define FB_GEMM(name, T)                                                                                         \
	int name(int transa, int transb, int m, int n, int k, T alpha, const T *A, long long lda, const T *B,    \
		 long long ldb, T beta, T *C, long long ldc)                                                     \
	{                                                                                                        \
		long long ar = transa ? k : m, ac = transa ? m : k, br = transb ? n : k, bc = transb ? k : n;    \
		if (m < 0 || n < 0 || k < 0 || lda < (ar > 1 ? ar : 1) || ldb < (br > 1 ? br : 1) ||             \
		    ldc < (m > 1 ? m : 1))                                                                       \
			return CUBLAS_STATUS_INVALID_VALUE;                                                      \
		if (!fb_dev_ok(A, span(ar, ac, lda, sizeof(T))) || !fb_dev_ok(B, span(br, bc, ldb, sizeof(T))) || \
		    !fb_dev_ok(C, span(m, n, ldc, sizeof(T))))                                                   \
			return m && n ? CUBLAS_STATUS_EXECUTION_FAILED : CUBLAS_STATUS_SUCCESS;                  \
		for (int j = 0; j < n; j++)                                                                      \
			for (int i = 0; i < m; i++) {                                                            \
				T acc = 0;                                                                       \
				for (int p = 0; p < k; p++) {                                                    \
					T a = transa ? A[p + (long long)i * lda] : A[i + (long long)p * lda];    \
					T b = transb ? B[j + (long long)p * ldb] : B[p + (long long)j * ldb];    \
					acc += a * b;                                                            \
				}                                                                                \
				T *c = &C[i + (long long)j * ldc];                                               \
				*c = alpha * acc + (beta == 0 ? 0 : beta * *c);                                  \
			}                                                                                        \
		return CUBLAS_STATUS_SUCCESS;                                                                    \
	}
FB_GEMM(fb_sgemm, float)
FB_GEMM(fb_dgemm, double)

/* ---- gemms on a stream, captured or not ---- */

static pthread_mutex_t jobs_mu = PTHREAD_MUTEX_INITIALIZER;
static fb_job *jobs; /* captured ones: a graph may replay them until the library goes */

static int run_job(const fb_job *j)
{
	if (j->copy_from)
		for (int c = 0; c < j->n; c++)
			if (fb_dev_ok(j->copy_from + c * j->copy_ld, (size_t)j->m * 4) &&
			    fb_dev_ok(j->C + c * j->ldc, (size_t)j->m * 4))
				memcpy(j->C + c * j->ldc, j->copy_from + c * j->copy_ld, (size_t)j->m * 4);
	return fb_sgemm(j->transa, j->transb, j->m, j->n, j->k, j->alpha, j->A, j->lda, j->B, j->ldb, j->beta, j->C,
			j->ldc);
}

static void CUDA_CB job_cb(void *p) { run_job(p); }

int fb_sgemm_on(CUstream stream, const fb_job *j)
{
	CUresult (*is)(CUstream, CUstreamCaptureStatus *) =
		(CUresult(*)(CUstream, CUstreamCaptureStatus *))driver_sym("cuStreamIsCapturing");
	CUresult (*host)(CUstream, CUhostFn, void *) = (CUresult(*)(CUstream, CUhostFn, void *))driver_sym("cuLaunchHostFunc");
	CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
	if (!stream || !is || !host || is(stream, &cs) != CUDA_SUCCESS || cs != CU_STREAM_CAPTURE_STATUS_ACTIVE)
		return run_job(j);
	fb_job *k = malloc(sizeof *k);
	if (!k)
		return CUBLAS_STATUS_ALLOC_FAILED;
	*k = *j;
	pthread_mutex_lock(&jobs_mu);
	k->next = jobs;
	jobs = k;
	pthread_mutex_unlock(&jobs_mu);
	return host(stream, job_cb, k) == CUDA_SUCCESS ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

__attribute__((destructor)) static void jobs_free(void)
{
	while (jobs) {
		fb_job *k = jobs;
		jobs = k->next;
		free(k);
	}
}
