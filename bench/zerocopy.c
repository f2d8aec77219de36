/*
 * zerocopy: does MSG_ZEROCOPY pay for large sends on this host's loopback?
 * (transport/README.md, "Bulk copies"). One sender thread writes TOTAL bytes
 * in sends of CHUNK bytes from one buffer to a receiver thread over
 * 127.0.0.1, plain and with SO_ZEROCOPY + MSG_ZEROCOPY (completions read
 * from the error queue, as a sender that reuses its buffer must), and
 * prints GB/s of each. Standalone, not built by CMake:
 *   gcc -O2 -pthread -o zerocopy bench/zerocopy.c && ./zerocopy [CHUNK_MIB] [TOTAL_MIB]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef SO_ZEROCOPY
#define SO_ZEROCOPY 60
#endif
#ifndef MSG_ZEROCOPY
#define MSG_ZEROCOPY 0x4000000
#endif

static size_t chunk, total;

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static void *rx(void *arg)
{
	int fd = (int)(long)arg;
	char *b = malloc(chunk);
	size_t got = 0;
	while (got < total) {
		ssize_t n = recv(fd, b, chunk, 0);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	free(b);
	return NULL;
}

/* Reaps zerocopy completions; returns how many sends completed. */
static unsigned reap(int fd, int wait)
{
	unsigned done = 0;
	for (;;) {
		char ctrl[128];
		struct msghdr m = {.msg_control = ctrl, .msg_controllen = sizeof(ctrl)};
		if (recvmsg(fd, &m, MSG_ERRQUEUE | (wait ? 0 : MSG_DONTWAIT)) < 0) {
			if (errno == EAGAIN && wait) {
				struct pollfd p = {fd, 0, 0};
				poll(&p, 1, 100);
				continue;
			}
			return done;
		}
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
			struct sock_extended_err *e = (struct sock_extended_err *)CMSG_DATA(c);
			if (e->ee_origin == SO_EE_ORIGIN_ZEROCOPY)
				done += e->ee_data - e->ee_info + 1;
		}
		wait = 0;
	}
}

static double run(int zc)
{
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	bind(l, (struct sockaddr *)&a, sizeof(a));
	listen(l, 1);
	getsockname(l, (struct sockaddr *)&a, &al);
	int s = socket(AF_INET, SOCK_STREAM, 0);
	connect(s, (struct sockaddr *)&a, sizeof(a));
	int r = accept(l, NULL, NULL);
	if (zc && setsockopt(s, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one)) != 0) {
		perror("SO_ZEROCOPY");
		return 0;
	}
	pthread_t t;
	pthread_create(&t, NULL, rx, (void *)(long)r);
	char *b = malloc(chunk);
	memset(b, 1, chunk);
	unsigned sent = 0, done = 0;
	double t0 = now();
	for (size_t off = 0; off < total; off += chunk) {
		size_t left = chunk;
		while (left) {
			ssize_t n = send(s, b + chunk - left, left, zc ? MSG_ZEROCOPY : 0);
			if (n < 0 && errno == ENOBUFS) { /* too many pages pinned: reap first */
				done += reap(s, 1);
				continue;
			}
			if (n <= 0) {
				perror("send");
				return 0;
			}
			left -= (size_t)n;
			sent += zc;
		}
		if (zc)
			done += reap(s, 0);
	}
	while (zc && done < sent) /* the buffer may be reused only now */
		done += reap(s, 1);
	pthread_join(t, NULL);
	double dt = now() - t0;
	close(s);
	close(r);
	close(l);
	free(b);
	return total / dt / 1e9;
}

int main(int argc, char **argv)
{
	chunk = (argc > 1 ? strtoul(argv[1], NULL, 10) : 1) << 20;
	total = (argc > 2 ? strtoul(argv[2], NULL, 10) : 1024) << 20;
	for (int i = 0; i < 3; i++)
		printf("chunk %zu MiB: plain %.2f GB/s, MSG_ZEROCOPY %.2f GB/s\n", chunk >> 20, run(0), run(1));
	return 0;
}
