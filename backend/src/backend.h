/*
 * remote-gpud internals shared by the backend's files: the server's settings,
 * the full session object, and the pieces each thread of a session runs.
 *
 * Threads of a session and what they own:
 *   loop thread   the connection's callbacks (session.c): decodes frames, takes
 *                 staging buffers for payloads, runs BE_OP_LOOP ops, queues the
 *                 rest; starts the teardown when the transport reports the close.
 *   executor      (executor.c) runs queued frames in order with the session's
 *                 context current; owns the handle tables and ranges; at the end
 *                 it tears the session down.
 *   waiter        (waiter.c) waits for events in FIFO order and sends the replies
 *                 of synchronising calls, releases staging buffers, destroys user
 *                 events.
 *   driver threads run host-function callbacks (op_hostfn.c).
 * The executor and the waiter both send replies; transport_sendv serialises.
 */
#ifndef BE_BACKEND_H
#define BE_BACKEND_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include <uv.h>

#include "driver.h"
#include "handles.h"
#include "ranges.h"
#include "rg_clock.h"
#include "rg_log.h"
#include "session.h"
#include "staging.h"
#include "status.h"

#define BE_LOG "backend"

#define BE_CHUNK_SIZE (4u << 20)     /* staging chunk */
#define BE_MAX_CHUNKS 16             /* chunks per session */
#define BE_INITIAL_CHUNKS 2          /* allocated at hello */
#define BE_BIG_MAX (256u << 20)      /* largest kept staging buffer */
#define BE_SPIN_NS 100000            /* executor / waiter spin before sleeping: longer than a round trip, so back-to-back calls never wait for a wake-up */
#define BE_FAST_NS 10000             /* executor: how long a sync call may poll its event */
#define BE_NOW_MAX (1u << 20)        /* the largest D2H reply the loop thread sends itself (+now) */
#define BE_IDLE_QUERY_MAX 64         /* device_sync asks at most this many streams before it waits */
#define BE_WAITER_JOIN_MS 10000      /* teardown: how long the waiter may take */
#define BE_EVPOOL_MAX 64             /* idle internal events kept */
#define BE_SESSION_LISTEN_MS 10000   /* rdma: a session process's time to report its port */
#define BE_SESSION_CONNECT_MS 30000  /* rdma: its client's time to come (then it gives up) */
#define BE_TICKET_CONNECT_MS 10000   /* rdma+tls: the same for a client given the cookie inside TLS, which
				      * connects at once: the cookie is valid this long, and once */
#define BE_MAX_LAUNCH_ATTRS 16
#define BE_HELLO_MAX_MSG (16u << 10) /* before authentication: the largest msgpack part (a hello) */
#define BE_EXIT_AUTH 3               /* a session process's exit status after a wrong token (isolate.c) */

/* ---- spinning ---- */

/* One step of a bounded spin: a few pause instructions, then a yield, so a
 * spinning thread gives its core to runnable threads (the loop thread that is
 * about to hand it work) when cores are scarce, and costs nothing when not. */
static inline void be_spin_step(void)
{
	for (int i = 0; i < 4; i++)
		rg_cpu_relax();
	sched_yield();
}

/* ---- server (main.c) ---- */

/* The most devices one server serves (--device 0,1,... or all). */
#define BE_MAX_GPUS 16

/* One served device: what every client is told about it (hello). */
typedef struct be_gpu {
	int ordinal; /* the driver's */
	CUdevice dev;
	char name[256];
	CUuuid uuid;
	size_t total_mem;
	int32_t attrs[CU_DEVICE_ATTRIBUTE_MAX];
	char pci_bus_id[32];
	uint64_t peers; /* bit j: this device can access served device j's memory (cuDeviceCanAccessPeer) */
} be_gpu;

