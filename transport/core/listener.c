/*
 * The listener base shared by every provider's server half (transport_int.h:
 * struct transport_listener): setup, admission, the close and the count of
 * open handles that frees the listener when it reaches zero.
 */
#include <stdlib.h>
#include <string.h>

#include "transport_int.h"

void tp_listener_init(transport_listener *l, const transport_provider *p, uv_loop_t *loop,
		      const transport_server_cb *cb, void *ctx)
{
	l->prov = p;
	l->loop = loop;
	l->cb = *cb;
	l->ctx = ctx;
	rg_list_init(&l->conns);
}

void tp_listener_close(transport_listener *l) { tp_loopq_close(&l->q); }

void tp_listener_handle_closed(transport_listener *l)
{
	l->nhandles--;
	if (l->close_started && l->nhandles == 0) {
		if (l->release)
			l->release(l);
		tp_loopq_destroy(&l->q);
		free(l);
	}
}

void tp_listener_close_cb(uv_handle_t *h) { tp_listener_handle_closed(h->data); }

int tp_listener_close_start(transport_listener *l, void (*end)(rg_list *node))
{
	if (!tp_loopq_closing(&l->q) || l->close_started)
		return 0;
	l->close_started = 1;
	for (rg_list *n = l->conns.next; n != &l->conns; n = n->next)
		end(n);
	return 1;
}

void *tp_listener_admit(transport_listener *l, transport_conn *c)
{
	int closing = tp_loopq_closing(&l->q);
	return !closing && l->cb.on_accept ? l->cb.on_accept(l->ctx, c) : NULL;
}

int tp_server_recv_frame(transport_conn *c, transport_frame *f, transport_payload_dest_fn dest, void *ctx)
{
	(void)c, (void)dest, (void)ctx;
	memset(f, 0, sizeof(*f));
	return TRANSPORT_ENOTSUP;
}
