/*
 * shm server: a unix-socket listener on the libuv loop of remote-gpud, and
 * the connections it serves (shm_seg.c has the design).
 *
 * Accepting. The listener (shm:///path: a socket file made 0600, in a folder
 * the operator keeps 0700) refuses peers of another uid (SO_PEERCRED). With
 * on_accept_fd the socket goes to another process as is (remote-gpud: a
 * session process), which serves it with transport_adopt(..., "shm", ...):
 * the segment is made there, by the process that serves it, and goes with it.
 *
 * Reading (loop thread). A connection is watched by a uv_poll on its socket
 * (doorbells, end of stream) and, while it is busy, by a uv_idle that polls
 * the c2s ring on every turn of the loop (hot) until REMOTE_GPU_SHM_SPIN_US
 * passed without a byte; then it sets its sleep flag and waits for a doorbell.
 * Bytes are parsed by the servers' frame assembler (frame_rx.h, tcp's too),
 * copied out of the ring first: the header into the connection's own buffer
 * before proto_decode_hdr checks it, the msgpack part into a fresh
 * allocation, the payload into what payload_dest chose. The client's head is
 * read once per look and checked against our tail (tp_shm_ring_avail): a client
 * that writes nonsense there ends its connection (TRANSPORT_EIO), nothing
 * more. One look takes at most LOOK_BUDGET bytes, so one streaming client
 * cannot hold the loop from the others (thread mode).
 *
 * Writing (any thread): send_lock, then tp_shm_ring_write into s2c.
 *
 * Closing, as tcp_server.c: other threads only record the request and wake
 * the loop (transport_loopq); the loop thread tears down: shut set, senders
 * woken (socket shut down, futex woken) and waited for (send_lock), on_close
 * once, the handles closed; the segment is unmapped and the socket closed when
 * both handles are closed; the object is freed once the upper layer also
 * called transport_close.
 */
#define _GNU_SOURCE
#include "shm_int.h"
#include "frame_rx.h"
#include "loopq.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "rg_clock.h"
#include "rg_list.h"
#include "rg_log.h"

#define LOOK_BUDGET (4u << 20) /* bytes one look at a ring takes at most */

typedef struct shm_listener shm_listener;

typedef struct sconn {
	transport_conn base;
	shm_listener *l;
	void *conn_ctx;
	int fd;
	int memfd;
	void *map;
	size_t map_len;
	uv_poll_t poll;
	uv_idle_t idle;
	int nhandles;      /* of poll and idle, not yet closed (loop thread) */
	int hot;           /* idle started */
	uint64_t active_ns; /* when bytes last came */
	int peer_gone;
	uint64_t spin_ns;
	rg_list node;
	rg_list req_node;

	tp_sconn own; /* its owners, the close */
	atomic_int shut;

	pthread_mutex_t send_lock;
	shm_ring tx; /* s2c */
	int send_err;

	/* loop thread */
	shm_ring rx; /* c2s */
	frame_rx frx;

	shm_regions rg; /* the socket's reader and the client's shared regions */
} sconn;

struct shm_listener {
	transport_listener base;
	int lfd; /* -1: an adopted connection's listener */
	uv_poll_t lpoll;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	uint32_t ring_size;
	uint64_t spin_ns;
};

static int server_sendv(transport_conn *c, const struct iovec *iov, int iovcnt);
static int server_reg_mem(transport_conn *c, void *addr, size_t len, transport_mr **out);
static int server_dereg_mem(transport_conn *c, transport_mr *mr);
static void server_shutdown(transport_conn *c);
static void server_close(transport_conn *c);
static int server_region_get(transport_conn *c, uint32_t id, uint64_t off, uint64_t len, void **addr);
static int server_region_drop(transport_conn *c, uint32_t id);
static int shm_listen(uv_loop_t *loop, const transport_addr *a, const transport_server_cb *cb, void *ctx,
		      transport_listener **out);
static int shm_adopt(uv_loop_t *loop, int fd, const transport_server_cb *cb, void *ctx, transport_listener **out);
static void teardown(sconn *c, int err);
static void look(sconn *c);

static const transport_ops shm_server_ops = {
	.scheme = "shm",
	.caps = SHM_CAPS,
	.sendv = server_sendv,
	.recv_frame = tp_server_recv_frame,
	.reg_mem = server_reg_mem,
	.dereg_mem = server_dereg_mem,
	.shutdown = server_shutdown,
	.close = server_close,
	.region_get = server_region_get,
	.region_drop = server_region_drop,
};

