/*
 * rg_cubin in-process tests: the API's contracts on hand-built inputs (fatbins
 * with plain, zstd and LZ4 entries, hostile headers), then sweeps over the files
 * nvcc built for the test (truncated at every offset, bytes flipped) through
 * every parser. Under valgrind or a sanitizer the sweeps are the memory check.
 *
 *   test_api FILE...   (.cubin, .fatbin, or ELF executables / shared libraries)
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lz4.h>
#include <zstd.h>

#include "cubin.h"

static int failures;

#define CHECK(cond)                                                              \
	do {                                                                     \
		if (!(cond)) {                                                   \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
			failures++;                                              \
		}                                                                \
	} while (0)

static void put16(uint8_t *p, uint16_t v) { p[0] = v; p[1] = v >> 8; }
static void put32(uint8_t *p, uint32_t v) { put16(p, v); put16(p + 2, v >> 16); }
static void put64(uint8_t *p, uint64_t v) { put32(p, v); put32(p + 4, v >> 32); }

static uint8_t *read_file(const char *path, size_t *size)
{
	struct stat st;
	uint8_t *buf;
	int fd = open(path, O_RDONLY);

	if (fd < 0 || fstat(fd, &st) != 0) {
		perror(path);
		exit(1);
	}
	buf = malloc(st.st_size ? st.st_size : 1);
	if (!buf || read(fd, buf, st.st_size) != st.st_size) {
		perror(path);
		exit(1);
	}
	close(fd);
	*size = st.st_size;
	return buf;
}

/* ---- a fatbin built by hand ---------------------------------------------------- */

typedef struct fb_builder {
	uint8_t *buf;
	size_t len;
} fb_builder;

enum { PLAIN, ZSTD, LZ4 };

/* Appends an entry with a 64-byte header; payload compressed as asked. */
static void fb_add(fb_builder *b, int kind, uint32_t arch, const void *data, size_t size, int codec)
{
	size_t bound = codec == ZSTD ? ZSTD_compressBound(size) : codec == LZ4 ? (size_t)LZ4_compressBound(size) : size;
	uint8_t *tmp = malloc(bound + 8);
	size_t csize;
	uint64_t flags = 0x11;

	if (codec == ZSTD) {
		csize = ZSTD_compress(tmp, bound, data, size, 3);
		flags |= 0x8000;
	} else if (codec == LZ4) {
		csize = LZ4_compress_default(data, (char *)tmp, size, bound);
		flags |= 0x2000;
	} else {
		memcpy(tmp, data, size);
		csize = size;
	}
	size_t padded = (csize + 7) & ~(size_t)7;
	b->buf = realloc(b->buf, b->len + 64 + padded);
	uint8_t *h = b->buf + b->len;
	memset(h, 0, 64 + padded);
	put16(h, kind);
	put16(h + 2, 0x0101);
	put32(h + 4, 64);
	put64(h + 8, padded);
	put32(h + 0x10, codec == PLAIN ? 0 : csize);
	put32(h + 0x1c, arch);
	put64(h + 0x28, flags);
	put64(h + 0x38, codec == PLAIN ? 0 : size);
	memcpy(h + 64, tmp, csize);
	b->len += 64 + padded;
	free(tmp);
}

static void fb_begin(fb_builder *b)
{
	b->buf = calloc(1, 16);
	b->len = 16;
	put32(b->buf, CUBIN_FATBIN_MAGIC);
	put16(b->buf + 4, 1);
	put16(b->buf + 6, 16);
}

static void fb_end(fb_builder *b)
{
	put64(b->buf + 8, b->len - 16);
}

