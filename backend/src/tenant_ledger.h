/*
 * The tenant ledger: one shared mapping that the supervisor and every session
 * process of a remote-gpud read and write (tenant_ledger.c has the design).
 * Its layout is also read by remote-smi and GET /metrics (status_read.c), which
 * map it read-only and load the counters without the lock.
 */
#ifndef BE_TENANT_LEDGER_H
#define BE_TENANT_LEDGER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "tenants.h"

#define BE_LEDGER_MAGIC 0x544e4752u /* "RGNT" */
#define BE_LEDGER_VERSION 3
#define BE_LEDGER_SLOTS 4096 /* sessions at once, over all tenants */
#define BE_LEDGER_FILE "tenants.stat"

enum be_ledger_state {
	BE_LT_FREE = 0,
	BE_LT_ACTIVE = 1,  /* in the file: takes new sessions */
	BE_LT_REMOVED = 2, /* gone from the file: no new sessions, kept while it has some */
};

typedef struct be_ledger_tenant {
	_Atomic uint32_t state;
	uint32_t klass, max_sessions, pad;
	char name[BE_TENANT_NAME_MAX];
	char token_sha[72];
	_Atomic uint64_t quota;
	_Atomic uint64_t used, peak;   /* bytes of device memory its sessions hold */
	_Atomic uint64_t sessions;     /* live now */
	_Atomic uint64_t started;      /* sessions since the tenant appeared */
	_Atomic uint64_t refused_mem;  /* allocations refused over the quota */
	_Atomic uint64_t refused_sess; /* hellos refused at max sessions */
	/* latency first (prio.c) */
	_Atomic uint64_t busy;        /* latency: its sessions with work now */
	_Atomic uint64_t held_now;    /* batch: its sessions held back now */
	_Atomic uint64_t holds;       /* batch: frames held back */
	_Atomic uint64_t hold_timeouts; /* batch: holds that reached the bound */
	_Atomic uint64_t held_ns;     /* batch: time held back, all sessions */
	_Atomic uint64_t ahead_waits; /* batch: waits for its own work ahead to drain */
	/* memory handed between tenants (handover.c) */
	_Atomic uint64_t handovers;         /* latency: allocations that asked batch sessions to release */
	_Atomic uint64_t handover_timeouts; /* latency: of them, waits that reached --handover-wait-ms */
	_Atomic uint64_t handover_ok;       /* latency: of them, allocations that then succeeded */
	_Atomic uint64_t releases;          /* batch: release requests its clients answered */
	_Atomic uint64_t released_bytes;    /* batch: bytes its sessions' charges fell by in them */
	_Atomic uint64_t alloc_waits;       /* batch: allocations that waited for memory */
} be_ledger_tenant;

typedef struct be_ledger_slot {
	_Atomic int64_t pid; /* 0: free */
	uint32_t tenant;
	uint32_t klass;        /* its tenant's class at the login: a reload does not change it */
	_Atomic uint32_t busy; /* latency: counted in its tenant's busy and the ledger's (prio.c) */
	uint32_t pad;
	uint64_t charged; /* bytes this session holds */
	/* handover.c: a latency session bumps req (a futex word) to ask this batch
	 * session to release; the session answers with done = req once its client
	 * has; base is its charge when it passed the request on. */
	_Atomic uint32_t release_req, release_done;
	uint64_t release_base;
} be_ledger_slot;

/* Latency first (prio.c): the supervisor's settings, and what batch sessions
 * look at before each frame. */
typedef struct be_ledger_prio {
	uint32_t on;                       /* --priority admit */
	uint32_t ahead;                    /* --batch-ahead: launches */
	uint64_t hold_ns, run_ns, linger_ns; /* --batch-hold-ms, --batch-run-ms, BE_PRIO_LINGER_US */
	_Atomic uint64_t latency_sessions; /* live sessions of latency tenants */
	_Atomic uint64_t busy;             /* of them, with work now */
	_Atomic uint64_t quiet_ns;         /* CLOCK_MONOTONIC when one last went quiet */
	uint64_t handover_ns;              /* --handover-wait-ms (handover.c) */
	uint64_t batch_wait_ns;            /* --batch-alloc-wait-ms (handover.c) */
} be_ledger_prio;

typedef struct be_ledger {
	uint32_t magic, version, size, pad;
	pthread_mutex_t mu; /* process-shared, robust: a session process may die holding it */
	be_ledger_prio prio;
	be_ledger_tenant t[BE_TENANTS_MAX];
	be_ledger_slot slot[BE_LEDGER_SLOTS];
} be_ledger;

enum be_ledger_err {
	BE_LEDGER_OK = 0,
	BE_LEDGER_UNKNOWN = -1, /* no tenant has this token */
	BE_LEDGER_FULL = -2,    /* the tenant has its maximum of sessions */
	BE_LEDGER_NOSLOT = -3,  /* BE_LEDGER_SLOTS sessions live */
	BE_LEDGER_QUOTA = -4,   /* over the quota */
	BE_LEDGER_NOROOM = -5,  /* publish: more than BE_TENANTS_MAX tenants with the removed ones */
};

/* Supervisor: a new ledger in dir/BE_LEDGER_FILE (0600), or in an anonymous
 * memfd when dir is NULL or empty; *fd gets its descriptor. NULL (logged). */
be_ledger *be_ledger_create(const char *dir, int *fd);
/* Session process: maps the ledger its supervisor handed it. NULL (logged). */
be_ledger *be_ledger_map(int fd);
/* Supervisor: puts the table in force (at start and on reload). */
int be_ledger_publish(be_ledger *l, const be_tenant_table *tab);
/* hello: the tenant whose token hashes to sha, a slot for the session. */
int be_ledger_login(be_ledger *l, const char *sha, int64_t pid, uint32_t *slot, uint32_t *tenant);
/* Latency sessions: the slot has work now (1) or not (0). No lock: atomics
 * only, called around every burst of frames. */
void be_ledger_busy(be_ledger *l, uint32_t slot, int busy, uint64_t now_ns);
int be_ledger_charge(be_ledger *l, uint32_t slot, uint64_t size);
void be_ledger_uncharge(be_ledger *l, uint32_t slot, uint64_t size);
/* The bytes the session in slot holds now. */
uint64_t be_ledger_slot_charged(be_ledger *l, uint32_t slot);
void be_ledger_logout(be_ledger *l, uint32_t slot);
/* Supervisor: every slot of process pid is released. */
void be_ledger_reap(be_ledger *l, int64_t pid);

#endif
