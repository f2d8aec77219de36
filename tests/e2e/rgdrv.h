/*
 * rgdrv.h: what the driver API test programs (tests/e2e/drv_*.cu, CUDA C++)
 * share: the checks, the mode the program runs in, its summary, and the small
 * helpers of its copies.
 *
 * A program runs in three modes: on a GPU directly; through libremote.so as
 * libcuda.so.1 (REMOTE_GPU set) against a GPU; the same against the driver test
 * double (also RGTEST_FAKE=1). Its stdout must not depend on the mode: the GPU
 * suite (tests/gpu/run.sh) wants the remote run's stdout byte for byte as the
 * local one's, and the local one's, less the "expect " lines, as
 * tests/e2e/expected/NAME.out, which CI compares with the run on the fake. So:
 *   - a check that passes prints "PASS label" and nothing of what it got: where
 *     the right answer depends on the mode, the expectation does, not the line;
 *   - a check that runs in some modes only stands inside ONLY(cond) and prints
 *     nothing when it passes;
 *   - a check that fails prints "FAIL label: got X, want Y" (or what it saw) to
 *     stdout and makes the exit status 1;
 *   - CK(call) for a call that must succeed: if it does not, FAIL and exit 1.
 * Print no addresses, pitches, timings or values that differ between GPUs.
 */
#ifndef RGDRV_H
#define RGDRV_H

#include <elf.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

static int remote; /* through libremote.so: REMOTE_GPU set */
static int fake;   /* the server runs on the driver test double: RGTEST_FAKE=1 */
static int rg_fails;
static int rg_quiet; /* inside ONLY(): a passing check prints nothing */

/* Line-buffered stdout, so a crash still shows how far the program got; the mode. */
__attribute__((constructor)) static void rg_drv_init(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	const char *r = getenv("REMOTE_GPU"), *f = getenv("RGTEST_FAKE");
	remote = r && *r;
	fake = f && *f && strcmp(f, "0") != 0;
}

static inline const char *en(CUresult r)
{
	const char *s = NULL;
	cuGetErrorName(r, &s);
	return s ? s : "CUDA_ERROR_?";
}

/* A call's result. */
static inline void expect(const char *label, CUresult got, CUresult want)
{
	if (got != want) {
		printf("FAIL %s: got %s (%d), want %s\n", label, en(got), (int)got, en(want));
		rg_fails++;
	} else if (!rg_quiet) {
		printf("PASS %s\n", label);
	}
}

/* A condition; on failure the detail (printf style) says what was seen. */
static inline void check(const char *label, int ok, const char *fmt = "", ...)
{
	if (ok) {
		if (!rg_quiet)
			printf("PASS %s\n", label);
		return;
	}
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	printf("FAIL %s%s%s\n", label, *buf ? ": " : "", buf);
	rg_fails++;
}

