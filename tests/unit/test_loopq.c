/* transport_loopq (transport/core/loopq.c): requests posted from another thread
 * reach the loop thread in order, a node asked for twice is linked once, a
 * cancelled request is not delivered, and the close is seen. */
#include <pthread.h>
#include <uv.h>

#include "check.h"
#include "loopq.h"

typedef struct item {
	rg_list node;
	int id;
} item;

static transport_loopq q;
static item items[3];
static int got[8], ngot, wakes;

static void on_async(uv_async_t *a)
{
	CHECK(a->data == &q);
	wakes++;
	for (rg_list *n; (n = tp_loopq_pop(&q));)
		if (ngot < 8)
			got[ngot++] = RG_CONTAINER_OF(n, item, node)->id;
}

static void *poster(void *arg)
{
	(void)arg;
	tp_loopq_post(&q, &items[0].node);
	tp_loopq_post(&q, &items[1].node);
	tp_loopq_post(&q, &items[0].node); /* pending already: not again */
	return NULL;
}

static void test_post_pop(uv_loop_t *loop)
{
	pthread_t t;
	if (!CHECK_EQ(pthread_create(&t, NULL, poster, NULL), 0))
		return;
	pthread_join(t, NULL);
	uv_run(loop, UV_RUN_ONCE);
	CHECK_EQ(wakes, 1);
	CHECK_EQ(ngot, 2);
	CHECK_EQ(got[0], 0);
	CHECK_EQ(got[1], 1);
	CHECK(!rg_list_linked(&items[0].node)); /* popped nodes are unlinked */
	CHECK(tp_loopq_pop(&q) == NULL);
}

static void test_cancel(uv_loop_t *loop)
{
	ngot = 0;
	tp_loopq_post(&q, &items[2].node);
	tp_loopq_cancel(&q, &items[2].node);
	tp_loopq_cancel(&q, &items[2].node); /* not pending: harmless */
	uv_run(loop, UV_RUN_ONCE);              /* the wake-up still comes */
	CHECK_EQ(ngot, 0);
	/* A cancelled node can be posted again. */
	tp_loopq_post(&q, &items[2].node);
	uv_run(loop, UV_RUN_ONCE);
	CHECK_EQ(ngot, 1);
	CHECK_EQ(got[0], 2);
}

static void test_close(uv_loop_t *loop)
{
	CHECK_EQ(tp_loopq_closing(&q), 0);
	int before = wakes;
	tp_loopq_close(&q);
	CHECK_EQ(tp_loopq_closing(&q), 1);
	uv_run(loop, UV_RUN_ONCE);
	CHECK_EQ(wakes, before + 1);
}

int main(void)
{
	uv_loop_t loop;
	uv_loop_init(&loop);
	for (int i = 0; i < 3; i++) {
		rg_list_init(&items[i].node);
		items[i].id = i;
	}
	if (!CHECK_EQ(tp_loopq_init(&q, &loop, on_async, &q), 0))
		return check_summary("test_loopq");
	test_post_pop(&loop);
	test_cancel(&loop);
	test_close(&loop);
	uv_close((uv_handle_t *)&q.async, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	tp_loopq_destroy(&q);
	CHECK_EQ(uv_loop_close(&loop), 0);
	return check_summary("test_loopq");
}
