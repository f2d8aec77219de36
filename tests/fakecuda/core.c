/*
 * core.c: the lock, the handle registry, the per-thread context stack, the trace.
 *
 * Handles. Every object the driver hands out (context, stream, event, module,
 * function, graph, graph exec, graph node, memory pool) is named by a 64-bit id:
 *
 *     0xFC00000000000000 | serial << 8 | kind
 *
 * The serial only grows, so an id is never reused: a handle that was destroyed stays
 * unknown forever, and looking it up can never reach a freed object. The high byte
 * makes the value a non-canonical address, so code that dereferences a handle (which
 * a real driver's handles would survive, by luck) faults at once. Lookups go through
 * one array sorted by id (ids are appended in order), binary searched.
 *
 * Contexts current per thread: a small stack in thread-local storage holding context
 * ids, looked up on every call, so a context destroyed by another thread reads as no
 * context at all.
 */
#define _GNU_SOURCE /* gettid */
#include "fake.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FK_HANDLE_TAG 0xFC00000000000000ull
#define FK_TLS_DEPTH 64

typedef struct fk_handle {
	uint64_t id;
	int kind;
	void *obj;
	const fk_ctx *owner;
} fk_handle;

pthread_mutex_t fk_mu = PTHREAD_MUTEX_INITIALIZER;
int fk_initialized;

static fk_handle *handles;
static size_t nhandles, caphandles;
static uint64_t next_serial = 1;

static _Thread_local uint64_t tls_stack[FK_TLS_DEPTH];
static _Thread_local int tls_depth;

static int trace_fd = -2; /* -2: not opened yet, -1: no trace */

static void trace_open(void);

/* ---- registry ---- */

static size_t handle_pos(uint64_t id)
{
	size_t lo = 0, hi = nhandles;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (handles[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

uint64_t fk_handle_new(int kind, void *obj, fk_ctx *owner)
{
	if (nhandles == caphandles) {
		size_t cap = caphandles ? caphandles * 2 : 64;
		fk_handle *h = realloc(handles, cap * sizeof *h);
		if (!h)
			return 0;
		handles = h;
		caphandles = cap;
	}
	uint64_t id = FK_HANDLE_TAG | next_serial++ << 8 | (uint64_t)kind;
	handles[nhandles++] = (fk_handle){ id, kind, obj, owner };
	return id;
}

void *fk_handle_get(uint64_t id, int kind, const fk_ctx *owner)
{
	if ((id & 0xFF00000000000000ull) != FK_HANDLE_TAG || (int)(id & 0xFF) != kind)
		return NULL;
	size_t i = handle_pos(id);
	if (i == nhandles || handles[i].id != id)
		return NULL;
	if (owner && handles[i].owner != owner)
		return NULL;
	return handles[i].obj;
}

void fk_handle_del(uint64_t id)
{
	size_t i = handle_pos(id);
	if (i < nhandles && handles[i].id == id) {
		memmove(&handles[i], &handles[i + 1], (nhandles - i - 1) * sizeof *handles);
		nhandles--;
	}
}

size_t fk_handle_list(int kind, const fk_ctx *owner, uint64_t **ids)
{
	size_t n = 0;
	*ids = malloc((nhandles + 1) * sizeof **ids);
	if (!*ids)
		return 0;
	for (size_t i = 0; i < nhandles; i++)
		if (handles[i].kind == kind && (!owner || handles[i].owner == owner))
			(*ids)[n++] = handles[i].id;
	return n;
}

/* ---- per-thread context stack ---- */

void fk_tls_push(uint64_t ctx)
{
	if (tls_depth == FK_TLS_DEPTH) {
		/* Deeper than any sane program goes: drop the bottom entry. */
		memmove(tls_stack, tls_stack + 1, (FK_TLS_DEPTH - 1) * sizeof *tls_stack);
		tls_depth--;
	}
	tls_stack[tls_depth++] = ctx;
}

uint64_t fk_tls_pop(void)
{
	return tls_depth ? tls_stack[--tls_depth] : 0;
}

void fk_tls_set(uint64_t ctx)
{
	if (tls_depth)
		tls_stack[tls_depth - 1] = ctx;
	else
		fk_tls_push(ctx);
}

uint64_t fk_tls_top(void)
{
	return tls_depth ? tls_stack[tls_depth - 1] : 0;
}

fk_ctx *fk_current(void)
{
	uint64_t id = fk_tls_top();
	return id ? fk_handle_get(id, FK_CTX, NULL) : NULL;
}

/* ---- entry and exit of every API function ---- */

void fk_begin_raw(void)
{
	pthread_mutex_lock(&fk_mu);
}

CUresult fk_begin_init(void)
{
	pthread_mutex_lock(&fk_mu);
	return fk_initialized ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

CUresult fk_begin_any(fk_ctx **c)
{
	CUresult rc = fk_begin_init();
	*c = NULL;
	if (rc != CUDA_SUCCESS)
		return rc;
	*c = fk_current();
	return *c ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

CUresult fk_begin(fk_ctx **c)
{
	CUresult rc = fk_begin_any(c);
	if (rc == CUDA_SUCCESS && (*c)->sticky != CUDA_SUCCESS)
		rc = (*c)->sticky;
	return rc;
}

/* n + m, where m is what snprintf said it wanted, kept inside a buffer of cap. */
static size_t grow(size_t n, int m, size_t cap)
{
	if (m < 0)
		return n;
	n += (size_t)m;
	return n < cap ? n : cap - 1;
}

CUresult fk_end(CUresult rc, const char *fn, const char *fmt, ...)
{
	if (trace_fd == -2)
		trace_open();
	if (trace_fd >= 0) {
		char line[512];
		size_t n = grow(0, snprintf(line, sizeof line, "[%ld] %s(", (long)gettid(), fn),
		                sizeof line);
		if (fmt) {
			va_list ap;
			va_start(ap, fmt);
			n = grow(n, vsnprintf(line + n, sizeof line - n, fmt, ap), sizeof line);
			va_end(ap);
		}
		n = grow(n, snprintf(line + n, sizeof line - n, ") = %s\n", fk_err_name(rc)),
		         sizeof line);
		line[n - 1] = '\n'; /* a cut line still ends a line */
		if (write(trace_fd, line, n) < 0) {
			/* a trace that cannot be written is dropped; the call goes on */
		}
	}
	pthread_mutex_unlock(&fk_mu);
	return rc;
}

static void trace_open(void)
{
	char *path = getenv("FAKECUDA_LOG");
	trace_fd = -1;
	if (path && *path)
		trace_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

/* ---- small helpers ---- */

uint64_t fk_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
