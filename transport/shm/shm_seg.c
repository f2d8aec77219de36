/*
 * shm transport: a client on the server's host (shm:///path/to/socket).
 *
 * Design. The client connects to a unix socket; the server (the process that
 * serves the session: a session process, or the listener's own in thread mode)
 * makes a segment, a memfd, and sends it over that socket (SCM_RIGHTS) with a
 * small setup message. After that the socket carries nothing but doorbell
 * bytes, and its closing is how each side learns that the other is gone (a
 * process's death closes it, whatever killed it). Frames travel through two
 * single-producer/single-consumer byte rings in the segment (shm_ring.h):
 * calls c2s, replies s2c, as the same byte stream tcp carries.
 *
 * Why a memfd the server makes, not a file both sides open: nothing is left
 * in any folder when either side dies (the segment goes with the last
 * mapping), and the server seals it (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)
 * before the client gets it, so no one can truncate it under the server's
 * mapping (a truncated shared mapping raises SIGBUS on access: a client could
 * otherwise kill the server). The socket's folder keeps strangers out (make it
 * 0700); the server also refuses peers of another uid (SO_PEERCRED), and the
 * token check of the upper layer applies to the first frame as on tcp.
 *
 * Waiting. A side that waits for bytes polls the ring for a while
 * (REMOTE_GPU_SHM_SPIN_US after activity), then sets its sleep flag, looks
 * once more, and sleeps on the socket (the client in poll(), the server's
 * loop in a uv_poll); the producer that finds the flag set writes one doorbell
 * byte. While both sides are busy no system call is made per frame. A
 * producer that finds the ring full spins, then sleeps on a futex on the
 * consumer's tail word (shared, so not FUTEX_PRIVATE) in naps of 10 ms,
 * looking at the socket between them: a consumer that died is seen.
 *
 * Bulk data streams through the ring: the producer publishes as it copies (a
 * step at a time), so the consumer copies out the first bytes while the
 * producer copies in the next, each on its own core. The consumer copies into
 * the destination payload_dest chose, as tcp reads into it.
 */
#define _GNU_SOURCE /* memfd_create, struct ucred */
#include "shm_int.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rg_clock.h"
#include "rg_log.h"

#define PUBLISH_STEP (256u * 1024) /* publish at least this often while copying a large frame */
#define NAP_MS 10                  /* a producer's futex nap between looks at the peer */

static long env_num(const char *name, long dflt, long min, long max)
{
	const char *v = getenv(name);
	char *e;
	if (!v || !*v)
		return dflt;
	long n = strtol(v, &e, 10);
	if (*e || n < min || n > max) {
		LOG_WARN("transport", "%s=%s: not a number from %ld to %ld; using %ld", name, v, min, max, dflt);
		return dflt;
	}
	return n;
}

uint32_t tp_shm_ring_size_setting(void)
{
	static uint32_t kb;
	if (!kb) {
		long n = env_num("REMOTE_GPU_SHM_RING_KB", 8192, SHM_RING_MIN / 1024, SHM_RING_MAX / 1024);
		if (!tp_shm_ring_size_ok((uint32_t)n * 1024u)) {
			LOG_WARN("transport", "REMOTE_GPU_SHM_RING_KB=%ld: not a power of two; using 8192", n);
			n = 8192;
		}
		kb = (uint32_t)n;
	}
	return kb * 1024u;
}

/* Spinning pays only where the two sides (and the server's executor and
 * waiter, which spin too) each have a core: on a host of 2 or 3 cores the
 * spinners take the CPU from the thread that would answer (measured on a
 * loaded 2-core VM: a 4-byte D2H copy took 110-215 us spinning, 40 us over
 * tcp), so there the default is to sleep at once. */
uint64_t tp_shm_spin_ns(void)
{
	static long us = -1;
	if (us < 0)
		us = env_num("REMOTE_GPU_SHM_SPIN_US", sysconf(_SC_NPROCESSORS_ONLN) >= 4 ? 100 : 0, 0, 10000000);
	return (uint64_t)us * 1000u;
}

/* ---- segment ---- */

int tp_shm_seg_create(uint32_t ring_size, int *memfd, void **base)
{
	size_t len = shm_seg_size(ring_size);
	int fd = memfd_create("remote-gpu-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0) {
		LOG_WARN("transport", "shm: memfd_create: %s", strerror(errno));
		return TRANSPORT_ENOMEM;
	}
	void *p = MAP_FAILED;
	if (ftruncate(fd, (off_t)len) != 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0 ||
	    (p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
		LOG_WARN("transport", "shm: segment of %zu bytes: %s", len, strerror(errno));
		close(fd);
		return TRANSPORT_ENOMEM;
	}
	tp_shm_seg_format(p, ring_size);
	*memfd = fd;
	*base = p;
	return TRANSPORT_OK;
}

int tp_shm_seg_map(int memfd, uint32_t ring_size, void **base)
{
	size_t len = shm_seg_size(ring_size);
	struct stat st;
	int seals = fcntl(memfd, F_GET_SEALS);
	if (fstat(memfd, &st) != 0 || (uint64_t)st.st_size != len || seals < 0 || !(seals & F_SEAL_SHRINK)) {
		LOG_WARN("transport", "shm: the server's segment is not what it said (size or seals)");
		return TRANSPORT_EIO;
	}
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	if (p == MAP_FAILED) {
		LOG_WARN("transport", "shm: mmap of %zu bytes: %s", len, strerror(errno));
		return TRANSPORT_ENOMEM;
	}
	const shm_seg_hdr *h = p;
	if (h->magic != SHM_SEG_MAGIC || h->version != SHM_SEG_VERSION || h->ring_size != ring_size) {
		LOG_WARN("transport", "shm: the server's segment has a header of another version");
		munmap(p, len);
		return TRANSPORT_EIO;
	}
	*base = p;
	return TRANSPORT_OK;
}

/* ---- socket ---- */

int tp_shm_sock_send_fd(int fd, const void *msg, size_t len, int pass_fd, int flags)
{
	struct iovec iov = {(void *)msg, len};
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &pass_fd, sizeof(int));
	ssize_t n;
	do
		n = sendmsg(fd, &m, MSG_NOSIGNAL | flags);
	while (n < 0 && errno == EINTR);
	/* A unix stream socket takes a message this small whole or not at all. */
	return n == (ssize_t)len ? TRANSPORT_OK : TRANSPORT_EIO;
}

