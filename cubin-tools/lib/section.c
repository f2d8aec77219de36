/*
 * Splitting .nv_fatbin into the fatbins a program registers.
 *
 * nvcc's host stub for each translation unit (and for the device-link unit)
 * emits its fatbin into .nv_fatbin as ".align 8; fatbinData: .quad ...", and a
 * wrapper {0x466243B1, version, &fatbinData, ...} into .nvFatBinSegment. The
 * linker concatenates the input sections in link order, which is also the order
 * of the constructors that call __cudaRegisterFatBinary. So the section is a run
 * of fatbins, each starting 8-aligned (relative to the section, which is itself
 * 8-aligned) and zero-padded up to the next one. Every fatbin nvcc 13 writes is a
 * multiple of 8 bytes, so in practice they touch; the rule still skips zero words
 * between them, and anything else between them is an error.
 */
#include <string.h>

#include "cubin_int.h"

static const char zero8[8];

int cubin__fatbins_in(const uint8_t *buf, size_t n, cubin_fatbin_fn fn, void *ctx)
{
	size_t off = 0;
	int rc;

	for (;;) {
		size_t fsize;

		/* Skip the zero padding that may precede the next fatbin. */
		while (n - off >= 8 && memcmp(buf + off, zero8, 8) == 0)
			off += 8;
		if (off == n)
			return CUBIN_OK;
		if (n - off < 8 && memcmp(buf + off, zero8, n - off) == 0)
			return CUBIN_OK;
		if ((rc = cubin_fatbin_size(buf + off, n - off, &fsize)) != CUBIN_OK)
			return rc;
		if ((rc = fn(ctx, buf + off, fsize)) != CUBIN_OK)
			return rc;
		off += fsize;
		off += (8 - off % 8) % 8; /* off <= n here; may pass n only if n % 8 */
		if (off > n)
			off = n;
	}
}

int cubin_elf_each_fatbin(const void *elf, size_t size, cubin_fatbin_fn fn, void *ctx)
{
	cubin_elf e;
	cubin_shdr sh;
	const uint8_t *p;
	size_t n;
	int rc;

	if (!fn)
		return CUBIN_EFORMAT;
	if ((rc = cubin__elf_open(&e, elf, size)) != CUBIN_OK)
		return rc;
	if ((rc = cubin__elf_find(&e, ".nv_fatbin", &sh, NULL)) != CUBIN_OK)
		return rc;
	if (sh.type == 8 /* SHT_NOBITS */)
		return CUBIN_EFORMAT;
	if ((rc = cubin__elf_data(&e, &sh, &p, &n)) != CUBIN_OK)
		return rc;
	return cubin__fatbins_in(p, n, fn, ctx);
}
