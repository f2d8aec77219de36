/*
 * The frontend's map of the memory it knows (frontend/src/mem_ranges.c), built
 * into this test on its own: adding, finding (inside, past the end, a range of
 * size 0), overlaps, removing (the oldest of two ranges at one base first),
 * cuMemMap'd ranges back to back as one virtual range, kinds, the checks
 * copies make of a device side, and what a session's end and a fork forget.
 */
#include <stdint.h>

#include "check.h"
#include "rt.h"
#include "stats.h"

/* What mem_ranges.c needs from the rest of libremote.so. */
int fe_obs_on;
static int64_t obs_mem[4];
void fe_obs_mem(int device, int64_t delta) { obs_mem[device] += delta; }
static fe_rt_forget_fn forget_fn;
void fe_rt_on_forget(fe_rt_forget_fn fn) { forget_fn = fn; }

#define MiB (1ull << 20)
#define BASE 0x7f0000000000ull

static void clear(void)
{
	fe_range r[64];
	size_t n = fe_mem_snapshot(r, 64);
	for (size_t i = 0; i < n; i++)
		fe_mem_remove(r[i].base, r[i].kind, NULL);
	CHECK_EQ(fe_mem_snapshot(NULL, 0), 0);
}

static void test_add_find(void)
{
	fe_range r;
	fe_mem_add(BASE + 4 * MiB, MiB, FE_MEM_DEVICE, 1);
	fe_mem_add(BASE, MiB, FE_MEM_DEVICE, 0); /* out of order: the array stays sorted */
	fe_mem_add(BASE + 2 * MiB, MiB, FE_MEM_HOST_PINNED, 0);
	CHECK_EQ(fe_mem_snapshot(NULL, 0), 3);
	fe_range s[3];
	fe_mem_snapshot(s, 3);
	CHECK(s[0].base < s[1].base && s[1].base < s[2].base);
	CHECK(s[0].id != s[1].id && s[1].id != s[2].id && s[0].id != s[2].id);

	CHECK_EQ(fe_mem_find(BASE, MiB, &r), 0);
	CHECK_EQ(r.base, BASE);
	CHECK_EQ(r.kind, FE_MEM_DEVICE);
	CHECK_EQ(fe_mem_find(BASE + 100, 10, &r), 0);
	CHECK_EQ(r.base, BASE);
	CHECK_EQ(fe_mem_find(BASE + MiB - 1, 1, NULL), 0);
	CHECK_EQ(fe_mem_find(BASE + MiB - 1, 2, &r), 1); /* starts inside, runs past the end */
	CHECK_EQ(r.base, BASE);
	CHECK_EQ(fe_mem_find(BASE + MiB, 1, NULL), -1); /* the gap */
	CHECK_EQ(fe_mem_find(BASE - 1, 1, NULL), -1);   /* before every range */
	CHECK_EQ(fe_mem_find(BASE + 2 * MiB + 5, 5, &r), 0);
	CHECK_EQ(r.kind, FE_MEM_HOST_PINNED);
	CHECK_EQ(fe_mem_find(BASE + 5 * MiB - 1, 1, &r), 0);
	CHECK_EQ(r.device, 1);
	CHECK_EQ(fe_mem_find(BASE + 5 * MiB, 1, NULL), -1); /* past the last */
	clear();
}

static void test_size_zero(void)
{
	/* cudaMalloc(&p, 0) may give an address: p itself is found, nothing after it */
	fe_mem_add(BASE, 0, FE_MEM_DEVICE, 0);
	CHECK_EQ(fe_mem_find(BASE, 0, NULL), 0);
	CHECK_EQ(fe_mem_find(BASE, 1, NULL), 1);
	CHECK_EQ(fe_mem_find(BASE + 1, 0, NULL), -1);
	clear();
}

static void test_overlap(void)
{
	fe_range r;
	fe_mem_add(BASE + MiB, MiB, FE_MEM_DEVICE, 0);
	CHECK_EQ(fe_mem_overlap(BASE, MiB, NULL), -1);     /* ends where it begins */
	CHECK_EQ(fe_mem_overlap(BASE, MiB + 1, &r), 0);    /* its first byte */
	CHECK_EQ(r.base, BASE + MiB);
	CHECK_EQ(fe_mem_overlap(BASE + 2 * MiB - 1, 10, NULL), 0); /* its last byte */
	CHECK_EQ(fe_mem_overlap(BASE + 2 * MiB, 10, NULL), -1);
	CHECK_EQ(fe_mem_overlap(BASE, 8 * MiB, NULL), 0);  /* all of it */
	CHECK_EQ(fe_mem_overlap(BASE + MiB + 8, 8, NULL), 0); /* inside */
	clear();
}

