/*
 * A session's device address ranges: its allocations (cuMemAlloc,
 * cuMemAllocAsync) and the module globals it resolved. Every range a copy,
 * memset or free touches is checked here before the driver sees it, so a client
 * can only reach memory its own session owns.
 *
 * A sorted array of disjoint ranges, searched by binary search: lookups are
 * O(log n) on every copy; insertions and removals move the tail (allocations are
 * far rarer than copies). All arithmetic is overflow-safe: a range that would
 * wrap past UINT64_MAX is never inside anything.
 *
 * Not thread-safe: a session's ranges belong to its executor thread.
 */
#ifndef BE_RANGES_H
#define BE_RANGES_H

#include <stddef.h>
#include <stdint.h>

enum be_range_kind {
	BE_RANGE_ALLOC = 1, /* cuMemAlloc: freeable */
	BE_RANGE_ASYNC = 2, /* cuMemAllocAsync: freeable */
	BE_RANGE_VAR = 3,   /* a module global: copies only, never freed by the client */
	BE_RANGE_MAPPED = 4, /* cuMemMap'd (op_vmm.c): copies only, gone at cuMemUnmap */
};

typedef struct be_range {
	uint64_t base, size;
	int kind;
	int dev; /* *dev_src when added: the session's device it is memory of */
} be_range;

typedef struct be_ranges {
	be_range *r; /* sorted by base, disjoint, size > 0 */
	size_t n, cap;
	uint64_t bytes; /* sum of the sizes of freeable ranges */
	const int *dev_src; /* the owner's running device (be_session.cur); NULL: 0 */
} be_ranges;

enum be_range_err {
	BE_R_OK = 0,
	BE_R_EINVAL = -1,  /* size 0, or the range runs past UINT64_MAX */
	BE_R_OVERLAP = -2, /* overlaps a range already there */
	BE_R_ENOMEM = -3,
	BE_R_NOTFOUND = -4,
};

void be_ranges_init(be_ranges *rs);
void be_ranges_free(be_ranges *rs);
int be_ranges_add(be_ranges *rs, uint64_t base, uint64_t size, int kind);
/* Whether [ptr, ptr + len) lies inside one range, or in mapped ranges
 * (BE_RANGE_MAPPED) back to back: one virtual range on the GPU too. len 0
 * touches nothing and is always fine. */
int be_ranges_check(const be_ranges *rs, uint64_t ptr, uint64_t len);
/* Whether height rows of width bytes, pitch apart, starting at base, lie inside
 * one range: [base, base + (height - 1) * pitch + width). width or height 0:
 * fine; pitch < width (rows overlapping): not. */
int be_ranges_check_2d(const be_ranges *rs, uint64_t base, uint64_t pitch, uint64_t width, uint64_t height);
/* Whether depth slices of height rows of width bytes lie inside one range: rows
 * pitch apart, slices slice_rows rows apart (slices that would overlap,
 * slice_rows < height, are not fine). Any extent 0: fine. A single row needs
 * no pitch. */
int be_ranges_check_3d(const be_ranges *rs, uint64_t base, uint64_t pitch, uint64_t slice_rows, uint64_t width,
		       uint64_t height, uint64_t depth);
/* The range that starts exactly at base, or NULL. */
const be_range *be_ranges_at(const be_ranges *rs, uint64_t base);
/* Removes the range that starts exactly at base (*out gets a copy if non-NULL). */
int be_ranges_remove(be_ranges *rs, uint64_t base, be_range *out);

/* (height - 1) * pitch + width without wrapping; 0 on overflow or when the
 * shape is empty or invalid (pitch < width). */
int be_extent_2d(uint64_t pitch, uint64_t width, uint64_t height, uint64_t *extent);

#endif
