/*
 * Stream-ordered operations on this program's pinned or registered host memory.
 *
 * A local GPU reaches every pinned allocation at its host address (unified
 * addressing), so memsets on it are legal and a copy may name it as its device
 * side, and programs do both: XLA zeroes small pinned buffers with
 * cuMemsetD32Async and reads 8-byte results out of them with
 * cuMemcpyDtoHAsync. Here that memory lives on the client, so the fill or the
 * copy runs here, in the stream's order: a host function on the stream (the
 * server calls it back once the work before it is done, rt_stream.c). The
 * synchronous variants are fully synchronous for pinned memory (CUDA's API
 * synchronisation rules), so they wait for it.
 *
 * While such an operation is pending, a copy that reads pinned memory to send
 * it (rt_copy.c) first waits for its stream: it would read the bytes before
 * the operation wrote them (fe_host_pending).
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

static _Atomic unsigned pending; /* host functions launched here, not yet run */

int fe_host_pending(void) { return atomic_load(&pending) != 0; }

typedef struct fill {
	uint8_t *p;
	size_t pitch, width, height; /* width in elements */
	uint32_t value, elem;
} fill;

static void fill_run(void *arg)
{
	fill *f = arg;
	for (size_t y = 0; y < f->height; y++) {
		uint8_t *row = f->p + y * f->pitch;
		if (f->elem == 1) {
			memset(row, (int)(uint8_t)f->value, f->width);
			continue;
		}
		for (size_t x = 0; x < f->width; x++)
			memcpy(row + x * f->elem, &f->value, f->elem); /* little-endian: the low bytes */
	}
	free(f);
	atomic_fetch_sub(&pending, 1);
}

int fe_host_pinned(const void *p, size_t len)
{
	fe_range r;
	return fe_mem_find((uintptr_t)p, len, &r) == 0 &&
	       (r.kind == FE_MEM_HOST_PINNED || r.kind == FE_MEM_HOST_REGISTERED);
}

/* Runs fn(arg) on the stream (arg is fn's to free); sync: waits for it. */
static cudaError_t enqueue(cudaStream_t stream, cudaHostFn_t fn, void *arg, int sync)
{
	atomic_fetch_add(&pending, 1);
	cudaError_t e = cudaLaunchHostFunc(stream, fn, arg);
	if (e != cudaSuccess) {
		atomic_fetch_sub(&pending, 1);
		free(arg);
		return e;
	}
	return sync ? cudaStreamSynchronize(stream) : cudaSuccess;
}

cudaError_t fe_host_memset(void *p, size_t pitch, uint32_t value, uint32_t elem, size_t width, size_t height,
			   cudaStream_t stream, int sync)
{
	fill *f = malloc(sizeof(*f));
	if (!f)
		return cudaErrorMemoryAllocation;
	*f = (fill){.p = p, .pitch = pitch, .width = width, .height = height, .value = value, .elem = elem};
	return enqueue(stream, fill_run, f, sync);
}

typedef struct move {
	void *dst;
	const void *src;
	size_t n;
} move;

static void move_run(void *arg)
{
	move *m = arg;
	memmove(m->dst, m->src, m->n);
	free(m);
	atomic_fetch_sub(&pending, 1);
}

cudaError_t fe_host_copy(void *dst, const void *src, size_t n, cudaStream_t stream, int sync)
{
	move *m = malloc(sizeof(*m));
	if (!m)
		return cudaErrorMemoryAllocation;
	*m = (move){.dst = dst, .src = src, .n = n};
	return enqueue(stream, move_run, m, sync);
}
