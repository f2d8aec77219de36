/*
 * Whether and how remote-gpud may listen: TLS on TCP (issue 24).
 *
 * The token and every byte of a session cross the network, so off loopback the
 * server listens only inside TLS: with --tls-cert and --tls-key (and
 * --tls-client-ca: clients must present a certificate that CA signed) a tcp
 * listener becomes a tls one; without certificates it refuses to start unless
 * --insecure says that clear text is wanted (a trusted private network, or a
 * TLS-terminating proxy in front). Loopback stays plain TCP by default:
 * nothing crosses a wire there, and the local tests and benchmarks keep their
 * numbers.
 *
 * rdma is not encrypted (the RDMA verbs move memory directly; TLS cannot wrap
 * them): off loopback rdma:// needs --insecure as well, and says so.
 * rdma+tls:// sets RDMA sessions up inside TLS (ticket.c): the listener is a
 * tls one, so it takes the certificates, and the token and the cookie that
 * admits the RDMA connection never cross in clear; the session's data on
 * RDMA still does, which the docs say.
 *
 * Session processes: with process isolation the supervisor hands the raw
 * socket over, and the session process shakes hands itself (TLS state cannot
 * move between processes), so it gets the same certificate options.
 */
#include "listen_tls.h"

#include <stdio.h>
#include <string.h>

static struct {
	const char *cert, *key, *client_ca;
	int insecure;
	int on;
} T;

int be_tls_option(const char *opt, const char *val)
{
	if (!strcmp(opt, "--tls-cert"))
		T.cert = val;
	else if (!strcmp(opt, "--tls-key"))
		T.key = val;
	else if (!strcmp(opt, "--tls-client-ca"))
		T.client_ca = val;
	else
		return -1;
	return 0;
}

int be_tls_flag(const char *opt)
{
	if (strcmp(opt, "--insecure") != 0)
		return -1;
	T.insecure = 1;
	return 0;
}

int be_tls_setup(transport_addr *addr, int session)
{
	int tcp = !strcmp(addr->scheme, "tcp"), tls = !strcmp(addr->scheme, "tls");
	int rdma_tls = !strcmp(addr->scheme, "rdma+tls");

	if (T.cert || T.key || T.client_ca) {
		if (!T.cert || !T.key) {
			fprintf(stderr, "remote-gpud: TLS needs both --tls-cert FILE and --tls-key FILE\n");
			return 2;
		}
		if (!tcp && !tls && !rdma_tls) {
			fprintf(stderr, "remote-gpud: --tls-cert: TLS is for tcp listeners; %s:// is not encrypted\n",
				addr->scheme);
			return 2;
		}
		if (transport_tls_server_setup(T.cert, T.key, T.client_ca) != TRANSPORT_OK) {
			fprintf(stderr, "remote-gpud: cannot use the TLS certificate or key (see the log above)\n");
			return 2;
		}
		strcpy(addr->scheme, "tls");
		T.on = 1;
		return 0;
	}
	if (tls || rdma_tls) {
		fprintf(stderr, "remote-gpud: %s:// needs --tls-cert FILE and --tls-key FILE\n", addr->scheme);
		return 2;
	}
	/* shm:// never leaves the host (a unix socket and shared pages). */
	if (session || T.insecure || !strcmp(addr->scheme, "shm") || transport_addr_is_loopback(addr))
		return 0;
	if (tcp)
		fprintf(stderr,
			"remote-gpud: refusing to listen on %s:%d without TLS: the token and all data would cross\n"
			"the network in clear. Give --tls-cert FILE --tls-key FILE (clients use tls://host:port),\n"
			"or --insecure to listen in clear anyway.\n",
			addr->host, addr->port);
	else
		fprintf(stderr,
			"remote-gpud: refusing to listen on %s://%s:%d: %s sessions are not encrypted (the token\n"
			"and all data cross the network in clear). Give --insecure to listen anyway, on a\n"
			"network you trust, or listen on rdma+tls:// with --tls-cert and --tls-key (the token\n"
			"then crosses inside TLS, the data on rdma still in clear).\n",
			addr->scheme, addr->host, addr->port, addr->scheme);
	return 2;
}

int be_tls_child_args(char **argv, int n)
{
	if (!T.on)
		return n;
	argv[n++] = "--tls-cert";
	argv[n++] = (char *)T.cert;
	argv[n++] = "--tls-key";
	argv[n++] = (char *)T.key;
	if (T.client_ca) {
		argv[n++] = "--tls-client-ca";
		argv[n++] = (char *)T.client_ca;
	}
	return n;
}

const char *be_tls_adopt_scheme(void) { return T.on ? "tls" : "tcp"; }
