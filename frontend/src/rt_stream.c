/*
 * Streams, events, host functions, stream capture and graph execs (graphs built
 * node by node: rt_graph.c). Handles are ids the client chooses, so creating a
 * stream or an event costs no round trip: the create travels async and the server
 * maps the id to its own object.
 */
#define _GNU_SOURCE /* pthread_setname_np */

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "rg_log.h"
#include "rpc.h"
#include "rt.h"

/* What the client must know of a stream without asking: priority, flags and
 * whether it is capturing (PyTorch asks before nearly every allocation). */
typedef struct stream_info {
	uint64_t id;
	int device;
	unsigned flags;
	int priority;
	enum cudaStreamCaptureStatus capture;
	unsigned long long capture_id;
	int capture_origin; /* began the capture (else joined it through an event) */
	uint64_t capture_graph; /* the capture's graph id (api/cuda.api capture_begin) */
	/* Of the capture this stream began: its mode, the thread that began it, and
	 * whether a call that mode forbids invalidated it (fe_capture_unsafe). */
	enum cudaStreamCaptureMode capture_mode;
	pthread_t capture_thread;
	int capture_invalid;
	cudaGraphNode_t *deps;  /* cudaStreamGetCaptureInfo's last answer */
	cudaGraphEdgeData *deps_edges;
	size_t ndeps;
	struct stream_info *next;
} stream_info;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static stream_info *streams;

/* Live event ids: CUDA reports a destroyed or unknown event at the call that uses
 * it, though event calls travel async here. */
typedef struct event_info {
	uint64_t id;
	unsigned flags;
	int device; /* current at its creation: its server holds it */
	unsigned long long capture_id; /* last recorded into this capture (0: none) */
	struct event_info *next;
} event_info;
static event_info *events;

static event_info *event_find_locked(uint64_t id)
{
	event_info *ev = events;
	while (ev && ev->id != id)
		ev = ev->next;
	return ev;
}

static int event_known(cudaEvent_t e, unsigned *flags)
{
	pthread_mutex_lock(&lock);
	event_info *ev = event_find_locked(fe_rt_event(e));
	if (ev && flags)
		*flags = ev->flags;
	pthread_mutex_unlock(&lock);
	return ev != NULL;
}
static unsigned long long next_capture_id = 1;
static atomic_int ncaptures; /* captures under way: 0 lets fe_capture_unsafe skip the lock */

static stream_info *find_locked(uint64_t id)
{
	for (stream_info *s = streams; s; s = s->next)
		if (s->id == id)
			return s;
	return NULL;
}

/* Streams join a capture as CUDA has them join: by waiting on an event recorded
 * into it. The client keeps the same picture, so that cudaStreamIsCapturing and
 * cudaStreamGetCaptureInfo of a joined stream answer without a round trip
 * (PyTorch's allocator asks them of every stream it allocates on during a
 * capture, to put the memory in the graph's private pool). */
static cudaError_t stream_field(cudaStream_t stream, int *prio, unsigned *flags, int *dev);

/* The device an event was created on (-1: unknown). */
static int event_device(cudaEvent_t e)
{
	pthread_mutex_lock(&lock);
	event_info *ev = event_find_locked(fe_rt_event(e));
	int d = ev ? ev->device : -1;
	pthread_mutex_unlock(&lock);
	return d;
}

static void capture_note_record(uint64_t event, uint64_t stream)
{
	pthread_mutex_lock(&lock);
	stream_info *s = find_locked(stream);
	event_info *ev = event_find_locked(event);
	if (ev)
		ev->capture_id = s && s->capture == cudaStreamCaptureStatusActive ? s->capture_id : 0;
	pthread_mutex_unlock(&lock);
}

static void capture_note_wait(uint64_t stream, uint64_t event)
{
	pthread_mutex_lock(&lock);
	stream_info *s = find_locked(stream);
	event_info *ev = event_find_locked(event);
	int live = 0;
	for (stream_info *o = streams; ev && ev->capture_id && o && !live; o = o->next)
		live = o->capture_origin && o->capture_id == ev->capture_id;
	if (s && live && s->capture == cudaStreamCaptureStatusNone) {
		s->capture = cudaStreamCaptureStatusActive;
		s->capture_id = ev->capture_id;
		s->capture_origin = 0;
		for (stream_info *o = streams; o; o = o->next)
			if (o->capture_origin && o->capture_id == ev->capture_id)
				s->capture_graph = o->capture_graph;
	}
	pthread_mutex_unlock(&lock);
}

