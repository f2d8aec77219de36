/*
 * Test hooks of the rdma provider (rdma_test_hooks.h). Only test programs link
 * this file (rg_transport_test): a release libremote.so or remote-gpud has no
 * way to break its own connections.
 */
#include <string.h>

#include "rdma_test_hooks.h"

rdma_ep *tp_rdma_conn_ep(transport_conn *c)
{
	if (!c || strcmp(c->ops->scheme, "rdma") != 0)
		return NULL;
	return &((rdma_conn_head *)c)->ep;
}

void tp_rdma_test_vanish(transport_conn *c)
{
	rdma_ep *ep = tp_rdma_conn_ep(c);
	if (!ep)
		return;
	pthread_mutex_lock(&ep->mu);
	if (ep->qp && !ep->qp_dead) {
		/* As a host that lost power: the QP stops answering and this side
		 * neither notices nor tells the peer (flushes are ignored once
		 * qp_dead is set). Only the peer's keepalive can find out. */
		ep->qp_dead = 1;
		struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
		tp_rdma_v.modify_qp(ep->qp, &a, IBV_QP_STATE);
	}
	pthread_mutex_unlock(&ep->mu);
}

void tp_rdma_test_break_qp(transport_conn *c)
{
	rdma_ep *ep = tp_rdma_conn_ep(c);
	if (!ep)
		return;
	pthread_mutex_lock(&ep->mu);
	if (ep->qp) {
		/* As a broken link does: the QP errs, the peer hears nothing. */
		struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
		tp_rdma_v.modify_qp(ep->qp, &a, IBV_QP_STATE);
	}
	pthread_mutex_unlock(&ep->mu);
}
