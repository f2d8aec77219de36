/*
 * args: kernel argument packing, byte for byte.
 *
 * Kernels with mixed parameter types (char, short, int, long long, float,
 * double, unsigned char/short, pointers, structs by value with padding, a
 * struct holding a 1 KiB array, 16-byte aligned vector types, 33 parameters,
 * none) are launched with known values through <<<>>>, cudaLaunchKernel and
 * cudaLaunchKernelExC.
 *
 * The parameter list of each kernel is written once (an X-macro) and gives
 * the kernel's signature, a host C struct mirroring the parameter layout (C
 * lays out struct members with the same alignment rules CUDA uses for
 * parameters), and the launch arguments.
 *
 * On a GPU each kernel echoes every parameter it received into an output
 * array, and the host compares that with the same echo computed on the host.
 * Run locally (no REMOTE_GPU, not RGTEST_FAKE), it also checks the mirror
 * struct's offsets against cuFuncGetParamInfo of the real driver.
 *
 * With RGTEST_FAKE=1 (CI: backend on the driver test double, which runs none
 * of these kernels) it prints for each launch the line the fake must log:
 *   expect launch <name> grid=X,Y,Z block=X,Y,Z shmem=N params=<hex>
 * where <hex> is the mirror struct's bytes from offset 0 to the end of the
 * last parameter: padding between parameters is zero, padding inside structs
 * is whatever the caller's struct held (zero here: every struct is memset).
 * run_e2e.sh checks those lines against $FAKECUDA_LAUNCH_LOG.
 */
#include <dlfcn.h>
#include <stddef.h>

#include "rgtest.h"

struct Pad { char c; double d; short s; };   /* 24 bytes: 7 + 6 bytes of padding */
struct Odd { short a; char b; };             /* 4 bytes, align 2 */
struct Big { unsigned w[256]; };             /* 1 KiB by value */

/* ---- echo: what a kernel reports for each parameter (host and device) ---- */
typedef unsigned long long u64;

#define HD __host__ __device__ static inline
HD int echo(u64 *o, int k, char v) { o[k] = (u64)(long long)v; return k + 1; }
HD int echo(u64 *o, int k, unsigned char v) { o[k] = v; return k + 1; }
HD int echo(u64 *o, int k, short v) { o[k] = (u64)(long long)v; return k + 1; }
HD int echo(u64 *o, int k, unsigned short v) { o[k] = v; return k + 1; }
HD int echo(u64 *o, int k, int v) { o[k] = (u64)(long long)v; return k + 1; }
HD int echo(u64 *o, int k, long long v) { o[k] = (u64)v; return k + 1; }
HD int echo(u64 *o, int k, const void *v) { o[k] = (u64)(size_t)v; return k + 1; }
HD int echo(u64 *o, int k, float v)
{
	unsigned u;
	memcpy(&u, &v, 4);
	o[k] = u;
	return k + 1;
}
HD int echo(u64 *o, int k, double v)
{
	u64 u;
	memcpy(&u, &v, 8);
	o[k] = u;
	return k + 1;
}
HD int echo(u64 *o, int k, Pad v) { k = echo(o, k, v.c); k = echo(o, k, v.d); return echo(o, k, v.s); }
HD int echo(u64 *o, int k, Odd v) { k = echo(o, k, v.a); return echo(o, k, v.b); }
HD int echo(u64 *o, int k, const Big &v)
{
	u64 h = 0xcbf29ce484222325ULL;
	for (int i = 0; i < 256; i++)
		h = (h ^ v.w[i]) * 0x100000001b3ULL;
	o[k] = h;
	o[k + 1] = v.w[0];
	o[k + 2] = v.w[255];
	return k + 3;
}
HD int echo(u64 *o, int k, float4 v)
{
	k = echo(o, k, v.x);
	k = echo(o, k, v.y);
	k = echo(o, k, v.z);
	return echo(o, k, v.w);
}
HD int echo(u64 *o, int k, double2 v) { k = echo(o, k, v.x); return echo(o, k, v.y); }

