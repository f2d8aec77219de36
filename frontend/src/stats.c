/*
 * Client statistics and traces: REMOTE_GPU_STATS, REMOTE_GPU_TRACE (stats.h says
 * what they print).
 *
 * Cost. A launch through libremote costs the client about 500 ns, so counting
 * must cost a few. Off, every hook is a load of fe_obs_on and a branch. On, a
 * call costs (about 8 ns, tests/obs/obs-hooks-bench): a lookup of the function
 * by the address of its __func__ string (open addressing, no lock), a check
 * that the return address lies in the library the function was last called
 * from (the row cache), plain stores into counters owned by the calling thread
 * (thread-local storage of the initial-exec model: no __tls_get_addr), and
 * sometimes two reads of the clock (below). No locks, no atomic
 * read-modify-write, no shared cache line written, on the common path. Locks
 * are taken only the first time a function is called from a library, or by a
 * thread.
 *
 * Counters. Each thread has its own table of counters, one per row (an API
 * function and the library that called it), allocated in blocks on first use;
 * only that thread writes them (relaxed atomic stores, so a dump in another
 * thread reads whole values). Tables of exited threads are added into a
 * "retired" table. A dump sums them all.
 *
 * A call is counted when it enters. Its round trips and bytes are taken when it
 * leaves through fe_rt_leave; a call that returns another way (a local error, a
 * no-op such as cudaFree(NULL)) is counted but not timed, and whatever it sent
 * is added to its row when the thread's next call enters.
 *
 * Time. Reading the clock is most of the cost: rdtsc takes about 10 ns on x86
 * (converted with a ratio measured against CLOCK_MONOTONIC between library load
 * and the dump), and a launch costs the client about 500 ns. So not every call
 * reads it twice. Every call that waits for the server is timed: from its start
 * when it was chosen at entry, else from its first request (the round-trip hook
 * in conn.c), which leaves out only the local work before it (well under a
 * microsecond, against tens for the round trip). Of the calls that do not wait,
 * each function's first FULL_TIMED on a thread are timed, and after that one in
 * SAMPLE_EVERY. A function's total is then the time of its calls that waited
 * plus, for the others, the mean of those timed times their number: an
 * estimate where not all were timed (marked "~" in the table; "timed_calls" <
 * "finished_calls" in JSON). The mean is the total over the finished calls; the
 * maximum is over the timed ones.
 *
 * Libraries. The caller's library comes from the return address: the first
 * time an address falls outside the cached ranges, dl_iterate_phdr finds the
 * object that holds it and its whole address range is cached.
 *
 * On demand. SIGUSR1 (when the program has not set its own handler) posts a
 * semaphore, which is all a signal handler may safely do; a thread of ours
 * waits on it and prints. remote_gpu_stats_dump() prints from the caller.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr1, dl_iterate_phdr, program_invocation_name */
#endif
#include "stats.h"

#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <inttypes.h>
#include <link.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#include "proto.h"
#include "rg_log.h"
#include "rt.h"

#define MAX_FN 1024     /* distinct function names */
#define FN_HASH 2048    /* open addressing, power of two, > MAX_FN */
#define MAX_LIB 512     /* calling objects (and unknown addresses) */
#define MAX_ROW 4096    /* function x library */
#define BLK 64          /* rows per block of a thread's table */
#define MAX_HIT 8192    /* row cache entries */
#define MAX_TRACE 64    /* REMOTE_GPU_TRACE entries */
#define MAX_BT 64       /* native frames */
#define MAX_PYFRAMES 48
#define OOM_REPORTS 16  /* out-of-memory reports per process */
#define FULL_TIMED 100  /* calls of a function a thread times before it samples */
#define SAMPLE_EVERY 16 /* then: one call in this many (calls that wait: all);
			 * REMOTE_GPU_STATS_SAMPLE=N for another N (1: time every call) */

int fe_obs_on;
_Thread_local fe_obs_tls fe_obs_t FE_OBS_TLS;

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
	_Atomic uint32_t hit; /* row cache: index + 1 into G.hit */
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

static struct {
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
} G = {.lock = PTHREAD_MUTEX_INITIALIZER, .dump_lock = PTHREAD_MUTEX_INITIALIZER, .once = PTHREAD_ONCE_INIT};

static _Thread_local thr *tls_thr __attribute__((tls_model("initial-exec")));

static void lazy_init(void);
static void dump_to_dest(const char *why);
static void render_text(FILE *f, const char *why);
static void trace_enter(const fn_info *fn, const lib_info *lib, void *ra);
static void trace_leave(const fn_info *fn, int status, uint64_t ticks, const thr *t);
static void oom_report(void);

/* ---- time ---- */

static inline uint64_t ticks(void)
{
#if defined(__x86_64__) || defined(__i386__)
	return __rdtsc();
#else
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
#endif
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Nanoseconds per tick, from the interval since the library loaded (at least
 * 2 ms of it: a dump right after the start waits that long). */
static double ns_per_tick(void)
{
#if defined(__x86_64__) || defined(__i386__)
	uint64_t ns, t;
	while ((ns = now_ns()) - G.ns0 < 2000000)
		;
	t = ticks();
	return t > G.tick0 ? (double)(ns - G.ns0) / (double)(t - G.tick0) : 1.0;
#else
	return 1.0;
#endif
}

/* ---- set up ---- */

static void parse_trace(const char *spec)
{
	while (spec && *spec && G.ntrace < MAX_TRACE) {
		const char *end = strchr(spec, ',');
		size_t n = end ? (size_t)(end - spec) : strlen(spec);
		const char *eq = memchr(spec, '=', n);
		size_t nl = eq ? (size_t)(eq - spec) : n;
		int level = eq ? atoi(eq + 1) : 3;
		while (nl && spec[0] == ' ')
			spec++, nl--;
		while (nl && spec[nl - 1] == ' ')
			nl--;
		if (nl && nl < sizeof(G.trace[0].name) && level > 0) {
			memcpy(G.trace[G.ntrace].name, spec, nl);
			G.trace[G.ntrace].name[nl] = 0;
			G.trace[G.ntrace].level = level & 3;
			G.ntrace++;
		}
		spec = end ? end + 1 : NULL;
	}
}

/* The address range of all loadable segments of an object. */
static void obj_range(const struct dl_phdr_info *info, uintptr_t *lo, uintptr_t *hi)
{
	*lo = UINTPTR_MAX;
	*hi = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD)
			continue;
		uintptr_t a = info->dlpi_addr + ph->p_vaddr;
		if (a < *lo)
			*lo = a;
		if (a + ph->p_memsz > *hi)
			*hi = a + ph->p_memsz;
	}
}

