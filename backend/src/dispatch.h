/* The op table generated from api/cuda.api (gen/dispatch.c). */
#ifndef BE_DISPATCH_H
#define BE_DISPATCH_H

#include "session.h"

enum be_op_flags {
	BE_OP_SYNC = 1u << 0,    /* the client waits for a reply */
	BE_OP_ASYNC = 1u << 1,   /* no reply; failures are latched */
	BE_OP_PAYLOAD = 1u << 2, /* the request carries a raw payload */
	BE_OP_LOOP = 1u << 3,    /* run on the I/O thread, outside executor order */
	BE_OP_QUICK = 1u << 4,   /* may run on the I/O thread when the executor is idle */
	BE_OP_NOW = 1u << 5,     /* the same for a small copy (device work that never blocks: BE_NOT_NOW) */
};

typedef struct be_op_desc {
	int (*run)(be_session *s, be_req *rq);
	unsigned flags;
} be_op_desc;

extern const be_op_desc be_ops[PROTO_OP_COUNT];

#endif