/* The origin's capture ended: every stream in it leaves. */
static void capture_end_locked(unsigned long long id)
{
	for (stream_info *o = streams; o; o = o->next)
		if (o->capture_id == id && o->capture != cudaStreamCaptureStatusNone) {
			if (o->capture_origin)
				atomic_fetch_sub(&ncaptures, 1);
			o->capture = cudaStreamCaptureStatusNone;
			o->capture_origin = 0;
			o->capture_invalid = 0;
		}
}

/* Whether capture id was invalidated by a call its mode forbids. */
static int capture_invalid_locked(unsigned long long id)
{
	for (stream_info *o = streams; o; o = o->next)
		if (o->capture_origin && o->capture_id == id)
			return o->capture_invalid;
	return 0;
}

/* CUDA's rules for "potentially unsafe" calls (allocations and frees, pinned
 * host memory, synchronous copies) during a capture, by the calling thread's
 * mode (cudaThreadExchangeStreamCaptureMode) and each capture's: a thread in
 * relaxed mode may; else its own captures forbid them unless begun relaxed, and
 * in global mode so does another thread's capture begun global. A capture that
 * forbids the call is invalidated (its end answers
 * cudaErrorStreamCaptureInvalidated). Judged here, not on the server: there
 * one executor thread makes every client thread's calls, and it runs in
 * relaxed mode (rt_capture_mode.c). */
cudaError_t fe_capture_unsafe(void)
{
	enum cudaStreamCaptureMode me = fe_capture_mode_current();
	if (atomic_load_explicit(&ncaptures, memory_order_acquire) == 0 || me == cudaStreamCaptureModeRelaxed)
		return cudaSuccess;
	cudaError_t e = cudaSuccess;
	pthread_t self = pthread_self();
	pthread_mutex_lock(&lock);
	for (stream_info *o = streams; o; o = o->next) {
		if (!o->capture_origin || o->capture != cudaStreamCaptureStatusActive)
			continue;
		int forbids = pthread_equal(o->capture_thread, self)
				      ? o->capture_mode != cudaStreamCaptureModeRelaxed
				      : o->capture_mode == cudaStreamCaptureModeGlobal && me == cudaStreamCaptureModeGlobal;
		if (forbids) {
			o->capture_invalid = 1;
			e = cudaErrorStreamCaptureUnsupported;
		}
	}
	pthread_mutex_unlock(&lock);
	return e;
}

/* A thread checks the same stream call after call (a query loop, a training
 * step's stream): the last one it found stays known, without the lock, until
 * some stream is destroyed (streams_gone moves, under the lock). */
static atomic_uint_fast64_t streams_gone;
static _Thread_local uint64_t tls_known_stream, tls_known_gone;

static int stream_known(cudaStream_t s)
{
	uint64_t id = fe_rt_stream(s);
	if (id == 0)
		return 1;
	if (id == tls_known_stream && atomic_load_explicit(&streams_gone, memory_order_acquire) == tls_known_gone)
		return 1;
	pthread_mutex_lock(&lock);
	int ok = find_locked(id) != NULL;
	if (ok) {
		tls_known_stream = id;
		tls_known_gone = atomic_load_explicit(&streams_gone, memory_order_relaxed);
	}
	pthread_mutex_unlock(&lock);
	return ok;
}

