/*
 * Process-per-session isolation. A kernel fault (an illegal address, say) is fatal
 * to every CUDA context of the process it happens in: on an H200, after one
 * client's fault, cuCtxCreate for the next client failed with
 * CUDA_ERROR_ILLEGAL_ADDRESS. So by default each session runs in a process of its
 * own: the supervisor accepts, and hands the socket to a fresh `remote-gpud
 * --session-fd 3` (spawned with libuv, the descriptor as its fd 3). The child
 * serves that one connection and exits; the driver frees whatever it held.
 *
 * An RDMA connection cannot change process (its queue pair, memory regions and
 * completion channel belong to the process that made them), so for rdma the
 * client is sent instead: on a connection request the supervisor starts
 * `remote-gpud --session-listen rdma://HOST:0 --port-fd 3`, which listens on a
 * port of its own before it loads the driver and writes the port and a random
 * cookie to fd 3 (a pipe); the supervisor rejects the request with both in the
 * reject's private data, and the client connects there presenting the cookie
 * (transport rdma_client.c); the session process serves no one else. The
 * supervisor waits for the port, not for the child's driver: the first is
 * milliseconds, the second can take a second on a large GPU.
 */
#include "backend.h"
#include "admit.h"
#include "tenants.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

typedef struct child {
	uv_process_t proc;
	char peer[64];
	struct child *next;
} child;

static struct {
	uv_loop_t *loop;
	char *const *argv; /* the session child's command line, fd 3 being the socket */
	char *const *argv_listen; /* for rdma: it listens and writes its port to fd 3 */
	child *children;
	int nchildren;
	int shutdown_signal; /* passed on to the children at shutdown */
} I;

static void child_closed(uv_handle_t *h) { free(h->data); }