typedef struct be_server {
	int ngpu;                  /* served devices: a session's devices 0 .. ngpu-1 */
	be_gpu gpu[BE_MAX_GPUS];
	const char *token; /* NULL: no authentication */
	int driver_version;
	atomic_uint_fast64_t next_session;
	int no_fastpath; /* REMOTE_GPU_NO_FASTPATH: every sync call goes through the waiter (tests) */
	const char *store; /* --cubin-store: kernel images on disk, shared by every session process */
	uint64_t store_quota; /* --store-quota: bytes of uploads each tenant may add to the store */
	unsigned hello_timeout_ms; /* --hello-timeout: a connection must authenticate within it (0: never) */
	unsigned idle_timeout_ms;  /* --idle-timeout: an authenticated session with no call in flight (0: off) */
	atomic_int auth_failed;    /* a session process: its client presented a wrong token (exit BE_EXIT_AUTH) */
	/* An rdma+tls session process (ticket.c): its one client was admitted by
	 * the cookie the supervisor gave it inside TLS after checking its token,
	 * so the hello over rdma carries no token (it would cross in clear). */
	int cookie_auth;
	/* A session process (one session; unless --own-context): its session runs
	 * in the devices' primary contexts, as a local process does, which
	 * libraries that call cudaSetDevice (NCCL) bind too. Thread isolation's
	 * sessions each make contexts of their own. */
	int primary_ctx;
	/* --shm-offer: the shm:// path offered in the hello reply to tcp clients
	 * on this host (op_hello.c), NULL: none; and this server's instance (the
	 * supervisor's random id, its session processes' too: the environment's
	 * REMOTE_GPUD_INSTANCE), by which the client knows that the socket it
	 * reached is this server's. */
	const char *shm_offer;
	uint8_t instance[16];
} be_server;

extern be_server be_srv;

/* ---- frames ---- */

/* What the session knows about a frame beyond be_req (session.h). */
typedef struct be_frame {
	be_req rq;        /* first: be_req * and be_frame * convert */
	be_buf payload;   /* where the payload was received */
	uint16_t flags;   /* frame header flags */
	int payload_lost; /* payload_len > 0 but no buffer could be had */
	/* A chunk from another server (peer_recv.c): its transfer (0: a frame
	 * of the client's), where it lands, and whether it is the copy's last. */
	struct {
		uint64_t xfer, dst, stream;
		int last;
	} peer;
} be_frame;

static inline be_frame *be_frame_of(be_req *rq) { return (be_frame *)rq; }
/* The staging buffer holding rq's payload; the handler may move it out (and
 * must then leave kind BE_BUF_NONE behind). */
static inline be_buf *be_req_payload(be_req *rq) { return &be_frame_of(rq)->payload; }
static inline uint64_t be_req_payload_len(be_req *rq) { return rq->frame.hdr.payload_len; }

/* ---- waiter (waiter.c) ---- */

enum be_wait_kind {
	BE_WAIT_NONE = 0,   /* nothing to wait for: ordering only */
	BE_WAIT_EVENT,      /* an internal event (goes back to the pool) */
	BE_WAIT_USER_EVENT, /* a client's event */
	BE_WAIT_CTX,        /* cuCtxSynchronize (of ctx) */
};

typedef struct be_wentry {
	int kind;
	CUevent ev;
	CUcontext ctx;   /* made current before the wait: the device of the frame that pushed it */
	int dev;         /* ... and its index (ev goes back to that device's pool) */
	int reply;       /* send a reply for seq */
	uint64_t seq;
	be_buf out;      /* reply payload (out_len bytes), released after */
	size_t out_len;
	be_buf rel;      /* a buffer to release once the wait is over */
	CUevent destroy; /* a user event to destroy once the wait is over */
	struct be_wentry *next;
} be_wentry;

typedef struct be_waiter {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	be_wentry *head, **tail;
	be_wentry *spare; /* free list */
	atomic_uint queued; /* entries pushed, not yet taken (peeked while spinning) */
	atomic_uint busy;   /* entries pushed, not yet finished: 0 = the waiter is idle */
	/* Called by the waiter thread when busy falls to 0 (NULL: nothing): a
	 * higher layer registers it (prio.c, for latency sessions) before the
	 * session's first entry and clears it after the waiter stopped. */
	void (*on_idle)(struct be_session *s);
	int stop, sleeping, started;
	pthread_t thread;
	/* internal events: taken by the executor, returned by the waiter */
	CUevent pool[BE_MAX_GPUS][BE_EVPOOL_MAX]; /* per device: an event is its context's */
	unsigned npool[BE_MAX_GPUS];
	uint64_t nevents; /* internal events alive (pooled or in flight) */
} be_waiter;

