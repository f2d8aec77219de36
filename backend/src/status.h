/*
 * What a running remote-gpud is doing, for remote-smi and the metrics endpoint.
 *
 * Every server has a run directory, $TMPDIR/remote-gpud-<port> by default
 * (--run-dir DIR to choose another), holding small binary files:
 *
 *   server.stat               the supervisor: its pid, address, device, metrics port
 *   session-<pid>-<id>.stat   one per live session, kept by the process serving it
 *
 * A session's counters live in its file: the process maps it shared and counts
 * into it where things happen (frames in on the loop thread, replies out on the
 * executor and waiter threads, errors, device memory), with plain atomic stores,
 * no locks and no system calls. A reader (remote-smi, the supervisor answering
 * GET /metrics) maps the file read-only and sees the numbers live, asking
 * nothing of the session. So the one source works the same with a process per
 * session (the default) and with --isolation thread, and a session process that
 * is stuck or crashed cannot hold up a reader.
 *
 * Robustness:
 *  - a file is created under a temporary name and renamed once it is complete,
 *    so a reader never sees half a header;
 *  - strings (client host, program) are written before state becomes
 *    BE_STAT_RUNNING (release), and read only after (acquire);
 *  - the session's process unlinks its file at the end; the supervisor unlinks
 *    the files of a session process that died (SIGKILL, a kernel fault), and at
 *    start those of processes that no longer exist. Readers skip files whose
 *    process is gone, so a leftover is never shown as a live session;
 *  - the layout has a magic, a version and its size; readers refuse others.
 *    The per-op counters are indexed by the op ids of proto_ops.h (nops of
 *    them); id 0 (replies, which clients never send) counts unknown ops.
 */
#ifndef BE_STATUS_H
#define BE_STATUS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define BE_STAT_MAGIC 0x54534752u /* "RGST" */
#define BE_STAT_VERSION 3 /* 2: the served devices (gpu[], ngpu); 3: mps */
#define BE_STAT_MAX_GPUS 16
#define BE_STAT_SERVER 1
#define BE_STAT_SESSION 2

/* be_stat_server.mps (mps.c); be_status_mps_name() names them */
enum be_stat_mps {
	BE_STAT_MPS_OFF = 0,      /* sessions are not MPS clients */
	BE_STAT_MPS_UP = 1,       /* its own control daemon runs */
	BE_STAT_MPS_DEAD = 2,     /* its own daemon died: new sessions are refused */
	BE_STAT_MPS_EXTERNAL = 3, /* an operator's daemon (--mps-pipe-dir), not watched */
};

enum be_stat_state {
	BE_STAT_CONNECTED = 0, /* no hello yet: client fields empty */
	BE_STAT_RUNNING = 1,   /* hello done: client fields valid */
};

/* One served device (--device), as the clients see it. */
typedef struct be_stat_gpu {
	int32_t ordinal, pad;
	char name[256];
	uint8_t uuid[16];
	char pci_bus_id[32];
	uint64_t total_mem;
} be_stat_gpu;

typedef struct be_stat_server {
	uint32_t magic, version, size, kind;
	int64_t pid;
	int64_t start_unix_ns;
	char listen_host[64];
	int32_t port;
	int32_t metrics_port; /* 0: no metrics endpoint */
	char isolation[16];
	int32_t ngpu, driver_version;
	be_stat_gpu gpu[BE_STAT_MAX_GPUS]; /* the first ngpu */
	_Atomic uint64_t sessions_started; /* connections accepted since start */
	_Atomic uint32_t mps;              /* enum be_stat_mps */
	uint32_t pad2;
} be_stat_server;

typedef struct be_stat_session {
	uint32_t magic, version, size, kind;
	int64_t pid; /* the process serving the session */
	uint64_t id; /* the session's number in that process */
	int64_t start_unix_ns;
	char peer[64]; /* host:port of the connection */
	_Atomic uint32_t state;
	uint32_t nops; /* entries of op_calls */
	/* the client, from its hello (valid once state is BE_STAT_RUNNING) */
	int64_t client_pid;
	char client_host[64], program[128];
	/* counters since the session started */
	_Atomic uint64_t calls;     /* frames received */
	_Atomic uint64_t bytes_in;  /* frame bytes received (header, message, payload) */
	_Atomic uint64_t bytes_out; /* frame bytes sent (replies, events) */
	_Atomic uint64_t errors;    /* calls that ended in a CUDA error */
	_Atomic uint64_t mem_bytes; /* device memory the session holds now (its allocations) */
	_Atomic uint64_t mem_peak;
	/* per second over the last second (a timer of the session's loop) */
	_Atomic uint64_t rate_calls, rate_bytes_in, rate_bytes_out;
	_Atomic uint64_t op_calls[]; /* frames received per op id */
} be_stat_session;

/* ---- counting (inline: the paths of every frame) ---- */

/* One writer per counter (the loop thread): a load and a store, no locked add. */
static inline void be_stat_bump1(_Atomic uint64_t *c, uint64_t n)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n, memory_order_relaxed);
}

/* Loop thread, for every frame accepted for a session. */
static inline void be_stat_frame(be_stat_session *st, uint32_t op, uint64_t bytes)
{
	be_stat_bump1(&st->calls, 1);
	be_stat_bump1(&st->bytes_in, bytes);
	be_stat_bump1(&st->op_calls[op < st->nops ? op : 0], 1);
}

/* Any thread that sends (executor, waiter, host-function threads). */
static inline void be_stat_sent(be_stat_session *st, uint64_t bytes)
{
	atomic_fetch_add_explicit(&st->bytes_out, bytes, memory_order_relaxed);
}

