/*
 * shm client (libremote.so): connects to the server's unix socket, maps the
 * segment it is sent, then writes calls into the c2s ring and reads replies
 * from the s2c ring (shm_seg.c has the design, shm_ring.h the rings).
 *
 * Sending (any thread) holds send_lock around tp_shm_ring_write, so frames never
 * interleave; a failure part-way leaves the stream mid-frame and is latched.
 * Receiving (one thread at a time) copies out of the ring: the header into a
 * local buffer before it is decoded, the msgpack part into its own allocation,
 * the payload into where payload_dest says. The server is the side we trust
 * here, but its positions are checked all the same (a corrupt one is EIO).
 *
 * Waiting for a reply: poll the ring for REMOTE_GPU_SHM_SPIN_US while replies
 * are flowing (one came within RX_ACTIVE_NS), then set the sleep flag and
 * sleep in poll() on the socket, which a doorbell byte, the server's death
 * (end of stream) or our own shutdown (shutdown(2) on the socket) ends.
 */
#define _GNU_SOURCE
#include "shm_int.h"
#include "stream_client.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "rg_clock.h"
#include "rg_log.h"

#define CONNECT_MS 10000       /* no deadline given: the setup message still comes within this */
#define RX_ACTIVE_NS 2000000ull /* spin for the next reply only while they flow */

typedef struct shm_client {
	tp_stream_client s; /* shut, progress, receive state */
	int fd;
	void *map;
	size_t map_len;
	uint64_t spin_ns;
	atomic_uint next_region; /* the last region id handed out */

	pthread_mutex_t send_lock;
	shm_ring tx; /* c2s, under send_lock */
	int send_err;

	/* the receiving thread's */
	shm_ring rx; /* s2c */
	int peer_gone; /* end of stream seen on the socket */
	size_t unreleased;
	uint64_t last_rx_ns;
} shm_client;

static int client_connect(const transport_addr *a, unsigned timeout_ms, transport_conn **out);
static int client_sendv(transport_conn *c, const struct iovec *iov, int iovcnt);
static int client_recv_frame(transport_conn *c, transport_frame *f, transport_payload_dest_fn dest, void *ctx);
static int client_reg_mem(transport_conn *c, void *addr, size_t len, transport_mr **out);
static int client_dereg_mem(transport_conn *c, transport_mr *mr);
static void client_shutdown(transport_conn *c);
static void client_close(transport_conn *c);
static int client_region_share(transport_conn *c, int fd, uint64_t len, uint32_t *id);

static const transport_ops shm_client_ops = {
	.scheme = "shm",
	.caps = SHM_CAPS,
	.sendv = client_sendv,
	.recv_frame = client_recv_frame,
	.reg_mem = client_reg_mem,
	.dereg_mem = client_dereg_mem,
	.shutdown = client_shutdown,
	.close = client_close,
	.progress = tp_stream_client_progress,
	.region_share = client_region_share,
};

const transport_provider tp_shm_provider = {
	.scheme = "shm",
	.connect = client_connect,
};

/* ---- connect ---- */

static int connect_fail(int fd, int err)
{
	if (fd >= 0)
		close(fd);
	return err;
}

static int client_connect(const transport_addr *a, unsigned timeout_ms, transport_conn **out)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	uint64_t end = tp_deadline(timeout_ms ? timeout_ms : CONNECT_MS);
	int memfd = -1, err;
	uint32_t ring_size = 0;
	void *map = NULL;

	*out = NULL;
	if (strlen(a->host) >= sizeof(sa.sun_path)) {
		LOG_WARN("transport", "shm://%s: path too long for a unix socket", a->host);
		return TRANSPORT_EADDR;
	}
	strcpy(sa.sun_path, a->host);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return TRANSPORT_ECONNECT;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		LOG_WARN("transport", "cannot connect to shm://%s: %s", a->host, strerror(errno));
		return connect_fail(fd, TRANSPORT_ECONNECT);
	}
	if ((err = tp_shm_sock_recv_setup(fd, end, &memfd, &ring_size)) != TRANSPORT_OK) {
		LOG_WARN("transport", "shm://%s: no segment from the server: %s", a->host, transport_strerror(err));
		return connect_fail(fd, err == TRANSPORT_ETIMEDOUT ? err : TRANSPORT_ECONNECT);
	}
	err = tp_shm_seg_map(memfd, ring_size, &map);
	close(memfd); /* the mapping keeps the segment */
	if (err)
		return connect_fail(fd, TRANSPORT_ECONNECT);
	shm_client *c = calloc(1, sizeof(*c));
	if (!c) {
		munmap(map, shm_seg_size(ring_size));
		return connect_fail(fd, TRANSPORT_ENOMEM);
	}
	tp_stream_client_init(&c->s, &shm_client_ops);
	c->fd = fd;
	c->map = map;
	c->map_len = shm_seg_size(ring_size);
	c->spin_ns = tp_shm_spin_ns();
	tp_shm_seg_rings(map, ring_size, &c->tx, &c->rx);
	pthread_mutex_init(&c->send_lock, NULL);
	snprintf(c->s.base.peer, sizeof(c->s.base.peer), "shm:%s", a->host);
	LOG_DEBUG("transport", "connected to %s (rings of %u KiB)", c->s.base.peer, ring_size >> 10);
	*out = &c->s.base;
	return TRANSPORT_OK;
}

/* ---- send ---- */

