/*
 * rdma transport: what the client half (rdma_client.c), the server half
 * (rdma_server.c), the connection core (rdma_ep.c: setup, completions, credits,
 * keepalives; rdma_tx.c: sending frames; rdma_rx.c: receiving them) and the
 * registration cache (rdma_mr.c) share. Not included outside transport/
 * (except by its tests).
 *
 * One connection = one rdma_cm id with one RC queue pair, one completion queue
 * (sends, reads and receives) on a completion channel, and a protection domain
 * of its own: an rkey one peer learns is good only on that peer's queue pair, so
 * a client can never read another session's buffers.
 *
 * Wire protocol
 * -------------
 * Control messages travel by SEND into the peer's receive buffers (RDMA_NRECV
 * of RDMA_MSG_SIZE bytes each, posted at connect). Each message starts with an
 * rmsg header:
 *
 *   type      FRAME (a new frame), SEGS (more segments of the current frame),
 *             CTRL (nothing but the two counters below), BATCH (several whole
 *             small frames back to back: a batch of async calls is one SEND)
 *   flags     LAST (no more segments follow for this frame), NEED (the sender
 *             used its last credit: answer with the credits you owe)
 *   credits   receive buffers the sender reposted since it last said so
 *   acked     how many of the receiver's segments the sender has consumed
 *             (cumulative, mod 2^32)
 *
 * A frame's bytes after its fixed proto header (the msgpack part, then the
 * payload: its "stream") travel in two ways. Bytes that fit travel inline in the
 * FRAME message (a whole small frame is one SEND: eager). The rest is described
 * by segments {addr, rkey, len} in the sender's registered memory, which the
 * receiver pulls with RDMA READ straight into the destination payload_dest
 * chose, in stream order. A segment is either the user's own memory (registered
 * through reg_mem: client pinned memory, zero-copy) or a slot of the sender's
 * bounce ring, into which pageable data is copied chunk by chunk; the receiver
 * reads slot k while the sender fills slot k+1, so the wire does not idle. The
 * receiver READs into the destination directly when it lies in registered
 * memory, else into a landing ring slot that is then copied out (pipelined the
 * same way). After consuming segments the receiver reports them in "acked";
 * that frees bounce slots and, for zero-copy segments, lets the blocked
 * transport_sendv return (the user may then change the buffer).
 *
 * Receiver-driven READ was chosen over sender WRITEs because the destination is
 * only known at the receiver, after the msgpack part arrived (payload_dest): a
 * WRITE would need an extra round trip to learn it.
 *
 * Credits: a side may send only while it holds credits (one per receive buffer
 * the peer has posted). Frames and segment lists keep one credit in reserve, so
 * a CTRL (credits, acks) can always go out and two peers that both ran out can
 * not deadlock; a CTRL that spends the last credit carries NEED. Credits owed are
 * piggybacked on every message and sent alone once half the buffers are owed.
 *
 * Faults: every error completion, a DISCONNECTED event, or a local shutdown
 * latches ep->err and moves the QP to the error state, which flushes every
 * outstanding work request; waiters wake and return the latched error. A peer
 * that vanishes without a word (power loss, cable) is found by keepalives: a
 * waiter that heard nothing from the peer for keepalive_ms posts an 8-byte RDMA
 * WRITE to the peer's keepalive word; the peer's NIC acknowledges it without
 * its process, so only a dead host or link fails it, after the QP's ack timeout
 * and retries (about 0.5 s). A sender that waits for credits or acks with no
 * sign of life from the peer's process for timeout_ms fails with
 * TRANSPORT_ETIMEDOUT. Waiting for a reply is not timed out (a kernel may run for
 * an hour); it ends when the peer is found dead.
 *
 * Threads: ep->mu guards the fields marked (mu). The receive side (rx.*) belongs
 * to one thread at a time: the client's transport_recv_frame caller, or the
 * server's loop thread; other threads only set the done flags of reads. Frames
 * are sent whole under send_lock.
 */
