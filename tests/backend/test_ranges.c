/* Unit tests of the backend's range checks (backend/src/ranges.c). */
#include <stdint.h>

#include "check.h"
#include "ranges.h"

static void test_inside(void)
{
	be_ranges rs;
	be_ranges_init(&rs);
	CHECK(!be_ranges_check(&rs, 0x1000, 1)); /* nothing allocated */
	CHECK_EQ(be_ranges_add(&rs, 0x1000, 0x100, BE_RANGE_ALLOC), BE_R_OK);
	CHECK_EQ(be_ranges_add(&rs, 0x2000, 0x100, BE_RANGE_ALLOC), BE_R_OK);
	CHECK_EQ(be_ranges_add(&rs, 0x1100, 0x100, BE_RANGE_ASYNC), BE_R_OK); /* adjacent to the first */
	CHECK_EQ(rs.n, 3);
	CHECK_EQ(rs.bytes, 0x300);

	CHECK(be_ranges_check(&rs, 0x1000, 0x100));  /* whole */
	CHECK(be_ranges_check(&rs, 0x1000, 1));      /* first byte */
	CHECK(be_ranges_check(&rs, 0x10ff, 1));      /* last byte */
	CHECK(be_ranges_check(&rs, 0x1010, 0x20));   /* middle */
	CHECK(!be_ranges_check(&rs, 0x1000, 0x101)); /* one past the end */
	CHECK(!be_ranges_check(&rs, 0xfff, 2));      /* starts before */
	CHECK(!be_ranges_check(&rs, 0x0, 1));
	CHECK(!be_ranges_check(&rs, 0x1300, 1));     /* in a gap */
	CHECK(!be_ranges_check(&rs, 0x2100, 1));     /* just after the last */
	CHECK(be_ranges_check(&rs, 0x20ff, 1));
	be_ranges_free(&rs);
}

/* Two adjacent allocations are two allocations: a copy across the seam is not
 * inside one of them. */
static void test_straddle(void)
{
	be_ranges rs;
	be_ranges_init(&rs);
	be_ranges_add(&rs, 0x1000, 0x100, BE_RANGE_ALLOC);
	be_ranges_add(&rs, 0x1100, 0x100, BE_RANGE_ALLOC);
	CHECK(!be_ranges_check(&rs, 0x10f0, 0x20));
	CHECK(!be_ranges_check(&rs, 0x1000, 0x200));
	CHECK(be_ranges_check(&rs, 0x1100, 0x100));
	CHECK(!be_ranges_check_2d(&rs, 0x1000, 0x100, 0x10, 2)); /* second row in the next allocation */
	CHECK(be_ranges_check_2d(&rs, 0x1000, 0x80, 0x10, 2));
	be_ranges_free(&rs);
}

