/*
 * Process-per-session isolation. A kernel fault (an illegal address, say) is fatal
 * to every CUDA context of the process it happens in: on an H200, after one
 * client's fault, cuCtxCreate for the next client failed with
 * CUDA_ERROR_ILLEGAL_ADDRESS. So by default each session runs in a process of its
 * own: the supervisor accepts, and hands the socket to a fresh `remote-gpud
 * --session-fd 3` (spawned with libuv, the descriptor as its fd 3). The child
 * serves that one connection and exits; the driver frees whatever it held.
 */
#include "backend.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct child {
	uv_process_t proc;
	char peer[64];
	struct child *next;
} child;

static struct {
	uv_loop_t *loop;
	char *const *argv; /* the session child's command line, fd 3 being the socket */
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
	else if (status)
		LOG_WARN(BE_LOG, "session process %d (%s) exited with %lld", p->pid, c->peer, (long long)status);
	else
		LOG_INFO(BE_LOG, "session process %d (%s) done", p->pid, c->peer);
	be_status_reap(p->pid); /* what a process that died could not remove */
	for (child **pp = &I.children; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	I.nchildren--;
	uv_close((uv_handle_t *)p, child_closed);
}

void be_isolate_init(uv_loop_t *loop, char *const *child_argv)
{
	I.loop = loop;
	I.argv = child_argv;
}

void be_isolate_accept_fd(void *ctx, int fd, const char *peer)
{
	child *c = calloc(1, sizeof(*c));
	if (!c) {
		LOG_ERROR(BE_LOG, "%s: out of memory: connection dropped", peer);
		close(fd);
		return;
	}
	snprintf(c->peer, sizeof(c->peer), "%s", peer);
	uv_stdio_container_t stdio[4] = {
		{.flags = UV_INHERIT_FD, .data.fd = 0},
		{.flags = UV_INHERIT_FD, .data.fd = 1},
		{.flags = UV_INHERIT_FD, .data.fd = 2},
		{.flags = UV_INHERIT_FD, .data.fd = fd},
	};
	uv_process_options_t o = {
		.exit_cb = child_exited,
		.file = "/proc/self/exe",
		.args = (char **)I.argv,
		.stdio_count = 4,
		.stdio = stdio,
	};
	c->proc.data = c;
	int r = uv_spawn(I.loop, &c->proc, &o);
	close(fd); /* the child has its own copy (or failed to start) */
	if (r < 0) {
		LOG_ERROR(BE_LOG, "%s: cannot start a session process: %s", peer, uv_strerror(r));
		uv_close((uv_handle_t *)&c->proc, child_closed);
		return;
	}
	c->next = I.children;
	I.children = c;
	I.nchildren++;
	be_status_count_session();
	LOG_INFO(BE_LOG, "%s: session process %d", peer, c->proc.pid);
}

void be_isolate_shutdown(int signum)
{
	I.shutdown_signal = signum;
	for (child *c = I.children; c; c = c->next)
		uv_process_kill(&c->proc, signum);
}

int be_isolate_live(void) { return I.nchildren; }
