/*
 * The stripe listener (stripe.h has the whole path; the secrets are
 * stripe_secret.c's). A
 * process that serves sessions listens for stripe connections only once an
 * authenticated client asked (stripe_open): on the address its client reached
 * it on, plain tcp, on a port the kernel picks. The executor asks for the
 * port; the loop thread opens the listener (transport_listen belongs to it).
 * Accepted sockets come as descriptors (on_accept_fd) and are refused at once
 * unless an unspent secret is out and fewer than BE_STRIPE_MAX_PENDING wait
 * for theirs, so a stranger costs a socket for BE_STRIPE_OPEN_MS at most.
 */
#include "stripe.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct {
	uv_loop_t *loop;
	uv_async_t open_async;
	int inited;
	char host[256];
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int state; /* 0 closed, 1 asked, 2 open, 3 failed */
	int port;
	transport_listener *l;
} L = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

unsigned be_stripe_max(void)
{
	static int max = -1;
	if (max < 0) {
		const char *e = getenv("REMOTE_GPUD_STRIPES");
		long v = e && *e ? strtol(e, NULL, 10) : BE_STRIPE_DEFAULT;
		max = v < 0 ? 0 : v > BE_STRIPE_MAX ? BE_STRIPE_MAX : (int)v;
	}
	return (unsigned)max;
}

static void *no_accept(void *ctx, transport_conn *c) { return NULL; }

static void on_accept_fd(void *ctx, int fd, const char *peer)
{
	if (!be_stripe_secret_out()) {
		LOG_WARN(BE_LOG, "stripe connection from %s: no secret is out: refused", peer);
		close(fd);
		return;
	}
	be_stripe_conn_start(fd, peer);
}

static void on_open(uv_async_t *a)
{
	static const transport_server_cb cb = {.on_accept = no_accept, .on_accept_fd = on_accept_fd};
	transport_addr ad = {.scheme = "tcp", .port = 0};
	snprintf(ad.host, sizeof(ad.host), "%s", L.host);
	pthread_mutex_lock(&L.mu);
	if (L.state == 1) {
		int r = transport_listen(L.loop, &ad, &cb, NULL, &L.l);
		if (r == TRANSPORT_OK) {
			L.port = transport_listener_port(L.l);
			L.state = 2;
			LOG_INFO(BE_LOG, "stripes: listening on tcp://%s:%d", L.host, L.port);
		} else {
			L.state = 3;
			LOG_WARN(BE_LOG, "stripes: cannot listen on tcp://%s:0: %s (copies take the session's one "
					 "connection)", L.host, transport_strerror(r));
		}
		pthread_cond_broadcast(&L.cv);
	}
	pthread_mutex_unlock(&L.mu);
}

void be_stripe_listen_init(uv_loop_t *loop, const char *scheme, const char *host)
{
	if (strcmp(scheme, "tcp") || !be_stripe_max())
		return; /* tls: stripes would cross in clear (transport/README.md) */
	L.loop = loop;
	snprintf(L.host, sizeof(L.host), "%s", host);
	if (uv_async_init(loop, &L.open_async, on_open) == 0) {
		uv_unref((uv_handle_t *)&L.open_async);
		L.inited = 1;
	}
}

int be_stripe_listen_port(void)
{
	if (!L.inited)
		return 0;
	pthread_mutex_lock(&L.mu);
	if (L.state == 0) {
		L.state = 1;
		uv_async_send(&L.open_async);
	}
	while (L.state == 1)
		pthread_cond_wait(&L.cv, &L.mu);
	int port = L.state == 2 ? L.port : 0;
	pthread_mutex_unlock(&L.mu);
	return port;
}

void be_stripe_listen_close(void)
{
	if (!L.inited)
		return;
	pthread_mutex_lock(&L.mu);
	if (L.state == 2)
		transport_listener_close(L.l);
	L.state = 3;
	pthread_cond_broadcast(&L.cv);
	pthread_mutex_unlock(&L.mu);
	uv_close((uv_handle_t *)&L.open_async, NULL);
	L.inited = 0;
}
