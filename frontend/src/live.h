/*
 * Liveness of a server: a watchdog thread per call channel that fails the
 * waiting calls when the server shows no sign of life for REMOTE_GPU_TIMEOUT
 * seconds (default 10; 0: wait forever, no watchdog).
 *
 * It judges the server, not the call: a kernel may run for an hour. While
 * something waits for the server (a call's reply, bytes to be taken), the
 * watchdog samples a progress count (bytes moved, frames received); when it
 * stands still for a while, it asks the channel to ping, which the server
 * answers from its I/O thread even while the session's executor is inside a
 * long call. Only when nothing at all came back for the timeout, pings
 * included, is the server given up: stopped (SIGSTOP, a hung host: its kernel
 * may still ACK TCP), dead, or unreachable. TCP keepalive cannot tell a stopped
 * process from a live one; only an answer from the process itself can.
 *
 * The channel (conn.c) supplies what the watchdog needs through fe_live_ops, so
 * that this file knows nothing of frames or transports.
 */
#ifndef FE_LIVE_H
#define FE_LIVE_H

#include <stdint.h>

typedef struct fe_live fe_live;

typedef struct fe_live_ops {
	/* Something waits for the server: a reply, or bytes it has to take. */
	int (*busy)(void *ctx);
	/* A count that changes whenever the server shows life. */
	uint64_t (*progress)(void *ctx);
	/* Ask the server for a sign of life; must never block. */
	void (*ping)(void *ctx);
	/* Give up on the server (quiet_s: how long nothing came). Called once;
	 * the watchdog ends after it. */
	void (*dead)(void *ctx, double quiet_s, double timeout_s);
} fe_live_ops;

/* REMOTE_GPU_TIMEOUT in seconds (0: none), the default when unset or malformed. */
double fe_live_timeout(void);

/* Starts a watchdog on ctx: 0, or TRANSPORT_ENOMEM. *out is NULL (and nothing
 * runs) when the timeout is 0. ops must outlive it. */
int fe_live_start(const fe_live_ops *ops, void *ctx, fe_live **out);
/* Stops and joins it (NULL: nothing to do). The ops are not called after. */
void fe_live_stop(fe_live *l);

#endif