int be_waiter_init(be_session *s);
int be_waiter_start(be_session *s);
/* A zeroed entry (NULL when out of memory). */
be_wentry *be_wentry_new(be_session *s);
void be_waiter_push(be_session *s, be_wentry *e);
/* Executor: an internal event recorded on stream, or NULL with *err set. */
CUevent be_event_record_internal(be_session *s, CUstream stream, CUresult *err);
/* Executor, for sync calls: 1 if the waiter has nothing pending (a reply sent
 * now cannot overtake one of its replies). */
static inline int be_waiter_idle(be_session *s);
/* Executor: once the work queued so far on stream is done, the waiter replies
 * to rq (if non-NULL; with out_len bytes of out as payload) and releases out
 * and rel (either may be NULL; taken over: left BE_BUF_NONE). Returns
 * BE_DEFERRED when it will reply, 0 when queued without a reply, or a CUresult
 * (after waiting here for the stream, so that the buffers can be released)
 * when no event could be recorded. */
int be_waiter_after(be_session *s, CUstream stream, be_req *rq, be_buf *out, size_t out_len, be_buf *rel);
/* Teardown: stops the thread (bounded); returns 0, or -1 if it is still stuck in
 * the driver (the session must then be leaked, not freed). */
int be_waiter_stop(be_session *s);
/* Teardown, after cuCtxSynchronize: releases whatever the thread left over. */
void be_waiter_cleanup(be_session *s);

/* Executor: a sync call on ev (a client's event) completes at once if the
 * waiter is idle and ev is done: returns 1 after replying, else 0. */
int be_waiter_try_now(be_session *s, be_req *rq, CUevent ev);

/* ---- memory pools (op_mempool.c) ---- */

/* The pool behind a client's pool id: 0 is the device's default pool; else one
 * the session made (CUDA_ERROR_INVALID_HANDLE for another's, or a destroyed one). */
int be_get_mempool(be_session *s, uint64_t id, CUmemoryPool *out);

/* ---- host functions (op_hostfn.c) ---- */

typedef struct be_hostfn {
	be_session *s;
	uint64_t id, serial;
	int waiting, done;
	struct be_hostfn *prev, *next;
} be_hostfn;

/* Loop thread, at the close: wakes every callback blocked for its hostfn_done. */
void be_hostfn_release_all(be_session *s);
/* Teardown, after the context is gone: frees records of callbacks never run. */
void be_hostfn_cleanup(be_session *s);
/* A driver thread, for a host node: the client runs its function id; returns
 * when it has (or the session is closing). */
void be_hostfn_call(be_session *s, uint64_t id);
/* What a host function on a capturing stream becomes: registered once at
 * startup by the layer above (main.c: op_hostnode.c's be_hostnode_capture);
 * unset, such a call answers CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED. */
typedef int (*be_hostfn_capture_fn)(be_session *s, CUstream st, uint64_t id);
void be_hostfn_set_capture(be_hostfn_capture_fn fn);

/* ---- host nodes (op_hostnode.c) ---- */

typedef struct be_hn_sess be_hn_sess;
typedef struct be_hnrec be_hnrec;
/* A record for the client's function id (held by nothing yet); a node's
 * parameters that call it; the client id of a node's parameters (a record of the
 * session's, else CUDA_ERROR_INVALID_VALUE). */
be_hnrec *be_hostnode_new(be_session *s, uint64_t id);
void be_hostnode_params(be_hnrec *r, CUDA_HOST_NODE_PARAMS *p);
int be_hostnode_id_of(be_session *s, const CUDA_HOST_NODE_PARAMS *p, uint64_t *id);
/* Frees a record that no node has (tell: the client is told to forget it). */
void be_hostnode_abandon(be_session *s, be_hnrec *r, int tell);
/* Graph (exec 0) or graph exec (exec 1) id holds r / what another holds; the
 * holder goes when its graph or exec is destroyed (drop). */
void be_hostnode_hold(be_session *s, int exec, uint64_t id, be_hnrec *r);
void be_hostnode_merge(be_session *s, int to_exec, uint64_t to_id, int from_exec, uint64_t from_id);
void be_hostnode_drop(be_session *s, int exec, uint64_t id);
/* After exec x_id was launched on st: its launch holds its records until it ends
 * (or, on a capturing stream, the capture's graph holds them). */