static void test_remove(void)
{
	fe_range r;
	fe_mem_add(BASE, MiB, FE_MEM_DEVICE, 0);
	CHECK_EQ(fe_mem_remove(BASE + 1, FE_MEM_DEVICE, NULL), -1);       /* not a base */
	CHECK_EQ(fe_mem_remove(BASE, FE_MEM_HOST_PINNED, NULL), -1);      /* another kind */
	CHECK_EQ(fe_mem_snapshot(NULL, 0), 1);
	/* another thread's allocation at the same address before the free forgot it:
	 * the oldest goes first */
	fe_mem_add_tagged(BASE, 2 * MiB, FE_MEM_DEVICE, 0, 0x1234, 0);
	CHECK_EQ(fe_mem_remove(BASE, FE_MEM_DEVICE, &r), 0);
	CHECK_EQ(r.size, MiB);
	CHECK_EQ(fe_mem_find(BASE, 1, &r), 0);
	CHECK_EQ(r.size, 2 * MiB);
	CHECK_EQ(r.pool, 0x1234);
	CHECK_EQ(fe_mem_remove(BASE, FE_MEM_DEVICE, NULL), 0);
	CHECK_EQ(fe_mem_remove(BASE, FE_MEM_DEVICE, NULL), -1);
	CHECK_EQ(fe_mem_find(BASE, 1, NULL), -1);
	clear();
}

static void test_vmm(void)
{
	/* three mappings back to back in one reservation, then a gap, then a fourth */
	for (int i = 0; i < 3; i++)
		fe_mem_add_tagged(BASE + i * MiB, MiB, FE_MEM_DEVICE, 0, 0, FE_MEM_VMM);
	fe_mem_add_tagged(BASE + 4 * MiB, MiB, FE_MEM_DEVICE, 0, 0, FE_MEM_VMM);
	fe_range r;
	CHECK_EQ(fe_mem_find(BASE, 3 * MiB, &r), 0); /* one virtual range */
	CHECK_EQ(r.base, BASE);                      /* reported: the first mapping */
	CHECK_EQ(fe_mem_find(BASE + MiB / 2, 2 * MiB, NULL), 0);
	CHECK_EQ(fe_mem_find(BASE + MiB, 2 * MiB, &r), 0);
	CHECK_EQ(r.base, BASE + MiB);
	CHECK_EQ(fe_mem_find(BASE, 3 * MiB + 1, NULL), 1); /* into the gap */
	CHECK_EQ(fe_mem_find(BASE, 5 * MiB, NULL), 1);
	clear();

	/* plain allocations back to back are not one range, nor a mapping followed
	 * by a plain allocation */
	fe_mem_add(BASE, MiB, FE_MEM_DEVICE, 0);
	fe_mem_add(BASE + MiB, MiB, FE_MEM_DEVICE, 0);
	CHECK_EQ(fe_mem_find(BASE, 2 * MiB, NULL), 1);
	clear();
	fe_mem_add_tagged(BASE, MiB, FE_MEM_DEVICE, 0, 0, FE_MEM_VMM);
	fe_mem_add(BASE + MiB, MiB, FE_MEM_DEVICE, 0);
	CHECK_EQ(fe_mem_find(BASE, 2 * MiB, NULL), 1);
	clear();
}

