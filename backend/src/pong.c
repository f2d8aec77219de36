/*
 * Pongs: the server's half of the client's liveness check (frontend/src/live.h).
 * While a call waits and the server has been quiet, the client sends ping; if
 * nothing comes back within REMOTE_GPU_TIMEOUT it gives the server up. So a
 * ping must be answered whatever the session is doing: an hour-long kernel on
 * the executor, a waiter inside cuCtxSynchronize.
 *
 * The ping op runs on the loop thread (+loop in api/cuda.api), which reads
 * frames however busy the executor is. It does not answer there: a send can
 * block (another thread holds the connection's send lock for a large reply, or
 * the client reads slowly), and the loop thread must never wait on one client
 * (in thread isolation it serves them all). It hands the answer to a thread of
 * the session's own, which sends a ping event (PROTO_F_EVENT, op ping). Pings
 * that come while one is being answered are answered once: the client only
 * needs some sign of life, and a client that floods pings gets no more pongs
 * than it reads, and costs no memory.
 *
 * The thread starts at the first ping, which only comes after the hello (loop
 * ops are refused before it): an unauthenticated connection costs no thread.
 */
#include "backend.h"

#include <inttypes.h>

#include "ops.h"

static void pong_send(be_session *s)
{
	proto_msg m;
	proto_msg_begin(&m, PROTO_OP_PING, 0, 0);
	int err = be_event_send(s, &m);
	if (err)
		LOG_DEBUG(BE_LOG, "session %" PRIu64 ": ping answer not sent: %s", s->id, transport_strerror(err));
}

static void *pong_main(void *arg)
{
	be_session *s = arg;
	be_pong *p = &s->pong;

	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (!p->due && !p->stop)
			pthread_cond_wait(&p->cv, &p->mu);
		if (p->stop)
			break;
		p->due = 0;
		pthread_mutex_unlock(&p->mu);
		pong_send(s);
		pthread_mutex_lock(&p->mu);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

int be_op_ping(be_session *s, be_req *rq)
{
	be_pong *p = &s->pong;

	pthread_mutex_lock(&p->mu);
	if (!p->started && !p->stop) {
		if (pthread_create(&p->thread, NULL, pong_main, s) == 0)
			p->started = 1;
		else
			LOG_WARN(BE_LOG, "session %" PRIu64 ": cannot start a thread to answer pings: the client "
				 "may take the server for dead during a long call", s->id);
	}
	p->due = 1;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	return CUDA_SUCCESS;
}

void be_pong_init(be_session *s)
{
	pthread_mutex_init(&s->pong.mu, NULL);
	pthread_cond_init(&s->pong.cv, NULL);
}

void be_pong_stop(be_session *s)
{
	be_pong *p = &s->pong;

	pthread_mutex_lock(&p->mu);
	p->stop = 1;
	pthread_cond_signal(&p->cv);
	int started = p->started;
	p->started = 0;
	pthread_mutex_unlock(&p->mu);
	/* A send it is inside ends at once: the connection is shut down. */
	if (started)
		pthread_join(p->thread, NULL);
}

void be_pong_destroy(be_session *s)
{
	pthread_mutex_destroy(&s->pong.mu);
	pthread_cond_destroy(&s->pong.cv);
}