int be_hostnode_launched(be_session *s, uint64_t x_id, CUstream st);
/* A host function on capturing stream st: a host node of the capture's graph. */
int be_hostnode_capture(be_session *s, CUstream st, uint64_t id);
/* Teardown, after the contexts are gone. */
void be_hostnode_cleanup(be_session *s);

/* ---- answers to the client's pings (pong.c) ---- */

typedef struct be_pong {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int due, stop, started; /* (mu) */
	pthread_t thread;
} be_pong;

/* Coherence copies outside the executor (fetch.c, op managed_fetch): a
 * thread of the session's own, from the first request. */
typedef struct be_fetch_req be_fetch_req;
typedef struct be_fetch {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int started, stop;           /* (mu) */
	be_fetch_req *head, **tail;  /* (mu) requests in arrival order */
	pthread_t thread;
	CUstream streams[BE_MAX_GPUS]; /* the thread's own, non-blocking */
} be_fetch;
/* At accept (also makes ranges_mu); at the teardown, before any stream or
 * memory goes (executor thread); in session_free. */
void be_fetch_init(be_session *s);
void be_fetch_stop(be_session *s);
void be_fetch_destroy(be_session *s);

/* At accept, before anything can fail (session_free destroys what it made). */
void be_pong_init(be_session *s);
/* Loop thread, once the connection is closed: ends the thread (if a ping
 * started one) before the connection goes. */
void be_pong_stop(be_session *s);
void be_pong_destroy(be_session *s);

/* ---- the session ---- */

struct be_session {
	uint64_t id; /* for logs */
	transport_conn *conn;
	char peer[64];

	/* loop thread */
	uv_async_t done_async; /* the executor finished the teardown */
	uv_timer_t deadline;   /* hello deadline, then idle timeout (session.c) */
	int nclosing;          /* handles above not yet closed: freed at 0 */
	uint64_t accept_ns;    /* rg_clock_ns at accept (hello deadline) */
	int hello_seen;        /* a hello frame was let in: nothing else until it succeeds */
	int admitted;          /* counted by admit.c */
	be_frame *rx;          /* decoded in payload_dest, awaiting on_frame */
	be_frame *fp_local;    /* recycled frames the loop thread took (frame_pool.c) */
	int leaked;            /* the waiter is stuck: never free */

	atomic_int hello_ok;
	atomic_uint_fast64_t last_active; /* rg_clock_ns of the last frame or reply (idle timeout) */
	atomic_int closing;  /* on_close ran: tear down */
	atomic_int rejected; /* refused (hello, protocol error): drop frames until the close */
	atomic_int latched;  /* first error of an async call not yet reported */

	/* recycled frames given back by any thread (frame_pool.c) */
	_Atomic(be_frame *) fp_shared;
	atomic_uint fp_n; /* frames in both lists */

	/* executor queue */
	pthread_mutex_t q_mu;
	pthread_cond_t q_cv;
	be_req *q_head, **q_tail;
	atomic_uint q_len;
	int q_stop, q_sleeping;
	atomic_int q_busy; /* a batch is being run (by the executor, or inline by the loop) */
	/* +now copies the loop ran inline, and those it handed to the executor
	 * (BE_NOT_NOW): the teardown's log line */
	_Atomic uint64_t now_inline, now_handed;
	/* the running thread's: frames wait behind the one it runs (the rest of
	 * the executor's batch, or, run inline, bytes the transport read with
	 * it: transport_frame.followed), so a sync call polls its event no longer */
	int run_more;
	pthread_t exec_thread;
	be_session_fn exec_at_end; /* be_executor_start's at_end */

	be_waiter w;

