/*
 * test_client's harness (client_harness.c), shared by its files: a
 * remote-gpud process on the driver test double, and a client that speaks the
 * protocol to it one frame at a time (test_client.c says what is covered).
 */
#ifndef TEST_CLIENT_H
#define TEST_CLIENT_H

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>

#include "check.h"
#include "cubin.h"
#include "proto.h"
#include "transport.h"

#define U(x) ((uint64_t)(x))
#define I(x) ((int64_t)(x))

/* The command line: server binary, driver, kernels fatbin (NULL: none). */
extern const char *g_server, *g_driver, *g_fatbin;
/* Free device memory of a fresh session: every session gives back all it took. */
extern uint64_t g_baseline;

typedef struct srv {
	pid_t pid;
	int port;
	char dir[64];
} srv;

typedef struct cli {
	transport_conn *c;
	uint64_t seq;
	int latched;     /* of the last reply */
	uint64_t events[16];
	uint32_t event_ops[16];
	int nevents;
	int auto_done; /* answer host function events at once */
} cli;

typedef struct rep {
	int status, latched;
	proto_view v;
	uint8_t *msg;
	uint64_t plen;
} rep;

typedef struct dest {
	void *buf;
	size_t cap;
} dest;

void sleep_ms(int ms);
int srv_start(srv *s, const char *token, const char *quota);
int srv_stop(srv *s);
int cli_open(cli *k, int port);
void cli_close(cli *k);
void rep_free(rep *r);
int sendm(cli *k, proto_msg *m, uint16_t flags, const void *payload, uint64_t plen);
void *dest_cb(void *ctx, const transport_frame *f);
int recv_reply(cli *k, uint64_t seq, rep *r, void *buf, size_t cap);
int call(cli *k, rep *r, void *buf, size_t cap, const void *payload, uint64_t plen, uint32_t op, const char *fmt, ...);
int post(cli *k, const void *payload, uint64_t plen, uint32_t op, const char *fmt, ...);
int hello(cli *k, uint32_t version, const char *token, rep *r);
int open_session(cli *k, int port);
uint64_t u64_result(rep *r, int i);
uint64_t mem_alloc(cli *k, uint64_t size);
uint64_t mem_free_bytes(cli *k);
int htod(cli *k, uint64_t dst, const void *p, uint64_t n, uint64_t stream);
int dtoh(cli *k, void *p, uint64_t src, uint64_t n, uint64_t stream);
int closed_by_server(cli *k);
void fill(uint8_t *p, size_t n, uint32_t seed);
uint64_t wait_baseline(cli *k);
int srv_alive(srv *s);

/* The tests, by subject: client_calls.c, client_modules.c, client_hostile.c,
 * client_store.c. */
void t_hello(srv *s);
void t_dtoh_sizes(srv *s);
void t_copies(srv *s);
void t_range_errors(srv *s);
void t_big(srv *s);
void t_stripes(srv *s);
void t_streams_events(srv *s);
void t_modules(srv *s);
void t_graphs(srv *s);
void t_hostnodes(srv *s);
void t_bad_input(srv *s);
void t_concurrent(srv *s);
void t_token(void);
void t_store(srv *s);

#endif
