/*
 * Striped copies over tcp (stripe.c): a large copy's bytes cut across extra
 * connections of the session. Each returns 0 when the copy is not striped
 * (too small, not tcp, off, or another striped copy under way: the caller
 * takes the channel), else 1 with *st the copy's status (0, a CUresult, or
 * a negative channel error). htod: sends every byte before it returns (the
 * copy runs on the server in stream order, as an async one); dtoh: the
 * bytes are in dst when it returns (synchronous copies only).
 */
#ifndef FE_STRIPE_H
#define FE_STRIPE_H

#include <stddef.h>
#include <stdint.h>

#include "conn.h"

int fe_stripe_htod(fe_conn *c, uint64_t dst, const void *src, size_t len, uint64_t sid, int *st);
int fe_stripe_dtoh(fe_conn *c, void *dst, uint64_t src, size_t len, uint64_t sid, int *st);

#endif