static void test_forget_and_obs(void)
{
	fe_obs_on = 1;
	fe_mem_add(BASE, MiB, FE_MEM_DEVICE, 0);
	fe_mem_add(BASE + MiB, 2 * MiB, FE_MEM_DEVICE, 1);
	fe_mem_add(BASE + 4 * MiB, MiB, FE_MEM_HOST_PINNED, 0);
	fe_mem_add(BASE + 6 * MiB, MiB, FE_MEM_HOST_REGISTERED, 1);
	fe_mem_add(BASE + 8 * MiB, MiB, FE_MEM_MANAGED, 0);
	CHECK_EQ(obs_mem[0], MiB); /* device memory only is counted */
	CHECK_EQ(obs_mem[1], 2 * MiB);
	if (!CHECK(forget_fn != NULL))
		return;
	forget_fn(1); /* device 1's session ended: its ranges go, host ones too */
	CHECK_EQ(obs_mem[1], 0);
	CHECK_EQ(fe_mem_find(BASE + MiB, 1, NULL), -1);
	CHECK_EQ(fe_mem_find(BASE + 6 * MiB, 1, NULL), -1);
	CHECK_EQ(fe_mem_snapshot(NULL, 0), 3);
	forget_fn(FE_RT_FORK); /* the child after fork keeps its host memory only */
	fe_range r;
	CHECK_EQ(fe_mem_snapshot(NULL, 0), 1);
	CHECK_EQ(fe_mem_find(BASE + 4 * MiB, 1, &r), 0);
	CHECK_EQ(r.kind, FE_MEM_HOST_PINNED);
	CHECK_EQ(fe_mem_remove(BASE + 4 * MiB, FE_MEM_HOST_PINNED, NULL), 0);
	fe_mem_add(BASE, MiB, FE_MEM_DEVICE, 0);
	CHECK_EQ(fe_mem_remove(BASE, FE_MEM_DEVICE, NULL), 0);
	fe_obs_on = 0;
	clear();
}

static void test_many(void)
{
	/* past the first growth of the array (64), added in reverse order */
	for (int i = 199; i >= 0; i--)
		fe_mem_add(BASE + (uint64_t)i * 2 * MiB, MiB, FE_MEM_DEVICE, 0);
	int ok = 1;
	for (int i = 0; i < 200; i++) {
		fe_range r;
		ok &= fe_mem_find(BASE + (uint64_t)i * 2 * MiB + 7, 8, &r) == 0 && r.base == BASE + (uint64_t)i * 2 * MiB;
		ok &= fe_mem_find(BASE + (uint64_t)i * 2 * MiB + MiB, 1, NULL) == -1;
	}
	CHECK(ok);
	for (int i = 0; i < 200; i += 2)
		fe_mem_remove(BASE + (uint64_t)i * 2 * MiB, FE_MEM_DEVICE, NULL);
	CHECK_EQ(fe_mem_snapshot(NULL, 0), 100);
	CHECK_EQ(fe_mem_find(BASE + 2 * MiB, 1, NULL), 0);
	CHECK_EQ(fe_mem_find(BASE, 1, NULL), -1);
	for (int i = 1; i < 200; i += 2)
		fe_mem_remove(BASE + (uint64_t)i * 2 * MiB, FE_MEM_DEVICE, NULL);
	CHECK_EQ(fe_mem_snapshot(NULL, 0), 0);
}

/* fe_mem_kind, fe_mem_device_ok: what a copy may touch on the device side. */
static void test_device_ok(void)
{
	fe_mem_add(BASE, MiB, FE_MEM_DEVICE, 0);
	fe_mem_add(BASE + 2 * MiB, MiB, FE_MEM_HOST_PINNED, 0);
	fe_mem_add(BASE + 4 * MiB, MiB, FE_MEM_MODULE, 0);
	fe_mem_add(BASE + 6 * MiB, MiB, FE_MEM_MANAGED, 0);
	CHECK_EQ(fe_mem_kind((void *)(uintptr_t)(BASE + 5)), FE_MEM_DEVICE);
	CHECK_EQ(fe_mem_kind((void *)(uintptr_t)(BASE + 2 * MiB)), FE_MEM_HOST_PINNED);
	CHECK_EQ(fe_mem_kind((void *)(uintptr_t)(BASE + MiB)), 0); /* the gap */
	CHECK_EQ(fe_mem_device_ok((void *)(uintptr_t)BASE, MiB), 1);
	CHECK_EQ(fe_mem_device_ok((void *)(uintptr_t)(BASE + 1), MiB), 0); /* runs past the end */
	CHECK_EQ(fe_mem_device_ok((void *)(uintptr_t)(BASE + 2 * MiB), 16), 0); /* pinned: not device memory */
	CHECK_EQ(fe_mem_device_ok((void *)(uintptr_t)(BASE + 4 * MiB), 16), 1); /* a module global */
	CHECK_EQ(fe_mem_device_ok((void *)(uintptr_t)(BASE + 6 * MiB), MiB), 1); /* managed */
	CHECK_EQ(fe_mem_device_ok((void *)(uintptr_t)(BASE + 8 * MiB), 1), 0); /* in no allocation */
	clear();
}

int main(void)
{
	test_add_find();
	test_size_zero();
	test_overlap();
	test_remove();
	test_vmm();
	test_device_ok();
	test_forget_and_obs();
	test_many();
	return check_summary("test_mem_ranges");
}