/* ---- deterministic values by parameter index ---- */
static void setv(char *p, int k) { *p = (char)(0x80 | (k * 7)); }
static void setv(unsigned char *p, int k) { *p = (unsigned char)(0xF0 + k); }
static void setv(short *p, int k) { *p = (short)(-1000 * k - 7); }
static void setv(unsigned short *p, int k) { *p = (unsigned short)(0xFFF0 - k); }
static void setv(int *p, int k) { *p = (k & 1) ? -(0x7f000000 + k) : 0x7f000000 + k; }
static void setv(long long *p, int k) { *p = -(0x0123456789abcdefLL + k); }
static void setv(float *p, int k) { *p = (k & 1 ? -1.0f : 1.0f) * (k + 0.375f); }
static void setv(double *p, int k) { *p = (k & 1 ? -1e300 : 1e-300) * (k + 1); }
static void setv(const int **p, int k) { *p = (const int *)(size_t)(0x00007f0012345000ULL + 16 * k); }
static void setv(void **p, int k) { *p = (void *)(size_t)(0x00007f00abcd0000ULL + 8 * k); }
static void setv(Pad *p, int k)
{
	memset(p, 0, sizeof *p);
	p->c = (char)('A' + k);
	p->d = 1.0 / (k + 3);
	p->s = (short)(0x7000 + k);
}
static void setv(Odd *p, int k)
{
	memset(p, 0, sizeof *p);
	p->a = (short)(-k - 1);
	p->b = (char)(0x40 + k);
}
static void setv(Big *p, int k)
{
	for (int i = 0; i < 256; i++)
		p->w[i] = (unsigned)i * 2654435761u ^ (unsigned)k;
}
static void setv(float4 *p, int k) { *p = make_float4(k + 0.5f, -k - 0.25f, 1e30f, -0.0f); }
static void setv(double2 *p, int k) { *p = make_double2(k * 1e-10, -3.0e200); }

/* ---- the kernels: parameter lists written once ---- */
#define MIXED(X)                                                                           \
	X(char, c) X(short, s) X(int, i) X(long long, ll) X(float, f) X(double, d) X(Pad, pad) \
	X(const int *, ptr) X(unsigned char, uc) X(Odd, odd)
#define BIG(X) X(char, tag) X(Big, big) X(short, tail)
#define VEC(X) X(char, c) X(float4, v) X(char, c2) X(double2, dd) X(unsigned short, us)
#define MANY(X)                                                                                    \
	X(int, a0) X(double, a1) X(char, a2) X(float, a3) X(short, a4) X(long long, a5)                \
	X(unsigned char, a6) X(double, a7) X(int, a8) X(char, a9) X(double, a10) X(int, a11)           \
	X(float, a12) X(char, a13) X(short, a14) X(int, a15) X(long long, a16) X(char, a17)            \
	X(int, a18) X(double, a19) X(float, a20) X(short, a21) X(char, a22) X(int, a23) X(void *, a24) \
	X(int, a25) X(char, a26) X(double, a27) X(int, a28) X(float, a29) X(short, a30) X(char, a31)

#define KPARAM(t, n) , t n
#define KECHO(t, n) k = echo(out, k, n);
#define FIELD(t, n) t n;
#define SET(t, n) setv(&P->n, idx++);
#define HECHO(t, n) k = echo(out, k, P->n);
#define ADDR(t, n) (void *)&P->n,
#define COUNT(t, n) +1

