/*
 * Libraries forwarded at their own API level (cuBLAS, cuBLASLt): what the entry
 * points generated from api/<lib>.api (gen/lib_<lib>.c) share.
 *
 * A call: fe_lib_begin picks the server (that of the device the call's first
 * handle was created on, else the current device) and starts the message; the
 * generated code appends the arguments; fe_lib_post sends an async call (no reply:
 * the entry point returns success), fe_lib_call a sync one, whose reply is
 * [status, results...] (the library's status first; lib.h on the server says how
 * a latched failure of an earlier async call comes back in it).
 *
 * Objects. Handles and descriptors are ids the client picks (fe_rt_new_id), so a
 * create costs no round trip; the program gets the id as its handle. The client
 * keeps a small record per object (lib_handles.h): the device it belongs to and a few words of
 * library state (a cuBLAS handle's pointer and math modes and stream, a matmul
 * descriptor's scale type and pointer mode), which decide how scalars travel. A use of an
 * unknown or destroyed id is forwarded all the same: the server's tables judge it.
 *
 * Failures that are not the library's (no server, a lost connection, a reply that
 * does not parse) are negative codes here; the generated code maps them to the
 * library's statuses with fe_lib_fail, which logs them.
 */
#ifndef FE_LIB_H
#define FE_LIB_H

#include <stddef.h>
#include <stdint.h>

#include "conn.h"
#include "lib_handles.h"
#include "rt.h"

#define FE_LIB_MAX_IN (512u << 10) /* largest host input buffer (attributes) */
#define FE_LIB_SCALAR 16           /* largest scalar: cuDoubleComplex */

/* Local failures (negative, apart from conn.h's and proto.h's). */
#define FE_LIB_ENOSERVER (-300) /* no remote GPU (REMOTE_GPU unset or unreachable) */
#define FE_LIB_EARG (-301)      /* refused before sending (NULL output, buffer too large) */
#define FE_LIB_ENOMEM (-302)
#define FE_LIB_EPROTO (-303)    /* the reply does not have the expected shape */
#define FE_LIB_EMISSING (-304)  /* the server does not know the call */

typedef struct fe_lib_msg {
	proto_msg m;
	fe_conn *c;
	int dev;
	uint32_t op;
} fe_lib_msg;

static inline uint64_t fe_lib_id(const void *handle_or_ptr) { return (uint64_t)(uintptr_t)handle_or_ptr; }

int fe_lib_begin(fe_lib_msg *k, uint32_t op, uint64_t route_id, uint32_t nargs);
void fe_lib_abort(fe_lib_msg *k);
int fe_lib_post(fe_lib_msg *k);
/* >= 0: the library status, and the caller owns r (fe_reply_free); < 0: failed. */
int fe_lib_call(fe_lib_msg *k, fe_reply *r);
/* Result i (0: the first after the status) into dst: a bin of at most cap bytes
 * (exactly what the server wrote); nil (the call was not made) leaves dst alone. */
int fe_lib_out(fe_reply *r, uint32_t i, void *dst, size_t cap);
/* An output scalar: the first n bytes of the server's buffer. */
int fe_lib_result_out(fe_reply *r, uint32_t i, void *dst, size_t n);
int fe_lib_ret(fe_reply *r, uint32_t i, uint64_t *v);

/* Arguments. */
void fe_lib_in(fe_lib_msg *k, const void *p, size_t n);                  /* bin, or nil for NULL */
void fe_lib_scalar(fe_lib_msg *k, const void *p, size_t n, int on_device); /* value bytes or address */
/* An output scalar: its address in device mode, nil in host mode (the reply
 * brings the value). */
void fe_lib_result(fe_lib_msg *k, const void *p, int on_device);

/* A negative code as one of the library's statuses (logged). */
typedef struct fe_lib_statuses {
	const char *lib;
	int no_server, bad_arg, nomem, channel, missing;
} fe_lib_statuses;
int fe_lib_fail(int st, const fe_lib_statuses *map);

#endif
