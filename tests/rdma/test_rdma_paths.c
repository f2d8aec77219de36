/*
 * rdma frames and the ways they travel (see test_rdma.c): sizes around the
 * inline limit up to 3 MiB both ways, from pageable and registered memory into
 * malloc'd and registered destinations; the registration cache; concurrent
 * senders on one connection; zero-copy sends completed later
 * (transport_sendv_async); a connect redirected to another port; one
 * connection's bulk transfer and another's calls side by side.
 */
#include "rdma_harness.h"

static const size_t sizes[] = {0, 1, 100, 8100, 8144, 8152, 8200, 65536, (1u << 20) + 3, 3u << 20};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

void test_frames(void)
{
	transport_conn *c;
	conn_rec *r = connect_rec(&c);
	if (!r)
		return;
	r->keep = 1; /* we send on r->c: it must outlive a failure */
	rdma_ep *ep = tp_rdma_conn_ep(c);
	size_t big = 3u << 20;
	uint8_t *pg = malloc(big), *pin = NULL;
	if (posix_memalign((void **)&pin, 4096, big) != 0)
		return;
	transport_mr *mr = NULL;
	CHECK_EQ(transport_conn_reg(c, pin, big, &mr), 0);
	uint64_t seq = 1;
	int sent = 0;
	/* every size, pageable and registered source, both kinds of destination */
	for (int dst = 0; dst < 2; dst++)
		for (int src = 0; src < 2; src++)
			for (size_t i = 0; i < NSIZES; i++, seq++) {
				uint8_t *p = src ? pin : pg;
				fill(p, seq, sizes[i]);
				if (!CHECK_EQ(send_frame(c, dst ? OP_DATA_REG : OP_DATA, seq, 0, p, sizes[i]), 0))
					goto out;
				sent++;
			}
	/* a msgpack part bigger than a control message, with and without payload */
	fill(pg, seq, 100000);
	CHECK_EQ(send_frame(c, OP_BIGMSG, seq++, 200000, pg, 100000), 0);
	CHECK_EQ(send_frame(c, OP_BIGMSG, seq++, 50000, NULL, 0), 0);
	/* discarded payloads of each kind, then a normal frame */
	fill(pg, seq, 1u << 20);
	CHECK_EQ(send_frame(c, OP_DISCARD, seq++, 0, pg, 1u << 20), 0);
	CHECK_EQ(send_frame(c, OP_DISCARD, seq++, 0, pg, 10), 0);
	fill(pg, seq, 5000);
	CHECK_EQ(send_frame(c, OP_DATA, seq++, 0, pg, 5000), 0);
	sent += 5;
	/* two frames in one sendv */
	{
		proto_msg a, b;
		uint8_t *pa = malloc(70000), *pb = malloc(7);
		fill(pa, seq, 70000);
		fill(pb, seq + 1, 7);
		proto_msg_begin(&a, OP_DATA, seq, 0);
		proto_msg_finish(&a, 0, 70000);
		proto_msg_begin(&b, OP_DATA, seq + 1, 0);
		proto_msg_finish(&b, 0, 7);
		struct iovec iov[4] = {{a.data, a.len}, {pa, 70000}, {b.data, b.len}, {pb, 7}};
		CHECK_EQ(transport_sendv(c, iov, 4), 0);
		proto_msg_free(&a);
		proto_msg_free(&b);
		free(pa);
		free(pb);
		seq += 2;
		sent += 2;
	}
	/* a batch as the frontend's send queue makes it: many small frames in one
	 * buffer (they share SENDs), one large frame in the middle */
	{
		enum { NB = 150 };
		uint8_t *buf = malloc(NB * 512), *big = malloc(100000);
		size_t used = 0;
		struct iovec iov[3];
		int niov = 0;
		for (int k = 0; k < NB; k++, seq++) {
			proto_msg m;
			size_t n = (size_t)(k * 37) % 300;
			proto_msg_begin(&m, OP_DATA, seq, 0);
			proto_msg_finish(&m, 0, k == NB / 2 ? 100000 : n);
			memcpy(buf + used, m.data, m.len);
			used += m.len;
			if (k == NB / 2) {
				fill(big, seq, 100000);
				iov[niov++] = (struct iovec){buf, used};
				iov[niov++] = (struct iovec){big, 100000};
				buf += used; /* the rest in a third iovec */
				used = 0;
			} else {
				fill(buf + used, seq, n);
				used += n;
			}
			proto_msg_free(&m);
		}
		iov[niov++] = (struct iovec){buf, used};
		uint64_t b0 = ep->st.tx_batches;
		CHECK_EQ(transport_sendv(c, iov, niov), 0);
		CHECK(ep->st.tx_batches > b0);
		free(iov[0].iov_base);
		free(big);
		sent += NB;
	}
	CHECK(WAIT_FOR(r->nframes >= sent, 60000));
	CHECK_EQ(r->nframes, sent);
	CHECK_EQ(r->nbad, 0);

	/* which paths they took */
	pthread_mutex_lock(&ep->mu);
	CHECK(ep->st.tx_zc_bytes >= 2 * ((3u << 20) + (1u << 20) + 65536));
	CHECK(ep->st.tx_bounce_bytes >= 2 * ((3u << 20) + (1u << 20)));
	CHECK(ep->st.tx_inline > 0);
	pthread_mutex_unlock(&ep->mu);
	rdma_ep *sep = tp_rdma_conn_ep(r->c);
	pthread_mutex_lock(&sep->mu);
	CHECK(sep->st.rx_direct_bytes >= 2 * ((3u << 20) + (1u << 20)));
	CHECK(sep->st.rx_landing_bytes >= 2 * ((3u << 20) + (1u << 20)));
	CHECK(sep->st.rx_skip_bytes >= (1u << 20));
	pthread_mutex_unlock(&sep->mu);

	/* the other way: the server sends, the client receives into pageable
	 * and registered buffers */
	rx_ctx x = {.cap = big + GUARD};
	uint8_t *rpin = NULL;
	if (posix_memalign((void **)&rpin, 4096, big + GUARD) != 0)
		goto out;
	transport_mr *rmr = NULL;
	CHECK_EQ(transport_conn_reg(c, rpin, big + GUARD, &rmr), 0);
	uint8_t *spin = malloc(big);
	transport_mr *smr = NULL;
	CHECK_EQ(transport_conn_reg(r->c, spin, big, &smr), 0);
	for (int dst = 0; dst < 2; dst++)
		for (int src = 0; src < 2; src++)
			for (size_t i = 0; i < NSIZES; i++, seq++) {
				uint8_t *p = src ? spin : pg;
				fill(p, seq, sizes[i]);
				x.buf = dst ? rpin : malloc(big + GUARD);
				if (sizes[i] > 8000) {
					/* not inline: the send waits for our reads (zero-copy)
					 * or for bounce slots: send from another thread */
					pthread_t th;
					send_job job = {r->c, seq, p, sizes[i], -1};
					pthread_create(&th, NULL, send_job_main, &job);
					recv_check(c, &x, OP_DATA, seq, sizes[i]);
					pthread_join(th, NULL);
					CHECK_EQ(job.r, 0);
				} else {
					CHECK_EQ(send_frame(r->c, OP_DATA, seq, 0, p, sizes[i]), 0);
					recv_check(c, &x, OP_DATA, seq, sizes[i]);
				}
				if (!dst)
					free(x.buf);
			}
	pthread_mutex_lock(&ep->mu);
	CHECK(ep->st.rx_direct_bytes >= 2 * ((3u << 20) + (1u << 20)));
	CHECK(ep->st.rx_landing_bytes >= 2 * ((3u << 20) + (1u << 20)));
	pthread_mutex_unlock(&ep->mu);

	/* an echo answered from the server's loop thread (bigger than the
	 * bounce ring: the loop must wait inline for our acks) */
	x.buf = rpin;
	fill(pg, seq, 3u << 20);
	CHECK_EQ(send_frame(c, OP_ECHO, seq, 0, pg, 3u << 20), 0);
	recv_check(c, &x, OP_ECHO, seq, 3u << 20);
	seq++;
	CHECK_EQ(r->echo_errs, 0);

	transport_conn_dereg(r->c, smr);
	free(spin);
	transport_conn_dereg(c, rmr);
	free(rpin);
out:
	transport_conn_dereg(c, mr);
	free(pin);
	free(pg);
	transport_close(c);
	CHECK(WAIT_FOR(r->nclose == 1, 5000));
	CHECK_EQ(r->close_err, TRANSPORT_ECLOSED);
}