static void test_hash(void)
{
	char h[CUBIN_HASH_HEX];
	/* SHA-256 test vectors (FIPS 180-2; sha256sum prints the same). */
	cubin_hash("", 0, h);
	CHECK(strcmp(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855") == 0);
	cubin_hash("abc", 3, h);
	CHECK(strcmp(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0);
	CHECK(cubin_hash_valid(h, CUBIN_HASH_LEN));
	CHECK(!cubin_hash_valid(h, 32)); /* the old XXH3-128 length */
	h[5] = 'A';
	CHECK(!cubin_hash_valid(h, CUBIN_HASH_LEN));
}

static void test_fatbin_size(void)
{
	uint8_t b[32] = { 0 };
	size_t size = 0;

	CHECK(cubin_fatbin_size(NULL, 100, &size) == CUBIN_EFORMAT);
	CHECK(cubin_fatbin_size(b, sizeof(b), &size) == CUBIN_EFORMAT);
	put32(b, CUBIN_FATBIN_MAGIC);
	put16(b + 4, 1);
	put16(b + 6, 16);
	put64(b + 8, 16);
	CHECK(cubin_fatbin_size(b, 32, &size) == CUBIN_OK && size == 32);
	CHECK(cubin_fatbin_size(b, SIZE_MAX, &size) == CUBIN_OK && size == 32);
	for (size_t avail = 0; avail < 32; avail++)
		CHECK(cubin_fatbin_size(b, avail, &size) == (avail < 4 ? CUBIN_EFORMAT : CUBIN_ETRUNC));
	put64(b + 8, UINT64_MAX);
	CHECK(cubin_fatbin_size(b, 32, &size) == CUBIN_ETRUNC);
	put64(b + 8, UINT64_MAX - 8);
	CHECK(cubin_fatbin_size(b, SIZE_MAX, &size) == CUBIN_ETRUNC);
	put64(b + 8, 0);
	put16(b + 6, 8);
	CHECK(cubin_fatbin_size(b, 32, &size) == CUBIN_EFORMAT);
	/* An empty fatbin (header only) is valid and has no entries. */
	cubin_fatbin fb;
	put16(b + 6, 16);
	CHECK(cubin_fatbin_parse(b, 16, &fb) == CUBIN_OK && fb.n == 0);
	cubin_fatbin_free(&fb);
}

/* Plain, zstd and LZ4 entries decode to their bytes; hostile headers fail. */
static void test_fatbin_parse(const uint8_t *cubin, size_t cubin_size)
{
	static const char ptx[] = "//\n.version 9.0\n.target sm_90\n.address_size 64\n"
				  "// repeated text compresses: .entry k() { ret; } .entry k() { ret; }\n";
	fb_builder b;
	cubin_fatbin fb;
	cubin_kernels ks;

	fb_begin(&b);
	fb_add(&b, CUBIN_ENTRY_ELF, 90, cubin, cubin_size, PLAIN);
	fb_add(&b, CUBIN_ENTRY_PTX, 90, ptx, sizeof(ptx), ZSTD);
	fb_add(&b, CUBIN_ENTRY_PTX, 80, ptx, sizeof(ptx), LZ4);
	fb_add(&b, CUBIN_ENTRY_ELF, 100, cubin, cubin_size, ZSTD);
	fb_end(&b);

	CHECK(cubin_fatbin_parse(b.buf, b.len, &fb) == CUBIN_OK);
	CHECK(fb.n == 4);
	if (fb.n == 4) {
		CHECK(fb.e[0].kind == CUBIN_ENTRY_ELF && fb.e[0].arch == 90 && !fb.e[0].compressed);
		CHECK(fb.e[0].size >= cubin_size && memcmp(fb.e[0].data, cubin, cubin_size) == 0);
		CHECK(fb.e[1].kind == CUBIN_ENTRY_PTX && fb.e[1].compressed && fb.e[1].size == sizeof(ptx));
		CHECK(memcmp(fb.e[1].data, ptx, sizeof(ptx)) == 0);
		CHECK(fb.e[2].arch == 80 && fb.e[2].compressed && fb.e[2].size == sizeof(ptx));
		CHECK(memcmp(fb.e[2].data, ptx, sizeof(ptx)) == 0);
		CHECK(fb.e[3].compressed && fb.e[3].size == cubin_size && memcmp(fb.e[3].data, cubin, cubin_size) == 0);
		CHECK(cubin_elf_kernels(fb.e[3].data, fb.e[3].size, &ks) == CUBIN_OK && ks.n > 0);
		cubin_kernels_free(&ks);
	}
	cubin_fatbin_free(&fb);

	/* Hostile variants of the second entry's header (the zstd one). */
	size_t e1 = 16 + 64 + ((cubin_size + 7) & ~(size_t)7);
	uint8_t *m = malloc(b.len);
	struct { size_t off; int width; uint64_t val; int want; } cases[] = {
		{ e1 + 0x38, 8, 1u << 31, CUBIN_EFORMAT },      /* uncompressed size over the cap */
		{ e1 + 0x38, 8, 0, CUBIN_ECOMPRESS },            /* zero */
		{ e1 + 0x38, 8, sizeof(ptx) + 1, CUBIN_ECOMPRESS }, /* decoder yields fewer */
		{ e1 + 0x38, 8, sizeof(ptx) - 1, CUBIN_ECOMPRESS }, /* decoder wants more room */
		{ e1 + 0x10, 4, 0xffffffff, CUBIN_ETRUNC },      /* compressed size past payload */
		{ e1 + 0x10, 4, 5, CUBIN_ECOMPRESS },            /* cut zstd frame */
		{ e1 + 0x28, 8, 0xa011, CUBIN_ECOMPRESS },       /* both codecs */
		{ e1 + 0x04, 4, 8, CUBIN_EFORMAT },              /* entry header too small */
		{ e1 + 0x04, 4, 0x7fffffff, CUBIN_ETRUNC },      /* entry header past the end */
		{ e1 + 0x08, 8, UINT64_MAX, CUBIN_ETRUNC },      /* payload past the end */
		{ e1 + 0x08, 8, UINT64_MAX - 63, CUBIN_ETRUNC }, /* and wrapping */
		{ 8, 8, UINT64_MAX, CUBIN_ETRUNC },              /* fatbin size */
		{ 0, 4, 0x12345678, CUBIN_EFORMAT },             /* magic */
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memcpy(m, b.buf, b.len);
		if (cases[i].width == 4)
			put32(m + cases[i].off, (uint32_t)cases[i].val);
		else
			put64(m + cases[i].off, cases[i].val);
		int rc = cubin_fatbin_parse(m, b.len, &fb);
		if (rc != cases[i].want)
			fprintf(stderr, "hostile case %zu: got %d want %d\n", i, rc, cases[i].want);
		CHECK(rc == cases[i].want);
		CHECK(fb.n == 0 && fb.e == NULL);
	}
	/* Truncation anywhere inside the fatbin is caught. */
	for (size_t n = 0; n < b.len; n++) {
		CHECK(cubin_fatbin_parse(b.buf, n, &fb) != CUBIN_OK);
		CHECK(fb.n == 0);
	}
	free(m);
	free(b.buf);
}

/* ---- sweeps over real files ---------------------------------------------------- */

static int count_fatbin(void *ctx, const void *fatbin, size_t size)
{
	cubin_fatbin fb;
	if (cubin_fatbin_parse(fatbin, size, &fb) == CUBIN_OK) {
		for (uint32_t i = 0; i < fb.n; i++) {
			cubin_kernels ks;
			if (fb.e[i].kind == CUBIN_ENTRY_ELF && cubin_elf_kernels(fb.e[i].data, fb.e[i].size, &ks) == CUBIN_OK)
				cubin_kernels_free(&ks);
		}
		cubin_fatbin_free(&fb);
	}
	++*(int *)ctx;
	return CUBIN_OK;
}

/* Runs every parser that applies; returns 0 when all that apply succeed. */
static int run_all(const uint8_t *p, size_t n)
{
	cubin_kernels ks;
	cubin_fatbin fb;
	size_t size;
	int count = 0, rc, bad = 0;

	if (n >= 4 && memcmp(p, "\x7f" "ELF", 4) == 0) {
		if (n > 18 && p[18] == 190) {
			rc = cubin_elf_kernels(p, n, &ks);
			if (rc == CUBIN_OK)
				cubin_kernels_free(&ks);
			else
				bad = 1;
		} else {
			rc = cubin_elf_each_fatbin(p, n, count_fatbin, &count);
			bad = rc != CUBIN_OK;
		}
	} else {
		rc = cubin_fatbin_size(p, n, &size);
		if (rc == CUBIN_OK)
			rc = cubin_fatbin_parse(p, n, &fb);
		if (rc == CUBIN_OK) {
			for (uint32_t i = 0; i < fb.n; i++)
				if (fb.e[i].kind == CUBIN_ENTRY_ELF && cubin_elf_kernels(fb.e[i].data, fb.e[i].size, &ks) == CUBIN_OK)
					cubin_kernels_free(&ks);
			cubin_fatbin_free(&fb);
		}
		bad = rc != CUBIN_OK;
	}
	/* the other parsers on the same bytes must fail cleanly too */
	if (cubin_elf_kernels(p, n, &ks) == CUBIN_OK)
		cubin_kernels_free(&ks);
	if (cubin_fatbin_parse(p, n, &fb) == CUBIN_OK)
		cubin_fatbin_free(&fb);
	return bad;
}

static void sweep(const char *path)
{
	size_t n, step, ntrunc = 0, nflip = 0;
	uint8_t *orig = read_file(path, &n), *m = malloc(n);

	CHECK(run_all(orig, n) == 0);
	/* Every truncation of a file nvcc wrote is an error: each byte of it is
	 * covered by a section, a segment or a header table. */
	step = n <= 256 * 1024 ? 1 : n / 4096;
	for (size_t len = 0; len < n; len += (len < 4096 ? 1 : step)) {
		memcpy(m, orig, len);
		if (run_all(m, len) == 0) {
			fprintf(stderr, "%s truncated to %zu bytes parses\n", path, len);
			failures++;
			break;
		}
		ntrunc++;
	}
	/* Flips must not crash; they need not be detected (code bytes are data). */
	for (size_t off = 0; off < n; off += off < 1024 ? 1 : 1 + n / 2048) {
		static const uint8_t masks[] = { 0xff, 0x01, 0x80 };
		for (size_t k = 0; k < sizeof(masks); k++) {
			memcpy(m, orig, n);
			m[off] ^= masks[k];
			run_all(m, n);
			nflip++;
		}
	}
	printf("%s: %zu bytes, %zu truncations, %zu flips\n", path, n, ntrunc, nflip);
	free(orig);
	free(m);
}

int main(int argc, char **argv)
{
	size_t cubin_size = 0;
	uint8_t *cubin = NULL;

	test_hash();
	test_fatbin_size();
	for (int i = 1; i < argc; i++) {
		size_t n;
		uint8_t *p = read_file(argv[i], &n);
		if (!cubin && n > 18 && memcmp(p, "\x7f" "ELF", 4) == 0 && p[18] == 190) {
			cubin = p;
			cubin_size = n;
		} else {
			free(p);
		}
	}
	if (cubin)
		test_fatbin_parse(cubin, cubin_size);
	else
		fprintf(stderr, "no .cubin among the arguments: synthetic fatbin test skipped\n");
	for (int i = 1; i < argc; i++)
		sweep(argv[i]);
	free(cubin);
	if (failures) {
		fprintf(stderr, "%d checks failed\n", failures);
		return 1;
	}
	printf("all checks passed\n");
	return 0;
}
