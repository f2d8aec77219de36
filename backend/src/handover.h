/*
 * Memory handed between tenants (handover.c; docs/TENANTS.md "Memory handed
 * between tenants"): a latency tenant's allocation that the device cannot
 * serve first asks the batch tenants' clients to release what their programs
 * cache, waits for their answers (bounded) and is tried once more; a batch
 * tenant's allocation may wait, bounded, for memory.
 */
#ifndef BE_HANDOVER_H
#define BE_HANDOVER_H

#include <stdint.h>

#include "driver.h"

#define BE_HANDOVER_DEFAULT_WAIT_MS 2000 /* --handover-wait-ms */

struct be_session;
struct be_ledger;
struct be_req;

/* main.c's option loop: --handover-wait-ms, --batch-alloc-wait-ms. 0 if
 * taken, -1 if not ours, 2 after a bad value. */
int be_handover_option(const char *opt, const char *value);
/* Supervisor: the settings into the ledger. */
void be_handover_publish(struct be_ledger *l);
/* hello, after the tenant login: a batch session starts the thread that
 * passes release requests on to its client. */
void be_handover_login(struct be_session *s, struct be_ledger *l, uint32_t slot);
/* hello's reply: 1 if the client should listen for release events. */
int be_handover_listens(const struct be_session *s);
/* Teardown: the thread ends; a request still open is answered. */
void be_handover_logout(struct be_session *s);

/* The allocation once more: the driver's answer. */
typedef CUresult (*be_alloc_again_fn)(void *ctx);
/* An allocation path whose driver call answered r: for an out-of-memory r, a
 * latency session hands over and tries again once, a batch session waits
 * (--batch-alloc-wait-ms) trying again; otherwise r as it is. */
CUresult be_handover_alloc(struct be_session *s, CUresult r, be_alloc_again_fn again, void *ctx);

#endif