void test_regcache(void)
{
	transport_conn *c = connect_to(S.port);
	if (!CHECK(c))
		return;
	rdma_ep *ep = tp_rdma_conn_ep(c);
	uint8_t *p = NULL;
	if (posix_memalign((void **)&p, 4096, 1u << 20) != 0)
		return;
	transport_mr *a = NULL, *b = NULL, *d = NULL;
	CHECK_EQ(transport_conn_reg(c, p, 1u << 20, &a), 0);
	CHECK_EQ(transport_conn_reg(c, p, 1u << 20, &b), 0);        /* same range */
	CHECK_EQ(transport_conn_reg(c, p + 4096, 8192, &d), 0);      /* enclosed */
	if (a && b && d) {
		CHECK_EQ(a->rkey, b->rkey);
		CHECK_EQ(a->rkey, d->rkey);
		CHECK_EQ(ep->regs.n, 1);
		CHECK_EQ(ep->regs.hits, 2);
	}
	uint32_t lk, rk;
	transport_conn_dereg(c, a);
	CHECK(tp_rdma_regs_find(&ep->regs, p + 100, 10, &lk, &rk));     /* b and d still hold it */
	transport_conn_dereg(c, b);
	transport_conn_dereg(c, d);
	CHECK(!tp_rdma_regs_find(&ep->regs, p + 100, 10, &lk, &rk));
	CHECK_EQ(ep->regs.n, 0);
	free(p);
	transport_close(c);
}

