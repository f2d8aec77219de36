/*
 * GET /metrics over HTTP/1.0 on 127.0.0.1 (remote-gpud --metrics-port N; another
 * address with --metrics-listen HOST:PORT, for a Prometheus elsewhere), on the
 * supervisor's libuv loop: the Prometheus text of the server's run directory
 * (status.h, rendered by metrics_text.c), read at each request, so the numbers
 * of session processes are as live as remote-smi's.
 *
 * A deliberately small HTTP server: one request per connection. It reads until
 * the end of the request head (8 KiB at most), answers, half-closes, and drains
 * what the client still sends until it closes too (closing with unread input
 * would make the kernel send a reset that can destroy the answer in flight).
 * Answers: 200 for GET or HEAD of /metrics (a query string is ignored), 404 for
 * other paths, 405 for other methods, 400 for what is not an HTTP/1.x request
 * line, 431 for a head that does not fit, 503 when there is no run directory.
 * Every connection has 10 s in all; at most 16 are open at once (more are
 * closed at once). Bound to the loopback address unless the operator names
 * another: nothing here authenticates (the numbers are counts, no secrets).
 */
#include "backend.h"
#include "status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQ_MAX 8192
#define CONN_MAX 16
#define CONN_MS 10000

typedef struct mconn {
	uv_tcp_t tcp;
	uv_timer_t timer;
	uv_write_t wr;
	uv_shutdown_t sd;
	char req[REQ_MAX];
	size_t len;
	int answered, closing, open_handles;
	char *resp;
	struct mconn *prev, *next;
} mconn;

static struct {
	uv_loop_t *loop;
	uv_tcp_t srv;
	int listening;
	mconn *conns;
	int nconns;
} H;

static void on_conn(uv_stream_t *srv, int status);
static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b);
static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b);
static void on_written(uv_write_t *w, int status);
static void on_shutdown(uv_shutdown_t *r, int status);
static void on_timeout(uv_timer_t *t);
static void conn_close(mconn *c);
static void on_closed(uv_handle_t *h);
static void answer(mconn *c);
static void plain(mconn *c, const char *status, const char *extra, const char *msg);

int be_metrics_start(uv_loop_t *loop, const char *host, int port)
{
	struct sockaddr_storage a, got;
	int len = sizeof(got), r;

	H.loop = loop;
	uv_tcp_init(loop, &H.srv);
	r = strchr(host, ':') ? uv_ip6_addr(host, port, (struct sockaddr_in6 *)&a)
			      : uv_ip4_addr(host, port, (struct sockaddr_in *)&a);
	if (r != 0 || (r = uv_tcp_bind(&H.srv, (struct sockaddr *)&a, 0)) != 0 ||
	    (r = uv_listen((uv_stream_t *)&H.srv, 16, on_conn)) != 0 ||
	    (r = uv_tcp_getsockname(&H.srv, (struct sockaddr *)&got, &len)) != 0) {
		LOG_ERROR(BE_LOG, "metrics on %s port %d: %s", host, port, uv_strerror(r));
		uv_close((uv_handle_t *)&H.srv, NULL);
		return r;
	}
	H.listening = 1;
	return ntohs(got.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&got)->sin6_port
					       : ((struct sockaddr_in *)&got)->sin_port);
}

void be_metrics_stop(void)
{
	if (H.listening) {
		H.listening = 0;
		uv_close((uv_handle_t *)&H.srv, NULL);
	}
	for (mconn *c = H.conns; c; c = c->next)
		conn_close(c);
}

static void on_conn(uv_stream_t *srv, int status)
{
	mconn *c;
	if (status < 0)
		return;
	if (!(c = calloc(1, sizeof(*c)))) {
		uv_tcp_t *t = malloc(sizeof(*t)); /* accept and drop, or libuv keeps calling */
		if (t && uv_tcp_init(H.loop, t) == 0) {
			uv_accept(srv, (uv_stream_t *)t);
			uv_close((uv_handle_t *)t, (uv_close_cb)free);
		} else {
			free(t);
		}
		return;
	}
	uv_tcp_init(H.loop, &c->tcp);
	uv_timer_init(H.loop, &c->timer);
	c->tcp.data = c->timer.data = c;
	c->open_handles = 2;
	c->next = H.conns;
	if (H.conns)
		H.conns->prev = c;
	H.conns = c;
	H.nconns++;
	if (uv_accept(srv, (uv_stream_t *)&c->tcp) != 0 || H.nconns > CONN_MAX) {
		conn_close(c);
		return;
	}
	uv_timer_start(&c->timer, on_timeout, CONN_MS, 0);
	uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
	mconn *c = h->data;
	static char sink[4096]; /* after the answer: input is only drained */
	if (c->answered || c->len >= sizeof(c->req) - 1)
		*b = uv_buf_init(sink, sizeof(sink));
	else
		*b = uv_buf_init(c->req + c->len, (unsigned)(sizeof(c->req) - 1 - c->len));
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
	mconn *c = s->data;
	if (n < 0) {
		conn_close(c);
		return;
	}
	if (c->answered || n == 0)
		return;
	c->len += (size_t)n;
	c->req[c->len] = 0;
	if (strstr(c->req, "\r\n\r\n") || strstr(c->req, "\n\n"))
		answer(c);
	else if (c->len >= sizeof(c->req) - 1)
		plain(c, "431 Request Header Fields Too Large", "", "request head too large\n");
}