static void test_overflow(void)
{
	be_ranges rs;
	be_ranges_init(&rs);
	uint64_t top = UINT64_MAX - 0xff; /* [top, UINT64_MAX] holds 0x100 bytes */
	CHECK_EQ(be_ranges_add(&rs, top, 0x100, BE_RANGE_ALLOC), BE_R_OK);
	CHECK_EQ(be_ranges_add(&rs, top, 0x101, BE_RANGE_ALLOC), BE_R_EINVAL); /* wraps */
	CHECK_EQ(be_ranges_add(&rs, UINT64_MAX, 2, BE_RANGE_ALLOC), BE_R_EINVAL);
	CHECK(be_ranges_check(&rs, top, 0x100));
	CHECK(be_ranges_check(&rs, UINT64_MAX, 1));
	CHECK(!be_ranges_check(&rs, top, 0x101));
	CHECK(!be_ranges_check(&rs, top + 1, UINT64_MAX)); /* ptr + len wraps to a small number */
	CHECK(!be_ranges_check(&rs, UINT64_MAX, UINT64_MAX));
	CHECK(!be_ranges_check(&rs, 0x10, UINT64_MAX));

	be_ranges_add(&rs, 0x1000, 0x1000, BE_RANGE_ALLOC);
	/* 2D: (height - 1) * pitch overflows */
	CHECK(!be_ranges_check_2d(&rs, 0x1000, UINT64_MAX / 2, 1, 3));
	CHECK(!be_ranges_check_2d(&rs, 0x1000, 1ull << 32, 1, (1ull << 32) + 1));
	CHECK(!be_ranges_check_2d(&rs, 0x1000, 0x10, 0x20, 2)); /* pitch < width */
	CHECK(be_ranges_check_2d(&rs, 0x1000, 0x100, 0x100, 0x10));
	CHECK(!be_ranges_check_2d(&rs, 0x1000, 0x100, 0x100, 0x11));
	CHECK(be_ranges_check_2d(&rs, 0x1000, 0x100, 0x80, 0x10)); /* last row ends early */
	/* 3D: 2 slices of 4 rows, 8 rows apart: rows 0-3 and 8-11 */
	CHECK(be_ranges_check_3d(&rs, 0x1000, 0x100, 8, 0x100, 4, 2));
	CHECK(!be_ranges_check_3d(&rs, 0x1000, 0x100, 16, 0x100, 4, 2)); /* second slice past the end */
	CHECK(!be_ranges_check_3d(&rs, 0x1000, 0x100, 3, 0x100, 4, 2));  /* slices overlap */
	CHECK(!be_ranges_check_3d(&rs, 0x1000, 0x100, UINT64_MAX / 2, 0x10, 1, 3)); /* wraps */
	CHECK(be_ranges_check_3d(&rs, 0x1000, 0, 0, 0x10, 1, 1));        /* one row: no pitch */
	CHECK(be_ranges_check_3d(&rs, 0x1000, 0x100, 8, 0x100, 4, 0));  /* empty */
	uint64_t ext;
	CHECK(be_extent_2d(0x100, 0x80, 0x10, &ext) && ext == 0xf80);
	CHECK(!be_extent_2d(UINT64_MAX, 1, 3, &ext));
	be_ranges_free(&rs);
}

static void test_zero_length(void)
{
	be_ranges rs;
	be_ranges_init(&rs);
	/* touches nothing: fine anywhere, even with nothing allocated */
	CHECK(be_ranges_check(&rs, 0, 0));
	CHECK(be_ranges_check(&rs, UINT64_MAX, 0));
	CHECK(be_ranges_check_2d(&rs, 0x1234, 0, 0, 5));
	CHECK(be_ranges_check_2d(&rs, 0x1234, 16, 16, 0));
	CHECK_EQ(be_ranges_add(&rs, 0x1000, 0, BE_RANGE_ALLOC), BE_R_EINVAL); /* empty ranges are not recorded */
	be_ranges_free(&rs);
}

