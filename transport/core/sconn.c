/*
 * The server connection base (transport_int.h: tp_sconn): the two owners of
 * every provider's server connection, the loop and the upper layer, and the
 * free by whichever lets go last.
 */
#include "transport_int.h"

void tp_sconn_init(tp_sconn *o, void (*free_fn)(tp_sconn *o))
{
	pthread_mutex_init(&o->lock, NULL);
	o->free = free_fn;
}

void tp_sconn_fini(tp_sconn *o) { pthread_mutex_destroy(&o->lock); }

/* One owner lets go (mine); the connection is freed if the other had. */
static void let_go(tp_sconn *o, int *mine, const int *other)
{
	pthread_mutex_lock(&o->lock);
	*mine = 1;
	int free_now = *other;
	pthread_mutex_unlock(&o->lock);
	if (free_now) {
		pthread_mutex_destroy(&o->lock);
		o->free(o);
	}
}

void tp_sconn_release(tp_sconn *o) { let_go(o, &o->released, &o->handle_closed); }

void tp_sconn_closed(tp_sconn *o, transport_listener *l)
{
	let_go(o, &o->handle_closed, &o->released);
	tp_listener_handle_closed(l);
}