#ifndef RDMA_INT_H
#define RDMA_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "rdma_lib.h"
#include "rg_clock.h"
#include "transport_int.h"

/* What rdma connections can do (both halves). */
#define TRDMA_CAPS (TRANSPORT_CAP_REG_MEM | TRANSPORT_CAP_ZERO_COPY | TRANSPORT_CAP_BUSY_POLL)

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the rdma wire format is written in host order: little-endian hosts only"
#endif

#define RDMA_MSG_SIZE 8192            /* one receive buffer: control message + inline bytes */
#define RDMA_NRECV 32                 /* receive buffers = credits the peer starts with */
#define RDMA_NSEND 64                 /* registered send slots */
#define RDMA_CHUNK (256u * 1024)      /* one bounce or landing slot */
#define RDMA_NBOUNCE 8                /* bounce ring (sender, pageable sources) */
#define RDMA_NLANDING 8               /* landing ring (receiver, unregistered destinations) */
#define RDMA_MAX_READS 16             /* RDMA READs in flight per connection */
#define RDMA_SEG_MAX (4u << 20)       /* zero-copy segments are cut here so acks come regularly */
#define RDMA_READ_MAX (1u << 20)      /* one READ straight into registered memory */
#define RDMA_RXSEGS 512               /* announced segments the receiver holds */
#define RDMA_INLINE_WANT 256       /* inline send size asked of the QP (a small frame fits) */
#define RDMA_SQ_DEPTH 128             /* >= RDMA_NSEND + RDMA_MAX_READS + keepalive */
#define RDMA_NSENT 64                 /* zero-copy sends the peer is still reading (sendv_async) */
#define RDMA_PROTO_VERSION 3
/* A spinning side looks at its rdma_cm channel this often, so a peer that left
 * is seen within this, not once a long spin (REMOTE_GPU_RDMA_*SPIN_US) ends. */
#define RDMA_CM_CHECK_NS 100000

enum { RM_FRAME = 1, RM_SEGS = 2, RM_CTRL = 3, RM_BATCH = 4 };
enum { RMF_LAST = 1, RMF_NEED = 2 };

typedef struct rmsg {
	uint8_t type, flags;
	uint16_t credits;
	uint32_t acked;
	uint32_t nsegs; /* rseg entries that follow (BATCH: frames that follow) */
	uint32_t inl;   /* FRAME: stream bytes inline (BATCH: bytes of frames) */
} rmsg;

typedef struct rseg {
	uint64_t addr;
	uint32_t rkey, len;
} rseg;

/* A message is an rmsg, then (FRAME) the frame's proto header and its inline
 * bytes; its rseg list starts at the next multiple of 8. */
#define RDMA_MSG_HDR (sizeof(rmsg))
#define RDMA_FRAME_HDR (RDMA_MSG_HDR + PROTO_HDR_SIZE)
#define RDMA_ALIGN8(x) (((x) + 7u) & ~(size_t)7u)

/* rdma_cm private data, both ways (<= 56 bytes, the limit of a connect request). */
#define RDMA_HELLO_MAGIC 0x44524752u /* "RGRD" */
typedef struct rhello {
	uint32_t magic;
	uint16_t version;
	uint16_t credits;  /* receive buffers posted: the peer's initial credits */
	uint32_t msg_size; /* size of each of them */
	uint32_t ka_rkey;  /* keepalive word the peer may RDMA WRITE */
	uint64_t ka_addr;
	transport_cookie cookie; /* client: the one it was sent here with (rredirect or
				  * transport_connect_cookie), else zero */
} rhello;
/* A connect request carries at most 56 bytes of private data (RDMA_PS_TCP). */
_Static_assert(sizeof(rhello) <= 56, "rhello must fit a connect request's private data");

/* rdma_cm private data of a reject that sends the client to another port of
 * the same host (a session process: transport_server_cb.on_redirect). */
#define RDMA_REDIRECT_MAGIC 0x52444752u /* "RGDR" */
typedef struct rredirect {
	uint32_t magic;
	uint16_t version;
	uint16_t port;
	uint32_t pad;
	transport_cookie cookie; /* to present there (rhello.cookie) */
} rredirect;

