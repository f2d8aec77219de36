/*
 * A quick measure of the backend's own overheads, without the frontend: round
 * trips through the executor (mem_get_info) and through the waiter
 * (stream_sync), async calls (memset) per second, and H2D / D2H bandwidth in
 * 4 MiB frames, next to a raw TCP ping-pong of the same size on the same
 * loopback. Not a test: prints numbers.
 *
 *   bench_backend SERVER_BINARY DRIVER
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proto.h"
#include "transport.h"

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static transport_conn *conn;
static uint64_t seq;

static void *dest_cb(void *ctx, const transport_frame *f) { return ctx; }

static int call(uint32_t op, int nargs, const uint64_t *args, const void *pl, uint64_t plen, void *dest, int async)
{
	proto_msg m;
	proto_msg_begin(&m, op, ++seq, (uint32_t)nargs);
	for (int i = 0; i < nargs; i++)
		proto_msg_u64(&m, args[i]);
	proto_msg_finish(&m, async ? PROTO_F_ASYNC : 0, plen);
	struct iovec iov[2] = {{m.data, m.len}, {(void *)pl, plen}};
	int e = transport_sendv(conn, iov, plen ? 2 : 1);
	proto_msg_free(&m);
	if (e || async)
		return e;
	transport_frame f;
	if ((e = transport_recv_frame(conn, &f, dest_cb, dest)))
		return e;
	proto_view v;
	int32_t st = -1, la;
	if (proto_view_init(&v, &f.hdr, f.msg) == 0) {
		proto_reply_status(&v, &st, &la);
		proto_view_free(&v);
	}
	transport_frame_free(&f);
	return st;
}

/* Raw TCP ping-pong baseline: an echo thread on loopback. */
static int echo_port;
static void *echo_main(void *arg)
{
	int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	bind(ls, (struct sockaddr *)&a, sizeof(a));
	listen(ls, 1);
	getsockname(ls, (struct sockaddr *)&a, &al);
	__atomic_store_n(&echo_port, ntohs(a.sin_port), __ATOMIC_SEQ_CST);
	int s = accept(ls, NULL, NULL);
	setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	char buf[128];
	ssize_t n;
	while ((n = recv(s, buf, sizeof(buf), 0)) > 0)
		send(s, buf, (size_t)n, 0);
	close(s);
	close(ls);
	return NULL;
}

static double raw_rtt(int iters)
{
	pthread_t t;
	pthread_create(&t, NULL, echo_main, NULL);
	while (!__atomic_load_n(&echo_port, __ATOMIC_SEQ_CST))
		usleep(1000);
	int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)echo_port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	connect(s, (struct sockaddr *)&a, sizeof(a));
	setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	char buf[48] = {0};
	double t0 = 0;
	for (int i = 0; i < iters + 1000; i++) {
		if (i == 1000)
			t0 = now();
		send(s, buf, sizeof(buf), 0);
		size_t got = 0;
		while (got < sizeof(buf)) {
			ssize_t n = recv(s, buf + got, sizeof(buf) - got, 0);
			if (n <= 0)
				break;
			got += (size_t)n;
		}
	}
	double us = (now() - t0) / iters * 1e6;
	close(s);
	pthread_join(t, NULL);
	return us;
}

/* Raw TCP stream throughput on loopback: a sink thread. */
static int sink_port;
static void *sink_main(void *arg)
{
	int ls = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	bind(ls, (struct sockaddr *)&a, sizeof(a));
	listen(ls, 1);
	getsockname(ls, (struct sockaddr *)&a, &al);
	__atomic_store_n(&sink_port, ntohs(a.sin_port), __ATOMIC_SEQ_CST);
	int s = accept(ls, NULL, NULL);
	char *buf = malloc(4u << 20);
	while (recv(s, buf, 4u << 20, MSG_WAITALL) > 0)
		;
	free(buf);
	close(s);
	close(ls);
	return NULL;
}