static inline void be_stat_error(be_stat_session *st)
{
	atomic_fetch_add_explicit(&st->errors, 1, memory_order_relaxed);
}

/* Executor (which owns the session's ranges), after each frame. */
static inline void be_stat_mem(be_stat_session *st, uint64_t bytes)
{
	if (atomic_load_explicit(&st->mem_bytes, memory_order_relaxed) == bytes)
		return;
	atomic_store_explicit(&st->mem_bytes, bytes, memory_order_relaxed);
	if (bytes > atomic_load_explicit(&st->mem_peak, memory_order_relaxed))
		atomic_store_explicit(&st->mem_peak, bytes, memory_order_relaxed);
}

/* ---- writers (status.c) ---- */

struct be_session;
struct uv_loop_s;

/* Supervisor, once listening: creates the run directory (dir, or the default for
 * port when NULL), clears files of dead processes, writes server.stat. Returns 0,
 * or -1 (logged) when there is no usable directory: the server runs on, without
 * status. */
int be_status_server_open(const char *dir, const char *host, int port, const char *isolation, int metrics_port);
/* Supervisor, at exit: removes server.stat and the directory if empty. */
void be_status_server_close(void);
/* The run directory in use ("" when none). */
const char *be_status_dir(void);
/* Session process (--run-dir): where session files go. */
void be_status_use_dir(const char *dir);
/* A session was accepted (counted where server.stat is mapped). */
void be_status_count_session(void);
/* Supervisor: a session process ended; removes what it left. */
void be_status_reap(int pid);
/* Supervisor: the state of MPS (enum be_stat_mps, mps.c). */
void be_status_set_mps(uint32_t state);

/* Loop thread, from on_accept: gives s->stat (never NULL: without a run
 * directory the counters are in memory only). */
void be_status_session_open(struct be_session *s, struct uv_loop_s *loop);
/* Executor, after a successful hello: publishes the client's identity. */
void be_status_session_hello(struct be_session *s);
/* Loop thread, once the session's threads are done: removes the file. */
void be_status_session_close(struct be_session *s);

/* ---- readers (status_read.c): remote-smi, GET /metrics ---- */

typedef struct be_snap_session {
	int64_t pid;
	uint64_t id;
	int64_t start_unix_ns;
	char peer[64];
	uint32_t state;
	int64_t client_pid;
	char client_host[64], program[128];
	uint64_t calls, bytes_in, bytes_out, errors, mem_bytes, mem_peak;
	uint64_t rate_calls, rate_bytes_in, rate_bytes_out;
	uint32_t nops;
	uint64_t *op_calls; /* nops entries */
} be_snap_session;

/* A tenant of --tenants (tenant_ledger.h), as remote-smi and /metrics show it. */
typedef struct be_snap_tenant {
	char name[64];
	uint32_t klass, max_sessions; /* enum be_tenant_class; 0: unlimited */
	int removed;                  /* gone from the file, sessions left */
	uint64_t quota;               /* UINT64_MAX: unlimited */
	uint64_t used, peak, sessions, started, refused_mem, refused_sess;
	/* latency first (prio.c) */
	uint64_t busy, held_now, holds, hold_timeouts, held_ns, ahead_waits;
	uint64_t handovers, handover_timeouts, handover_ok, releases, released_bytes, alloc_waits; /* handover.c */
} be_snap_tenant;

typedef struct be_snap {
	char dir[4096];
	int has_server; /* server.stat read and valid */
	int alive;      /* its process exists */
	int64_t pid, start_unix_ns;
	char listen_host[64];
	int port, metrics_port;
	char isolation[16];
	int ngpu, driver_version;
	be_stat_gpu gpu[BE_STAT_MAX_GPUS]; /* the first ngpu: names and ids made printable */
	uint64_t total_mem; /* of every served device */
	uint64_t sessions_started;
	uint32_t mps; /* enum be_stat_mps */
	be_snap_session *sess; /* live sessions, by pid then id */
	size_t nsess;
	be_snap_tenant *tenants; /* with --tenants, else NULL */
	size_t ntenants;
} be_snap;

/* Reads one run directory: 0, or -1 when it holds no valid server.stat (the
 * sessions are still read). */
int be_snap_read(const char *dir, be_snap *out);
void be_snap_free(be_snap *s);
/* status_tenants.c, from be_snap_read: the tenants of dir's ledger, if any. */
int be_snap_read_tenants(const char *dir, be_snap *out);
/* The default run directory of a port. */
void be_status_default_dir(int port, char *buf, size_t cap);
/* Run directories under $TMPDIR (or /tmp) whose server is alive; *dirs and each
 * entry are malloc'd. Returns how many. */
size_t be_status_find_dirs(char ***dirs);
/* Whether process pid exists. */
int be_status_pid_alive(int64_t pid);
/* "off", "up", "dead", "external" (enum be_stat_mps). */
const char *be_status_mps_name(uint32_t state);

/* Prometheus text format (metrics_text.c) of the given servers. Returns a
 * malloc'd NUL-terminated string (length in *len), or NULL when out of memory. */
char *be_metrics_render(const be_snap *snaps, size_t n, size_t *len);

/* The HTTP endpoint (metrics.c), on the supervisor's loop: GET /metrics on
 * host:port (an IPv4 or IPv6 literal; 127.0.0.1 unless --metrics-listen; port
 * 0: any free port). Returns the bound port, or a negative libuv error (logged). */
int be_metrics_start(struct uv_loop_s *loop, const char *host, int port);
/* Closes the listener and open connections (the loop can then end). */
void be_metrics_stop(void);

#endif