	/* CUDA state. A context per served device (hello makes them); a frame
	 * names its device in the request header (proto.h), and whichever thread
	 * runs it (executor, or the loop inline) selects that device first
	 * (be_session_select): cur is its index, ctx its context (current on the
	 * running thread), mempool its default pool. Runs never overlap (q_busy),
	 * so the three are the running frame's. */
	CUcontext ctxs[BE_MAX_GPUS];
	CUmemoryPool mempools[BE_MAX_GPUS];
	int cur;
	CUcontext ctx;
	CUmemoryPool mempool; /* the device's default pool */
	/* memory pools the session made (op_mempool.c): id -> CUmemoryPool; and
	 * its current pool per device (cudaDeviceSetMemPool: the session's, not
	 * the device's), id 0 and NULL for the default one */
	be_htab pools;
	uint64_t cur_pool_id[BE_MAX_GPUS];
	CUmemoryPool cur_pool[BE_MAX_GPUS];
	be_htab streams, events, modules, funcs, graphs, gexecs, arrays;
	/* graph nodes (op_graph_build.c): the ids the server gave them -> the
	 * driver's node, and back; aux: the client id of the node's graph */
	be_htab nodes, node_ids;
	uint64_t node_seq;
	/* texture and surface objects, keyed by the driver's own value (the client
	 * passes it into kernels): what the session may destroy, and what its
	 * teardown must */
	be_htab texobjs, surfobjs;
	be_ranges ranges;
	/* held where the executor changes ranges and where fetch.c reads them
	 * (the executor, their one writer, reads them without it) */
	pthread_mutex_t ranges_mu;
	be_fetch fetch;
	be_staging staging;
	struct be_lib_sess *lib; /* objects of forwarded libraries (lib.c), on first use */
	struct be_vmm_sess *vmm; /* virtual memory management (op_vmm.c), on first use */
	struct be_hn_sess *hn;   /* host nodes' records and holders (op_hostnode.c), on first use */
	struct be_region_tab *regions; /* the client's shared pinned memory (op_region.c), on first use */
	struct be_stripes *stripes; /* striped copies' connections and transfers (stripe_xfer.c), at stripe_open */

	be_pong pong;

	/* host functions */
	pthread_mutex_t hf_mu;
	pthread_cond_t hf_cv;
	int hf_dying;
	uint64_t hf_serial;
	be_hostfn *hf_list;

	/* counters for remote-smi and /metrics (status.h): never NULL after accept */
	be_stat_session *stat;
	struct be_status_sess *status;

	/* client identity, from hello */
	uint64_t pid;
	char client_host[64], program[128];
	int unknown_logged;
	uint32_t tenant_slot; /* 1 + its slot in the tenant ledger (tenants.c); 0: no tenants */
	struct be_prio_sess *prio; /* latency first (prio.c): with --tenants and --priority admit; NULL: none */
	struct be_handover_sess *handover; /* handover.c: batch sessions with --tenants; NULL: none */
};

/* The session's device index dev (0 .. be_srv.ngpu-1) for the frame about to
 * run: its context made current on the calling thread (only when another was:
 * a single-device session never pays a driver call), s->cur, s->ctx and
 * s->mempool set (executor.c). CUDA_ERROR_INVALID_DEVICE for an index the
 * session lacks. session_select.c. */
CUresult be_session_select(be_session *s, uint32_t dev);
/* Shared regions at teardown (op_region.c): unregisters each from the driver
 * once the devices' work is done (the transport unmaps them later). */
void be_region_teardown(be_session *s);
/* The thread's current context is no longer the one be_session_select made
 * current (a handler made or changed contexts). */
void be_session_select_forget(void);
/* The served device the running frame is for. */
static inline const be_gpu *be_cur_gpu(const be_session *s) { return &be_srv.gpu[s->cur]; }

static inline int be_waiter_idle(be_session *s) { return atomic_load(&s->w.busy) == 0; }

/* frame_pool.c. be_frame_get: loop thread only; a zeroed frame whose view
 * is for proto_view_reuse. be_frame_free: any thread (releases the payload's
 * staging and the message). be_frame_pool_free: when the session is freed. */
be_frame *be_frame_get(be_session *s);
void be_frame_free(be_session *s, be_frame *f);
void be_frame_pool_free(be_session *s);
/* lib.c, from the teardown with the context current: destroys the library
 * objects (cuBLAS handles, ...) the session left alive. */
void be_lib_teardown(be_session *s);
/* lib.c, first thing in the teardown (before waiting for the GPU): releases the
 * objects of kinds marked early (NCCL communicators are aborted, so kernels
 * waiting on a peer end and nothing below waits for them forever). */
void be_lib_teardown_early(be_session *s);
/* lib_nccl.c, from main before any session: NCCL's environment defaults
 * (NCCL_NVLS_ENABLE=0 unless the operator set it). */
