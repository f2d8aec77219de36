/*
 * The server's transport security options (listen_tls.c): --tls-cert,
 * --tls-key, --tls-client-ca and --insecure, and the rule that decides whether
 * remote-gpud may listen at all: off loopback, TCP only inside TLS unless the
 * operator says --insecure.
 */
#ifndef BE_LISTEN_TLS_H
#define BE_LISTEN_TLS_H

#include "transport.h"

/* Takes an option with a value: 0 when it was one of ours (stored), -1 if not. */
int be_tls_option(const char *opt, const char *val);
/* --insecure (no value): 0 when opt is it. */
int be_tls_flag(const char *opt);
/* Sets TLS up for addr (its scheme becomes "tls" when certificates are given,
 * rdma+tls's too: its listener is the tls one of ticket.c)
 * or refuses: returns 0, or 2 after printing why to stderr. A session process
 * (session != 0) only loads the certificates its supervisor passed. */
int be_tls_setup(transport_addr *addr, int session);
/* Appends the options a session process needs to argv[n..]; returns the new n. */
int be_tls_child_args(char **argv, int n);
/* The scheme connections handed to session processes are served with. */
const char *be_tls_adopt_scheme(void);

#endif
