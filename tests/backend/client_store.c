/*
 * test_client: the kernel image store cannot be poisoned: uploads verified,
 * loaded before they are shared, within a quota; images that collide under
 * the old XXH3-128 addresses kept apart.
 */
#define _GNU_SOURCE
#include "test_client.h"

/* Inline, for XXH3_kSecret: the collision test builds images XXH3 cannot tell apart. */
#define XXH_INLINE_ALL
#include <xxhash.h>

static uint8_t *slurp(const char *path, size_t *n)
{
	struct stat sb;
	FILE *f = fopen(path, "rb");
	uint8_t *b = f && fstat(fileno(f), &sb) == 0 ? malloc((size_t)sb.st_size + 1) : NULL;
	if (b && fread(b, 1, (size_t)sb.st_size, f) != (size_t)sb.st_size) {
		free(b);
		b = NULL;
	}
	if (b)
		*n = (size_t)sb.st_size;
	if (f)
		fclose(f);
	return b;
}

/* module_load of image under hash; without the image when img is NULL. */
static int load_image(cli *k, uint64_t id, const char *hash, const void *img, size_t n)
{
	return call(k, NULL, NULL, 0, img, img ? n : 0, PROTO_OP_MODULE_LOAD, "ubus", U(id), hash,
		    (size_t)CUBIN_HASH_LEN, U(n), "");
}

/* As a client loads an image: by hash, and the bytes when the server lacks it. */
static int load_or_upload(cli *k, uint64_t id, const void *img, size_t n)
{
	char h[CUBIN_HASH_HEX];
	cubin_hash(img, n, h);
	int st = load_image(k, id, h, NULL, n);
	return st == CUDA_ERROR_FILE_NOT_FOUND ? load_image(k, id, h, img, n) : st;
}

/* What the store on disk holds under the hash of img: 1 these bytes, 0 nothing,
 * -1 other bytes. */
static int stored(srv *s, const void *img, size_t n)
{
	char h[CUBIN_HASH_HEX], path[256];
	size_t got = 0;
	cubin_hash(img, n, h);
	snprintf(path, sizeof(path), "%s/store/%s.fatbin", s->dir, h);
	uint8_t *b = slurp(path, &got);
	int r = !b ? 0 : got == n && memcmp(b, img, n) == 0 ? 1 : -1;
	free(b);
	return r;
}

/* A .text section of the first cubin in img, at least min bytes: code the driver
 * test double never reads, so changing it keeps the image loadable. */
static int text_section(const uint8_t *img, size_t n, size_t min, size_t *off, size_t *len)
{
	for (size_t e = 0; e + 64 <= n; e++) {
		uint64_t shoff, stroff, so, ss;
		uint16_t shentsize, shnum, shstrndx;
		uint32_t name;
		if (memcmp(img + e, "\x7f" "ELF\x02\x01", 6) != 0)
			continue;
		memcpy(&shoff, img + e + 0x28, 8);
		memcpy(&shentsize, img + e + 0x3a, 2);
		memcpy(&shnum, img + e + 0x3c, 2);
		memcpy(&shstrndx, img + e + 0x3e, 2);
		if (shentsize != 64 || shstrndx >= shnum || shoff > n || (uint64_t)shnum * 64 > n - e - shoff)
			continue;
		const uint8_t *sh = img + e + shoff;
		memcpy(&stroff, sh + (size_t)shstrndx * 64 + 0x18, 8);
		for (unsigned i = 0; i < shnum; i++) {
			memcpy(&name, sh + (size_t)i * 64, 4);
			memcpy(&so, sh + (size_t)i * 64 + 0x18, 8);
			memcpy(&ss, sh + (size_t)i * 64 + 0x20, 8);
			if (stroff + name + 7 < n - e && !strncmp((const char *)img + e + stroff + name, ".text.", 6) &&
			    ss >= min && so + ss <= n - e) {
				*off = e + so;
				*len = ss;
				return 0;
			}
		}
	}
	return -1;
}

/* Two images that XXH3-128, the store's old address, cannot tell apart, built
 * as the attack in issue 24 did. XXH3 adds each 8-byte lane of a 64-byte stripe
 * into one accumulator and the product of the halves of (lane ^ secret) into
 * another. A lane whose low half equals the secret's makes the product 0, so
 * changing the high halves of that lane in two stripes of one block by +d and -d
 * leaves every accumulator, and so the hash, as it was. Both are img with 16
 * bytes of a .text section changed; both load. */
static int xxh3_twins(const uint8_t *img, size_t n, uint8_t *g, uint8_t *p)
{
	size_t off, len, stripe;
	if (text_section(img, n, 192, &off, &len) != 0)
		return -1;
	stripe = (off + 63) / 64;
	if (stripe % 16 == 15) /* both stripes in one block (16 stripes, one secret pass) */
		stripe++;
	if ((stripe + 2) * 64 > off + len || (stripe + 3) * 64 > n)
		return -1;
	memcpy(g, img, n);
	memcpy(p, img, n);
	for (size_t i = 0; i < 2; i++) {
		size_t st = stripe + i;
		uint64_t key, v;
		memcpy(&key, XXH3_kSecret + (st % 16) * 8, 8); /* lane 0's secret in this stripe */
		v = (key & 0xffffffffu) | (uint64_t)(0x1000 + i) << 32;
		memcpy(g + st * 64, &v, 8);
		v = i ? v - (0x77ull << 32) : v + (0x77ull << 32);
		memcpy(p + st * 64, &v, 8);
	}
	return 0;
}

/* The attack of issue 24: an image planted under the address of another. With
 * SHA-256 addresses the two images are two entries; the planted one is never
 * what a session naming the genuine one gets. */
