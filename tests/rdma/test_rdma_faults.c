/*
 * rdma faults (see test_rdma.c): a QP forced into the error state, a peer that
 * vanishes without a word, the server process killed while the client waits
 * or sends, a client process killed mid-frame, the listener closed with
 * connections open. Each must end within a bound, never hang. The child
 * processes are this program run again (--child-server, --child-client):
 * verbs resources must not cross a fork.
 */
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

#include "rdma_harness.h"

static void *recv_one(void *arg)
{
	transport_conn *c = arg;
	transport_frame f;
	intptr_t r = transport_recv_frame(c, &f, NULL, NULL);
	if (r == 0)
		transport_frame_free(&f);
	return (void *)r;
}

void test_qp_error(void)
{
	transport_conn *c;
	conn_rec *r = connect_rec(&c);
	if (!r)
		return;
	uint8_t one = pat(1, 0);
	CHECK_EQ(send_frame(c, OP_DATA, 1, 0, &one, 1), 0);
	CHECK(WAIT_FOR(r->nframes == 1, 5000));
	CHECK_EQ(r->nbad, 0);
	pthread_t th;
	pthread_create(&th, NULL, recv_one, c);
	usleep(200000);
	uint64_t t0 = now_ms();
	tp_rdma_test_break_qp(c);
	void *res;
	pthread_join(th, &res);
	CHECK_EQ((intptr_t)res, TRANSPORT_EIO);
	CHECK(now_ms() - t0 < 3000);
	CHECK(send_frame(c, OP_DATA, 2, 0, NULL, 0) != 0);
	CHECK(WAIT_FOR(r->nclose == 1, 5000));
	transport_close(c);
}

/* A peer that vanishes without a word (no DISCONNECTED, no flush it reports):
 * found by keepalives within keepalive_ms + the QP's retry time. Both ways:
 * the client's receiver fails with EIO; the server frees the session. */
void test_vanish(void)
{
	uint64_t bound = (uint64_t)tp_rdma_conf()->keepalive_ms + 4000;
	for (int side = 0; side < 2; side++) {
		transport_conn *c;
		conn_rec *r = connect_rec(&c);
		if (!r)
			return;
		r->keep = 1;
		pthread_t th;
		pthread_create(&th, NULL, recv_one, c);
		usleep(100000);
		uint64_t t0 = now_ms();
		printf("  vanish side %d\n", side);
		if (side == 0) {
			tp_rdma_test_vanish(r->c); /* the server's host "dies" */
			void *res;
			pthread_join(th, &res);
			uint64_t dt = now_ms() - t0;
			printf("  server vanished: recv_frame returned %s after %" PRIu64 " ms\n",
			       transport_strerror((int)(intptr_t)res), dt);
			CHECK_EQ((intptr_t)res, TRANSPORT_EIO);
			CHECK(dt < bound);
			transport_close(c);
			transport_shutdown(r->c);
		} else {
			tp_rdma_test_vanish(c); /* the client's host "dies" */
			CHECK(WAIT_FOR(r->nclose == 1, bound));
			uint64_t dt = now_ms() - t0;
			printf("  client vanished: server on_close(%s) after %" PRIu64 " ms\n",
			       transport_strerror(r->close_err), dt);
			CHECK_EQ(r->close_err, TRANSPORT_EIO);
			transport_shutdown(c);
			pthread_join(th, NULL);
			transport_close(c);
		}
	}
}

/* ---- with child processes ---- */

static pid_t spawn(char *const argv[], int *out_fd)
{
	int p[2];
	if (pipe(p) != 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		execv(self_path, argv);
		_exit(127);
	}
	close(p[1]);
	*out_fd = p[0];
	return pid;
}

static int read_line(int fd, char *buf, size_t n, int ms)
{
	size_t k = 0;
	uint64_t end = now_ms() + (uint64_t)ms;
	while (k + 1 < n && now_ms() < end) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		if (poll(&pf, 1, 100) <= 0)
			continue;
		if (read(fd, buf + k, 1) != 1)
			break;
		if (buf[k] == '\n')
			break;
		k++;
	}
	buf[k] = 0;
	return (int)k;
}

