/*
 * shm shared regions: memory the client made (a sealed memfd) and handed to
 * the server over the connection's unix socket, so that the upper layers can
 * move bulk data through it without the rings (remote-gpu: the client's
 * pinned allocations, which the server registers with its driver and copies
 * from and to directly). The transport only carries the descriptor, maps it
 * and checks ranges; what the memory is for is the upper layer's business.
 *
 * The socket. After the setup message the client writes doorbell bytes and
 * region messages (shm_int.h) on it; the server reads it on the loop thread
 * (doorbells) and on whatever thread looks up a region it has not seen yet
 * (the region message was written before the frame that names the region,
 * so by the time that frame is parsed the message waits in the socket), both
 * under the connection's region lock.
 *
 * Trust. Everything on the socket comes from the client: a byte that is
 * neither a doorbell nor the start of a region message, a message without a
 * descriptor, a descriptor without a message, a region id given twice, more
 * than SHM_REGION_MAX regions, or a descriptor that is not a sealed memfd
 * (F_SEAL_SHRINK: a file the client could truncate would raise SIGBUS in the
 * server on access) at least as long as the message says, ends the
 * connection. A lookup checks [off, off+len) against the region without
 * overflow; the answer is never an address outside the mapping.
 *
 * Cost. A region is checked when its message comes but mapped only at its
 * first lookup, which the upper layer makes for an authenticated session
 * (remote-gpud reads no other frame before the hello): until then only its
 * descriptor is kept, and at most SHM_REGION_WAITING of those. A connection
 * maps at most SHM_REGION_BYTES_MAX bytes (address space, not memory: the
 * pages are the client's).
 */
#define _GNU_SOURCE
#include "shm_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rg_log.h"

#define READ_FDS 8 /* descriptors one recvmsg may carry */

/* ---- client ---- */

int tp_shm_region_send(int sock, int fd, uint32_t id, uint64_t len)
{
	shm_region_msg m = {.kind = SHM_MSG_REGION, .id = id, .len = len};
	return tp_shm_sock_send_fd(sock, &m, sizeof(m), fd, 0) == TRANSPORT_OK ? TRANSPORT_OK : TRANSPORT_ECLOSED;
}

/* ---- server ---- */

void tp_shm_regions_init(shm_regions *g, int fd, const char *peer)
{
	memset(g, 0, sizeof(*g));
	pthread_mutex_init(&g->lock, NULL);
	g->fd = fd;
	snprintf(g->peer, sizeof(g->peer), "%s", peer);
}

static int broken(shm_regions *g, const char *why)
{
	if (!g->bad)
		LOG_WARN("transport", "%s: %s: closing the connection", g->peer, why);
	g->bad = 1;
	return TRANSPORT_EIO;
}

static shm_region *find(shm_regions *g, uint32_t id)
{
	for (size_t i = 0; i < g->n; i++)
		if (g->r[i].id == id)
			return &g->r[i];
	return NULL;
}

/* A complete region message: takes the oldest queued fd, checks it and
 * keeps it for the first lookup. */
static int region_add(shm_regions *g)
{
	shm_region_msg m;
	memcpy(&m, g->msg, sizeof(m));
	g->have = 0;
	if (g->nfds == 0)
		return broken(g, "a region message without a descriptor");
	int fd = g->fds[0];
	memmove(g->fds, g->fds + 1, (size_t)(g->nfds - 1) * sizeof(int));
	g->nfds--;

	struct stat st;
	int seals = fcntl(fd, F_GET_SEALS);
	int err = TRANSPORT_OK;
	if (m.zero[0] || m.zero[1] || m.zero[2] || m.id == 0 || m.len == 0 || m.len > SIZE_MAX / 2)
		err = broken(g, "a malformed region message");
	else if (find(g, m.id))
		err = broken(g, "a region id given twice");
	else if (g->n >= SHM_REGION_MAX || g->waiting >= SHM_REGION_WAITING)
		err = broken(g, "too many shared regions");
	else if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || seals < 0 || !(seals & F_SEAL_SHRINK) ||
		 (uint64_t)st.st_size < m.len)
		err = broken(g, "a region that is not a sealed memfd of its size");
	if (err) {
		close(fd);
		return err;
	}
	if (g->n == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 16;
		shm_region *r = realloc(g->r, cap * sizeof(*r));
		if (!r) {
			close(fd);
			return broken(g, "out of memory for a region");
		}
		g->r = r;
		g->cap = cap;
	}
	g->r[g->n++] = (shm_region){m.id, fd, NULL, m.len};
	g->waiting++;
	return TRANSPORT_OK;
}

