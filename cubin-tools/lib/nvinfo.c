/*
 * Kernels of a cubin and their parameter layouts, from the .nv.info.<kernel>
 * sections that ptxas writes for every entry function.
 *
 * A kernel is a symbol of type STT_FUNC whose st_other carries STO_CUDA_ENTRY
 * (0x10); __cudaRegisterFunction and cuModuleGetFunction use that (mangled) name.
 * Its attributes live in the section ".nv.info.<name>", whose sh_info is the
 * index of the kernel's .text.<name> section (the section the symbol is defined
 * in), so the two are joined through that index, not by comparing names.
 *
 * An .nv.info section is a sequence of attributes, each
 *     u8 format, u8 attribute, then
 *     EIFMT_NVAL (1), EIFMT_BVAL (2), EIFMT_HVAL (3): a 2-byte value;
 *     EIFMT_SVAL (4): u16 length, then that many bytes.
 * Parameters come from
 *     EIATTR_KPARAM_INFO (0x17), 12 bytes: u32 index, u16 ordinal, u16 offset,
 *         u32 word with the size in bits 18..31 (bits 0..17 hold alignment,
 *         address space and constant bank: not needed to pack arguments);
 *     EIATTR_KPARAM_INFO_V2 (0x45), 12 bytes: u32 index, u16 ordinal,
 *         u16 offset, u32 word with the size in bits 0..15 (bits 24..31 hold
 *         the address space, 5 for pointers on sm_100+; a parameter cannot
 *         reach past the 64 KiB that the u16 offset spans, so 16 bits of size
 *         are all there can be); ptxas switches to it when the parameters of a
 *         kernel total more than 4 KiB (the 14-bit size cannot hold 32 KiB).
 * ptxas lists them last ordinal first; we sort by ordinal.
 * The evidence for all of this is in README.md.
 */
#include <stdlib.h>
#include <string.h>

#include "cubin_int.h"

#define SHT_SYMTAB 2
#define SHT_CUDA_INFO 0x70000000u
#define STT_FUNC 2
#define STO_CUDA_ENTRY 0x10
#define SYM_SIZE 24

#define EIFMT_NVAL 1
#define EIFMT_BVAL 2
#define EIFMT_HVAL 3
#define EIFMT_SVAL 4
#define EIATTR_KPARAM_INFO 0x17
#define EIATTR_KPARAM_INFO_V2 0x45

static const char info_prefix[] = ".nv.info.";

static int parse_params(const uint8_t *p, size_t n, cubin_kernel *k);
static int cmp_param(const void *a, const void *b);
static int find_info_by_name(const cubin_elf *e, const char *name, cubin_shdr *out);

/* Parses one .nv.info.<kernel> section into k->params. */
static int parse_params(const uint8_t *p, size_t n, cubin_kernel *k)
{
	size_t i = 0, cap = 0;

	while (i < n) {
		uint8_t fmt, attr;
		size_t len;
		const uint8_t *v;

		if (n - i < 4)
			return CUBIN_ETRUNC;
		fmt = p[i];
		attr = p[i + 1];
		if (fmt == EIFMT_NVAL || fmt == EIFMT_BVAL || fmt == EIFMT_HVAL) {
			i += 4;
			continue;
		}
		if (fmt != EIFMT_SVAL)
			return CUBIN_EFORMAT;
		len = cubin__le16(p + i + 2);
		if (len > n - i - 4)
			return CUBIN_ETRUNC;
		v = p + i + 4;
		i += 4 + len;
		if (attr != EIATTR_KPARAM_INFO && attr != EIATTR_KPARAM_INFO_V2)
			continue;
		if (len < 12)
			return CUBIN_EFORMAT;
		if (k->nparams == cap) {
			size_t ncap = cap ? cap * 2 : 8;
			cubin_param *np = realloc(k->params, ncap * sizeof(*np));
			if (!np)
				return CUBIN_ENOMEM;
			k->params = np;
			cap = ncap;
		}
		cubin_param *pa = &k->params[k->nparams++];
		pa->ordinal = cubin__le16(v + 4);
		pa->offset = cubin__le16(v + 6);
		pa->size = attr == EIATTR_KPARAM_INFO ? cubin__le32(v + 8) >> 18 : cubin__le32(v + 8) & 0xffff;
	}
	if (k->nparams > 1) {
		qsort(k->params, k->nparams, sizeof(*k->params), cmp_param);
		for (uint32_t j = 1; j < k->nparams; j++)
			if (k->params[j].ordinal == k->params[j - 1].ordinal)
				return CUBIN_EFORMAT; /* two layouts for one parameter */
	}
	return CUBIN_OK;
}

static int cmp_param(const void *a, const void *b)
{
	const cubin_param *x = a, *y = b;
	return (x->ordinal > y->ordinal) - (x->ordinal < y->ordinal);
}