/* Tunables, read once from the environment (tp_rdma_conf()). */
typedef struct rdma_conf_t {
	int spin_us;      /* REMOTE_GPU_RDMA_SPIN_US: a client waiter polls the CQ this long before sleeping */
	int server_spin_us; /* REMOTE_GPU_RDMA_SERVER_SPIN_US: the server loop polls on after activity */
	int bulk_spin_us; /* REMOTE_GPU_RDMA_BULK_SPIN_US: either side polls on this long while bulk data moves */
	int keepalive_ms; /* REMOTE_GPU_RDMA_KEEPALIVE_MS: silence before a keepalive probe */
	int timeout_ms;   /* REMOTE_GPU_RDMA_TIMEOUT_MS: a blocked sender's limit without progress */
	int connect_ms;   /* REMOTE_GPU_RDMA_CONNECT_MS: address/route resolution and connect */
	int ack_timeout;  /* QP local ack timeout exponent: 4.096 us * 2^n */
	int retry_count;  /* QP transport retries */
} rdma_conf_t;
const rdma_conf_t *tp_rdma_conf(void);

/* ---- registration cache (rdma_mr.c) ---- */

typedef struct rdma_reg rdma_reg;
typedef struct rdma_regs {
	pthread_mutex_t mu;
	rdma_reg **v; /* sorted by start address */
	int n, cap;
	unsigned hits, misses;
} rdma_regs;

void tp_rdma_regs_init(rdma_regs *r);
/* Deregisters everything left (the connection is going away). */
void tp_rdma_regs_destroy(rdma_regs *r);
/* reg_mem/dereg_mem: one MR per distinct range, shared (reference counted) by
 * registrations of the same or an enclosed range. */
int tp_rdma_regs_add(rdma_regs *r, struct ibv_pd *pd, void *addr, size_t len, transport_mr **out);
int tp_rdma_regs_remove(rdma_regs *r, transport_mr *mr);
/* Is [addr, addr+len) inside one registered MR? Fills lkey/rkey. */
int tp_rdma_regs_find(rdma_regs *r, const void *addr, size_t len, uint32_t *lkey, uint32_t *rkey);

/* ---- connection core (rdma_ep.c, rdma_tx.c, rdma_rx.c) ---- */

/* One RDMA READ in flight (receiver side). */
typedef struct rdma_rd {
	uint64_t off;   /* stream offset it fills */
	uint32_t len;
	int slot;       /* landing slot, or -1 (straight into the target, or skipped) */
	int seg_end;    /* completing it finishes an announced segment */
	int skip;       /* nothing was read: the bytes are being discarded */
	int done;       /* (mu) completion seen */
} rdma_rd;

typedef struct rdma_rx {
	int active;           /* a frame is in progress */
	transport_frame f;
	uint64_t total;       /* stream bytes: hdr_len + payload_len */
	uint64_t issued;      /* stream bytes read, being read or skipped */
	uint64_t filled;      /* stream bytes in place (a prefix) */
	int last;             /* LAST seen: every segment is announced */
	int dest_asked;       /* payload_dest was called */
	int dest_reg;         /* the destination lies in registered memory */
	uint32_t dest_lkey;
	rseg segs[RDMA_RXSEGS]; /* announced, not yet fully issued */
	unsigned sg_head, sg_n;
	uint64_t sg_off;      /* bytes of segs[sg_head] already issued */
	rdma_rd rd[RDMA_MAX_READS];
	unsigned rd_head, rd_n;
	uint32_t landing_free; /* bitmap of idle landing slots */
	uint32_t batch_off;   /* BATCH at the queue's head: where its next frame starts */
	uint32_t batch_left;  /* and how many frames it still holds */
	unsigned lent;        /* 1 + the receive buffer lent with the last frame (0: none) */
} rdma_rx;

