/* See rdma_harness.h. */
#include "rdma_harness.h"

const char *ip;
char self_path[4096];

uint64_t now_ms(void) { return tp_rdma_now_ns() / 1000000; }

/* transport.h has no wrappers for these two slots */
int transport_conn_reg(transport_conn *c, void *p, size_t n, transport_mr **mr)
{
	return c->ops->reg_mem(c, p, n, mr);
}
void transport_conn_dereg(transport_conn *c, transport_mr *mr) { c->ops->dereg_mem(c, mr); }

uint8_t pat(uint64_t seq, size_t i) { return (uint8_t)(seq * 131 + i * 7 + (i >> 9)); }
void fill(uint8_t *p, uint64_t seq, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = pat(seq, i);
}
int verify(const uint8_t *p, uint64_t seq, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != pat(seq, i))
			return 0;
	return 1;
}
int guard_ok(const uint8_t *p)
{
	for (int i = 0; i < GUARD; i++)
		if (p[i] != GUARD_BYTE)
			return 0;
	return 1;
}

/* Builds a request [<bin of extra bytes>] and sends it with the payload. */
int send_frame(transport_conn *c, uint32_t op, uint64_t seq, size_t extra, const void *payload, size_t len)
{
	proto_msg m;
	proto_msg_begin(&m, op, seq, extra ? 1 : 0);
	uint8_t *x = NULL;
	if (extra) {
		x = malloc(extra);
		fill(x, seq + 1, extra);
		proto_msg_bin(&m, x, extra);
	}
	int r = proto_msg_finish(&m, 0, len);
	if (r == 0) {
		struct iovec iov[2] = {{m.data, m.len}, {(void *)payload, len}};
		r = transport_sendv(c, iov, len ? 2 : 1);
	}
	proto_msg_free(&m);
	free(x);
	return r;
}

int msg_op(const transport_frame *f, uint64_t *seq, size_t *extra, int *extra_ok)
{
	proto_view v;
	int op = -1;
	if (proto_view_init(&v, &f->hdr, f->msg) == PROTO_OK) {
		op = (int)v.op;
		*seq = v.seq;
		const void *b;
		size_t n;
		*extra = 0;
		*extra_ok = 1;
		if (v.n > 0 && proto_arg_bin(&v, 0, &b, &n) == PROTO_OK) {
			*extra = n;
			*extra_ok = verify(b, v.seq + 1, n);
		}
	}
	proto_view_free(&v);
	return op;
}

/* ---- the in-process server ---- */

server S;

static void *srv_accept(void *ctx, transport_conn *c)
{
	server *s = ctx;
	conn_rec *r = calloc(1, sizeof(*r));
	r->s = s;
	r->c = c;
	snprintf(r->peer, sizeof(r->peer), "%s", c->peer);
	r->arena_len = 8u << 20;
	r->arena = malloc(r->arena_len);
	if (transport_conn_reg(c, r->arena, r->arena_len, &r->arena_mr) != 0)
		r->arena_mr = NULL;
	pthread_mutex_lock(&s->mu);
	s->recs[s->nrecs++] = r;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return r;
}

static void *srv_payload_dest(void *ctx, const transport_frame *f)
{
	conn_rec *r = ctx;
	uint64_t seq;
	size_t extra;
	int eok;
	int op = msg_op(f, &seq, &extra, &eok);
	size_t n = (size_t)f->hdr.payload_len;
	r->cur = NULL;
	if (op == OP_DISCARD)
		return NULL;
	if (op == OP_REFUSE) {
		pthread_mutex_lock(&r->s->mu);
		r->refused_dest++;
		pthread_mutex_unlock(&r->s->mu);
		return NULL;
	}
	if (op == OP_DATA_REG && r->arena_mr && n + GUARD <= r->arena_len) {
		r->cur = r->arena;
		r->cur_reg = 1;
	} else {
		r->cur = malloc(n + GUARD);
		r->cur_reg = 0;
	}
	memset(r->cur, GUARD_BYTE, n + GUARD);
	return r->cur;
}

typedef struct echo_job {
	transport_conn *c;
	uint64_t seq;
	size_t len;
} echo_job;

/* transport_sent_fn of the OP_PULL_ASYNC answers (loop thread). */
static void srv_sent(void *ctx, int err)
{
	conn_rec *r = ctx;
	pthread_mutex_lock(&r->s->mu);
	r->async_done++;
	if (err)
		r->async_err++;
	pthread_cond_broadcast(&r->s->cv);
	pthread_mutex_unlock(&r->s->mu);
}

