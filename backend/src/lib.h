/*
 * Libraries forwarded at their own API level (cuBLAS, cuBLASLt): what the server
 * handlers generated from api/<lib>.api (gen/lib_<lib>.c) share. The math
 * libraries call the driver themselves, so the client cannot run them; the server
 * calls the real library, on the session's executor with its context current.
 *
 * Loading. A library is dlopen'd when the first call needs it, from the path its
 * option gave (--cublas PATH), else its environment variable (REMOTE_GPU_CUBLAS),
 * else its soname; then every function of the description is resolved. A library
 * that does not load answers every call with the description's "no server" status
 * (CUBLAS_STATUS_NOT_INITIALIZED), a function it lacks with "missing"
 * (CUBLAS_STATUS_NOT_SUPPORTED), each logged once. CUDA is served without them.
 *
 * Objects. Handles and descriptors are 64-bit ids the client chose, mapped per
 * session in one table per kind (handles.h), as streams and events are. An
 * unknown or destroyed id is answered with the kind's status and never followed.
 * be_lib_teardown destroys what a session left alive, kinds in reverse order.
 *
 * Status. Handlers answer with the library's status (>= 0). For an async call the
 * first failure is latched per session and library; the next sync call of that
 * library returns it in place of its own success (its outputs still travel). A
 * reply's header carries status 0 and CUDA's latched error, its results are
 * [library status, results...]: the reply's own status stays 0 so that results
 * are delivered whatever the library said.
 *
 * Pointers. Host scalars (alpha, beta) arrive as bytes and are copied into an
 * aligned buffer of BE_LIB_SCALAR bytes, zero-padded, so the library never reads
 * past what the client sent. A device address is accepted only when the
 * library's pointer mode says device, and bytes only when it says host: otherwise
 * the library would read server memory at an address the client chose. Device
 * addresses are passed through; isolation is the session's own context.
 */
#ifndef BE_LIB_H
#define BE_LIB_H

#include <stdint.h>

#include <cuda.h>

#include "handles.h"
#include "proto.h"
#include "session.h"

#define BE_LIB_SCALAR 16           /* largest scalar a library reads: cuDoubleComplex */
#define BE_LIB_MAX_BUF (512u << 10) /* largest host input or output buffer */
#define BE_LIB_MAX_ALLOCS 4        /* buffers one call may allocate */

/* A shared library of a description (generated: gen/lib_<lib>.c). */
typedef struct be_lib_so {
	const char *name, *soname, *option, *env;
	const char *path; /* from the option (be_lib_option) */
	void *dl;         /* dlopen handle once loaded */
} be_lib_so;

/* A function: its name, library, and the slot of the function table. */
typedef struct be_lib_sym {
	const char *name;
	int lib;
	void **slot;
} be_lib_sym;

/* A kind of handle: its C type (for logs), the status for an unknown id, the kind
 * whose ids it also accepts (-1: none), how to destroy one (teardown), and
 * whether that happens first, before the session waits for its GPU work
 * (`early`: NCCL communicators, whose abort ends kernels waiting on peers). */
typedef struct be_lib_kind {
	const char *ctype;
	int unknown;
	int alias;
	int (*destroy)(void *obj);
	int early;
	/* bytes of device memory the library takes for each new object, charged
	 * to the session's tenant (tenants.h) until its destroy; NULL: none */
	uint64_t (*charge)(be_session *s);
} be_lib_kind;

typedef struct be_lib_def {
	const char *name;
	be_lib_so *libs;
	int nlibs;
	const be_lib_sym *syms;
	int nsyms;
	const be_lib_kind *kinds;
	int nkinds;
	int st_success, st_bad_arg, st_unavailable, st_missing, st_nomem;
	int st_pending; /* a status that is no failure (ncclInProgress), never latched; -1: none */
	int loaded; /* lib.c: 0 not yet, 1 tried (each library's dl says how it went) */
} be_lib_def;