static void respond(mconn *c, const char *status, const char *extra, const char *type, const char *body,
		    size_t blen, int head_only)
{
	char hdr[512];
	int n = snprintf(hdr, sizeof(hdr),
			 "HTTP/1.0 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%sConnection: close\r\n\r\n",
			 status, type, blen, extra);
	size_t total = (size_t)n + (head_only ? 0 : blen);
	c->answered = 1;
	uv_read_stop((uv_stream_t *)&c->tcp);
	if (!(c->resp = malloc(total))) {
		conn_close(c);
		return;
	}
	memcpy(c->resp, hdr, (size_t)n);
	if (!head_only)
		memcpy(c->resp + n, body, blen);
	uv_buf_t buf = uv_buf_init(c->resp, (unsigned)total);
	c->wr.data = c;
	if (uv_write(&c->wr, (uv_stream_t *)&c->tcp, &buf, 1, on_written) != 0)
		conn_close(c);
}

static void plain(mconn *c, const char *status, const char *extra, const char *msg)
{
	respond(c, status, extra, "text/plain; charset=utf-8", msg, strlen(msg), 0);
}

/* The request line, strictly: METHOD SP target SP HTTP/1.x, then CR LF or LF. */
static int parse_line(const char *p, char *method, size_t mcap, char *target, size_t tcap)
{
	size_t n = 0;
	while (p[n] >= 'A' && p[n] <= 'Z')
		n++;
	if (n == 0 || n >= mcap || p[n] != ' ')
		return -1;
	memcpy(method, p, n);
	method[n] = 0;
	p += n + 1;
	for (n = 0; (unsigned char)p[n] > ' ' && p[n] != 0x7f; n++)
		;
	if (n == 0 || n >= tcap || p[n] != ' ')
		return -1;
	memcpy(target, p, n);
	target[n] = 0;
	p += n + 1;
	if (strncmp(p, "HTTP/1.", 7) != 0 || p[7] < '0' || p[7] > '9')
		return -1;
	p += 8;
	return (p[0] == '\r' && p[1] == '\n') || p[0] == '\n' ? 0 : -1;
}

static void answer(mconn *c)
{
	char method[16], target[2048];

	if (parse_line(c->req, method, sizeof(method), target, sizeof(target)) != 0) {
		plain(c, "400 Bad Request", "", "not an HTTP/1.x request\n");
		return;
	}
	int head = !strcmp(method, "HEAD");
	if (!head && strcmp(method, "GET") != 0) {
		plain(c, "405 Method Not Allowed", "Allow: GET, HEAD\r\n", "only GET /metrics\n");
		return;
	}
	size_t plen = strcspn(target, "?");
	if (plen != 8 || strncmp(target, "/metrics", 8) != 0) {
		plain(c, "404 Not Found", "", "see /metrics\n");
		return;
	}
	const char *dir = be_status_dir();
	if (!dir[0]) {
		plain(c, "503 Service Unavailable", "", "no run directory: see the server's log\n");
		return;
	}
	be_snap snap;
	size_t len = 0;
	be_snap_read(dir, &snap);
	char *body = be_metrics_render(&snap, 1, &len);
	be_snap_free(&snap);
	if (!body) {
		plain(c, "500 Internal Server Error", "", "out of memory\n");
		return;
	}
	respond(c, "200 OK", "", "text/plain; version=0.0.4; charset=utf-8", body, len, head);
	free(body);
}

static void on_written(uv_write_t *w, int status)
{
	mconn *c = w->data;
	free(c->resp);
	c->resp = NULL;
	c->sd.data = c;
	if (status < 0 || c->closing || uv_shutdown(&c->sd, (uv_stream_t *)&c->tcp, on_shutdown) != 0)
		conn_close(c);
}

/* Half-closed: read (and drop) until the client closes, or the timer ends it. */
static void on_shutdown(uv_shutdown_t *r, int status)
{
	mconn *c = r->data;
	if (status < 0 || c->closing || uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0)
		conn_close(c);
}

static void on_timeout(uv_timer_t *t) { conn_close(t->data); }

static void conn_close(mconn *c)
{
	if (c->closing)
		return;
	c->closing = 1;
	uv_close((uv_handle_t *)&c->tcp, on_closed);
	uv_close((uv_handle_t *)&c->timer, on_closed);
}

static void on_closed(uv_handle_t *h)
{
	mconn *c = h->data;
	if (--c->open_handles)
		return;
	if (c->prev)
		c->prev->next = c->next;
	else
		H.conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	H.nconns--;
	free(c->resp);
	free(c);
}