/* ASYNC_N frames straight from the registered arena, none waited for. */
static void srv_pull_async(conn_rec *r, uint64_t seq)
{
	for (unsigned k = 0; k < ASYNC_N && r->arena_mr; k++) {
		uint8_t *p = r->arena + (size_t)k * ASYNC_LEN;
		fill(p, seq + k, ASYNC_LEN);
		proto_msg m;
		proto_msg_begin(&m, OP_PULL_ASYNC, seq + k, 0);
		if (proto_msg_finish(&m, 0, ASYNC_LEN) == 0) {
			struct iovec iov[2] = {{m.data, m.len}, {p, ASYNC_LEN}};
			if (transport_sendv_async(r->c, iov, 2, srv_sent, r) == 0) {
				pthread_mutex_lock(&r->s->mu);
				r->async_sent++;
				pthread_mutex_unlock(&r->s->mu);
			}
		}
		proto_msg_free(&m);
	}
	/* Completions run on this (the loop) thread: none can have run yet. */
	pthread_mutex_lock(&r->s->mu);
	r->async_done_at_return = r->async_done;
	pthread_cond_broadcast(&r->s->cv);
	pthread_mutex_unlock(&r->s->mu);
}

static void srv_frame(void *ctx, transport_frame *f)
{
	conn_rec *r = ctx;
	uint64_t seq = 0;
	size_t extra = 0, n = (size_t)f->hdr.payload_len;
	int eok = 1;
	int op = msg_op(f, &seq, &extra, &eok);
	int ok = op >= 0 && eok;
	int keep = op == OP_KEEP && f->msg_lent && transport_frame_keep(f) == TRANSPORT_OK;
	if (op == OP_DISCARD)
		ok = ok && f->payload == NULL;
	else if (n > 0)
		ok = ok && f->payload == r->cur && verify(f->payload, seq, n) && guard_ok(r->cur + n);
	pthread_mutex_lock(&r->s->mu);
	r->nframes++;
	if (f->msg_lent || keep) {
		r->nlent++;
		r->lent_bad += n > 0;
	}
	if (keep && r->nkept++ == 0) {
		r->kept = *f;
		f->msg = NULL;
	}
	if (!ok) {
		r->nbad++;
		fprintf(stderr, "server: frame op %d seq %" PRIx64 " len %zu is wrong\n", op, seq, n);
	}
	unsigned th = (unsigned)(seq >> 32) & 7;
	if (seq >> 32) {
		if ((uint32_t)seq != 0 && (uint32_t)seq != (uint32_t)r->last_seq[th] + 1)
			r->order_bad++;
		r->last_seq[th] = seq;
	}
	pthread_cond_broadcast(&r->s->cv);
	pthread_mutex_unlock(&r->s->mu);
	if (op == OP_ECHO) {
		/* Answer from the loop thread itself: a payload larger than the
		 * bounce ring makes this send wait (inline polling). */
		uint8_t *p = malloc(n ? n : 1);
		fill(p, seq, n);
		if (send_frame(r->c, OP_ECHO, seq, 0, p, n) != 0)
			r->echo_errs++;
		free(p);
	}
	if (op == OP_PULL_ASYNC)
		srv_pull_async(r, seq);
	if (r->cur && !r->cur_reg)
		free(r->cur);
	r->cur = NULL;
	transport_frame_free(f);
}

/* Sees each frame's header first, as the backend's admission check does. */
static int srv_frame_ok(void *ctx, const proto_hdr *h)
{
	conn_rec *r = ctx;
	pthread_mutex_lock(&r->s->mu);
	r->nhdr++;
	r->nrefused += h->op == OP_REFUSE;
	pthread_cond_broadcast(&r->s->cv);
	pthread_mutex_unlock(&r->s->mu);
	return h->op != OP_REFUSE;
}

static void srv_close(void *ctx, int err)
{
	conn_rec *r = ctx;
	pthread_mutex_lock(&r->s->mu);
	r->nclose++;
	r->close_err = err;
	pthread_cond_broadcast(&r->s->cv);
	int keep = r->keep;
	pthread_mutex_unlock(&r->s->mu);
	if (r->arena_mr)
		transport_conn_dereg(r->c, r->arena_mr);
	r->arena_mr = NULL;
	if (!keep)
		transport_close(r->c);
}