static void test_add_remove(void)
{
	be_ranges rs;
	be_range r;
	be_ranges_init(&rs);
	CHECK_EQ(be_ranges_add(&rs, 0x3000, 0x100, BE_RANGE_ALLOC), BE_R_OK);
	CHECK_EQ(be_ranges_add(&rs, 0x1000, 0x100, BE_RANGE_ALLOC), BE_R_OK);
	CHECK_EQ(be_ranges_add(&rs, 0x2000, 0x80, BE_RANGE_VAR), BE_R_OK);
	CHECK_EQ(rs.bytes, 0x200); /* globals are not counted as allocations */
	/* overlaps: inside, over the start, over the end, covering */
	CHECK_EQ(be_ranges_add(&rs, 0x1010, 0x10, BE_RANGE_ALLOC), BE_R_OVERLAP);
	CHECK_EQ(be_ranges_add(&rs, 0xff0, 0x20, BE_RANGE_ALLOC), BE_R_OVERLAP);
	CHECK_EQ(be_ranges_add(&rs, 0x10f0, 0x20, BE_RANGE_ALLOC), BE_R_OVERLAP);
	CHECK_EQ(be_ranges_add(&rs, 0x800, 0x1000, BE_RANGE_ALLOC), BE_R_OVERLAP);
	CHECK(rs.r[0].base == 0x1000 && rs.r[1].base == 0x2000 && rs.r[2].base == 0x3000);

	CHECK(be_ranges_at(&rs, 0x1000) != NULL);
	CHECK(be_ranges_at(&rs, 0x1008) == NULL); /* interior is not a start */
	CHECK(be_ranges_at(&rs, 0x2000)->kind == BE_RANGE_VAR);
	CHECK_EQ(be_ranges_remove(&rs, 0x1008, NULL), BE_R_NOTFOUND);
	CHECK_EQ(be_ranges_remove(&rs, 0x1000, &r), BE_R_OK);
	CHECK(r.base == 0x1000 && r.size == 0x100);
	CHECK_EQ(be_ranges_remove(&rs, 0x1000, NULL), BE_R_NOTFOUND); /* double free */
	CHECK(!be_ranges_check(&rs, 0x1000, 1));                      /* use after free */
	CHECK_EQ(rs.bytes, 0x100);
	CHECK_EQ(rs.n, 2);

	/* many, in random order, then every one found */
	be_ranges_free(&rs);
	be_ranges_init(&rs);
	uint64_t x = 12345;
	int bad = 0;
	for (int i = 0; i < 5000; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		uint64_t slot = (x >> 33) % 100000;
		int r2 = be_ranges_add(&rs, slot * 0x1000, 0x800, BE_RANGE_ALLOC);
		bad += r2 != BE_R_OK && r2 != BE_R_OVERLAP;
	}
	for (size_t i = 0; i < rs.n; i++) {
		bad += !be_ranges_check(&rs, rs.r[i].base + 0x7ff, 1);
		bad += be_ranges_check(&rs, rs.r[i].base + 0x800, 1);
		if (i)
			bad += rs.r[i - 1].base >= rs.r[i].base;
	}
	CHECK_EQ(bad, 0);
	be_ranges_free(&rs);
}

/* Mapped ranges (cuMemMap) back to back are one virtual range; an allocation
 * next to one, a gap, or the end of the last one is not. */
static void test_mapped(void)
{
	be_ranges rs;
	be_ranges_init(&rs);
	CHECK_EQ(be_ranges_add(&rs, 0x1000, 0x100, BE_RANGE_MAPPED), BE_R_OK);
	CHECK_EQ(be_ranges_add(&rs, 0x1100, 0x100, BE_RANGE_MAPPED), BE_R_OK);
	CHECK_EQ(be_ranges_add(&rs, 0x1200, 0x100, BE_RANGE_MAPPED), BE_R_OK);
	CHECK_EQ(be_ranges_add(&rs, 0x1300, 0x100, BE_RANGE_ALLOC), BE_R_OK);
	CHECK_EQ(be_ranges_add(&rs, 0x2000, 0x100, BE_RANGE_MAPPED), BE_R_OK);
	CHECK_EQ(rs.bytes, 0x100); /* mapped memory is not the session's allocations */
	CHECK(be_ranges_check(&rs, 0x10f0, 0x20));   /* across one seam */
	CHECK(be_ranges_check(&rs, 0x1000, 0x300));  /* all three */
	CHECK(be_ranges_check(&rs, 0x1180, 0x180));  /* to the last byte of the third */
	CHECK(!be_ranges_check(&rs, 0x1000, 0x301)); /* into the allocation after them */
	CHECK(!be_ranges_check(&rs, 0x1200, 0x200));
	CHECK(!be_ranges_check(&rs, 0x12f0, 0x20));
	CHECK(!be_ranges_check(&rs, 0x20f0, 0x20));  /* past the last */
	CHECK(!be_ranges_check(&rs, 0x1000, UINT64_MAX));
	CHECK_EQ(be_ranges_remove(&rs, 0x1100, NULL), BE_R_OK); /* unmapped: a gap */
	CHECK(!be_ranges_check(&rs, 0x10f0, 0x20));
	CHECK(be_ranges_check(&rs, 0x1200, 0x100));
	CHECK_EQ(rs.bytes, 0x100);
	be_ranges_free(&rs);
}

int main(void)
{
	test_mapped();
	test_inside();
	test_straddle();
	test_overflow();
	test_zero_length();
	test_add_remove();
	return check_summary("test_ranges");
}
