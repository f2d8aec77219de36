/*
 * tcp transport over a real loopback listener: the server's libuv loop runs in
 * its own thread, clients are either raw sockets (to control exactly how bytes
 * arrive) or transport_connect connections.
 *
 *  - framing: header split across writes, 1-byte writes, payloads of 0 B, 1 B
 *    and 3 MiB, the tail of a payload in the same write as the next frame; the
 *    bytes must land exactly in the payload_dest buffer, never past it.
 *  - server sendv from several threads at once (through the EAGAIN/poll path);
 *    the client receives every frame whole and in each thread's order.
 *  - malformed input ends only the offending connection, with the right error;
 *    a peer of another version gets the version reply first.
 *  - closes from every side: on_close exactly once, clients see ECLOSED,
 *    blocked senders wake up, listener close ends everything and frees it.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "transport_int.h"

#define GUARD 64    /* bytes after each payload buffer that must stay untouched */
#define GUARD_BYTE 0xA5
#define MAXREC 64
#define MAXFRAMES 1024

/* ops the test server understands (the transport does not care) */
enum { OP_DATA = 10, OP_DISCARD = 20, OP_CLOSE_ME = 900 };

typedef struct frame_rec {
	proto_hdr hdr;
	uint32_t op;
	uint64_t seq;
	uint8_t *msg;
	uint8_t *payload; /* what on_frame got */
	uint8_t *dest;    /* what payload_dest returned (owned here) */
} frame_rec;

typedef struct server server;

typedef struct conn_rec {
	server *s;
	transport_conn *c;
	int nclose, close_err;
	int released; /* transport_close was called on c */
	int keep;     /* on_close must not transport_close (the test does) */
	int nframes;
	frame_rec frames[MAXFRAMES];
} conn_rec;

struct server {
	uv_loop_t loop;
	pthread_t thread;
	transport_listener *l;
	int port;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	conn_rec *recs[MAXREC];
	int nrecs;
};

static server S;
static transport_conn *good; /* test_malformed's well-behaved client */

/* ---- server callbacks (loop thread) ---- */

static void *srv_accept(void *ctx, transport_conn *c)
{
	server *s = ctx;
	conn_rec *r = calloc(1, sizeof(*r));
	r->s = s;
	r->c = c;
	pthread_mutex_lock(&s->mu);
	s->recs[s->nrecs++] = r;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return r;
}

static uint32_t msg_op(const transport_frame *f, uint64_t *seq)
{
	proto_view v;
	uint32_t op = UINT32_MAX;
	if (proto_view_init(&v, &f->hdr, f->msg) == PROTO_OK) {
		op = v.op;
		*seq = v.seq;
	}
	proto_view_free(&v);
	return op;
}

static void *srv_payload_dest(void *ctx, const transport_frame *f)
{
	uint64_t seq;
	if (msg_op(f, &seq) == OP_DISCARD)
		return NULL;
	uint8_t *d = malloc(f->hdr.payload_len + GUARD);
	memset(d, GUARD_BYTE, f->hdr.payload_len + GUARD);
	conn_rec *r = ctx;
	pthread_mutex_lock(&r->s->mu);
	r->frames[r->nframes].dest = d;
	pthread_mutex_unlock(&r->s->mu);
	return d;
}

static void srv_frame(void *ctx, transport_frame *f)
{
	conn_rec *r = ctx;
	int close_me = 0;
	pthread_mutex_lock(&r->s->mu);
	if (r->nframes < MAXFRAMES) {
		frame_rec *fr = &r->frames[r->nframes++];
		fr->hdr = f->hdr;
		fr->msg = f->msg;
		fr->payload = f->payload;
		fr->op = msg_op(f, &fr->seq);
		close_me = fr->op == OP_CLOSE_ME;
		if (close_me)
			r->released = 1;
	} else {
		transport_frame_free(f);
	}
	pthread_cond_broadcast(&r->s->cv);
	pthread_mutex_unlock(&r->s->mu);
	if (close_me)
		transport_close(r->c); /* from the loop thread, inside a callback */
}

static void srv_close(void *ctx, int err)
{
	conn_rec *r = ctx;
	int do_close;
	pthread_mutex_lock(&r->s->mu);
	r->nclose++;
	r->close_err = err;
	do_close = !r->released && !r->keep;
	if (do_close)
		r->released = 1;
	pthread_cond_broadcast(&r->s->cv);
	pthread_mutex_unlock(&r->s->mu);
	if (do_close)
		transport_close(r->c);
}

static void *loop_thread(void *arg)
{
	server *s = arg;
	uv_run(&s->loop, UV_RUN_DEFAULT);
	return NULL;
}