static int self_range(struct dl_phdr_info *info, size_t size, void *arg)
{
	uintptr_t me = (uintptr_t)arg, lo, hi;
	obj_range(info, &lo, &hi);
	if (me < lo || me >= hi)
		return 0;
	G.self_lo = lo;
	G.self_hi = hi;
	return 1;
}

static void at_exit(void)
{
	if (G.stats && atomic_load(&G.first_ns))
		dump_to_dest("at exit");
}

__attribute__((constructor)) static void obs_setup(void)
{
	const char *s = getenv("REMOTE_GPU_STATS");
	const char *t = getenv("REMOTE_GPU_TRACE");
	if (s && *s && strcmp(s, "0") && strcasecmp(s, "off") && strcasecmp(s, "no") && strcasecmp(s, "false")) {
		G.stats = 1;
		if (strcmp(s, "1") && strcasecmp(s, "on") && strcasecmp(s, "yes") && strcasecmp(s, "true") &&
		    strcasecmp(s, "stderr")) {
			const char *p = strstr(s, "%p");
			if (p)
				snprintf(G.path, sizeof(G.path), "%.*s%d%s", (int)(p - s), s, (int)getpid(), p + 2);
			else
				snprintf(G.path, sizeof(G.path), "%s", s);
			size_t n = strlen(G.path);
			G.json = n > 5 && !strcmp(G.path + n - 5, ".json");
		}
	}
	parse_trace(t);
	if (!G.stats && !G.ntrace)
		return;
	const char *sm = getenv("REMOTE_GPU_STATS_SAMPLE");
	G.sample = sm && atoi(sm) > 0 ? atoi(sm) : SAMPLE_EVERY;
	rg_log_init("libremote");
	G.tick0 = ticks();
	G.ns0 = now_ns();
	/* Row 0 and function 0 collect what does not fit in the tables. */
	snprintf(G.fn[0].name, sizeof(G.fn[0].name), "(other)");
	G.nfn = 1;
	snprintf(G.lib[0].path, sizeof(G.lib[0].path), "?");
	G.lib[0].base = G.lib[0].path;
	atomic_store(&G.nlib, 1);
	atomic_store(&G.nrow, 1);
	dl_iterate_phdr(self_range, (void *)(uintptr_t)obs_setup);
	if (G.stats)
		atexit(at_exit); /* registered first, so it runs after the program's own */
	fe_obs_on = 1;
}

/* ---- functions, libraries, rows ---- */

static inline uint32_t fn_hash(const char *key)
{
	return (uint32_t)(((uintptr_t)key * 0x9E3779B97F4A7C15ull) >> 40) & (FN_HASH - 1);
}

static fn_info *fn_insert(const char *key)
{
	pthread_mutex_lock(&G.lock);
	uint32_t h = fn_hash(key);
	fn_info *f = &G.fn[0];
	for (;;) {
		const char *k = atomic_load_explicit(&G.fkey[h], memory_order_relaxed);
		if (k == key) {
			f = &G.fn[G.fidx[h]];
			break;
		}
		if (!k) {
			if (G.nfn == MAX_FN)
				break;
			f = &G.fn[G.nfn];
			f->key = key;
			snprintf(f->name, sizeof(f->name), "%s", key);
			for (int i = 0; i < G.ntrace; i++)
				if (!strcmp(G.trace[i].name, "*") || !strcmp(G.trace[i].name, key))
					f->trace = G.trace[i].level;
			G.fidx[h] = (uint16_t)G.nfn++;
			atomic_store_explicit(&G.fkey[h], key, memory_order_release);
			break;
		}
		h = (h + 1) & (FN_HASH - 1);
	}
	pthread_mutex_unlock(&G.lock);
	return f;
}

/* By the address of the name (__func__): no string compare, no lock. */
static inline fn_info *fn_of(const char *key)
{
	uint32_t h = fn_hash(key);
	for (;;) {
		const char *k = atomic_load_explicit(&G.fkey[h], memory_order_acquire);
		if (k == key)
			return &G.fn[G.fidx[h]];
		if (!k)
			return fn_insert(key);
		h = (h + 1) & (FN_HASH - 1);
	}
}

typedef struct lib_find {
	uintptr_t addr, lo, hi;
	char path[256];
	int found;
} lib_find;

static int find_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	lib_find *q = arg;
	uintptr_t lo, hi;
	obj_range(info, &lo, &hi);
	if (q->addr < lo || q->addr >= hi)
		return 0;
	q->lo = lo;
	q->hi = hi;
	q->found = 1;
	if (info->dlpi_name && info->dlpi_name[0]) {
		snprintf(q->path, sizeof(q->path), "%s", info->dlpi_name);
	} else { /* the main program */
		ssize_t n = readlink("/proc/self/exe", q->path, sizeof(q->path) - 1);
		q->path[n > 0 ? n : 0] = 0;
		if (n <= 0)
			snprintf(q->path, sizeof(q->path), "%s", program_invocation_name);
	}
	return 1;
}

/* Index of the library holding addr (0: none), its range in *lo, *hi. Called
 * without G.lock (dl_iterate_phdr takes the loader's lock). */
