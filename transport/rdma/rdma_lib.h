/*
 * rdma-core, loaded at run time (dlopen), not linked.
 *
 * libremote.so is preloaded into programs on hosts that mostly have no RDMA
 * stack at all; a DT_NEEDED on libibverbs.so.1 would stop such a program from
 * starting even when it only ever talks tcp. So the rdma provider reaches
 * libibverbs and librdmacm through this table, filled on the first rdma://
 * connect or listen; without rdma-core that call fails with a clear message and
 * tcp is unaffected.
 *
 * Only the exported functions are here: the data-path verbs (ibv_post_send,
 * ibv_post_recv, ibv_poll_cq, ibv_req_notify_cq) are inline functions of
 * verbs.h that call through the provider's ops table, so they need no symbol.
 * Fields have their own names (tp_rdma_v.reg_mr, not tp_rdma_v.ibv_reg_mr): verbs.h defines
 * ibv_reg_mr and ibv_query_port as function-like macros, which would expand
 * inside "tp_rdma_v.ibv_reg_mr(...)".
 */
#ifndef RDMA_LIB_H
#define RDMA_LIB_H

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

/* X(library, field, symbol) */
#define RDMA_LIB_SYMBOLS(X)                                        \
	X(verbs, alloc_pd, ibv_alloc_pd)                           \
	X(verbs, dealloc_pd, ibv_dealloc_pd)                       \
	X(verbs, reg_mr, ibv_reg_mr)                               \
	X(verbs, dereg_mr, ibv_dereg_mr)                           \
	X(verbs, create_comp_channel, ibv_create_comp_channel)     \
	X(verbs, destroy_comp_channel, ibv_destroy_comp_channel)   \
	X(verbs, create_cq, ibv_create_cq)                         \
	X(verbs, destroy_cq, ibv_destroy_cq)                       \
	X(verbs, get_cq_event, ibv_get_cq_event)                   \
	X(verbs, ack_cq_events, ibv_ack_cq_events)                 \
	X(verbs, modify_qp, ibv_modify_qp)                         \
	X(verbs, query_device, ibv_query_device)                   \
	X(verbs, wc_status_str, ibv_wc_status_str)                 \
	X(cm, create_event_channel, rdma_create_event_channel)     \
	X(cm, destroy_event_channel, rdma_destroy_event_channel)   \
	X(cm, create_id, rdma_create_id)                           \
	X(cm, destroy_id, rdma_destroy_id)                         \
	X(cm, resolve_addr, rdma_resolve_addr)                     \
	X(cm, resolve_route, rdma_resolve_route)                   \
	X(cm, create_qp, rdma_create_qp)                           \
	X(cm, destroy_qp, rdma_destroy_qp)                         \
	X(cm, connect, rdma_connect)                               \
	X(cm, accept, rdma_accept)                                 \
	X(cm, reject, rdma_reject)                                 \
	X(cm, disconnect, rdma_disconnect)                         \
	X(cm, get_cm_event, rdma_get_cm_event)                     \
	X(cm, ack_cm_event, rdma_ack_cm_event)                     \
	X(cm, bind_addr, rdma_bind_addr)                           \
	X(cm, listen, rdma_listen)                                 \
	X(cm, event_str, rdma_event_str)                           \
	X(cm, set_option, rdma_set_option)                         \
	X(cm, get_src_port, rdma_get_src_port)

typedef struct rdma_lib {
#define RDMA_LIB_FIELD(lib, field, sym) __typeof__(&sym) field;
	RDMA_LIB_SYMBOLS(RDMA_LIB_FIELD)
#undef RDMA_LIB_FIELD
} rdma_lib;

/* The table; valid once tp_rdma_lib_load() returned 0. */
extern rdma_lib tp_rdma_v;

/* Loads both libraries once (thread-safe). Returns 0, or TRANSPORT_ENOTSUP
 * after logging what is missing. */
int tp_rdma_lib_load(void);

#endif
