/*
 * The peer listener: where another server (A) pushes the bytes of a server
 * to server copy into this process's sessions (peer_recv.c). A process that
 * serves sessions listens for peers only once a client asked for a ticket:
 * on the address its client reached it on, with the client's scheme (tcp, or
 * tls with the server's certificate), on a port the kernel picks, which the
 * ticket's reply names. The executor asks for the port; the loop thread opens
 * the listener (transport_listen belongs to it) and says so.
 */
#include "peer.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static struct {
	uv_loop_t *loop;
	uv_async_t open_async;
	int inited;
	char scheme[16], host[256];
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int state; /* 0 closed, 1 asked, 2 open, 3 failed */
	int port;
	transport_listener *l;
} P = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void on_open(uv_async_t *a)
{
	(void)a;
	transport_addr ad = {.port = 0};
	snprintf(ad.scheme, sizeof(ad.scheme), "%s", P.scheme);
	snprintf(ad.host, sizeof(ad.host), "%s", P.host);
	pthread_mutex_lock(&P.mu);
	if (P.state == 1) {
		int r = transport_listen(P.loop, &ad, be_peer_callbacks(), P.loop, &P.l);
		if (r == TRANSPORT_OK) {
			P.port = transport_listener_port(P.l);
			P.state = 2;
			LOG_INFO(BE_LOG, "peer copies: listening on %s://%s:%d", P.scheme, P.host, P.port);
		} else {
			P.state = 3;
			LOG_WARN(BE_LOG, "peer copies: cannot listen on %s://%s:0: %s (copies from other servers go "
					 "through their clients)", P.scheme, P.host, transport_strerror(r));
		}
		pthread_cond_broadcast(&P.cv);
	}
	pthread_mutex_unlock(&P.mu);
}

void be_peer_listen_init(uv_loop_t *loop, const char *scheme, const char *host)
{
	if (strcmp(scheme, "tcp") && strcmp(scheme, "tls"))
		return;
	P.loop = loop;
	snprintf(P.scheme, sizeof(P.scheme), "%s", scheme);
	snprintf(P.host, sizeof(P.host), "%s", host);
	if (uv_async_init(loop, &P.open_async, on_open) == 0) {
		uv_unref((uv_handle_t *)&P.open_async); /* the loop may end without it */
		P.inited = 1;
	}
}

int be_peer_listen_enabled(void) { return P.inited; }

int be_peer_listen_port(void)
{
	if (!P.inited)
		return 0;
	pthread_mutex_lock(&P.mu);
	if (P.state == 0) {
		P.state = 1;
		uv_async_send(&P.open_async);
	}
	while (P.state == 1)
		pthread_cond_wait(&P.cv, &P.mu);
	int port = P.state == 2 ? P.port : 0;
	pthread_mutex_unlock(&P.mu);
	return port;
}

/* Loop thread, at shutdown: no more peers; the connections end with it. */
void be_peer_listen_close(void)
{
	if (!P.inited)
		return;
	pthread_mutex_lock(&P.mu);
	if (P.state == 2)
		transport_listener_close(P.l);
	P.state = 3;
	pthread_cond_broadcast(&P.cv);
	pthread_mutex_unlock(&P.mu);
	uv_close((uv_handle_t *)&P.open_async, NULL);
	P.inited = 0;
}