static int lib_of(uintptr_t addr, uintptr_t *lo, uintptr_t *hi)
{
	int n = atomic_load_explicit(&G.nlib, memory_order_acquire);
	for (int i = 1; i < n; i++)
		if (addr >= G.lib[i].lo && addr < G.lib[i].hi) {
			*lo = G.lib[i].lo;
			*hi = G.lib[i].hi;
			return i;
		}
	lib_find q = {.addr = addr};
	Dl_info di;
	const ElfW(Sym) *sym = NULL;
	if (addr >= G.self_lo && addr < G.self_hi && dladdr1((void *)addr, &di, (void **)&sym, RTLD_DL_SYMENT) &&
	    sym && di.dli_sname && addr - (uintptr_t)di.dli_saddr < sym->st_size) {
		/* An entry point of ours calling another (cudaMallocPitch calls
		 * cudaMalloc): named after the outer one. */
		q.lo = (uintptr_t)di.dli_saddr;
		q.hi = q.lo + sym->st_size;
		snprintf(q.path, sizeof(q.path), "via %s", di.dli_sname);
		q.found = 1;
	} else if (addr) {
		dl_iterate_phdr(find_cb, &q);
	}
	if (!q.found) {
		*lo = addr;
		*hi = addr + 1;
		return 0;
	}
	pthread_mutex_lock(&G.lock);
	n = atomic_load_explicit(&G.nlib, memory_order_relaxed);
	int i;
	for (i = 1; i < n; i++)
		if (G.lib[i].lo == q.lo && G.lib[i].hi == q.hi)
			break;
	if (i == n && n < MAX_LIB) {
		lib_info *l = &G.lib[n];
		l->lo = q.lo;
		l->hi = q.hi;
		memcpy(l->path, q.path, sizeof(l->path));
		const char *slash = strrchr(l->path, '/');
		l->base = slash ? slash + 1 : l->path;
		atomic_store_explicit(&G.nlib, n + 1, memory_order_release);
	} else if (i == n) {
		i = 0;
	}
	pthread_mutex_unlock(&G.lock);
	*lo = q.lo;
	*hi = q.hi;
	return i;
}

/* First call of f from an address outside its cached range. */
static uint32_t row_slow(fn_info *f, uintptr_t ra)
{
	uintptr_t lo, hi;
	int lib = lib_of(ra, &lo, &hi);
	uint32_t row = 0;
	pthread_mutex_lock(&G.lock);
	for (uint32_t r = f->rows; r; r = G.row[r - 1].next)
		if (G.row[r - 1].lib == lib) {
			row = r - 1;
			goto found;
		}
	int n = atomic_load_explicit(&G.nrow, memory_order_relaxed);
	if (n < MAX_ROW && f != &G.fn[0]) {
		row = (uint32_t)n;
		G.row[n] = (row_info){(uint16_t)(f - G.fn), (uint16_t)lib, f->rows};
		f->rows = row + 1;
		atomic_store_explicit(&G.nrow, n + 1, memory_order_release);
	}
found:
	if (G.nhit < MAX_HIT) {
		G.hit[G.nhit] = (hit_info){lo, hi, row};
		atomic_store_explicit(&f->hit, (uint32_t)++G.nhit, memory_order_release);
	}
	pthread_mutex_unlock(&G.lock);
	return row;
}

static inline uint32_t row_of(fn_info *f, uintptr_t ra)
{
	uint32_t h = atomic_load_explicit(&f->hit, memory_order_acquire);
	if (h) {
		const hit_info *x = &G.hit[h - 1];
		if (ra - x->lo < x->hi - x->lo)
			return x->row;
	}
	return row_slow(f, ra);
}

/* ---- threads ---- */

static void add_cnt(cnt *dst, const cnt *src)
{
#define ADD(field)                                                                                                   \
	atomic_store_explicit(&dst->field,                                                                            \
			      atomic_load_explicit(&dst->field, memory_order_relaxed) +                               \
				      atomic_load_explicit(&src->field, memory_order_relaxed),                        \
			      memory_order_relaxed)
	ADD(calls);
	ADD(left);
	ADD(timed);
	ADD(ticks);
	ADD(waited);
	ADD(wticks);
	ADD(rt);
	ADD(tx);
	ADD(rx);
#undef ADD
	uint64_t m = atomic_load_explicit(&src->max, memory_order_relaxed);
	if (m > atomic_load_explicit(&dst->max, memory_order_relaxed))
		atomic_store_explicit(&dst->max, m, memory_order_relaxed);
}

/* G.lock held. */
static void merge_into(thr *dst, thr *src)
{
	for (int b = 0; b < MAX_ROW / BLK; b++) {
		if (!src->blk[b])
			continue;
		if (!dst->blk[b] && !(dst->blk[b] = calloc(BLK, sizeof(cnt))))
			continue;
		for (int i = 0; i < BLK; i++)
			add_cnt(&dst->blk[b][i], &src->blk[b][i]);
	}
}

static void thr_exit(void *p)
{
	thr *t = p;
	pthread_mutex_lock(&G.lock);
	merge_into(&G.retired, t);
	for (thr **pp = &G.threads; *pp; pp = &(*pp)->next)
		if (*pp == t) {
			*pp = t->next;
			break;
		}
	pthread_mutex_unlock(&G.lock);
	for (int b = 0; b < MAX_ROW / BLK; b++)
		free(t->blk[b]);
	free(t);
	tls_thr = NULL;
}

static thr *thr_new(void)
{
	pthread_once(&G.once, lazy_init);
	thr *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	pthread_mutex_lock(&G.lock);
	t->next = G.threads;
	G.threads = t;
	pthread_mutex_unlock(&G.lock);
	atomic_fetch_add(&G.nthreads, 1);
	pthread_setspecific(G.key, t);
	tls_thr = t;
	return t;
}

static inline cnt *counter(thr *t, uint32_t row)
{
	cnt *b = t->blk[row / BLK];
	if (__builtin_expect(!b, 0)) {
		/* Published under the lock: a dump may be walking this table. */
		cnt *nb = calloc(BLK, sizeof(cnt));
		if (!nb)
			return NULL;
		pthread_mutex_lock(&G.lock);
		t->blk[row / BLK] = b = nb;
		pthread_mutex_unlock(&G.lock);
	}
	return &b[row % BLK];
}

static inline void bump(_Atomic uint64_t *c, uint64_t n)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n, memory_order_relaxed);
}

/* The traffic of the call in progress goes to its row. */
static inline void settle(thr *t, cnt *c)
{
	bump(&c->rt, fe_obs_t.rt - t->rt0);
	bump(&c->tx, fe_obs_t.tx - t->tx0);
	bump(&c->rx, fe_obs_t.rx - t->rx0);
}

/* ---- the hooks ---- */

