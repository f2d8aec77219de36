/*
 * cubin-tools: reads the kernel images that nvcc embeds in programs and libraries,
 * with no GPU and no cuobjdump.
 *
 *   ELF (.nv_fatbin section) -> fatbins (what __cudaRegisterFatBinary receives)
 *   fatbin -> entries (cubin per sm_XX, PTX), possibly compressed
 *   cubin (ELF) -> kernels and their parameter layouts from .nv.info.<kernel>
 *
 * Used by remote-cubin (the store builder), by the frontend (hash and size of a
 * registered fatbin) and by the driver test double (parameter layouts).
 * All parsers bound-check every offset: input may be hostile.
 */
#ifndef CUBIN_H
#define CUBIN_H

#include <stddef.h>
#include <stdint.h>

enum cubin_err {
	CUBIN_OK = 0,
	CUBIN_EFORMAT = -1,   /* not the expected format / bad magic */
	CUBIN_ETRUNC = -2,    /* offsets or sizes run past the end */
	CUBIN_ECOMPRESS = -3, /* compressed entry could not be decoded */
	CUBIN_ENOMEM = -4,
	CUBIN_EIO = -5,
	CUBIN_ENOTFOUND = -6,
	CUBIN_ESTOREFMT = -7, /* a store of another format (older XXH3-128 addresses) */
};
const char *cubin_strerror(int err);

#define CUBIN_FATBIN_MAGIC 0xBA55ED50u
/* The wrapper nvcc passes to __cudaRegisterFatBinary. */
#define CUBIN_FATBIN_WRAPPER_MAGIC 0x466243B1u

typedef struct cubin_param {
	uint32_t ordinal, offset, size;
} cubin_param;

typedef struct cubin_kernel {
	char *name;
	uint32_t nparams;
	cubin_param *params; /* sorted by ordinal */
} cubin_kernel;

typedef struct cubin_kernels {
	cubin_kernel *k;
	uint32_t n;
} cubin_kernels;

/* Kernels of one cubin (an ELF relocatable for sm_XX). */
int cubin_elf_kernels(const void *elf, size_t size, cubin_kernels *out);
void cubin_kernels_free(cubin_kernels *ks);

enum cubin_entry_kind { CUBIN_ENTRY_PTX = 1, CUBIN_ENTRY_ELF = 2 };

typedef struct cubin_entry {
	int kind;
	uint32_t arch;     /* e.g. 90 for sm_90 */
	const uint8_t *data; /* decompressed bytes: points into the fatbin or into owned */
	size_t size;
	uint8_t *owned;    /* non-NULL when decompressed */
	int compressed;    /* was compressed in the fatbin */
} cubin_entry;

typedef struct cubin_fatbin {
	cubin_entry *e;
	uint32_t n;
} cubin_fatbin;

/* Size of the fatbin at data (header + body) from its header; avail bounds the read
 * (SIZE_MAX when the caller trusts the pointer, as the frontend does). */
int cubin_fatbin_size(const void *data, size_t avail, size_t *size);
int cubin_fatbin_parse(const void *data, size_t size, cubin_fatbin *out);
void cubin_fatbin_free(cubin_fatbin *fb);

/* The fatbins of an ELF file's .nv_fatbin section, in the order the program
 * registers them. Calls fn for each (data points into the mapped file). */
typedef int (*cubin_fatbin_fn)(void *ctx, const void *fatbin, size_t size);
int cubin_elf_each_fatbin(const void *elf, size_t size, cubin_fatbin_fn fn, void *ctx);

/* Content hash that identifies a fatbin everywhere (frontend, store, backend):
 * SHA-256 of its bytes, as CUBIN_HASH_LEN lowercase hex digits (a C string). */
#define CUBIN_HASH_LEN 64
#define CUBIN_HASH_HEX (CUBIN_HASH_LEN + 1)
void cubin_hash(const void *data, size_t size, char out[CUBIN_HASH_HEX]);
/* 1 when s[0..len) is a hash as cubin_hash writes it (length and digits). */
int cubin_hash_valid(const char *s, size_t len);

#endif
