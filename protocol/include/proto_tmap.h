/*
 * The arguments of a tensor map encode (op tensor_map_encode's params): the
 * driver's cuTensorMapEncodeTiled / Im2col / Im2colWide arguments less the map
 * and the global address, as one fixed struct of plain numbers (host byte order:
 * both ends are little-endian). Entries past the rank are 0, and so is every
 * field the kind does not use, so equal calls give equal bytes (the client keys
 * its cache of encoded maps by them).
 */
#ifndef PROTO_TMAP_H
#define PROTO_TMAP_H

#include <stdint.h>

enum proto_tmap_kind {
	PROTO_TMAP_TILED = 0,
	PROTO_TMAP_IM2COL = 1,
	PROTO_TMAP_IM2COL_WIDE = 2,
	PROTO_TMAP_REPLACE = 3, /* params: the 128-byte map whose address changes */
};

#define PROTO_TMAP_MAX_RANK 5
#define PROTO_TMAP_BYTES 128

typedef struct proto_tmap_params {
	uint32_t dtype, rank;
	uint64_t dim[5];
	uint64_t stride[4]; /* rank - 1 of them, in bytes */
	uint32_t box[5];    /* tiled */
	uint32_t estride[5];
	int32_t lower[3], upper[3]; /* im2col: rank - 2 corners; im2col-wide: [0], the widths */
	uint32_t channels, pixels;  /* im2col, im2col-wide */
	uint32_t interleave, swizzle, l2, oob;
	uint32_t mode; /* im2col-wide */
	uint32_t pad;
} proto_tmap_params;

_Static_assert(sizeof(proto_tmap_params) == 176, "proto_tmap_params has no hidden padding");

/* The bytes [addr, addr + extent) a tensor of these dimensions and strides
 * spans: the first dimension's elements (4 bits each for 16U4_ALIGN8B, a byte
 * for the other packed types, which pad to 16 bytes per 16 values), then each
 * further dimension's last index times its stride. UINT64_MAX if it does not
 * fit in 64 bits; 0 (an invalid shape) for a rank or type out of range or a
 * dimension of 0. */
static inline uint64_t proto_tmap_extent(const proto_tmap_params *p)
{
	static const uint8_t bits[] = {8, 16, 32, 32, 64, 64, 16, 32, 64, 16, 32, 32, 32, 4, 8, 8};
	if (p->rank == 0 || p->rank > PROTO_TMAP_MAX_RANK || p->dtype >= sizeof(bits) || p->dim[0] == 0)
		return 0;
	if (p->dim[0] > UINT64_MAX / 64)
		return UINT64_MAX;
	uint64_t ext = (p->dim[0] * bits[p->dtype] + 7) / 8, add;
	for (uint32_t i = 1; i < p->rank; i++) {
		if (p->dim[i] == 0)
			return 0;
		if (__builtin_mul_overflow(p->dim[i] - 1, p->stride[i - 1], &add) ||
		    __builtin_add_overflow(ext, add, &ext))
			return UINT64_MAX;
	}
	return ext;
}

#endif
