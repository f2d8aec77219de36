/*
 * test_client: the handshake and the plain calls: allocations and copies of
 * every kind checked byte for byte, range errors, large copies, streams and
 * events.
 */
#define _GNU_SOURCE
#include "test_client.h"

void t_hello(srv *s)
{
	cli k;
	rep r;
	if (!CHECK(cli_open(&k, s->port) == 0))
		return;
	CHECK_EQ(hello(&k, PROTO_VERSION, NULL, &r), 0);
	CHECK_EQ(u64_result(&r, 0), PROTO_VERSION);
	int64_t drv = 0, lo = 1, hi = 1;
	const char *name;
	size_t n;
	const void *b;
	proto_arg_i64(&r.v, PROTO_REPLY_FIRST + 1, &drv);
	CHECK(drv > 0);
	CHECK_EQ(u64_result(&r, 2), 1); /* devices served: the one of --device 0 */
	CHECK_EQ(u64_result(&r, 3), 0); /* its ordinal */
	CHECK(proto_arg_str(&r.v, PROTO_REPLY_FIRST + 4, &name, &n) == 0 && n > 0);
	CHECK(proto_arg_bin(&r.v, PROTO_REPLY_FIRST + 5, &b, &n) == 0 && n == 16);
	CHECK(u64_result(&r, 6) > 0);
	CHECK(proto_arg_bin(&r.v, PROTO_REPLY_FIRST + 7, &b, &n) == 0 && n == 4 * CU_DEVICE_ATTRIBUTE_MAX);
	if (n == 4 * CU_DEVICE_ATTRIBUTE_MAX) {
		const uint8_t *a = b;
		uint32_t mtpb = (uint32_t)a[4] | (uint32_t)a[5] << 8 | (uint32_t)a[6] << 16 | (uint32_t)a[7] << 24;
		CHECK(mtpb >= 64); /* attribute 1: max threads per block */
	}
	CHECK(proto_arg_str(&r.v, PROTO_REPLY_FIRST + 8, &name, &n) == 0);
	CHECK(proto_arg_i64(&r.v, PROTO_REPLY_FIRST + 9, &lo) == 0);
	CHECK(proto_arg_i64(&r.v, PROTO_REPLY_FIRST + 10, &hi) == 0);
	CHECK_EQ(u64_result(&r, 11), 0); /* peers: none */
	CHECK(hi <= lo);
	rep_free(&r);
	CHECK_EQ(hello(&k, PROTO_VERSION, NULL, NULL), CUDA_ERROR_INVALID_VALUE); /* twice */
	g_baseline = mem_free_bytes(&k);
	CHECK(g_baseline > 0);
	cli_close(&k);
}

