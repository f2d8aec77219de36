/*
 * Allocation ranges (ranges.h). The one subtle part is the containment test:
 * written as "offset < size && len <= size - offset" it never forms ptr + len,
 * which could wrap for hostile input near UINT64_MAX.
 */
#include "ranges.h"

#include <stdlib.h>
#include <string.h>

static size_t upper(const be_ranges *rs, uint64_t ptr);

void be_ranges_init(be_ranges *rs) { memset(rs, 0, sizeof(*rs)); }

void be_ranges_free(be_ranges *rs)
{
	free(rs->r);
	be_ranges_init(rs);
}

/* Index of the first range whose base is > ptr (so the candidate that may
 * contain ptr is the one before it). */
static size_t upper(const be_ranges *rs, uint64_t ptr)
{
	size_t lo = 0, hi = rs->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (rs->r[mid].base <= ptr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int be_ranges_add(be_ranges *rs, uint64_t base, uint64_t size, int kind)
{
	if (size == 0 || size - 1 > UINT64_MAX - base) /* the last byte must not wrap */
		return BE_R_EINVAL;
	size_t i = upper(rs, base);
	/* The previous range must end at or before base; the next one must start
	 * at or after base + size. */
	if (i > 0 && base - rs->r[i - 1].base < rs->r[i - 1].size)
		return BE_R_OVERLAP;
	if (i < rs->n && rs->r[i].base - base < size)
		return BE_R_OVERLAP;
	if (rs->n == rs->cap) {
		size_t cap = rs->cap ? rs->cap * 2 : 16;
		be_range *nr = realloc(rs->r, cap * sizeof(*nr));
		if (!nr)
			return BE_R_ENOMEM;
		rs->r = nr;
		rs->cap = cap;
	}
	memmove(&rs->r[i + 1], &rs->r[i], (rs->n - i) * sizeof(*rs->r));
	rs->r[i] = (be_range){base, size, kind, rs->dev_src ? *rs->dev_src : 0};
	rs->n++;
	if (kind != BE_RANGE_VAR && kind != BE_RANGE_MAPPED)
		rs->bytes += size;
	return BE_R_OK;
}

int be_ranges_check(const be_ranges *rs, uint64_t ptr, uint64_t len)
{
	if (len == 0)
		return 1;
	size_t i = upper(rs, ptr);
	if (i == 0)
		return 0;
	const be_range *r = &rs->r[i - 1];
	uint64_t off = ptr - r->base; /* r->base <= ptr */
	if (off >= r->size)
		return 0;
	if (len <= r->size - off)
		return 1;
	/* Mapped ranges that follow each other without a gap are one range. */
	len -= r->size - off;
	for (; r->kind == BE_RANGE_MAPPED && i < rs->n; i++) {
		const be_range *nx = &rs->r[i];
		if (nx->kind != BE_RANGE_MAPPED || nx->base - r->base != r->size)
			return 0;
		if (len <= nx->size)
			return 1;
		len -= nx->size;
		r = nx;
	}
	return 0;
}

int be_extent_2d(uint64_t pitch, uint64_t width, uint64_t height, uint64_t *extent)
{
	if (width == 0 || height == 0 || pitch < width)
		return 0;
	uint64_t rows = height - 1;
	if (rows && pitch > (UINT64_MAX - width) / rows)
		return 0;
	*extent = rows * pitch + width;
	return 1;
}

int be_ranges_check_2d(const be_ranges *rs, uint64_t base, uint64_t pitch, uint64_t width, uint64_t height)
{
	uint64_t ext;
	if (width == 0 || height == 0)
		return 1;
	if (!be_extent_2d(pitch, width, height, &ext))
		return 0;
	return be_ranges_check(rs, base, ext);
}

int be_ranges_check_3d(const be_ranges *rs, uint64_t base, uint64_t pitch, uint64_t slice_rows, uint64_t width,
		       uint64_t height, uint64_t depth)
{
	if (width == 0 || height == 0 || depth == 0)
		return 1;
	if (depth > 1 && (slice_rows < height || depth - 1 > (UINT64_MAX - height) / slice_rows))
		return 0;
	uint64_t rows = (depth - 1) * slice_rows + height;
	return be_ranges_check_2d(rs, base, rows > 1 ? pitch : width, width, rows);
}

const be_range *be_ranges_at(const be_ranges *rs, uint64_t base)
{
	size_t i = upper(rs, base);
	if (i == 0 || rs->r[i - 1].base != base)
		return NULL;
	return &rs->r[i - 1];
}

int be_ranges_remove(be_ranges *rs, uint64_t base, be_range *out)
{
	size_t i = upper(rs, base);
	if (i == 0 || rs->r[i - 1].base != base)
		return BE_R_NOTFOUND;
	i--;
	if (out)
		*out = rs->r[i];
	if (rs->r[i].kind != BE_RANGE_VAR && rs->r[i].kind != BE_RANGE_MAPPED)
		rs->bytes -= rs->r[i].size;
	memmove(&rs->r[i], &rs->r[i + 1], (rs->n - i - 1) * sizeof(*rs->r));
	rs->n--;
	return BE_R_OK;
}