/* Every description's definition, NULL-terminated (gen/dispatch.c). */
extern be_lib_def *const be_lib_defs[];

/* A session's objects and latched status of one description. */
typedef struct be_lib_sess {
	be_lib_def *def;
	be_htab *tabs; /* one per kind */
	int latched;
	struct be_lib_sess *next;
} be_lib_sess;

/* One call being decoded. Every be_lib_* accessor does nothing once st is set:
 * the first failure (a library status, or BE_EPROTO) is the call's answer. */
typedef struct be_lib_dec {
	be_session *s;
	be_req *rq;
	be_lib_def *def;
	be_lib_sess *ls;
	int st;
	void *allocs[BE_LIB_MAX_ALLOCS];
	int nallocs;
} be_lib_dec;

typedef struct be_lib_scalar {
	_Alignas(16) unsigned char b[BE_LIB_SCALAR];
} be_lib_scalar;

/* 1 if scalar `which` of a call on obj is a device address (hand-written per
 * library: the library's pointer mode), else 0. */
typedef int (*be_lib_mode_fn)(void *obj, int which);

/* Loads the library if need be and checks that *fn was resolved. */
void be_lib_dec_init(be_lib_dec *d, be_session *s, be_req *rq, be_lib_def *def, int lib, void **fn);
int32_t be_lib_i32(be_lib_dec *d, uint32_t i);
uint32_t be_lib_u32(be_lib_dec *d, uint32_t i);
int64_t be_lib_i64(be_lib_dec *d, uint32_t i);
uint64_t be_lib_u64(be_lib_dec *d, uint32_t i);
CUstream be_lib_stream(be_lib_dec *d, uint32_t i);
/* A live object of kind (or of its alias kind). */
void *be_lib_obj(be_lib_dec *d, uint32_t i, int kind);
/* Removes a live object from the table and returns it (destroy). */
void *be_lib_del(be_lib_dec *d, uint32_t i, int kind);
/* create: the new id, checked free; be_lib_add enters the created object (or
 * destroys it if the table refuses). */
uint64_t be_lib_new_id(be_lib_dec *d, uint32_t i, int kind);
void be_lib_add(be_lib_dec *d, int kind, uint64_t id, void *obj);
/* A struct passed by value (@value): exactly n bytes into dst. */
void be_lib_val(be_lib_dec *d, uint32_t i, void *dst, size_t n);
/* Host input of exactly n bytes (nil: NULL), copied to an aligned buffer. */
const void *be_lib_in(be_lib_dec *d, uint32_t i, uint64_t n);
/* Zeroed host output buffer of n bytes, freed when the call is done. */
void *be_lib_out(be_lib_dec *d, uint64_t n);
const void *be_lib_scalar_in(be_lib_dec *d, uint32_t i, be_lib_scalar *sc, be_lib_mode_fn mode, void *obj,
			     int which);
/* An output scalar: sc's buffer in host mode (the reply carries it), the
 * client's device address in device mode. */
void *be_lib_result(be_lib_dec *d, uint32_t i, be_lib_scalar *sc, be_lib_mode_fn mode, void *obj, int which);
void be_lib_put_result(proto_msg *m, const be_lib_scalar *sc, const void *p);
int be_lib_wants_reply(const be_lib_dec *d);
/* Ends a call without results: latches (async) or replies with the status. */
int be_lib_done(be_lib_dec *d);
/* A reply with nresults results after the status; be_lib_reply_end sends it. */
proto_msg *be_lib_reply_begin(be_lib_dec *d, uint32_t nresults);
int be_lib_reply_end(be_lib_dec *d, proto_msg *m);

/* A function the description does not list, from a loaded library (NULL if the
 * library is not loaded or lacks it): for the hand-written helpers. */
void *be_lib_dlsym(be_lib_def *def, int lib, const char *name);
/* main.c: 0 if opt is a library's option (--cublas PATH), which takes value. */
int be_lib_option(const char *opt, const char *value);

#endif