cudaError_t cudaStreamCreateWithPriority(cudaStream_t *pStream, unsigned int flags, int priority)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	if (!pStream || (flags & ~cudaStreamNonBlocking))
		return fe_rt_fail(cudaErrorInvalidValue);
	fe_device *d = fe_rt_device(fe_rt_current_device());
	/* Clamp as CUDA does: lower numbers are higher priorities. */
	if (priority < d->prio_greatest)
		priority = d->prio_greatest;
	if (priority > d->prio_least)
		priority = d->prio_least;
	stream_info *s = calloc(1, sizeof(*s));
	if (!s)
		return fe_rt_fail(cudaErrorMemoryAllocation);
	s->id = fe_rt_new_id();
	s->device = fe_rt_current_device();
	s->flags = flags;
	s->priority = priority;
	int st = fe_rpc_stream_create(c, s->id, flags, priority);
	if (st) {
		free(s);
		return fe_rt_leave(st);
	}
	pthread_mutex_lock(&lock);
	s->next = streams;
	streams = s;
	pthread_mutex_unlock(&lock);
	*pStream = (cudaStream_t)(uintptr_t)s->id;
	return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags)
{
	return cudaStreamCreateWithPriority(pStream, flags, 0);
}

cudaError_t cudaStreamCreate(cudaStream_t *pStream) { return cudaStreamCreateWithPriority(pStream, 0, 0); }

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	uint64_t id = fe_rt_stream(stream);
	pthread_mutex_lock(&lock);
	stream_info **pp = &streams;
	while (*pp && (*pp)->id != id)
		pp = &(*pp)->next;
	stream_info *s = *pp;
	if (s) {
		if (s->capture_origin) /* the server ends its capture (op_capture.c) */
			capture_end_locked(s->capture_id);
		*pp = s->next;
		atomic_fetch_add_explicit(&streams_gone, 1, memory_order_release);
	}
	pthread_mutex_unlock(&lock);
	if (!s)
		return fe_rt_fail(cudaErrorInvalidResourceHandle);
	free(s->deps);
	free(s->deps_edges);
	free(s);
	return fe_rt_leave(fe_rpc_stream_destroy(c, id));
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	if (!stream_known(stream))
		return fe_rt_fail(cudaErrorInvalidResourceHandle);
	/* Async device-to-host copies come back ahead of this reply (the server
	 * answers waits in order), so their bytes are in place when it returns. */
	return fe_rt_leave(fe_rpc_stream_sync(c, fe_rt_stream(stream)));
}

cudaError_t cudaStreamQuery(cudaStream_t stream)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	if (!stream_known(stream))
		return fe_rt_fail(cudaErrorInvalidResourceHandle);
	int st = fe_rpc_stream_query(c, fe_rt_stream(stream));
	/* A query is answered at once, possibly before the data of an async copy
	 * that the GPU already finished is here: wait for those bytes. */
	if (st == 0)
		st = fe_conn_drain_detached(c);
	if (st == CUDA_ERROR_NOT_READY)
		return cudaErrorNotReady; /* not an error to remember */
	return fe_rt_leave(st);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	if (!stream_known(stream) || !event_known(event, NULL))
		return fe_rt_fail(cudaErrorInvalidResourceHandle);
	int sdev = -1, edev = event_device(event);
	stream_field(stream, NULL, NULL, &sdev);
	if (edev >= 0 && sdev >= 0 && !fe_rt_same_server(sdev, edev)) {
		/* An event of another server (PyTorch's cross-device copies wait
		 * on one both ways): no stream here can wait for it on a GPU, so
		 * the caller waits for it on its server. Work queued on the stream
		 * after this call then runs after the event's, as asked; work
		 * queued before it is not held up. */
		fe_device *d = fe_rt_device(edev);
		int st = fe_rpc_event_sync(d->conn, fe_rt_event(event));
		if (st == 0)
			st = fe_conn_drain_detached(d->conn);
		return fe_rt_leave(st);
	}
	capture_note_wait(fe_rt_stream(stream), fe_rt_event(event));
	return fe_rt_leave(fe_rpc_stream_wait_event(c, fe_rt_stream(stream), fe_rt_event(event), flags));
}