const transport_provider tp_shm_listen_provider = {
	.scheme = "shm",
	.listen = shm_listen,
	.listener_close = tp_listener_close,
	.adopt = shm_adopt,
};

/* ---- listener ---- */

static void lpoll_close_cb(uv_handle_t *h)
{
	shm_listener *l = h->data;
	close(l->lfd);
	if (l->path[0])
		unlink(l->path);
	tp_listener_close_cb(h);
}

static void end_conn(rg_list *node) { teardown(RG_CONTAINER_OF(node, sconn, node), TRANSPORT_ECLOSED); }

static void on_async(uv_async_t *a)
{
	shm_listener *l = a->data;

	for (rg_list *n; (n = tp_loopq_pop(&l->base.q));)
		teardown(RG_CONTAINER_OF(n, sconn, req_node), TRANSPORT_ECLOSED);
	if (!tp_listener_close_start(&l->base, end_conn))
		return;
	if (l->lfd >= 0)
		uv_close((uv_handle_t *)&l->lpoll, lpoll_close_cb);
	uv_close((uv_handle_t *)&l->base.q.async, tp_listener_close_cb);
}

static shm_listener *listener_new(uv_loop_t *loop, const transport_server_cb *cb, void *ctx)
{
	shm_listener *l = calloc(1, sizeof(*l));
	if (!l)
		return NULL;
	if (tp_loopq_init(&l->base.q, loop, on_async, l) != 0) {
		free(l);
		return NULL;
	}
	tp_listener_init(&l->base, &tp_shm_listen_provider, loop, cb, ctx);
	l->lfd = -1;
	l->ring_size = tp_shm_ring_size_setting();
	l->spin_ns = tp_shm_spin_ns();
	l->base.nhandles = 1; /* the async */
	return l;
}


/* Only the server's own user (or root) may come in: the socket's folder
 * should already see to that, this holds if it does not. */
static int peer_allowed(int fd, char *peer, size_t len)
{
	long uid;
	tp_shm_peer_name(fd, peer, len, &uid);
	if (uid == (long)geteuid() || uid == 0)
		return 1;
	LOG_WARN("transport", "%s: another user's process: refused", peer);
	return 0;
}

static void conn_start(shm_listener *l, int fd);

static void on_connection(uv_poll_t *p, int status, int events)
{
	shm_listener *l = p->data;
	for (;;) {
		int fd = accept4(l->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
				LOG_WARN("transport", "shm accept: %s", strerror(errno));
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return;
		}
		char peer[64];
		if (tp_loopq_closing(&l->base.q) || !peer_allowed(fd, peer, sizeof(peer))) {
			close(fd);
			continue;
		}
		if (l->base.cb.on_accept_fd)
			l->base.cb.on_accept_fd(l->base.ctx, fd, peer); /* it is theirs now */
		else
			conn_start(l, fd);
	}
}

/* A socket file at path that nobody answers on is a dead server's: ours to
 * replace. One a live server answers on is not. */
static int path_free(const char *path)
{
	struct stat st;
	if (lstat(path, &st) != 0)
		return errno == ENOENT;
	if (!S_ISSOCK(st.st_mode))
		return 0;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int live = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	if (fd >= 0)
		close(fd);
	return !live && unlink(path) == 0;
}

static int shm_listen(uv_loop_t *loop, const transport_addr *a, const transport_server_cb *cb, void *ctx,
		      transport_listener **out)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	*out = NULL;
	if (strlen(a->host) >= sizeof(sa.sun_path))
		return TRANSPORT_EADDR;
	strcpy(sa.sun_path, a->host);
	if (!path_free(a->host)) {
		LOG_ERROR("transport", "cannot listen on shm://%s: the path is in use", a->host);
		return TRANSPORT_EADDR;
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	/* 0600 before listen(): nobody can connect in between. */
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || chmod(a->host, 0600) != 0 ||
	    listen(fd, SOMAXCONN) != 0) {
		LOG_ERROR("transport", "cannot listen on shm://%s: %s", a->host, strerror(errno));
		if (fd >= 0) {
			close(fd);
			unlink(a->host);
		}
		return TRANSPORT_EADDR;
	}
	shm_listener *l = listener_new(loop, cb, ctx);
	if (!l || uv_poll_init(loop, &l->lpoll, fd) != 0) {
		close(fd);
		unlink(a->host);
		if (l) {
			l->base.close_started = 1;
			uv_close((uv_handle_t *)&l->base.q.async, tp_listener_close_cb);
		}
		return TRANSPORT_ENOMEM;
	}
	l->base.port = 0;
	l->lfd = fd;
	strcpy(l->path, a->host);
	l->lpoll.data = l;
	l->base.nhandles++;
	uv_poll_start(&l->lpoll, UV_READABLE, on_connection);
	LOG_INFO("transport", "listening on shm://%s", a->host);
	*out = &l->base;
	return TRANSPORT_OK;
}