void t_copies(srv *s)
{
	cli k;
	const size_t n = 1 << 20;
	uint8_t *a = malloc(n), *b = malloc(n);
	if (!CHECK(open_session(&k, s->port) == 0))
		goto out;
	uint64_t p = mem_alloc(&k, n), q = mem_alloc(&k, n);
	CHECK(p && q);
	CHECK_EQ(mem_free_bytes(&k) + 2 * n <= g_baseline, 1);
	fill(a, n, 1);
	CHECK_EQ(htod(&k, p, a, n, 0), 0);
	memset(b, 0, n);
	CHECK_EQ(dtoh(&k, b, p, n, 0), 0);
	CHECK_MEM(a, b, n);
	CHECK_EQ(k.latched, 0);
	/* unaligned pieces */
	fill(a, 1000, 2);
	CHECK_EQ(htod(&k, p + 13, a, 1000, 0), 0);
	CHECK_EQ(dtoh(&k, b, p + 13, 1000, 0), 0);
	CHECK_MEM(a, b, 1000);
	CHECK_EQ(dtoh(&k, b, p + n - 1, 1, 0), 0); /* the last byte */
	/* zero bytes: fine, no payload */
	CHECK_EQ(htod(&k, p, a, 0, 0), 0);
	CHECK_EQ(dtoh(&k, b, p, 0, 0), 0);
	/* device to device */
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_MEMCPY_DTOD, "uuuu", q + 1, p + 13, U(1000), U(0)), 0);
	CHECK_EQ(dtoh(&k, b, q + 1, 1000, 0), 0);
	CHECK_MEM(a, b, 1000);
	/* memsets of each element size */
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_MEMSET, "uuuuu", p, U(0xab), U(1), U(100), U(0)), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_MEMSET, "uuuuu", p + 100, U(0x1234), U(2), U(10), U(0)), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_MEMSET, "uuuuu", p + 120, U(0xdeadbeef), U(4), U(5), U(0)), 0);
	CHECK_EQ(dtoh(&k, b, p, 140, 0), 0);
	int ok = 1;
	for (int i = 0; i < 100; i++)
		ok &= b[i] == 0xab;
	for (int i = 0; i < 10; i++)
		ok &= b[100 + 2 * i] == 0x34 && b[101 + 2 * i] == 0x12;
	for (int i = 0; i < 5; i++)
		ok &= b[120 + 4 * i] == 0xef && b[123 + 4 * i] == 0xde;
	CHECK(ok);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_MEMSET, "uuuuu", p, U(0), U(3), U(1), U(0)), 0); /* bad elemsize */
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_DEVICE_SYNC, ""), 0);
	CHECK_EQ(k.latched, CUDA_ERROR_INVALID_VALUE);

	/* 2D: 7 rows of 10 bytes, pitch 32 */
	uint8_t rows[70], back[70];
	fill(rows, 70, 3);
	CHECK_EQ(post(&k, rows, 70, PROTO_OP_MEMCPY_2D_HTOD, "uuuuu", p, U(32), U(10), U(7), U(0)), 0);
	CHECK_EQ(call(&k, NULL, back, 70, NULL, 0, PROTO_OP_MEMCPY_2D_DTOH, "uuuuu", p, U(32), U(10), U(7), U(0)), 0);
	CHECK_MEM(rows, back, 70);
	CHECK_EQ(dtoh(&k, b, p, 32 * 7, 0), 0);
	CHECK_MEM(rows + 10, b + 32, 10); /* row 1 at pitch 32 */
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_MEMCPY_2D_DTOD, "uuuuuuu", q, U(16), p, U(32), U(10), U(7), U(0)), 0);
	CHECK_EQ(call(&k, NULL, back, 70, NULL, 0, PROTO_OP_MEMCPY_2D_DTOH, "uuuuu", q, U(16), U(10), U(7), U(0)), 0);
	CHECK_MEM(rows, back, 70);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_MEMSET_2D, "uuuuuuu", q, U(16), U(0x55), U(1), U(4), U(3), U(0)), 0);
	CHECK_EQ(dtoh(&k, b, q, 48, 0), 0);
	CHECK(b[0] == 0x55 && b[3] == 0x55 && b[4] == rows[4] && b[16] == 0x55 && b[35] == 0x55 && b[36] != 0x55);
	/* 2D with a payload of the wrong length, and a pitch smaller than a row */
	CHECK_EQ(post(&k, rows, 69, PROTO_OP_MEMCPY_2D_HTOD, "uuuuu", p, U(32), U(10), U(7), U(0)), 0);
	CHECK_EQ(mem_free_bytes(&k) > 0, 1);
	CHECK_EQ(k.latched, CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(call(&k, NULL, back, 70, NULL, 0, PROTO_OP_MEMCPY_2D_DTOH, "uuuuu", p, U(5), U(10), U(7), U(0)),
		 CUDA_ERROR_INVALID_VALUE);

	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEM_FREE, "u", p), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEM_FREE, "u", q), 0);
	CHECK_EQ(mem_free_bytes(&k), g_baseline);
	cli_close(&k);
out:
	free(a);
	free(b);
}

