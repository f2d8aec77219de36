/*
 * Counts the blocks a unit test's code has live, for tests linked with
 * -Wl,--wrap=calloc,--wrap=realloc,--wrap=free (every call in the test's own
 * objects goes through these; the C library's inner allocations do not), and
 * fails the next calloc or realloc on demand. Include it in one file of a test.
 */
#ifndef RG_ALLOC_COUNT_H
#define RG_ALLOC_COUNT_H

#include <stdatomic.h>
#include <stddef.h>

void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
void __real_free(void *p);

static atomic_long alloc_blocks; /* live: allocated and not yet freed */
static atomic_int alloc_fail_next; /* set: the next calloc or realloc returns NULL */

void *__wrap_calloc(size_t n, size_t size)
{
	if (atomic_exchange(&alloc_fail_next, 0))
		return NULL;
	void *p = __real_calloc(n, size);
	if (p)
		atomic_fetch_add(&alloc_blocks, 1);
	return p;
}

void *__wrap_realloc(void *p, size_t size)
{
	if (atomic_exchange(&alloc_fail_next, 0))
		return NULL;
	void *q = __real_realloc(p, size);
	if (q && !p)
		atomic_fetch_add(&alloc_blocks, 1);
	return q;
}

void __wrap_free(void *p)
{
	if (p)
		atomic_fetch_sub(&alloc_blocks, 1);
	__real_free(p);
}

#endif