/* A work request on the send queue, by sequence number (wr_id). */
enum { SQE_SEND = 1, SQE_READ, SQE_KA };
typedef struct rdma_sqe {
	uint8_t kind; /* SQE_SEND, SQE_READ, SQE_KA */
	uint16_t idx; /* READ: index in rx.rd */
	uint32_t slot_seq; /* SEND: its slot's sequence number */
} rdma_sqe;

typedef struct txf txf;

/* A transport_sendv_async whose zero-copy payload the peer is still reading:
 * done once peer_acked reaches need. */
typedef struct rdma_sent {
	uint32_t need;
	transport_sent_fn done;
	void *ctx;
} rdma_sent;

typedef struct rdma_ep {
	transport_conn *conn; /* for logs (peer name) */
	int server;
	uint32_t max_inline; /* bytes a send may carry inline (the QP's cap) */

	pthread_mutex_t mu;
	pthread_cond_t cv;       /* (mu) broadcast after every batch of progress */
	int cv_waiters;          /* (mu) threads in tp_rdma_ep_wait: no broadcast without them */
	pthread_mutex_t send_lock; /* one frame at a time */

	struct rdma_cm_id *id;
	struct ibv_context *verbs;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	int cq_armed;

	uint8_t *rbuf, *sbuf, *bounce, *landing;
	struct ibv_mr *rbuf_mr, *sbuf_mr, *bounce_mr, *landing_mr, *ka_mr;
	uint64_t *ka; /* [0]: the peer writes here; [1]: what we write to the peer */
	uint64_t peer_ka_addr;
	uint32_t peer_ka_rkey;
	uint32_t peer_msg_size;

	/* send queue (mu) */
	uint64_t sq_posted, sq_done; /* work requests posted / known complete */
	rdma_sqe sqe[RDMA_SQ_DEPTH];
	uint32_t s_posted, s_done;   /* send slots taken / free again, in order */

	/* flow control (mu) */
	int credits;         /* messages we may still send */
	int owed;            /* receive buffers reposted and not yet reported */
	int need_sent;       /* our NEED is unanswered */
	int peer_needs;      /* the peer sent NEED */
	uint32_t rx_acked;   /* the peer's segments we consumed */
	uint32_t ack_sent;   /* rx_acked as last reported */
	uint32_t peer_acked; /* our segments the peer consumed */
	rdma_sent sent[RDMA_NSENT]; /* sendv_async completions waiting for peer_acked, in order */
	unsigned sent_head, sent_n;

	/* sender (send_lock; the counters also under mu) */
	int tx_active;   /* (mu) a send_lock holder is sending: no eager send may cut in */
	struct txf *txf; /* the message being built (rdma_tx.c) */
	uint32_t tx_segs;             /* segments announced so far */
	uint32_t b_seg[RDMA_NBOUNCE]; /* segment number held by each bounce slot */
	uint8_t b_busy[RDMA_NBOUNCE];
	unsigned b_next;

	/* receiver: FRAME/SEGS messages waiting for the receive side, in order (mu) */
	uint16_t rq[RDMA_NRECV];
	uint32_t rq_len[RDMA_NRECV];
	unsigned rq_head, rq_n;
	uint16_t rp[RDMA_NRECV]; /* consumed buffers not reposted yet (tp_rdma_ep_release_recv) */
	unsigned rp_n;
	rdma_rx rx;

	/* liveness (mu) */
	uint64_t last_peer_ns;   /* last message or read completion from the peer */
	uint64_t last_msg_ns;    /* last message from the peer's process */
	int heard;               /* a message came since: tp_rdma_ep_check stamps it */
	atomic_uint_fast64_t heard_n; /* messages from the peer's process (transport_progress) */
	int ka_inflight;
	int err;       /* latched failure; 0 while usable */
	int peer_gone; /* DISCONNECTED seen (frames already received still count) */
	int qp_dead;   /* moved to the error state */

	rdma_regs regs;

	/* statistics (mu), for tests and logs */
	struct {
		uint64_t tx_frames, tx_inline, tx_batches, tx_zc_bytes, tx_bounce_bytes;
		uint64_t rx_frames, rx_inline, rx_direct_bytes, rx_landing_bytes, rx_skip_bytes;
		uint64_t keepalives, ctrl_sent;
	} st;
} rdma_ep;