/* Fallback when sh_info does not lead to the section: search by name. */
static int find_info_by_name(const cubin_elf *e, const char *name, cubin_shdr *out)
{
	for (uint32_t i = 1; i < e->shnum; i++) {
		cubin_shdr sh;
		const char *sn;
		if (cubin__elf_shdr(e, i, &sh) != CUBIN_OK)
			return CUBIN_ETRUNC;
		sn = cubin__elf_name(e, &sh);
		if (strncmp(sn, info_prefix, sizeof(info_prefix) - 1) == 0 &&
		    strcmp(sn + sizeof(info_prefix) - 1, name) == 0) {
			*out = sh;
			return CUBIN_OK;
		}
	}
	return CUBIN_ENOTFOUND;
}

int cubin_elf_kernels(const void *elf, size_t size, cubin_kernels *out)
{
	cubin_elf e;
	cubin_shdr symtab, strtab;
	const uint8_t *syms, *strs;
	size_t nsyms_bytes, nstrs;
	uint32_t *info_of_text = NULL; /* text section index -> .nv.info.X index */
	int rc;

	if (!out)
		return CUBIN_EFORMAT;
	memset(out, 0, sizeof(*out));
	if ((rc = cubin__elf_open(&e, elf, size)) != CUBIN_OK)
		return rc;
	if (e.machine != CUBIN_EM_CUDA)
		return CUBIN_EFORMAT;

	/* The symbol table and its string table. */
	uint32_t i;
	for (i = 1; i < e.shnum; i++) {
		if ((rc = cubin__elf_shdr(&e, i, &symtab)) != CUBIN_OK)
			return rc;
		if (symtab.type == SHT_SYMTAB)
			break;
	}
	if (i == e.shnum)
		return CUBIN_OK; /* no symbols: no kernels */
	if ((rc = cubin__elf_data(&e, &symtab, &syms, &nsyms_bytes)) != CUBIN_OK)
		return rc;
	if ((rc = cubin__elf_shdr(&e, symtab.link, &strtab)) != CUBIN_OK)
		return rc;
	if ((rc = cubin__elf_data(&e, &strtab, &strs, &nstrs)) != CUBIN_OK)
		return rc;

	info_of_text = calloc(e.shnum, sizeof(*info_of_text));
	if (!info_of_text)
		return CUBIN_ENOMEM;
	for (i = 1; i < e.shnum; i++) {
		cubin_shdr sh;
		if ((rc = cubin__elf_shdr(&e, i, &sh)) != CUBIN_OK)
			goto fail;
		if (sh.type == SHT_CUDA_INFO && sh.info < e.shnum &&
		    strncmp(cubin__elf_name(&e, &sh), info_prefix, sizeof(info_prefix) - 1) == 0)
			info_of_text[sh.info] = i;
	}

	size_t cap = 0;
	for (size_t off = SYM_SIZE; nsyms_bytes >= SYM_SIZE && off <= nsyms_bytes - SYM_SIZE; off += SYM_SIZE) {
		const uint8_t *s = syms + off;
		uint8_t st_info = s[4], st_other = s[5];
		uint16_t shndx = cubin__le16(s + 6);
		const char *name;
		cubin_shdr info;
		const uint8_t *ip;
		size_t in;

		if ((st_info & 0xf) != STT_FUNC || !(st_other & STO_CUDA_ENTRY))
			continue;
		name = cubin__strtab_at(strs, nstrs, cubin__le32(s));
		if (!name || !*name) {
			rc = CUBIN_EFORMAT;
			goto fail;
		}
		if (out->n == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			cubin_kernel *nk = realloc(out->k, ncap * sizeof(*nk));
			if (!nk) {
				rc = CUBIN_ENOMEM;
				goto fail;
			}
			out->k = nk;
			cap = ncap;
		}
		cubin_kernel *k = &out->k[out->n];
		memset(k, 0, sizeof(*k));
		if (!(k->name = strdup(name))) {
			rc = CUBIN_ENOMEM;
			goto fail;
		}
		out->n++;

		/* Join through sh_info; confirm by name, which costs one compare. */
		rc = CUBIN_ENOTFOUND;
		if (shndx < e.shnum && info_of_text[shndx] &&
		    cubin__elf_shdr(&e, info_of_text[shndx], &info) == CUBIN_OK &&
		    strcmp(cubin__elf_name(&e, &info) + sizeof(info_prefix) - 1, name) == 0)
			rc = CUBIN_OK;
		if (rc != CUBIN_OK)
			rc = find_info_by_name(&e, name, &info);
		if (rc == CUBIN_ENOTFOUND)
			continue; /* a kernel without attributes takes no parameters */
		if (rc != CUBIN_OK)
			goto fail;
		if ((rc = cubin__elf_data(&e, &info, &ip, &in)) != CUBIN_OK)
			goto fail;
		if ((rc = parse_params(ip, in, k)) != CUBIN_OK)
			goto fail;
	}
	free(info_of_text);
	return CUBIN_OK;
fail:
	free(info_of_text);
	cubin_kernels_free(out);
	return rc;
}

void cubin_kernels_free(cubin_kernels *ks)
{
	if (!ks)
		return;
	for (uint32_t i = 0; i < ks->n; i++) {
		free(ks->k[i].name);
		free(ks->k[i].params);
	}
	free(ks->k);
	ks->k = NULL;
	ks->n = 0;
}
