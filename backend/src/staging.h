/*
 * Pinned staging memory of one session: where H2D payloads are received and D2H
 * results are copied before they go out, so the DMA engine reads and writes
 * page-locked memory and async copies stay async.
 *
 *  - chunks: up to max_chunks buffers of chunk_size bytes (cuMemHostAlloc),
 *    for copies that fit in one;
 *  - big: up to BE_STAGING_BIGS larger pinned buffers, each grown to the
 *    copy that found none large enough (up to big_max) and reused by one
 *    large copy at a time, the smallest idle one that fits. The second is
 *    allocated only once two large copies overlapped: back-to-back large H2D
 *    copies do (the next one's bytes arrive while the device still reads the
 *    last one's).
 * A session keeps at most max_chunks * chunk_size + BE_STAGING_BIGS * big_max
 * bytes pinned, whoever allocates them.
 *
 * Taking is thread-safe. The loop thread takes buffers for payloads it is
 * about to receive (be_staging_take_nb) and must never block, so when nothing
 * pinned fits it gets malloc'd memory (a page fault per 4 KiB while receiving,
 * then the driver's own staging for pageable memory; counted in fallbacks).
 * It also records the shortfall, and the executor, which owns the context,
 * allocates more pinned memory afterwards (be_staging_grow, at most one big
 * buffer per call): the pool grows lazily to what the traffic needs, never
 * on the loop thread. Threads that may wait and allocate (a stripe
 * connection's, which receives a striped copy's bytes, and the executor)
 * take large buffers with be_staging_take_wait instead, which regrows a big
 * buffer itself when no idle one fits: after a jump in size the first copy
 * lands in pinned memory, and the first that overlaps it pins the second.
 *
 * The chunks and the big buffer live as long as the session, so they are also
 * registered with its connection (be_staging_set_conn): over RDMA the peer then
 * reads D2H results straight from them and H2D payloads are read straight into
 * them, with no copy through the transport's bounce and landing rings. Buffers
 * for one copy (BE_BUF_PINNED, BE_BUF_MALLOC) are not: registering costs more
 * than the copy it would save.
 */
#ifndef BE_STAGING_H
#define BE_STAGING_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda.h>

#include "transport.h"

enum be_buf_kind {
	BE_BUF_NONE = 0,
	BE_BUF_CHUNK,  /* a pool chunk */
	BE_BUF_BIG,    /* a big buffer */
	BE_BUF_PINNED, /* cuMemHostAlloc'd for one copy */
	BE_BUF_MALLOC, /* pageable */
};

typedef struct be_buf {
	void *p;
	size_t cap;
	int kind;
} be_buf;

#define BE_STAGING_BIGS 2
#define BE_STAGING_RETRY_MS 1000 /* takers do not allocate again this soon after a failure */

typedef struct be_staging {
	pthread_mutex_t mu;
	pthread_cond_t idle; /* a big buffer went idle (be_staging_take_wait) */
	size_t chunk_size, big_max;
	unsigned max_chunks, nchunks, nfree, want_chunks;
	void **all;  /* nchunks allocated chunks (for the final free) */
	void **free; /* nfree of them idle */
	transport_mr **mrs; /* registrations of all[] (NULL: none) */
	void *big[BE_STAGING_BIGS]; /* NULL: not allocated */
	transport_mr *big_mr[BE_STAGING_BIGS];
	size_t big_cap[BE_STAGING_BIGS], want_big;
	transport_conn *conn; /* registers chunks and the big buffers (NULL: none) */
	int big_busy[BE_STAGING_BIGS];
	uint64_t failed_ns; /* rg_clock_ns of the last failed big allocation (0: none) */
	/* statistics */
	uint64_t fallbacks;
} be_staging;

int be_staging_init(be_staging *st, size_t chunk_size, unsigned max_chunks, size_t big_max);
/* Before the first allocation: register long-lived buffers with conn. */
void be_staging_set_conn(be_staging *st, transport_conn *conn);
/* Executor, with the context current: allocates what takers found missing (and
 * at least min_chunks chunks in all). Cheap when nothing is missing. */
void be_staging_grow(be_staging *st, unsigned min_chunks);
/* Any thread, never blocks: a chunk or a big buffer when one is idle and fits,
 * else malloc'd memory (BE_BUF_MALLOC). len 0 gives BE_BUF_NONE. Returns 0, or
 * -1 when even malloc failed. */
int be_staging_take_nb(be_staging *st, size_t len, be_buf *out);
/* A thread that may wait and allocate (a stripe connection's, stripe.h; the
 * executor with ms 0): as take_nb, but a copy larger than a chunk and at most
 * big_max lands in pinned memory whenever that can be had within ms: an idle
 * big buffer that fits, else an idle or empty slot regrown here to len bytes
 * with ctx made current (NULL: the caller's is); while every slot is busy,
 * it waits up to ms for one to go idle (a large H2D copy's device copy out of
 * it takes milliseconds). Malloc'd memory only when every slot stayed busy or
 * the allocation failed (then takers allocate again only after
 * BE_STAGING_RETRY_MS). Never BE_BUF_PINNED, so any thread may release it. */
int be_staging_take_wait(be_staging *st, size_t len, unsigned ms, CUcontext ctx, be_buf *out);
/* Any thread, never blocks: an idle chunk or big buffer that fits (0), or
 * -1 (then it counts what was missing for the next grow). */
int be_staging_take_idle(be_staging *st, size_t len, be_buf *out);
/* Executor (context current): the same, but allocates pinned memory rather
 * than malloc when nothing idle fits: a new pool chunk while the pool may grow,
 * a big buffer (re)grown in an idle or empty slot, else a buffer for this copy
 * alone (BE_BUF_PINNED); malloc only if that fails. */
int be_staging_take(be_staging *st, size_t len, be_buf *out);
/* Any thread; a BE_BUF_PINNED buffer needs the context current. Resets *b. */
void be_staging_release(be_staging *st, be_buf *b);
/* Executor, context current, every buffer released: frees all. */
void be_staging_destroy(be_staging *st);

#endif
