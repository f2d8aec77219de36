/*
 * shm transport: the rings on their own (plain memory), then the provider over
 * a real unix socket with the server's libuv loop in a thread of its own.
 * Rings of 64 KiB (REMOTE_GPU_SHM_RING_KB=64) and short spins, so that large
 * frames wrap many times, fill the rings both ways, and both sides go to sleep
 * between calls.
 *
 *  - rings: wrap-around byte for byte, a full ring, the sleep/wait flags,
 *    hostile head and tail values (out of range is SHM_RING_BAD, never an index).
 *  - echo of frames of 0 B .. 5 MiB through the provider, bytes checked, and
 *    again after both sides went idle (the doorbells wake them).
 *  - a hostile client (raw socket, its own mapping of the segment): a head out
 *    of range, a bad header, a header promising 4 GiB, an attempt to shrink the
 *    segment (sealed); each ends its own connection with the right error, the
 *    server serves the next client.
 *  - a client that dies at each step (before the segment, after it, inside a
 *    header, inside a payload, between frames): on_close once with ECLOSED or
 *    EIO, and the server keeps no mapping and no descriptor of the segment.
 *  - shared regions: bytes at offsets through the server's mapping, writes
 *    seen both ways, ranges outside refused, a dropped region and those of a
 *    closed connection unmapped; a client that breaks the socket's protocol
 *    (unsealed memfd, message without descriptor, a stray byte, a region
 *    larger than its memfd, more regions waiting than allowed) ends its own
 *    connection with EIO; a region is mapped only at its first lookup.
 *  - a server that dies (a child process that sent the segment, then exits)
 *    while the client waits for a reply, and while it waits for ring space:
 *    the client's call fails, it does not hang.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "shm_int.h"

#define RING (64u * 1024)

static char sock_path[108];

/* ---- rings ---- */

static uint8_t pat(uint32_t i) { return (uint8_t)(i * 131u + (i >> 8)); }

static void test_ring_wrap(void)
{
	void *seg = aligned_alloc(4096, shm_seg_size(RING));
	memset(seg, 0, shm_seg_size(RING));
	tp_shm_seg_format(seg, RING);
	shm_ring p, c, p2, c2;
	tp_shm_seg_rings(seg, RING, &p, &p2);
	tp_shm_seg_rings(seg, RING, &c, &c2);
	uint8_t *buf = malloc(RING), *out = malloc(RING);
	uint32_t wrote = 0, read = 0;
	int bad = 0;
	/* odd sizes, so the copies straddle the end of the data area */
	for (int round = 0; round < 200; round++) {
		size_t n = 1 + (size_t)(round * 7919) % (RING - 1);
		size_t sp = tp_shm_ring_space(&p);
		CHECK_EQ(sp, RING); /* the consumer took everything */
		for (size_t i = 0; i < n; i++)
			buf[i] = pat(wrote + (uint32_t)i);
		tp_shm_ring_put(&p, buf, n);
		wrote += (uint32_t)n;
		CHECK_EQ(tp_shm_ring_avail(&c), 0); /* not published yet */
		tp_shm_ring_publish(&p);
		CHECK_EQ(tp_shm_ring_avail(&c), n);
		tp_shm_ring_get(&c, out, n);
		for (size_t i = 0; i < n; i++)
			bad += out[i] != pat(read + (uint32_t)i);
		read += (uint32_t)n;
		tp_shm_ring_release(&c);
	}
	CHECK_EQ(bad, 0);
	/* a full ring */
	for (uint32_t i = 0; i < RING; i++)
		buf[i] = pat(i);
	tp_shm_ring_put(&p, buf, RING);
	tp_shm_ring_publish(&p);
	CHECK_EQ(tp_shm_ring_space(&p), 0);
	CHECK_EQ(tp_shm_ring_avail(&c), RING);
	tp_shm_ring_get(&c, NULL, 100); /* skipped, not copied */
	CHECK_EQ(tp_shm_ring_space(&p), 0); /* not released yet */
	tp_shm_ring_release(&c);
	CHECK_EQ(tp_shm_ring_space(&p), 100);
	tp_shm_ring_get(&c, out, RING - 100);
	CHECK(memcmp(out, buf + 100, RING - 100) == 0);
	tp_shm_ring_release(&c);
	CHECK_EQ(tp_shm_ring_space(&p), RING);
	free(buf);
	free(out);
	free(seg);
}