static cudaError_t stream_field(cudaStream_t stream, int *prio, unsigned *flags, int *dev)
{
	uint64_t id = fe_rt_stream(stream);
	if (id == 0) {
		if (prio)
			*prio = 0;
		if (flags)
			*flags = 0;
		if (dev)
			*dev = fe_rt_current_device(); /* the NULL stream of the current device */
		return cudaSuccess;
	}
	pthread_mutex_lock(&lock);
	stream_info *s = find_locked(id);
	if (s && prio)
		*prio = s->priority;
	if (s && flags)
		*flags = s->flags;
	if (s && dev)
		*dev = s->device;
	pthread_mutex_unlock(&lock);
	return s ? cudaSuccess : fe_rt_fail(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaStreamGetPriority(cudaStream_t hStream, int *priority)
{
	return priority ? stream_field(hStream, priority, NULL, NULL) : fe_rt_fail(cudaErrorInvalidValue);
}

cudaError_t cudaStreamGetFlags(cudaStream_t hStream, unsigned int *flags)
{
	return flags ? stream_field(hStream, NULL, flags, NULL) : fe_rt_fail(cudaErrorInvalidValue);
}

cudaError_t cudaStreamGetDevice(cudaStream_t hStream, int *device)
{
	return device ? stream_field(hStream, NULL, NULL, device) : fe_rt_fail(cudaErrorInvalidValue);
}

/* ---- events */

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	if (!event)
		return fe_rt_fail(cudaErrorInvalidValue);
	event_info *ev = calloc(1, sizeof(*ev));
	if (!ev)
		return fe_rt_fail(cudaErrorMemoryAllocation);
	ev->id = fe_rt_new_id();
	ev->flags = flags;
	ev->device = fe_rt_current_device();
	int st = fe_rpc_event_create(c, ev->id, flags);
	if (st) {
		free(ev);
		return fe_rt_leave(st);
	}
	pthread_mutex_lock(&lock);
	ev->next = events;
	events = ev;
	pthread_mutex_unlock(&lock);
	*event = (cudaEvent_t)(uintptr_t)ev->id;
	return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *event) { return cudaEventCreateWithFlags(event, 0); }

cudaError_t cudaEventDestroy(cudaEvent_t event)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	uint64_t id = fe_rt_event(event);
	pthread_mutex_lock(&lock);
	event_info **pp = &events;
	while (*pp && (*pp)->id != id)
		pp = &(*pp)->next;
	event_info *ev = *pp;
	if (ev)
		*pp = ev->next;
	pthread_mutex_unlock(&lock);
	if (!ev)
		return fe_rt_fail(cudaErrorInvalidResourceHandle);
	free(ev);
	return fe_rt_leave(fe_rpc_event_destroy(c, id));
}

cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream, unsigned int flags)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	if (!event_known(event, NULL) || !stream_known(stream))
		return fe_rt_fail(cudaErrorInvalidResourceHandle);
	capture_note_record(fe_rt_event(event), fe_rt_stream(stream));
	return fe_rt_leave(fe_rpc_event_record(c, fe_rt_event(event), fe_rt_stream(stream), flags));
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
	return cudaEventRecordWithFlags(event, stream, 0);
}

cudaError_t cudaEventQuery(cudaEvent_t event)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	if (!event_known(event, NULL))
		return fe_rt_fail(cudaErrorInvalidResourceHandle);
	int st = fe_rpc_event_query(c, fe_rt_event(event));
	if (st == 0)
		st = fe_conn_drain_detached(c);
	if (st == CUDA_ERROR_NOT_READY)
		return cudaErrorNotReady;
	return fe_rt_leave(st);
}

cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	if (!event_known(event, NULL))
		return fe_rt_fail(cudaErrorInvalidResourceHandle);
	int st = fe_rpc_event_sync(c, fe_rt_event(event));
	if (st == 0)
		st = fe_conn_drain_detached(c);
	return fe_rt_leave(st);
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *userData)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	if (!fn)
		return fe_rt_fail(cudaErrorInvalidValue);
	if (!stream_known(stream))
		return fe_rt_fail(cudaErrorInvalidResourceHandle);
	/* Captured, it is a host node of the capture's graph: called at every replay,
	 * until the server forgets it (rt_hostfn.c), also when the call fails there. */
	uint64_t id = fe_stream_capturing(fe_rt_stream(stream)) ? fe_hostnode_register(fn, userData)
								: fe_hostfn_register(fn, userData, fe_conn_peek_seq(c));
	if (!id)
		return fe_rt_fail(cudaErrorMemoryAllocation);
	fe_conn_expect_events(c);
	int st = fe_rpc_hostfn(c, fe_rt_stream(stream), id);
	if (st) /* never reached the server */
		fe_hostnode_drop(id);
	return fe_rt_leave(st);
}