/* The clock of timeouts and liveness (keepalive_ms, timeout_ms): coarse, so
 * stamping every message costs no system call (rg_clock.h). */
uint64_t tp_rdma_now_ns(void);
const char *tp_rdma_wc_str(int status);

/* Allocates PD, CQ (with channel), QP on id (rdma_create_qp), the registered
 * buffers, and posts every receive. ep->conn and ep->server must be set. */
int tp_rdma_ep_init(rdma_ep *ep, struct rdma_cm_id *id);
/* Applies the peer's hello (credits, message size, keepalive word). */
int tp_rdma_ep_hello(rdma_ep *ep, const void *priv, size_t len);
void tp_rdma_ep_fill_hello(rdma_ep *ep, rhello *h);
/* Destroys the QP, CQ, channel and buffers (not the id, PD or user MRs). */
void tp_rdma_ep_destroy_qp(rdma_ep *ep);
/* Deregisters what users left and deallocates the PD. Last. */
void tp_rdma_ep_free(rdma_ep *ep);

/* (mu) Latches err (first one wins) and moves the QP to the error state. */
void tp_rdma_ep_fail(rdma_ep *ep, int err);

/* (mu) Polls the CQ without blocking and processes what it finds; 1 if anything
 * came, 0 if nothing, < 0 if ibv_poll_cq failed. */
int tp_rdma_ep_poll(rdma_ep *ep);
/* (mu) Bulk data of this connection is on the move: our RDMA READs in flight,
 * segments we announced that the peer has not consumed, or a frame whose
 * segments are still coming. Its next completion is then a chunk's time away,
 * so a waiter polls on (bulk_spin_us) rather than sleep. */
int tp_rdma_ep_bulk_pending(const rdma_ep *ep);
/* Re-arms the CQ notification after a channel event was consumed (mu). */
int tp_rdma_ep_arm(rdma_ep *ep);
/* Consumes and acks the channel's pending events (non-blocking fd); the CQ is
 * then unarmed (tp_rdma_ep_arm). */
void tp_rdma_ep_channel_drain(rdma_ep *ep);
/* (mu) Keepalive and timeout checks for a thread that waits for the peer.
 * sender_since: when the caller started to wait for credits/acks (0: it waits
 * for a frame, which has no time limit). Returns 0 or the error it latched. */
int tp_rdma_ep_check(rdma_ep *ep, uint64_t sender_since);
/* (mu) Sends a CTRL if acks or credits are due and a credit allows. */
void tp_rdma_ep_flush_ctrl(rdma_ep *ep);

/* Shared inside the connection core (in rdma_ep.c, for rdma_tx.c and rdma_rx.c); (mu): */
/* Room for n more work requests on the send queue. */
int tp_rdma_ep_has_sq_room(const rdma_ep *ep, unsigned n);
/* Posts wr with its record e (wr_id: its sequence number); latches EIO on failure. */
int tp_rdma_ep_post_wr(rdma_ep *ep, struct ibv_send_wr *wr, rdma_sqe e);
/* A send slot is free, and the send queue has room. */
int tp_rdma_ep_has_slot(const rdma_ep *ep);
/* Posts the message in the next send slot (already filled but for the
 * counters). The caller checked tp_rdma_ep_has_slot and the credits. */
int tp_rdma_ep_post_msg(rdma_ep *ep, uint32_t len);
/* A receive buffer is consumed. It goes back to the QP, and so to the peer as a
 * credit, with the others released since, at the next tp_rdma_ep_repost. */
void tp_rdma_ep_release_recv(rdma_ep *ep, unsigned idx);
/* Reposts the released receive buffers in one call. Runs off the path of a
 * round trip: when a poll finds nothing, before the CQ is armed for a sleep,
 * and at once when a quarter of the buffers wait. */
