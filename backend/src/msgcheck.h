/* A plausibility check of untrusted msgpack before msgpack-c unpacks it
 * (msgcheck.c). */
#ifndef BE_MSGCHECK_H
#define BE_MSGCHECK_H

#include <stddef.h>
#include <stdint.h>

/* 1 if p[0..n) is exactly one well-formed msgpack object whose containers
 * never claim more elements than there are bytes left; 0 otherwise. */
int be_msgpack_plausible(const uint8_t *p, size_t n);

#endif