void fe_obs_enter(const char *fn, void *ra)
{
	thr *t = tls_thr;
	if (__builtin_expect(!t, 0) && !(t = thr_new()))
		return;
	if (t->cur) { /* the previous call returned without fe_rt_leave */
		cnt *c = counter(t, t->cur - 1);
		if (c)
			settle(t, c);
		t->cur = 0;
		fe_obs_t.trace_args = 0;
		fe_obs_t.timing = 0;
	}
	fn_info *f = fn_of(fn);
	uint32_t row = row_of(f, (uintptr_t)ra);
	cnt *c = counter(t, row);
	if (!c)
		return;
	bump(&c->calls, 1);
	if (__builtin_expect(!atomic_load_explicit(&G.first_ns, memory_order_relaxed), 0)) {
		uint64_t zero = 0;
		atomic_compare_exchange_strong(&G.first_ns, &zero, now_ns());
	}
	t->cur = row + 1;
	t->rt0 = fe_obs_t.rt;
	t->tx0 = fe_obs_t.tx;
	t->rx0 = fe_obs_t.rx;
	t->traced = f->trace;
	if (__builtin_expect(f->trace, 0)) {
		fe_obs_t.trace_args = f->trace & 2;
		if (f->trace & 1)
			trace_enter(f, &G.lib[G.row[row].lib], ra);
	}
	/* Timed from here, or (if it waits for the server) from its first request. */
	if (atomic_load_explicit(&c->timed, memory_order_relaxed) < FULL_TIMED || --fe_obs_t.skip <= 0 || f->trace) {
		fe_obs_t.skip = G.sample;
		fe_obs_t.timing = 1;
		fe_obs_t.t0 = ticks();
	} else {
		fe_obs_t.timing = 0;
	}
}

void fe_obs_time_from_here(void)
{
	fe_obs_t.timing = 1;
	fe_obs_t.t0 = ticks();
}

void fe_obs_leave(int status)
{
	thr *t = tls_thr;
	if (!t || !t->cur)
		return;
	uint64_t d = fe_obs_t.timing ? ticks() - fe_obs_t.t0 : 0;
	uint32_t row = t->cur - 1;
	cnt *c = counter(t, row);
	t->cur = 0;
	bump(&c->left, 1);
	if (fe_obs_t.timing) {
		fe_obs_t.timing = 0;
		if (d > (1ull << 62))
			d = 0; /* a clock that went backwards (a migration between unsynchronised cores) */
		bump(&c->timed, 1);
		bump(&c->ticks, d);
		if (fe_obs_t.rt != t->rt0) {
			bump(&c->waited, 1);
			bump(&c->wticks, d);
		}
		if (d > atomic_load_explicit(&c->max, memory_order_relaxed))
			atomic_store_explicit(&c->max, d, memory_order_relaxed);
	}
	settle(t, c);
	if (__builtin_expect(t->traced, 0)) {
		if (t->traced & 2)
			trace_leave(&G.fn[G.row[row].fn], status, d, t);
		fe_obs_t.trace_args = 0;
		t->traced = 0;
	}
	if (__builtin_expect(status == cudaErrorMemoryAllocation, 0) && G.stats)
		oom_report();
}

void fe_obs_mem(int device, int64_t delta)
{
	if (device < 0 || device >= FE_MAX_DEVICES)
		return;
	int64_t v = atomic_fetch_add(&G.mem_cur[device], delta) + delta;
	int64_t p = atomic_load(&G.mem_peak[device]);
	while (v > p && !atomic_compare_exchange_weak(&G.mem_peak[device], &p, v))
		;
	int n = atomic_load(&G.mem_devs);
	while (device >= n && !atomic_compare_exchange_weak(&G.mem_devs, &n, device + 1))
		;
}

/* ---- on demand, fork ---- */

static void on_sigusr1(int sig)
{
	int e = errno;
	sem_post(&G.sem);
	errno = e;
}

static void *dumper_main(void *arg)
{
	for (;;) {
		if (sem_wait(&G.sem) != 0) {
			if (errno == EINTR)
				continue;
			return NULL;
		}
		dump_to_dest("on SIGUSR1");
	}
}

