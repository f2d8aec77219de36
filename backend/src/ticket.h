/*
 * rdma+tls (ticket.c): the supervisor's TLS listener that checks a client's
 * token and hands it, inside TLS, the port and one-time cookie of an RDMA
 * session process.
 */
#ifndef BE_TICKET_H
#define BE_TICKET_H

#include "transport_server.h"

/* The callbacks of the tls listener of `--listen rdma+tls://...` (its ctx:
 * the uv_loop_t the listener runs on). */
const transport_server_cb *be_ticket_callbacks(void);

#endif