void be_nccl_env_defaults(void);
/* op_vmm.c, from the teardown: unmaps, releases and frees what the session's
 * virtual memory calls left. */
void be_vmm_teardown(be_session *s);

/* isolate.c: one process per session (see there why). */
void be_isolate_init(uv_loop_t *loop, char *const *child_argv, char *const *child_argv_listen);
void be_isolate_accept_fd(void *ctx, int fd, const char *peer);
int be_isolate_redirect(void *ctx, const char *peer, transport_cookie *cookie);
/* Whether a hello's token is the server's (op_hello.c; constant time). */
int be_hello_token_ok(const char *token, size_t len);
void be_isolate_shutdown(int signum);
int be_isolate_live(void);

/* executor.c. at_end: what the thread runs once it stopped (the teardown,
 * given by session.c: the executor calls nothing of the session's life). */
int be_executor_start(be_session *s, be_session_fn at_end);
void be_executor_push(be_session *s, be_req *rq);
/* Loop thread: runs rq (a BE_OP_QUICK or BE_OP_NOW op) here and now if nothing
 * is queued or running for the session, which keeps arrival order; 1 if it ran
 * (rq freed), 0 if it must be pushed (a handler's BE_NOT_NOW included). */
int be_executor_run_inline(be_session *s, be_req *rq);
/* Whether this thread runs a frame inline (be_executor_run_inline) now: a +now
 * handler that would block returns BE_NOT_NOW then. */
int be_inline_now(void);
/* Loop thread: nothing is queued or running (run_inline would run now). */
int be_executor_idle(be_session *s);
void be_executor_stop(be_session *s);

/* imgcache.c: the server-wide kernel image cache (hash: cubin_hash, 64 hex digits) */
typedef struct be_img be_img;
be_img *be_imgcache_get(const char *hash);                     /* a reference, or NULL */
be_img *be_imgcache_add(const char *hash, void *data, size_t size); /* takes data (malloc'd) */
const void *be_img_data(const be_img *e);
size_t be_img_size(const be_img *e);
void be_imgcache_put(be_img *e);
void be_imgcache_clear(void);
/* Opens (creates) the on-disk store behind the cache; logs how many images it holds. */
int be_imgcache_open_store(const char *dir);

/* store_quota.c: each tenant's uploads to the store, within be_srv.store_quota.
 * admits: 1 when size more bytes would fit now; charge: records them, 0 or
 * CUDA_ERROR_OUT_OF_MEMORY when they would not fit (nothing recorded). */
int be_quota_admits(uint64_t size);
/* A --store-quota value, and a tenant's memory= (tenants_file.c): digits
 * with an optional K, M, G or T (powers of 1024). */
int be_quota_parse(const char *v, uint64_t *out);
int be_quota_charge(const char *hash, uint64_t size);

/* session_handles.c, for every copy, memset and node: logs a device range
 * that is not the session's and returns CUDA_ERROR_INVALID_VALUE. */
int be_bad_range(be_session *s, const char *op, uint64_t p, uint64_t len);
/* op_copy.c: after an H2D copy from the staging buffer pb was queued with
 * result r, hands pb back once the copy is done (or at once). */
int be_htod_done(be_session *s, CUstream st, be_buf *pb, CUresult r);

/* op_graph_build.c: forgets the node ids of graph g_id (before its destroy). */
void be_graph_forget_nodes(be_session *s, uint64_t g_id, CUgraph g);
/* The same without the graph (gone with a capture that failed): every id named for it. */
void be_graph_forget_owned(be_session *s, uint64_t g_id);
/* What keeps state per graph above this file (op_hostnode.c's host node
 * records), registered once at startup (main.c): told when a graph's content
 * is copied into another (a clone, a child graph's node) and when a graph goes
 * without a destroy (a capture that failed). Unset: nobody is told. */
typedef struct be_graph_watch {
	void (*merge)(be_session *s, int to_exec, uint64_t to_id, int from_exec, uint64_t from_id);
	void (*drop)(be_session *s, int exec, uint64_t id);
} be_graph_watch;
void be_graph_set_watch(const be_graph_watch *w);
/* Graph to_id has graph from_id's content now: its watchers and its
 * BE_GRAPH_UNCHECKED mark follow. */