/* One family: kernel, mirror struct, value setter, host echo, args array. */
#define FAMILY(name, LIST)                                                           \
	extern "C" __global__ void name(u64 *out LIST(KPARAM))                            \
	{                                                                                \
		if (threadIdx.x | threadIdx.y | threadIdx.z | blockIdx.x | blockIdx.y | blockIdx.z) \
			return;                                                                  \
		int k = 0;                                                                   \
		LIST(KECHO)                                                                  \
		out[63] = k;                                                                 \
	}                                                                                \
	struct name##_params {                                                           \
		u64 *out;                                                                    \
		LIST(FIELD)                                                                  \
	};                                                                               \
	static void name##_set(name##_params *P, u64 *o)                                 \
	{                                                                                \
		memset(P, 0, sizeof *P);                                                     \
		P->out = o;                                                                  \
		int idx = 0;                                                                 \
		LIST(SET)                                                                    \
		(void)idx;                                                                   \
	}                                                                                \
	static int name##_echo(const name##_params *P, u64 *out)                         \
	{                                                                                \
		int k = 0;                                                                   \
		LIST(HECHO)                                                                  \
		out[63] = k;                                                                 \
		return k;                                                                    \
	}                                                                                \
	static void name##_args(name##_params *P, void **a)                              \
	{                                                                                \
		void *v[] = {(void *)&P->out, LIST(ADDR)};                                   \
		memcpy(a, v, sizeof v);                                                      \
	}                                                                                \
	enum { name##_nparams = 1 LIST(COUNT) };

FAMILY(rgtest_args_mixed, MIXED)
FAMILY(rgtest_args_big, BIG)
FAMILY(rgtest_args_vec, VEC)
FAMILY(rgtest_args_many, MANY)

extern "C" __global__ void rgtest_args_none(void) {}

/* Offsets and sizes of each parameter, from the mirror struct. */
#define OFFS(t, n) offsetof(P, n),
#define SIZES(t, n) sizeof(t),
#define LAYOUT(name, LIST)                                                           \
	static void name##_layout(size_t *off, size_t *sz, size_t *end)                  \
	{                                                                                \
		typedef name##_params P;                                                     \
		size_t o[] = {offsetof(P, out), LIST(OFFS)};                                 \
		size_t s[] = {sizeof(u64 *), LIST(SIZES)};                                   \
		memcpy(off, o, sizeof o);                                                    \
		memcpy(sz, s, sizeof s);                                                     \
		*end = o[name##_nparams - 1] + s[name##_nparams - 1];                        \
	}
LAYOUT(rgtest_args_mixed, MIXED)
LAYOUT(rgtest_args_big, BIG)
LAYOUT(rgtest_args_vec, VEC)
LAYOUT(rgtest_args_many, MANY)

/* ---- checks ---- */
static u64 *d_out;

typedef int (*param_info_fn)(void *f, size_t i, size_t *off, size_t *sz);

/* Local GPU only: the mirror's layout equals what the driver says. */
static void check_layout_with_driver(const char *name, const void *kernel, int n, const size_t *off,
                                     const size_t *sz)
{
	if (rg_fake() || rg_remote())
		return;
	static param_info_fn info;
	static int tried;
	if (!tried) {
		tried = 1;
		void *lib = dlopen("libcuda.so.1", RTLD_NOW);
		if (lib)
			info = (param_info_fn)dlsym(lib, "cuFuncGetParamInfo");
		if (!info)
			fprintf(stderr, "args: cuFuncGetParamInfo not available, layout not checked\n");
	}
	if (!info)
		return;
	cudaFunction_t f;
	CK(cudaGetFuncBySymbol(&f, kernel));
	for (int i = 0; i < n; i++) {
		size_t o = 0, s = 0;
		int r = info((void *)f, i, &o, &s);
		if (r != 0 || o != off[i] || s != sz[i]) {
			fprintf(stderr, "%s param %d: driver says offset %zu size %zu (r=%d), mirror %zu %zu\n", name, i,
			        o, s, r, off[i], sz[i]);
			rg_failures++;
		}
	}
	size_t o, s;
	if (info((void *)f, n, &o, &s) == 0) {
		fprintf(stderr, "%s: driver reports more than %d params\n", name, n);
		rg_failures++;
	}
}

static void verify(const char *name, const char *how, const void *P, size_t end, int nparams,
                   const u64 *want, dim3 g, dim3 b, size_t shmem)
{
	printf("%s %s: %d params, %zu bytes\n", name, how, nparams, end);
	if (rg_fake()) {
		char *hex = (char *)malloc(2 * end + 1);
		rg_hex(hex, P, end);
		printf("expect launch %s grid=%u,%u,%u block=%u,%u,%u shmem=%zu params=%s\n", name, g.x, g.y, g.z, b.x,
		       b.y, b.z, shmem, hex);
		free(hex);
		return;
	}
	u64 got[64];
	CK(cudaMemcpy(got, d_out, sizeof got, cudaMemcpyDeviceToHost));
	int nv = (int)want[63];
	if (got[63] != want[63] || memcmp(got, want, nv * sizeof(u64)) != 0) {
		for (int i = 0; i < nv; i++)
			if (got[i] != want[i])
				fprintf(stderr, "%s %s: echo %d: got %016llx want %016llx\n", name, how, i, got[i], want[i]);
		printf("  echo: MISMATCH\n");
		rg_failures++;
		return;
	}
	printf("  echo: ok (%d values)\n", nv);
}

#define RUN_FAMILY(name, g_, b_, shmem_, strm_)                                            \
	do {                                                                                 \
		name##_params P;                                                                 \
		u64 want[64] = {0};                                                              \
		void *args[name##_nparams];                                                      \
		size_t off[name##_nparams], sz[name##_nparams], end;                             \
		name##_layout(off, sz, &end);                                                    \
		check_layout_with_driver(#name, (const void *)name, name##_nparams, off, sz);    \
		name##_set(&P, d_out);                                                           \
		name##_echo(&P, want);                                                           \
		name##_args(&P, args);                                                           \
		/* <<<>>> */                                                                     \
		CK(cudaMemset(d_out, 0, 64 * sizeof(u64)));                                      \
		launch_chevron_##name(&P, g_, b_, shmem_, strm_);                                  \
		CK(cudaGetLastError());                                                          \
		CK(cudaDeviceSynchronize());                                                     \
		verify(#name, "<<<>>>", &P, end, name##_nparams, want, g_, b_, shmem_);             \
		/* cudaLaunchKernel */                                                           \
		CK(cudaMemset(d_out, 0, 64 * sizeof(u64)));                                      \
		CK(cudaLaunchKernel((const void *)name, g_, b_, args, shmem_, strm_));             \
		CK(cudaDeviceSynchronize());                                                     \
		verify(#name, "cudaLaunchKernel", &P, end, name##_nparams, want, g_, b_, shmem_);   \
		/* cudaLaunchKernelExC, other geometry */                                        \
		cudaLaunchConfig_t cfg = {};                                                     \
		cfg.gridDim = dim3(1, 2, 3);                                                     \
		cfg.blockDim = dim3(32, 1, 1);                                                   \
		cfg.dynamicSmemBytes = 0;                                                        \
		cfg.stream = strm_;                                                             \
		CK(cudaMemset(d_out, 0, 64 * sizeof(u64)));                                      \
		CK(cudaLaunchKernelExC(&cfg, (const void *)name, args));                         \
		CK(cudaDeviceSynchronize());                                                     \
		verify(#name, "cudaLaunchKernelExC", &P, end, name##_nparams, want, cfg.gridDim, \
		       cfg.blockDim, 0);                                                         \
	} while (0)

#define PASS(t, n) , P->n
#define CHEVRON(name, LIST)                                                                      \
	static void launch_chevron_##name(name##_params *P, dim3 g, dim3 b, size_t shmem, cudaStream_t s) \
	{                                                                                            \
		name<<<g, b, shmem, s>>>(P->out LIST(PASS));                                             \
	}
CHEVRON(rgtest_args_mixed, MIXED)
CHEVRON(rgtest_args_big, BIG)
CHEVRON(rgtest_args_vec, VEC)
CHEVRON(rgtest_args_many, MANY)

int main(void)
{
	CK(cudaSetDevice(0));
	CK(cudaMalloc(&d_out, 64 * sizeof(u64)));
	cudaStream_t s;
	CK(cudaStreamCreate(&s));

	RUN_FAMILY(rgtest_args_mixed, dim3(2, 3, 1), dim3(4, 5, 6), 128, s);
	RUN_FAMILY(rgtest_args_big, dim3(1, 1, 1), dim3(1, 1, 1), 0, 0);
	RUN_FAMILY(rgtest_args_vec, dim3(7, 1, 1), dim3(64, 2, 1), 4096, s);
	RUN_FAMILY(rgtest_args_many, dim3(1, 1, 1), dim3(33, 1, 1), 0, 0);

	/* no parameters at all */
	rgtest_args_none<<<1, 1>>>();
	CK(cudaGetLastError());
	CK(cudaLaunchKernel((const void *)rgtest_args_none, dim3(3, 1, 1), dim3(1, 1, 1), NULL, 0, 0));
	CK(cudaDeviceSynchronize());
	printf("rgtest_args_none: 0 params\n");
	if (rg_fake()) {
		printf("expect launch rgtest_args_none grid=1,1,1 block=1,1,1 shmem=0 params=\n");
		printf("expect launch rgtest_args_none grid=3,1,1 block=1,1,1 shmem=0 params=\n");
	}

	CK(cudaStreamDestroy(s));
	CK(cudaFree(d_out));
	return rg_finish("args");
}