static void test_ring_flags(void)
{
	void *seg = aligned_alloc(4096, shm_seg_size(RING));
	memset(seg, 0, shm_seg_size(RING));
	tp_shm_seg_format(seg, RING);
	shm_ring p, c, x;
	tp_shm_seg_rings(seg, RING, &p, &x);
	tp_shm_seg_rings(seg, RING, &c, &x);
	uint8_t b[16] = {0};

	CHECK_EQ(tp_shm_ring_sleep_prepare(&c), 0); /* asleep: nothing there */
	tp_shm_ring_put(&p, b, 16);
	CHECK_EQ(tp_shm_ring_publish(&p), 1); /* wake it: one doorbell */
	tp_shm_ring_put(&p, b, 16);
	CHECK_EQ(tp_shm_ring_publish(&p), 0); /* flag cleared: no second one */
	CHECK_EQ(tp_shm_ring_sleep_prepare(&c), 32); /* bytes there: do not sleep */
	tp_shm_ring_sleep_cancel(&c);
	tp_shm_ring_put(&p, b, 16);
	CHECK_EQ(tp_shm_ring_publish(&p), 0);

	uint32_t seen;
	tp_shm_ring_put(&p, b, 0);
	CHECK_EQ(tp_shm_ring_wait_prepare(&p, &seen), RING - 48);
	CHECK_EQ(seen, 0);
	tp_shm_ring_get(&c, NULL, 48);
	CHECK_EQ(tp_shm_ring_release(&c), 1); /* the producer waits: futex wake */
	CHECK_EQ(tp_shm_ring_release(&c), 0);
	free(seg);
}

/* Positions written by a hostile peer are values, never indices. */
static void test_ring_hostile(void)
{
	void *seg = aligned_alloc(4096, shm_seg_size(RING));
	memset(seg, 0, shm_seg_size(RING));
	tp_shm_seg_format(seg, RING);
	shm_ring p, c, x;
	tp_shm_seg_rings(seg, RING, &p, &x);
	tp_shm_seg_rings(seg, RING, &c, &x);
	static const uint32_t vals[] = {RING + 1, 0xffffffffu, 0x80000000u, RING * 2, 0xfffffff0u};
	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		atomic_store(&c.ctl->head, c.pos + vals[i]);
		CHECK(tp_shm_ring_avail(&c) == SHM_RING_BAD);
	}
	/* a tail ahead of what we wrote, or further behind than the ring holds */
	static const uint32_t tails[] = {1, RING, 0x80000000u, (uint32_t)-(int32_t)(RING + 1)};
	for (size_t i = 0; i < sizeof(tails) / sizeof(tails[0]); i++) {
		atomic_store(&p.ctl->tail, p.pos + tails[i]);
		CHECK(tp_shm_ring_space(&p) == SHM_RING_BAD);
	}
	atomic_store(&c.ctl->head, c.pos + RING);
	CHECK_EQ(tp_shm_ring_avail(&c), RING); /* the most there can be */
	/* every value: never more than the ring */
	int over = 0;
	for (uint32_t v = 0; v < 100000; v++) {
		atomic_store(&c.ctl->head, v * 2654435761u);
		size_t a = tp_shm_ring_avail(&c);
		over += a != SHM_RING_BAD && a > RING;
	}
	CHECK_EQ(over, 0);
	CHECK(!tp_shm_ring_size_ok(RING + 1) && !tp_shm_ring_size_ok(1024) && !tp_shm_ring_size_ok(1u << 31));
	CHECK(tp_shm_ring_size_ok(RING) && tp_shm_ring_size_ok(SHM_RING_MAX));
	free(seg);
}

/* ---- a server on a loop thread ---- */

enum { OP_ECHO = 10 };

typedef struct srv_conn {
	transport_conn *c;
	int nclose, close_err, nframes;
	uint8_t *dest;
	pthread_t replier;
	/* one pending echo at a time (the test client waits for each) */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int have, quit;
	transport_frame f;
} srv_conn;

static struct {
	uv_loop_t loop;
	pthread_t thread;
	transport_listener *l;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	srv_conn *conns[64];
	int n;
} S = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

