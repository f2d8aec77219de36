/*
 * One fatbin: what nvcc's host stub hands to __cudaRegisterFatBinary (through
 * the wrapper's data pointer) and what the store keeps, byte for byte.
 *
 *   header, 16 bytes:  u32 magic 0xBA55ED50, u16 version (1),
 *                      u16 header size (16), u64 size of the entries after it
 *   entries, back to back until header size + that size:
 *     entry header (64 bytes or more: its own size is at +4)
 *       +0x00 u16 kind (1 PTX, 2 ELF)      +0x04 u32 header size
 *       +0x08 u64 payload size (8-aligned) +0x10 u32 compressed size
 *       +0x18 u16 minor, u16 major         +0x1c u32 arch (90 = sm_90)
 *       +0x28 u64 flags: 0x2000 LZ4 block, 0x8000 zstd frame, 0x1 64-bit,
 *                        0x10 linux host, 0x1000000 seen on sm_100+ cubins
 *       +0x38 u64 uncompressed size (0 when the payload is plain)
 *     payload (payload size bytes; a compressed payload fills compressed size
 *     bytes of it, the rest is padding)
 *
 * Layout and flag values are from our own experiments with nvcc 13.0 (README.md
 * "Fatbin" has the evidence); nothing here is from NVIDIA documentation.
 */
#include <stdlib.h>
#include <string.h>

#include "cubin_int.h"

#define FATBIN_HDR 16

typedef struct parse_ctx {
	cubin_fatbin *fb;
	uint32_t cap;
} parse_ctx;

static int add_entry(void *vctx, const cubin_rawentry *re);

int cubin__fatbin_walk(const void *data, size_t size, cubin_rawentry_fn fn, void *ctx)
{
	const uint8_t *b = data;
	size_t total, off;
	int rc;

	if ((rc = cubin_fatbin_size(data, size, &total)) != CUBIN_OK)
		return rc;
	off = cubin__le16(b + 6);
	while (off < total) {
		const uint8_t *h = b + off;
		uint32_t hsize;
		uint64_t payload;
		cubin_rawentry re;

		if (total - off < CUBIN_FE_MINHDR)
			return CUBIN_ETRUNC;
		hsize = cubin__le32(h + CUBIN_FE_HDRSIZE);
		payload = cubin__le64(h + CUBIN_FE_PAYLOAD);
		if (hsize < CUBIN_FE_MINHDR)
			return CUBIN_EFORMAT;
		if (hsize > total - off || payload > total - off - hsize)
			return CUBIN_ETRUNC;

		memset(&re, 0, sizeof(re));
		re.kind = cubin__le16(h + CUBIN_FE_KIND);
		re.arch = cubin__le32(h + CUBIN_FE_ARCH);
		re.flags = cubin__le64(h + CUBIN_FE_FLAGS);
		re.offset = off;
		re.payload = h + hsize;
		re.payload_size = (size_t)payload;
		re.usize = payload;
		if (re.flags & (CUBIN_FF_LZ4 | CUBIN_FF_ZSTD)) {
			uint32_t csize = cubin__le32(h + CUBIN_FE_CSIZE);
			if (csize > payload)
				return CUBIN_ETRUNC;
			re.payload_size = csize;
			re.usize = cubin__le64(h + CUBIN_FE_USIZE);
			if (re.usize > CUBIN_MAX_UNCOMPRESSED)
				return CUBIN_EFORMAT;
		}
		if (fn && (rc = fn(ctx, &re)) != CUBIN_OK)
			return rc;
		off += hsize + (size_t)payload;
	}
	return CUBIN_OK;
}

static int add_entry(void *vctx, const cubin_rawentry *re)
{
	parse_ctx *c = vctx;
	cubin_fatbin *fb = c->fb;
	cubin_entry *e;

	if (fb->n == c->cap) {
		uint32_t ncap = c->cap ? c->cap * 2 : 8;
		cubin_entry *ne = realloc(fb->e, (size_t)ncap * sizeof(*ne));
		if (!ne)
			return CUBIN_ENOMEM;
		fb->e = ne;
		c->cap = ncap;
	}
	e = &fb->e[fb->n];
	memset(e, 0, sizeof(*e));
	e->kind = re->kind;
	e->arch = re->arch;
	if (re->flags & (CUBIN_FF_LZ4 | CUBIN_FF_ZSTD)) {
		int rc = cubin__decompress(re->flags, re->payload, re->payload_size, re->usize, &e->owned);
		if (rc != CUBIN_OK)
			return rc;
		e->data = e->owned;
		e->size = (size_t)re->usize;
		e->compressed = 1;
	} else {
		e->data = re->payload;
		e->size = re->payload_size;
	}
	fb->n++;
	return CUBIN_OK;
}

int cubin_fatbin_parse(const void *data, size_t size, cubin_fatbin *out)
{
	parse_ctx c = { out, 0 };
	int rc;

	if (!out)
		return CUBIN_EFORMAT;
	memset(out, 0, sizeof(*out));
	rc = cubin__fatbin_walk(data, size, add_entry, &c);
	if (rc != CUBIN_OK)
		cubin_fatbin_free(out);
	return rc;
}

void cubin_fatbin_free(cubin_fatbin *fb)
{
	if (!fb)
		return;
	for (uint32_t i = 0; i < fb->n; i++)
		free(fb->e[i].owned);
	free(fb->e);
	fb->e = NULL;
	fb->n = 0;
}
