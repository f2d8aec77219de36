/* Requests from any thread to a listener's loop thread (loopq.h). */
#include "loopq.h"

int tp_loopq_init(transport_loopq *q, uv_loop_t *loop, uv_async_cb cb, void *data)
{
	int r = uv_async_init(loop, &q->async, cb);
	if (r < 0)
		return r;
	q->async.data = data;
	pthread_mutex_init(&q->lock, NULL);
	rg_list_init(&q->reqs);
	q->closing = 0;
	return 0;
}

void tp_loopq_destroy(transport_loopq *q) { pthread_mutex_destroy(&q->lock); }

/* uv_async_send stays under the lock: the owner closes the handle only after
 * taking the lock once no thread may post, so no thread is still inside it. */
void tp_loopq_post(transport_loopq *q, rg_list *node)
{
	pthread_mutex_lock(&q->lock);
	if (!rg_list_linked(node))
		rg_list_add_tail(&q->reqs, node);
	uv_async_send(&q->async);
	pthread_mutex_unlock(&q->lock);
}

void tp_loopq_close(transport_loopq *q)
{
	pthread_mutex_lock(&q->lock);
	q->closing = 1;
	uv_async_send(&q->async);
	pthread_mutex_unlock(&q->lock);
}

rg_list *tp_loopq_pop(transport_loopq *q)
{
	rg_list *n = NULL;
	pthread_mutex_lock(&q->lock);
	if (!rg_list_empty(&q->reqs)) {
		n = q->reqs.next;
		rg_list_del(n);
	}
	pthread_mutex_unlock(&q->lock);
	return n;
}

void tp_loopq_cancel(transport_loopq *q, rg_list *node)
{
	pthread_mutex_lock(&q->lock);
	rg_list_del(node);
	pthread_mutex_unlock(&q->lock);
}

int tp_loopq_closing(transport_loopq *q)
{
	pthread_mutex_lock(&q->lock);
	int c = q->closing;
	pthread_mutex_unlock(&q->lock);
	return c;
}
