/*
 * The end of a session (teardown.c): run by the executor once the
 * connection is gone (session.c hands it to the executor at accept).
 */
#ifndef BE_TEARDOWN_H
#define BE_TEARDOWN_H

#include "session.h"

/* Executor, at the end: destroys everything the session created. Sets
 * s->leaked when the waiter is stuck in the driver (nothing may be freed). */
void be_session_teardown(be_session *s);

#endif
