/*
 * protocol: the wire format shared by libremote.so and remote-gpud. No I/O here.
 *
 * A frame is a fixed 40-byte header, a msgpack array [args...] of hdr_len bytes
 * (none at all, hdr_len 0, for a call without arguments or a reply without
 * results), and an optional raw payload of payload_len bytes. Bulk bytes are
 * never run through the encoder: they travel as their own iovec and are
 * received straight into their destination.
 *
 *   offset  size  field
 *   0       4     magic  "RGPU" (0x52475055, little-endian)
 *   4       2     version
 *   6       2     flags  (PROTO_F_*)
 *   8       4     hdr_len      msgpack bytes that follow the fixed header
 *   12      4     op           PROTO_OP_* (PROTO_OP_REPLY on a reply)
 *   16      8     payload_len  raw bytes after the msgpack part
 *   24      8     seq          a request's number; a reply carries its request's
 *   32      4     status       reply: the CUresult of the call itself (0 on success);
 *                              request: the device it is for, an index among
 *                              the server's devices (0 on a one-device server)
 *   36      4     latched      reply: the first error of an earlier async call
 *                              not yet reported (0 if none)
 *
 * What every frame has is in the fixed header, so that the commonest reply (a
 * status and nothing else) and calls without arguments need no msgpack at all:
 * on the path of a synchronous call, decoding [op, seq, status, latched] with
 * msgpack-c had been the largest single cost of a round trip's user-space
 * work. Keeping status and latched apart means a call that succeeded still
 * returns its results (an allocation is never lost because an older kernel
 * failed). A request carries zero in latched, and in status the device it is
 * for: a server of several devices runs it in that device's context, with no
 * frame of its own to select one (so a one-device client pays nothing).
 */
#ifndef PROTO_H
#define PROTO_H

#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#define PROTO_MAGIC 0x52475055u
/* 3: module_load names images by SHA-256 (64 hex digits), not XXH3-128; and
 * the server answers ping (PROTO_OP_PING) on its I/O thread, which the
 * client's liveness watchdog relies on: an older server would queue pings
 * behind a long call and be taken for dead. */
/* 4: a request's status names its device; hello answers with every device
 * the server serves. */
#define PROTO_VERSION 4
#define PROTO_HDR_SIZE 40
/* A request's device (its status field) is below this. */
#define PROTO_MAX_DEVICES 16
/* Hostile-size limits: a header larger than this is a protocol error. Payloads
 * larger than PROTO_MAX_PAYLOAD are split by the sender into several frames. */
#define PROTO_MAX_HDR (1u << 20)
#define PROTO_MAX_PAYLOAD (1ull << 30)

enum proto_flags {
	PROTO_F_REPLY = 1u << 0,   /* answer to a request with the same seq */
	PROTO_F_ASYNC = 1u << 1,   /* request wants no reply; errors are latched */
	PROTO_F_EVENT = 1u << 2,   /* server-initiated notification (host function reached) */
};

/* Errors of this layer, negative so they never collide with CUresult values.
 * Every function of this layer that can fail returns one (PROTO_OK: none);
 * logs name them with proto_err_name (the code's name) or proto_strerror
 * (what it means). The transport passes a bad header's code through to its
 * caller (transport.h: transport_err). */
typedef enum proto_err {
	PROTO_OK = 0,
	PROTO_EMAGIC = -1,   /* not a remote-gpu frame */
	PROTO_EVERSION = -2, /* peer speaks another protocol version */
	PROTO_ETOOBIG = -3,  /* hdr_len or payload_len beyond the limits */
	PROTO_EDECODE = -4,  /* msgpack part malformed or of the wrong shape */
	PROTO_ETYPE = -5,    /* an argument has the wrong type */
	PROTO_ERANGE = -6,   /* an argument index past the end */
	PROTO_ENOMEM = -7,
	PROTO_ETLS = -8, /* the server takes only TLS (tls://) connections */
} proto_err;

typedef struct proto_hdr {
	uint16_t version;
	uint16_t flags;
	uint32_t hdr_len;
	uint64_t payload_len;
	uint32_t op;
	uint64_t seq;
	int32_t status, latched;
} proto_hdr;

const char *proto_strerror(int err);
/* The code's name ("PROTO_EMAGIC"); "PROTO_?" for a value that is none. */
const char *proto_err_name(int err);

void proto_encode_hdr(const proto_hdr *h, uint8_t out[PROTO_HDR_SIZE]);
/* Checks magic, version and limits; fills *h even on EVERSION so the caller can
 * report what the peer speaks. */
proto_err proto_decode_hdr(const uint8_t in[PROTO_HDR_SIZE], proto_hdr *h);
/* A frame's length after its fixed header (hdr_len + payload_len), for a
 * sender splitting its own bytes into frames: magic and limits only. */
proto_err proto_peek_frame_len(const uint8_t in[PROTO_HDR_SIZE], uint64_t *len);
/* Whether the first n bytes of a header (n < 4: as far as they go) can still be
 * a frame's magic: a receiver refuses another protocol without waiting for a
 * whole header it may never get. */
int proto_magic_prefix_ok(const uint8_t *in, size_t n);