static int client_sendv(transport_conn *base, const struct iovec *iov, int iovcnt)
{
	shm_client *c = (shm_client *)base;
	int err;

	pthread_mutex_lock(&c->send_lock);
	if (atomic_load(&c->s.shut))
		err = TRANSPORT_ECLOSED;
	else if (c->send_err)
		err = c->send_err;
	else if ((err = tp_shm_ring_write(&c->tx, iov, iovcnt, c->fd, &c->s.shut, c->spin_ns, &c->s.progress)) != TRANSPORT_OK)
		c->send_err = err;
	pthread_mutex_unlock(&c->send_lock);
	return err;
}

/* ---- receive ---- */

static void rx_release(shm_client *c)
{
	if (c->unreleased && tp_shm_ring_release(&c->rx))
		tp_shm_futex_wake(&c->rx.ctl->tail);
	c->unreleased = 0;
}

/* Takes the doorbell bytes; notes the end of stream. */
static void drain_socket(shm_client *c)
{
	char b[64];
	for (;;) {
		ssize_t n = recv(c->fd, b, sizeof(b), MSG_DONTWAIT);
		if (n > 0)
			continue;
		if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
			c->peer_gone = 1;
		return;
	}
}

/* Until bytes are there (*avail > 0), or an error. */
static int wait_bytes(shm_client *c, size_t *avail)
{
	rx_release(c); /* the server may be waiting for the space */
	if (rg_clock_ns() - c->last_rx_ns < RX_ACTIVE_NS) {
		rg_spin s;
		rg_spin_start(&s, c->spin_ns);
		do {
			if ((*avail = tp_shm_ring_avail(&c->rx)) != 0)
				return TRANSPORT_OK;
			rg_cpu_relax();
		} while (rg_spin_on(&s) && !atomic_load_explicit(&c->s.shut, memory_order_relaxed));
	}
	for (;;) {
		if (atomic_load(&c->s.shut))
			return TRANSPORT_ECLOSED;
		if ((*avail = tp_shm_ring_sleep_prepare(&c->rx)) != 0) {
			tp_shm_ring_sleep_cancel(&c->rx);
			return TRANSPORT_OK;
		}
		if (c->peer_gone)
			return c->s.frame_started ? TRANSPORT_EIO : TRANSPORT_ECLOSED;
		struct pollfd p = {.fd = c->fd, .events = POLLIN};
		if (poll(&p, 1, -1) < 0 && errno != EINTR)
			return TRANSPORT_EIO;
		drain_socket(c);
	}
}

/* Reads exactly n bytes into dst (NULL: discard them). */
static int rx_read(shm_client *c, void *dst, size_t n)
{
	uint8_t *d = dst;
	while (n > 0) {
		size_t avail = tp_shm_ring_avail(&c->rx);
		int err;
		if (avail == 0 && (err = wait_bytes(c, &avail)) != TRANSPORT_OK)
			return atomic_load(&c->s.shut) ? TRANSPORT_ECLOSED : err;
		if (avail == SHM_RING_BAD) {
			LOG_WARN("transport", "%s: the reply ring's head is out of range", c->s.base.peer);
			return TRANSPORT_EIO;
		}
		size_t k = avail < n ? avail : n;
		tp_shm_ring_get(&c->rx, d, k);
		if (d)
			d += k;
		n -= k;
		c->s.frame_started = 1;
		c->unreleased += k;
		if (c->unreleased >= c->rx.size / 4)
			rx_release(c);
		atomic_fetch_add_explicit(&c->s.progress, 1, memory_order_relaxed);
	}
	return TRANSPORT_OK;
}

static int rx_read_fn(void *c, void *dst, size_t n) { return rx_read(c, dst, n); }

static int client_recv_frame(transport_conn *base, transport_frame *f, transport_payload_dest_fn dest, void *ctx)
{
	shm_client *c = (shm_client *)base;
	int err = tp_stream_client_recv_frame(&c->s, rx_read_fn, f, dest, ctx);
	if (err)
		return err;
	rx_release(c);
	c->last_rx_ns = rg_clock_ns();
	return TRANSPORT_OK;
}

/* ---- memory, shutdown, close ---- */

/* As tcp: the bytes are copied through the ring during the call, so there is
 * nothing to pin; the record only says addr/len. */
static int client_reg_mem(transport_conn *c, void *addr, size_t len, transport_mr **out)
{
	return tp_reg_mem_none(c, addr, len, out);
}

static int client_dereg_mem(transport_conn *c, transport_mr *mr) { return tp_dereg_mem_none(c, mr); }

/* The message goes on the socket before the caller sends the frame that
 * names the region, so the server finds it there when it parses that frame. */
static int client_region_share(transport_conn *base, int fd, uint64_t len, uint32_t *id)
{
	shm_client *c = (shm_client *)base;
	if (atomic_load(&c->s.shut))
		return TRANSPORT_ECLOSED;
	uint32_t n = atomic_fetch_add(&c->next_region, 1) + 1;
	int err = tp_shm_region_send(c->fd, fd, n, len);
	if (err == TRANSPORT_OK)
		*id = n;
	return err;
}

static void client_shutdown(transport_conn *base)
{
	shm_client *c = (shm_client *)base;
	if (tp_stream_client_shut(&c->s)) {
		shutdown(c->fd, SHUT_RDWR); /* wakes a receiver in poll() */
		tp_shm_futex_wake(&c->tx.ctl->tail); /* and a sender napping for space */
	}
}

static void client_close(transport_conn *base)
{
	shm_client *c = (shm_client *)base;
	if (!c)
		return;
	client_shutdown(base);
	munmap(c->map, c->map_len);
	close(c->fd);
	pthread_mutex_destroy(&c->send_lock);
	free(c);
}