/* transport_adopt(..., "shm", ...): serves an accepted unix socket. */
static int shm_adopt(uv_loop_t *loop, int fd, const transport_server_cb *cb, void *ctx, transport_listener **out)
{
	char peer[64];
	*out = NULL;
	shm_listener *l = listener_new(loop, cb, ctx);
	if (!l) {
		close(fd);
		return TRANSPORT_ENOMEM;
	}
	if (!peer_allowed(fd, peer, sizeof(peer))) {
		close(fd);
		l->base.close_started = 1;
		uv_close((uv_handle_t *)&l->base.q.async, tp_listener_close_cb);
		return TRANSPORT_ECONNECT;
	}
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	*out = &l->base;
	conn_start(l, fd);
	return TRANSPORT_OK;
}

/* ---- connections ---- */

/* Last of all, after the upper layer's transport_close: until then it may
 * still use the regions' mappings (copies in flight when the client died). */
static void conn_free(tp_sconn *o)
{
	sconn *c = (sconn *)((char *)o - offsetof(sconn, own));
	tp_shm_regions_free(&c->rg);
	pthread_mutex_destroy(&c->send_lock);
	free(c);
}

static void conn_close_cb(uv_handle_t *h)
{
	sconn *c = h->data;
	shm_listener *l = c->l;
	if (--c->nhandles > 0)
		return;
	/* No sender is left (teardown held send_lock after shut), no reader. */
	munmap(c->map, c->map_len);
	close(c->memfd);
	tp_shm_regions_detach(&c->rg);
	close(c->fd);
	rg_list_del(&c->node);
	c->l = NULL;
	tp_sconn_closed(&c->own, &l->base);
}

static void poll_cb(uv_poll_t *p, int status, int events);

static void conn_start(shm_listener *l, int fd)
{
	sconn *c = calloc(1, sizeof(*c));
	long uid;
	if (!c) {
		close(fd);
		return;
	}
	c->base.ops = &shm_server_ops;
	c->l = l;
	c->fd = fd;
	c->memfd = -1;
	tp_shm_regions_init(&c->rg, fd, "shm");
	tp_sconn_init(&c->own, conn_free);
	pthread_mutex_init(&c->send_lock, NULL);
	atomic_init(&c->shut, 0);
	rg_list_init(&c->node);
	rg_list_init(&c->req_node);
	tp_shm_peer_name(fd, c->base.peer, sizeof(c->base.peer), &uid);
	snprintf(c->rg.peer, sizeof(c->rg.peer), "%s", c->base.peer);
	if (tp_shm_seg_create(l->ring_size, &c->memfd, &c->map) != TRANSPORT_OK ||
	    uv_poll_init(l->base.loop, &c->poll, fd) != 0) {
		if (c->map)
			munmap(c->map, shm_seg_size(l->ring_size));
		if (c->memfd >= 0)
			close(c->memfd);
		close(fd);
		tp_sconn_fini(&c->own);
		conn_free(&c->own);
		return;
	}
	c->map_len = shm_seg_size(l->ring_size);
	tp_shm_seg_rings(c->map, l->ring_size, &c->rx, &c->tx);
	c->spin_ns = l->spin_ns;
	tp_shm_ring_sleep_prepare(&c->rx); /* asleep: the first frame rings */
	uv_idle_init(l->base.loop, &c->idle);
	c->poll.data = c->idle.data = c;
	c->nhandles = 2;
	l->base.nhandles++;
	rg_list_add_tail(&l->base.conns, &c->node);

	c->conn_ctx = tp_listener_admit(&l->base, &c->base);
	if (!c->conn_ctx) {
		LOG_INFO("transport", "%s: refused by the upper layer", c->base.peer);
		c->own.released = 1;
		teardown(c, TRANSPORT_ECLOSED);
		return;
	}
	if (tp_shm_sock_send_setup(fd, c->memfd, l->ring_size) != TRANSPORT_OK) {
		LOG_INFO("transport", "%s: cannot send the segment: %s", c->base.peer, strerror(errno));
		teardown(c, TRANSPORT_EIO);
		return;
	}
	LOG_DEBUG("transport", "accepted %s", c->base.peer);
	uv_poll_start(&c->poll, UV_READABLE | UV_DISCONNECT, poll_cb);
}

