/*
 * rdma+tls:// (ticket.c): an RDMA connection whose token and admitting cookie
 * were exchanged inside TLS.
 */
#ifndef FE_TICKET_H
#define FE_TICKET_H

#include "transport.h"

/* Asks tls://host:port of a (rdma+tls) for an rdma session with
 * REMOTE_GPU_TOKEN, then connects to it presenting the cookie it was given.
 * All of it within timeout_ms (0: none). 0 and *out, or a TRANSPORT_E* error
 * (a refused token: TRANSPORT_ECONNECT, after logging why). */
int fe_ticket_connect(const transport_addr *a, unsigned timeout_ms, transport_conn **out);

#endif