/* Replies from a thread of their own, as remote-gpud's executor does: a send
 * that waits for ring space must not hold the loop that reads the calls. */
static void *replier(void *arg)
{
	srv_conn *r = arg;
	pthread_mutex_lock(&r->mu);
	for (;;) {
		while (!r->have && !r->quit)
			pthread_cond_wait(&r->cv, &r->mu);
		if (r->quit)
			break;
		transport_frame f = r->f;
		r->have = 0;
		pthread_mutex_unlock(&r->mu);
		uint8_t hb[PROTO_HDR_SIZE];
		proto_hdr h = f.hdr;
		h.flags = PROTO_F_REPLY;
		proto_encode_hdr(&h, hb);
		struct iovec iov[3] = {{hb, sizeof(hb)}, {f.msg, f.hdr.hdr_len}, {f.payload, f.hdr.payload_len}};
		transport_sendv(r->c, iov, 3);
		transport_frame_free(&f);
		free(f.payload);
		pthread_mutex_lock(&r->mu);
	}
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

static void *srv_accept(void *ctx, transport_conn *c)
{
	srv_conn *r = calloc(1, sizeof(*r));
	r->c = c;
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->cv, NULL);
	pthread_create(&r->replier, NULL, replier, r);
	pthread_mutex_lock(&S.mu);
	S.conns[S.n++] = r;
	pthread_cond_broadcast(&S.cv);
	pthread_mutex_unlock(&S.mu);
	return r;
}

static void *srv_dest(void *ctx, const transport_frame *f) { return malloc(f->hdr.payload_len); }

static void srv_frame(void *ctx, transport_frame *f)
{
	srv_conn *r = ctx;
	pthread_mutex_lock(&r->mu);
	r->nframes++;
	r->f = *f;
	r->have = 1;
	pthread_cond_signal(&r->cv);
	pthread_mutex_unlock(&r->mu);
}

static void srv_close(void *ctx, int err)
{
	srv_conn *r = ctx;
	pthread_mutex_lock(&r->mu);
	r->quit = 1;
	pthread_cond_signal(&r->cv);
	pthread_mutex_unlock(&r->mu);
	pthread_mutex_lock(&S.mu);
	r->nclose++;
	r->close_err = err;
	pthread_cond_broadcast(&S.cv);
	pthread_mutex_unlock(&S.mu);
}

static const transport_server_cb CB = {
	.on_accept = srv_accept, .payload_dest = srv_dest, .on_frame = srv_frame, .on_close = srv_close};

static void *loop_thread(void *arg)
{
	uv_run(&S.loop, UV_RUN_DEFAULT);
	return NULL;
}

/* The i-th connection's record once on_close ran for it (waits up to 5 s). */
static srv_conn *closed_conn(int i)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 5;
	pthread_mutex_lock(&S.mu);
	while ((S.n <= i || !S.conns[i]->nclose) && pthread_cond_timedwait(&S.cv, &S.mu, &ts) == 0)
		;
	srv_conn *r = S.n > i && S.conns[i]->nclose ? S.conns[i] : NULL;
	pthread_mutex_unlock(&S.mu);
	if (r) {
		pthread_join(r->replier, NULL);
		transport_close(r->c); /* the upper layer lets go */
	}
	return r;
}

/* Mappings and descriptors of segments in this process. */
static int segments_held(void)
{
	int n = 0;
	char line[512];
	FILE *f = fopen("/proc/self/maps", "r");
	while (f && fgets(line, sizeof(line), f))
		n += strstr(line, "remote-gpu-shm") != NULL;
	if (f)
		fclose(f);
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char p[64], t[256];
		snprintf(p, sizeof(p), "/proc/self/fd/%s", e->d_name);
		ssize_t k = readlink(p, t, sizeof(t) - 1);
		if (k > 0) {
			t[k] = 0;
			n += strstr(t, "remote-gpu-shm") != NULL;
		}
	}
	if (d)
		closedir(d);
	return n;
}

static int wait_segments_gone(void)
{
	for (int i = 0; i < 100 && segments_held(); i++)
		usleep(20000);
	return segments_held();
}

/* ---- client side ---- */