typedef struct callback_call {
	cudaStreamCallback_t cb;
	cudaStream_t stream;
	void *data;
} callback_call;

static void callback_trampoline(void *arg)
{
	callback_call *cc = arg;
	cc->cb(cc->stream, cudaSuccess, cc->data);
	free(cc);
}

cudaError_t cudaStreamAddCallback(cudaStream_t stream, cudaStreamCallback_t callback, void *userData,
				  unsigned int flags)
{
	if (!callback || flags != 0)
		return fe_rt_fail(cudaErrorInvalidValue);
	if (fe_stream_capturing(fe_rt_stream(stream))) {
		/* CUDA refuses a stream callback in a capture (and invalidates it;
		 * here the capture goes on). */
		rg_log_once("frontend", "not supported in a stream capture", "cudaStreamAddCallback");
		return fe_rt_fail(cudaErrorStreamCaptureUnsupported);
	}
	callback_call *cc = malloc(sizeof(*cc));
	if (!cc)
		return fe_rt_fail(cudaErrorMemoryAllocation);
	*cc = (callback_call){callback, stream, userData};
	cudaError_t e = cudaLaunchHostFunc(stream, callback_trampoline, cc);
	if (e != cudaSuccess)
		free(cc);
	return e;
}

/* ---- capture and graphs */

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	uint64_t id = fe_rt_stream(stream);
	if (id == 0)
		return fe_rt_fail(cudaErrorStreamCaptureUnsupported);
	pthread_mutex_lock(&lock);
	stream_info *s = find_locked(id);
	pthread_mutex_unlock(&lock);
	if (!s)
		return fe_rt_fail(cudaErrorInvalidResourceHandle);
	if ((unsigned)mode > cudaStreamCaptureModeRelaxed)
		return fe_rt_fail(cudaErrorInvalidValue);
	/* the graph's id, named now: cudaStreamGetCaptureInfo hands it out */
	uint64_t gid = fe_rt_new_id();
	int st = fe_capture_mode_relax(c);
	if (st == 0)
		st = fe_rpc_capture_begin(c, id, mode, gid);
	if (st == 0) {
		pthread_mutex_lock(&lock);
		if (s->capture == cudaStreamCaptureStatusNone) {
			s->capture = cudaStreamCaptureStatusActive;
			s->capture_id = next_capture_id++;
			s->capture_origin = 1;
			s->capture_graph = gid;
			s->capture_mode = mode;
			s->capture_thread = pthread_self();
			s->capture_invalid = 0;
			atomic_fetch_add(&ncaptures, 1);
		}
		pthread_mutex_unlock(&lock);
	}
	return fe_rt_leave(st);
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	if (!pGraph)
		return fe_rt_fail(cudaErrorInvalidValue);
	uint64_t id = fe_rt_stream(stream), gid = 0;
	int wrong_thread = 0, invalid = 0;
	pthread_mutex_lock(&lock);
	stream_info *s = find_locked(id);
	if (s && s->capture_origin) {
		gid = s->capture_graph;
		invalid = s->capture_invalid;
		wrong_thread = s->capture_mode != cudaStreamCaptureModeRelaxed &&
			       !pthread_equal(s->capture_thread, pthread_self());
	}
	pthread_mutex_unlock(&lock);
	/* Only a relaxed capture may be ended by another thread. The driver ends
	 * the capture anyway (its own thread's end then finds none:
	 * cudaErrorIllegalState), and its graph goes with it. */
	if (wrong_thread) {
		if (fe_rpc_capture_end(c, id, gid) == 0)
			fe_rpc_graph_destroy(c, gid);
		pthread_mutex_lock(&lock);
		s = find_locked(id);
		if (s && s->capture_origin)
			capture_end_locked(s->capture_id);
		pthread_mutex_unlock(&lock);
		return fe_rt_fail(cudaErrorStreamCaptureWrongThread);
	}
	int st = fe_rpc_capture_end(c, id, gid);
	if (st == 0 && invalid) { /* the server's capture knew nothing of it */
		fe_rpc_graph_destroy(c, gid);
		st = cudaErrorStreamCaptureInvalidated;
	}
	pthread_mutex_lock(&lock);
	s = find_locked(id);
	/* Ended (or invalidated and ended) unless the call was refused before
	 * reaching the capture: on a stream that joined it or from another thread,
	 * where CUDA leaves it under way. */
	if (s && s->capture_origin && st != CUDA_ERROR_STREAM_CAPTURE_UNMATCHED &&
	    st != CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD && st != CUDA_ERROR_ILLEGAL_STATE)
		capture_end_locked(s->capture_id);
	pthread_mutex_unlock(&lock);
	if (st == 0)
		*pGraph = (cudaGraph_t)(uintptr_t)gid;
	return fe_rt_leave(st);
}

