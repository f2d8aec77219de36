/*
 * test_rdma's shared parts (rdma_harness.c): the in-process rdma server on a
 * libuv loop of its own thread, its record of every connection, the frame
 * helpers (patterned payloads, guard bytes, sending and checking frames) and
 * the client's receive checks. The tests are in test_rdma_paths.c (frames and
 * the ways they travel) and test_rdma_faults.c (peers that break, die or
 * vanish); test_rdma.c runs them.
 */
#ifndef RDMA_HARNESS_H
#define RDMA_HARNESS_H

#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../unit/check.h"
#include "rdma_test_hooks.h"

#define GUARD 64
#define GUARD_BYTE 0xA5
#define MAXREC 64



enum { OP_DATA = 10, OP_DATA_REG = 11, OP_DISCARD = 20, OP_ECHO = 30, OP_BIGMSG = 40, OP_PULL_ASYNC = 50, OP_KEEP = 60,
       OP_REFUSE = 70 /* the server's frame_ok refuses it (as before authentication) */ };



#define ASYNC_N 3               /* frames an OP_PULL_ASYNC answers with */
#define ASYNC_LEN (1u << 20)    /* each: from the server's registered arena */



typedef struct conn_rec {
	struct server *s;
	transport_conn *c;
	char peer[64];        /* the client's address, as c->peer */
	int nclose, close_err;
	int keep; /* the test calls transport_close itself */
	int nframes, nbad;
	uint64_t last_seq[8]; /* per sending thread: seq = thread << 32 | i */
	int order_bad;
	uint8_t *arena;       /* registered destination memory */
	transport_mr *arena_mr;
	size_t arena_len;
	uint8_t *cur;         /* the buffer payload_dest handed out */
	int cur_reg;
	int echo_errs;
	int async_sent, async_done, async_err, async_done_at_return; /* OP_PULL_ASYNC */
	int nlent, lent_bad;  /* frames whose msg the transport lent; lent with a payload */
	transport_frame kept; /* OP_KEEP: the frame, made the test's own */
	int nkept;
	int nhdr, nrefused, refused_dest; /* frame_ok: headers seen, refused; payload_dest for a refused one */
} conn_rec;



typedef struct server {
	uv_loop_t loop;
	pthread_t thread;
	transport_listener *l;
	int port;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	conn_rec *recs[MAXREC];
	int nrecs;
} server;



/* Waits until pred holds (under S.mu) or ms passed. */
#define WAIT_FOR(pred, ms)                                                                       \
	({                                                                                       \
		uint64_t end_ = now_ms() + (ms);                                                 \
		pthread_mutex_lock(&S.mu);                                                       \
		while (!(pred) && now_ms() < end_) {                                             \
			struct timespec ts_;                                                     \
			clock_gettime(CLOCK_REALTIME, &ts_);                                     \
			ts_.tv_nsec += 20000000;                                                 \
			if (ts_.tv_nsec >= 1000000000) {                                         \
				ts_.tv_sec++;                                                    \
				ts_.tv_nsec -= 1000000000;                                       \
			}                                                                        \
			pthread_cond_timedwait(&S.cv, &S.mu, &ts_);                              \
		}                                                                                \
		int ok_ = !!(pred);                                                              \
		pthread_mutex_unlock(&S.mu);                                                     \
		ok_;                                                                             \
	})



typedef struct send_job {
	transport_conn *c;
	uint64_t seq;
	uint8_t *p;
	size_t n;
	int r;
} send_job;



typedef struct rx_ctx {
	uint8_t *buf;  /* where payloads go (registered or not) */
	size_t cap;
	int discard;
} rx_ctx;



void tp_rdma_addr_name(const struct sockaddr *sa, char *buf, size_t len); /* rdma_client.c */

extern const char *ip;        /* RDMA_TEST_IP: an address of the RDMA device */
extern char self_path[4096];  /* this program, run again for child processes */
extern server S;              /* the in-process server of the tests */

uint64_t now_ms(void);
/* transport.h has no wrappers for these two slots */
int transport_conn_reg(transport_conn *c, void *p, size_t n, transport_mr **mr);
void transport_conn_dereg(transport_conn *c, transport_mr *mr);
/* The byte pattern of frame seq, written and checked. */
uint8_t pat(uint64_t seq, size_t i);
void fill(uint8_t *p, uint64_t seq, size_t n);
int verify(const uint8_t *p, uint64_t seq, size_t n);
int guard_ok(const uint8_t *p);
int send_frame(transport_conn *c, uint32_t op, uint64_t seq, size_t extra, const void *payload, size_t len);
/* A received frame's op (-1: undecodable), seq, and its extra bytes checked. */
int msg_op(const transport_frame *f, uint64_t *seq, size_t *extra, int *extra_ok);
void *loop_main_front(uv_loop_t *loop);
int server_start(server *s);
void server_stop(server *s);
transport_conn *connect_to(int port);
/* The server's record of the connection from peer ("host:port"), waiting up
 * to 5 s for its accept (matched by address: accepts of earlier tests'
 * connections may still come in). */
conn_rec *rec_by_peer(const char *peer);
/* ... of client connection c. */
conn_rec *rec_for(transport_conn *c);
/* A connection to the in-process server (*c) and its record there; NULL (a
 * failed check) when either is missing. */
conn_rec *connect_rec(transport_conn **c);
void *send_job_main(void *arg);
void *cli_dest(void *ctx, const transport_frame *f);
int recv_check(transport_conn *c, rx_ctx *x, int op_want, uint64_t seq_want, size_t len);
void tp_rdma_addr_name(const struct sockaddr *sa, char *buf, size_t len); /* rdma_client.c */

/* test_rdma_paths.c */
void test_frames(void);
void test_regcache(void);
void test_concurrent(void);
void test_sent_async(void);
void test_redirect(void);
void test_bulk_and_calls(void);
void test_lent(void);
void test_frame_refused(void);
/* test_rdma_faults.c */
void test_qp_error(void);
void test_vanish(void);
void test_server_death(void);
void test_client_death(void);
void test_listener_close(void);
int child_server(void);
int child_client(const char *port);

#endif
