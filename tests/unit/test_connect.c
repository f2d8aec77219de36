/* transport_connect_within: a host that drops SYNs fails at the deadline
 * (tcp:// and tls://), not after the kernel's two minutes of SYN retries; a
 * listening server and a refusal are unaffected by a deadline.
 *
 * The host that drops SYNs is a loopback listener with a full accept queue:
 * with backlog 0 Linux queues one connection, and while the queue is full it
 * drops every further SYN (ListenOverflows), so the client keeps retrying as
 * it would towards a host that is down. No network, no firewall rules. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "rg_clock.h"
#include "transport_int.h"

#define MAX_FILL 16

static int fill_fd[MAX_FILL], nfill;

/* A non-blocking connect to port; 1 when it completed within ms. */
static int connects_within(int port, int ms, int *fd_out)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	*fd_out = fd;
	if (fd < 0)
		return 0;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
		return 1;
	if (errno != EINPROGRESS)
		return 0;
	struct pollfd p = {.fd = fd, .events = POLLOUT};
	int err = 0;
	socklen_t sl = sizeof(err);
	return poll(&p, 1, ms) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &sl) == 0 && err == 0;
}

/* A listener that drops SYNs: its port, or -1 when this kernel does not make
 * one (the test then says so and fails: it cannot check anything). */
static int blackhole_open(int *lfd_out)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	*lfd_out = l;
	if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(l, 0) < 0 ||
	    getsockname(l, (struct sockaddr *)&sa, &sl) < 0)
		return -1;
	int port = ntohs(sa.sin_port);
	/* Fill the queue until a connect goes unanswered (one or two suffice). */
	while (nfill < MAX_FILL) {
		int fd;
		int ok = connects_within(port, 300, &fd);
		if (!ok) {
			close(fd);
			return port;
		}
		fill_fd[nfill++] = fd;
	}
	return -1;
}

static double since_s(uint64_t t0) { return (double)(rg_clock_ns() - t0) / 1e9; }

static void expect_timeout(const char *spec, unsigned ms)
{
	transport_addr a;
	transport_conn *c = (transport_conn *)1;
	if (!CHECK_EQ(transport_parse_addr(spec, &a), TRANSPORT_OK))
		return;
	uint64_t t0 = rg_clock_ns();
	int r = transport_connect_within(&a, ms, &c);
	double s = since_s(t0);
	CHECK_EQ(r, TRANSPORT_ETIMEDOUT);
	CHECK(c == NULL);
	/* not before the deadline, and not much after it (generous slack) */
	if (!CHECK(s >= ms / 1000.0 * 0.9 && s < ms / 1000.0 + 5))
		fprintf(stderr, "    %s within %u ms took %.2f s\n", spec, ms, s);
}

static void test_blackhole(void)
{
	int lfd, port = blackhole_open(&lfd);
	if (!CHECK(port > 0)) {
		fprintf(stderr, "    a listener with a full queue did not drop SYNs here\n");
		return;
	}
	char spec[64];
	snprintf(spec, sizeof(spec), "127.0.0.1:%d", port);
	expect_timeout(spec, 700);
	/* tls: the deadline ends the connect() before any handshake starts */
	snprintf(spec, sizeof(spec), "tls://127.0.0.1:%d", port);
	expect_timeout(spec, 700);
	for (int i = 0; i < nfill; i++)
		close(fill_fd[i]);
	nfill = 0;
	close(lfd);
}

/* A listener that accepts: the deadline changes nothing. */
static void test_reachable(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (!CHECK(l >= 0 && bind(l, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(l, 8) == 0 &&
		   getsockname(l, (struct sockaddr *)&sa, &sl) == 0))
		return;
	char spec[64];
	snprintf(spec, sizeof(spec), "127.0.0.1:%d", ntohs(sa.sin_port));
	transport_addr a;
	transport_conn *c = NULL;
	CHECK_EQ(transport_parse_addr(spec, &a), TRANSPORT_OK);
	if (CHECK_EQ(transport_connect_within(&a, 2000, &c), TRANSPORT_OK)) {
		/* blocking again: a receive waits rather than failing with EAGAIN */
		int fd = accept(l, NULL, NULL);
		CHECK(fd >= 0);
		char b = 'x';
		CHECK_EQ(write(fd, &b, 1), 1);
		transport_frame f;
		close(fd); /* one byte, then the end: mid-frame */
		CHECK_EQ(transport_recv_frame(c, &f, NULL, NULL), TRANSPORT_EIO);
		transport_close(c);
	}
	close(l);

	/* nobody listening: refused at once, not a timeout */
	CHECK_EQ(transport_parse_addr("127.0.0.1:1", &a), TRANSPORT_OK);
	uint64_t t0 = rg_clock_ns();
	CHECK_EQ(transport_connect_within(&a, 5000, &c), TRANSPORT_ECONNECT);
	CHECK(since_s(t0) < 2);
}

static void test_deadline(void)
{
	CHECK_EQ(tp_deadline(0), 0);
	CHECK_EQ(tp_deadline_left_ms(0), -1);
	uint64_t end = tp_deadline(1000);
	int left = tp_deadline_left_ms(end);
	CHECK(left > 900 && left <= 1000);
	CHECK_EQ(tp_deadline_left_ms(rg_clock_ns() - 1), 0);
}

int main(void)
{
	test_deadline();
	test_reachable();
	test_blackhole();
	return check_summary("test_connect");
}
