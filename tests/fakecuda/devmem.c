/*
 * devmem.c: where "device memory" lives: an address range of its own, apart
 * from every host heap, as a GPU's memory is in the unified address space.
 *
 * Why: the fake's device memory used to come from posix_memalign. Under ASan
 * that is ASan's heap, which sits at the same fixed addresses in every process
 * (0x6000'0000'0000...), so a client's own host buffers could carry the same
 * numbers as device pointers the server handed out, and libremote.so took a
 * host pointer for a device one. On a real GPU the two never overlap.
 *
 * The arena is one PROT_NONE, MAP_NORESERVE mapping of FK_ARENA_SIZE, placed
 * at FK_ARENA_HINT if that range is free (MAP_FIXED_NOREPLACE): above ASan's
 * allocator space (0x6000'0000'0000 + 4 TiB) and its shadow, below where the
 * kernel puts mmaps and libraries (0x7exx'.. to 0x7fff'..). If the range is
 * taken, the kernel places it anywhere: still an mmap region no malloc uses.
 * FAKECUDA_ARENA_SLOT=N (0-12) places it N TiB lower: two servers of one client
 * then hand out distinct addresses, as two GPU processes usually do (their
 * driver's address space is placed by ASLR), so a test can tell their devices'
 * memory apart in the client.
 *
 * An allocation takes whole pages plus one guard page after them, and its data
 * ends at the end of its last page (its base stays FK_ALIGN-aligned because its
 * charged size is a multiple of FK_ALIGN), so a write past the charged size
 * faults, as ASan reported it when the memory came from its heap. Only the
 * data pages are made accessible; freeing maps fresh PROT_NONE pages over them,
 * which gives the memory back to the kernel. Free extents are kept in one
 * address-sorted array, first fit, merged on free. Callers hold fk_mu.
 */
#define _GNU_SOURCE
#include "fake.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define FK_ARENA_HINT ((uintptr_t)0x7d0000000000ull)
#define FK_ARENA_SIZE ((size_t)1 << 40) /* 1 TiB of addresses, no memory */

typedef struct fk_extent {
	uintptr_t base;
	size_t size;
} fk_extent;

static uintptr_t arena_base;
static size_t arena_size, page_size;
static fk_extent *frees; /* sorted by base, none adjacent */
static size_t nfrees, capfrees;

static int arena_init(void);
static int extent_insert(size_t i, uintptr_t base, size_t size);

static int arena_init(void)
{
	if (arena_base)
		return 0;
	page_size = (size_t)sysconf(_SC_PAGESIZE);
	int prot = PROT_NONE, flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
	const char *slot_s = getenv("FAKECUDA_ARENA_SLOT");
	unsigned long slot = slot_s ? strtoul(slot_s, NULL, 10) : 0;
	uintptr_t hint = FK_ARENA_HINT - (slot <= 12 ? slot : 0) * (uintptr_t)FK_ARENA_SIZE;
	void *p = mmap((void *)hint, FK_ARENA_SIZE, prot, flags | MAP_FIXED_NOREPLACE, -1, 0);
	if (p == MAP_FAILED) /* range taken (EEXIST), or not allowed: let the kernel choose */
		p = mmap(NULL, FK_ARENA_SIZE, prot, flags, -1, 0);
	if (p == MAP_FAILED) {
		fprintf(stderr, "fakecuda: cannot reserve %zu bytes of device addresses: %s\n",
		        FK_ARENA_SIZE, strerror(errno));
		return -1;
	}
	arena_base = (uintptr_t)p;
	arena_size = FK_ARENA_SIZE;
	if (extent_insert(0, arena_base, arena_size) != 0) {
		munmap(p, FK_ARENA_SIZE);
		arena_base = 0;
		return -1;
	}
	return 0;
}

static int extent_insert(size_t i, uintptr_t base, size_t size)
{
	if (nfrees == capfrees) {
		size_t cap = capfrees ? capfrees * 2 : 64;
		fk_extent *e = realloc(frees, cap * sizeof *e);
		if (!e)
			return -1;
		frees = e;
		capfrees = cap;
	}
	memmove(&frees[i + 1], &frees[i], (nfrees - i) * sizeof *frees);
	frees[i] = (fk_extent){ base, size };
	nfrees++;
	return 0;
}

/* Pages of an allocation of charged bytes: its data pages and one guard page. */
static size_t span_of(size_t charged, size_t *data)
{
	*data = (charged + page_size - 1) & ~(page_size - 1);
	return *data + page_size;
}

uintptr_t fk_devmem_alloc(size_t charged)
{
	if (charged == 0 || charged % FK_ALIGN || arena_init() != 0 || charged > arena_size)
		return 0;
	size_t data, span = span_of(charged, &data);
	for (size_t i = 0; i < nfrees; i++) {
		if (frees[i].size < span)
			continue;
		uintptr_t start = frees[i].base;
		if (mprotect((void *)start, data, PROT_READ | PROT_WRITE) != 0)
			return 0; /* out of memory for page tables or map count */
		frees[i].base += span;
		frees[i].size -= span;
		if (frees[i].size == 0) {
			memmove(&frees[i], &frees[i + 1], (nfrees - i - 1) * sizeof *frees);
			nfrees--;
		}
		return start + data - charged;
	}
	return 0;
}

void fk_devmem_free(uintptr_t base, size_t charged)
{
	size_t data, span = span_of(charged, &data);
	uintptr_t start = base & ~(uintptr_t)(page_size - 1);

	if (!arena_base || start < arena_base || start - arena_base > arena_size - span)
		abort(); /* not ours: a broken invariant of memory.c */
	/* Fresh PROT_NONE pages over the data: the memory goes back to the kernel and
	 * a use after free faults. */
	if (mmap((void *)start, data, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED,
	         -1, 0) == MAP_FAILED)
		abort();
	size_t i = 0;
	while (i < nfrees && frees[i].base < start)
		i++;
	int prev = i > 0 && frees[i - 1].base + frees[i - 1].size == start;
	int next = i < nfrees && start + span == frees[i].base;
	if (prev && next) {
		frees[i - 1].size += span + frees[i].size;
		memmove(&frees[i], &frees[i + 1], (nfrees - i - 1) * sizeof *frees);
		nfrees--;
	} else if (prev) {
		frees[i - 1].size += span;
	} else if (next) {
		frees[i].base = start;
		frees[i].size += span;
	} else if (extent_insert(i, start, span) != 0) {
		/* No room to record it: the addresses stay unused, nothing else is lost. */
	}
}