static void start_dumper(void)
{
	struct sigaction old;
	if (sigaction(SIGUSR1, NULL, &old) != 0 || (old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) {
		LOG_INFO("frontend", "REMOTE_GPU_STATS: the program handles SIGUSR1 itself; for statistics on demand "
				     "call remote_gpu_stats_dump()");
		return;
	}
	if (sem_init(&G.sem, 0, 0) != 0)
		return;
	sigset_t all, prev;
	pthread_t th;
	pthread_attr_t a;
	sigfillset(&all);
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	pthread_sigmask(SIG_SETMASK, &all, &prev); /* the thread inherits: it takes no signal */
	int r = pthread_create(&th, &a, dumper_main, NULL);
	pthread_sigmask(SIG_SETMASK, &prev, NULL);
	pthread_attr_destroy(&a);
	if (r != 0)
		return;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigusr1;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	G.dumper = 1;
}

/* The child starts counting from zero (its parent prints its own), with the
 * forking thread as its only thread. */
static void atfork_child(void)
{
	pthread_mutex_init(&G.lock, NULL);
	pthread_mutex_init(&G.dump_lock, NULL);
	for (thr *t = G.threads; t; t = t->next)
		for (int b = 0; b < MAX_ROW / BLK; b++)
			if (t->blk[b])
				memset(t->blk[b], 0, BLK * sizeof(cnt));
	for (int b = 0; b < MAX_ROW / BLK; b++)
		if (G.retired.blk[b])
			memset(G.retired.blk[b], 0, BLK * sizeof(cnt));
	for (int i = 0; i < FE_MAX_DEVICES; i++) {
		atomic_store(&G.mem_cur[i], 0);
		atomic_store(&G.mem_peak[i], 0);
	}
	atomic_store(&G.first_ns, 0);
	G.written = 0;
	if (G.path[0]) { /* a %p in REMOTE_GPU_STATS names the child's own file */
		const char *s = getenv("REMOTE_GPU_STATS"), *p = s ? strstr(s, "%p") : NULL;
		if (p)
			snprintf(G.path, sizeof(G.path), "%.*s%d%s", (int)(p - s), s, (int)getpid(), p + 2);
	}
	if (G.dumper) { /* the thread is gone: SIGUSR1 would post to nobody */
		G.dumper = 0;
		signal(SIGUSR1, SIG_DFL);
		start_dumper();
	}
}

static void lazy_init(void)
{
	pthread_key_create(&G.key, thr_exit);
	pthread_atfork(NULL, NULL, atfork_child);
	if (G.stats)
		start_dumper();
}

/* ---- output ---- */

static const char *human(uint64_t b, char *buf, size_t cap)
{
	static const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double v = (double)b;
	int i = 0;
	while (v >= 1024 && i < 4) {
		v /= 1024;
		i++;
	}
	if (i == 0)
		snprintf(buf, cap, "%" PRIu64 " B", b);
	else
		snprintf(buf, cap, "%.1f %s", v, u[i]);
	return buf;
}

typedef struct agg {
	const char *name;
	int lib;
	cnt c;             /* the sums */
	uint64_t fn_ticks; /* all rows of the function: the sort key */
} agg;

#define V(c, f) atomic_load_explicit(&(c)->f, memory_order_relaxed)

static int agg_cmp(const void *a, const void *b)
{
	const agg *x = a, *y = b;
	if (x->fn_ticks != y->fn_ticks)
		return x->fn_ticks < y->fn_ticks ? 1 : -1;
	int s = strcmp(x->name, y->name);
	if (s)
		return s;
	uint64_t fx = V(&x->c, ticks), fy = V(&y->c, ticks);
	if (fx != fy)
		return fx < fy ? 1 : -1;
	return V(&x->c, calls) < V(&y->c, calls) ? 1 : V(&x->c, calls) > V(&y->c, calls) ? -1 : 0;
}

/* Sums every thread's counters into rows of (function name, library): a
 * malloc'd array sorted by the function's total time, then the row's. */
static agg *collect(size_t *n_out)
{
	int nrow = atomic_load_explicit(&G.nrow, memory_order_acquire);
	thr sum;
	memset(&sum, 0, sizeof(sum));
	pthread_mutex_lock(&G.lock);
	merge_into(&sum, &G.retired);
	for (thr *t = G.threads; t; t = t->next)
		merge_into(&sum, t);
	pthread_mutex_unlock(&G.lock);

	agg *a = calloc((size_t)nrow + 1, sizeof(*a));
	size_t n = 0;
	for (int r = 0; a && r < nrow; r++) {
		cnt *c = sum.blk[r / BLK] ? &sum.blk[r / BLK][r % BLK] : NULL;
		if (!c || !V(c, calls))
			continue;
		const char *name = G.fn[G.row[r].fn].name;
		int lib = G.row[r].lib;
		size_t i;
		for (i = 0; i < n; i++)
			if (a[i].lib == lib && !strcmp(a[i].name, name))
				break;
		if (i == n) {
			a[n].name = name;
			a[n].lib = lib;
			n++;
		}
		add_cnt(&a[i].c, c);
	}
	for (int b = 0; b < MAX_ROW / BLK; b++)
		free(sum.blk[b]);
	for (size_t i = 0; i < n; i++) {
		uint64_t s = 0;
		for (size_t j = 0; j < n; j++)
			if (!strcmp(a[i].name, a[j].name))
				s += V(&a[j].c, ticks);
		a[i].fn_ticks = s;
	}
	if (n)
		qsort(a, n, sizeof(*a), agg_cmp);
	*n_out = n;
	return a;
}

static void put_json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

static const char *program_name(void)
{
	static char exe[256];
	if (!exe[0]) {
		ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		exe[n > 0 ? n : 0] = 0;
	}
	return exe[0] ? exe : program_invocation_name;
}

/* Device memory per device; with live allocations, a summary of them. */
static void render_memory(FILE *f, int json)
{
	int ndev = atomic_load(&G.mem_devs);
	size_t cap = 0, nr = fe_mem_snapshot(NULL, 0);
	fe_range *r = NULL;
	for (int tries = 0; tries < 3 && nr > cap; tries++) {
		free(r);
		cap = nr + 16;
		r = malloc(cap * sizeof(*r));
		nr = r ? fe_mem_snapshot(r, cap) : 0;
	}
	if (nr > cap)
		nr = cap;
	if (json)
		fprintf(f, ",\n \"devices\": [");
	for (int d = 0; d < ndev; d++) {
		static const uint64_t lim[7] = {4096, 65536, 1u << 20, 16u << 20, 256u << 20, 1u << 30, 4ull << 30};
		static const char *cname[8] = {"<=4K", "<=64K", "<=1M", "<=16M", "<=256M", "<=1G", "<=4G", ">4G"};
		char a[32], b[32], c[32], server[300];
		const fe_device *dv = fe_rt_device(d);
		if (dv)
			snprintf(server, sizeof(server), "%s:%d", dv->addr.host, dv->addr.port);
		else
			snprintf(server, sizeof(server), "?");
		uint64_t live = 0, bytes = 0, classes[8] = {0};
		size_t top[6] = {0}; /* indexes + 1 of the largest five */
		for (size_t i = 0; i < nr; i++) {
			if (r[i].kind != FE_MEM_DEVICE || r[i].device != d)
				continue;
			live++;
			bytes += r[i].size;
			int k = 0;
			while (k < 7 && r[i].size > lim[k])
				k++;
			classes[k]++;
			for (int j = 0; j < 5; j++)
				if (!top[j] || r[top[j] - 1].size < r[i].size) {
					memmove(&top[j + 1], &top[j], (4 - (size_t)j) * sizeof(top[0]));
					top[j] = i + 1;
					break;
				}
		}
		int64_t cur = atomic_load(&G.mem_cur[d]), peak = atomic_load(&G.mem_peak[d]);
		if (json) {
			fprintf(f, "%s\n  {\"device\": %d, \"server\": ", d ? "," : "", d);
			put_json_str(f, server);
			fprintf(f,
				", \"current\": %" PRId64 ", \"peak\": %" PRId64 ", \"live_allocations\": %" PRIu64
				", \"live_bytes\": %" PRIu64 ", \"largest\": [",
				cur, peak, live, bytes);
			for (int j = 0; j < 5 && top[j]; j++)
				fprintf(f, "%s{\"address\": \"0x%" PRIx64 "\", \"size\": %" PRIu64 "}", j ? ", " : "",
					r[top[j] - 1].base, r[top[j] - 1].size);
			fprintf(f, "]}");
			continue;
		}
		fprintf(f, "device %d (%s): memory now %s, peak %s; %" PRIu64 " live allocation%s", d, server,
			human((uint64_t)(cur > 0 ? cur : 0), a, sizeof(a)),
			human((uint64_t)(peak > 0 ? peak : 0), b, sizeof(b)), live, live == 1 ? "" : "s");
		if (live) {
			fprintf(f, " (%s)\n  largest:", human(bytes, c, sizeof(c)));
			for (int j = 0; j < 5 && top[j]; j++)
				fprintf(f, "%s %s at 0x%" PRIx64, j ? "," : "", human(r[top[j] - 1].size, a, sizeof(a)),
					r[top[j] - 1].base);
			fprintf(f, "\n  by size:");
			for (int k = 0, first = 1; k < 8; k++)
				if (classes[k]) {
					fprintf(f, "%s %s: %" PRIu64, first ? "" : ",", cname[k], classes[k]);
					first = 0;
				}
		}
		fprintf(f, "\n");
	}
	if (json)
		fprintf(f, "%s]", ndev ? "\n " : "");
	free(r);
}

/* The time of all calls that left through fe_rt_leave: those that waited for
 * the server are all timed; of the others, a sample may have been, whose mean
 * stands for them all. */
static double total_ns(const cnt *c, double npt)
{
	uint64_t quick = V(c, left) - V(c, waited), qtimed = V(c, timed) - V(c, waited);
	double qticks = (double)(V(c, ticks) - V(c, wticks));
	double t = (double)V(c, wticks) + (qtimed ? qticks * (double)quick / (double)qtimed : 0);
	return t * npt;
}

static int estimated(const cnt *c) { return V(c, timed) < V(c, left); }

static void render_text(FILE *f, const char *why)
{
	size_t n = 0;
	agg *a = collect(&n);
	double npt = ns_per_tick();
	uint64_t first = atomic_load(&G.first_ns);
	double since = first ? (double)(now_ns() - first) / 1e9 : 0;
	int wf = 8, wl = 11; /* "function", "called from" */
	for (size_t i = 0; i < n; i++) {
		int l1 = (int)strlen(a[i].name), l2 = (int)strlen(G.lib[a[i].lib].base);
		wf = l1 > wf ? l1 : wf;
		wl = l2 > wl ? l2 : wl;
	}
	fprintf(f, "remote-gpu statistics %s: pid %d (%s), %.3f s since the first call, %d thread%s\n", why,
		(int)getpid(), program_name(), since, atomic_load(&G.nthreads), atomic_load(&G.nthreads) == 1 ? "" : "s");
	fprintf(f, "%-*s  %-*s %10s %11s %12s %10s %10s %11s %11s\n", wf, "function", wl, "called from", "calls",
		"round trips", "total ms", "mean us", "max us", "sent", "received");
	uint64_t tc = 0, trt = 0, ttx = 0, trx = 0;
	double tms = 0;
	int sampled = 0;
	for (size_t i = 0; i < n; i++) {
		const cnt *c = &a[i].c;
		char s[32], r[32], mean[32] = "-", max[32] = "-", total[32];
		double ms = total_ns(c, npt) / 1e6;
		if (V(c, timed)) {
			snprintf(mean, sizeof(mean), "%s%.2f", estimated(c) ? "~" : "", ms * 1e3 / (double)V(c, left));
			snprintf(max, sizeof(max), "%.2f", (double)V(c, max) * npt / 1e3);
		}
		snprintf(total, sizeof(total), "%s%.3f", estimated(c) ? "~" : "", ms);
		sampled |= estimated(c);
		fprintf(f, "%-*s  %-*s %10" PRIu64 " %11" PRIu64 " %12s %10s %10s %11s %11s\n", wf, a[i].name, wl,
			G.lib[a[i].lib].base, V(c, calls), V(c, rt), total, mean, max, human(V(c, tx), s, sizeof(s)),
			human(V(c, rx), r, sizeof(r)));
		tc += V(c, calls);
		trt += V(c, rt);
		ttx += V(c, tx);
		trx += V(c, rx);
		tms += ms;
	}
	char s[32], r[32];
	fprintf(f, "%-*s  %-*s %10" PRIu64 " %11" PRIu64 " %12.3f %10s %10s %11s %11s\n", wf, "total", wl, "", tc, trt,
		tms, "", "", human(ttx, s, sizeof(s)), human(trx, r, sizeof(r)));
	if (sampled)
		fprintf(f, "~: estimated: calls that do not wait for the server are timed one in %d after a function's "
			   "first %d on a thread (REMOTE_GPU_STATS_SAMPLE=1: all)\n",
			G.sample, FULL_TIMED);
	render_memory(f, 0);
	free(a);
}

static void render_json(FILE *f, const char *why)
{
	size_t n = 0;
	agg *a = collect(&n);
	double npt = ns_per_tick();
	uint64_t first = atomic_load(&G.first_ns);
	fprintf(f, "{\"pid\": %d, \"program\": ", (int)getpid());
	put_json_str(f, program_name());
	fprintf(f, ", \"when\": ");
	put_json_str(f, why);
	fprintf(f, ", \"seconds\": %.6f, \"threads\": %d,\n \"functions\": [",
		first ? (double)(now_ns() - first) / 1e9 : 0.0, atomic_load(&G.nthreads));
	for (size_t i = 0; i < n; i++) {
		const cnt *c = &a[i].c;
		fprintf(f, "%s\n  {\"function\": ", i ? "," : "");
		put_json_str(f, a[i].name);
		fprintf(f, ", \"library\": ");
		put_json_str(f, G.lib[a[i].lib].path);
		fprintf(f,
			", \"calls\": %" PRIu64 ", \"finished_calls\": %" PRIu64 ", \"timed_calls\": %" PRIu64
			", \"round_trips\": %" PRIu64 ", \"bytes_sent\": %" PRIu64 ", \"bytes_received\": %" PRIu64
			", \"total_us\": %.3f, \"mean_us\": %.3f, \"max_us\": %.3f}",
			V(c, calls), V(c, left), V(c, timed), V(c, rt), V(c, tx), V(c, rx), total_ns(c, npt) / 1e3,
			V(c, left) ? total_ns(c, npt) / 1e3 / (double)V(c, left) : 0.0,
			(double)V(c, max) * npt / 1e3);
	}
	fprintf(f, "%s]", n ? "\n " : "");
	render_memory(f, 1);
	fprintf(f, "}\n");
	free(a);
}

static void dump_to_dest(const char *why)
{
	char *text = NULL;
	size_t len = 0;
	pthread_mutex_lock(&G.dump_lock);
	FILE *m = open_memstream(&text, &len);
	if (m) {
		if (G.json)
			render_json(m, why);
		else
			render_text(m, why);
		fclose(m);
	}
	if (!text) {
		pthread_mutex_unlock(&G.dump_lock);
		return;
	}
	if (!G.path[0]) {
		rg_log_block(text, len);
	} else {
		/* The first dump of the process starts the file; later text dumps
		 * follow it (JSON is one document: rewritten). */
		FILE *f = fopen(G.path, G.json || !G.written ? "w" : "a");
		if (f) {
			fwrite(text, 1, len, f);
			if (!G.json)
				fputc('\n', f);
			fclose(f);
			G.written = 1;
		} else {
			LOG_WARN("frontend", "REMOTE_GPU_STATS: cannot write %s: %s", G.path, strerror(errno));
		}
	}
	pthread_mutex_unlock(&G.dump_lock);
	free(text);
}

void remote_gpu_stats_dump(FILE *f)
{
	if (!fe_obs_on) {
		if (f)
			fprintf(f, "remote-gpu statistics: off (set REMOTE_GPU_STATS=1)\n");
		return;
	}
	if (!f) {
		dump_to_dest("on demand");
		return;
	}
	pthread_mutex_lock(&G.dump_lock);
	render_text(f, "on demand");
	fflush(f);
	pthread_mutex_unlock(&G.dump_lock);
}

/* ---- out of memory ---- */

static void oom_report(void)
{
	if (atomic_fetch_add(&G.oom_reports, 1) >= OOM_REPORTS)
		return;
	char *text = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&text, &len);
	if (!m)
		return;
	char pre[160];
	rg_log_prefix(pre, sizeof(pre), RG_LOG_WARN, "stats");
	fprintf(m, "%sout of device memory on device %d:\n", pre, fe_rt_current_device());
	render_memory(m, 0);
	fclose(m);
	if (text)
		rg_log_block(text, len);
	free(text);
}