static int send_frame(transport_conn *c, uint64_t seq, const void *msg, uint32_t mlen, const void *pl, uint32_t plen)
{
	uint8_t hb[PROTO_HDR_SIZE];
	proto_hdr h = {.version = PROTO_VERSION, .op = OP_ECHO, .seq = seq, .hdr_len = mlen, .payload_len = plen};
	proto_encode_hdr(&h, hb);
	struct iovec iov[3] = {{hb, sizeof(hb)}, {(void *)msg, mlen}, {(void *)pl, plen}};
	return transport_sendv(c, iov, 3);
}

static void *cli_dest(void *ctx, const transport_frame *f) { return ctx; }

static void echo(transport_conn *c, uint64_t seq, size_t plen)
{
	uint8_t msg[5] = {0x94, 1, 2, 3, (uint8_t)seq}; /* any bytes: the transport does not decode them */
	uint8_t *pl = malloc(plen + 1), *back = malloc(plen + 1);
	for (size_t i = 0; i < plen; i++)
		pl[i] = pat((uint32_t)(i + seq));
	CHECK_EQ(send_frame(c, seq, msg, sizeof(msg), pl, (uint32_t)plen), TRANSPORT_OK);
	transport_frame f;
	int err = transport_recv_frame(c, &f, cli_dest, back);
	if (CHECK_EQ(err, TRANSPORT_OK)) {
		CHECK_EQ(f.hdr.seq, seq);
		CHECK_EQ(f.hdr.hdr_len, sizeof(msg));
		CHECK(f.msg && memcmp(f.msg, msg, sizeof(msg)) == 0);
		CHECK_EQ(f.hdr.payload_len, plen);
		CHECK(plen == 0 || memcmp(back, pl, plen) == 0);
		transport_frame_free(&f);
	}
	free(pl);
	free(back);
}

static transport_conn *connect_shm(void)
{
	transport_addr a;
	char s[200];
	snprintf(s, sizeof(s), "shm://%s", sock_path);
	if (!CHECK_EQ(transport_parse_addr(s, &a), TRANSPORT_OK))
		return NULL;
	transport_conn *c = NULL;
	CHECK_EQ(transport_connect_within(&a, 5000, &c), TRANSPORT_OK);
	if (c)
		CHECK_EQ(transport_caps(c), TRANSPORT_CAP_REGIONS | TRANSPORT_CAP_BUSY_POLL | TRANSPORT_CAP_LOCAL |
						   TRANSPORT_CAP_ADOPT);
	return c;
}

static void test_echo(void)
{
	int base = S.n;
	transport_conn *c = connect_shm();
	if (!c)
		return;
	static const size_t sizes[] = {0, 1, 100, RING - 1, RING, RING + 1, 3u << 20, 5u << 20};
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		echo(c, i + 1, sizes[i]);
	/* both sides go to sleep (spins of 1 ms), the doorbells wake them */
	for (int i = 0; i < 3; i++) {
		usleep(30000);
		echo(c, 100 + i, 10);
	}
	transport_close(c);
	srv_conn *r = closed_conn(base);
	if (CHECK(r)) {
		CHECK_EQ(r->nclose, 1);
		CHECK_EQ(r->close_err, TRANSPORT_ECLOSED);
		CHECK_EQ(r->nframes, 11);
	}
	CHECK_EQ(wait_segments_gone(), 0);
}

/* ---- a raw client: its own mapping, any bytes ---- */

typedef struct raw {
	int fd;
	void *map;
	uint32_t ring_size;
	shm_ring tx, rx;
} raw;

