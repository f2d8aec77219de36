/*
 * The transport baselines: what plain TCP over 127.0.0.1 does on this host, measured
 * the way remote-gpu uses it, so that the CUDA numbers measured through libremote.so
 * can be read as a fraction of what the socket allows.
 *
 * (d) ping-pong: a 64-byte message and a 64-byte answer, TCP_NODELAY on both ends,
 *     one send() and one blocking receive per side: the floor of a synchronous
 *     forwarded call (whose frame is a 40-byte header plus a short msgpack body, or none).
 * (e) stream: messages of S bytes, each an 8-byte header and the payload written with
 *     one writev() (as a frame is), received by a thread into one S-byte buffer.
 *     "stream" writes them back to back and waits for one acknowledgement at the end:
 *     the socket's throughput. "acked" waits for a 1-byte answer after each message:
 *     the shape of a synchronous cudaMemcpy (payload, then a reply), which for small
 *     sizes is bound by the round trip rather than by bandwidth.
 *
 * The peer is a thread of this process, so both ends share the host's cores exactly
 * as remote-gpud and its client do over loopback.
 */
#include "bench.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define PING_BYTES 64
#define FLAG_ACK 1u  /* answer this message with one byte */
#define FLAG_STOP 2u /* the peer closes */

struct msg_hdr {
	uint32_t size;
	uint32_t flags;
};

struct peer {
	int listen_fd;
	int fd;
	pthread_t thread;
	size_t buf_size; /* stream: the largest message */
	int err;         /* errno of the peer thread's failure, if any */
};