static double raw_stream(size_t total)
{
	pthread_t t;
	pthread_create(&t, NULL, sink_main, NULL);
	while (!__atomic_load_n(&sink_port, __ATOMIC_SEQ_CST))
		usleep(1000);
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)sink_port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	connect(s, (struct sockaddr *)&a, sizeof(a));
	char *buf = calloc(1, 4u << 20);
	double t0 = now();
	for (size_t off = 0; off < total; off += 4u << 20)
		for (size_t k = 0; k < (4u << 20);) {
			ssize_t n = send(s, buf + k, (4u << 20) - k, 0);
			if (n <= 0)
				break;
			k += (size_t)n;
		}
	shutdown(s, SHUT_WR);
	pthread_join(t, NULL);
	double gbs = total / (now() - t0) / 1e9;
	close(s);
	free(buf);
	return gbs;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	char dir[] = "/tmp/rgbench.XXXXXX", pf[64];
	mkdtemp(dir);
	snprintf(pf, sizeof(pf), "%s/port", dir);
	pid_t pid = fork();
	if (pid == 0) {
		execl(argv[1], argv[1], "--listen", "127.0.0.1:0", "--port-file", pf, "--driver", argv[2], (char *)NULL);
		_exit(127);
	}
	int port = 0;
	for (int i = 0; i < 1000 && !port; i++) {
		FILE *f = fopen(pf, "r");
		if (f) {
			if (fscanf(f, "%d", &port) != 1)
				port = 0;
			fclose(f);
		}
		usleep(10000);
	}
	char s[64];
	transport_addr a;
	snprintf(s, sizeof(s), "127.0.0.1:%d", port);
	if (transport_parse_addr(s, &a) || transport_connect(&a, &conn))
		return 1;
	proto_msg m;
	proto_msg_begin(&m, PROTO_OP_HELLO, ++seq, 5);
	proto_msg_u64(&m, PROTO_VERSION);
	proto_msg_str(&m, "");
	proto_msg_u64(&m, (uint64_t)getpid());
	proto_msg_str(&m, "bench");
	proto_msg_str(&m, "bench_backend");
	proto_msg_finish(&m, 0, 0);
	struct iovec iov = {m.data, m.len};
	transport_sendv(conn, &iov, 1);
	proto_msg_free(&m);
	transport_frame f;
	transport_recv_frame(conn, &f, dest_cb, NULL);
	transport_frame_free(&f);

	const int N = 20000;
	double raw = raw_rtt(N);
	double t0 = now();
	for (int i = 0; i < N; i++)
		call(PROTO_OP_MEM_GET_INFO, 0, NULL, NULL, 0, NULL, 0);
	double exec_rtt = (now() - t0) / N * 1e6;
	uint64_t zero = 0;
	t0 = now();
	for (int i = 0; i < N; i++)
		call(PROTO_OP_STREAM_SYNC, 1, &zero, NULL, 0, NULL, 0);
	double wait_rtt = (now() - t0) / N * 1e6;
	t0 = now();
	for (int i = 0; i < N; i++)
		call(PROTO_OP_STREAM_QUERY, 1, &zero, NULL, 0, NULL, 0);
	double query_rtt = (now() - t0) / N * 1e6;
	t0 = now();
	for (int i = 0; i < N; i++)
		call(250, 0, NULL, NULL, 0, NULL, 0); /* unknown op: no driver call at all */
	double bare_rtt = (now() - t0) / N * 1e6;
	printf("raw TCP ping-pong %.1f us; unknown op %.1f us; stream_query %.1f us\n", raw, bare_rtt, query_rtt);

	const size_t chunk = 4u << 20, total = 256u << 20;
	uint8_t *buf = malloc(total);
	memset(buf, 1, total);
	uint64_t args[5] = {(uint64_t)total};
	call(PROTO_OP_MEM_ALLOC, 1, args, NULL, 0, NULL, 0); /* pointer not needed: read it back */
	proto_msg_begin(&m, PROTO_OP_MEM_ALLOC, ++seq, 1);
	proto_msg_u64(&m, total);
	proto_msg_finish(&m, 0, 0);
	iov = (struct iovec){m.data, m.len};
	transport_sendv(conn, &iov, 1);
	proto_msg_free(&m);
	transport_recv_frame(conn, &f, dest_cb, NULL);
	proto_view v;
	uint64_t dptr = 0;
	proto_view_init(&v, &f.hdr, f.msg);
	proto_arg_u64(&v, PROTO_REPLY_FIRST, &dptr);
	proto_view_free(&v);
	transport_frame_free(&f);

	/* async memsets: calls per second the executor takes */
	t0 = now();
	for (int i = 0; i < N; i++) {
		uint64_t ms[5] = {dptr, 0, 1, 256, 0};
		call(PROTO_OP_MEMSET, 5, ms, NULL, 0, NULL, 1);
	}
	call(PROTO_OP_STREAM_SYNC, 1, &zero, NULL, 0, NULL, 0);
	double async_rate = N / (now() - t0);

	for (int round = 0; round < 2; round++) {
		t0 = now();
		for (size_t off = 0; off < total; off += chunk) {
			uint64_t h[2] = {dptr + off, 0};
			call(PROTO_OP_MEMCPY_HTOD, 2, h, buf + off, chunk, NULL, 1);
		}
		call(PROTO_OP_STREAM_SYNC, 1, &zero, NULL, 0, NULL, 0);
		double h2d = total / (now() - t0) / 1e9;
		t0 = now();
		for (size_t off = 0; off < total; off += chunk) {
			uint64_t d[3] = {dptr + off, chunk, 0};
			call(PROTO_OP_MEMCPY_DTOH, 3, d, NULL, 0, buf + off, 0);
		}
		double d2h = total / (now() - t0) / 1e9;
		/* D2H with 8 requests in flight, as the frontend does */
		t0 = now();
		size_t nch = total / chunk, sent = 0, got = 0;
		while (got < nch) {
			while (sent < nch && sent - got < 8) {
				proto_msg q;
				proto_msg_begin(&q, PROTO_OP_MEMCPY_DTOH, ++seq, 3);
				proto_msg_u64(&q, dptr + sent * chunk);
				proto_msg_u64(&q, chunk);
				proto_msg_u64(&q, 0);
				proto_msg_finish(&q, 0, 0);
				struct iovec qi = {q.data, q.len};
				transport_sendv(conn, &qi, 1);
				proto_msg_free(&q);
				sent++;
			}
			transport_frame rf;
			if (transport_recv_frame(conn, &rf, dest_cb, buf + got * chunk))
				break;
			transport_frame_free(&rf);
			got++;
		}
		double d2hp = total / (now() - t0) / 1e9;
		printf("round %d: H2D %.2f GB/s, D2H one chunk at a time %.2f GB/s, 8 in flight %.2f GB/s\n", round, h2d,
		       d2h, d2hp);
	}
	printf("raw TCP stream %.2f GB/s\n", raw_stream(1u << 30));
	printf("raw TCP ping-pong %.1f us; mem_get_info %.1f us (%.2fx); stream_sync %.1f us (%.2fx); "
	       "async memsets %.0f/s\n", raw, exec_rtt, exec_rtt / raw, wait_rtt, wait_rtt / raw, async_rate);
	transport_close(conn);
	kill(pid, SIGTERM);
	int st;
	waitpid(pid, &st, 0);
	printf("server exit %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	return 0;
}