/* ---- traces ---- */

typedef struct py_api {
	int ok;
	int (*IsInitialized)(void);
	int (*IsFinalizing)(void);
	int (*GILState_Check)(void);
	void *(*GetFrame)(void);
	void *(*FrameGetCode)(void *);
	void *(*FrameGetBack)(void *);
	int (*FrameGetLineNumber)(void *);
	void *(*GetAttrString)(void *, const char *);
	const char *(*AsUTF8)(void *);
	void (*DecRef)(void *);
	void (*ErrFetch)(void **, void **, void **);
	void (*ErrRestore)(void *, void *, void *);
} py_api;

static py_api PY;
static pthread_once_t py_once = PTHREAD_ONCE_INIT;

/* The interpreter's API, found at run time in whatever process we are in
 * (python links it into its executable or libpython): never linked. */
static void py_resolve(void)
{
#define SYM(field, name) *(void **)&PY.field = dlsym(RTLD_DEFAULT, name)
	SYM(IsInitialized, "Py_IsInitialized");
	SYM(IsFinalizing, "Py_IsFinalizing");
	if (!PY.IsFinalizing)
		SYM(IsFinalizing, "_Py_IsFinalizing");
	SYM(GILState_Check, "PyGILState_Check");
	SYM(GetFrame, "PyEval_GetFrame");
	SYM(FrameGetCode, "PyFrame_GetCode");
	SYM(FrameGetBack, "PyFrame_GetBack");
	SYM(FrameGetLineNumber, "PyFrame_GetLineNumber");
	SYM(GetAttrString, "PyObject_GetAttrString");
	SYM(AsUTF8, "PyUnicode_AsUTF8");
	SYM(DecRef, "Py_DecRef");
	SYM(ErrFetch, "PyErr_Fetch");
	SYM(ErrRestore, "PyErr_Restore");
#undef SYM
	PY.ok = PY.IsInitialized && PY.GILState_Check && PY.GetFrame && PY.FrameGetCode && PY.FrameGetBack &&
		PY.FrameGetLineNumber && PY.GetAttrString && PY.AsUTF8 && PY.DecRef && PY.ErrFetch && PY.ErrRestore;
}

