/*
 * Latency-bound work first (prio.c; docs/TENANTS.md "Latency first"): with
 * --tenants, a batch tenant's session holds back its next frame while a
 * session of a latency tenant has work, for a bounded time, and keeps its own
 * work ahead on the GPU shallow while latency tenants have sessions. Stream
 * priorities follow the class.
 */
#ifndef BE_PRIO_H
#define BE_PRIO_H

#include <stdint.h>

#include "driver.h"

#define BE_PRIO_LINGER_US 500     /* a latency session counts as busy this long after its last work */
#define BE_PRIO_DEFAULT_HOLD_MS 4 /* --batch-hold-ms */
#define BE_PRIO_DEFAULT_RUN_MS 4  /* --batch-run-ms */
#define BE_PRIO_DEFAULT_AHEAD 32  /* --batch-ahead: launches */

struct be_session;
struct be_ledger;

/* main.c's option loop: --priority, --batch-hold-ms, --batch-run-ms,
 * --batch-ahead. 0 if taken, -1 if not ours, 2 after a bad value. */
int be_prio_option(const char *opt, const char *value);
/* --priority mps or mps+admit: session processes are MPS clients (mps.c). */
int be_prio_mps(void);
/* Supervisor: the settings into the ledger, which session processes map. */
void be_prio_publish(struct be_ledger *l);
/* hello, after the tenant login: the session's class from its slot. */
void be_prio_login(struct be_session *s, struct be_ledger *l, uint32_t slot);
/* Teardown while its contexts live: its marker events go. */
void be_prio_drop(struct be_session *s);
/* Teardown at the end: the state goes (the ledger slot is released by logout). */
void be_prio_logout(struct be_session *s);

/* Executor: it took frames (latency sessions: now busy). */
void be_prio_busy(struct be_session *s);
/* Executor: it ran them, before it lets go of the run (latency sessions:
 * quiet once the GPU has done the session's work). */
void be_prio_idle(struct be_session *s);
/* Executor, before a frame (batch sessions): waits while latency work is
 * under way, at most --batch-hold-ms. */
void be_prio_admit(struct be_session *s);
/* Executor, after a frame (batch sessions): an async one counts as a launch
 * towards the bound of work ahead. */
void be_prio_ran(struct be_session *s, int async);
/* stream_create: the priority a stream of this session gets. */
int be_prio_stream_priority(struct be_session *s, int asked);

#endif