/* ---- teardown ---- */

static void request_teardown(sconn *c, int err)
{
	pthread_mutex_lock(&c->own.lock);
	if (!c->own.close_err)
		c->own.close_err = err;
	if (!c->own.torn_down)
		tp_loopq_post(&c->l->base.q, &c->req_node);
	pthread_mutex_unlock(&c->own.lock);
}

static void teardown(sconn *c, int err)
{
	pthread_mutex_lock(&c->own.lock);
	if (c->own.torn_down) {
		pthread_mutex_unlock(&c->own.lock);
		return;
	}
	c->own.torn_down = 1;
	if (!c->own.close_err)
		c->own.close_err = err;
	err = c->own.close_err;
	atomic_store(&c->shut, 1);
	shutdown(c->fd, SHUT_RDWR); /* the client sees the end at once */
	pthread_mutex_unlock(&c->own.lock);
	tp_shm_futex_wake(&c->tx.ctl->tail); /* a sender napping for space */

	tp_loopq_cancel(&c->l->base.q, &c->req_node);
	uv_poll_stop(&c->poll);
	uv_idle_stop(&c->idle);
	pthread_mutex_lock(&c->send_lock); /* no sender is inside the ring now */
	pthread_mutex_unlock(&c->send_lock);

	tp_frame_rx_drop(&c->frx); /* a frame cut short */
	if (c->conn_ctx) {
		LOG_DEBUG("transport", "%s: closed: %s", c->base.peer, transport_strerror(err));
		if (c->l->base.cb.on_close)
			c->l->base.cb.on_close(c->conn_ctx, err);
	}
	uv_close((uv_handle_t *)&c->poll, conn_close_cb);
	uv_close((uv_handle_t *)&c->idle, conn_close_cb);
}

/* ---- receive ---- */

static int stopped(sconn *c)
{
	if (!atomic_load(&c->shut))
		return 0;
	teardown(c, TRANSPORT_ECLOSED);
	return 1;
}

/* Takes up to avail bytes of the ring into the frame being assembled: the
 * bytes taken, or a negative error (the connection ends). *cb_ran: a
 * callback ran (the upper layer may have shut the connection down). */
static long parse(sconn *c, size_t avail, int *cb_ran)
{
	uint8_t *dst;
	size_t k = tp_frame_rx_want(&c->frx, &dst);
	if (k > avail)
		k = avail;
	tp_shm_ring_get(&c->rx, dst, k);
	int r = tp_frame_rx_took(&c->frx, k, &c->l->base.cb, c->conn_ctx, c->base.peer);
	*cb_ran = r > 0;
	return r < 0 ? r : (long)k;
}

/* The wait for the client's bytes: hot (the idle polls) or asleep (a doorbell
 * wakes the poll). */
static void idle_cb(uv_idle_t *h);

static void go_hot(sconn *c)
{
	if (!c->hot) {
		c->hot = 1;
		uv_idle_start(&c->idle, idle_cb);
	}
}

static void go_cold(sconn *c)
{
	if (tp_shm_ring_sleep_prepare(&c->rx) != 0) {
		tp_shm_ring_sleep_cancel(&c->rx);
		return; /* bytes came meanwhile: stay hot */
	}
	c->hot = 0;
	uv_idle_stop(&c->idle);
}

