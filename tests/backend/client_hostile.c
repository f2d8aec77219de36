/*
 * test_client: what a well-behaved client never does (malformed and hostile
 * frames, a client killed mid-copy), several clients at once, and tokens
 * (a wrong one refused; a shutdown with a session open).
 */
#define _GNU_SOURCE
#include "test_client.h"

/* Frames a well-behaved client never sends. Each ends (at most) its own session. */
void t_bad_input(srv *s)
{
	cli k, other;
	proto_msg m;
	if (!CHECK(open_session(&other, s->port) == 0))
		return;
	uint64_t keep = mem_alloc(&other, 4096);
	CHECK_EQ(post(&other, NULL, 0, PROTO_OP_MEMSET, "uuuuu", keep, U(7), U(1), U(4096), U(0)), 0);

	/* an op before hello: the connection is closed, unanswered (issue 24) */
	if (CHECK(cli_open(&k, s->port) == 0)) {
		CHECK(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEM_ALLOC, "u", U(16)) < 0);
		CHECK(closed_by_server(&k));
		cli_close(&k);
	}
	/* another protocol version in hello */
	if (CHECK(cli_open(&k, s->port) == 0)) {
		CHECK_EQ(hello(&k, PROTO_VERSION + 1, NULL, NULL), CUDA_ERROR_NOT_SUPPORTED);
		CHECK(closed_by_server(&k));
		cli_close(&k);
	}
	/* unknown ops, sync and async; wrong argument types; missing arguments */
	if (CHECK(open_session(&k, s->port) == 0)) {
		CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, 200, "u", U(1)), CUDA_ERROR_NOT_SUPPORTED);
		CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_REPLY, "u", U(1)), CUDA_ERROR_NOT_SUPPORTED);
		CHECK_EQ(post(&k, NULL, 0, 4000000000u, ""), 0);
		CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEM_ALLOC, "s", "big"), CUDA_ERROR_INVALID_VALUE);
		CHECK_EQ(k.latched, CUDA_ERROR_NOT_SUPPORTED);
		CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEMCPY_DTOH, "u", keep), CUDA_ERROR_INVALID_VALUE);
		CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEM_ALLOC, "i", I(-5)), CUDA_ERROR_INVALID_VALUE);
		CHECK_EQ(post(&k, NULL, 0, PROTO_OP_STREAM_CREATE, "uui", U(1), U(0), I(1ll << 40)), 0);
		CHECK_EQ(mem_free_bytes(&k) > 0, 1);
		CHECK_EQ(k.latched, CUDA_ERROR_INVALID_VALUE); /* async: latched */
		/* payload on an op that takes none: the session ends */
		uint8_t junk[100] = {0};
		CHECK_EQ(post(&k, junk, sizeof(junk), PROTO_OP_MEM_FREE, "u", U(0)), 0);
		CHECK(closed_by_server(&k));
		cli_close(&k);
	}
	/* arguments that are not msgpack */
	if (CHECK(open_session(&k, s->port) == 0)) {
		uint8_t fr[PROTO_HDR_SIZE + 3];
		proto_hdr h = {PROTO_VERSION, 0, 3, 0};
		proto_encode_hdr(&h, fr);
		fr[PROTO_HDR_SIZE] = 0xc1; /* never used in msgpack */
		fr[PROTO_HDR_SIZE + 1] = 0;
		fr[PROTO_HDR_SIZE + 2] = 0;
		struct iovec iov = {fr, sizeof(fr)};
		CHECK_EQ(transport_sendv(k.c, &iov, 1), 0);
		CHECK(closed_by_server(&k));
		cli_close(&k);
	}
	/* a map instead of the array of arguments */
	if (CHECK(open_session(&k, s->port) == 0)) {
		proto_msg_begin(&m, 0, 0, 0);
		m.len = PROTO_HDR_SIZE;
		msgpack_pack_map(proto_msg_packer(&m), 1);
		msgpack_pack_str(proto_msg_packer(&m), 1);
		msgpack_pack_str_body(proto_msg_packer(&m), "x", 1);
		msgpack_pack_nil(proto_msg_packer(&m));
		CHECK_EQ(sendm(&k, &m, 0, NULL, 0), 0);
		CHECK(closed_by_server(&k));
		cli_close(&k);
	}
	/* arrays that claim billions of elements the message does not hold */
	static const uint8_t huge[][8] = {
		{0xdd, 0xff, 0xff, 0xff, 0xff},
		{0x93, 0x01, 0x01, 0xdd, 0x0f, 0xff, 0xff, 0xff},
		{0x94, 0x02, 0x01, 0xdf, 0x7f, 0xff, 0xff, 0xff},
	};
	for (size_t i = 0; i < sizeof(huge) / sizeof(huge[0]); i++) {
		if (!CHECK(open_session(&k, s->port) == 0))
			break;
		uint8_t fr[PROTO_HDR_SIZE + 8];
		proto_hdr h = {PROTO_VERSION, 0, 8, 0};
		proto_encode_hdr(&h, fr);
		memcpy(fr + PROTO_HDR_SIZE, huge[i], 8);
		struct iovec iov = {fr, sizeof(fr)};
		CHECK_EQ(transport_sendv(k.c, &iov, 1), 0);
		CHECK(closed_by_server(&k));
		cli_close(&k);
	}
	/* bad magic; a header announcing more than the limits */
	if (CHECK(open_session(&k, s->port) == 0)) {
		uint8_t fr[PROTO_HDR_SIZE] = "XXXXXXXXXXXXXXXXXXXXXXX";
		struct iovec iov = {fr, sizeof(fr)};
		CHECK_EQ(transport_sendv(k.c, &iov, 1), 0);
		CHECK(closed_by_server(&k));
		cli_close(&k);
	}
	if (CHECK(open_session(&k, s->port) == 0)) {
		uint8_t fr[PROTO_HDR_SIZE];
		proto_hdr h = {PROTO_VERSION, 0, PROTO_MAX_HDR + 1, 0};
		proto_encode_hdr(&h, fr);
		struct iovec iov = {fr, sizeof(fr)};
		CHECK_EQ(transport_sendv(k.c, &iov, 1), 0);
		CHECK(closed_by_server(&k));
		cli_close(&k);
	}
	/* an htod announcing 1 GiB and sending a little: killed mid-payload */
	if (CHECK(open_session(&k, s->port) == 0)) {
		uint64_t p = mem_alloc(&k, 1u << 20);
		uint8_t part[4096] = {1};
		proto_msg_begin(&m, PROTO_OP_MEMCPY_HTOD, ++k.seq, 2);
		proto_msg_u64(&m, p);
		proto_msg_u64(&m, 0);
		proto_msg_finish(&m, PROTO_F_ASYNC, PROTO_MAX_PAYLOAD);
		struct iovec iov[2] = {{m.data, m.len}, {part, sizeof(part)}};
		CHECK_EQ(transport_sendv(k.c, iov, 2), 0);
		proto_msg_free(&m);
		sleep_ms(20);
		cli_close(&k);
	}
	/* a client killed in the middle of a large copy, from a child process */
	pid_t pid = fork();
	if (pid == 0) {
		cli c;
		if (open_session(&c, s->port) != 0)
			_exit(1);
		uint64_t p = mem_alloc(&c, 32u << 20);
		uint8_t *big = calloc(1, 32u << 20);
		htod(&c, p, big, 32u << 20, 0); /* killed during this, probably */
		_exit(0);
	}
	sleep_ms(30);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);

	/* the other session carried on through all of it */
	uint8_t b[16];
	CHECK_EQ(dtoh(&other, b, keep, 16, 0), 0);
	CHECK_EQ(call(&other, NULL, NULL, 0, NULL, 0, PROTO_OP_MEM_FREE, "u", keep), 0);
	CHECK_EQ(wait_baseline(&other), g_baseline);
	cli_close(&other);
	CHECK(srv_alive(s));
}