void tp_rdma_ep_repost(rdma_ep *ep);
/* (mu) Wakes the threads in tp_rdma_ep_wait, if any. */
void tp_rdma_ep_wake(rdma_ep *ep);
/* (mu) Sleeps on ep->cv for at most ms milliseconds. */
void tp_rdma_ep_wait(rdma_ep *ep, int ms);
/* Allocates and registers a ring of n RDMA_CHUNK slots (bounce, landing) on
 * first use. */
int tp_rdma_ep_ensure_ring(rdma_ep *ep, uint8_t **ring, struct ibv_mr **mr, unsigned n, int access);

/* Sends the frames in iov (send_lock taken inside). wait() is called with mu
 * held whenever the sender must wait for the peer; it returns 0 to retry or an
 * error. */
typedef int (*rdma_wait_fn)(rdma_ep *ep, uint64_t since);
int tp_rdma_ep_sendv(rdma_ep *ep, const struct iovec *iov, int iovcnt, rdma_wait_fn wait);
/* sendv_async: as tp_rdma_ep_sendv, but when the last frame's payload goes
 * zero-copy the call returns without waiting for the peer and queues *async
 * (*queued = 1; tp_rdma_ep_take_sent hands it back once the peer read it). */
int tp_rdma_ep_sendv_async(rdma_ep *ep, const struct iovec *iov, int iovcnt, rdma_wait_fn wait, const rdma_sent *async,
			int *queued);
/* (mu) Takes the queued completions that are due into out (at most max): those
 * the peer has read (*err = 0), or all of them once the connection failed
 * (*err = the error). Returns how many. */
unsigned tp_rdma_ep_take_sent(rdma_ep *ep, rdma_sent *out, unsigned max, int *err);

/* The server's look at each frame's fixed header (transport_server_cb.frame_ok). */
typedef int (*rdma_frame_ok_fn)(void *ctx, const proto_hdr *h);

/* (mu) Advances the receive side without blocking: 1 a frame is complete (in
 * *out), 0 waiting for the peer, < 0 error (latched). ok (may be NULL) is
 * called (mu dropped) with each frame's header before anything of the frame
 * is allocated or read: 0 refuses it and fails the connection with
 * TRANSPORT_ECLOSED. payload_dest is called (mu dropped) once the msgpack part
 * is in. Both get ctx. */
int tp_rdma_ep_rx(rdma_ep *ep, transport_frame *out, rdma_frame_ok_fn ok, transport_payload_dest_fn dest, void *ctx);
/* (mu) A frame is partly received (an end now is TRANSPORT_EIO). */
int tp_rdma_ep_rx_busy(const rdma_ep *ep);
/* (mu) Frees a frame cut short (its msgpack part). */
void tp_rdma_ep_rx_abort(rdma_ep *ep);
/* (mu) The consumer is done with the frame tp_rdma_ep_rx returned last: a receive
 * buffer lent with it (msg_lent, server side) goes back. tp_rdma_ep_rx does this
 * too before it looks for the next frame. */
void tp_rdma_ep_rx_release(rdma_ep *ep);

/* (mu) Posts one whole small frame if a credit and a slot are free now, even
 * with an error latched by rx (the version answer before a close). */
int tp_rdma_ep_send_eager_nb(rdma_ep *ep, const void *frame, size_t len);
/* (mu) DISCONNECTED: flushes the QP; queued frames are still delivered, then
 * the receive side ends with ECLOSED (between frames) or EIO. */
void tp_rdma_ep_peer_gone(rdma_ep *ep);

/* Every rdma connection (client and server halves) starts with these two. */
typedef struct rdma_conn_head {
	transport_conn base;
	rdma_ep ep;
} rdma_conn_head;

/* transport_ops.reg_mem / dereg_mem of both halves (a connection starts with
 * its transport_conn, then its rdma_ep). */
int tp_rdma_reg_mem(transport_conn *c, void *addr, size_t len, transport_mr **out);
int tp_rdma_dereg_mem(transport_conn *c, transport_mr *mr);


extern const transport_provider tp_rdma_listen_provider;

#endif