static int raw_connect(raw *r, int map)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	strcpy(sa.sun_path, sock_path);
	r->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	r->map = NULL;
	if (connect(r->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		return -1;
	if (!map)
		return 0;
	int memfd;
	if (tp_shm_sock_recv_setup(r->fd, tp_deadline(5000), &memfd, &r->ring_size) != TRANSPORT_OK)
		return -1;
	/* sealed: the client cannot shrink what the server has mapped */
	CHECK(ftruncate(memfd, 4096) != 0);
	CHECK(ftruncate(memfd, (off_t)shm_seg_size(r->ring_size) * 2) != 0);
	int err = tp_shm_seg_map(memfd, r->ring_size, &r->map);
	close(memfd);
	if (err)
		return -1;
	tp_shm_seg_rings(r->map, r->ring_size, &r->tx, &r->rx);
	return 0;
}

static void raw_write(raw *r, const void *b, size_t n)
{
	tp_shm_ring_put(&r->tx, b, n);
	tp_shm_ring_publish(&r->tx);
	tp_shm_doorbell(r->fd); /* always: the server may be hot or asleep */
}

static void raw_close(raw *r)
{
	if (r->map)
		munmap(r->map, shm_seg_size(r->ring_size));
	close(r->fd);
}

/* A client that breaks the rules ends its own connection with err. */
static void hostile(int how, int want_err)
{
	int base = S.n;
	raw r;
	if (!CHECK_EQ(raw_connect(&r, 1), 0)) {
		raw_close(&r);
		return;
	}
	uint8_t hb[PROTO_HDR_SIZE];
	proto_hdr h = {.version = PROTO_VERSION, .op = OP_ECHO, .seq = 1, .hdr_len = 2, .payload_len = 0};
	proto_encode_hdr(&h, hb);
	switch (how) {
	case 0: /* head far ahead of the server's tail */
		atomic_store(&r.tx.ctl->head, 0x7fffffffu);
		tp_shm_doorbell(r.fd);
		break;
	case 1: /* bad magic */
		hb[0] ^= 0xff;
		raw_write(&r, hb, sizeof(hb));
		break;
	case 2: /* a header promising 4 GiB */
		h.payload_len = 1ull << 40;
		h.hdr_len = 0xffffffffu;
		proto_encode_hdr(&h, hb);
		raw_write(&r, hb, sizeof(hb));
		break;
	case 3: /* head moved backwards past the server's tail */
		raw_write(&r, hb, 10);
		atomic_store(&r.tx.ctl->head, 0xfffffff0u);
		tp_shm_doorbell(r.fd);
		break;
	}
	srv_conn *c = closed_conn(base);
	if (CHECK(c)) {
		CHECK_EQ(c->nclose, 1);
		CHECK_EQ(c->close_err, want_err);
		CHECK_EQ(c->nframes, 0);
	}
	raw_close(&r);
	CHECK_EQ(wait_segments_gone(), 0);
	/* and the server serves the next one */
	transport_conn *g = connect_shm();
	if (g) {
		echo(g, 7, 1000);
		transport_close(g);
		closed_conn(base + 1);
	}
}

static void test_hostile(void)
{
	hostile(0, TRANSPORT_EIO);
	hostile(1, PROTO_EMAGIC);
	hostile(2, PROTO_ETOOBIG);
	hostile(3, TRANSPORT_EIO);
}

/* A client that dies at each step: step 0 before taking the segment, 1 after
 * mapping it, 2 inside a header, 3 inside a payload, 4 between frames. */
static void dies_at(int step, int want_err, int want_frames)
{
	int base = S.n;
	raw r;
	if (!CHECK_EQ(raw_connect(&r, step > 0), 0)) {
		raw_close(&r);
		return;
	}
	if (step == 0) {
		/* the server must have accepted before we go */
		for (int i = 0; i < 200 && S.n == base; i++)
			usleep(5000);
	}
	uint8_t hb[PROTO_HDR_SIZE], body[1000] = {0};
	proto_hdr h = {.version = PROTO_VERSION, .op = OP_ECHO, .seq = 9, .hdr_len = 0, .payload_len = 100000};
	proto_encode_hdr(&h, hb);
	if (step == 2)
		raw_write(&r, hb, 20);
	if (step == 3) {
		raw_write(&r, hb, sizeof(hb));
		raw_write(&r, body, sizeof(body));
	}
	if (step == 4) {
		h.payload_len = sizeof(body);
		proto_encode_hdr(&h, hb);
		raw_write(&r, hb, sizeof(hb));
		raw_write(&r, body, sizeof(body));
		usleep(50000);
	}
	/* dying is closing the socket and the mapping (the kernel does both) */
	pid_t pid = fork();
	if (pid == 0)
		_exit(0); /* a child that inherited nothing of it: the parent's close is the death */
	waitpid(pid, NULL, 0);
	raw_close(&r);
	srv_conn *c = closed_conn(base);
	if (CHECK(c)) {
		CHECK_EQ(c->nclose, 1);
		CHECK_EQ(c->close_err, want_err);
		CHECK_EQ(c->nframes, want_frames);
	}
	CHECK_EQ(wait_segments_gone(), 0);
}

static void test_client_dies(void)
{
	dies_at(0, TRANSPORT_ECLOSED, 0);
	dies_at(1, TRANSPORT_ECLOSED, 0);
	dies_at(2, TRANSPORT_EIO, 0);
	dies_at(3, TRANSPORT_EIO, 0);
	dies_at(4, TRANSPORT_ECLOSED, 1);
}

/* ---- shared regions ---- */

/* Mappings of regions (memfds named "rg-test-region") in this process. */
static int regions_mapped(void)
{
	int n = 0;
	char line[512];
	FILE *f = fopen("/proc/self/maps", "r");
	while (f && fgets(line, sizeof(line), f))
		n += strstr(line, "rg-test-region") != NULL;
	if (f)
		fclose(f);
	return n;
}

/* A memfd of len bytes filled with pat(i + seed); sealed against shrinking
 * unless unsealed. */
static int region_fd(size_t len, uint32_t seed, int sealed)
{
	int fd = memfd_create("rg-test-region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	CHECK(fd >= 0 && ftruncate(fd, (off_t)len) == 0);
	uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	for (size_t i = 0; i < len; i++)
		p[i] = pat((uint32_t)(i + seed));
	munmap(p, len);
	if (sealed)
		CHECK_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), 0);
	return fd;
}