static void server_start(server *s)
{
	static const transport_server_cb cb = {
		.on_accept = srv_accept,
		.payload_dest = srv_payload_dest,
		.on_frame = srv_frame,
		.on_close = srv_close,
	};
	transport_addr a;
	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	uv_loop_init(&s->loop);
	if (!CHECK_EQ(transport_parse_addr("127.0.0.1:0", &a), TRANSPORT_OK) ||
	    !CHECK_EQ(transport_listen(&s->loop, &a, &cb, s, &s->l), TRANSPORT_OK))
		exit(check_summary("test_tcp"));
	s->port = transport_listener_port(s->l);
	CHECK(s->port > 0);
	pthread_create(&s->thread, NULL, loop_thread, s);
}

/* ---- helpers (test thread) ---- */

/* Waits (with s->mu held) until cond holds; 10 s at most. */
#define WAIT_UNTIL(s, cond)                                                      \
	({                                                                       \
		struct timespec ts_;                                             \
		clock_gettime(CLOCK_REALTIME, &ts_);                             \
		ts_.tv_sec += 10;                                                \
		int r_ = 0;                                                      \
		while (!(cond) && r_ == 0)                                       \
			r_ = pthread_cond_timedwait(&(s)->cv, &(s)->mu, &ts_);   \
		CHECK(cond);                                                     \
	})

static conn_rec *wait_rec(server *s, int idx)
{
	conn_rec *r = NULL;
	pthread_mutex_lock(&s->mu);
	if (WAIT_UNTIL(s, s->nrecs > idx))
		r = s->recs[idx];
	pthread_mutex_unlock(&s->mu);
	return r;
}

static int wait_frames(conn_rec *r, int n)
{
	pthread_mutex_lock(&r->s->mu);
	int ok = WAIT_UNTIL(r->s, r->nframes >= n);
	pthread_mutex_unlock(&r->s->mu);
	return ok;
}

static int wait_closed(conn_rec *r, int err)
{
	pthread_mutex_lock(&r->s->mu);
	int ok = WAIT_UNTIL(r->s, r->nclose > 0);
	ok = ok && CHECK_EQ(r->nclose, 1) && CHECK_EQ(r->close_err, err);
	pthread_mutex_unlock(&r->s->mu);
	return ok;
}