int tp_shm_sock_send_setup(int fd, int memfd, uint32_t ring_size)
{
	shm_setup s = {.magic = SHM_SETUP_MAGIC, .version = SHM_SEG_VERSION, .ring_size = ring_size};
	/* A fresh socket's buffer takes 16 bytes at once; never block the loop. */
	return tp_shm_sock_send_fd(fd, &s, sizeof(s), memfd, MSG_DONTWAIT);
}

int tp_shm_sock_recv_setup(int fd, uint64_t end, int *memfd, uint32_t *ring_size)
{
	shm_setup s;
	struct iovec iov = {&s, sizeof(s)};
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	*memfd = -1;
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int n = poll(&p, 1, tp_deadline_left_ms(end));
		if (n == 0)
			return TRANSPORT_ETIMEDOUT;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return TRANSPORT_EIO;
		break;
	}
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
	ssize_t n = recvmsg(fd, &m, MSG_CMSG_CLOEXEC | MSG_WAITALL);
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
	if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS && cm->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(memfd, CMSG_DATA(cm), sizeof(int));
	if (n != (ssize_t)sizeof(s) || *memfd < 0 || (m.msg_flags & MSG_CTRUNC) || s.magic != SHM_SETUP_MAGIC ||
	    s.version != SHM_SEG_VERSION || !tp_shm_ring_size_ok(s.ring_size)) {
		if (*memfd >= 0)
			close(*memfd);
		*memfd = -1;
		/* The server closed at once: it refused us (its log says why). */
		return n == 0 ? TRANSPORT_ECLOSED : TRANSPORT_EIO;
	}
	*ring_size = s.ring_size;
	return TRANSPORT_OK;
}

void tp_shm_doorbell(int fd)
{
	static const char b = 1;
	(void)!send(fd, &b, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
}

void tp_shm_peer_name(int fd, char *buf, size_t len, long *uid)
{
	struct ucred cr;
	socklen_t sl = sizeof(cr);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &sl) == 0) {
		snprintf(buf, len, "shm.uid%u:%d", (unsigned)cr.uid, (int)cr.pid);
		*uid = (long)cr.uid;
	} else {
		snprintf(buf, len, "shm:?");
		*uid = -1;
	}
}

int tp_shm_sock_peer_gone(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLRDHUP};
	return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

/* ---- the frame writer ---- */

/* Waits until r has space: spin, then futex naps. */
static int wait_space(shm_ring *r, int fd, atomic_int *shut, uint64_t spin_ns, size_t *space)
{
	rg_spin s;
	rg_spin_start(&s, spin_ns);
	do {
		if ((*space = tp_shm_ring_space(r)) != 0)
			return *space == SHM_RING_BAD ? TRANSPORT_EIO : TRANSPORT_OK;
		rg_cpu_relax();
	} while (rg_spin_on(&s));
	for (;;) {
		uint32_t seen;
		if (atomic_load(shut))
			return TRANSPORT_ECLOSED;
		if ((*space = tp_shm_ring_wait_prepare(r, &seen)) != 0)
			return *space == SHM_RING_BAD ? TRANSPORT_EIO : TRANSPORT_OK;
		if (tp_shm_sock_peer_gone(fd))
			return TRANSPORT_ECLOSED;
		tp_shm_futex_wait(&r->ctl->tail, seen, NAP_MS);
	}
}

int tp_shm_ring_write(shm_ring *r, const struct iovec *iov, int iovcnt, int fd, atomic_int *shut, uint64_t spin_ns,
		   atomic_uint_fast64_t *progress)
{
	size_t space = tp_shm_ring_space(r), unpublished = 0;
	if (space == SHM_RING_BAD)
		return TRANSPORT_EIO;
	for (int i = 0; i < iovcnt; i++) {
		const uint8_t *p = iov[i].iov_base;
		size_t n = iov[i].iov_len;
		while (n > 0) {
			if (space == 0) {
				if (unpublished && tp_shm_ring_publish(r))
					tp_shm_doorbell(fd);
				unpublished = 0;
				int err = wait_space(r, fd, shut, spin_ns, &space);
				if (err)
					return err;
				if (progress)
					atomic_fetch_add_explicit(progress, 1, memory_order_relaxed);
			}
			size_t k = n < space ? n : space;
			if (k > PUBLISH_STEP)
				k = PUBLISH_STEP;
			tp_shm_ring_put(r, p, k);
			p += k;
			n -= k;
			space -= k;
			unpublished += k;
			if (unpublished >= PUBLISH_STEP) {
				if (tp_shm_ring_publish(r))
					tp_shm_doorbell(fd);
				unpublished = 0;
			}
		}
	}
	if (tp_shm_ring_publish(r))
		tp_shm_doorbell(fd);
	return atomic_load(shut) ? TRANSPORT_ECLOSED : TRANSPORT_OK;
}
