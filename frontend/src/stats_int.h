/*
 * Internals of the client's statistics and traces, shared by their files
 * (stats.h is what the rest of libremote.so sees):
 *   stats.c         the hooks, per-thread counters, function and library tables,
 *                   set-up, SIGUSR1, fork
 *   stats_report.c  the report: sums, text and JSON, device memory, where it goes
 *   stats_trace.c   REMOTE_GPU_TRACE: backtraces, the arguments sent, results
 *   stats_py.c      the Python frames of a backtrace
 */
#ifndef FE_STATS_INT_H
#define FE_STATS_INT_H

#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "rt.h"
#include "stats.h"

#define MAX_FN 1024     /* distinct function names */
#define FN_HASH 2048    /* open addressing, power of two, > MAX_FN */
#define MAX_LIB 512     /* calling objects (and unknown addresses) */
#define MAX_ROW 4096    /* function x library */
#define BLK 64          /* rows per block of a thread's table */
#define MAX_HIT 8192    /* row cache entries */
#define MAX_TRACE 64    /* REMOTE_GPU_TRACE entries */
#define FULL_TIMED 100  /* calls of a function a thread times before it samples */
#define SAMPLE_EVERY 16 /* then: one call in this many (calls that wait: all);
			 * REMOTE_GPU_STATS_SAMPLE=N for another N (1: time every call) */

typedef struct cnt {
	_Atomic uint64_t calls;         /* entered */
	_Atomic uint64_t left;          /* left through fe_rt_leave */
	_Atomic uint64_t timed, ticks;  /* of those: timed, and their time */
	_Atomic uint64_t waited, wticks; /* of those: waited for the server (all timed), and their time */
	_Atomic uint64_t max, rt, tx, rx;
} cnt;

typedef struct thr {
	cnt *blk[MAX_ROW / BLK];
	struct thr *next;
	uint32_t cur; /* row + 1 of the call in progress, 0: none */
	int traced;   /* REMOTE_GPU_TRACE level of that call */
	uint64_t rt0, tx0, rx0; /* fe_obs_t's counters when the call entered */
} thr;

typedef struct fn_info {
	const char *key; /* the __func__ string it was entered with */
	char name[64];
	int trace;
	_Atomic uint32_t hit; /* row cache: index + 1 into fe_obs_g.hit */
	uint32_t rows;        /* its rows: index + 1, chained through row_info.next */
} fn_info;

typedef struct lib_info {
	uintptr_t lo, hi; /* [lo, hi): all its loadable segments; empty for "?" */
	char path[256];
	const char *base;
} lib_info;

typedef struct row_info {
	uint16_t fn, lib;
	uint32_t next;
} row_info;

typedef struct hit_info {
	uintptr_t lo, hi;
	uint32_t row;
} hit_info;

typedef struct fe_obs_state {
	int stats;         /* REMOTE_GPU_STATS set */
	int json;          /* ... to a file named *.json */
	char path[512];    /* ... to this file ("": the log) */
	int written;       /* the file was written by this process */
	int sample;        /* time one call in this many (after FULL_TIMED) */
	struct {
		char name[64];
		int level;
	} trace[MAX_TRACE];
	int ntrace;

	pthread_mutex_t lock; /* tables' inserts, the thread list, retired */
	pthread_mutex_t dump_lock;
	pthread_once_t once;
	pthread_key_t key;

	_Atomic(const char *) fkey[FN_HASH];
	uint16_t fidx[FN_HASH];
	fn_info fn[MAX_FN];
	int nfn;
	lib_info lib[MAX_LIB];
	_Atomic int nlib;
	row_info row[MAX_ROW];
	_Atomic int nrow;
	hit_info hit[MAX_HIT];
	int nhit;

	thr *threads;
	thr retired;
	_Atomic int nthreads;

	uint64_t tick0, ns0;
	_Atomic uint64_t first_ns;
	uintptr_t self_lo, self_hi; /* libremote.so itself */

	_Atomic int64_t mem_cur[FE_MAX_DEVICES], mem_peak[FE_MAX_DEVICES];
	_Atomic int mem_devs; /* highest device seen + 1 */
	_Atomic int oom_reports;

	sem_t sem;
	int dumper; /* the SIGUSR1 thread runs */
} fe_obs_state;

/* All hidden: the hooks reach the state, and the files each other, as directly
 * as when this was one file with everything static (no GOT, no PLT). */
extern fe_obs_state fe_obs_g FE_OBS_HIDDEN;
/* The calling thread's table of counters (NULL before its first call). */
extern _Thread_local thr *fe_obs_tls_thr FE_OBS_TLS;

/* stats.c */
uint64_t fe_obs_now_ns(void) FE_OBS_HIDDEN;
double fe_obs_ns_per_tick(void) FE_OBS_HIDDEN; /* may wait up to 2 ms after load */
void fe_obs_add_counts(cnt *dst, const cnt *src) FE_OBS_HIDDEN;
void fe_obs_merge_table(thr *dst, thr *src) FE_OBS_HIDDEN; /* fe_obs_g.lock held */

/* The files that print register from a constructor (stats.c calls them, and
 * is below every file: the rest of libremote.so calls its hooks).
 * stats_report.c: a dump (why: "at exit", "on SIGUSR1", ...) and the
 * out-of-memory report; stats_trace.c: a traced call's entry (its
 * backtrace), its frames sent (fe_obs_trace_send) and its result. */
typedef void (*fe_obs_dump_fn)(const char *why);
typedef void (*fe_obs_trace_enter_fn)(const fn_info *fn, const lib_info *lib, void *ra);
typedef void (*fe_obs_trace_send_fn)(const void *frame, size_t len, uint64_t plen);
typedef void (*fe_obs_trace_leave_fn)(const fn_info *fn, int status, uint64_t d, const thr *t);
void fe_obs_set_report(fe_obs_dump_fn dump, void (*report_oom)(void)) FE_OBS_HIDDEN;
void fe_obs_set_trace(fe_obs_trace_enter_fn enter, fe_obs_trace_send_fn send, fe_obs_trace_leave_fn leave) FE_OBS_HIDDEN;

/* stats_report.c */
const char *fe_obs_format_bytes(uint64_t b, char *buf, size_t cap) FE_OBS_HIDDEN;
const char *fe_obs_get_program_name(void) FE_OBS_HIDDEN;

/* stats_py.c */
void fe_obs_print_py_frames(FILE *f) FE_OBS_HIDDEN;

#endif
