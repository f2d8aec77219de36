/*
 * elf.c: what module.c needs from a cubin beyond rg_cubin's kernel list: the image
 * size of a bare cubin handed over without one, its target architecture, its global
 * variables (.nv.global*, .nv.constant* object symbols, with their sizes and initial
 * bytes) and the size of a named section (a kernel's static shared memory is the size
 * of .nv.shared.<kernel>).
 *
 * Every offset and size read from the image is checked against the image size, and
 * headers are copied out with memcpy, since an image handed to cuModuleLoadData need
 * not be aligned.
 */
#include "fake.h"

#include <elf.h>
#include <string.h>

#define FK_ELF_MAX (1ull << 32) /* larger "cubins" are refused as corrupt */

typedef struct elf_view {
	const uint8_t *b;
	size_t size;
	Elf64_Ehdr eh;
	size_t shstr_off, shstr_size;
} elf_view;

static int in_bounds(size_t size, uint64_t off, uint64_t len)
{
	return off <= size && len <= size - off;
}

static int elf_open(elf_view *e, const void *image, size_t size)
{
	e->b = image;
	e->size = size;
	if (size < sizeof e->eh)
		return -1;
	memcpy(&e->eh, image, sizeof e->eh);
	if (memcmp(e->eh.e_ident, ELFMAG, SELFMAG) || e->eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    e->eh.e_ident[EI_DATA] != ELFDATA2LSB || e->eh.e_shentsize != sizeof(Elf64_Shdr) ||
	    !in_bounds(size, e->eh.e_shoff, (uint64_t)e->eh.e_shnum * sizeof(Elf64_Shdr)) ||
	    e->eh.e_shstrndx >= e->eh.e_shnum)
		return -1;

	Elf64_Shdr s;
	memcpy(&s, e->b + e->eh.e_shoff + (size_t)e->eh.e_shstrndx * sizeof s, sizeof s);
	if (s.sh_type == SHT_NOBITS || !in_bounds(size, s.sh_offset, s.sh_size))
		return -1;
	e->shstr_off = s.sh_offset;
	e->shstr_size = s.sh_size;
	return 0;
}

static void shdr(const elf_view *e, unsigned i, Elf64_Shdr *s)
{
	memcpy(s, e->b + e->eh.e_shoff + (size_t)i * sizeof *s, sizeof *s);
}

/* A NUL-terminated string at off inside the table [toff, toff + tsize), or NULL. */
static const char *str_at(const elf_view *e, size_t toff, size_t tsize, uint64_t off)
{
	if (off >= tsize)
		return NULL;
	const char *s = (const char *)e->b + toff + off;
	return memchr(s, 0, tsize - off) ? s : NULL;
}

static const char *sec_name(const elf_view *e, const Elf64_Shdr *s)
{
	return str_at(e, e->shstr_off, e->shstr_size, s->sh_name);
}

int fk_elf_size(const void *image, size_t avail, size_t *size)
{
	/* The caller may trust the pointer but have no size (avail SIZE_MAX): read the
	 * headers in order, each only once the ones before it say it lies inside the
	 * image, and inside avail. */
	const uint8_t *b = image;
	Elf64_Ehdr eh;
	uint64_t end;

	if (avail < sizeof eh)
		return -1;
	memcpy(&eh, b, sizeof eh);
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_shentsize != sizeof(Elf64_Shdr) ||
	    (eh.e_phnum && eh.e_phentsize != sizeof(Elf64_Phdr)))
		return -1;
	if (eh.e_shoff > FK_ELF_MAX || eh.e_phoff > FK_ELF_MAX ||
	    !in_bounds(avail, eh.e_shoff, (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr)) ||
	    !in_bounds(avail, eh.e_phoff, (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr)))
		return -1;
	end = sizeof eh;
	if (eh.e_shoff + (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr) > end)
		end = eh.e_shoff + (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr);
	if (eh.e_phoff + (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr) > end)
		end = eh.e_phoff + (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr);
	for (unsigned i = 0; i < eh.e_shnum; i++) {
		Elf64_Shdr s;
		memcpy(&s, b + eh.e_shoff + (size_t)i * sizeof s, sizeof s);
		if (s.sh_type == SHT_NOBITS)
			continue;
		if (s.sh_offset > FK_ELF_MAX || s.sh_size > FK_ELF_MAX)
			return -1;
		if (s.sh_offset + s.sh_size > end)
			end = s.sh_offset + s.sh_size;
	}
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr p;
		memcpy(&p, b + eh.e_phoff + (size_t)i * sizeof p, sizeof p);
		if (p.p_offset > FK_ELF_MAX || p.p_filesz > FK_ELF_MAX)
			return -1;
		if (p.p_offset + p.p_filesz > end)
			end = p.p_offset + p.p_filesz;
	}
	if (end > FK_ELF_MAX || end > avail)
		return -1;
	*size = (size_t)end;
	return 0;
}