void t_range_errors(srv *s)
{
	cli k;
	uint8_t buf[64] = {0};
	if (!CHECK(open_session(&k, s->port) == 0))
		return;
	uint64_t p = mem_alloc(&k, 4096), q = mem_alloc(&k, 4096);
	CHECK(p && q);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_MEMSET, "uuuuu", q, U(0), U(1), U(4096), U(0)), 0);
	/* past the end, before the start, foreign, straddling */
	CHECK_EQ(dtoh(&k, buf, p + 4090, 7, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(dtoh(&k, buf, p - 1, 2, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(dtoh(&k, buf, 0xdead0000, 4, 0), CUDA_ERROR_INVALID_VALUE);
	uint64_t lo = p < q ? p : q, hi = p < q ? q : p;
	CHECK_EQ(dtoh(&k, buf, hi - 8, 16, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(dtoh(&k, buf, lo + 4096 - 8, 16, 0), CUDA_ERROR_INVALID_VALUE);
	/* hostile lengths near UINT64_MAX */
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEMCPY_DTOH, "uuu", p, UINT64_MAX, U(0)),
		 CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_MEMSET, "uuuuu", p + 8, U(0), U(4), UINT64_MAX / 2, U(0)), 0);
	CHECK_EQ(mem_free_bytes(&k) > 0, 1);
	CHECK_EQ(k.latched, CUDA_ERROR_INVALID_VALUE);
	/* an async copy out of range: latched, reported once by the next reply */
	CHECK_EQ(htod(&k, p + 4000, buf, 64, 0 + 0), 0); /* ends at 4064: fine */
	CHECK_EQ(htod(&k, p + 4064, buf, 64, 0), 0);      /* ends at 4128: not */
	CHECK_EQ(mem_free_bytes(&k) > 0, 1);
	CHECK_EQ(k.latched, CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(mem_free_bytes(&k) > 0, 1);
	CHECK_EQ(k.latched, 0); /* taken by the reply that carried it */
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_MEMCPY_DTOD, "uuuu", p, q + 1, U(4096), U(0)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_DEVICE_SYNC, ""), 0);
	CHECK_EQ(k.latched, CUDA_ERROR_INVALID_VALUE);
	/* frees: interior, foreign, double; NULL is fine */
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEM_FREE, "u", p + 8), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEM_FREE, "u", U(0xdead0000)), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEM_FREE, "u", p), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEM_FREE, "u", p), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEM_FREE, "u", U(0)), 0);
	CHECK_EQ(dtoh(&k, buf, p, 4, 0), CUDA_ERROR_INVALID_VALUE); /* use after free */
	/* another session cannot touch this one's memory */
	cli k2;
	if (CHECK(open_session(&k2, s->port) == 0)) {
		CHECK_EQ(dtoh(&k2, buf, q, 4, 0), CUDA_ERROR_INVALID_VALUE);
		CHECK_EQ(call(&k2, NULL, NULL, 0, NULL, 0, PROTO_OP_MEM_FREE, "u", q), CUDA_ERROR_INVALID_VALUE);
		cli_close(&k2);
	}
	CHECK_EQ(dtoh(&k, buf, q, 4, 0), 0);
	/* stream-ordered allocations */
	rep r;
	CHECK_EQ(call(&k, &r, NULL, 0, NULL, 0, PROTO_OP_MEM_ALLOC_ASYNC, "uu", U(8192), U(0)), 0);
	uint64_t a = u64_result(&r, 0);
	rep_free(&r);
	CHECK(a != 0);
	CHECK_EQ(htod(&k, a + 8000, buf, 64, 0), 0);
	CHECK_EQ(dtoh(&k, buf, a + 8000, 64, 0), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_MEM_FREE_ASYNC, "uu", a, U(0)), 0);
	CHECK_EQ(dtoh(&k, buf, a, 4, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(k.latched, 0);
	cli_close(&k); /* q is freed by the teardown */
	if (CHECK(open_session(&k, s->port) == 0)) {
		CHECK_EQ(wait_baseline(&k), g_baseline);
		cli_close(&k);
	}
}

void t_big(srv *s)
{
	cli k;
	const size_t n = 64u << 20;
	uint8_t *a = malloc(n), *b = malloc(n);
	if (!CHECK(open_session(&k, s->port) == 0))
		goto out;
	uint64_t p = mem_alloc(&k, n);
	CHECK(p != 0);
	for (int round = 0; round < 3; round++) { /* malloc'd, then the big staging buffer */
		fill(a, n, 10 + (uint32_t)round);
		CHECK_EQ(htod(&k, p, a, n, 0), 0);
		memset(b, 0, n);
		CHECK_EQ(dtoh(&k, b, p, n, 0), 0);
		CHECK_MEM(a, b, n);
	}
	/* many chunk-sized copies in flight at once */
	for (size_t off = 0; off < n; off += 1u << 20)
		CHECK_EQ(htod(&k, p + off, b + off, 1u << 20, 0), 0);
	memset(a, 0, n);
	CHECK_EQ(dtoh(&k, a, p, n, 0), 0);
	CHECK_MEM(a, b, n);
	CHECK_EQ(k.latched, 0);
	cli_close(&k);
out:
	free(a);
	free(b);
}

/* Copies to the host of sizes either side of 64 KiB and 1 MiB up to 20 MiB:
 * exact bytes and nothing past them, at unaligned offsets, several requests
 * in flight at once (each reply whole, in order), and a request whose range
 * runs past its allocation answered with one error, after which the
 * connection serves on. */
void t_dtoh_sizes(srv *s)
{
	static const size_t K = 1024, M = 1024 * 1024;
	static const size_t sizes[] = {64 * K - 1, 64 * K, 64 * K + 1, 192 * K - 1, 192 * K, 192 * K + 1,
				       960 * K + 1, M, 3 * M + 7, 12224 * K + 5, 20 * M + 3};
	static const size_t offs[] = {0, 1, 4093};
	const size_t cap = 21 * M;
	cli k;
	uint8_t *a = malloc(cap + 8192), *b = malloc(cap + 8192);
	if (!CHECK(open_session(&k, s->port) == 0))
		goto out;
	uint64_t p = mem_alloc(&k, cap + 8192);
	CHECK(p != 0);
	fill(a, cap + 8192, 77);
	CHECK_EQ(htod(&k, p, a, cap + 8192, 0), 0);
	for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
		for (size_t oi = 0; oi < sizeof offs / sizeof *offs; oi++) {
			size_t n = sizes[si], off = offs[oi];
			memset(b, 0xEE, n + 1);
			CHECK_EQ(dtoh(&k, b, p + off, n, 0), 0);
			if (!CHECK_MEM(b, a + off, n) || !CHECK_EQ(b[n], 0xEE))
				fprintf(stderr, "  copy of %zu bytes at offset %zu\n", n, off);
		}
	}
	/* in flight at once: the replies come back in order, each whole */
	enum { NREQ = 6 };
	uint64_t seqs[NREQ];
	for (int i = 0; i < NREQ; i++) {
		proto_msg m;
		seqs[i] = ++k.seq;
		proto_msg_begin(&m, PROTO_OP_MEMCPY_DTOH, seqs[i], 3);
		proto_msg_u64(&m, p + (uint64_t)i * 3 * M + (uint64_t)i);
		proto_msg_u64(&m, 3 * M + (uint64_t)i);
		proto_msg_u64(&m, 0);
		CHECK_EQ(sendm(&k, &m, 0, NULL, 0), 0);
	}
	for (int i = 0; i < NREQ; i++) {
		rep r;
		size_t n = 3 * M + (size_t)i;
		memset(b, 0xEE, n);
		CHECK_EQ(recv_reply(&k, seqs[i], &r, b, n), 0);
		CHECK_EQ(r.status, 0);
		CHECK_EQ(r.plen, n);
		CHECK_MEM(b, a + (size_t)i * 3 * M + (size_t)i, n);
		rep_free(&r);
	}
	/* past the end by one byte, and by a chunk: one error each, nothing sent */
	CHECK_EQ(dtoh(&k, b, p + 8192, cap + 1, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(dtoh(&k, b, p + cap, 8192 + 64 * K, 0), CUDA_ERROR_INVALID_VALUE);
	memset(b, 0, 3 * M + 7);
	CHECK_EQ(dtoh(&k, b, p + 5, 3 * M + 7, 0), 0);
	CHECK_MEM(b, a + 5, 3 * M + 7);
	CHECK_EQ(k.latched, 0);
	cli_close(&k);
out:
	free(a);
	free(b);
}

void t_streams_events(srv *s)
{
	cli k;
	uint8_t buf[256], back[256];
	if (!CHECK(open_session(&k, s->port) == 0))
		return;
	uint64_t p = mem_alloc(&k, 4096);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_STREAM_CREATE, "uui", U(5), U(1), I(0)), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_STREAM_CREATE, "uui", U(5), U(0), I(0)), 0); /* id in use */
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_STREAM_SYNC, "u", U(5)), 0);
	CHECK_EQ(k.latched, CUDA_ERROR_INVALID_HANDLE);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_STREAM_SYNC, "u", U(6)), CUDA_ERROR_INVALID_HANDLE);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_STREAM_SYNC, "u", U(0)), 0);
	fill(buf, sizeof(buf), 7);
	CHECK_EQ(htod(&k, p, buf, sizeof(buf), 5), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_EVENT_CREATE, "uu", U(9), U(0)), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_EVENT_CREATE, "uu", U(10), U(2)), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_EVENT_RECORD, "uuu", U(9), U(5), U(0)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_EVENT_SYNC, "u", U(9)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_EVENT_QUERY, "u", U(9)), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_STREAM_WAIT_EVENT, "uuu", U(0), U(9), U(0)), 0);
	CHECK_EQ(dtoh(&k, back, p, sizeof(back), 5), 0);
	CHECK_MEM(buf, back, sizeof(buf));
	/* destroy, then the stale id */
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_EVENT_DESTROY, "u", U(9)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_EVENT_SYNC, "u", U(9)), CUDA_ERROR_INVALID_HANDLE);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_EVENT_DESTROY, "u", U(9)), 0); /* twice */
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_DEVICE_SYNC, ""), 0);
	CHECK_EQ(k.latched, CUDA_ERROR_INVALID_HANDLE);
	/* an id reused after its destroy is a new event */
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_EVENT_CREATE, "uu", U(9), U(0)), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_EVENT_RECORD, "uuu", U(9), U(0), U(0)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_EVENT_SYNC, "u", U(9)), 0);
	CHECK_EQ(k.latched, 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_EVENT_CREATE, "uu", U(11), U(0x40)), 0); /* bad flags */
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_STREAM_DESTROY, "u", U(5)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_STREAM_SYNC, "u", U(5)), CUDA_ERROR_INVALID_HANDLE);
	CHECK_EQ(k.latched, CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(htod(&k, p, buf, 16, 5), 0); /* on the destroyed stream */
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_STREAM_DESTROY, "u", U(0)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_DEVICE_SYNC, ""), 0);
	CHECK_EQ(k.latched, CUDA_ERROR_INVALID_HANDLE);
	/* streams left alive are the teardown's job (event 10, stream 12) */
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_STREAM_CREATE, "uui", U(12), U(0), I(-1)), 0);
	/* host function: the server asks, the client answers, the stream goes on */
	k.nevents = 0;
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_HOSTFN, "uu", U(12), U(77)), 0);
	rep r;
	uint64_t seq = ++k.seq;
	{
		proto_msg m;
		va_list dummy;
		(void)dummy;
		proto_msg_begin(&m, PROTO_OP_STREAM_SYNC, seq, 1);
		proto_msg_u64(&m, 12);
		CHECK_EQ(sendm(&k, &m, 0, NULL, 0), 0);
	}
	/* the event arrives before the sync can complete; answer it */
	for (int i = 0; i < 100 && k.nevents == 0; i++) {
		transport_frame f;
		if (transport_recv_frame(k.c, &f, dest_cb, NULL))
			break;
		proto_view v;
		if (proto_view_init(&v, &f.hdr, f.msg) == PROTO_OK) {
			uint64_t id = 0;
			if ((f.hdr.flags & PROTO_F_EVENT) && v.op == PROTO_OP_HOSTFN && proto_arg_u64(&v, 0, &id) == 0)
				k.events[k.nevents++] = id;
			proto_view_free(&v);
		}
		transport_frame_free(&f);
	}
	CHECK_EQ(k.nevents, 1);
	CHECK_EQ(k.events[0], 77);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_HOSTFN_DONE, "u", U(77)), 0);
	CHECK_EQ(recv_reply(&k, seq, &r, NULL, 0), 0);
	CHECK_EQ(r.status, 0);
	rep_free(&r);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_HOSTFN_DONE, "u", U(78)), 0); /* nobody waits: logged, ignored */
	/* a host function still blocked when the client goes away */
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_HOSTFN, "uu", U(12), U(79)), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_STREAM_SYNC, "u", U(12)), 0);
	sleep_ms(50);
	cli_close(&k);
	if (CHECK(open_session(&k, s->port) == 0)) {
		CHECK_EQ(wait_baseline(&k), g_baseline);
		cli_close(&k);
	}
}