#define CK(call)                                                                                                       \
	do {                                                                                                           \
		CUresult ck_ = (call);                                                                                 \
		if (ck_ != CUDA_SUCCESS) {                                                                             \
			printf("FAIL %s:%d: %s -> %s\n", __FILE__, __LINE__, #call, en(ck_));                          \
			exit(1);                                                                                       \
		}                                                                                                      \
	} while (0)

/*
 * ONLY(cond) statement: the statement (a check, or a block of them) runs where
 * cond holds, e.g. ONLY(remote), ONLY(!fake), and its checks print nothing when
 * they pass, so the other modes print the same lines.
 */
struct rg_quiet_scope {
	int once;
	rg_quiet_scope() : once(1) { rg_quiet++; }
	~rg_quiet_scope() { rg_quiet--; }
};
#define ONLY(cond)                                                                                                     \
	if (!(cond)) {                                                                                                 \
	} else                                                                                                         \
		for (rg_quiet_scope rg_q_; rg_q_.once; rg_q_.once = 0)

/* The driver started, device 0's primary context retained and current. */
static inline CUcontext rg_start(CUdevice *dev)
{
	CUcontext c;
	CK(cuInit(0));
	CK(cuDeviceGet(dev, 0));
	CK(cuDevicePrimaryCtxRetain(&c, *dev));
	CK(cuCtxSetCurrent(c));
	return c;
}

/* The last line, the same in every mode; the exit status. */
static inline int rg_finish(const char *prog)
{
	if (rg_fails)
		printf("FAIL %s: %d checks failed\n", prog, rg_fails);
	else
		printf("PASS %s\n", prog);
	return rg_fails ? 1 : 0;
}

/* ---- data */

/* Bytes that differ from their neighbours and from another seed's. */
static inline void fill(unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(i * 131u + seed * 7u + (i >> 9) + 1);
}

/* Index of the first difference, or -1. */
static inline long diff(const void *a, const void *b, size_t n)
{
	const unsigned char *x = (const unsigned char *)a, *y = (const unsigned char *)b;
	for (size_t i = 0; i < n; i++)
		if (x[i] != y[i])
			return (long)i;
	return -1;
}

static inline void check_bytes(const char *label, const void *got, const void *want, size_t n)
{
	long d = diff(got, want, n);
	check(label, d < 0, "first difference at byte %ld of %zu", d, n);
}

/* ---- 2D and 3D copies */

/* One side of a copy: its memory, the pitch and the rows of a slice there, the box's corner in it. */
struct rg_side {
	CUmemorytype type;
	const void *host;
	CUdeviceptr dev;
	CUarray array;
	size_t pitch, height, x, y, z;
};

static inline rg_side rg_side_of(CUmemorytype type, const void *host, CUdeviceptr dev, CUarray array, size_t pitch,
				 size_t height)
{
	rg_side s;
	memset(&s, 0, sizeof(s));
	s.type = type;
	s.host = host;
	s.dev = dev;
	s.array = array;
	s.pitch = pitch;
	s.height = height;
	return s;
}

static inline rg_side on_host(const void *p, size_t pitch, size_t height = 0)
{
	return rg_side_of(CU_MEMORYTYPE_HOST, p, 0, NULL, pitch, height);
}

static inline rg_side on_device(CUdeviceptr d, size_t pitch, size_t height = 0)
{
	return rg_side_of(CU_MEMORYTYPE_DEVICE, NULL, d, NULL, pitch, height);
}

static inline rg_side on_unified(CUdeviceptr p, size_t pitch, size_t height = 0)
{
	return rg_side_of(CU_MEMORYTYPE_UNIFIED, NULL, p, NULL, pitch, height);
}

static inline rg_side on_array(CUarray a)
{
	return rg_side_of(CU_MEMORYTYPE_ARRAY, NULL, 0, a, 0, 0);
}

/* The box's corner: x in bytes, y in rows, z in slices. */
static inline rg_side at(rg_side s, size_t x, size_t y = 0, size_t z = 0)
{
	s.x = x;
	s.y = y;
	s.z = z;
	return s;
}

/* The fields 2D and 3D copies share; everything else 0. */
template <typename M> static inline M rg_copy(rg_side src, rg_side dst, size_t width, size_t height)
{
	M m;
	memset(&m, 0, sizeof(m));
	m.srcMemoryType = src.type;
	m.srcHost = src.host;
	m.srcDevice = src.dev;
	m.srcArray = src.array;
	m.srcPitch = src.pitch;
	m.srcXInBytes = src.x;
	m.srcY = src.y;
	m.dstMemoryType = dst.type;
	m.dstHost = (void *)dst.host;
	m.dstDevice = dst.dev;
	m.dstArray = dst.array;
	m.dstPitch = dst.pitch;
	m.dstXInBytes = dst.x;
	m.dstY = dst.y;
	m.WidthInBytes = width;
	m.Height = height;
	return m;
}

static inline CUDA_MEMCPY2D copy2d(rg_side src, rg_side dst, size_t width, size_t height)
{
	return rg_copy<CUDA_MEMCPY2D>(src, dst, width, height);
}

static inline CUDA_MEMCPY3D copy3d(rg_side src, rg_side dst, size_t width, size_t height, size_t depth)
{
	CUDA_MEMCPY3D m = rg_copy<CUDA_MEMCPY3D>(src, dst, width, height);
	m.srcHeight = src.height;
	m.srcZ = src.z;
	m.dstHeight = dst.height;
	m.dstZ = dst.z;
	m.Depth = depth;
	return m;
}

/* This program's .nv_fatbin section (the fatbins of its objects, the static
 * runtime's among them: each a 16-byte header and its body, 8-byte aligned),
 * read from /proc/self/exe and kept for the program's life. */
static inline const char *rg_fatbin_section(size_t *len)
{
	FILE *f = fopen("/proc/self/exe", "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *buf = (char *)malloc((size_t)n);
	if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
		fclose(f);
		free(buf);
		return NULL;
	}
	fclose(f);
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)buf;
	const Elf64_Shdr *sh = (const Elf64_Shdr *)(buf + eh->e_shoff);
	const char *names = buf + sh[eh->e_shstrndx].sh_offset;
	for (int i = 0; i < eh->e_shnum; i++)
		if (strcmp(names + sh[i].sh_name, ".nv_fatbin") == 0) {
			*len = sh[i].sh_size;
			return buf + sh[i].sh_offset;
		}
	free(buf);
	return NULL;
}

/* The fatbin of this program that holds kernel `name` (the first that loads
 * and has it), and its size; NULL if none. */
static inline const void *rg_own_fatbin(const char *name, size_t *size)
{
	size_t len = 0, off = 0;
	const char *sec = rg_fatbin_section(&len);
	while (sec && off + 16 <= len) {
		uint32_t magic;
		uint16_t hsize;
		uint64_t body;
		memcpy(&magic, sec + off, 4);
		memcpy(&hsize, sec + off + 6, 2);
		memcpy(&body, sec + off + 8, 8);
		if (magic != 0xBA55ED50u) {
			off += 8;
			continue;
		}
		CUmodule m;
		CUfunction f;
		if (cuModuleLoadData(&m, sec + off) == CUDA_SUCCESS) {
			int has = cuModuleGetFunction(&f, m, name) == CUDA_SUCCESS;
			cuModuleUnload(m);
			if (has) {
				*size = hsize + body;
				return sec + off;
			}
		}
		off = (off + hsize + body + 7) & ~(size_t)7;
	}
	return NULL;
}

#endif