typedef struct thr {
	transport_conn *c;
	int id, n, err;
} thr;

static void *cli_sender(void *arg)
{
	thr *t = arg;
	uint8_t *p = malloc(300000);
	for (int i = 0; i < t->n && !t->err; i++) {
		uint64_t seq = (uint64_t)(t->id + 1) << 32 | (uint32_t)i;
		size_t n = (size_t)((i * 7919u + (unsigned)t->id * 104729u) % 300000u);
		if (i % 3 == 0)
			n %= 2000; /* plenty of small ones */
		fill(p, seq, n);
		t->err = send_frame(t->c, OP_DATA, seq, 0, p, n);
	}
	free(p);
	return NULL;
}

static void *srv_sender(void *arg)
{
	thr *t = arg;
	uint8_t *p = malloc(200000);
	for (int i = 0; i < t->n && !t->err; i++) {
		uint64_t seq = (uint64_t)(t->id + 1) << 32 | (uint32_t)i;
		size_t n = (size_t)((i * 6007u + (unsigned)t->id * 3u) % 200000u);
		fill(p, seq, n);
		t->err = send_frame(t->c, OP_DATA, seq, 0, p, n);
	}
	free(p);
	return NULL;
}

void test_concurrent(void)
{
	transport_conn *c;
	conn_rec *r = connect_rec(&c);
	if (!r)
		return;
	r->keep = 1; /* server threads send on r->c */
	enum { NC = 4, NS = 2, N = 60 };
	thr ct[NC], st[NS];
	pthread_t cth[NC], sth[NS];
	for (int i = 0; i < NC; i++) {
		ct[i] = (thr){c, i, N, 0};
		pthread_create(&cth[i], NULL, cli_sender, &ct[i]);
	}
	for (int i = 0; i < NS; i++) {
		st[i] = (thr){r->c, i, N, 0};
		pthread_create(&sth[i], NULL, srv_sender, &st[i]);
	}
	/* the client receives the server threads' frames meanwhile */
	uint8_t *buf = malloc(200000 + GUARD);
	rx_ctx x = {.buf = buf, .cap = 200000 + GUARD};
	int last[NS], bad = 0, order = 0;
	for (int i = 0; i < NS; i++)
		last[i] = -1;
	for (int k = 0; k < NS * N; k++) {
		transport_frame f;
		if (!CHECK_EQ(transport_recv_frame(c, &f, cli_dest, &x), 0))
			break;
		uint64_t seq = 0;
		size_t extra;
		int eok;
		msg_op(&f, &seq, &extra, &eok);
		int th = (int)(seq >> 32) - 1, i = (int)(uint32_t)seq;
		if (th < 0 || th >= NS || (f.hdr.payload_len && !verify(f.payload, seq, (size_t)f.hdr.payload_len)))
			bad++;
		else if (i != last[th] + 1)
			order++;
		else
			last[th] = i;
		transport_frame_free(&f);
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(order, 0);
	for (int i = 0; i < NC; i++) {
		pthread_join(cth[i], NULL);
		CHECK_EQ(ct[i].err, 0);
	}
	for (int i = 0; i < NS; i++) {
		pthread_join(sth[i], NULL);
		CHECK_EQ(st[i].err, 0);
	}
	CHECK(WAIT_FOR(r->nframes >= NC * N, 60000));
	CHECK_EQ(r->nframes, NC * N);
	CHECK_EQ(r->nbad, 0);
	CHECK_EQ(r->order_bad, 0);
	free(buf);
	/* the server ends it this time: the client sees ECLOSED */
	transport_shutdown(r->c);
	CHECK(WAIT_FOR(r->nclose == 1, 5000));
	transport_frame f;
	uint64_t t0 = now_ms();
	CHECK_EQ(transport_recv_frame(c, &f, NULL, NULL), TRANSPORT_ECLOSED);
	CHECK(now_ms() - t0 < 5000);
	CHECK_EQ(send_frame(c, OP_DATA, 1, 0, NULL, 0) < 0, 1);
	transport_close(c);
}

/* The QP in the error state (as a broken link leaves it): a receiver blocked
 * on it and later senders fail with EIO at once; the server hears of it. */

static int redirect_port;
static transport_cookie redirect_cookie;
static int front_redirect(void *ctx, const char *peer, transport_cookie *cookie)
{
	*cookie = redirect_cookie;
	return redirect_port;
}

/* transport_sendv_async: zero-copy answers go out without waiting for the
 * peer to read them, their completions run once it has (and, when the peer
 * goes away without reading, with an error), and the bytes arrive intact. */
void test_sent_async(void)
{
	transport_conn *c;
	conn_rec *r = connect_rec(&c);
	if (!r || !CHECK(r->arena_mr))
		return;
	rx_ctx x = {.cap = ASYNC_LEN + GUARD};
	x.buf = malloc(x.cap);
	CHECK_EQ(send_frame(c, OP_PULL_ASYNC, 100, 0, NULL, 0), 0);
	for (unsigned k = 0; k < ASYNC_N; k++)
		recv_check(c, &x, OP_PULL_ASYNC, 100 + k, ASYNC_LEN);
	CHECK(WAIT_FOR(r->async_done == ASYNC_N, 5000));
	pthread_mutex_lock(&S.mu);
	CHECK_EQ(r->async_sent, ASYNC_N);
	CHECK_EQ(r->async_done_at_return, 0);
	CHECK_EQ(r->async_err, 0);
	pthread_mutex_unlock(&S.mu);
	CHECK(tp_rdma_conn_ep(r->c)->st.tx_zc_bytes >= (uint64_t)ASYNC_N * ASYNC_LEN);

	/* a second connection asks, and closes without reading */
	transport_conn *c2 = connect_to(S.port);
	if (CHECK(c2)) {
		conn_rec *r2 = rec_for(c2);
		if (CHECK(r2) && CHECK(r2->arena_mr)) {
			CHECK_EQ(send_frame(c2, OP_PULL_ASYNC, 200, 0, NULL, 0), 0);
			CHECK(WAIT_FOR(r2->async_sent == ASYNC_N, 5000));
			transport_close(c2);
			c2 = NULL;
			CHECK(WAIT_FOR(r2->async_done == ASYNC_N, 5000));
			pthread_mutex_lock(&S.mu);
			CHECK_EQ(r2->async_err, ASYNC_N);
			pthread_mutex_unlock(&S.mu);
		}
		if (c2)
			transport_close(c2);
	}
	transport_close(c);
	free(x.buf);
}

void test_redirect(void)
{
	static const transport_server_cb front_cb = {.on_redirect = front_redirect};
	uv_loop_t loop;
	transport_addr a;
	transport_listener *front;
	char spec[128];
	uv_loop_init(&loop);
	snprintf(spec, sizeof(spec), "rdma://%s:0", ip);
	if (!CHECK(transport_parse_addr(spec, &a) == 0 && transport_listen(&loop, &a, &front_cb, NULL, &front) == 0))
		return;
	int fport = transport_listener_port(front);
	pthread_t th;
	pthread_create(&th, NULL, (void *(*)(void *))loop_main_front, &loop);

	/* straight to the server: no cookie */
	transport_conn *d = connect_to(S.port);
	conn_rec *rd = d ? rec_for(d) : NULL;
	static const transport_cookie zero;
	if (CHECK(rd))
		CHECK(memcmp(&rd->c->cookie, &zero, sizeof(zero)) == 0);

	/* sent on, the cookie comes along (all 128 bits), and the connection carries frames */
	redirect_port = S.port;
	for (int i = 0; i < TRANSPORT_COOKIE_LEN; i++)
		redirect_cookie.b[i] = (uint8_t)(0xc0 + i);
	transport_conn *c = connect_to(fport);
	conn_rec *r = c ? rec_for(c) : NULL;
	if (CHECK(r)) {
		CHECK(transport_cookie_equal(&r->c->cookie, &redirect_cookie));
		CHECK_EQ(send_frame(c, OP_DATA, 1, 0, NULL, 0), 0);
		CHECK(WAIT_FOR(r->nframes == 1, 5000));
	}

	/* a cookie handed over out of band (inside TLS, by the upper layers)
	 * arrives as presented */
	transport_cookie mine;
	for (int i = 0; i < TRANSPORT_COOKIE_LEN; i++)
		mine.b[i] = (uint8_t)(0x31 * i + 7);
	transport_addr sa;
	snprintf(spec, sizeof(spec), "rdma://%s:%d", ip, S.port);
	transport_conn *k = NULL;
	if (CHECK(transport_parse_addr(spec, &sa) == 0) &&
	    CHECK_EQ(transport_connect_cookie(&sa, 5000, &mine, &k), 0)) {
		conn_rec *rk = rec_for(k);
		if (CHECK(rk))
			CHECK(transport_cookie_equal(&rk->c->cookie, &mine));
		transport_close(k);
	}
	/* ... and a listener that would send that client on is refused, not followed */
	transport_addr fa;
	snprintf(spec, sizeof(spec), "rdma://%s:%d", ip, fport);
	k = NULL;
	if (CHECK(transport_parse_addr(spec, &fa) == 0))
		CHECK_EQ(transport_connect_cookie(&fa, 5000, &mine, &k), TRANSPORT_ECONNECT);
	CHECK(k == NULL);

	/* a redirect refused is a failed connect */
	redirect_port = 0;
	transport_conn *x = connect_to(fport);
	CHECK(x == NULL);

	if (c)
		transport_close(c);
	if (d)
		transport_close(d);
	transport_listener_close(front);
	pthread_join(th, NULL);
	uv_loop_close(&loop);
}

/* ---- a bulk transfer beside calls ---- */

#define BULK_FRAMES 16
#define BULK_LEN (8u << 20)

typedef struct bulk_job {
	transport_conn *c;
	int r;
} bulk_job;

static void *bulk_main(void *arg)
{
	bulk_job *j = arg;
	uint8_t *p = malloc(BULK_LEN);
	j->r = p ? 0 : -1;
	for (uint64_t i = 0; i < BULK_FRAMES && !j->r; i++) {
		fill(p, 1000 + i, BULK_LEN);
		j->r = send_frame(j->c, OP_DATA, 1000 + i, 0, p, BULK_LEN);
	}
	free(p);
	return NULL;
}

/* While one connection streams 128 MiB to the server (which polls it from its
 * loop's idle turns while the data moves), calls on a second connection are
 * answered: all of them before the stream ends, which a loop that spun inside
 * the streaming connection's callback would not do. The stream arrives whole. */
void test_bulk_and_calls(void)
{
	transport_conn *a = connect_to(S.port), *b = connect_to(S.port);
	conn_rec *ra = a ? rec_for(a) : NULL;
	if (!CHECK(a && b && ra))
		goto out;
	bulk_job j = {a, -1};
	pthread_t th;
	pthread_create(&th, NULL, bulk_main, &j);
	CHECK(WAIT_FOR(ra->nframes >= 1, 30000)); /* the stream is under way */
	rx_ctx x = {.cap = 64 + GUARD};
	x.buf = malloc(x.cap);
	uint8_t small[64];
	int echoed = 0;
	for (uint64_t seq = 1; seq <= 50; seq++) {
		fill(small, seq, sizeof(small));
		if (!CHECK_EQ(send_frame(b, OP_ECHO, seq, 0, small, sizeof(small)), 0))
			break;
		echoed += recv_check(b, &x, OP_ECHO, seq, sizeof(small));
	}
	CHECK_EQ(echoed, 50);
	pthread_mutex_lock(&S.mu);
	CHECK(ra->nframes < BULK_FRAMES);
	pthread_mutex_unlock(&S.mu);
	pthread_join(th, NULL);
	CHECK_EQ(j.r, 0);
	CHECK(WAIT_FOR(ra->nframes == BULK_FRAMES, 30000));
	CHECK_EQ(ra->nbad, 0);
	free(x.buf);
out:
	if (a)
		transport_close(a);
	if (b)
		transport_close(b);
}

/* The server lends a whole frame without payload to on_frame in its receive
 * buffer (msg_lent), and only such a frame. A copy made with
 * transport_frame_keep outlives the buffer: it still holds its bytes after
 * every receive buffer was used again several times. */
void test_lent(void)
{
	transport_conn *c;
	conn_rec *r = connect_rec(&c);
	if (!r)
		goto out;
	uint64_t seq = 1;
	uint8_t small[10];
	CHECK_EQ(send_frame(c, OP_KEEP, seq++, 300, NULL, 0), 0);
	for (int i = 0; i < 3 * RDMA_NRECV; i++)
		CHECK_EQ(send_frame(c, OP_DATA, seq++, 300, NULL, 0), 0);
	fill(small, seq, sizeof(small));
	CHECK_EQ(send_frame(c, OP_DATA, seq++, 300, small, sizeof(small)), 0);
	int total = (int)seq - 1;
	CHECK(WAIT_FOR(r->nframes == total, 30000));
	pthread_mutex_lock(&S.mu);
	CHECK_EQ(r->nlent, total - 1); /* all but the one with a payload */
	CHECK_EQ(r->lent_bad, 0);
	CHECK_EQ(r->nbad, 0);
	CHECK_EQ(r->nkept, 1);
	transport_frame kept = r->kept;
	r->kept.msg = NULL;
	pthread_mutex_unlock(&S.mu);
	uint64_t kseq = 0;
	size_t extra = 0;
	int eok = 0;
	CHECK_EQ(kept.msg_lent, 0);
	CHECK_EQ(msg_op(&kept, &kseq, &extra, &eok), OP_KEEP);
	CHECK_EQ(kseq, 1);
	CHECK_EQ(extra, 300);
	CHECK(eok);
	transport_frame_free(&kept);
out:
	if (c)
		transport_close(c);
}

/* frame_ok sees each frame's header before anything of it is read: a refused
 * frame never reaches payload_dest or on_frame, even one whose msgpack part
 * is large enough to be pulled with RDMA READs, and the connection ends
 * (ECLOSED). One refused inline, one refused that would need reads. */
void test_frame_refused(void)
{
	static const size_t extra[2] = {100, 512 * 1024};
	for (int k = 0; k < 2; k++) {
		transport_conn *c;
		conn_rec *r = connect_rec(&c);
		if (!r)
			goto next;
		CHECK_EQ(send_frame(c, OP_DATA, 1, 300, NULL, 0), 0);
		CHECK(WAIT_FOR(r->nframes == 1, 10000));
		uint8_t *p = malloc(1 << 20);
		fill(p, 2, 1 << 20);
		send_frame(c, OP_REFUSE, 2, extra[k], p, 1 << 20); /* may fail: the server closes */
		free(p);
		CHECK(WAIT_FOR(r->nclose == 1, 10000));
		pthread_mutex_lock(&S.mu);
		CHECK_EQ(r->nhdr, 2);
		CHECK_EQ(r->nrefused, 1);
		CHECK_EQ(r->refused_dest, 0);
		CHECK_EQ(r->nframes, 1);
		CHECK_EQ(r->close_err, TRANSPORT_ECLOSED);
		pthread_mutex_unlock(&S.mu);
	next:
		if (c)
			transport_close(c);
	}
}
