/*
 * rdma_ticket_probe: plays an rdma+tls client against remote-gpud to check
 * that a session process admits only the cookie it was given inside TLS, once,
 * and within its deadline (run_rdma_tls.sh, in the Soft-RoCE guest).
 *
 *   rdma_ticket_probe HOST PORT cookie      (REMOTE_GPU_TOKEN, REMOTE_GPU_TLS_CA)
 *   rdma_ticket_probe HOST PORT late SECONDS
 *
 * cookie: asks tls://HOST:PORT for an rdma session (the hello of
 * frontend/src/ticket.c), then at the session port: no cookie (refused), the
 * cookie with one bit flipped (refused), the right one (admitted, and held),
 * the right one again (refused: used once). late: asks, waits SECONDS, then
 * presents the right cookie (refused when past the deadline).
 * Prints one line per step; exit status 0 when every step went as it should.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto.h"
#include "proto_ops.h"
#include "transport.h"

static int ticket(const char *host, int port, int *sport, transport_cookie *cookie);
static int try_cookie(const char *host, int sport, const transport_cookie *cookie, const char *what, int want,
		      transport_conn **keep);
static int served(transport_conn *c);
static int send_hello(transport_conn *c, const char *token, const char *want);

/* A hello as libremote.so sends it; want "rdma" asks the tls listener for an
 * rdma session (NULL: the hello of a session itself). */
static int send_hello(transport_conn *c, const char *token, const char *want)
{
	proto_msg m;
	proto_msg_begin(&m, PROTO_OP_HELLO, 1, want ? 6 : 5);
	proto_msg_u64(&m, PROTO_VERSION);
	proto_msg_str(&m, token ? token : "");
	proto_msg_u64(&m, (uint64_t)getpid());
	proto_msg_str(&m, "probe-host");
	proto_msg_str(&m, "rdma_ticket_probe");
	if (want)
		proto_msg_str(&m, want);
	int r = proto_msg_finish(&m, 0, 0);
	struct iovec iov = {.iov_base = m.data, .iov_len = m.len};
	if (r == 0)
		r = transport_sendv(c, &iov, 1);
	proto_msg_free(&m);
	return r;
}

/* The hello asking for "rdma"; 0 with the session's port and cookie. */
static int ticket(const char *host, int port, int *sport, transport_cookie *cookie)
{
	char spec[300];
	transport_addr a;
	transport_conn *c;
	const char *token = getenv("REMOTE_GPU_TOKEN");
	snprintf(spec, sizeof(spec), "tls://%s:%d", host, port);
	if (transport_parse_addr(spec, &a) || transport_connect_within(&a, 10000, &c)) {
		printf("FAIL cannot connect to %s\n", spec);
		return -1;
	}
	int r = send_hello(c, token, "rdma");
	transport_frame f = {0};
	if (r == 0)
		r = transport_recv_frame(c, &f, NULL, NULL);
	proto_view v;
	uint64_t p = 0;
	const void *b = NULL;
	size_t bn = 0;
	if (r == 0 && (r = proto_view_init(&v, &f.hdr, f.msg)) == 0) {
		if (f.hdr.status != 0 || proto_arg_u64(&v, PROTO_REPLY_FIRST, &p) ||
		    proto_arg_bin(&v, PROTO_REPLY_FIRST + 1, &b, &bn) || bn != sizeof(cookie->b))
			r = -1;
		else
			memcpy(cookie->b, b, bn);
		proto_view_free(&v);
	}
	printf("%s ticket: status %d, port %d\n", r ? "FAIL" : "ok", (int)f.hdr.status, (int)p);
	transport_frame_free(&f);
	transport_close(c);
	*sport = (int)p;
	return r ? -1 : 0;
}

/* Whether the session answers a hello (with no token: the cookie stands for
 * it). The rdma listener accepts a connection before the upper layer looks
 * at its cookie, and a refused one is then closed: recv sees the close. */
static int served(transport_conn *c)
{
	int r = send_hello(c, NULL, NULL);
	transport_frame f = {0};
	if (r == 0)
		r = transport_recv_frame(c, &f, NULL, NULL);
	int ok = r == 0 && (f.hdr.flags & PROTO_F_REPLY) && f.hdr.status == 0;
	transport_frame_free(&f);
	return ok;
}

/* Connects to rdma://host:sport presenting cookie: 0 when the outcome was
 * want (1: admitted, 0: refused). An admitted connection goes to *keep, or is
 * closed when keep is NULL. */
static int try_cookie(const char *host, int sport, const transport_cookie *cookie, const char *what, int want,
		      transport_conn **keep)
{
	char spec[300];
	transport_addr a;
	transport_conn *c = NULL;
	snprintf(spec, sizeof(spec), "rdma://%s:%d", host, sport);
	int r = transport_parse_addr(spec, &a) ? -1 : transport_connect_cookie(&a, 5000, cookie, &c);
	int admitted = r == 0 && served(c);
	int ok = admitted == want;
	printf("%s %s: %s\n", ok ? "ok" : "FAIL", what, admitted ? "admitted" : "refused");
	if (c && keep)
		*keep = c;
	else if (c)
		transport_close(c);
	return ok ? 0 : -1;
}

int main(int argc, char **argv)
{
	if (argc < 4 || (!strcmp(argv[3], "late") && argc < 5)) {
		fprintf(stderr, "usage: rdma_ticket_probe HOST PORT cookie | late SECONDS\n");
		return 2;
	}
	const char *host = argv[1];
	int port = atoi(argv[2]), sport = 0, bad = 0;
	transport_cookie cookie, none = {{0}};
	if (ticket(host, port, &sport, &cookie) != 0)
		return 1;
	if (!strcmp(argv[3], "late")) {
		sleep((unsigned)atoi(argv[4]));
		return try_cookie(host, sport, &cookie, "the right cookie, late", 0, NULL) ? 1 : 0;
	}
	transport_cookie flipped = cookie;
	flipped.b[TRANSPORT_COOKIE_LEN - 1] ^= 1;
	transport_conn *held = NULL;
	bad |= try_cookie(host, sport, &none, "no cookie", 0, NULL);
	bad |= try_cookie(host, sport, &flipped, "a cookie one bit off", 0, NULL);
	bad |= try_cookie(host, sport, &cookie, "the right cookie", 1, &held);
	bad |= try_cookie(host, sport, &cookie, "the right cookie again", 0, NULL);
	if (held)
		transport_close(held);
	return bad ? 1 : 0;
}