/* Takes what the ring holds (up to LOOK_BUDGET), frame by frame. */
static void look(sconn *c)
{
	size_t taken = 0;
	while (taken < LOOK_BUDGET && !c->own.torn_down) {
		size_t avail = tp_shm_ring_avail(&c->rx);
		if (avail == SHM_RING_BAD) {
			LOG_WARN("transport", "%s: the call ring's head is out of range", c->base.peer);
			teardown(c, TRANSPORT_EIO);
			return;
		}
		if (avail == 0)
			break;
		if (avail > LOOK_BUDGET - taken)
			avail = LOOK_BUDGET - taken;
		while (avail > 0) {
			int cb_ran;
			long k = parse(c, avail, &cb_ran);
			if (k < 0) {
				teardown(c, (int)k);
				return;
			}
			avail -= (size_t)k;
			taken += (size_t)k;
			if (cb_ran && stopped(c))
				return;
		}
		if (tp_shm_ring_release(&c->rx))
			tp_shm_futex_wake(&c->rx.ctl->tail);
	}
	if (taken) {
		c->active_ns = rg_clock_ns();
		go_hot(c);
	}
}

static void idle_cb(uv_idle_t *h)
{
	sconn *c = h->data;
	look(c);
	if (!c->own.torn_down && c->hot && rg_clock_ns() - c->active_ns > c->l->spin_ns)
		go_cold(c);
}

/* Doorbells, or the client's end. */
static void poll_cb(uv_poll_t *p, int status, int events)
{
	sconn *c = p->data;
	if (tp_shm_regions_drain(&c->rg) != TRANSPORT_OK) {
		teardown(c, TRANSPORT_EIO);
		return;
	}
	pthread_mutex_lock(&c->rg.lock);
	if (c->rg.gone || status < 0)
		c->peer_gone = 1;
	pthread_mutex_unlock(&c->rg.lock);
	look(c);
	if (c->own.torn_down)
		return;
	if (c->peer_gone) {
		int at_boundary = frame_rx_at_boundary(&c->frx) && tp_shm_ring_avail(&c->rx) == 0;
		if (!at_boundary)
			LOG_INFO("transport", "%s: closed in the middle of a frame", c->base.peer);
		teardown(c, at_boundary ? TRANSPORT_ECLOSED : TRANSPORT_EIO);
		return;
	}
	if (!c->hot)
		go_hot(c); /* look again soon; it goes cold by itself */
	c->active_ns = rg_clock_ns();
}

/* ---- connection ops ---- */

static int server_sendv(transport_conn *base, const struct iovec *iov, int iovcnt)
{
	sconn *c = (sconn *)base;
	int err;
	pthread_mutex_lock(&c->send_lock);
	if (atomic_load(&c->shut))
		err = TRANSPORT_ECLOSED;
	else if (c->send_err)
		err = c->send_err;
	else if ((err = tp_shm_ring_write(&c->tx, iov, iovcnt, c->fd, &c->shut, c->spin_ns, NULL)) !=
		     TRANSPORT_OK &&
		 !atomic_load(&c->shut)) {
		c->send_err = err;
		request_teardown(c, err);
	}
	pthread_mutex_unlock(&c->send_lock);
	return err;
}

static int server_reg_mem(transport_conn *c, void *addr, size_t len, transport_mr **out)
{
	return tp_reg_mem_none(c, addr, len, out);
}

static int server_dereg_mem(transport_conn *c, transport_mr *mr) { return tp_dereg_mem_none(c, mr); }

static int server_region_get(transport_conn *base, uint32_t id, uint64_t off, uint64_t len, void **addr)
{
	sconn *c = (sconn *)base;
	int err = tp_shm_regions_get(&c->rg, id, off, len, addr);
	if (err && c->rg.bad)
		request_teardown(c, TRANSPORT_EIO);
	return err;
}

static int server_region_drop(transport_conn *base, uint32_t id)
{
	return tp_shm_regions_drop(&((sconn *)base)->rg, id);
}

static void server_shutdown(transport_conn *base)
{
	sconn *c = (sconn *)base;
	/* Until teardown the segment is mapped and the socket open. */
	pthread_mutex_lock(&c->own.lock);
	if (!atomic_exchange(&c->shut, 1) && !c->own.torn_down) {
		shutdown(c->fd, SHUT_RDWR);
		tp_shm_futex_wake(&c->tx.ctl->tail); /* a sender napping for space */
	}
	pthread_mutex_unlock(&c->own.lock);
	request_teardown(c, TRANSPORT_ECLOSED);
}

static void server_close(transport_conn *base)
{
	server_shutdown(base);
	tp_sconn_release(&((sconn *)base)->own);
}