/* The connection is freed on the loop once its handles closed. */
static int wait_regions_gone(void)
{
	for (int i = 0; i < 100 && regions_mapped(); i++)
		usleep(20000);
	return regions_mapped();
}

static srv_conn *conn_at(int i)
{
	for (int k = 0; k < 200 && S.n <= i; k++)
		usleep(5000);
	return S.n > i ? S.conns[i] : NULL;
}

/* The server maps what the client shares, finds exactly the bytes asked for,
 * refuses ranges outside, sees the client's writes and the client its own;
 * a dropped region and every region of a closed connection are unmapped. */
static void test_regions(void)
{
	int base = S.n;
	transport_conn *c = connect_shm();
	srv_conn *r = c ? conn_at(base) : NULL;
	if (!CHECK(r))
		return;
	const size_t len = 3 * 4096 + 100;
	int fd = region_fd(len, 7, 1);
	uint32_t id = 0, id2 = 0;
	CHECK_EQ(transport_region_share(c, fd, len, &id), TRANSPORT_OK);
	CHECK(id != 0);
	uint8_t *mine = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	void *p = NULL;
	static const size_t offs[] = {0, 1, 4095, 4096, 3 * 4096 + 99};
	for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
		size_t n = len - offs[i];
		if (CHECK_EQ(transport_region_get(r->c, id, offs[i], n, &p), TRANSPORT_OK)) {
			int same = 1;
			for (size_t k = 0; k < n; k++)
				same &= ((uint8_t *)p)[k] == pat((uint32_t)(offs[i] + k + 7));
			CHECK(same);
		}
	}
	CHECK_EQ(transport_region_get(r->c, id, 0, len, &p), TRANSPORT_OK);
	((uint8_t *)p)[5] = 0xab; /* the server writes (a D2H copy), the client reads */
	CHECK_EQ(mine[5], 0xab);
	mine[6] = 0xcd;
	CHECK_EQ(((uint8_t *)p)[6], 0xcd);
	CHECK_EQ(transport_region_get(r->c, id, len, 0, &p), TRANSPORT_OK); /* the empty range at the end */
	CHECK_EQ(transport_region_get(r->c, id, 0, len + 1, &p), TRANSPORT_EADDR);
	CHECK_EQ(transport_region_get(r->c, id, len, 1, &p), TRANSPORT_EADDR);
	CHECK_EQ(transport_region_get(r->c, id, len + 1, 0, &p), TRANSPORT_EADDR);
	CHECK_EQ(transport_region_get(r->c, id, UINT64_MAX, 2, &p), TRANSPORT_EADDR);
	CHECK_EQ(transport_region_get(r->c, id, 2, UINT64_MAX, &p), TRANSPORT_EADDR);
	CHECK_EQ(transport_region_get(r->c, id + 100, 0, 1, &p), TRANSPORT_EADDR);
	CHECK_EQ(transport_region_drop(r->c, id), TRANSPORT_OK);
	CHECK_EQ(transport_region_get(r->c, id, 0, 1, &p), TRANSPORT_EADDR);
	CHECK_EQ(transport_region_drop(r->c, id), TRANSPORT_EADDR);
	munmap(mine, len);
	CHECK_EQ(regions_mapped(), 0);

	/* one left mapped when the client goes: unmapped with the connection */
	fd = region_fd(8192, 1, 1);
	CHECK_EQ(transport_region_share(c, fd, 8192, &id2), TRANSPORT_OK);
	close(fd);
	CHECK(id2 != id);
	echo(c, 2, 10);
	CHECK_EQ(regions_mapped(), 0); /* known, but mapped only at its first lookup */
	CHECK_EQ(transport_region_get(r->c, id2, 8000, 192, &p), TRANSPORT_OK);
	echo(c, 1, 10); /* frames still flow beside the regions */
	CHECK_EQ(regions_mapped(), 1);
	transport_close(c);
	srv_conn *cl = closed_conn(base);
	if (CHECK(cl))
		CHECK_EQ(cl->close_err, TRANSPORT_ECLOSED);
	CHECK_EQ(wait_regions_gone(), 0);
	CHECK_EQ(wait_segments_gone(), 0);
}

