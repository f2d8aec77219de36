/*
 * Synchronous copies of pageable memory over shm, one memcpy fewer.
 *
 * Through the rings a copy of pageable memory costs two memcpys before the
 * DMA (the program's buffer into the ring, the ring into the server's
 * pinned staging) and two after it the other way. Over shm each channel
 * instead gets a bounce buffer: a shared region of NSLOT slots that its
 * server registered with the driver (host_region.c), so the host side of
 * the copy is one memcpy between the program's buffer and a slot, and the
 * server's DMA reads or writes the slot in place (memcpy_htod_region,
 * memcpy_dtoh_region).
 *
 * Only synchronous copies (cudaMemcpy and what calls it) of FE_BOUNCE_MIN
 * bytes or more take it: the slots are reused after a stream_sync on the
 * copy's stream, which a synchronous copy waits for anyway, where an async
 * copy of pageable memory must not wait for the stream's earlier work;
 * smaller copies are cheaper as one frame. A round of NSLOT slots goes
 * out, each DMA overlapping the next slot's memcpy, then one stream_sync;
 * the buffer is the channel's, one copy at a time (a lock).
 */
#include <pthread.h>
#include <string.h>

#include "rpc.h"
#include "rt.h"

#define SLOT (4u << 20)
#define NSLOT 4

typedef struct bounce {
	fe_conn *conn; /* the channel's own view: its identity */
	uint8_t *buf;  /* NULL: none could be had (not shm, or refused) */
	pthread_mutex_t mu;
} bounce;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static bounce tab[FE_MAX_DEVICES];
static int ntab;

/* c's channel's bounce buffer, made on first use; NULL when it has none. */
static bounce *get(fe_conn *c)
{
	bounce *b = NULL;
	pthread_mutex_lock(&lock);
	for (int i = 0; i < ntab && !b; i++)
		if (fe_conn_same(tab[i].conn, c))
			b = &tab[i];
	if (!b && ntab < FE_MAX_DEVICES) {
		b = &tab[ntab++];
		b->conn = c;
		b->buf = fe_region_alloc_conn(c, (size_t)SLOT * NSLOT);
		pthread_mutex_init(&b->mu, NULL);
	}
	pthread_mutex_unlock(&lock);
	return b && b->buf ? b : NULL;
}

int fe_bounce_copy(fe_conn *c, int to_device, uint64_t dptr, void *host, size_t len, uint64_t sid, int *st)
{
	if (len < FE_BOUNCE_MIN || !(fe_conn_caps(c) & TRANSPORT_CAP_REGIONS))
		return 0;
	bounce *b = get(c);
	if (!b)
		return 0;
	uint8_t *h = host;
	pthread_mutex_lock(&b->mu);
	*st = 0;
	for (size_t off = 0; off < len && *st == 0;) {
		size_t round = 0;
		for (int k = 0; k < NSLOT && off + round < len; k++) {
			size_t n = len - off - round < SLOT ? len - off - round : SLOT;
			uint8_t *slot = b->buf + (size_t)k * SLOT;
			if (to_device)
				memcpy(slot, h + off + round, n);
			int taken = fe_region_copy(c, to_device, dptr + off + round, slot, n, sid, 1, st);
			if (!taken || *st) {
				/* the region went with a reset session: the first round
				 * falls back to the rings; later ones cannot */
				if (!taken && off == 0 && round == 0) {
					pthread_mutex_unlock(&b->mu);
					return 0;
				}
				if (!taken)
					*st = CUDA_ERROR_UNKNOWN;
				break;
			}
			round += n;
		}
		if (*st == 0)
			*st = fe_rpc_stream_sync(c, sid);
		if (*st == 0 && !to_device)
			for (size_t k = 0; k * SLOT < round; k++) {
				size_t n = round - k * SLOT < SLOT ? round - k * SLOT : SLOT;
				memcpy(h + off + k * SLOT, b->buf + k * SLOT, n);
			}
		off += round;
	}
	pthread_mutex_unlock(&b->mu);
	return 1;
}

/* A session that ends takes its channel: its entry is never matched again
 * (its buffer stays mapped, unused: sessions end rarely). */
static void forget(int dev)
{
	pthread_mutex_lock(&lock);
	for (int i = 0; i < ntab; i++)
		tab[i].conn = NULL;
	pthread_mutex_unlock(&lock);
}

__attribute__((constructor)) static void register_forget(void) { fe_rt_on_forget(forget); }