/* The first lookup of r: map it (the fd goes: the mapping keeps the memory). */
static int region_map(shm_regions *g, shm_region *r)
{
	if (g->bytes + r->len > SHM_REGION_BYTES_MAX) {
		LOG_WARN("transport", "%s: region %u of %" PRIu64 " bytes: past %llu bytes mapped", g->peer, r->id, r->len,
			 (unsigned long long)SHM_REGION_BYTES_MAX);
		return TRANSPORT_EADDR;
	}
	void *p = mmap(NULL, (size_t)r->len, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
	if (p == MAP_FAILED) {
		LOG_WARN("transport", "%s: mmap of region %u (%" PRIu64 " bytes): %s", g->peer, r->id, r->len,
			 strerror(errno));
		return TRANSPORT_EADDR;
	}
	close(r->fd);
	r->fd = -1;
	r->base = p;
	g->waiting--;
	g->bytes += r->len;
	LOG_DEBUG("transport", "%s: region %u mapped (%" PRIu64 " bytes)", g->peer, r->id, r->len);
	return TRANSPORT_OK;
}

static void region_release(shm_regions *g, shm_region *r)
{
	if (r->base) {
		munmap(r->base, (size_t)r->len);
		g->bytes -= r->len;
	} else {
		close(r->fd);
		g->waiting--;
	}
}

static int take_fds(shm_regions *g, struct msghdr *h)
{
	int err = TRANSPORT_OK;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(h); cm; cm = CMSG_NXTHDR(h, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			if (g->nfds < SHM_FD_QUEUE)
				g->fds[g->nfds++] = fd;
			else {
				close(fd);
				err = broken(g, "descriptors without region messages");
			}
		}
	}
	if (h->msg_flags & MSG_CTRUNC)
		err = broken(g, "more descriptors than messages");
	return err;
}

/* Bytes the client wrote: doorbells, region messages. */
static int parse(shm_regions *g, const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (g->have == 0 && b[i] == SHM_MSG_DOORBELL)
			continue;
		if (g->have == 0 && b[i] != SHM_MSG_REGION)
			return broken(g, "an unknown byte on the socket");
		g->msg[g->have++] = b[i];
		if (g->have == sizeof(g->msg)) {
			int err = region_add(g);
			if (err)
				return err;
		}
	}
	return TRANSPORT_OK;
}

static int drain_locked(shm_regions *g)
{
	uint8_t b[256];
	union {
		char buf[CMSG_SPACE(READ_FDS * sizeof(int))];
		struct cmsghdr align;
	} u;
	while (g->fd >= 0 && !g->bad && !g->gone) {
		struct iovec iov = {b, sizeof(b)};
		struct msghdr h = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
		ssize_t n = recvmsg(g->fd, &h, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n <= 0) {
			g->gone = 1;
			break;
		}
		if (take_fds(g, &h) || parse(g, b, (size_t)n))
			break;
	}
	return g->bad ? TRANSPORT_EIO : TRANSPORT_OK;
}

int tp_shm_regions_drain(shm_regions *g)
{
	pthread_mutex_lock(&g->lock);
	int err = drain_locked(g);
	pthread_mutex_unlock(&g->lock);
	return err;
}

int tp_shm_regions_get(shm_regions *g, uint32_t id, uint64_t off, uint64_t len, void **addr)
{
	pthread_mutex_lock(&g->lock);
	shm_region *r = find(g, id);
	if (!r) {
		drain_locked(g); /* its message may still wait in the socket */
		r = find(g, id);
	}
	int err = TRANSPORT_EADDR;
	if (r && off <= r->len && len <= r->len - off && (r->base || region_map(g, r) == TRANSPORT_OK)) {
		*addr = (uint8_t *)r->base + off;
		err = TRANSPORT_OK;
	}
	pthread_mutex_unlock(&g->lock);
	return err;
}

int tp_shm_regions_drop(shm_regions *g, uint32_t id)
{
	pthread_mutex_lock(&g->lock);
	shm_region *r = find(g, id);
	int err = TRANSPORT_EADDR;
	if (r) {
		region_release(g, r);
		*r = g->r[--g->n];
		err = TRANSPORT_OK;
	}
	pthread_mutex_unlock(&g->lock);
	return err;
}

void tp_shm_regions_detach(shm_regions *g)
{
	pthread_mutex_lock(&g->lock);
	g->fd = -1;
	pthread_mutex_unlock(&g->lock);
}

void tp_shm_regions_free(shm_regions *g)
{
	for (size_t i = 0; i < g->n; i++)
		region_release(g, &g->r[i]);
	for (int i = 0; i < g->nfds; i++)
		close(g->fds[i]);
	free(g->r);
	pthread_mutex_destroy(&g->lock);
	memset(g, 0, sizeof(*g));
}