static void *loop_main(void *arg)
{
	server *s = arg;
	uv_run(&s->loop, UV_RUN_DEFAULT);
	return NULL;
}

static const transport_server_cb srv_cb = {
	.on_accept = srv_accept,
	.payload_dest = srv_payload_dest,
	.on_frame = srv_frame,
	.on_close = srv_close,
	.frame_ok = srv_frame_ok,
};

void *loop_main_front(uv_loop_t *loop)
{
	uv_run(loop, UV_RUN_DEFAULT);
	return NULL;
}

int server_start(server *s)
{
	transport_addr a;
	char spec[128];
	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	uv_loop_init(&s->loop);
	snprintf(spec, sizeof(spec), "rdma://%s:0", ip);
	if (transport_parse_addr(spec, &a) || transport_listen(&s->loop, &a, &srv_cb, s, &s->l) != 0)
		return -1;
	s->port = transport_listener_port(s->l);
	pthread_create(&s->thread, NULL, loop_main, s);
	return 0;
}

void server_stop(server *s)
{
	if (s->l) {
		transport_listener_close(s->l);
		pthread_join(s->thread, NULL);
		uv_loop_close(&s->loop);
		s->l = NULL;
	}
	for (int i = 0; i < s->nrecs; i++) {
		if (s->recs[i]->keep && s->recs[i]->c)
			transport_close(s->recs[i]->c);
		free(s->recs[i]->arena);
		free(s->recs[i]);
	}
	s->nrecs = 0;
}

transport_conn *connect_to(int port)
{
	transport_addr a;
	char spec[128];
	transport_conn *c = NULL;
	snprintf(spec, sizeof(spec), "rdma://%s:%d", ip, port);
	if (transport_parse_addr(spec, &a) != 0)
		return NULL;
	int r = transport_connect(&a, &c);
	if (r)
		fprintf(stderr, "connect %s: %s\n", spec, transport_strerror(r));
	return c;
}

conn_rec *rec_by_peer(const char *peer)
{
	conn_rec *found = NULL;
	uint64_t end = now_ms() + 5000;
	while (!found && now_ms() < end) {
		pthread_mutex_lock(&S.mu);
		for (int i = 0; i < S.nrecs && !found; i++)
			if (!strcmp(S.recs[i]->peer, peer))
				found = S.recs[i];
		pthread_mutex_unlock(&S.mu);
		if (!found)
			usleep(10000);
	}
	return found;
}

conn_rec *rec_for(transport_conn *c)
{
	char me[64];
	rdma_ep *ep = tp_rdma_conn_ep(c);
	tp_rdma_addr_name(rdma_get_local_addr(ep->id), me, sizeof(me));
	return rec_by_peer(me);
}

conn_rec *connect_rec(transport_conn **c)
{
	*c = connect_to(S.port);
	if (!CHECK(*c))
		return NULL;
	conn_rec *r = rec_for(*c);
	return CHECK(r) ? r : NULL;
}

void *send_job_main(void *arg)
{
	send_job *j = arg;
	j->r = send_frame(j->c, OP_DATA, j->seq, 0, j->p, j->n);
	return NULL;
}

/* ---- client receiving ---- */

void *cli_dest(void *ctx, const transport_frame *f)
{
	rx_ctx *x = ctx;
	if (x->discard || f->hdr.payload_len + GUARD > x->cap)
		return NULL;
	memset(x->buf, GUARD_BYTE, (size_t)f->hdr.payload_len + GUARD);
	return x->buf;
}

/* Receives one frame and checks it is (op, seq, len) with the pattern. */
int recv_check(transport_conn *c, rx_ctx *x, int op_want, uint64_t seq_want, size_t len)
{
	transport_frame f;
	int r = transport_recv_frame(c, &f, cli_dest, x);
	if (!CHECK_EQ(r, 0))
		return 0;
	uint64_t seq = 0;
	size_t extra;
	int eok;
	int op = msg_op(&f, &seq, &extra, &eok);
	int ok = CHECK_EQ(op, op_want) & CHECK_EQ(seq, seq_want) & CHECK_EQ(f.hdr.payload_len, len);
	if (ok && len && !x->discard)
		ok = CHECK(f.payload == x->buf) && CHECK(verify(f.payload, seq, len)) && CHECK(guard_ok(x->buf + len));
	transport_frame_free(&f);
	return ok;
}
