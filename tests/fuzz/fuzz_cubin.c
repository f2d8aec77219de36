/*
 * libFuzzer target for rg_cubin's parsers: the same bytes go through
 *   cubin_fatbin_size + cubin_fatbin_parse (and cubin_elf_kernels on every ELF
 *   entry, so decompressed cubins get parsed too),
 *   cubin_elf_kernels (the bytes as a cubin),
 *   cubin_elf_each_fatbin (the bytes as a host ELF, each fatbin parsed as above).
 * Every result is freed: leaks are findings too.
 *
 * Good seeds: the files tests/cubin builds (params.cubin, params*.fatbin,
 * cubin_prog, libcubin_testlib.so). Bound the input size (-max_len=262144).
 */
#include <stddef.h>
#include <stdint.h>

#include "cubin.h"

static void parse_fatbin(const void *p, size_t n)
{
	cubin_fatbin fb;
	size_t size;

	if (cubin_fatbin_size(p, n, &size) != CUBIN_OK)
		return;
	if (cubin_fatbin_parse(p, size, &fb) != CUBIN_OK)
		return;
	for (uint32_t i = 0; i < fb.n; i++) {
		cubin_kernels ks;
		if (fb.e[i].kind == CUBIN_ENTRY_ELF && cubin_elf_kernels(fb.e[i].data, fb.e[i].size, &ks) == CUBIN_OK)
			cubin_kernels_free(&ks);
	}
	cubin_fatbin_free(&fb);
}

static int each(void *ctx, const void *fatbin, size_t size)
{
	(void)ctx;
	parse_fatbin(fatbin, size);
	return CUBIN_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	cubin_kernels ks;
	char hash[CUBIN_HASH_HEX];

	parse_fatbin(data, size);
	if (cubin_elf_kernels(data, size, &ks) == CUBIN_OK) {
		/* touch what a caller reads: names and every parameter */
		volatile uint32_t sink = 0;
		for (uint32_t i = 0; i < ks.n; i++) {
			sink += (uint8_t)ks.k[i].name[0];
			for (uint32_t j = 0; j < ks.k[i].nparams; j++)
				sink += ks.k[i].params[j].offset + ks.k[i].params[j].size;
		}
		(void)sink;
		cubin_kernels_free(&ks);
	}
	cubin_elf_each_fatbin(data, size, each, NULL);
	cubin_hash(data, size, hash);
	return 0;
}