static void py_frames(FILE *f)
{
	pthread_once(&py_once, py_resolve);
	if (!PY.IsInitialized)
		return; /* not a Python process */
	if (!PY.ok) {
		fprintf(f, "    python: this interpreter lacks PyFrame_GetCode/PyFrame_GetBack (Python < 3.9)\n");
		return;
	}
	if (!PY.IsInitialized() || (PY.IsFinalizing && PY.IsFinalizing())) {
		fprintf(f, "    python: interpreter not running\n");
		return;
	}
	/* Only the thread that holds the GIL may touch Python objects. */
	if (!PY.GILState_Check()) {
		fprintf(f, "    python: this thread does not hold the GIL (no Python frames)\n");
		return;
	}
	void *et = NULL, *ev = NULL, *tb = NULL;
	PY.ErrFetch(&et, &ev, &tb); /* our attribute lookups must not disturb a pending exception */
	void *fr = PY.GetFrame(); /* borrowed */
	int owned = 0, i = 0;
	if (!fr)
		fprintf(f, "    python: no Python frame on this thread\n");
	while (fr && i < MAX_PYFRAMES) {
		void *code = PY.FrameGetCode(fr);
		void *name = code ? PY.GetAttrString(code, "co_name") : NULL;
		void *file = code ? PY.GetAttrString(code, "co_filename") : NULL;
		const char *n = name ? PY.AsUTF8(name) : NULL, *fl = file ? PY.AsUTF8(file) : NULL;
		fprintf(f, "    py#%d File \"%s\", line %d, in %s\n", i++, fl ? fl : "?", PY.FrameGetLineNumber(fr),
			n ? n : "?");
		if (name)
			PY.DecRef(name);
		if (file)
			PY.DecRef(file);
		if (code)
			PY.DecRef(code);
		void *back = PY.FrameGetBack(fr); /* new reference */
		if (owned)
			PY.DecRef(fr);
		fr = back;
		owned = 1;
	}
	if (fr && owned)
		PY.DecRef(fr);
	PY.ErrRestore(et, ev, tb);
}

