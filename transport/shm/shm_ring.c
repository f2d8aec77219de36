/* The shm transport's rings and segment layout (shm_ring.h has the design). */
#include "shm_ring.h"

#include <linux/futex.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

_Static_assert(sizeof(shm_seg_hdr) <= SHM_SEG_HDR, "segment header exceeds its page");

int tp_shm_ring_size_ok(uint32_t ring_size)
{
	return ring_size >= SHM_RING_MIN && ring_size <= SHM_RING_MAX && (ring_size & (ring_size - 1)) == 0;
}

void tp_shm_seg_format(void *base, uint32_t ring_size)
{
	shm_seg_hdr *h = base;
	h->magic = SHM_SEG_MAGIC;
	h->version = SHM_SEG_VERSION;
	h->ring_size = ring_size;
	atomic_init(&h->c2s.head, 0);
	atomic_init(&h->c2s.tail, 0);
	atomic_init(&h->c2s.cons_sleep, 0);
	atomic_init(&h->c2s.prod_wait, 0);
	atomic_init(&h->s2c.head, 0);
	atomic_init(&h->s2c.tail, 0);
	atomic_init(&h->s2c.cons_sleep, 0);
	atomic_init(&h->s2c.prod_wait, 0);
}

void tp_shm_seg_rings(void *base, uint32_t ring_size, shm_ring *c2s, shm_ring *s2c)
{
	shm_seg_hdr *h = base;
	uint8_t *b = base;
	*c2s = (shm_ring){.ctl = &h->c2s, .data = b + SHM_SEG_HDR, .size = ring_size};
	*s2c = (shm_ring){.ctl = &h->s2c, .data = b + SHM_SEG_HDR + ring_size, .size = ring_size};
}

/* ---- producer ---- */

static size_t space_of(const shm_ring *r, uint32_t tail)
{
	uint32_t used = r->pos - tail;
	return used > r->size ? SHM_RING_BAD : (size_t)(r->size - used);
}

size_t tp_shm_ring_space(shm_ring *r)
{
	return space_of(r, atomic_load_explicit(&r->ctl->tail, memory_order_acquire));
}

/* Copies across the end of the data area in two pieces; at is masked, so no
 * byte outside [data, data + size) is touched whatever pos holds. */
void tp_shm_ring_put(shm_ring *r, const void *src, size_t n)
{
	uint32_t at = r->pos & (r->size - 1);
	size_t first = r->size - at;
	if (first > n)
		first = n;
	memcpy(r->data + at, src, first);
	memcpy(r->data, (const uint8_t *)src + first, n - first);
	r->pos += (uint32_t)n;
}

int tp_shm_ring_publish(shm_ring *r)
{
	atomic_store_explicit(&r->ctl->head, r->pos, memory_order_release);
	atomic_thread_fence(memory_order_seq_cst);
	if (!atomic_load_explicit(&r->ctl->cons_sleep, memory_order_relaxed))
		return 0;
	return atomic_exchange_explicit(&r->ctl->cons_sleep, 0, memory_order_relaxed) != 0;
}

size_t tp_shm_ring_wait_prepare(shm_ring *r, uint32_t *seen)
{
	atomic_store_explicit(&r->ctl->prod_wait, 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_seq_cst);
	*seen = atomic_load_explicit(&r->ctl->tail, memory_order_acquire);
	return space_of(r, *seen);
}

/* ---- consumer ---- */

size_t tp_shm_ring_avail(shm_ring *r)
{
	uint32_t n = atomic_load_explicit(&r->ctl->head, memory_order_acquire) - r->pos;
	return n > r->size ? SHM_RING_BAD : (size_t)n;
}

void tp_shm_ring_get(shm_ring *r, void *dst, size_t n)
{
	if (dst) {
		uint32_t at = r->pos & (r->size - 1);
		size_t first = r->size - at;
		if (first > n)
			first = n;
		memcpy(dst, r->data + at, first);
		memcpy((uint8_t *)dst + first, r->data, n - first);
	}
	r->pos += (uint32_t)n;
}

int tp_shm_ring_release(shm_ring *r)
{
	atomic_store_explicit(&r->ctl->tail, r->pos, memory_order_release);
	atomic_thread_fence(memory_order_seq_cst);
	if (!atomic_load_explicit(&r->ctl->prod_wait, memory_order_relaxed))
		return 0;
	return atomic_exchange_explicit(&r->ctl->prod_wait, 0, memory_order_relaxed) != 0;
}

size_t tp_shm_ring_sleep_prepare(shm_ring *r)
{
	atomic_store_explicit(&r->ctl->cons_sleep, 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_seq_cst);
	return tp_shm_ring_avail(r);
}

void tp_shm_ring_sleep_cancel(shm_ring *r) { atomic_store_explicit(&r->ctl->cons_sleep, 0, memory_order_relaxed); }

/* ---- futex ---- */

void tp_shm_futex_wait(_Atomic uint32_t *w, uint32_t val, int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
	syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT, val, &ts, NULL, 0);
}

void tp_shm_futex_wake(_Atomic uint32_t *w) { syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE, 0x7fffffff, NULL, NULL, 0); }
