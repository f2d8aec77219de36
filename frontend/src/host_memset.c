/*
 * Memsets whose target is this program's pinned or registered host memory.
 *
 * A local GPU reaches every pinned allocation at its host address (unified
 * addressing), so cudaMemset and cuMemsetD* on pinned memory are legal, and
 * programs use them: XLA zeroes small pinned buffers with cuMemsetD32Async.
 * Here that memory lives on the client, so the fill runs here, in the
 * stream's order: a host function on the stream (the server calls it back
 * once the work before it is done, rt_stream.c). The synchronous variants
 * are fully synchronous for pinned memory (CUDA's API synchronisation
 * rules), so they wait for it.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

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
}

int fe_host_memset_target(const void *p, size_t len)
{
	fe_range r;
	return fe_mem_find((uintptr_t)p, len, &r) == 0 &&
	       (r.kind == FE_MEM_HOST_PINNED || r.kind == FE_MEM_HOST_REGISTERED);
}

cudaError_t fe_host_memset(void *p, size_t pitch, uint32_t value, uint32_t elem, size_t width, size_t height,
			   cudaStream_t stream, int sync)
{
	fill *f = malloc(sizeof(*f));
	if (!f)
		return cudaErrorMemoryAllocation;
	*f = (fill){.p = p, .pitch = pitch, .width = width, .height = height, .value = value, .elem = elem};
	cudaError_t e = cudaLaunchHostFunc(stream, fill_run, f);
	if (e != cudaSuccess) {
		free(f);
		return e;
	}
	return sync ? cudaStreamSynchronize(stream) : cudaSuccess;
}