/* A client that breaks the socket's protocol: an unsealed memfd, a region
 * message without a descriptor, a byte that means nothing, a region larger
 * than its memfd: its connection ends (EIO), the server goes on. */
static void region_hostile(int how)
{
	int base = S.n;
	raw rw;
	srv_conn *r = CHECK_EQ(raw_connect(&rw, 1), 0) ? conn_at(base) : NULL;
	if (!CHECK(r)) {
		raw_close(&rw);
		return;
	}
	uint32_t id = 1;
	int fd = -1;
	void *p;
	if (how == 0) {
		fd = region_fd(4096, 0, 0);
		CHECK_EQ(tp_shm_region_send(rw.fd, fd, id, 4096), TRANSPORT_OK);
	} else if (how == 1) {
		shm_region_msg m = {.kind = SHM_MSG_REGION, .id = id, .len = 4096};
		CHECK_EQ(send(rw.fd, &m, sizeof(m), MSG_NOSIGNAL), (ssize_t)sizeof(m));
	} else if (how == 2) {
		CHECK_EQ(send(rw.fd, "x", 1, MSG_NOSIGNAL), 1);
	} else if (how == 3) {
		fd = region_fd(4096, 0, 1);
		CHECK_EQ(tp_shm_region_send(rw.fd, fd, id, 8192), TRANSPORT_OK);
	} else {
		/* more regions than may wait unlooked-up */
		fd = region_fd(4096, 0, 1);
		for (uint32_t k = 1; k <= SHM_REGION_WAITING + 1; k++)
			tp_shm_region_send(rw.fd, fd, k, 4096);
		id = SHM_REGION_WAITING + 1;
	}
	if (fd >= 0)
		close(fd);
	CHECK_EQ(transport_region_get(r->c, id, 0, 1, &p), TRANSPORT_EADDR);
	srv_conn *cl = closed_conn(base);
	if (CHECK(cl))
		CHECK_EQ(cl->close_err, TRANSPORT_EIO);
	raw_close(&rw);
	CHECK_EQ(wait_regions_gone(), 0);
	CHECK_EQ(wait_segments_gone(), 0);
}

static void test_regions_hostile(void)
{
	for (int how = 0; how < 5; how++)
		region_hostile(how);
	test_echo(); /* the server serves the next client */
}

/* ---- a server that dies ---- */

/* A child process listening on its own socket: sends the segment, reads
 * after_bytes of calls (0: none), then exits (the client is left waiting). */
static pid_t dying_server(const char *path, size_t after_bytes)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	strcpy(sa.sun_path, path);
	unlink(path);
	int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(lfd, 1) != 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		int fd = accept(lfd, NULL, NULL), memfd;
		void *map;
		shm_ring c2s, s2c;
		if (fd < 0 || tp_shm_seg_create(RING, &memfd, &map) || tp_shm_sock_send_setup(fd, memfd, RING))
			_exit(1);
		tp_shm_seg_rings(map, RING, &c2s, &s2c);
		size_t got = 0;
		while (got < after_bytes) {
			size_t a = tp_shm_ring_avail(&c2s);
			if (a == 0 || a == SHM_RING_BAD) {
				usleep(1000);
				continue;
			}
			tp_shm_ring_get(&c2s, NULL, a);
			tp_shm_ring_release(&c2s);
			got += a;
		}
		usleep(100000); /* the client is waiting by now */
		_exit(0);
	}
	close(lfd);
	return pid;
}

