/*
 * Internals shared by the files of rg_cubin (and by remote-cubin, which is part of
 * the same component). Not an interface for other components: use cubin.h.
 *
 * Everything here reads untrusted bytes. The rule of the library is that a pointer
 * into the input is only formed after the range it covers has been checked against
 * the input's size, with the check written so that it cannot overflow
 * (`len > size - off` after `off <= size`, never `off + len > size`).
 */
#ifndef CUBIN_INT_H
#define CUBIN_INT_H

#include <stddef.h>
#include <stdint.h>

#include "cubin.h"

/* Little-endian loads that need no alignment. Both formats are little-endian
 * whatever the host is. */
static inline uint16_t cubin__le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t cubin__le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t cubin__le64(const uint8_t *p)
{
	return (uint64_t)cubin__le32(p) | (uint64_t)cubin__le32(p + 4) << 32;
}

/* 1 when [off, off + len) lies inside a buffer of `size` bytes. */
static inline int cubin__in_range(uint64_t off, uint64_t len, uint64_t size)
{
	return off <= size && len <= size - off;
}

/* ---- ELF64 reader (elf.c) ---------------------------------------------------- */

#define CUBIN_EM_CUDA 190 /* e_machine of a cubin */

typedef struct cubin_shdr {
	uint32_t name; /* offset into the section-name table */
	uint32_t type;
	uint64_t flags;
	uint64_t offset;
	uint64_t size;
	uint32_t link;
	uint32_t info;
	uint64_t entsize;
} cubin_shdr;

typedef struct cubin_elf {
	const uint8_t *base;
	size_t size;
	uint16_t machine;
	uint8_t abiversion;
	uint32_t eflags;
	uint64_t shoff;
	uint32_t shnum;     /* after extended numbering is resolved */
	uint32_t shentsize;
	const uint8_t *shstr; /* section-name table, bounds-checked */
	size_t shstr_size;
} cubin_elf;

/* Validates the ELF64 little-endian header and the section header table. */
int cubin__elf_open(cubin_elf *e, const void *data, size_t size);
/* Section i's header; CUBIN_ETRUNC/EFORMAT when i is out of range. */
int cubin__elf_shdr(const cubin_elf *e, uint32_t i, cubin_shdr *out);
/* Section contents, bounds-checked (SHT_NOBITS gives an empty range). */
int cubin__elf_data(const cubin_elf *e, const cubin_shdr *sh, const uint8_t **p, size_t *n);
/* Section name as a NUL-terminated string inside the file ("" when invalid). */
const char *cubin__elf_name(const cubin_elf *e, const cubin_shdr *sh);
/* First section with this name; CUBIN_ENOTFOUND when absent. */
int cubin__elf_find(const cubin_elf *e, const char *name, cubin_shdr *out, uint32_t *index);
/* NUL-terminated string at off in a string table of n bytes, or NULL. */
const char *cubin__strtab_at(const uint8_t *tab, size_t n, uint64_t off);
/* The sm_XX number a cubin was built for, from e_flags (0 when unknown). */
uint32_t cubin__elf_arch(const cubin_elf *e);

/* ---- fatbin entries (fatbin.c) ----------------------------------------------- */

/* Offsets inside one entry header, as observed (README.md, "Fatbin"). */
#define CUBIN_FE_KIND 0x00       /* u16: 1 PTX, 2 ELF */
#define CUBIN_FE_HDRSIZE 0x04    /* u32: 64, 80, 88, 96, 104, 112 seen */
#define CUBIN_FE_PAYLOAD 0x08    /* u64: payload bytes after the header (8-aligned) */
#define CUBIN_FE_CSIZE 0x10      /* u32: compressed bytes at the payload start */
#define CUBIN_FE_VERSION 0x18    /* u16 minor, u16 major */
#define CUBIN_FE_ARCH 0x1c       /* u32: 90 for sm_90 */
#define CUBIN_FE_FLAGS 0x28      /* u64 */
#define CUBIN_FE_USIZE 0x38      /* u64: size after decompression */
#define CUBIN_FE_MINHDR 0x40

#define CUBIN_FF_LZ4 0x2000ull  /* payload is one raw LZ4 block */
#define CUBIN_FF_ZSTD 0x8000ull /* payload is one zstd frame */

/* No entry of a real fatbin comes near this; a header that claims more is hostile. */
#define CUBIN_MAX_UNCOMPRESSED ((uint64_t)1 << 30)

/* One entry as it lies in the fatbin, before decompression. */
typedef struct cubin_rawentry {
	uint16_t kind;
	uint32_t arch;
	uint64_t flags;
	uint64_t offset;        /* of the entry header, from the fatbin start */
	const uint8_t *payload; /* compressed bytes when compressed */
	size_t payload_size;
	uint64_t usize;         /* uncompressed size (payload_size when plain) */
} cubin_rawentry;

typedef int (*cubin_rawentry_fn)(void *ctx, const cubin_rawentry *re);
/* Walks the entry headers of one fatbin, checking every range, decompressing
 * nothing. size must be at least cubin_fatbin_size(). */
int cubin__fatbin_walk(const void *data, size_t size, cubin_rawentry_fn fn, void *ctx);

/* Calls fn for each fatbin lying back to back in buf (a .nv_fatbin section or a
 * .fatbin file); see section.c for the padding rule. */
int cubin__fatbins_in(const uint8_t *buf, size_t n, cubin_fatbin_fn fn, void *ctx);

/* ---- decompression (decompress.c) -------------------------------------------- */

/* Decodes exactly usize bytes into a new buffer (*out, owned by the caller). */
int cubin__decompress(uint64_t flags, const uint8_t *src, size_t n, uint64_t usize, uint8_t **out);

#endif
