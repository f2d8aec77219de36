/*
 * Server to server copies, the ops (peer.h has the whole path).
 *
 * B, the destination's server: peer_ticket hands the client a ticket for a
 * range of the frame's device and the port of its peer listener; peer_data
 * runs each chunk A sent (peer_recv.c queued it on this session's executor):
 * an H2D copy on the ticket's stream, answered to A once queued, the last one
 * once the stream has it done, so A's reply to the client means the bytes are
 * on B's device.
 *
 * A, the source's server: peer_push starts a thread of its own that connects
 * to B's peer listener, presents the ticket, and streams the range in
 * staging-sized chunks (each read from the device in the order of the push's
 * stream, which the executor queued everything before it on), at most
 * BE_PEER_WINDOW of them unanswered, then replies. Not the executor: a copy
 * the other way at the same time (B pushing to A, waiting for A's executor to
 * write its chunks) would wait for it forever. A connection that cannot be
 * made within BE_PEER_CONNECT_MS is answered reached 0: the client then copies
 * through itself. The session's teardown ends its pushes first (their
 * connections shut down) and joins them.
 */
#include "peer.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

int be_op_peer_ticket(be_session *s, be_req *rq, CUdeviceptr dst, uint64_t len, uint64_t stream_id)
{
	CUstream st;
	int err, port;
	uint8_t t[BE_PEER_TICKET_LEN];

	if ((err = be_get_stream(s, stream_id, &st)))
		return err;
	if (len == 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (!be_ranges_check(&s->ranges, dst, len))
		return be_bad_range(s, "peer_ticket", dst, len);
	if (!(port = be_peer_listen_port()))
		return CUDA_ERROR_NOT_SUPPORTED;
	be_peer_grant g = {.s = s, .sid = s->id, .dev = (uint32_t)s->cur, .dst = dst, .len = len, .stream_id = stream_id};
	if ((err = be_peer_ticket_issue(&g, t)))
		return err;
	proto_msg *m = be_reply_begin(s, rq, 2);
	proto_msg_bin(m, t, sizeof(t));
	proto_msg_u64(m, (uint64_t)port);
	return be_reply_end(s, rq, m, NULL, 0);
}

int be_op_peer_open(be_session *s, be_req *rq, const void *ticket, size_t ticket_len)
{
	LOG_WARN(BE_LOG, "session %" PRIu64 ": peer_open belongs on a peer connection, not a client's", s->id);
	return CUDA_ERROR_NOT_PERMITTED;
}

int be_op_peer_data(be_session *s, be_req *rq, uint64_t offset)
{
	be_frame *fr = be_frame_of(rq);
	be_buf *pb = be_req_payload(rq);
	uint64_t n = be_req_payload_len(rq);
	CUstream st;
	int r;

	if (!fr->peer.xfer) {
		LOG_WARN(BE_LOG, "session %" PRIu64 ": peer_data belongs on a peer connection, not a client's", s->id);
		return CUDA_ERROR_NOT_PERMITTED;
	}
	CUdeviceptr p = (CUdeviceptr)(fr->peer.dst + offset);
	if ((r = be_get_stream(s, fr->peer.stream, &st)) == 0 && !be_ranges_check(&s->ranges, p, n))
		r = be_bad_range(s, "peer_data", p, n); /* freed since the ticket */
	if (r == 0 && !pb->p)
		r = CUDA_ERROR_OUT_OF_MEMORY;
	if (r == 0 && !(r = be_stream_capturing(st)))
		r = be_drv.cuMemcpyHtoDAsync(p, pb->p, (size_t)n, st);
	if (r == 0 && fr->peer.last) {
		/* A answers its client when this is answered: the copy is done. */
		r = be_drv.cuStreamSynchronize(st);
		be_staging_release(&s->staging, pb);
	} else {
		r = be_htod_done(s, st, pb, r);
	}
	be_peer_answer(fr->peer.xfer, rq->seq, r);
	return 0; /* the status went to A, and from it to the client */
}

/* ---- A ---- */

static void *no_payload(void *ctx, const transport_frame *f) { return NULL; }

/* B's next answer: its status, or a transport error as CUDA_ERROR_UNKNOWN. */
static int answer_of(transport_conn *c)
{
	transport_frame f = {0};
	int r = transport_recv_frame(c, &f, no_payload, NULL);
	if (r != TRANSPORT_OK) {
		LOG_WARN(BE_LOG, "peer copy to %s: %s", c->peer, transport_strerror(r));
		return CUDA_ERROR_UNKNOWN;
	}
	r = (f.hdr.flags & PROTO_F_REPLY) && f.hdr.payload_len == 0 ? f.hdr.status : CUDA_ERROR_UNKNOWN;
	transport_frame_free(&f);
	return r;
}

static int send_msg(transport_conn *c, proto_msg *m, uint16_t flags, const void *payload, size_t len)
{
	int r = proto_msg_finish(m, flags, len);
	if (r == PROTO_OK) {
		struct iovec iov[2] = {{m->data, m->len}, {(void *)payload, len}};
		r = transport_sendv(c, iov, len ? 2 : 1) == TRANSPORT_OK ? 0 : CUDA_ERROR_UNKNOWN;
	} else {
		r = CUDA_ERROR_OUT_OF_MEMORY;
	}
	proto_msg_free(m);
	return r;
}

/* Two staging buffers: the device reads chunk i+1 into one while chunk i
 * goes out of the other. */
static int push(be_session *s, transport_conn *c, CUdeviceptr src, uint64_t len, CUstream st, const void *ticket)
{
	proto_msg m;
	be_buf b[2] = {{0}};
	int r, inflight = 0;
	uint64_t seq = 1;

	proto_msg_begin(&m, PROTO_OP_PEER_OPEN, seq++, 1);
	proto_msg_bin(&m, ticket, BE_PEER_TICKET_LEN);
	if ((r = send_msg(c, &m, 0, NULL, 0)) || (r = answer_of(c)))
		return r;
	size_t cap = len < BE_CHUNK_SIZE ? (size_t)len : BE_CHUNK_SIZE;
	uint64_t n = (len + cap - 1) / cap;
	if (be_staging_take(&s->staging, cap, &b[0]) != 0 || (n > 1 && be_staging_take(&s->staging, cap, &b[1]) != 0)) {
		be_staging_release(&s->staging, &b[0]);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	r = be_drv.cuMemcpyDtoHAsync(b[0].p, src, len < cap ? (size_t)len : cap, st);
	for (uint64_t i = 0; i < n && r == 0; i++) {
		uint64_t off = i * cap;
		size_t k = len - off < cap ? (size_t)(len - off) : cap;
		if ((r = be_drv.cuStreamSynchronize(st))) /* chunk i is in b[i & 1] */
			break;
		if (i + 1 < n) {
			uint64_t o2 = off + cap;
			size_t k2 = len - o2 < cap ? (size_t)(len - o2) : cap;
			if ((r = be_drv.cuMemcpyDtoHAsync(b[(i + 1) & 1].p, src + o2, k2, st)))
				break;
		}
		proto_msg_begin(&m, PROTO_OP_PEER_DATA, seq++, 1);
		proto_msg_u64(&m, off);
		if ((r = send_msg(c, &m, PROTO_F_ASYNC, b[i & 1].p, k))) /* the buffer is free when this returns */
			break;
		if (++inflight >= BE_PEER_WINDOW) {
			r = answer_of(c);
			inflight--;
		}
	}
	while (r == 0 && inflight-- > 0)
		r = answer_of(c);
	if (r)
		be_drv.cuStreamSynchronize(st); /* no read may still land in a buffer that goes back */
	be_staging_release(&s->staging, &b[0]);
	be_staging_release(&s->staging, &b[1]);
	return r;
}

typedef struct push_job {
	be_session *s;
	uint64_t seq;
	CUcontext ctx;
	CUdeviceptr src;
	uint64_t len;
	CUstream st;
	uint8_t ticket[BE_PEER_TICKET_LEN];
	transport_addr a;
	pthread_t th;
	transport_conn *c; /* (mu) while it streams */
	int stop;          /* (mu) the session ends */
	struct push_job *next;
} push_job;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static push_job *jobs;

static void *push_main(void *arg)
{
	push_job *j = arg;
	transport_conn *c;
	int err;

	pthread_setname_np(pthread_self(), "rg-push");
	be_driver_thread_relaxed();
	be_drv.cuCtxSetCurrent(j->ctx);
	int r = transport_connect_within(&j->a, BE_PEER_CONNECT_MS, &c);
	if (r != TRANSPORT_OK) {
		LOG_WARN(BE_LOG, "session %" PRIu64 ": peer copy: cannot reach %s://%s:%d: %s", j->s->id, j->a.scheme,
			 j->a.host, j->a.port, transport_strerror(r));
		proto_msg *m = be_reply_begin_seq(j->s, j->seq, 1);
		proto_msg_u64(m, 0);
		be_reply_send(j->s, m, NULL, 0);
		return NULL;
	}
	pthread_mutex_lock(&mu);
	j->c = j->stop ? NULL : c;
	pthread_mutex_unlock(&mu);
	err = j->c ? push(j->s, c, j->src, j->len, j->st, j->ticket) : CUDA_ERROR_UNKNOWN;
	pthread_mutex_lock(&mu);
	j->c = NULL;
	pthread_mutex_unlock(&mu);
	transport_shutdown(c);
	transport_close(c);
	if (err) {
		be_reply_status_seq(j->s, j->seq, err);
	} else {
		proto_msg *m = be_reply_begin_seq(j->s, j->seq, 1);
		proto_msg_u64(m, 1);
		be_reply_send(j->s, m, NULL, 0);
	}
	return NULL;
}

void be_peer_push_join(be_session *s)
{
	push_job *mine = NULL;
	pthread_mutex_lock(&mu);
	for (push_job **p = &jobs; *p;) {
		push_job *j = *p;
		if (j->s != s) {
			p = &j->next;
			continue;
		}
		*p = j->next;
		j->stop = 1;
		if (j->c)
			transport_shutdown(j->c); /* a B that stopped answering no longer holds it */
		j->next = mine;
		mine = j;
	}
	pthread_mutex_unlock(&mu);
	while (mine) {
		push_job *j = mine;
		mine = j->next;
		pthread_join(j->th, NULL);
		free(j);
	}
}

/* The pushes of s that ended: joined, so that threads do not pile up. */
static void reap(be_session *s)
{
	push_job *done = NULL;
	pthread_mutex_lock(&mu);
	for (push_job **p = &jobs; *p;) {
		push_job *j = *p;
		if (j->s == s && pthread_tryjoin_np(j->th, NULL) == 0) {
			*p = j->next;
			j->next = done;
			done = j;
		} else {
			p = &j->next;
		}
	}
	pthread_mutex_unlock(&mu);
	while (done) {
		push_job *j = done;
		done = j->next;
		free(j);
	}
}

int be_op_peer_push(be_session *s, be_req *rq, CUdeviceptr src, uint64_t len, uint64_t stream_id, const void *ticket,
		    size_t ticket_len, const char *scheme, size_t scheme_len, const char *host, size_t host_len,
		    uint32_t port)
{
	transport_addr a = {.port = (int)port};
	CUstream st;
	int err;

	if (!be_peer_listen_enabled())
		return CUDA_ERROR_NOT_SUPPORTED;
	if (ticket_len != BE_PEER_TICKET_LEN || scheme_len >= sizeof(a.scheme) || host_len == 0 ||
	    host_len >= sizeof(a.host) || port == 0 || port > 65535)
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(a.scheme, scheme, scheme_len);
	memcpy(a.host, host, host_len);
	if (strcmp(a.scheme, "tcp") && strcmp(a.scheme, "tls"))
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = be_get_stream(s, stream_id, &st)))
		return err;
	if (len == 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (!be_ranges_check(&s->ranges, src, len))
		return be_bad_range(s, "peer_push", src, len);
	if ((err = be_stream_capturing(st)))
		return err;
	reap(s);
	push_job *j = calloc(1, sizeof(*j));
	if (!j)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*j = (push_job){.s = s, .seq = rq->seq, .ctx = s->ctx, .src = src, .len = len, .st = st, .a = a};
	memcpy(j->ticket, ticket, BE_PEER_TICKET_LEN);
	pthread_mutex_lock(&mu);
	if (pthread_create(&j->th, NULL, push_main, j) != 0) {
		pthread_mutex_unlock(&mu);
		free(j);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	j->next = jobs;
	jobs = j;
	pthread_mutex_unlock(&mu);
	return BE_DEFERRED; /* push_main replies */
}