/* A stream's capture status, id and graph, as the client knows them. */
static enum cudaStreamCaptureStatus capture_status(uint64_t sid, unsigned long long *cid, uint64_t *gid)
{
	pthread_mutex_lock(&lock);
	stream_info *s = find_locked(sid);
	enum cudaStreamCaptureStatus cs = s ? s->capture : cudaStreamCaptureStatusNone;
	if (cs == cudaStreamCaptureStatusActive && capture_invalid_locked(s->capture_id))
		cs = cudaStreamCaptureStatusInvalidated;
	if (cid)
		*cid = s ? s->capture_id : 0;
	if (gid)
		*gid = s ? s->capture_graph : 0;
	pthread_mutex_unlock(&lock);
	return cs;
}

int fe_stream_capturing(uint64_t sid)
{
	pthread_mutex_lock(&lock);
	stream_info *s = find_locked(sid);
	int cap = s && s->capture == cudaStreamCaptureStatusActive;
	pthread_mutex_unlock(&lock);
	return cap;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus *pCaptureStatus)
{
	if (!pCaptureStatus)
		return fe_rt_fail(cudaErrorInvalidValue);
	*pCaptureStatus = capture_status(fe_rt_stream(stream), NULL, NULL);
	return cudaSuccess;
}

/* The capture's dependencies on stream id, from the server, into the stream's
 * record (CUDA's pointers stay valid until the next call on the stream). */
static int capture_deps(fe_conn *c, uint64_t id, uint64_t gid, size_t *n)
{
	uint64_t max = 64, have = 0, cid = 0;
	uint32_t status = 0;
	cudaGraphNode_t *v = NULL;
	int st;
	for (;;) {
		cudaGraphNode_t *w = realloc(v, (max ? max : 1) * sizeof(*v));
		if (!w) {
			free(v);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		v = w;
		st = fe_rpc_capture_info(c, id, gid, max, &status, &cid, &have, v, max * sizeof(*v));
		if (st || have <= max)
			break;
		max = have;
	}
	cudaGraphEdgeData *ed = st ? NULL : calloc(have ? have : 1, sizeof(*ed)); /* default edges */
	if (!st && !ed)
		st = CUDA_ERROR_OUT_OF_MEMORY;
	if (st) {
		free(v);
		return st;
	}
	pthread_mutex_lock(&lock);
	stream_info *s = find_locked(id);
	if (s) {
		free(s->deps);
		free(s->deps_edges);
		s->deps = v;
		s->deps_edges = ed;
		s->ndeps = have;
		v = NULL;
		ed = NULL;
	}
	pthread_mutex_unlock(&lock);
	free(v);
	free(ed);
	*n = have;
	return 0;
}

cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream, enum cudaStreamCaptureStatus *captureStatus_out,
				     unsigned long long *id_out, cudaGraph_t *graph_out,
				     const cudaGraphNode_t **dependencies_out, const cudaGraphEdgeData **edgeData_out,
				     size_t *numDependencies_out)
{
	if (!captureStatus_out)
		return fe_rt_fail(cudaErrorInvalidValue);
	uint64_t id = fe_rt_stream(stream), gid = 0;
	unsigned long long cid = 0;
	enum cudaStreamCaptureStatus cs = capture_status(id, &cid, &gid);
	int active = cs == cudaStreamCaptureStatusActive;
	*captureStatus_out = cs;
	if (id_out)
		*id_out = cs != cudaStreamCaptureStatusNone ? cid : 0;
	if (!active) {
		if (numDependencies_out)
			*numDependencies_out = 0;
		return cudaSuccess;
	}
	if (graph_out)
		*graph_out = (cudaGraph_t)(uintptr_t)gid;
	if (!dependencies_out && !edgeData_out && !numDependencies_out)
		return cudaSuccess;
	/* The graph under construction lives on the server: one round trip. */
	fe_conn *c;
	size_t n = 0;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	int st = capture_deps(c, id, gid, &n);
	if (st == 0) {
		pthread_mutex_lock(&lock);
		stream_info *s = find_locked(id);
		if (dependencies_out)
			*dependencies_out = s && n ? s->deps : NULL;
		if (edgeData_out)
			*edgeData_out = s && n ? s->deps_edges : NULL;
		pthread_mutex_unlock(&lock);
		if (numDependencies_out)
			*numDependencies_out = n;
	}
	return fe_rt_leave(st);
}