static void t_store_collision(srv *s, const uint8_t *img, size_t n)
{
	uint8_t *g = malloc(n), *p = malloc(n);
	char hg[CUBIN_HASH_HEX], hp[CUBIN_HASH_HEX];
	cli a, b;

	if (!CHECK(g && p && xxh3_twins(img, n, g, p) == 0))
		goto out;
	XXH128_hash_t xg = XXH3_128bits(g, n), xp = XXH3_128bits(p, n);
	CHECK(memcmp(g, p, n) != 0);
	CHECK(XXH128_isEqual(xg, xp)); /* the old scheme gave both one address */
	cubin_hash(g, n, hg);
	cubin_hash(p, n, hp);
	CHECK(strcmp(hg, hp) != 0);
	if (!CHECK(open_session(&a, s->port) == 0))
		goto out;
	CHECK_EQ(load_or_upload(&a, 101, p, n), 0); /* the attacker plants p */
	cli_close(&a);
	CHECK_EQ(stored(s, p, n), 1);
	if (CHECK(open_session(&b, s->port) == 0)) {
		/* the victim names g: the store has nothing under that name */
		CHECK_EQ(load_image(&b, 102, hg, NULL, n), CUDA_ERROR_FILE_NOT_FOUND);
		CHECK_EQ(load_image(&b, 102, hg, g, n), 0);
		cli_close(&b);
	}
	CHECK_EQ(stored(s, g, n), 1);
	CHECK_EQ(stored(s, p, n), 1);
out:
	free(g);
	free(p);
}

/* Uploads that must never reach the store: bytes that are not what they claim,
 * and bytes the driver cannot load. */
static void t_store_junk(srv *s, const uint8_t *img, size_t n)
{
	uint8_t junk[4096];
	char hj[CUBIN_HASH_HEX], hi[CUBIN_HASH_HEX];
	cli a, b;

	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)(i * 131 + 7);
	cubin_hash(junk, sizeof(junk), hj);
	cubin_hash(img, n, hi);
	if (!CHECK(open_session(&a, s->port) == 0))
		return;
	/* junk under its own hash: verified, but it does not load, so not kept */
	CHECK_EQ(load_image(&a, 201, hj, junk, sizeof(junk)), CUDA_ERROR_INVALID_IMAGE);
	/* a loadable image named by the junk's hash: refused before any load */
	CHECK_EQ(load_image(&a, 202, hj, img, n), CUDA_ERROR_INVALID_SOURCE);
	/* the image with one byte changed, named by the image's hash */
	uint8_t *bent = malloc(n);
	if (CHECK(bent != NULL)) {
		memcpy(bent, img, n);
		bent[n / 2] ^= 1;
		CHECK_EQ(load_image(&a, 203, hi, bent, n), CUDA_ERROR_INVALID_SOURCE);
		CHECK_EQ(stored(s, bent, n), 0);
		free(bent);
	}
	CHECK(mem_free_bytes(&a) > 0); /* the session goes on */
	cli_close(&a);
	CHECK_EQ(stored(s, junk, sizeof(junk)), 0);
	if (CHECK(open_session(&b, s->port) == 0)) {
		CHECK_EQ(load_image(&b, 204, hj, NULL, sizeof(junk)), CUDA_ERROR_FILE_NOT_FOUND);
		cli_close(&b);
	}
}

/* --store-quota: an upload past it is refused as out of memory and not kept;
 * junk that failed to load costs nothing; an image already stored is loaded by
 * anyone without counting again. */
static void t_store_quota(const uint8_t *img, size_t n)
{
	uint8_t *g = malloc(n), *p = malloc(n), *junk = malloc(n);
	char quota[32], hg[CUBIN_HASH_HEX];
	srv q;
	cli a, b;

	snprintf(quota, sizeof(quota), "%zu", n + n / 2); /* room for one image */
	if (!CHECK(g && p && junk && xxh3_twins(img, n, g, p) == 0) || !CHECK(srv_start(&q, NULL, quota) == 0))
		goto out;
	memset(junk, 0x5a, n);
	if (CHECK(open_session(&a, q.port) == 0)) {
		CHECK_EQ(load_or_upload(&a, 301, junk, n), CUDA_ERROR_INVALID_IMAGE);
		CHECK_EQ(load_or_upload(&a, 302, g, n), 0);
		CHECK_EQ(load_or_upload(&a, 303, p, n), CUDA_ERROR_OUT_OF_MEMORY);
		CHECK(mem_free_bytes(&a) > 0);
		cli_close(&a);
	}
	CHECK_EQ(stored(&q, g, n), 1);
	CHECK_EQ(stored(&q, p, n), 0);
	cubin_hash(g, n, hg);
	if (CHECK(open_session(&b, q.port) == 0)) {
		CHECK_EQ(load_image(&b, 304, hg, NULL, n), 0);
		cli_close(&b);
	}
	CHECK_EQ(srv_stop(&q), 0);
	CHECK_EQ(srv_start(&q, NULL, "0") == 0, 1); /* no uploads at all */
	if (CHECK(open_session(&a, q.port) == 0)) {
		CHECK_EQ(load_or_upload(&a, 305, img, n), CUDA_ERROR_OUT_OF_MEMORY);
		cli_close(&a);
	}
	CHECK_EQ(stored(&q, img, n), 0);
	CHECK_EQ(srv_stop(&q), 0);
out:
	free(g);
	free(p);
	free(junk);
}

void t_store(srv *s)
{
	size_t n = 0;
	uint8_t *img = g_fatbin ? slurp(g_fatbin, &n) : NULL;
	if (!img) {
		printf("t_store: no kernels fatbin, store tests skipped\n");
		return;
	}
	t_store_collision(s, img, n);
	t_store_junk(s, img, n);
	t_store_quota(img, n);
	free(img);
}
