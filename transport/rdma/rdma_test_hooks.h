/*
 * Test hooks of the rdma provider: reach into a connection to break it the way
 * a network or a host does. Defined in rdma_test_hooks.c, which is built into
 * rg_transport_test only (transport/rdma.cmake): test programs link it,
 * libremote.so and remote-gpud never contain these functions.
 */
#ifndef RDMA_TEST_HOOKS_H
#define RDMA_TEST_HOOKS_H

#include "rdma_int.h"

/* The rdma connection behind a transport_conn, or NULL when it is not rdma. */
rdma_ep *tp_rdma_conn_ep(transport_conn *c);
/* The QP in the error state as a broken link leaves it (this side notices, and
 * tells the peer). */
void tp_rdma_test_break_qp(transport_conn *c);
/* A peer that vanishes without a word (it is the peer's keepalive that must
 * find out). */
void tp_rdma_test_vanish(transport_conn *c);

#endif
