/*
 * The client's record of the objects (handles, descriptors) a forwarded library
 * created (lib.h says how calls use it): per id, its kind, the device it was made
 * on, a few words of library state and the history of the calls that set it up.
 * One table for the process, under one lock; ids come from fe_rt_new_id.
 */
#ifndef FE_LIB_HANDLES_H
#define FE_LIB_HANDLES_H

#include <stddef.h>
#include <stdint.h>

/* Objects. fe_lib_new returns 0 when out of memory. */
uint64_t fe_lib_new(int kind, int dev);
void fe_lib_forget(uint64_t id);
/* State word w (0 .. FE_LIB_STATE_WORDS - 1) of object id; 0 if unknown. */
#define FE_LIB_STATE_WORDS 3
uint64_t fe_lib_state(uint64_t id, int w);
void fe_lib_set_state(uint64_t id, int w, uint64_t v);
int fe_lib_kind(uint64_t id); /* -1 if unknown */
int fe_lib_dev(uint64_t id);  /* the device it was made on; -1 if unknown */

/* An object's history: the encoded arguments of the calls its description marks
 * `record` (its create, its attribute setters), in order. Objects with the same
 * history are in the same state, so answers about them can be cached
 * (cublasLtMatmulAlgoGetHeuristic). Histories longer than FE_LIB_MAX_HISTORY
 * are dropped: such an object is never cached. */
#define FE_LIB_MAX_HISTORY 4096
typedef struct fe_lib_buf {
	uint8_t *p;
	size_t len, cap;
} fe_lib_buf;
void fe_lib_record(uint64_t id, uint32_t op, const void *args, size_t len);
/* Appends the length and bytes of id's history to b; -1 if there is none. */
int fe_lib_history(uint64_t id, fe_lib_buf *b);
int fe_lib_buf_put(fe_lib_buf *b, const void *p, size_t n); /* -1 when out of memory */

#endif
