/*
 * A minimal ELF64 little-endian reader over an untrusted buffer: the header, the
 * section header table and section names. Used for host executables and shared
 * libraries (to find .nv_fatbin) and for cubins (.nv.info, the symbol table).
 *
 * Nothing is trusted: every table, name and section range is checked against the
 * buffer before a pointer into it is formed. Extended section numbering
 * (e_shnum == 0, e_shstrndx == SHN_XINDEX) is resolved from section 0, as the ELF
 * specification says, since linkers produce it for objects with many sections.
 */
#include <string.h>

#include "cubin_int.h"

static int check_ranges(const cubin_elf *e);

#define EHDR_SIZE 64
#define SHDR_MIN 64
#define PHDR_MIN 56
#define SHN_XINDEX 0xffff
#define SHT_NOBITS 8

int cubin__elf_open(cubin_elf *e, const void *data, size_t size)
{
	const uint8_t *b = data;
	cubin_shdr s0, str;
	uint32_t shstrndx;
	int rc;

	memset(e, 0, sizeof(*e));
	if (!b || size < 4 || memcmp(b, "\x7f" "ELF", 4) != 0)
		return CUBIN_EFORMAT;
	if (size < EHDR_SIZE)
		return CUBIN_ETRUNC;
	if (b[4] != 2 /* ELFCLASS64 */ || b[5] != 1 /* little-endian */)
		return CUBIN_EFORMAT;
	e->base = b;
	e->size = size;
	e->abiversion = b[8];
	e->machine = cubin__le16(b + 18);
	e->eflags = cubin__le32(b + 48);
	e->shoff = cubin__le64(b + 40);
	e->shentsize = cubin__le16(b + 58);
	e->shnum = cubin__le16(b + 60);
	shstrndx = cubin__le16(b + 62);
	if (e->shoff == 0)
		return CUBIN_ENOTFOUND; /* no section headers (stripped to segments) */
	if (e->shentsize < SHDR_MIN)
		return CUBIN_EFORMAT;
	/* Section 0 must be readable before extended numbering can be resolved. */
	if (!cubin__in_range(e->shoff, e->shentsize, size))
		return CUBIN_ETRUNC;
	e->shnum = e->shnum ? e->shnum : 1; /* read s0 first */
	if ((rc = cubin__elf_shdr(e, 0, &s0)) != CUBIN_OK)
		return rc;
	if (cubin__le16(b + 60) == 0) {
		if (s0.size == 0 || s0.size > UINT32_MAX)
			return CUBIN_EFORMAT;
		e->shnum = (uint32_t)s0.size;
	}
	if (shstrndx == SHN_XINDEX)
		shstrndx = s0.link;
	if ((uint64_t)e->shnum * e->shentsize > size - e->shoff)
		return CUBIN_ETRUNC;
	if (shstrndx == 0 || shstrndx >= e->shnum)
		return CUBIN_EFORMAT;
	if ((rc = cubin__elf_shdr(e, shstrndx, &str)) != CUBIN_OK)
		return rc;
	if ((rc = cubin__elf_data(e, &str, &e->shstr, &e->shstr_size)) != CUBIN_OK)
		return rc;
	return check_ranges(e);
}

/* Every section and every segment must lie inside the file. Only the sections
 * we read need it for safety; checking all of them up front is what makes a
 * truncated file an error rather than a file that lists fewer kernels. */
static int check_ranges(const cubin_elf *e)
{
	const uint8_t *b = e->base;
	uint64_t phoff = cubin__le64(b + 32);
	uint32_t phentsize = cubin__le16(b + 54), phnum = cubin__le16(b + 56);

	for (uint32_t i = 1; i < e->shnum; i++) {
		cubin_shdr sh;
		int rc = cubin__elf_shdr(e, i, &sh);
		if (rc != CUBIN_OK)
			return rc;
		if (sh.type != SHT_NOBITS && !cubin__in_range(sh.offset, sh.size, e->size))
			return CUBIN_ETRUNC;
	}
	if (phoff == 0 || phnum == 0)
		return CUBIN_OK;
	if (phentsize < PHDR_MIN || phnum == 0xffff /* PN_XNUM: not used by our inputs */)
		return CUBIN_EFORMAT;
	if (!cubin__in_range(phoff, (uint64_t)phnum * phentsize, e->size))
		return CUBIN_ETRUNC;
	for (uint32_t i = 0; i < phnum; i++) {
		const uint8_t *ph = b + phoff + (uint64_t)i * phentsize;
		if (!cubin__in_range(cubin__le64(ph + 8), cubin__le64(ph + 32), e->size))
			return CUBIN_ETRUNC;
	}
	return CUBIN_OK;
}

int cubin__elf_shdr(const cubin_elf *e, uint32_t i, cubin_shdr *out)
{
	const uint8_t *p;
	uint64_t off;

	if (i >= e->shnum)
		return CUBIN_EFORMAT;
	off = e->shoff + (uint64_t)i * e->shentsize; /* table checked in open */
	if (!cubin__in_range(off, SHDR_MIN, e->size))
		return CUBIN_ETRUNC;
	p = e->base + off;
	out->name = cubin__le32(p);
	out->type = cubin__le32(p + 4);
	out->flags = cubin__le64(p + 8);
	out->offset = cubin__le64(p + 24);
	out->size = cubin__le64(p + 32);
	out->link = cubin__le32(p + 40);
	out->info = cubin__le32(p + 44);
	out->entsize = cubin__le64(p + 56);
	return CUBIN_OK;
}

int cubin__elf_data(const cubin_elf *e, const cubin_shdr *sh, const uint8_t **p, size_t *n)
{
	if (sh->type == SHT_NOBITS) {
		*p = e->base;
		*n = 0;
		return CUBIN_OK;
	}
	if (!cubin__in_range(sh->offset, sh->size, e->size))
		return CUBIN_ETRUNC;
	*p = e->base + sh->offset;
	*n = (size_t)sh->size;
	return CUBIN_OK;
}

const char *cubin__strtab_at(const uint8_t *tab, size_t n, uint64_t off)
{
	if (!tab || off >= n || !memchr(tab + off, '\0', n - off))
		return NULL;
	return (const char *)tab + off;
}

const char *cubin__elf_name(const cubin_elf *e, const cubin_shdr *sh)
{
	const char *s = cubin__strtab_at(e->shstr, e->shstr_size, sh->name);
	return s ? s : "";
}

int cubin__elf_find(const cubin_elf *e, const char *name, cubin_shdr *out, uint32_t *index)
{
	for (uint32_t i = 1; i < e->shnum; i++) {
		cubin_shdr sh;
		int rc = cubin__elf_shdr(e, i, &sh);
		if (rc != CUBIN_OK)
			return rc;
		if (strcmp(cubin__elf_name(e, &sh), name) == 0) {
			*out = sh;
			if (index)
				*index = i;
			return CUBIN_OK;
		}
	}
	return CUBIN_ENOTFOUND;
}

uint32_t cubin__elf_arch(const cubin_elf *e)
{
	/* Cubins of ABI version 8 and later (CUDA 12.8+) keep sm_XX in bits 8..15
	 * of e_flags (0x6005a04 for sm_90, 0x6006402 for sm_100); older ones in
	 * bits 0..7. */
	if (e->machine != CUBIN_EM_CUDA)
		return 0;
	return e->abiversion >= 8 ? (e->eflags >> 8) & 0xff : e->eflags & 0xff;
}