static void child_exited(uv_process_t *p, int64_t status, int signal)
{
	child *c = p->data;
	if (signal && signal == I.shutdown_signal)
		/* What we asked for: a child still starting has no handler for it yet. */
		LOG_INFO(BE_LOG, "session process %d (%s) ended by the shutdown signal", p->pid, c->peer);
	else if (signal)
		LOG_WARN(BE_LOG, "session process %d (%s) killed by signal %d", p->pid, c->peer, signal);
	else if (status == BE_EXIT_AUTH)
		/* It logged the wrong token; only we see sources over time. */
		be_admit_auth_failed(c->peer);
	else if (status)
		LOG_WARN(BE_LOG, "session process %d (%s) exited with %lld", p->pid, c->peer, (long long)status);
	else
		LOG_INFO(BE_LOG, "session process %d (%s) done", p->pid, c->peer);
	be_status_reap(p->pid); /* what a process that died could not remove */
	be_tenants_reap(p->pid); /* its tenant's memory and session, however it ended */
	be_admit_release(c->peer);
	for (child **pp = &I.children; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	I.nchildren--;
	uv_close((uv_handle_t *)p, child_closed);
}

void be_isolate_init(uv_loop_t *loop, char *const *child_argv, char *const *child_argv_listen)
{
	I.loop = loop;
	I.argv = child_argv;
	I.argv_listen = child_argv_listen;
}

/* Starts a session process with fd as its fd 3 (closed here either way), if
 * admission lets peer in (admit.c); the admission is released when it exits. */
static child *spawn(char *const *argv, int fd, const char *peer)
{
	if (be_admit_take(peer) != 0) {
		close(fd);
		return NULL;
	}
	child *c = calloc(1, sizeof(*c));
	if (!c) {
		LOG_ERROR(BE_LOG, "%s: out of memory: connection dropped", peer);
		be_admit_release(peer);
		close(fd);
		return NULL;
	}
	snprintf(c->peer, sizeof(c->peer), "%s", peer);
	/* fd 4: the tenant ledger (tenants.c), when there is one. */
	int ledger = be_tenants_ledger_fd();
	uv_stdio_container_t stdio[5] = {
		{.flags = UV_INHERIT_FD, .data.fd = 0},
		{.flags = UV_INHERIT_FD, .data.fd = 1},
		{.flags = UV_INHERIT_FD, .data.fd = 2},
		{.flags = UV_INHERIT_FD, .data.fd = fd},
		{.flags = UV_INHERIT_FD, .data.fd = ledger},
	};
	uv_process_options_t o = {
		.exit_cb = child_exited,
		.file = "/proc/self/exe",
		.args = (char **)argv,
		.stdio_count = ledger >= 0 ? 5 : 4,
		.stdio = stdio,
	};
	c->proc.data = c;
	int r = uv_spawn(I.loop, &c->proc, &o);
	close(fd); /* the child has its own copy (or failed to start) */
	if (r < 0) {
		LOG_ERROR(BE_LOG, "%s: cannot start a session process: %s", peer, uv_strerror(r));
		be_admit_release(peer);
		uv_close((uv_handle_t *)&c->proc, child_closed);
		return NULL;
	}
	c->next = I.children;
	I.children = c;
	I.nchildren++;
	be_status_count_session();
	LOG_INFO(BE_LOG, "%s: session process %d", peer, c->proc.pid);
	return c;
}

void be_isolate_accept_fd(void *ctx, int fd, const char *peer) { spawn(I.argv, fd, peer); }

/* Reads the "PORT COOKIE" line (the cookie in 32 hex digits) the child writes
 * to its fd 3, within ms. */
static int read_port(int fd, int ms, transport_cookie *cookie)
{
	char buf[64];
	size_t n = 0;
	uint64_t end = rg_clock_ns() + (uint64_t)ms * 1000000u;
	while (n < sizeof(buf) - 1) {
		uint64_t now = rg_clock_ns();
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (now >= end || poll(&p, 1, (int)((end - now) / 1000000u) + 1) < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (!p.revents)
			continue;
		ssize_t r = read(fd, buf + n, sizeof(buf) - 1 - n);
		if (r <= 0)
			return -1; /* the child died (or closed it) before saying */
		n += (size_t)r;
		if (memchr(buf, '\n', n))
			break;
	}
	buf[n] = 0;
	char *e;
	long port = strtol(buf, &e, 10);
	if (e == buf || *e != ' ' || strlen(e + 1) != 2 * TRANSPORT_COOKIE_LEN + 1 || e[1 + 2 * TRANSPORT_COOKIE_LEN] != '\n')
		return -1;
	for (int i = 0; i < TRANSPORT_COOKIE_LEN; i++) {
		char hex[3] = {e[1 + 2 * i], e[2 + 2 * i], 0}, *x;
		cookie->b[i] = (uint8_t)strtoul(hex, &x, 16);
		if (*x)
			return -1;
	}
	return port > 0 && port <= 65535 ? (int)port : -1;
}

int be_isolate_redirect(void *ctx, const char *peer, transport_cookie *cookie)
{
	int fds[2];
	if (pipe2(fds, O_CLOEXEC) != 0) {
		LOG_ERROR(BE_LOG, "%s: pipe: %s: connection refused", peer, strerror(errno));
		return -1;
	}
	child *c = spawn(I.argv_listen, fds[1], peer);
	if (!c) {
		close(fds[0]);
		return -1;
	}
	int port = read_port(fds[0], BE_SESSION_LISTEN_MS, cookie);
	close(fds[0]);
	if (port < 0) {
		LOG_ERROR(BE_LOG, "%s: session process %d did not report a port within %d ms: connection refused",
			  peer, c->proc.pid, BE_SESSION_LISTEN_MS);
		uv_process_kill(&c->proc, SIGKILL);
	}
	return port;
}

void be_isolate_shutdown(int signum)
{
	I.shutdown_signal = signum;
	for (child *c = I.children; c; c = c->next)
		uv_process_kill(&c->proc, signum);
}

int be_isolate_live(void) { return I.nchildren; }