/*
 * proto_msg: builds one frame's fixed header and msgpack part into one contiguous
 * buffer (the first iovec of a send). Small messages never touch the heap.
 */
typedef struct proto_msg {
	uint8_t *data; /* PROTO_HDR_SIZE bytes of fixed header, then msgpack */
	size_t len, cap;
	uint64_t seq; /* as given to proto_msg_begin */
	uint32_t op;  /* likewise */
	int32_t status, latched; /* proto_msg_begin_reply's */
	int oom;
	msgpack_packer pk;
	uint8_t inline_buf[512];
} proto_msg;

/* Starts a request: op and seq go into the fixed header, then an array of
 * nargs (no msgpack at all when nargs is 0). */
void proto_msg_begin(proto_msg *m, uint32_t op, uint64_t seq, uint32_t nargs);
/* Starts a reply: seq, status and latched in the fixed header, then an array
 * of nresults (none when 0). */
void proto_msg_begin_reply(proto_msg *m, uint64_t seq, int32_t status, int32_t latched, uint32_t nresults);
void proto_msg_u64(proto_msg *m, uint64_t v);
void proto_msg_i64(proto_msg *m, int64_t v);
void proto_msg_f64(proto_msg *m, double v);
void proto_msg_bin(proto_msg *m, const void *p, size_t n);
void proto_msg_str(proto_msg *m, const char *s);
void proto_msg_nil(proto_msg *m);
/* Raw access for nested arrays/maps. */
static inline msgpack_packer *proto_msg_packer(proto_msg *m) { return &m->pk; }
/* Writes the fixed header; returns PROTO_ENOMEM if any append failed. */
proto_err proto_msg_finish(proto_msg *m, uint16_t flags, uint64_t payload_len);
/* The whole answer to a peer that speaks another version: a reply (seq 0)
 * with status PROTO_EVERSION and our version as its result. A peer whose
 * header differs from ours still reads the version field and fails cleanly. */
proto_err proto_msg_version_reply(proto_msg *m);
/* The answer to a plain client on a TLS port, sent in clear: a reply to its
 * first frame (seq) with status PROTO_ETLS, so that its user reads "use
 * tls://", not a reset. */
proto_err proto_msg_tls_reply(proto_msg *m, uint64_t seq);
void proto_msg_free(proto_msg *m);

/*
 * proto_view: a decoded msgpack part. Accessors check type and index and return
 * PROTO_ETYPE / PROTO_ERANGE rather than trusting the peer.
 */
typedef struct proto_view {
	/* Objects live in a zone of the view's own with a small first chunk: a
	 * message's few arguments fit in it, and a small block is cheap to allocate
	 * on one thread (the server's I/O thread) and free on another (its executor). */
	msgpack_zone zone;
	msgpack_object root;
	const msgpack_object *items;
	uint32_t n;
	uint32_t op;  /* from the fixed header */
	uint64_t seq;
	int32_t status, latched;
} proto_view;

/* Walks one msgpack object without allocating: PROTO_OK when it is well formed,
 * fills exactly len bytes, and no array or map claims more elements than bytes
 * remain (msgpack-c would allocate for the claimed count up front). */
proto_err proto_check_msgpack(const uint8_t *p, size_t len);
/* Decodes the frame whose fixed header is h and msgpack part msg (h->hdr_len
 * bytes; NULL when 0): op, seq, status and latched from h, the arguments from
 * msg. A frame without arguments allocates nothing. */
proto_err proto_view_init(proto_view *v, const proto_hdr *h, const uint8_t *msg);
/* As proto_view_init, for a view decoded message after message (a connection's
 * receive side, a recycled server frame): v is zeroed, or was decoded before
 * and not freed since. The zone's first chunk is kept from one message to the
 * next instead of allocated and freed each time; proto_view_free ends it (also
 * after a failed decode, which leaves v as if zeroed). */
proto_err proto_view_reuse(proto_view *v, const proto_hdr *h, const uint8_t *msg);
void proto_view_free(proto_view *v);
/* Argument i: the i-th element of the msgpack array. */
proto_err proto_arg_u64(const proto_view *v, uint32_t i, uint64_t *out);
proto_err proto_arg_i64(const proto_view *v, uint32_t i, int64_t *out);
proto_err proto_arg_u32(const proto_view *v, uint32_t i, uint32_t *out);
proto_err proto_arg_i32(const proto_view *v, uint32_t i, int32_t *out);
proto_err proto_arg_f64(const proto_view *v, uint32_t i, double *out);
proto_err proto_arg_bin(const proto_view *v, uint32_t i, const void **p, size_t *n);
proto_err proto_arg_str(const proto_view *v, uint32_t i, const char **p, size_t *n);
/* Nested array: *items points into the view. */
proto_err proto_arg_array(const proto_view *v, uint32_t i, const msgpack_object **items, uint32_t *n);

/* A reply's status and latched error (PROTO_EDECODE when v is not a reply). */
proto_err proto_reply_status(const proto_view *v, int32_t *status, int32_t *latched);
#define PROTO_REPLY_FIRST 0 /* index of the first result for proto_arg_* on a reply */

#include "proto_ops.h"

#endif
