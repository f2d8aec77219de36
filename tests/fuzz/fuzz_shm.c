/*
 * libFuzzer target for the shm server's ring parser: the real listener
 * (transport/shm/shm_server.c) on a libuv loop in this thread, and a client
 * that maps the segment itself and does to it what the input says. A client
 * controls every byte of the call ring and both rings' positions and flags;
 * nothing it writes may make the server crash, read or write out of bounds,
 * leak, or hang, and the connection ends with exactly one on_close.
 *
 * The same client also writes the socket beside the rings (doorbells and the
 * shared regions' messages with their memfds, shm_region.c), and the server
 * looks regions up with whatever offsets and lengths the input says: a
 * lookup that succeeds must answer bytes inside the region (touched here, so
 * ASan sees any other answer).
 *
 * Input: a sequence of commands, each a byte (mod 8) and its operands:
 *   0 LEN(2) BYTES  write up to LEN bytes into the call ring, publish, ring
 *   1 U32           set the call ring's head to any value, ring
 *   2 U32           set the reply ring's tail to any value
 *   3 B             set the call ring's sleep and wait flags
 *   4 HLEN PLEN(2)  write a well-formed frame header (so inputs reach the
 *                   msgpack and payload states), publish, ring
 *   5 LEN BYTES     write up to LEN bytes on the socket as they are
 *   6 ID(4) LEN(2) F  a region message for a memfd of 8 KiB (sealed when F
 *                   is odd) claiming LEN * 64 bytes
 *   7 ID(4) OFF(2) LEN(2)  the server looks up region ID [OFF * 8, +LEN * 8)
 * The loop runs after each command; the client closes at the end.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "shm_int.h"

static uv_loop_t loop;
static transport_listener *lst;
static char path[108];
static int accepted, closed;
static transport_conn *sconn; /* the server's side of the connection */

static void *on_accept(void *ctx, transport_conn *c)
{
	accepted++;
	return sconn = c;
}

/* A payload's destination is ours until on_frame gets it, or, when the
 * connection ends inside the payload, until on_close. */
static void *dest;

static void *payload_dest(void *ctx, const transport_frame *f)
{
	return dest = f->hdr.payload_len <= (1u << 20) ? malloc(f->hdr.payload_len) : NULL;
}

static void on_frame(void *ctx, transport_frame *f)
{
	transport_frame_free(f);
	free(f->payload);
	dest = NULL;
}

static void on_close(void *ctx, int err)
{
	closed++;
	sconn = NULL;
	free(dest);
	dest = NULL;
	transport_close(ctx);
}

static const transport_server_cb cb = {
	.on_accept = on_accept, .payload_dest = payload_dest, .on_frame = on_frame, .on_close = on_close};

static void setup(void)
{
	setenv("REMOTE_GPU_SHM_RING_KB", "64", 1);
	setenv("REMOTE_GPU_SHM_SPIN_US", "0", 1);
	setenv("REMOTE_GPU_LOG", "error", 1);
	snprintf(path, sizeof(path), "/tmp/rg-fuzz-shm-%d.sock", (int)getpid());
	uv_loop_init(&loop);
	transport_addr a = {.scheme = "shm"};
	strcpy(a.host, path);
	if (transport_listen(&loop, &a, &cb, NULL, &lst) != TRANSPORT_OK)
		abort();
}

static void spin_loop(void)
{
	for (int i = 0; i < 3; i++)
		uv_run(&loop, UV_RUN_NOWAIT);
}

static uint32_t u32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint32_t u16(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }

#define REGION_BYTES 8192

static void region_message(int sock, uint32_t id, uint64_t len, int sealed)
{
	int fd = memfd_create("rg-fuzz-region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0 || ftruncate(fd, REGION_BYTES) != 0)
		abort();
	if (sealed)
		fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW);
	tp_shm_region_send(sock, fd, id, len);
	close(fd);
}