cudaError_t cudaStreamUpdateCaptureDependencies(cudaStream_t stream, cudaGraphNode_t *dependencies,
						const cudaGraphEdgeData *dependencyData, size_t numDependencies,
						unsigned int flags)
{
	static const cudaGraphEdgeData plain;
	fe_conn *c;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	if (numDependencies && !dependencies)
		return fe_rt_fail(cudaErrorInvalidValue);
	for (size_t i = 0; dependencyData && i < numDependencies; i++) {
		if (memcmp(&dependencyData[i], &plain, sizeof(plain)) != 0) {
			rg_log_once("frontend", "not supported (edge data other than the default)",
				    "cudaStreamUpdateCaptureDependencies");
			return fe_rt_fail(cudaErrorNotSupported);
		}
	}
	uint64_t id = fe_rt_stream(stream);
	pthread_mutex_lock(&lock);
	stream_info *s = find_locked(id);
	int active = s && s->capture == cudaStreamCaptureStatusActive;
	uint64_t gid = s ? s->capture_graph : 0;
	pthread_mutex_unlock(&lock);
	if (!active)
		return fe_rt_fail(cudaErrorIllegalState);
	_Static_assert(sizeof(*dependencies) == 8, "node handles travel as 64-bit ids");
	return fe_rt_leave(fe_rpc_capture_set_deps(c, id, gid, dependencies, numDependencies * 8, flags));
}

cudaError_t cudaGraphExecUpdate(cudaGraphExec_t hGraphExec, cudaGraph_t hGraph,
				cudaGraphExecUpdateResultInfo *resultInfo)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	if (!hGraphExec || !hGraph || !resultInfo)
		return fe_rt_fail(cudaErrorInvalidValue);
	int32_t err = 0, result = 0;
	uint64_t node = 0, from = 0;
	int st = fe_rpc_graph_exec_update(c, (uintptr_t)hGraphExec, (uintptr_t)hGraph, &err, &result, &node, &from);
	if (st == 0) {
		/* the runtime's result numbers are the driver's */
		resultInfo->result = (enum cudaGraphExecUpdateResult)result;
		resultInfo->errorNode = (cudaGraphNode_t)(uintptr_t)node;
		resultInfo->errorFromNode = (cudaGraphNode_t)(uintptr_t)from;
		st = err;
	}
	return fe_rt_leave(st);
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph, unsigned long long flags)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	if (!pGraphExec || !graph)
		return fe_rt_fail(cudaErrorInvalidValue);
	uint64_t xid = fe_rt_new_id();
	int st = fe_rpc_graph_instantiate(c, xid, (uintptr_t)graph, flags);
	if (st == 0)
		*pGraphExec = (cudaGraphExec_t)(uintptr_t)xid;
	return fe_rt_leave(st);
}

cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *pGraphExec, cudaGraph_t graph, unsigned long long flags)
{
	return cudaGraphInstantiate(pGraphExec, graph, flags);
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	if (!graphExec || !stream_known(stream))
		return fe_rt_fail(cudaErrorInvalidResourceHandle);
	return fe_rt_leave(fe_rpc_graph_launch(c, (uintptr_t)graphExec, fe_rt_stream(stream)));
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	return fe_rt_leave(fe_rpc_graph_exec_destroy(c, (uintptr_t)graphExec));
}
