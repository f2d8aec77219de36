/*
 * test_client: striped copies (backend/src/stripe.h): secrets, exact bytes
 * across two stripes at odd split points both ways, a stripe killed mid-copy.
 */
#include "test_client.h"

#define SECRET 16

/* stripe_open: 0 and the port, count and secrets, or the status. */
static int stripe_open(cli *k, unsigned want, int *port, int *n, uint8_t *sec)
{
	rep r;
	const void *b = NULL;
	size_t bl = 0;
	int st = call(k, &r, NULL, 0, NULL, 0, PROTO_OP_STRIPE_OPEN, "u", U(want));
	if (st == 0) {
		*port = (int)u64_result(&r, 0);
		*n = (int)u64_result(&r, 1);
		if (proto_arg_bin(&r.v, PROTO_REPLY_FIRST + 2, &b, &bl) == 0 && bl == (size_t)*n * SECRET)
			memcpy(sec, b, bl);
		else
			st = -1;
	}
	rep_free(&r);
	return st;
}

/* A stripe connection presenting secret: the answer's status (-1: none). */
static int stripe_hello(cli *k, int port, const uint8_t *secret)
{
	if (cli_open(k, port))
		return -1;
	return call(k, NULL, NULL, 0, NULL, 0, PROTO_OP_STRIPE_HELLO, "b", secret, (size_t)SECRET);
}

/* Bytes [off, off+n) of transfer x (total bytes) in pieces of piece bytes. */
static int stripe_put(cli *k, uint64_t x, uint64_t total, const uint8_t *base, uint64_t off, uint64_t n,
		      uint64_t piece)
{
	for (uint64_t o = off; o < off + n; o += piece) {
		uint64_t m = off + n - o < piece ? off + n - o : piece;
		int r = post(k, base + o, m, PROTO_OP_STRIPE_PUT, "uuu", x, total, o);
		if (r)
			return r;
	}
	return 0;
}

static int stripe_get(cli *k, uint64_t x, uint8_t *base, uint64_t off, uint64_t n)
{
	rep r;
	int st = call(k, &r, base + off, n, NULL, 0, PROTO_OP_STRIPE_GET, "uuu", x, off, n);
	if (st == 0 && r.plen != n)
		st = -999;
	rep_free(&r);
	return st;
}

/* Secrets (wrong, spent), exact bytes across two stripes at odd sizes and
 * piece boundaries both ways, stripe ops refused on the main connection,
 * a stripe killed in the middle of a payload: the copy fails (latched), the
 * other stripe is closed, the session goes on over its connection, and its
 * memory comes back. */
void t_stripes(srv *s)
{
	cli k, a, b, w;
	uint8_t sec[16 * SECRET], bad[SECRET];
	int port = 0, n = 0;
	const size_t len = (3u << 20) + 5;
	uint8_t *src = malloc(len), *dst = malloc(len);
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	if (!CHECK(open_session(&k, s->port) == 0))
		goto out;
	uint64_t p = mem_alloc(&k, len);
	CHECK(p != 0);
	if (!CHECK_EQ(stripe_open(&k, 2, &port, &n, sec), 0) || !CHECK_EQ(n, 2) || !CHECK(port > 0))
		goto done;
	/* a wrong secret: refused, closed, and the right ones still good */
	memcpy(bad, sec, SECRET);
	bad[7] ^= 1;
	CHECK_EQ(stripe_hello(&w, port, bad), CUDA_ERROR_NOT_PERMITTED);
	CHECK(closed_by_server(&w));
	cli_close(&w);
	CHECK_EQ(stripe_hello(&a, port, sec), 0);
	CHECK_EQ(stripe_hello(&b, port, sec + SECRET), 0);
	/* a spent one: refused (or, every secret spent, closed unread) */
	int st = stripe_hello(&w, port, sec);
	CHECK(st == CUDA_ERROR_NOT_PERMITTED || st < 0);
	CHECK(st < 0 || closed_by_server(&w));
	cli_close(&w);
	/* H2D over both, then back over the main connection and over both */
	static const uint64_t splits[] = {1, 4096, (1u << 20) + 3};
	uint64_t x = 1;
	for (size_t i = 0; i < 3; i++, x += 2) {
		uint64_t cut = splits[i];
		fill(src, len, 40 + (uint32_t)i);
		CHECK_EQ(stripe_put(&a, x, len, src, 0, cut, 65536), 0);
		CHECK_EQ(stripe_put(&b, x, len, src, cut, len - cut, 1u << 20), 0);
		CHECK_EQ(post(&k, NULL, 0, PROTO_OP_MEMCPY_HTOD_STRIPED, "uuuu", p, U(len), U(0), x), 0);
		memset(dst, 0, len);
		CHECK_EQ(dtoh(&k, dst, p, len, 0), 0);
		CHECK_MEM(src, dst, len);
		CHECK_EQ(k.latched, 0);
		memset(dst, 0, len);
		CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEMCPY_DTOH_STRIPED, "uuuu", p, U(len), U(0), x + 1), 0);
		CHECK_EQ(stripe_get(&b, x + 1, dst, cut, len - cut), 0);
		CHECK_EQ(stripe_get(&a, x + 1, dst, 0, cut), 0);
		CHECK_MEM(src, dst, len);
	}
	/* outside the session's memory: refused, nothing waits */
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEMCPY_DTOH_STRIPED, "uuuu", p + 1, U(len), U(0), x),
		 CUDA_ERROR_INVALID_VALUE);
	/* a stripe's op on the main connection */
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_STRIPE_GET, "uuu", x, U(0), U(1)), CUDA_ERROR_NOT_PERMITTED);
	/* b dies in the middle of a payload */
	fill(src, len, 50);
	CHECK_EQ(stripe_put(&a, x, len, src, 0, len / 2, 1u << 20), 0);
	proto_msg m;
	proto_msg_begin(&m, PROTO_OP_STRIPE_PUT, 99, 3);
	proto_msg_u64(&m, x);
	proto_msg_u64(&m, len);
	proto_msg_u64(&m, len / 2);
	proto_msg_finish(&m, PROTO_F_ASYNC, len - len / 2);
	struct iovec iov[2] = {{m.data, m.len}, {src + len / 2, 1000}};
	CHECK_EQ(transport_sendv(b.c, iov, 2), 0);
	proto_msg_free(&m);
	cli_close(&b);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_MEMCPY_HTOD_STRIPED, "uuuu", p, U(len), U(0), x), 0);
	CHECK_EQ(mem_free_bytes(&k) > 0, 1);
	CHECK_EQ(k.latched, CUDA_ERROR_OPERATING_SYSTEM);
	CHECK(closed_by_server(&a)); /* the other stripe too */
	/* broken: no more stripes for this session; its connection carries on */
	CHECK_EQ(stripe_open(&k, 2, &port, &n, sec), 0);
	CHECK_EQ(n, 0);
	CHECK_EQ(htod(&k, p, src, len, 0), 0);
	memset(dst, 0, len);
	CHECK_EQ(dtoh(&k, dst, p, len, 0), 0);
	CHECK_MEM(src, dst, len);
	CHECK_EQ(k.latched, 0);
done:
	cli_close(&a);
	cli_close(&b);
	cli_close(&k);
	if (CHECK(open_session(&k, s->port) == 0)) {
		CHECK_EQ(wait_baseline(&k), g_baseline);
		cli_close(&k);
	}
out:
	free(src);
	free(dst);
}
