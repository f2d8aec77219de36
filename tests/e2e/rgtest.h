/*
 * rgtest.h: host-side helpers shared by the end-to-end test programs.
 *
 * Every program in tests/e2e is a plain CUDA C program built with
 * `nvcc -cudart shared`: it runs unchanged on a GPU (directly) and through
 * libremote.so (LD_PRELOAD) against remote-gpud, on a real GPU or on the
 * driver test double. Its stdout must be deterministic: the CI harness diffs
 * it against tests/e2e/expected/<name>.out and the GPU suite diffs the remote
 * run against the local one. So print no addresses, timings or pitches; print
 * checksums of data and the names of error codes.
 *
 * Environment the programs read:
 *   RGTEST_FAKE=1  the backend runs on the driver test double (tests/fakecuda),
 *                  which only emulates the rgtest_* kernels of rgtest_kernels.cuh
 *                  and logs every other launch. Programs skip device-side checks
 *                  of other kernels and print "expect launch ..." lines instead,
 *                  which the harness compares with the fake's launch log.
 *   REMOTE_GPU     set when running through libremote.so; used only where the
 *                  remote path is specified to differ from a local GPU (IPC).
 */
#ifndef RGTEST_H
#define RGTEST_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

/* Any CUDA call that must succeed: on failure print where and what, exit 1. */
#define CK(call)                                                                    \
	do {                                                                            \
		cudaError_t ck_e_ = (call);                                                 \
		if (ck_e_ != cudaSuccess) {                                                 \
			fprintf(stderr, "%s:%d: %s -> %s (%d)\n", __FILE__, __LINE__, #call,    \
			        cudaGetErrorName(ck_e_), (int)ck_e_);                           \
			fflush(stdout);                                                         \
			exit(1);                                                                \
		}                                                                           \
	} while (0)

/* A condition that must hold. */
#define REQUIRE(cond, ...)                                                          \
	do {                                                                            \
		if (!(cond)) {                                                              \
			fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                                           \
			fprintf(stderr, "\n");                                                  \
			fflush(stdout);                                                         \
			exit(1);                                                                \
		}                                                                           \
	} while (0)

static int rg_failures;

/* Line-buffered stdout: a program that crashes still shows how far it got. */
__attribute__((constructor)) static void rg_stdio_init(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
}

/*
 * A call with a known expected result (often an error). Prints
 * "<label>: <name>" so the expected file records the value, and counts a
 * mismatch as a failure (the program exits nonzero at the end).
 */
static inline void rg_expect(const char *label, cudaError_t got, cudaError_t want)
{
	printf("%s: %s\n", label, cudaGetErrorName(got));
	if (got != want) {
		fprintf(stderr, "MISMATCH %s: got %s (%d), want %s (%d)\n", label,
		        cudaGetErrorName(got), (int)got, cudaGetErrorName(want), (int)want);
		rg_failures++;
	}
}
#define EXPECT_ERR(label, call, want) rg_expect((label), (call), (want))

static inline int rg_finish(const char *prog)
{
	fflush(stdout);
	if (rg_failures) {
		fprintf(stderr, "%s: %d check(s) FAILED\n", prog, rg_failures);
		return 1;
	}
	printf("%s: done\n", prog);
	return 0;
}

static inline int rg_fake(void)
{
	const char *s = getenv("RGTEST_FAKE");
	return s && *s && strcmp(s, "0") != 0;
}

static inline int rg_remote(void)
{
	const char *s = getenv("REMOTE_GPU");
	return s && *s;
}

/* The bits of a float, for rgtest_fill_u32. */
static inline unsigned rg_f2u(float f)
{
	unsigned u;
	memcpy(&u, &f, 4);
	return u;
}

/* Whether every one of n floats at (host) p equals want; if not, prints
 * "<label>: MISMATCH" (the element on stderr) and counts a failure. */
static inline int rg_all_f32(const char *label, const float *p, size_t n, float want)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != want) {
			fprintf(stderr, "%s: element %zu = %g, want %g\n", label, i, p[i], want);
			printf("%s: MISMATCH\n", label);
			rg_failures++;
			return 0;
		}
	return 1;
}

/* The same, with "<label>: ok (<want>)" when they do. */
static inline void rg_check_f32(const char *label, const float *p, size_t n, float want)
{
	if (rg_all_f32(label, p, n, want))
		printf("%s: ok (%g)\n", label, want);
}

/* Deterministic data: xorshift64*, fixed seeds. */
static inline uint64_t rg_rand(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1DULL;
}

static inline void rg_pattern(void *p, size_t n, uint64_t seed)
{
	uint64_t s = seed * 0x9E3779B97F4A7C15ULL + 1;
	unsigned char *b = (unsigned char *)p;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t v = rg_rand(&s);
		memcpy(b + i, &v, 8);
	}
	if (i < n) {
		uint64_t v = rg_rand(&s);
		memcpy(b + i, &v, n - i);
	}
}

/* FNV-1a 64 over bytes: the checksum programs print. */
static inline uint64_t rg_fnv(const void *p, size_t n)
{
	const unsigned char *b = (const unsigned char *)p;
	uint64_t h = 0xcbf29ce484222325ULL;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* got equals want: "<label>: ok fnv=<checksum>", else the first differing byte
 * (stderr), "<label>: MISMATCH" and a failure. */
static inline void rg_check_bytes(const char *label, const void *got, const void *want, size_t n)
{
	if (n && memcmp(got, want, n) != 0) {
		const unsigned char *g = (const unsigned char *)got, *w = (const unsigned char *)want;
		size_t i = 0;
		while (g[i] == w[i])
			i++;
		fprintf(stderr, "%s: byte %zu differs: got %02x want %02x\n", label, i, g[i], w[i]);
		rg_failures++;
		printf("%s: MISMATCH\n", label);
		return;
	}
	printf("%s: ok fnv=%016llx\n", label, (unsigned long long)rg_fnv(want, n));
}

/* Lower-case hex of n bytes into out (2n+1 chars). */
static inline void rg_hex(char *out, const void *p, size_t n)
{
	static const char dig[] = "0123456789abcdef";
	const unsigned char *b = (const unsigned char *)p;
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = dig[b[i] >> 4];
		out[2 * i + 1] = dig[b[i] & 15];
	}
	out[2 * n] = 0;
}

#endif