static int raw_connect(int port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		CHECK(!"raw connect");
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static void raw_send(int fd, const void *p, size_t n)
{
	const uint8_t *b = p;
	while (n > 0) {
		ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (!CHECK(w > 0))
			return;
		b += w;
		n -= (size_t)w;
	}
}

/* Reads until EOF (or error); returns the bytes read. */
static size_t raw_read_all(int fd, uint8_t *buf, size_t cap)
{
	size_t got = 0;
	for (;;) {
		ssize_t r = recv(fd, buf + got, cap - got, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0 || got + (size_t)r == cap)
			return got + (r > 0 ? (size_t)r : 0);
		got += (size_t)r;
	}
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
}

static uint8_t pattern(uint64_t seed, size_t i) { return (uint8_t)((i * 131 + seed * 17 + (i >> 9)) ^ (i >> 17)); }

/* Appends a whole frame (header + msgpack [payload_len] + payload) to
 * buf; returns the new length. */
static size_t put_frame(uint8_t *buf, size_t off, uint32_t op, uint64_t seq, size_t payload_len)
{
	proto_msg m;
	proto_msg_begin(&m, op, seq, 1);
	proto_msg_u64(&m, payload_len);
	proto_msg_finish(&m, 0, payload_len);
	memcpy(buf + off, m.data, m.len);
	off += m.len;
	proto_msg_free(&m);
	for (size_t i = 0; i < payload_len; i++)
		buf[off + i] = pattern(seq, i);
	return off + payload_len;
}

/* The frame arrived whole: op, seq, payload bytes, and nothing beyond them. */
static void check_frame(const frame_rec *fr, uint32_t op, uint64_t seq, size_t payload_len)
{
	CHECK_EQ(fr->op, op);
	CHECK_EQ(fr->seq, seq);
	CHECK_EQ(fr->hdr.payload_len, payload_len);
	if (payload_len == 0 || op == OP_DISCARD) {
		CHECK(fr->payload == NULL);
		return;
	}
	if (!CHECK(fr->payload != NULL && fr->payload == fr->dest))
		return;
	size_t bad = 0;
	for (size_t i = 0; i < payload_len; i++)
		bad += fr->payload[i] != pattern(seq, i);
	CHECK_EQ(bad, 0);
	for (size_t i = 0; i < GUARD; i++)
		bad += fr->payload[payload_len + i] != GUARD_BYTE;
	CHECK_EQ(bad, 0);
}

/* ---- tests ---- */

static void test_tiny_pieces(void)
{
	const size_t big = 3u << 20;
	uint8_t *stream = malloc(big + 200000);
	size_t off[6], n = 0;

	off[0] = n;
	n = put_frame(stream, n, OP_DATA, 1, 0);
	off[1] = n;
	n = put_frame(stream, n, OP_DATA, 2, 1);
	off[2] = n;
	n = put_frame(stream, n, OP_DATA, 3, big);
	off[3] = n;
	n = put_frame(stream, n, OP_DATA, 4, 5);
	off[4] = n;
	n = put_frame(stream, n, OP_DISCARD, 5, 100000); /* payload_dest says NULL */
	off[5] = n;
	n = put_frame(stream, n, OP_DATA, 6, 3);

	int idx = S.nrecs;
	int fd = raw_connect(S.port);
	conn_rec *r = wait_rec(&S, idx);
	if (fd < 0 || !r)
		goto out;

	/* frame 1, one byte per write, each given time to arrive alone */
	for (size_t i = off[0]; i < off[1]; i++) {
		raw_send(fd, stream + i, 1);
		sleep_ms(1);
	}
	CHECK(wait_frames(r, 1));
	/* frame 2: header split in two, msgpack in two pieces, 1-byte payload alone */
	size_t h = off[1];
	raw_send(fd, stream + h, 5);
	sleep_ms(5);
	raw_send(fd, stream + h + 5, PROTO_HDR_SIZE - 5);
	sleep_ms(5);
	raw_send(fd, stream + h + PROTO_HDR_SIZE, 1);
	sleep_ms(5);
	raw_send(fd, stream + h + PROTO_HDR_SIZE + 1, off[2] - 1 - (h + PROTO_HDR_SIZE + 1));
	sleep_ms(5);
	raw_send(fd, stream + off[2] - 1, 1);
	CHECK(wait_frames(r, 2));
	/* frame 3: header + part of the msgpack, rest of the msgpack + 1 payload byte,
	 * then payload in growing pieces; the last 10 payload bytes go in one write
	 * with the whole of frame 4 and the start of frame 5. */
	h = off[2];
	raw_send(fd, stream + h, PROTO_HDR_SIZE + 2);
	sleep_ms(5);
	size_t p = h + PROTO_HDR_SIZE + 2;
	size_t pay0 = off[3] - big;
	raw_send(fd, stream + p, pay0 + 1 - p);
	p = pay0 + 1;
	sleep_ms(5);
	static const size_t pieces[] = {1, 7, 4096, 65536, 1 << 20};
	for (size_t i = 0; i < sizeof(pieces) / sizeof(pieces[0]); i++) {
		raw_send(fd, stream + p, pieces[i]);
		p += pieces[i];
		sleep_ms(2);
	}
	raw_send(fd, stream + p, off[3] - 10 - p);
	p = off[3] - 10;
	sleep_ms(20); /* the server is now reading straight into the destination */
	raw_send(fd, stream + p, off[4] + 30 - p);
	p = off[4] + 30;
	sleep_ms(5);
	raw_send(fd, stream + p, n - p);
	if (wait_frames(r, 6)) {
		pthread_mutex_lock(&S.mu);
		check_frame(&r->frames[0], OP_DATA, 1, 0);
		check_frame(&r->frames[1], OP_DATA, 2, 1);
		check_frame(&r->frames[2], OP_DATA, 3, big);
		check_frame(&r->frames[3], OP_DATA, 4, 5);
		check_frame(&r->frames[4], OP_DISCARD, 5, 100000);
		check_frame(&r->frames[5], OP_DATA, 6, 3);
		pthread_mutex_unlock(&S.mu);
	}

	/* the same stream in one write, and in 3-byte writes without pauses */
	raw_send(fd, stream, n);
	CHECK(wait_frames(r, 12));
	for (size_t i = 0; i < off[2]; i += 3)
		raw_send(fd, stream + i, i + 3 <= off[2] ? 3 : off[2] - i);
	if (wait_frames(r, 14)) {
		pthread_mutex_lock(&S.mu);
		check_frame(&r->frames[8], OP_DATA, 3, big);
		check_frame(&r->frames[11], OP_DATA, 6, 3);
		check_frame(&r->frames[12], OP_DATA, 1, 0);
		check_frame(&r->frames[13], OP_DATA, 2, 1);
		pthread_mutex_unlock(&S.mu);
	}
	close(fd);
	wait_closed(r, TRANSPORT_ECLOSED); /* EOF between frames is a clean close */
out:
	free(stream);
}

/* ---- server sendv from several threads ---- */

enum { NSENDERS = 4, PER_SENDER = 150 };

typedef struct sender_arg {
	transport_conn *c;
	int t;
	int err;
} sender_arg;

static size_t sender_len(int t, int i) { return (size_t)((i * 7919 + t * 104729) % 200000) * (i % 5 != 0); }

static void *sender(void *p)
{
	sender_arg *a = p;
	uint8_t *buf = malloc(200000);
	for (int i = 0; i < PER_SENDER && !a->err; i++) {
		uint64_t seq = ((uint64_t)a->t << 32) | (uint64_t)i;
		size_t len = sender_len(a->t, i);
		proto_msg m;
		proto_msg_begin(&m, OP_DATA, seq, 2);
		proto_msg_u64(&m, (uint64_t)a->t);
		proto_msg_u64(&m, (uint64_t)i);
		proto_msg_finish(&m, PROTO_F_EVENT, len);
		for (size_t k = 0; k < len; k++)
			buf[k] = pattern(seq, k);
		struct iovec iov[2] = {{m.data, m.len}, {buf, len}};
		a->err = transport_sendv(a->c, iov, len ? 2 : 1);
		proto_msg_free(&m);
	}
	free(buf);
	return NULL;
}

static void *client_dest(void *ctx, const transport_frame *f)
{
	void **slot = ctx;
	*slot = malloc(f->hdr.payload_len);
	return *slot;
}

static void test_concurrent_server_send(void)
{
	transport_addr a;
	transport_conn *cl = NULL;
	char addr[64];

	snprintf(addr, sizeof(addr), "tcp://127.0.0.1:%d", S.port);
	CHECK_EQ(transport_parse_addr(addr, &a), TRANSPORT_OK);
	int idx = S.nrecs;
	if (!CHECK_EQ(transport_connect(&a, &cl), TRANSPORT_OK))
		return;
	CHECK(strncmp(cl->peer, "127.0.0.1:", 10) == 0);
	CHECK_EQ(transport_caps(cl), TRANSPORT_CAP_ADOPT); /* plain tcp: no registration, no regions */
	conn_rec *r = wait_rec(&S, idx);
	if (!r)
		goto out;
	CHECK_EQ(transport_caps(r->c), TRANSPORT_CAP_ADOPT);

	pthread_t th[NSENDERS];
	sender_arg args[NSENDERS];
	for (int t = 0; t < NSENDERS; t++) {
		args[t] = (sender_arg){r->c, t, 0};
		pthread_create(&th[t], NULL, sender, &args[t]);
	}
	sleep_ms(200); /* let the socket buffers fill: senders wait in poll() */

	int next[NSENDERS] = {0}, bad = 0;
	for (int k = 0; k < NSENDERS * PER_SENDER && !bad; k++) {
		transport_frame f;
		void *dest = NULL;
		int err = transport_recv_frame(cl, &f, client_dest, &dest);
		if (!CHECK_EQ(err, TRANSPORT_OK)) {
			bad = 1;
			break;
		}
		proto_view v;
		uint64_t t = 99, i = 0;
		if (CHECK_EQ(proto_view_init(&v, &f.hdr, f.msg), PROTO_OK)) {
			proto_arg_u64(&v, 0, &t);
			proto_arg_u64(&v, 1, &i);
			proto_view_free(&v);
		}
		if (!CHECK(t < NSENDERS) || !CHECK_EQ(i, next[t]) || !CHECK_EQ(f.hdr.flags, PROTO_F_EVENT) ||
		    !CHECK_EQ(f.hdr.payload_len, sender_len((int)t, (int)i))) {
			bad = 1;
		} else {
			uint64_t seq = (t << 32) | i;
			size_t wrong = 0;
			for (size_t b = 0; b < f.hdr.payload_len; b++)
				wrong += ((uint8_t *)f.payload)[b] != pattern(seq, b);
			bad = !CHECK_EQ(wrong, 0);
			CHECK(f.hdr.payload_len == 0 ? f.payload == NULL : f.payload == dest);
			next[t]++;
		}
		transport_frame_free(&f);
		free(dest);
	}
	for (int t = 0; t < NSENDERS; t++) {
		pthread_join(th[t], NULL);
		CHECK_EQ(args[t].err, TRANSPORT_OK);
		CHECK_EQ(next[t], PER_SENDER);
	}

	/* The client drains a payload when payload_dest is NULL. */
	{
		uint8_t big[70000];
		for (size_t k = 0; k < sizeof(big); k++)
			big[k] = (uint8_t)k;
		proto_msg m;
		proto_msg_begin(&m, OP_DATA, 1, 0);
		proto_msg_finish(&m, 0, sizeof(big));
		struct iovec iov[2] = {{m.data, m.len}, {big, sizeof(big)}};
		CHECK_EQ(transport_sendv(r->c, iov, 2), TRANSPORT_OK);
		CHECK_EQ(transport_sendv(r->c, iov, 1), TRANSPORT_OK); /* header says 70000 more... */
		iov[0] = (struct iovec){big, sizeof(big)};
		CHECK_EQ(transport_sendv(r->c, iov, 1), TRANSPORT_OK); /* ...here they are */
		proto_msg_free(&m);
		transport_frame f;
		CHECK_EQ(transport_recv_frame(cl, &f, NULL, NULL), TRANSPORT_OK);
		CHECK(f.payload == NULL && f.hdr.payload_len == sizeof(big));
		transport_frame_free(&f);
		void *dest = NULL;
		CHECK_EQ(transport_recv_frame(cl, &f, client_dest, &dest), TRANSPORT_OK);
		CHECK(f.payload == dest && CHECK_MEM(dest, big, sizeof(big)));
		transport_frame_free(&f);
		free(dest);
	}

	/* Client frames reach the server; then the server closes from a callback
	 * and the client's recv reports ECLOSED. */
	{
		proto_msg m;
		pthread_mutex_lock(&S.mu);
		int base = r->nframes;
		pthread_mutex_unlock(&S.mu);
		proto_msg_begin(&m, OP_DATA, 77, 1);
		proto_msg_str(&m, "hi");
		proto_msg_finish(&m, 0, 0);
		struct iovec iov = {m.data, m.len};
		CHECK_EQ(transport_sendv(cl, &iov, 1), TRANSPORT_OK);
		proto_msg_free(&m);
		proto_msg_begin(&m, OP_CLOSE_ME, 78, 0);
		proto_msg_finish(&m, 0, 0);
		iov = (struct iovec){m.data, m.len};
		CHECK_EQ(transport_sendv(cl, &iov, 1), TRANSPORT_OK);
		proto_msg_free(&m);
		if (wait_frames(r, base + 2)) {
			pthread_mutex_lock(&S.mu);
			check_frame(&r->frames[base], OP_DATA, 77, 0);
			pthread_mutex_unlock(&S.mu);
		}
		transport_frame f;
		CHECK_EQ(transport_recv_frame(cl, &f, NULL, NULL), TRANSPORT_ECLOSED);
		CHECK(f.msg == NULL);
		CHECK_EQ(transport_recv_frame(cl, &f, NULL, NULL), TRANSPORT_ECLOSED); /* latched */
		wait_closed(r, TRANSPORT_ECLOSED);
	}
out:
	transport_close(cl);
}

/* ---- malformed input ---- */

static void raw_header(uint8_t *b, uint16_t version, uint32_t hdr_len, uint64_t payload_len)
{
	proto_hdr h = {version, 0, hdr_len, payload_len};
	proto_encode_hdr(&h, b);
}

/* Sends bytes on a fresh raw connection; the server must close it with err. */
static void expect_rejected(const char *what, const void *bytes, size_t n, int err)
{
	int idx = S.nrecs;
	int fd = raw_connect(S.port);
	conn_rec *r = wait_rec(&S, idx);
	if (fd < 0 || !r)
		return;
	raw_send(fd, bytes, n);
	if (err == TRANSPORT_EIO)
		shutdown(fd, SHUT_WR); /* EOF in the middle of the frame */
	if (!wait_closed(r, err))
		fprintf(stderr, "    case: %s\n", what);
	uint8_t buf[256];
	CHECK_EQ(raw_read_all(fd, buf, sizeof(buf)), 0); /* the server hung up, said nothing */
	close(fd);
}

static void test_malformed(void)
{
	/* A well-behaved client stays connected through all of this. */
	transport_addr a;
	char addr[64];
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", S.port);
	transport_parse_addr(addr, &a);
	int gidx = S.nrecs;
	if (!CHECK_EQ(transport_connect(&a, &good), TRANSPORT_OK))
		return;
	conn_rec *gr = wait_rec(&S, gidx);
	if (!gr)
		return;

	uint8_t b[128];
	const size_t H = PROTO_HDR_SIZE;
	expect_rejected("http", "GET / HTTP/1.1\r\nHost: gpu\r\n\r\n", 29, PROTO_EMAGIC);
	memset(b, 0, sizeof(b));
	expect_rejected("zeros", b, H, PROTO_EMAGIC);
	raw_header(b, PROTO_VERSION, PROTO_MAX_HDR + 1, 0);
	expect_rejected("hdr_len", b, H, PROTO_ETOOBIG);
	raw_header(b, PROTO_VERSION, UINT32_MAX, 0);
	expect_rejected("hdr_len max", b, H, PROTO_ETOOBIG);
	raw_header(b, PROTO_VERSION, 8, PROTO_MAX_PAYLOAD + 1);
	expect_rejected("payload_len", b, H, PROTO_ETOOBIG);
	raw_header(b, PROTO_VERSION, 8, UINT64_MAX);
	expect_rejected("payload_len max", b, H, PROTO_ETOOBIG);
	raw_header(b, PROTO_VERSION, 8, 0);
	b[32] = PROTO_MAX_DEVICES; /* a request's status names a device below it */
	expect_rejected("status on a request", b, H, PROTO_EDECODE);
	raw_header(b, PROTO_VERSION, 8, 0);
	b[39] = 0x80;
	expect_rejected("latched on a request", b, H, PROTO_EDECODE);
	/* a good frame, then garbage: the good one is delivered first */
	size_t n = put_frame(b, 0, OP_DATA, 1, 3);
	memset(b + n, 0xee, H);
	expect_rejected("good then garbage", b, n + H, PROTO_EMAGIC);
	CHECK_EQ(S.recs[S.nrecs - 1]->nframes, 1);
	/* cut off in the middle of a frame */
	n = put_frame(b, 0, OP_DATA, 1, 3);
	expect_rejected("truncated", b, n - 1, TRANSPORT_EIO);

	/* Another version: the client gets a reply with status PROTO_EVERSION and our version. */
	{
		int idx = S.nrecs;
		int fd = raw_connect(S.port);
		conn_rec *r = wait_rec(&S, idx);
		if (fd >= 0 && r) {
			raw_header(b, PROTO_VERSION + 1, 2, 0);
			b[H] = 0x92;
			b[H + 1] = 0x01;
			raw_send(fd, b, H + 2);
			uint8_t rb[256];
			size_t got = raw_read_all(fd, rb, sizeof(rb)); /* reply, then EOF */
			proto_hdr h;
			proto_view v;
			int32_t status = 0, latched = -1;
			uint64_t version = 0;
			if (CHECK(got >= PROTO_HDR_SIZE) && CHECK_EQ(proto_decode_hdr(rb, &h), PROTO_OK) &&
			    CHECK_EQ(got, PROTO_HDR_SIZE + h.hdr_len) &&
			    CHECK_EQ(proto_view_init(&v, &h, rb + PROTO_HDR_SIZE), PROTO_OK)) {
				CHECK_EQ(h.version, PROTO_VERSION);
				CHECK_EQ(h.flags, PROTO_F_REPLY);
				CHECK_EQ(h.payload_len, 0);
				CHECK_EQ(v.op, PROTO_OP_REPLY);
				CHECK_EQ(v.seq, 0);
				CHECK_EQ(v.n, 1);
				CHECK(proto_reply_status(&v, &status, &latched) == PROTO_OK && status == PROTO_EVERSION &&
				      latched == 0);
				CHECK(proto_arg_u64(&v, 0, &version) == PROTO_OK && version == PROTO_VERSION);
				proto_view_free(&v);
			}
			wait_closed(r, PROTO_EVERSION);
			close(fd);
		}
	}
	/* The good connection still works; both frames have no msgpack part
	 * (hdr_len 0), the second not even a payload: the header alone is a frame. */
	proto_msg m;
	proto_msg_begin(&m, OP_DATA, 5, 0);
	proto_msg_finish(&m, 0, 4);
	uint8_t pay[4] = {pattern(5, 0), pattern(5, 1), pattern(5, 2), pattern(5, 3)};
	struct iovec iov[2] = {{m.data, m.len}, {pay, 4}};
	CHECK_EQ(transport_sendv(good, iov, 2), TRANSPORT_OK);
	proto_msg_free(&m);
	proto_msg_begin(&m, OP_DATA, 6, 0);
	proto_msg_finish(&m, 0, 0);
	CHECK_EQ(m.len, PROTO_HDR_SIZE);
	CHECK_EQ(transport_sendv(good, iov, 1), TRANSPORT_OK);
	proto_msg_free(&m);
	if (wait_frames(gr, 2)) {
		pthread_mutex_lock(&S.mu);
		check_frame(&gr->frames[0], OP_DATA, 5, 4);
		check_frame(&gr->frames[1], OP_DATA, 6, 0);
		CHECK(gr->frames[1].hdr.hdr_len == 0);
		CHECK_EQ(gr->nclose, 0);
		pthread_mutex_unlock(&S.mu);
	}
	/* ...until the listener closes (test_listener_close). Keep it open. */
}

/* A client reading a header of another version, or of hostile length, gets the
 * PROTO_E* error, latched. The "server" is a raw listening socket. */
static void test_client_protocol_errors(void)
{
	int ls = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	bind(ls, (struct sockaddr *)&sa, sizeof(sa));
	listen(ls, 4);
	getsockname(ls, (struct sockaddr *)&sa, &sl);

	static const struct {
		int version;
		uint32_t hdr_len;
		int want;
	} cases[] = {{PROTO_VERSION + 1, 4, PROTO_EVERSION}, {PROTO_VERSION, PROTO_MAX_HDR + 1, PROTO_ETOOBIG}};
	for (size_t k = 0; k < 2; k++) {
		transport_addr a;
		transport_conn *c = NULL;
		char addr[64];
		snprintf(addr, sizeof(addr), "127.0.0.1:%d", ntohs(sa.sin_port));
		transport_parse_addr(addr, &a);
		if (!CHECK_EQ(transport_connect(&a, &c), TRANSPORT_OK))
			break;
		int fd = accept(ls, NULL, NULL);
		uint8_t b[PROTO_HDR_SIZE];
		raw_header(b, (uint16_t)cases[k].version, cases[k].hdr_len, 0);
		raw_send(fd, b, sizeof(b));
		transport_frame f;
		CHECK_EQ(transport_recv_frame(c, &f, NULL, NULL), cases[k].want);
		CHECK_EQ(transport_recv_frame(c, &f, NULL, NULL), cases[k].want);
		close(fd);
		transport_close(c);
	}
	/* EOF in the middle of a frame: EIO, not ECLOSED */
	{
		transport_addr a;
		transport_conn *c = NULL;
		char addr[64];
		snprintf(addr, sizeof(addr), "127.0.0.1:%d", ntohs(sa.sin_port));
		transport_parse_addr(addr, &a);
		if (CHECK_EQ(transport_connect(&a, &c), TRANSPORT_OK)) {
			int fd = accept(ls, NULL, NULL);
			uint8_t b[128];
			size_t n = put_frame(b, 0, OP_DATA, 9, 10);
			raw_send(fd, b, n - 1);
			close(fd);
			transport_frame f;
			CHECK_EQ(transport_recv_frame(c, &f, NULL, NULL), TRANSPORT_EIO);
			CHECK(f.msg == NULL);
			transport_close(c);
		}
	}
	close(ls);
}

/* ---- shutdown and close from other threads ---- */

typedef struct blocked_arg {
	transport_conn *c;
	int err;
	size_t frames;
} blocked_arg;

static void *blocked_sender(void *p)
{
	blocked_arg *a = p;
	size_t len = 8u << 20;
	uint8_t *buf = calloc(1, len);
	proto_msg m;
	proto_msg_begin(&m, OP_DATA, 1, 0);
	proto_msg_finish(&m, 0, len);
	struct iovec iov[2] = {{m.data, m.len}, {buf, len}};
	/* The peer never reads: the first or second frame blocks in poll(). */
	while ((a->err = transport_sendv(a->c, iov, 2)) == TRANSPORT_OK)
		a->frames++;
	proto_msg_free(&m);
	free(buf);
	return NULL;
}

static void *blocked_receiver(void *p)
{
	blocked_arg *a = p;
	transport_frame f;
	a->err = transport_recv_frame(a->c, &f, NULL, NULL);
	return NULL;
}

static void test_shutdown(void)
{
	transport_addr a;
	char addr[64];
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", S.port);
	transport_parse_addr(addr, &a);

	/* 1. Server sender blocked on a client that does not read; another thread
	 * shuts the server connection down: the sender returns ECLOSED, on_close
	 * follows once, later sends fail, the client sees the close. */
	{
		transport_conn *cl = NULL;
		int idx = S.nrecs;
		if (!CHECK_EQ(transport_connect(&a, &cl), TRANSPORT_OK))
			return;
		conn_rec *r = wait_rec(&S, idx);
		if (r) {
			pthread_mutex_lock(&S.mu);
			r->keep = 1; /* the test closes c itself, after on_close */
			pthread_mutex_unlock(&S.mu);
			blocked_arg ba = {r->c, 0, 0};
			pthread_t th;
			pthread_create(&th, NULL, blocked_sender, &ba);
			sleep_ms(300);
			transport_shutdown(r->c);
			pthread_join(th, NULL);
			CHECK_EQ(ba.err, TRANSPORT_ECLOSED);
			wait_closed(r, TRANSPORT_ECLOSED);
			uint8_t x[PROTO_HDR_SIZE] = {0};
			struct iovec iov = {x, sizeof(x)};
			CHECK_EQ(transport_sendv(r->c, &iov, 1), TRANSPORT_ECLOSED);
			transport_shutdown(r->c); /* idempotent */
			transport_close(r->c);
			r->released = 1;
			/* The client gets the frames that were queued, then end of stream. */
			transport_frame f;
			int err;
			while ((err = transport_recv_frame(cl, &f, NULL, NULL)) == TRANSPORT_OK)
				transport_frame_free(&f);
			CHECK(err == TRANSPORT_EIO || err == TRANSPORT_ECLOSED); /* cut mid-frame: EIO */
		}
		transport_close(cl);
	}

	/* 2. transport_close from a non-loop thread before on_close: on_close still
	 * comes, exactly once. */
	{
		transport_conn *cl = NULL;
		int idx = S.nrecs;
		if (!CHECK_EQ(transport_connect(&a, &cl), TRANSPORT_OK))
			return;
		conn_rec *r = wait_rec(&S, idx);
		if (r) {
			pthread_mutex_lock(&S.mu);
			r->released = 1;
			pthread_mutex_unlock(&S.mu);
			transport_close(r->c);
			wait_closed(r, TRANSPORT_ECLOSED);
			transport_frame f;
			CHECK_EQ(transport_recv_frame(cl, &f, NULL, NULL), TRANSPORT_ECLOSED);
		}
		transport_close(cl);
	}

	/* 3. Client side: a thread blocked in recv is woken by shutdown from another
	 * thread; sends fail with ECLOSED afterwards. */
	{
		transport_conn *cl = NULL;
		int idx = S.nrecs;
		if (!CHECK_EQ(transport_connect(&a, &cl), TRANSPORT_OK))
			return;
		conn_rec *r = wait_rec(&S, idx);
		blocked_arg ba = {cl, 0, 0};
		pthread_t th;
		pthread_create(&th, NULL, blocked_receiver, &ba);
		sleep_ms(100);
		transport_shutdown(cl);
		pthread_join(th, NULL);
		CHECK_EQ(ba.err, TRANSPORT_ECLOSED);
		uint8_t x[8] = {0};
		struct iovec iov = {x, sizeof(x)};
		CHECK_EQ(transport_sendv(cl, &iov, 1), TRANSPORT_ECLOSED);
		transport_close(cl);
		if (r)
			wait_closed(r, TRANSPORT_ECLOSED);
	}

	/* 4. A client sender blocked on a server that does not read (payload_dest
	 * can't stall the loop, so use a raw listener) is woken by shutdown. */
	{
		int ls = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		socklen_t sl = sizeof(sa);
		bind(ls, (struct sockaddr *)&sa, sizeof(sa));
		listen(ls, 1);
		getsockname(ls, (struct sockaddr *)&sa, &sl);
		transport_addr ra;
		transport_conn *cl = NULL;
		char raddr[64];
		snprintf(raddr, sizeof(raddr), "127.0.0.1:%d", ntohs(sa.sin_port));
		transport_parse_addr(raddr, &ra);
		if (CHECK_EQ(transport_connect(&ra, &cl), TRANSPORT_OK)) {
			int fd = accept(ls, NULL, NULL);
			blocked_arg ba = {cl, 0, 0};
			pthread_t th;
			pthread_create(&th, NULL, blocked_sender, &ba);
			sleep_ms(300);
			transport_shutdown(cl);
			pthread_join(th, NULL);
			CHECK_EQ(ba.err, TRANSPORT_ECLOSED);
			transport_close(cl);
			close(fd);
		}
		close(ls);
	}
}

/* on_accept refusing a connection: closed at once, no on_close. Its own loop,
 * run from this thread, which also closes the listener from the loop thread. */
static void *refuse_accept(void *ctx, transport_conn *c)
{
	int *n = ctx;
	(*n)++;
	return NULL;
}
static void refuse_close(void *ctx, int err) { CHECK(!"on_close for a refused connection"); }

static void test_refuse(void)
{
	static const transport_server_cb cb = {.on_accept = refuse_accept, .on_close = refuse_close};
	uv_loop_t loop;
	transport_listener *l;
	transport_addr a;
	int accepted = 0;

	uv_loop_init(&loop);
	transport_parse_addr("127.0.0.1:0", &a);
	if (!CHECK_EQ(transport_listen(&loop, &a, &cb, &accepted, &l), TRANSPORT_OK))
		return;
	int fd = raw_connect(transport_listener_port(l));
	while (accepted == 0)
		uv_run(&loop, UV_RUN_ONCE);
	uint8_t buf[16];
	CHECK_EQ(raw_read_all(fd, buf, sizeof(buf)), 0); /* closed by the server */
	close(fd);
	transport_listener_close(l); /* from the loop thread itself */
	CHECK_EQ(uv_run(&loop, UV_RUN_DEFAULT), 0);
	CHECK_EQ(uv_loop_close(&loop), 0); /* every handle closed */

	/* Listening on a port in use fails cleanly. */
	uv_loop_init(&loop);
	char addr[64];
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", S.port);
	transport_parse_addr(addr, &a);
	l = (transport_listener *)1;
	CHECK_EQ(transport_listen(&loop, &a, &cb, &accepted, &l), TRANSPORT_EADDR);
	CHECK(l == NULL);
	CHECK_EQ(uv_loop_close(&loop), 0);
}

/* Closing the listener ends the connections still open (on_close each), the
 * loop then runs out of handles, and everything is freed. */
static void test_listener_close(void)
{
	transport_addr a;
	transport_conn *cl = NULL;
	char addr[64];
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", S.port);
	transport_parse_addr(addr, &a);
	int idx = S.nrecs;
	CHECK_EQ(transport_connect(&a, &cl), TRANSPORT_OK);
	wait_rec(&S, idx);

	transport_listener_close(S.l); /* from a thread other than the loop's */
	pthread_join(S.thread, NULL);
	CHECK_EQ(uv_loop_close(&S.loop), 0);

	int open = 0;
	for (int i = 0; i < S.nrecs; i++) {
		conn_rec *r = S.recs[i];
		open += r->nclose != 1;
		CHECK_EQ(r->nclose, 1);
		CHECK(r->released);
		for (int k = 0; k < r->nframes; k++) {
			free(r->frames[k].msg);
			free(r->frames[k].dest);
		}
		/* a frame cut short after payload_dest: the destination is ours */
		if (r->nframes < MAXFRAMES)
			free(r->frames[r->nframes].dest);
		free(r);
	}
	CHECK_EQ(open, 0);
	transport_conn *clients[] = {cl, good};
	for (int i = 0; i < 2; i++) {
		transport_frame f;
		if (!clients[i])
			continue;
		CHECK_EQ(transport_recv_frame(clients[i], &f, NULL, NULL), TRANSPORT_ECLOSED);
		transport_close(clients[i]);
	}
	/* nothing listens any more */
	transport_conn *c2 = NULL;
	CHECK_EQ(transport_connect(&a, &c2), TRANSPORT_ECONNECT);
}

int main(void)
{
	server_start(&S);
	test_tiny_pieces();
	test_concurrent_server_send();
	test_malformed();
	test_client_protocol_errors();
	test_shutdown();
	test_refuse();
	test_listener_close();
	return check_summary("test_tcp");
}
