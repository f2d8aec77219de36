/*
 * How a program reaches CUDA, read from its ELF file, for remote-gpu doctor:
 *
 * - no PT_INTERP: a static executable, which no dynamic linker starts, so
 *   LD_PRELOAD does nothing at all;
 * - set-user-ID or set-group-ID: the dynamic linker runs it in secure mode
 *   and ignores LD_PRELOAD (and LD_LIBRARY_PATH);
 * - DT_NEEDED libcudart.so.*: the shared runtime, whose functions the
 *   preloaded libremote.so defines first;
 * - DT_NEEDED libcuda.so.*: the driver, found in the driver folder that
 *   remote-gpu run puts on LD_LIBRARY_PATH;
 * - the string "libcuda.so.1" in the file and neither library needed: nvcc's
 *   default static runtime (or a program that opens the driver itself). Its
 *   runtime calls never reach the preload, but it opens libcuda.so.1 with
 *   dlopen, which libremote.so answers: the driver API path works.
 */
#include "launcher.h"

#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static int find_on_path(const char *cmd, char *out, size_t cap)
{
	if (strchr(cmd, '/')) {
		snprintf(out, cap, "%s", cmd);
		return access(out, F_OK);
	}
	const char *path = getenv("PATH");
	char buf[4096];
	snprintf(buf, sizeof(buf), "%s", path && *path ? path : "/usr/local/bin:/usr/bin:/bin");
	char *save = NULL;
	for (char *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		snprintf(out, cap, "%s/%s", *d ? d : ".", cmd);
		if (access(out, X_OK) == 0)
			return 0;
	}
	return -1;
}

/* "#!/usr/bin/env python3 -u" gives python3, "#!/bin/sh" gives /bin/sh. */
static void script_interp(const char *line, char *out, size_t cap)
{
	char buf[256], *save = NULL;
	snprintf(buf, sizeof(buf), "%s", line + 2);
	buf[strcspn(buf, "\n")] = 0;
	char *w = strtok_r(buf, " \t", &save);
	if (w && !strcmp(strrchr(w, '/') ? strrchr(w, '/') + 1 : w, "env"))
		w = strtok_r(NULL, " \t", &save);
	snprintf(out, cap, "%s", w ? w : "");
}

/* The file offset of virtual address va, from the PT_LOAD headers. */
static long va_offset(const Elf64_Phdr *ph, int n, uint64_t va)
{
	for (int i = 0; i < n; i++)
		if (ph[i].p_type == PT_LOAD && va >= ph[i].p_vaddr && va < ph[i].p_vaddr + ph[i].p_filesz)
			return (long)(va - ph[i].p_vaddr + ph[i].p_offset);
	return -1;
}

static int elf_inspect(const uint8_t *f, size_t size)
{
	const Elf64_Ehdr *eh = (const void *)f;
	if (size < sizeof(*eh) || eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_phoff > size ||
	    (size - eh->e_phoff) / sizeof(Elf64_Phdr) < eh->e_phnum)
		return LN_ELF_NO_CUDA; /* 32-bit or truncated: nothing to say */
	const Elf64_Phdr *ph = (const void *)(f + eh->e_phoff);
	const Elf64_Phdr *dyn = NULL;
	int interp = 0;
	for (int i = 0; i < eh->e_phnum; i++) {
		interp |= ph[i].p_type == PT_INTERP;
		if (ph[i].p_type == PT_DYNAMIC)
			dyn = &ph[i];
	}
	if (!interp) /* static, static-pie too: nothing loads a preload into it */
		return LN_ELF_STATIC;
	int cudart = 0, driver = 0;
	if (dyn && dyn->p_offset < size && dyn->p_filesz <= size - dyn->p_offset) {
		const Elf64_Dyn *d = (const void *)(f + dyn->p_offset);
		size_t nd = dyn->p_filesz / sizeof(*d);
		long strtab = -1;
		for (size_t i = 0; i < nd && d[i].d_tag != DT_NULL; i++)
			if (d[i].d_tag == DT_STRTAB)
				strtab = va_offset(ph, eh->e_phnum, d[i].d_un.d_ptr);
		for (size_t i = 0; strtab >= 0 && i < nd && d[i].d_tag != DT_NULL; i++) {
			if (d[i].d_tag != DT_NEEDED || (size_t)strtab + d[i].d_un.d_val >= size)
				continue;
			const char *name = (const char *)f + strtab + d[i].d_un.d_val;
			size_t room = size - (size_t)strtab - d[i].d_un.d_val;
			if (!strncmp(name, "libcudart.so", room < 12 ? room : 12))
				cudart = 1;
			else if (!strncmp(name, "libcuda.so", room < 10 ? room : 10))
				driver = 1;
		}
	}
	if (cudart)
		return LN_ELF_CUDART_SHARED;
	if (driver)
		return LN_ELF_CUDA_DRIVER;
	if (memmem(f, size, "libcuda.so.1", 12))
		return LN_ELF_CUDART_STATIC;
	return LN_ELF_NO_CUDA;
}

void ln_elf_check(const char *cmd, ln_elf *e)
{
	struct stat st;
	memset(e, 0, sizeof(*e));
	if (find_on_path(cmd, e->path, sizeof(e->path)) != 0 || stat(e->path, &st) != 0) {
		e->kind = LN_ELF_NOT_FOUND;
		return;
	}
	if (st.st_mode & (S_ISUID | S_ISGID)) {
		e->kind = LN_ELF_SETID;
		return;
	}
	int fd = open(e->path, O_RDONLY | O_CLOEXEC);
	void *m = fd >= 0 && st.st_size > 0 ? mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
	if (fd >= 0)
		close(fd);
	if (m == MAP_FAILED) {
		e->kind = LN_ELF_NOT_ELF;
		return;
	}
	const uint8_t *f = m;
	size_t size = (size_t)st.st_size;
	if (size >= 4 && !memcmp(f, ELFMAG, SELFMAG)) {
		e->kind = elf_inspect(f, size);
	} else {
		e->kind = LN_ELF_NOT_ELF;
		if (size > 2 && f[0] == '#' && f[1] == '!') {
			char line[256];
			size_t n = size < sizeof(line) - 1 ? size : sizeof(line) - 1;
			memcpy(line, f, n);
			line[n] = 0;
			script_interp(line, e->interp, sizeof(e->interp));
		}
	}
	munmap(m, size);
}