static void reap(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* A child process serving on a port of its own (child_server), and that
 * port; 0 (a failed check, the child reaped) when it did not start. */
static int spawn_server(pid_t *pid, int *fd)
{
	char *argv[] = {self_path, "--child-server", NULL};
	char line[64];
	*pid = spawn(argv, fd);
	if (!CHECK(*pid > 0) || !CHECK(read_line(*fd, line, sizeof(line), 10000) > 0)) {
		reap(*pid);
		return 0;
	}
	return atoi(line);
}

void test_server_death(void)
{
	int fd, port;
	pid_t pid;
	/* 1: blocked in recv_frame when the server dies */
	if (!(port = spawn_server(&pid, &fd)))
		return;
	transport_conn *c = connect_to(port);
	if (CHECK(c)) {
		uint8_t abc[3];
		fill(abc, 7, 3);
		CHECK_EQ(send_frame(c, OP_ECHO, 7, 0, abc, 3), 0);
		rx_ctx x = {.buf = malloc(64 + GUARD), .cap = 64 + GUARD};
		recv_check(c, &x, OP_ECHO, 7, 3);
		free(x.buf);
		pthread_t th;
		pthread_create(&th, NULL, recv_one, c);
		usleep(300000);
		uint64_t t0 = now_ms();
		kill(pid, SIGKILL);
		void *res;
		pthread_join(th, &res);
		uint64_t dt = now_ms() - t0;
		printf("  server killed: recv_frame returned %s after %" PRIu64 " ms\n",
		       transport_strerror((int)(intptr_t)res), dt);
		CHECK((intptr_t)res == TRANSPORT_ECLOSED || (intptr_t)res == TRANSPORT_EIO);
		CHECK(dt < 5000);
		CHECK(send_frame(c, OP_DATA, 8, 0, NULL, 0) != 0);
		transport_close(c);
	}
	waitpid(pid, NULL, 0);
	close(fd);

	/* 2: in the middle of a 64 MiB send when the server dies */
	if (!(port = spawn_server(&pid, &fd)))
		return;
	c = connect_to(port);
	if (CHECK(c)) {
		size_t n = 64u << 20;
		uint8_t *p = calloc(1, n);
		uint64_t t0 = 0;
		int r = 0;
		pid_t killer = fork();
		if (killer == 0) {
			usleep(500000);
			kill(pid, SIGKILL);
			_exit(0);
		}
		for (int i = 0; i < 100 && r == 0; i++) {
			r = send_frame(c, OP_DATA, 100 + (uint64_t)i, 0, p, n);
			if (!t0 && kill(pid, 0) != 0)
				t0 = now_ms();
		}
		waitpid(killer, NULL, 0);
		printf("  server killed: sendv returned %s\n", transport_strerror(r));
		CHECK(r == TRANSPORT_EIO || r == TRANSPORT_ECLOSED);
		free(p);
		transport_close(c);
	}
	waitpid(pid, NULL, 0);
	close(fd);

	/* 3: a stopped server: the sender runs out of credits and times out */
	if (!(port = spawn_server(&pid, &fd)))
		return;
	c = connect_to(port);
	if (CHECK(c)) {
		kill(pid, SIGSTOP);
		uint64_t t0 = now_ms();
		int r = 0;
		for (int i = 0; i < 1000 && r == 0; i++)
			r = send_frame(c, OP_DATA, 1000 + (uint64_t)i, 0, "y", 1);
		uint64_t dt = now_ms() - t0;
		printf("  server stopped: sendv returned %s after %" PRIu64 " ms\n", transport_strerror(r), dt);
		CHECK_EQ(r, TRANSPORT_ETIMEDOUT);
		CHECK(dt < (uint64_t)tp_rdma_conf()->timeout_ms + 3000);
		transport_close(c);
	}
	kill(pid, SIGCONT);
	reap(pid);
	close(fd);
}

void test_client_death(void)
{
	char port[16];
	snprintf(port, sizeof(port), "%d", S.port);
	char *argv[] = {self_path, "--child-client", (char *)ip, port, NULL};
	int fd;
	char line[64];
	pid_t pid = spawn(argv, &fd);
	if (!CHECK(pid > 0))
		return;
	CHECK(read_line(fd, line, sizeof(line), 10000) > 0); /* "sending ADDR" */
	conn_rec *r = strncmp(line, "sending ", 8) ? NULL : rec_by_peer(line + 8);
	if (!CHECK(r)) {
		reap(pid);
		return;
	}
	usleep(700000); /* in the middle of a 64 MiB frame */
	uint64_t t0 = now_ms();
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	CHECK(WAIT_FOR(r->nclose == 1, 5000));
	printf("  client killed: server on_close(%s) after %" PRIu64 " ms, %d frames before\n",
	       transport_strerror(r->close_err), now_ms() - t0, r->nframes);
	CHECK(r->close_err == TRANSPORT_EIO || r->close_err == TRANSPORT_ECLOSED);
	CHECK_EQ(r->nbad, 0);
	close(fd);
}

/* Listener close with connections open: on_close for each, clients see the
 * end. */
void test_listener_close(void)
{
	transport_conn *c[2] = {connect_to(S.port), connect_to(S.port)};
	if (!CHECK(c[0] && c[1]))
		return;
	conn_rec *r[2] = {rec_for(c[0]), rec_for(c[1])};
	if (!CHECK(r[0] && r[1]))
		return;
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, recv_one, c[i]);
	usleep(200000);
	uint64_t t0 = now_ms();
	transport_listener_close(S.l);
	for (int i = 0; i < 2; i++) {
		void *res;
		pthread_join(th[i], &res);
		CHECK_EQ((intptr_t)res, TRANSPORT_ECLOSED);
		CHECK(WAIT_FOR(r[i]->nclose == 1, 5000));
		CHECK_EQ(r[i]->close_err, TRANSPORT_ECLOSED);
		transport_close(c[i]);
	}
	CHECK(now_ms() - t0 < 5000);
	/* the loop ends once the listener and every connection are gone */
	pthread_join(S.thread, NULL);
	uv_loop_close(&S.loop);
	S.l = NULL;
}