int fk_elf_arch(const void *elf, size_t size, uint32_t *arch)
{
	elf_view e;
	if (elf_open(&e, elf, size) != 0)
		return -1;
	/* CUDA ELF ABI version 8 and later keep sm_XX in bits 8..15 of e_flags,
	 * earlier versions in bits 0..7. */
	if (e.eh.e_ident[EI_ABIVERSION] >= 8)
		*arch = (e.eh.e_flags >> 8) & 0xFF;
	else
		*arch = e.eh.e_flags & 0xFF;
	return 0;
}

int fk_elf_each_global(const void *elf, size_t size, fk_elf_sym_fn fn, void *arg)
{
	elf_view e;
	Elf64_Shdr symtab, strtab;
	unsigned i;

	if (elf_open(&e, elf, size) != 0)
		return -1;
	for (i = 0; i < e.eh.e_shnum; i++) {
		shdr(&e, i, &symtab);
		if (symtab.sh_type == SHT_SYMTAB)
			break;
	}
	if (i == e.eh.e_shnum)
		return 0; /* no symbols, no globals */
	if (symtab.sh_entsize != sizeof(Elf64_Sym) || symtab.sh_link >= e.eh.e_shnum ||
	    !in_bounds(size, symtab.sh_offset, symtab.sh_size))
		return -1;
	shdr(&e, symtab.sh_link, &strtab);
	if (strtab.sh_type == SHT_NOBITS || !in_bounds(size, strtab.sh_offset, strtab.sh_size))
		return -1;

	for (uint64_t k = 0; k < symtab.sh_size / sizeof(Elf64_Sym); k++) {
		Elf64_Sym sym;
		Elf64_Shdr sec;
		const char *name, *sname;

		memcpy(&sym, e.b + symtab.sh_offset + k * sizeof sym, sizeof sym);
		if (ELF64_ST_TYPE(sym.st_info) != STT_OBJECT || sym.st_size == 0 ||
		    sym.st_shndx == SHN_UNDEF || sym.st_shndx >= e.eh.e_shnum)
			continue;
		shdr(&e, sym.st_shndx, &sec);
		sname = sec_name(&e, &sec);
		if (!sname || (strncmp(sname, ".nv.global", 10) && strncmp(sname, ".nv.constant", 12)))
			continue;
		name = str_at(&e, strtab.sh_offset, strtab.sh_size, sym.st_name);
		if (!name || !*name)
			return -1;
		/* In a relocatable cubin st_value is the offset inside the section. */
		if (sym.st_value > sec.sh_size || sym.st_size > sec.sh_size - sym.st_value)
			return -1;
		const uint8_t *init = NULL;
		if (sec.sh_type != SHT_NOBITS) {
			if (!in_bounds(size, sec.sh_offset, sec.sh_size))
				return -1;
			init = e.b + sec.sh_offset + sym.st_value;
		}
		int rc = fn(arg, name, init, sym.st_size);
		if (rc != 0)
			return rc;
	}
	return 0;
}

int fk_elf_section_size(const void *elf, size_t size, const char *name, size_t *out)
{
	elf_view e;
	if (elf_open(&e, elf, size) != 0)
		return -1;
	for (unsigned i = 0; i < e.eh.e_shnum; i++) {
		Elf64_Shdr s;
		shdr(&e, i, &s);
		const char *n = sec_name(&e, &s);
		if (n && strcmp(n, name) == 0) {
			*out = s.sh_size;
			return 0;
		}
	}
	return -1;
}
