/*
 * The caller's side of transport_sendv_parts for the providers' tests
 * (test_tcp.c, test_shm.c): a payload that becomes ready step bytes at a
 * time, and a ready that fails at a chosen call.
 */
#ifndef SEND_PARTS_TEST_H
#define SEND_PARTS_TEST_H

#include <stdint.h>
#include <unistd.h>

#include "transport.h"

typedef struct parts_arg {
	transport_conn *c;
	uint64_t seq;
	const uint8_t *buf;
	size_t len, ready0, step;
	int fail_at;     /* ready fails at this call (0: never) */
	unsigned nap_us; /* before each part: so that each is a write of its own */
	int calls, err;
} parts_arg;

/* transport_ready_fn: step more bytes a call; -1 at the fail_at-th call. */
static inline int64_t parts_ready(void *ctx, size_t sent)
{
	parts_arg *a = ctx;
	if (++a->calls == a->fail_at)
		return -1;
	if (a->nap_us)
		usleep(a->nap_us);
	return (int64_t)(sent + a->step < a->len ? sent + a->step : a->len);
}

#endif