static void region_lookup(uint32_t id, uint64_t off, uint64_t len)
{
	void *p;
	if (!sconn || transport_region_get(sconn, id, off, len, &p) != TRANSPORT_OK || len == 0)
		return;
	volatile uint8_t *b = p;
	(void)b[0];
	(void)b[len - 1];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int once;
	if (!once++)
		setup();

	int want = accepted + 1, want_closed = closed + 1;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		abort();
	for (int i = 0; i < 100 && accepted < want; i++)
		uv_run(&loop, UV_RUN_NOWAIT);
	int memfd;
	uint32_t ring;
	void *map;
	shm_ring c2s, s2c;
	if (tp_shm_sock_recv_setup(fd, tp_deadline(5000), &memfd, &ring) != TRANSPORT_OK ||
	    tp_shm_seg_map(memfd, ring, &map) != TRANSPORT_OK)
		abort();
	close(memfd);
	tp_shm_seg_rings(map, ring, &c2s, &s2c);

	size_t i = 0;
	while (i < size) {
		uint8_t op = data[i++] % 8;
		if (op == 0 && i + 2 <= size) {
			size_t n = (size_t)data[i] | (size_t)data[i + 1] << 8;
			i += 2;
			if (n > size - i)
				n = size - i;
			size_t sp = tp_shm_ring_space(&c2s);
			if (sp == SHM_RING_BAD)
				sp = 0;
			if (n > sp)
				n = sp;
			tp_shm_ring_put(&c2s, data + i, n);
			i += n;
			tp_shm_ring_publish(&c2s);
			tp_shm_doorbell(fd);
		} else if (op == 1 && i + 4 <= size) {
			atomic_store(&c2s.ctl->head, u32(data + i));
			i += 4;
			tp_shm_doorbell(fd);
		} else if (op == 2 && i + 4 <= size) {
			atomic_store(&s2c.ctl->tail, u32(data + i));
			i += 4;
		} else if (op == 3 && i + 1 <= size) {
			atomic_store(&c2s.ctl->cons_sleep, data[i] & 1);
			atomic_store(&c2s.ctl->prod_wait, data[i] >> 1);
			i++;
		} else if (op == 4 && i + 3 <= size) {
			proto_hdr h = {.version = PROTO_VERSION, .op = 1, .seq = 1, .hdr_len = data[i],
				       .payload_len = (uint64_t)data[i + 1] | (uint64_t)data[i + 2] << 8};
			uint8_t hb[PROTO_HDR_SIZE];
			i += 3;
			proto_encode_hdr(&h, hb);
			if (tp_shm_ring_space(&c2s) >= sizeof(hb) && tp_shm_ring_space(&c2s) != SHM_RING_BAD) {
				tp_shm_ring_put(&c2s, hb, sizeof(hb));
				tp_shm_ring_publish(&c2s);
				tp_shm_doorbell(fd);
			}
		} else if (op == 5 && i + 1 <= size) {
			size_t n = data[i++];
			if (n > size - i)
				n = size - i;
			if (n)
				(void)!send(fd, data + i, n, MSG_NOSIGNAL | MSG_DONTWAIT);
			i += n;
		} else if (op == 6 && i + 7 <= size) {
			region_message(fd, u32(data + i), (uint64_t)u16(data + i + 4) * 64, data[i + 6] & 1);
			i += 7;
		} else if (op == 7 && i + 8 <= size) {
			region_lookup(u32(data + i), (uint64_t)u16(data + i + 4) * 8, (uint64_t)u16(data + i + 6) * 8);
			i += 8;
		} else {
			break;
		}
		spin_loop();
	}
	munmap(map, shm_seg_size(ring));
	close(fd);
	for (int k = 0; k < 1000 && closed < want_closed; k++)
		uv_run(&loop, UV_RUN_NOWAIT);
	if (closed != want_closed)
		abort(); /* the connection must end, once */
	/* the handles' close callbacks, which unmap the server's side */
	for (int k = 0; k < 3; k++)
		uv_run(&loop, UV_RUN_NOWAIT);
	return 0;
}
