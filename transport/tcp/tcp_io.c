/*
 * Socket helpers shared by the tcp client (blocking sockets) and the tcp server
 * (non-blocking sockets owned by libuv): writing a whole frame, naming the peer,
 * sizing the socket buffers.
 *
 * Why one sendmsg per frame: the design sends each call as one write, i.e. one
 * TCP segment when it fits. Split into a header write and a payload write, a
 * frame costs two segments and two receiver wakeups, and without TCP_NODELAY the
 * second write would wait for the delayed ACK of the first (tens of ms). sendmsg
 * rather than writev because only send* take MSG_NOSIGNAL: a peer that vanished
 * must give us EPIPE, never a SIGPIPE that kills the user's program.
 */
#include "tcp_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* iovecs handed to one sendmsg. Frames have 2-3 (header+msgpack, payload);
 * batches of queued async calls a few dozen. Beyond this the frame still goes
 * out contiguously (we hold the caller's lock), just in several system calls. */
#define WINDOW 64

int tp_tcp_write_all(int fd, const struct iovec *iov, int iovcnt, atomic_int *stop)
{
	return tp_tcp_write_all_counted(fd, iov, iovcnt, stop, NULL);
}

/* Keeps at most TCP_PROGRESS_STEP bytes of the window: a blocking sendmsg
 * returns only once it queued everything it was given, so a 1 GiB payload in
 * one call would show no progress until its very end. A window less than
 * TCP_PROGRESS_SLACK over the step goes whole: cut at the step, a frame of
 * 1 MiB of payload would leave its last few dozen bytes (as many as its
 * header) to a second call and a TCP segment of their own, which the peer
 * then waits for. */
#define TCP_PROGRESS_SLACK (64u << 10)
static int window_cap(struct iovec *win, int n)
{
	size_t total = 0;
	for (int i = 0; i < n && total <= TCP_PROGRESS_STEP + TCP_PROGRESS_SLACK; i++)
		total += win[i].iov_len;
	if (total <= TCP_PROGRESS_STEP + TCP_PROGRESS_SLACK)
		return n;
	total = 0;
	for (int i = 0; i < n; i++) {
		if (win[i].iov_len >= TCP_PROGRESS_STEP - total) {
			win[i].iov_len = TCP_PROGRESS_STEP - total;
			return i + 1;
		}
		total += win[i].iov_len;
	}
	return n;
}

int tp_tcp_write_all_counted(int fd, const struct iovec *iov, int iovcnt, atomic_int *stop, atomic_uint_fast64_t *progress)
{
	struct iovec win[WINDOW];
	size_t off = 0; /* bytes of iov[0] already written */
	int calls = 0;  /* sendmsg calls that wrote something */

	for (;;) {
		/* Skip what is done (and empty iovecs, which sendmsg would accept but
		 * which would make the "nothing left" test below wrong). */
		while (iovcnt > 0 && off >= iov[0].iov_len) {
			off -= iov[0].iov_len;
			iov++;
			iovcnt--;
		}
		if (iovcnt <= 0)
			return TRANSPORT_OK;
		if (stop && atomic_load(stop))
			return TRANSPORT_ECLOSED;

		int n = iovcnt < WINDOW ? iovcnt : WINDOW;
		memcpy(win, iov, (size_t)n * sizeof(*win));
		win[0].iov_base = (char *)win[0].iov_base + off;
		win[0].iov_len -= off;
		if (progress)
			n = window_cap(win, n);

		struct msghdr mh = {.msg_iov = win, .msg_iovlen = (size_t)n};
		ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL);
		if (w >= 0) {
			/* Only the calls after the first: what the kernel takes at
			 * once lands in our own send buffer and proves nothing (a
			 * stopped peer's kernel takes pings too); room made later
			 * was made by the peer reading. */
			if (progress && w > 0 && calls++ > 0)
				atomic_fetch_add_explicit(progress, 1, memory_order_relaxed);
			off += (size_t)w;
			continue;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK) {
			/* Level-triggered: a socket shut down by another thread polls
			 * as writable at once, so a shutdown between the stop check
			 * above and this poll cannot leave us asleep. */
			struct pollfd pfd = {.fd = fd, .events = POLLOUT};
			if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
				return TRANSPORT_EIO;
			continue;
		}
		if (stop && atomic_load(stop))
			return TRANSPORT_ECLOSED;
		return errno == EPIPE ? TRANSPORT_ECLOSED : TRANSPORT_EIO;
	}
}

void tp_tcp_peer_name(int fd, char *buf, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char host[INET6_ADDRSTRLEN];

	snprintf(buf, len, "?");
	if (getpeername(fd, (struct sockaddr *)&ss, &sl) < 0)
		return;
	if (ss.ss_family == AF_INET) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
		if (inet_ntop(AF_INET, &s4->sin_addr, host, sizeof(host)))
			snprintf(buf, len, "%s:%u", host, ntohs(s4->sin_port));
	} else if (ss.ss_family == AF_INET6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
		if (inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof(host)))
			snprintf(buf, len, "[%s]:%u", host, ntohs(s6->sin6_port));
	}
}

void tp_tcp_set_bufs(int fd)
{
	static int kb = -1;
	if (kb < 0) {
		const char *e = getenv("REMOTE_GPU_TCP_BUF_KB");
		long v = e && *e ? strtol(e, NULL, 10) : 0;
		kb = v > 0 && v <= (1 << 20) ? (int)v : 0; /* at most 1 GiB */
	}
	if (!kb)
		return;
	int b = kb * 1024;
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &b, sizeof(b));
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &b, sizeof(b));
}