static void test_server_dies(void)
{
	char path[128];
	snprintf(path, sizeof(path), "%s.dying", sock_path);
	transport_addr a;
	char s[200];
	snprintf(s, sizeof(s), "shm://%s", path);
	transport_parse_addr(s, &a);

	/* waiting for a reply */
	pid_t pid = dying_server(path, 1);
	transport_conn *c = NULL;
	if (CHECK(pid > 0) && CHECK_EQ(transport_connect_within(&a, 5000, &c), TRANSPORT_OK)) {
		uint8_t b[100] = {0};
		CHECK_EQ(send_frame(c, 1, NULL, 0, b, sizeof(b)), TRANSPORT_OK);
		transport_frame f;
		CHECK_EQ(transport_recv_frame(c, &f, NULL, NULL), TRANSPORT_ECLOSED);
		transport_close(c);
	}
	if (pid > 0)
		waitpid(pid, NULL, 0);

	/* waiting for space: 1 MiB into a 64 KiB ring nobody reads */
	pid = dying_server(path, 0);
	c = NULL;
	if (CHECK(pid > 0) && CHECK_EQ(transport_connect_within(&a, 5000, &c), TRANSPORT_OK)) {
		uint8_t *b = calloc(1, 1 << 20);
		CHECK_EQ(send_frame(c, 1, NULL, 0, b, 1 << 20), TRANSPORT_ECLOSED);
		CHECK_EQ(send_frame(c, 2, NULL, 0, b, 1), TRANSPORT_ECLOSED); /* latched */
		free(b);
		transport_close(c);
	}
	if (pid > 0)
		waitpid(pid, NULL, 0);

	/* a socket nobody listens on, and one whose server never sends the segment */
	unlink(path);
	CHECK_EQ(transport_connect_within(&a, 200, &c), TRANSPORT_ECONNECT);
	int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	strcpy(sa.sun_path, path);
	if (CHECK(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(lfd, 1) == 0))
		CHECK_EQ(transport_connect_within(&a, 200, &c), TRANSPORT_ETIMEDOUT);
	close(lfd);
	unlink(path);
}

static void test_addr(void)
{
	transport_addr a;
	CHECK_EQ(transport_parse_addr("shm:///run/x/sock", &a), TRANSPORT_OK);
	CHECK(strcmp(a.scheme, "shm") == 0 && strcmp(a.host, "/run/x/sock") == 0 && a.port == 0);
	CHECK_EQ(transport_parse_addr("shm://relative/sock", &a), TRANSPORT_EADDR);
	char longp[200] = "shm:///";
	memset(longp + 7, 'a', 150);
	CHECK_EQ(transport_parse_addr(longp, &a), TRANSPORT_EADDR);
}

int main(void)
{
	setenv("REMOTE_GPU_SHM_RING_KB", "64", 1);
	setenv("REMOTE_GPU_SHM_SPIN_US", "1000", 1);
	signal(SIGPIPE, SIG_IGN);
	snprintf(sock_path, sizeof(sock_path), "/tmp/rg-test-shm-%d.sock", (int)getpid());

	test_ring_wrap();
	test_ring_flags();
	test_ring_hostile();
	test_addr();

	transport_addr a;
	char s[200];
	snprintf(s, sizeof(s), "shm://%s", sock_path);
	transport_parse_addr(s, &a);
	uv_loop_init(&S.loop);
	if (!CHECK_EQ(transport_listen(&S.loop, &a, &CB, NULL, &S.l), TRANSPORT_OK))
		return check_summary("test_shm");
	pthread_create(&S.thread, NULL, loop_thread, NULL);

	test_echo();
	test_hostile();
	test_client_dies();
	test_regions();
	test_regions_hostile();
	test_server_dies();

	transport_listener_close(S.l);
	pthread_join(S.thread, NULL);
	uv_loop_close(&S.loop);
	CHECK(access(sock_path, F_OK) != 0); /* the listener removed its socket */
	CHECK_EQ(segments_held(), 0);
	return check_summary("test_shm");
}
