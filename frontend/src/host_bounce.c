/*
 * Synchronous copies of pageable memory over shm, one memcpy fewer, pipelined.
 *
 * Through the rings a copy of pageable memory costs two memcpys before the
 * DMA (the program's buffer into the ring, the ring into the server's
 * pinned staging) and two after it the other way. Over shm each channel
 * instead gets a bounce buffer: a shared region of slots that its server
 * registered with the driver (host_region.c), so the host side of the copy
 * is one memcpy between the program's buffer and a slot, and the server's
 * DMA reads or writes the slot in place.
 *
 * Pipeline. The copy goes in chunks of one slot each, and every chunk is a
 * memcpy_*_region_wait frame, answered once its DMA is done (in stream
 * order, so in order). To the device: chunk i is copied into its slot and
 * sent; before a slot is filled again the reply of the chunk that used it
 * is awaited; so the server's DMA of chunk i overlaps the memcpy of chunk
 * i+1. To the host: up to a slot per chunk is requested at once; the reply
 * of chunk i says its slot holds the bytes, which are copied out while the
 * server's DMAs of the following chunks run, and the slot is requested
 * again. The memcpys themselves are split across threads (par_copy.c): one
 * thread's memcpy is slower than the DMA.
 *
 * Settings (read once): REMOTE_GPU_BOUNCE_CHUNK, the chunk (slot) size in
 * bytes (default 2 MiB, 64 KiB to 64 MiB, page-rounded), and
 * REMOTE_GPU_BOUNCE_BYTES, the buffer (default 16 MiB; at least two
 * chunks). bench/run-gpu.sh (RG_BOUNCE_SWEEP=1) measures the choices.
 *
 * Only synchronous copies (cudaMemcpy and what calls it) of FE_BOUNCE_MIN
 * bytes or more take it: the slots are reused once their chunk is done,
 * which a synchronous copy waits for anyway, where an async copy of pageable
 * memory must not wait for the stream's earlier work; smaller copies are
 * cheaper as one frame. The buffer is the channel's, one copy at a time (a
 * lock). Every request sent is awaited before the copy returns, even after
 * an error, so no reply can land in a slot a later copy uses; a server that
 * dies completes them all with an error (conn.c).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rpc.h"
#include "rt.h"

#define CHUNK_DEFAULT (2u << 20)
#define CHUNK_MIN (64u << 10)
#define CHUNK_MAX (64u << 20)
#define BYTES_DEFAULT (16u << 20)
#define MAX_SLOTS 64

typedef struct bounce {
	fe_conn *conn; /* the channel's own view: its identity */
	uint8_t *buf;  /* NULL: none could be had (not shm, or refused) */
	pthread_mutex_t mu;
} bounce;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static bounce tab[FE_MAX_DEVICES];
static int ntab;
static size_t chunk, nslot; /* the settings, read once (lock) */

static size_t env_size(const char *name, size_t dflt)
{
	const char *v = getenv(name);
	char *end;
	unsigned long long n = v && *v ? strtoull(v, &end, 0) : 0;
	return n && !*end ? (size_t)n : dflt;
}

/* lock held */
static void settings(void)
{
	if (chunk)
		return;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t c = env_size("REMOTE_GPU_BOUNCE_CHUNK", CHUNK_DEFAULT);
	c = c < CHUNK_MIN ? CHUNK_MIN : c > CHUNK_MAX ? CHUNK_MAX : c;
	c = (c + page - 1) / page * page;
	size_t n = env_size("REMOTE_GPU_BOUNCE_BYTES", BYTES_DEFAULT) / c;
	nslot = n < 2 ? 2 : n > MAX_SLOTS ? MAX_SLOTS : n;
	chunk = c;
}

/* c's channel's bounce buffer, made on first use; NULL when it has none. */
static bounce *get(fe_conn *c)
{
	bounce *b = NULL;
	pthread_mutex_lock(&lock);
	settings();
	for (int i = 0; i < ntab && !b; i++)
		if (fe_conn_same(tab[i].conn, c))
			b = &tab[i];
	if (!b && ntab < FE_MAX_DEVICES) {
		b = &tab[ntab++];
		b->conn = c;
		b->buf = fe_region_alloc_conn(c, chunk * nslot);
		pthread_mutex_init(&b->mu, NULL);
	}
	pthread_mutex_unlock(&lock);
	return b && b->buf ? b : NULL;
}

/* Sends chunk's request: its slot (region id, off) to or from dptr. */
static int begin_chunk(fe_conn *c, int to_device, uint64_t dptr, uint32_t id, uint64_t off, size_t n, uint64_t sid,
		       fe_pending *p)
{
	proto_msg m;
	proto_msg_begin(&m, to_device ? PROTO_OP_MEMCPY_HTOD_REGION_WAIT : PROTO_OP_MEMCPY_DTOH_REGION_WAIT,
			fe_conn_next_seq(c), 5);
	proto_msg_u64(&m, dptr);
	proto_msg_u64(&m, id);
	proto_msg_u64(&m, off);
	proto_msg_u64(&m, n);
	proto_msg_u64(&m, sid);
	memset(p, 0, sizeof(*p));
	return fe_conn_begin(c, &m, NULL, 0, p);
}

static void first_error(int *st, int err)
{
	if (err && !*st)
		*st = err;
}

int fe_bounce_copy(fe_conn *c, int to_device, uint64_t dptr, void *host, size_t len, uint64_t sid, int *st)
{
	if (len < FE_BOUNCE_MIN || !(fe_conn_caps(c) & TRANSPORT_CAP_REGIONS))
		return 0;
	bounce *b = get(c);
	if (!b)
		return 0;
	uint32_t id;
	uint64_t base;
	pthread_mutex_lock(&b->mu);
	/* the region went with a reset session: the rings carry the copy */
	if (!fe_region_find(c, b->buf, chunk * nslot, &id, &base)) {
		pthread_mutex_unlock(&b->mu);
		return 0;
	}
	uint8_t *h = host;
	size_t nchunks = (len + chunk - 1) / chunk, sent = 0, done = 0;
	fe_pending p[MAX_SLOTS];
	*st = 0;
	/* Invariant: chunks [done, sent) are in flight, at most nslot of them;
	 * chunk i uses slot i % nslot. */
	while (done < nchunks) {
		while (*st == 0 && sent < nchunks && sent - done < nslot) {
			size_t off = sent * chunk, n = len - off < chunk ? len - off : chunk, k = sent % nslot;
			if (to_device)
				fe_par_memcpy(b->buf + k * chunk, h + off, n);
			int err = begin_chunk(c, to_device, dptr + off, id, base + k * chunk, n, sid, &p[k]);
			if (err) { /* the channel is dead: every chunk in flight failed too */
				first_error(st, err);
				break;
			}
			sent++;
		}
		if (done == sent)
			break; /* an error, nothing left in flight */
		size_t off = done * chunk, n = len - off < chunk ? len - off : chunk, k = done % nslot;
		first_error(st, fe_conn_wait(c, &p[k]));
		if (*st == 0 && !to_device)
			fe_par_memcpy(h + off, b->buf + k * chunk, n);
		done++;
	}
	pthread_mutex_unlock(&b->mu);
	return 1;
}

/* A session that ends takes its channel: its entry is never matched again
 * (its buffer stays mapped, unused: sessions end rarely). */
static void forget(int dev)
{
	(void)dev;
	pthread_mutex_lock(&lock);
	for (int i = 0; i < ntab; i++)
		tab[i].conn = NULL;
	pthread_mutex_unlock(&lock);
}

__attribute__((constructor)) static void register_forget(void) { fe_rt_on_forget(forget); }