void be_graph_copied(be_session *s, uint64_t to_id, uint64_t from_id);
/* Graph g_id is gone with a capture: its watchers let go of it. */
void be_graph_dropped(be_session *s, uint64_t g_id);
/* Node ids (op_graph_build.c): the id of node n of graph g_id, named now if the
 * client has not seen it; the n nodes of v named into ids (little-endian u64);
 * a list of ids from the wire of graph g_id (*out is small or malloc'd). */
int be_graph_node_name(be_session *s, uint64_t g_id, CUgraphNode n, uint64_t *id);
int be_graph_name_nodes(be_session *s, uint64_t g_id, const CUgraphNode *v, size_t n, uint8_t *ids);
int be_graph_node_list(be_session *s, uint64_t g_id, const void *ids, size_t len, CUgraphNode *small, size_t nsmall,
		       CUgraphNode **out, size_t *n);
/* The node of id (of any graph; *g_id, if asked, the client id of its graph). */
int be_graph_node_get(be_session *s, uint64_t id, CUgraphNode *out, uint64_t *g_id);
/* Every add: graph and dependencies looked up, the driver's add run by fn, the
 * new node named and its id replied. */
typedef CUresult (*be_graph_add_fn)(CUgraphNode *n, CUgraph g, const CUgraphNode *deps, size_t ndeps, const void *arg);
int be_graph_add_node(be_session *s, be_req *rq, uint64_t g_id, const void *deps, size_t deps_len, be_graph_add_fn fn,
		      const void *arg);
/* aux of a graph in s->graphs: the graph of a capture under way (the driver owns
 * it until the capture ends; the client may look at it, not destroy it). */
#define BE_GRAPH_CAPTURING 1u
/* aux of a graph: a capture recorded a memset or copy in it whose device range
 * was not the session's memory then (the driver records those: XLA traces
 * library calls and sets the real addresses later). The graph is kept as the
 * driver made it; an exec made from it carries BE_GEXEC_UNCHECKED and is refused
 * at launch with the error the GPU would give (op_graph.c), so no node reaches
 * memory that is not the session's. Clones and parents of it inherit the mark. */
#define BE_GRAPH_UNCHECKED 2u
/* aux of a graph exec: made from (or updated with) an unchecked graph; above
 * BE_GEXEC_CHARGE_SHIFT, the bytes its memory nodes are charged (op_graph.c). */
#define BE_GEXEC_UNCHECKED 1u
#define BE_GEXEC_CHARGE_SHIFT 1
/* op_capture.c: a stream that began a capture is destroyed (its aux in
 * s->streams is the capture's graph id): the capture ends, its graph goes. */
void be_capture_drop(CUstream st, uint64_t g_id, be_session *s);
/* The client id of the graph that capturing stream st captures into. */
int be_capture_graph_id(be_session *s, CUstream st, uint64_t *g_id);
/* A memset or copy of op on stream st touches [p, p + len), which is not the
 * session's memory: on a capturing stream it is recorded as the driver records
 * it, and the capture's graph marked BE_GRAPH_UNCHECKED (0: go on); elsewhere
 * be_bad_range's answer. */
int be_capture_unchecked(be_session *s, CUstream st, const char *op, uint64_t p, uint64_t len);

/* op_launch.c: a kernel's parameter buffer as it came in a launch or a kernel
 * node, checked against the function's parameter size and copied to aligned
 * memory; extra is the driver's CU_LAUNCH_PARAM_BUFFER_* list for it (NULL for a
 * kernel without parameters). be_kargs_free after the driver call. */
typedef struct be_kargs {
	_Alignas(16) unsigned char small[4096];
	unsigned char *p;
	size_t len;
	void *list[5];
	void **extra;
} be_kargs;
int be_kargs_take(be_session *s, uint64_t f_id, const void *params, size_t len, CUfunction *fn, be_kargs *a);
void be_kargs_free(be_kargs *a);

/* Device printf output (devout.c): a session process points its stdout at a
 * memory file (be_devout_init, before the session starts), and every reply is
 * preceded by what the driver wrote there since the last (be_devout_flush). */
int be_devout_init(void);
void be_devout_flush(be_session *s);

#endif