static void trace_enter(const fn_info *fn, const lib_info *lib, void *ra)
{
	void *bt[MAX_BT];
	int n = backtrace(bt, MAX_BT);
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (!f)
		return;
	char pre[160];
	rg_log_prefix(pre, sizeof(pre), RG_LOG_INFO, "trace");
	fprintf(f, "%s%s called from %s (thread %ld)\n", pre, fn->name, lib->base, (long)syscall(SYS_gettid));
	/* Our own frames first: skip to the caller of the API function. */
	int i = 0;
	while (i < n && (uintptr_t)bt[i] >= G.self_lo && (uintptr_t)bt[i] < G.self_hi)
		i++;
	for (int k = 0; i < n; i++, k++) {
		Dl_info di;
		struct link_map *lm = NULL;
		uintptr_t a = (uintptr_t)bt[i];
		if (dladdr1(bt[i], &di, (void **)&lm, RTLD_DL_LINKMAP) && di.dli_fname) {
			const char *obj = di.dli_fname[0] ? di.dli_fname : program_name();
			if (di.dli_sname && di.dli_saddr)
				fprintf(f, "    #%d 0x%" PRIxPTR " %s(%s+0x%" PRIxPTR ")\n", k, a, obj, di.dli_sname,
					a - (uintptr_t)di.dli_saddr);
			else /* the offset nm and addr2line use: from the object's load bias */
				fprintf(f, "    #%d 0x%" PRIxPTR " %s(+0x%" PRIxPTR ")\n", k, a, obj,
					a - (lm ? (uintptr_t)lm->l_addr : (uintptr_t)di.dli_fbase));
		} else {
			fprintf(f, "    #%d 0x%" PRIxPTR " ?\n", k, a);
		}
	}
	py_frames(f);
	fclose(f);
	if (text)
		rg_log_block(text, len);
	free(text);
}

/* A msgpack object, shortly: integers >= 64 Ki in hex (addresses, handles). */
static void put_obj(FILE *f, const msgpack_object *o, int depth)
{
	switch (o->type) {
	case MSGPACK_OBJECT_NIL: fputs("nil", f); break;
	case MSGPACK_OBJECT_BOOLEAN: fputs(o->via.boolean ? "true" : "false", f); break;
	case MSGPACK_OBJECT_POSITIVE_INTEGER:
		fprintf(f, o->via.u64 >= 65536 ? "0x%" PRIx64 : "%" PRIu64, o->via.u64);
		break;
	case MSGPACK_OBJECT_NEGATIVE_INTEGER: fprintf(f, "%" PRId64, o->via.i64); break;
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64: fprintf(f, "%g", o->via.f64); break;
	case MSGPACK_OBJECT_STR: {
		uint32_t n = o->via.str.size < 80 ? o->via.str.size : 80;
		fputc('"', f);
		for (uint32_t i = 0; i < n; i++) {
			unsigned char c = (unsigned char)o->via.str.ptr[i];
			fputc(c < 0x20 || c == 0x7f ? '?' : c, f);
		}
		fputs(n < o->via.str.size ? "...\"" : "\"", f);
		break;
	}
	case MSGPACK_OBJECT_BIN: {
		uint32_t n = o->via.bin.size < 32 ? o->via.bin.size : 32;
		fprintf(f, "<%u bytes:", o->via.bin.size);
		for (uint32_t i = 0; i < n; i++)
			fprintf(f, " %02x", (unsigned char)o->via.bin.ptr[i]);
		fputs(n < o->via.bin.size ? " ...>" : ">", f);
		break;
	}
	case MSGPACK_OBJECT_ARRAY:
		fputc('[', f);
		for (uint32_t i = 0; i < o->via.array.size; i++) {
			if (i)
				fputs(", ", f);
			if (depth > 4 || i >= 16) {
				fputs("...", f);
				break;
			}
			put_obj(f, &o->via.array.ptr[i], depth + 1);
		}
		fputc(']', f);
		break;
	case MSGPACK_OBJECT_MAP:
		fputs("{...}", f);
		break;
	default: fputs("?", f); break;
	}
}

void fe_obs_trace_send(const void *frame, size_t len, uint64_t plen)
{
	const thr *t = tls_thr;
	proto_hdr h;
	proto_view v;
	if (!t || !t->cur || len < PROTO_HDR_SIZE || proto_decode_hdr(frame, &h) != PROTO_OK)
		return;
	if (proto_view_init(&v, (const uint8_t *)frame + PROTO_HDR_SIZE, len - PROTO_HDR_SIZE) != PROTO_OK) {
		proto_view_free(&v);
		return;
	}
	char *text = NULL;
	size_t tlen = 0;
	FILE *f = open_memstream(&text, &tlen);
	if (f) {
		char pre[160];
		rg_log_prefix(pre, sizeof(pre), RG_LOG_INFO, "trace");
		fprintf(f, "%s%s -> %s(", pre, G.fn[G.row[t->cur - 1].fn].name, proto_op_name(v.op));
		for (uint32_t i = 0; i < v.n; i++) { /* the arguments after [op, seq] */
			if (i)
				fputs(", ", f);
			put_obj(f, &v.items[i], 0);
		}
		fputc(')', f);
		if (plen)
			fprintf(f, " + %" PRIu64 " payload bytes", plen);
		fputs(h.flags & PROTO_F_ASYNC ? " [async]\n" : "\n", f);
		fclose(f);
		if (text)
			rg_log_block(text, tlen);
		free(text);
	}
	proto_view_free(&v);
}

static void trace_leave(const fn_info *fn, int status, uint64_t d, const thr *t)
{
	char pre[160], s[32], r[32];
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (!f)
		return;
	uint64_t rt = fe_obs_t.rt - t->rt0;
	rg_log_prefix(pre, sizeof(pre), RG_LOG_INFO, "trace");
	fprintf(f, "%s%s = %s (%d) in %.2f us; %" PRIu64 " round trip%s, %s sent, %s received\n", pre, fn->name,
		cudaGetErrorName((cudaError_t)status), status, (double)d * ns_per_tick() / 1e3, rt, rt == 1 ? "" : "s",
		human(fe_obs_t.tx - t->tx0, s, sizeof(s)), human(fe_obs_t.rx - t->rx0, r, sizeof(r)));
	fclose(f);
	if (text)
		rg_log_block(text, len);
	free(text);
}
