/*
 * The size of a fatbin from its 16-byte header (see fatbin.c for the layout). Kept
 * apart from the parser so that libremote.so, which only hashes what a program
 * registers, links no decompressor.
 */
#include "cubin_int.h"

#define FATBIN_HDR 16

int cubin_fatbin_size(const void *data, size_t avail, size_t *size)
{
	const uint8_t *p = data;
	uint16_t hsize;
	uint64_t body;

	if (!p || avail < 8)
		return p && avail >= 4 && cubin__le32(p) == CUBIN_FATBIN_MAGIC ? CUBIN_ETRUNC : CUBIN_EFORMAT;
	if (cubin__le32(p) != CUBIN_FATBIN_MAGIC)
		return CUBIN_EFORMAT;
	hsize = cubin__le16(p + 6);
	if (hsize < FATBIN_HDR)
		return CUBIN_EFORMAT;
	if (avail < hsize)
		return CUBIN_ETRUNC;
	body = cubin__le64(p + 8);
	if (!cubin__in_range(hsize, body, avail))
		return CUBIN_ETRUNC;
	if (size)
		*size = (size_t)(hsize + body);
	return CUBIN_OK;
}
