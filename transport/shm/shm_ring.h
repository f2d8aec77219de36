/*
 * shm rings: the single-producer/single-consumer byte rings of the shm
 * transport, and the segment that holds them (shm_ring.c). No sockets, no
 * files: what is here is plain memory and atomics, so the unit tests and the
 * fuzz target drive it directly.
 *
 * A ring carries a byte stream (frames exactly as on tcp: proto.h header,
 * msgpack part, payload), one direction each: c2s (calls) and s2c (replies).
 * Each side keeps its own position privately (the producer its head, the
 * consumer its tail) and publishes it in the ring's control block; it reads
 * the other's once per look and never writes it. A look validates what it
 * read: a published position more than the ring's size away from ours is a
 * corrupt or hostile peer (SHM_RING_BAD), never an index into memory. So the
 * server, which reads the client's head and tail, never touches memory outside
 * the ring, whatever the client writes into the shared pages (it can write
 * anything, at any time: every value is read once into a local and used from
 * there).
 *
 * Ordering (C11): the producer copies bytes in, then stores head with release;
 * the consumer loads head with acquire, then copies the bytes out, then stores
 * tail with release; the producer loads tail with acquire before it reuses
 * the space. Sleeping uses a flag per side and a sequentially consistent fence
 * between "announce" and "look again" on both sides (store head / fence / read
 * the consumer's sleep flag, against store sleep flag / fence / read head), so
 * one of the two always sees the other: no lost wake-up. A flag set means:
 * the other side wants a wake-up (a doorbell byte on the socket for a sleeping
 * consumer, a futex wake on tail for a producer waiting for space). The flags
 * only ever cost the peer who lies about them its own wake-ups.
 *
 * Positions are free-running 32-bit counters (ring sizes are powers of two up
 * to 1 GiB), so head - tail is the number of bytes in the ring, modulo 2^32.
 */
#ifndef SHM_RING_H
#define SHM_RING_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define SHM_RING_MIN (64u * 1024)
#define SHM_RING_MAX (1u << 30)
#define SHM_RING_BAD ((size_t)-1) /* a published position out of range */

/* One ring's control block in the segment. head and tail on cache lines of
 * their own: producer and consumer write them from different cores. */
typedef struct shm_ring_ctl {
	_Alignas(64) _Atomic uint32_t head; /* producer: bytes written */
	_Atomic uint32_t cons_sleep;        /* consumer: asleep, wants a doorbell */
	_Alignas(64) _Atomic uint32_t tail; /* consumer: bytes consumed (a futex word) */
	_Atomic uint32_t prod_wait;         /* producer: waits for space on tail */
	_Alignas(64) uint8_t pad[64];
} shm_ring_ctl;

/* A process's private view of one ring. Nothing here is read back from the
 * shared pages: ctl and data point into them, size and pos are ours. */
typedef struct shm_ring {
	shm_ring_ctl *ctl;
	uint8_t *data;
	uint32_t size; /* a power of two */
	uint32_t pos;  /* producer: our head; consumer: our tail */
} shm_ring;

/* The segment: a header page (what the server set up, for the client's
 * checks), the two control blocks, then c2s data and s2c data. */
#define SHM_SEG_MAGIC 0x52474d53u /* "SMGR" */
#define SHM_SEG_VERSION 1u
#define SHM_SEG_HDR 4096u
typedef struct shm_seg_hdr {
	uint32_t magic, version, ring_size, reserved;
	shm_ring_ctl c2s, s2c;
} shm_seg_hdr;

/* Bytes a segment of rings of ring_size takes. */
static inline size_t shm_seg_size(uint32_t ring_size) { return SHM_SEG_HDR + 2 * (size_t)ring_size; }
/* Whether ring_size is one this transport makes or accepts. */
int tp_shm_ring_size_ok(uint32_t ring_size);
/* Server: writes the header into a fresh (zeroed) segment. */
void tp_shm_seg_format(void *base, uint32_t ring_size);
/* Both: views of the two rings of a segment of ring_size at base (the size is
 * the caller's own: the server's setting, or what the client checked). */
void tp_shm_seg_rings(void *base, uint32_t ring_size, shm_ring *c2s, shm_ring *s2c);

/* ---- producer ---- */

/* Free bytes (0..size), or SHM_RING_BAD when the consumer's tail is not within
 * size bytes behind our head. */
size_t tp_shm_ring_space(shm_ring *r);
/* Copies n bytes (n <= what tp_shm_ring_space said) in at our head; the consumer
 * sees them after tp_shm_ring_publish. */
void tp_shm_ring_put(shm_ring *r, const void *src, size_t n);
/* Publishes our head. Returns 1 when the consumer was asleep and wants a
 * doorbell (its flag is cleared: one doorbell per sleep). */
int tp_shm_ring_publish(shm_ring *r);
/* Before sleeping until space frees: sets prod_wait, then looks again.
 * Returns the space as tp_shm_ring_space does: sleep only when it is still 0
 * (futex_wait on &ctl->tail with the tail value *seen). */
size_t tp_shm_ring_wait_prepare(shm_ring *r, uint32_t *seen);

/* ---- consumer ---- */

/* Bytes to read (0..size), or SHM_RING_BAD when the producer's head is not
 * within size bytes ahead of our tail. */
size_t tp_shm_ring_avail(shm_ring *r);
/* Copies n bytes (n <= what tp_shm_ring_avail said) out at our tail (dst NULL:
 * skips them). The space is the producer's again after tp_shm_ring_release. */
void tp_shm_ring_get(shm_ring *r, void *dst, size_t n);
/* Publishes our tail. Returns 1 when the producer waits for space and wants a
 * futex wake on &ctl->tail (its flag is cleared). */
int tp_shm_ring_release(shm_ring *r);
/* Before sleeping until bytes come: sets cons_sleep, then looks again.
 * Returns what tp_shm_ring_avail does: sleep only on 0. */
size_t tp_shm_ring_sleep_prepare(shm_ring *r);
/* Awake again without a doorbell (bytes were found): clear our flag. */
void tp_shm_ring_sleep_cancel(shm_ring *r);

/* ---- futex on a shared word (not FUTEX_PRIVATE: the two sides are two
 * processes). wait returns after a wake, a change of *w from val, or ms. */
void tp_shm_futex_wait(_Atomic uint32_t *w, uint32_t val, int ms);
void tp_shm_futex_wake(_Atomic uint32_t *w);

#endif