/* A listener that serves no one and sends every client to the test server
 * (on_redirect), with a cookie the client must present there. */

/* ---- children ---- */

static void *child_srv_accept(void *ctx, transport_conn *c) { return c; }
static void *child_srv_dest(void *ctx, const transport_frame *f) { return malloc(f->hdr.payload_len); }
static void child_srv_frame(void *ctx, transport_frame *f)
{
	transport_conn *c = ctx;
	uint64_t seq = 0;
	size_t extra;
	int eok;
	if (msg_op(f, &seq, &extra, &eok) == OP_ECHO)
		send_frame(c, OP_ECHO, seq, 0, f->payload, (size_t)f->hdr.payload_len);
	free(f->payload);
	transport_frame_free(f);
}
static void child_srv_close(void *ctx, int err) { transport_close(ctx); }

int child_server(void)
{
	static const transport_server_cb cb = {child_srv_accept, child_srv_dest, child_srv_frame, child_srv_close};
	uv_loop_t loop;
	transport_addr a;
	transport_listener *l;
	char spec[128];
	uv_loop_init(&loop);
	snprintf(spec, sizeof(spec), "rdma://%s:0", ip);
	if (transport_parse_addr(spec, &a) || transport_listen(&loop, &a, &cb, NULL, &l) != 0)
		return 1;
	printf("%d\n", transport_listener_port(l));
	fflush(stdout);
	uv_run(&loop, UV_RUN_DEFAULT);
	return 0;
}

int child_client(const char *port)
{
	transport_conn *c = connect_to(atoi(port));
	if (!c)
		return 1;
	size_t n = 64u << 20;
	uint8_t *p = malloc(n);
	fill(p, 5, n);
	char me[64];
	tp_rdma_addr_name(rdma_get_local_addr(tp_rdma_conn_ep(c)->id), me, sizeof(me));
	printf("sending %s\n", me);
	fflush(stdout);
	for (uint64_t i = 0;; i++)
		if (send_frame(c, OP_DATA, 5, 0, p, n) != 0)
			return 1;
}

/* A hung test must not hang the suite (and the guest): say which one, exit. */