/* Several clients at once, each with its own memory. */
static int g_port;

static void *client_thread(void *arg)
{
	cli k;
	uint32_t seed = (uint32_t)(uintptr_t)arg;
	const size_t n = 300000;
	uint8_t *a = malloc(n), *b = malloc(n);
	intptr_t bad = 0;

	if (open_session(&k, g_port) != 0)
		bad = 1000;
	for (int i = 0; i < 30 && !bad; i++) {
		uint64_t p = mem_alloc(&k, n);
		fill(a, n, seed + (uint32_t)i);
		bad += !p;
		bad += htod(&k, p, a, n, 0) != 0;
		bad += dtoh(&k, b, p, n, 0) != 0;
		bad += memcmp(a, b, n) != 0;
		bad += call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEM_FREE, "u", p) != 0;
		bad += k.latched != 0;
	}
	cli_close(&k);
	free(a);
	free(b);
	return (void *)bad;
}

void t_concurrent(srv *s)
{
	pthread_t t[4];
	intptr_t bad = 0;
	g_port = s->port;
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, client_thread, (void *)(uintptr_t)(i * 1000 + 1));
	for (int i = 0; i < 4; i++) {
		void *r;
		pthread_join(t[i], &r);
		bad += (intptr_t)r;
	}
	CHECK_EQ(bad, 0);
}

void t_token(void)
{
	srv s2;
	cli k;
	if (!CHECK(srv_start(&s2, "s3cret", NULL) == 0))
		return;
	if (CHECK(cli_open(&k, s2.port) == 0)) {
		CHECK_EQ(hello(&k, PROTO_VERSION, "wrong", NULL), CUDA_ERROR_NOT_PERMITTED);
		CHECK(closed_by_server(&k));
		cli_close(&k);
	}
	/* the source is in back-off (250 ms after one wrong token): closed
	 * unanswered, once the supervisor has learnt of the failure from the
	 * session process's exit */
	int r = 0;
	for (int i = 0; i < 100 && r >= 0; i++) {
		if (!CHECK(cli_open(&k, s2.port) == 0))
			break;
		r = hello(&k, PROTO_VERSION, "s3cret", NULL);
		cli_close(&k);
		if (r >= 0)
			sleep_ms(5);
	}
	CHECK(r < 0);
	sleep_ms(400);
	if (CHECK(cli_open(&k, s2.port) == 0)) {
		CHECK_EQ(hello(&k, PROTO_VERSION, NULL, NULL), CUDA_ERROR_NOT_PERMITTED);
		cli_close(&k);
	}
	sleep_ms(1000); /* the second back-off: 500 ms */
	if (CHECK(cli_open(&k, s2.port) == 0)) {
		CHECK_EQ(hello(&k, PROTO_VERSION, "s3cret", NULL), 0);
		CHECK(mem_free_bytes(&k) > 0);
		/* shutdown with a session open */
		CHECK_EQ(srv_stop(&s2), 0);
		CHECK(closed_by_server(&k));
		cli_close(&k);
	}
}
