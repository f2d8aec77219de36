/*
 * Internals of the shm transport shared by its client (shm_client.c) and
 * server (shm_server.c); the segment, the socket and the frame writer live in
 * shm_seg.c, the rings in shm_ring.h. The design is the top comment of
 * shm_seg.c; transport/README.md ("Shared memory") has the user's view.
 */
#ifndef SHM_INT_H
#define SHM_INT_H

#include <pthread.h>

#include "shm_ring.h"
#include "transport_int.h"

/* The setup message the server sends on the socket, with the segment's memfd
 * as SCM_RIGHTS, before anything else. */
/* What shm connections can do (both halves). */
#define SHM_CAPS (TRANSPORT_CAP_REGIONS | TRANSPORT_CAP_BUSY_POLL | TRANSPORT_CAP_LOCAL | TRANSPORT_CAP_ADOPT)

#define SHM_SETUP_MAGIC 0x53524753u /* "SGRS" */
typedef struct shm_setup {
	uint32_t magic, version, ring_size, reserved;
} shm_setup;

/* Tunables (environment, read once): ring size of each direction
 * (REMOTE_GPU_SHM_RING_KB, server; 8192), how long a waiting side polls
 * before it sleeps (REMOTE_GPU_SHM_SPIN_US, both; 100 on hosts of 4 cores
 * or more, else 0). */
uint32_t tp_shm_ring_size_setting(void);
uint64_t tp_shm_spin_ns(void);

/* Server: a sealed memfd of shm_seg_size(ring_size) (it can be neither
 * shrunk nor grown, by the client either, so a mapping of it never faults),
 * mapped and formatted. TRANSPORT_OK or TRANSPORT_ENOMEM (logged). */
int tp_shm_seg_create(uint32_t ring_size, int *memfd, void **base);
/* Client: checks memfd (size, seals) and maps it. */
int tp_shm_seg_map(int memfd, uint32_t ring_size, void **base);

/* The socket: the setup message (server sends, client receives within
 * end: tp_deadline), doorbells (one byte, never blocking: one already
 * queued wakes the peer as well), the peer's credentials as a name. */
/* One small message (whole or not at all) with pass_fd as SCM_RIGHTS. */
int tp_shm_sock_send_fd(int fd, const void *msg, size_t len, int pass_fd, int flags);
int tp_shm_sock_send_setup(int fd, int memfd, uint32_t ring_size);
int tp_shm_sock_recv_setup(int fd, uint64_t end, int *memfd, uint32_t *ring_size);
void tp_shm_doorbell(int fd);
/* "shm.uidU:PID" of the peer (admit.c counts sources by what is before the
 * last ':': here the uid); its uid in *uid (-1 when unknown). */
void tp_shm_peer_name(int fd, char *buf, size_t len, long *uid);
/* Whether the peer closed its end (a look, nothing read). */
int tp_shm_sock_peer_gone(int fd);

/* Writes every byte of iov[0..iovcnt) into r as the producer: publishing as it
 * goes (a large payload streams while the consumer reads it), ringing the
 * doorbell on fd when the consumer sleeps, waiting for space (spinning spin_ns,
 * then a futex on the consumer's tail, looking at *shut and the socket between
 * naps). Returns TRANSPORT_OK, TRANSPORT_ECLOSED (shut, or the peer left) or
 * TRANSPORT_EIO (the consumer's tail is corrupt). progress (may be NULL) counts
 * each time the consumer freed space we waited for. Caller holds its send lock. */
int tp_shm_ring_write(shm_ring *r, const struct iovec *iov, int iovcnt, int fd, atomic_int *shut, uint64_t spin_ns,
		   atomic_uint_fast64_t *progress);

/* ---- shared regions (shm_region.c) ---- */

/* What the client writes on the socket after the setup: doorbell bytes
 * (SHM_MSG_DOORBELL), and region messages (a shm_region_msg whose bytes go in
 * one sendmsg with the region's memfd as SCM_RIGHTS). The fds are queued in
 * the order they come and each region message takes the oldest: the kernel
 * delivers an fd no later than the first byte of the message it came with. */
#define SHM_MSG_DOORBELL 1
#define SHM_MSG_REGION 0x52 /* 'R' */
typedef struct shm_region_msg {
	uint8_t kind, zero[3];
	uint32_t id;
	uint64_t len;
} shm_region_msg;

#define SHM_REGION_MAX 4096 /* regions one connection may have */
#define SHM_REGION_WAITING 64 /* ... of them not yet looked up (not mapped: their fd kept) */
#define SHM_REGION_BYTES_MAX (1ull << 40) /* bytes one connection may have mapped */
#define SHM_FD_QUEUE 16     /* fds received before their message */

typedef struct shm_region {
	uint32_t id;
	int fd;     /* until it is mapped (at the first lookup), then -1 */
	void *base; /* NULL until then */
	uint64_t len;
} shm_region;

/* Server: one connection's socket reader and its regions, behind one lock
 * (the loop thread reads doorbells; the upper layer's threads look regions
 * up and drain the socket for a region not seen yet). */
typedef struct shm_regions {
	pthread_mutex_t lock;
	int fd;   /* the socket; -1 once it is closed */
	int bad;  /* the client broke the socket's protocol (logged) */
	int gone; /* end of stream, or an error: the client is gone */
	uint8_t msg[sizeof(shm_region_msg)];
	size_t have; /* bytes of a region message read so far */
	int fds[SHM_FD_QUEUE];
	int nfds;
	shm_region *r;
	size_t n, cap;
	char peer[64];
	uint64_t bytes; /* mapped now */
	int waiting;    /* regions not mapped yet */
} shm_regions;

void tp_shm_regions_init(shm_regions *g, int fd, const char *peer);
/* Reads everything the socket holds now, without blocking: doorbells are
 * dropped, region messages mapped. Returns TRANSPORT_OK or TRANSPORT_EIO (the
 * protocol was broken: the connection must end); g->gone tells of the end. */
int tp_shm_regions_drain(shm_regions *g);
int tp_shm_regions_get(shm_regions *g, uint32_t id, uint64_t off, uint64_t len, void **addr);
int tp_shm_regions_drop(shm_regions *g, uint32_t id);
/* The socket is about to be closed: no more reads. */
void tp_shm_regions_detach(shm_regions *g);
/* Unmaps every region, closes queued fds. */
void tp_shm_regions_free(shm_regions *g);

/* Client: sends one region message with fd. */
int tp_shm_region_send(int sock, int fd, uint32_t id, uint64_t len);

#endif