static int send_all(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n) {
		ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

static int recv_all(int fd, void *p, size_t n)
{
	char *c = p;
	while (n) {
		ssize_t r = recv(fd, c, n, MSG_WAITALL);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		c += r;
		n -= (size_t)r;
	}
	return 0;
}

/* writev() until everything is out; iov is modified */
static int writev_all(int fd, struct iovec *iov, int cnt)
{
	while (cnt) {
		ssize_t w = writev(fd, iov, cnt);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		while (cnt && (size_t)w >= iov->iov_len) {
			w -= (ssize_t)iov->iov_len;
			iov++;
			cnt--;
		}
		if (cnt) {
			iov->iov_base = (char *)iov->iov_base + w;
			iov->iov_len -= (size_t)w;
		}
	}
	return 0;
}

static void set_nodelay(int fd)
{
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static void *pingpong_peer(void *arg)
{
	struct peer *p = arg;
	char buf[PING_BYTES];
	int fd = accept(p->listen_fd, NULL, NULL);
	if (fd < 0) {
		p->err = errno;
		return NULL;
	}
	set_nodelay(fd);
	while (recv_all(fd, buf, sizeof(buf)) == 0)
		if (send_all(fd, buf, sizeof(buf)) != 0)
			break;
	close(fd);
	return NULL;
}

static void *stream_peer(void *arg)
{
	struct peer *p = arg;
	struct msg_hdr h;
	char ack = 1;
	char *buf = malloc(p->buf_size ? p->buf_size : 1);
	int fd = accept(p->listen_fd, NULL, NULL);
	if (fd < 0 || !buf) {
		p->err = fd < 0 ? errno : ENOMEM;
		free(buf);
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	memset(buf, 0, p->buf_size); /* fault the pages in before anything is timed */
	set_nodelay(fd);
	while (recv_all(fd, &h, sizeof(h)) == 0) {
		if (h.flags & FLAG_STOP || h.size > p->buf_size)
			break;
		if (recv_all(fd, buf, h.size) != 0)
			break;
		if (h.flags & FLAG_ACK && send_all(fd, &ack, 1) != 0)
			break;
	}
	close(fd);
	free(buf);
	return NULL;
}

/* Starts the peer thread on 127.0.0.1:<any> and connects to it. */
static int peer_start(struct peer *p, void *(*fn)(void *))
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof(a);
	p->fd = -1;
	p->err = 0;
	p->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
	if (p->listen_fd < 0)
		return -1;
	if (bind(p->listen_fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    listen(p->listen_fd, 1) != 0 ||
	    getsockname(p->listen_fd, (struct sockaddr *)&a, &alen) != 0)
		goto fail;
	if (pthread_create(&p->thread, NULL, fn, p) != 0)
		goto fail;
	p->fd = socket(AF_INET, SOCK_STREAM, 0);
	if (p->fd < 0 || connect(p->fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		/* unblock the accept so the thread ends */
		shutdown(p->listen_fd, SHUT_RDWR);
		pthread_join(p->thread, NULL);
		goto fail;
	}
	set_nodelay(p->fd);
	return 0;
fail:
	perror("remote-bench: tcp setup");
	if (p->fd >= 0)
		close(p->fd);
	close(p->listen_fd);
	return -1;
}

static void peer_stop(struct peer *p)
{
	shutdown(p->fd, SHUT_WR);
	pthread_join(p->thread, NULL);
	close(p->fd);
	close(p->listen_fd);
}

static int tcp_pingpong(const struct bench_opts *o, struct json *j)
{
	struct peer p = {0};
	struct samples s;
	char buf[PING_BYTES];
	int warm = o->rtt_iters / 10 + 10, rc = 0;

	memset(buf, 0x5a, sizeof(buf));
	if (peer_start(&p, pingpong_peer) != 0)
		return -1;
	samples_init(&s, (size_t)o->rtt_iters);
	for (int i = 0; i < warm + o->rtt_iters; i++) {
		uint64_t t0 = bench_now_ns();
		if (send_all(p.fd, buf, sizeof(buf)) != 0 || recv_all(p.fd, buf, sizeof(buf)) != 0) {
			perror("remote-bench: tcp ping-pong");
			rc = -1;
			break;
		}
		if (i >= warm)
			samples_add(&s, (double)(bench_now_ns() - t0) * 1e-9);
	}
	peer_stop(&p);
	struct summary r = samples_summary(&s);
	samples_free(&s);
	if (rc)
		return rc;

	printf("\n== TCP loopback ping-pong (%d B each way, TCP_NODELAY, %zu round trips) ==\n",
	       PING_BYTES, r.n);
	printf("  median %8.2f us   p99 %8.2f us   min %8.2f us   mean %8.2f us\n",
	       r.median * 1e6, r.p99 * 1e6, r.min * 1e6, r.mean * 1e6);
	json_open(j, "tcp_pingpong", '{');
	json_int(j, "msg_bytes", PING_BYTES);
	json_summary_us(j, &r);
	json_close(j, '}');
	return 0;
}

struct stream_ctx {
	int fd;
	char *buf;
};

/* one acknowledged message: the shape of a synchronous copy */
static int send_acked(void *arg, size_t bytes)
{
	struct stream_ctx *c = arg;
	struct msg_hdr h = {(uint32_t)bytes, FLAG_ACK};
	struct iovec iov[2] = {{&h, sizeof(h)}, {c->buf, bytes}};
	char ack;
	if (writev_all(c->fd, iov, 2) != 0 || recv_all(c->fd, &ack, 1) != 0)
		return -1;
	return 0;
}

/*
 * Messages back to back for min_time seconds (at least 5), the last one acknowledged;
 * returns seconds, -1 on error, and the number of messages in *n.
 */
static double send_stream(struct stream_ctx *c, size_t bytes, double min_time, long *n)
{
	char ack;
	uint64_t t0 = bench_now_ns(), limit = (uint64_t)(min_time * 1e9);
	int last = 0;
	for (*n = 0; !last; ++*n) {
		last = *n >= 4 && (bench_now_ns() - t0 >= limit || *n >= 10000000);
		struct msg_hdr h = {(uint32_t)bytes, last ? FLAG_ACK : 0};
		struct iovec iov[2] = {{&h, sizeof(h)}, {c->buf, bytes}};
		if (writev_all(c->fd, iov, 2) != 0)
			return -1;
	}
	if (recv_all(c->fd, &ack, 1) != 0)
		return -1;
	return (double)(bench_now_ns() - t0) * 1e-9;
}

static int tcp_stream(const struct bench_opts *o, struct json *j)
{
	struct peer p = {.buf_size = o->max_size};
	struct stream_ctx c;
	char name[32];
	int rc = 0;

	c.buf = malloc(o->max_size);
	if (!c.buf)
		return -1;
	memset(c.buf, 0xa5, o->max_size);
	if (peer_start(&p, stream_peer) != 0) {
		free(c.buf);
		return -1;
	}
	c.fd = p.fd;

	printf("\n== TCP loopback stream (GB/s = 1e9 B/s; writev of 8 B header + payload) ==\n");
	printf("  %-9s %12s %12s %14s\n", "size", "stream", "acked", "acked median");
	json_open(j, "tcp_stream", '[');
	for (size_t sz = o->min_size; sz <= o->max_size; sz *= (size_t)o->step) {
		struct summary acked;
		if (measure_xfer(send_acked, &c, sz, o->min_time, &acked) != 0) {
			perror("remote-bench: tcp stream");
			rc = -1;
			break;
		}
		long n;
		double t = send_stream(&c, sz, o->min_time, &n);
		if (t < 0) {
			perror("remote-bench: tcp stream");
			rc = -1;
			break;
		}
		double stream = gbps(sz * (size_t)n, t), ack = gbps(sz, acked.median);
		printf("  %-9s %12.2f %12.2f %11.1f us\n", size_name(sz, name, sizeof(name)),
		       stream, ack, acked.median * 1e6);
		fflush(stdout);
		json_open(j, NULL, '{');
		json_int(j, "bytes", (long long)sz);
		json_num(j, "stream_gbps", stream);
		json_int(j, "stream_msgs", n);
		json_num(j, "acked_gbps", ack);
		json_num(j, "acked_mean_gbps", gbps(sz, acked.mean));
		json_summary_us(j, &acked);
		json_close(j, '}');
		if (sz > o->max_size / (size_t)o->step)
			break;
	}
	json_close(j, ']');
	if (rc == 0) {
		struct msg_hdr stop = {0, FLAG_STOP};
		send_all(p.fd, &stop, sizeof(stop));
	}
	peer_stop(&p);
	free(c.buf);
	return rc;
}

int tcp_bench(const struct bench_opts *o, struct json *j)
{
	int rc = 0;
	if (tcp_pingpong(o, j) != 0) {
		json_str(j, "tcp_pingpong_error", "failed (see stderr)");
		rc = -1;
	}
	bench_checkpoint(o, j);
	if (tcp_stream(o, j) != 0) {
		json_str(j, "tcp_stream_error", "failed (see stderr)");
		rc = -1;
	}
	return rc;
}
