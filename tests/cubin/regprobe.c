/*
 * Registration probe, LD_PRELOADed into a program built with nvcc -cudart shared:
 * stands in for the frontend's __cudaRegisterFatBinary and records what a
 * frontend would hash. For each registration it appends to $RG_REGPROBE_OUT
 *     fatbin <hash> <size> <wrapper version>
 *     function <fatbin hash> <device name>
 * where size is cubin_fatbin_size(wrapper->data, SIZE_MAX) - the frontend's
 * trusted-pointer call - and hash is cubin_hash over those bytes. The test then
 * checks that remote-cubin extract stored exactly these bytes under that hash.
 * Built as a shared library linking the static rg_cubin: also proves it is PIC.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cubin.h"

typedef struct wrapper {
	int magic;
	int version;
	const void *data;
	void *filename_or_fatbins;
} wrapper;

/* One handle per registration; the handle stores the fatbin's hash. */
typedef struct handle {
	void *slot[8];
	char hash[CUBIN_HASH_HEX];
} handle;

static void emit(const char *line)
{
	const char *path = getenv("RG_REGPROBE_OUT");
	FILE *f = path ? fopen(path, "a") : NULL;
	fputs(line, f ? f : stderr);
	if (f)
		fclose(f);
}

void **__cudaRegisterFatBinary(void *w)
{
	const wrapper *wr = w;
	handle *h = calloc(1, sizeof(*h));
	char line[256];
	size_t size = 0;
	int rc;

	if (!h)
		abort();
	if ((unsigned)wr->magic != CUBIN_FATBIN_WRAPPER_MAGIC) {
		snprintf(line, sizeof(line), "error wrapper magic %#x\n", (unsigned)wr->magic);
		emit(line);
		return h->slot;
	}
	rc = cubin_fatbin_size(wr->data, SIZE_MAX, &size);
	if (rc != CUBIN_OK) {
		snprintf(line, sizeof(line), "error %s\n", cubin_strerror(rc));
		emit(line);
		return h->slot;
	}
	cubin_hash(wr->data, size, h->hash);
	snprintf(line, sizeof(line), "fatbin %s %zu %d\n", h->hash, size, wr->version);
	emit(line);
	return h->slot;
}

void __cudaRegisterFatBinaryEnd(void **h)
{
	(void)h;
}

void __cudaUnregisterFatBinary(void **h)
{
	free(h);
}

void __cudaRegisterFunction(void **h, const char *hostFun, char *deviceFun, const char *deviceName,
			    int threadLimit, void *tid, void *bid, void *bDim, void *gDim, int *wSize)
{
	char line[1024];
	snprintf(line, sizeof(line), "function %s %s\n", ((handle *)h)->hash, deviceName);
	emit(line);
}

void __cudaRegisterVar(void **h, char *hostVar, char *deviceAddress, const char *deviceName, int ext,
		       size_t size, int constant, int global)
{
}
