/*
 * Client statistics and traces: REMOTE_GPU_STATS, REMOTE_GPU_TRACE (stats.h says
 * what they print). This file is what every call goes through: the hooks and the
 * counters they write; stats_int.h lists the files that print.
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
#include "stats_int.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "rg_clock.h"
#include "rg_log.h"
#include "rt.h"

int fe_obs_on;
_Thread_local fe_obs_tls fe_obs_t FE_OBS_TLS;

fe_obs_state fe_obs_g = {
	.lock = PTHREAD_MUTEX_INITIALIZER, .dump_lock = PTHREAD_MUTEX_INITIALIZER, .once = PTHREAD_ONCE_INIT};
_Thread_local thr *fe_obs_tls_thr FE_OBS_TLS;

static void lazy_init(void);

/* ---- the printers (stats_report.c, stats_trace.c) ----
 * This file is below every other (conn.c and the memory map call its hooks);
 * the files that print sit above them and register here from a constructor.
 * Until they have, the slots hold functions that print nothing. */

static void no_dump(const char *why) { (void)why; }
static void no_oom(void) {}
static void no_enter(const fn_info *fn, const lib_info *lib, void *ra) { (void)fn, (void)lib, (void)ra; }
static void no_send(const void *frame, size_t len, uint64_t plen) { (void)frame, (void)len, (void)plen; }
static void no_leave(const fn_info *fn, int status, uint64_t d, const thr *t) { (void)fn, (void)status, (void)d, (void)t; }

static struct {
	fe_obs_dump_fn dump;
	void (*report_oom)(void);
	fe_obs_trace_enter_fn trace_enter;
	fe_obs_trace_send_fn trace_send;
	fe_obs_trace_leave_fn trace_leave;
} printers = {no_dump, no_oom, no_enter, no_send, no_leave};

void fe_obs_set_report(fe_obs_dump_fn dump, void (*report_oom)(void))
{
	printers.dump = dump;
	printers.report_oom = report_oom;
}

void fe_obs_set_trace(fe_obs_trace_enter_fn enter, fe_obs_trace_send_fn send, fe_obs_trace_leave_fn leave)
{
	printers.trace_enter = enter;
	printers.trace_send = send;
	printers.trace_leave = leave;
}

void fe_obs_trace_send(const void *frame, size_t len, uint64_t plen) { printers.trace_send(frame, len, plen); }

/* ---- time ---- */

/* The tick counter where there is one (rg_ticks), else the clock itself. */
static inline uint64_t ticks(void)
{
#if defined(__x86_64__) || defined(__i386__)
	return rg_ticks();
#else
	return rg_clock_ns();
#endif
}

uint64_t fe_obs_now_ns(void) { return rg_clock_ns(); }

/* Nanoseconds per tick, from the interval since the library loaded (at least
 * 2 ms of it: a dump right after the start waits that long). */
double fe_obs_ns_per_tick(void)
{
#if defined(__x86_64__) || defined(__i386__)
	uint64_t ns, t;
	while ((ns = fe_obs_now_ns()) - fe_obs_g.ns0 < 2000000)
		;
	t = ticks();
	return t > fe_obs_g.tick0 ? (double)(ns - fe_obs_g.ns0) / (double)(t - fe_obs_g.tick0) : 1.0;
#else
	return 1.0;
#endif
}

/* ---- set up ---- */

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
	fe_obs_g.self_lo = lo;
	fe_obs_g.self_hi = hi;
	return 1;
}

/* REMOTE_GPU_TRACE: name[=level],... */
static void parse_trace(const char *spec)
{
	while (spec && *spec && fe_obs_g.ntrace < MAX_TRACE) {
		const char *end = strchr(spec, ',');
		size_t n = end ? (size_t)(end - spec) : strlen(spec);
		const char *eq = memchr(spec, '=', n);
		size_t nl = eq ? (size_t)(eq - spec) : n;
		int level = eq ? atoi(eq + 1) : 3;
		while (nl && spec[0] == ' ')
			spec++, nl--;
		while (nl && spec[nl - 1] == ' ')
			nl--;
		if (nl && nl < sizeof(fe_obs_g.trace[0].name) && level > 0) {
			memcpy(fe_obs_g.trace[fe_obs_g.ntrace].name, spec, nl);
			fe_obs_g.trace[fe_obs_g.ntrace].name[nl] = 0;
			fe_obs_g.trace[fe_obs_g.ntrace].level = level & 3;
			fe_obs_g.ntrace++;
		}
		spec = end ? end + 1 : NULL;
	}
}

static void at_exit(void)
{
	if (fe_obs_g.stats && atomic_load(&fe_obs_g.first_ns))
		printers.dump("at exit");
}

__attribute__((constructor)) static void obs_setup(void)
{
	const char *s = getenv("REMOTE_GPU_STATS");
	const char *t = getenv("REMOTE_GPU_TRACE");
	if (s && *s && strcmp(s, "0") && strcasecmp(s, "off") && strcasecmp(s, "no") && strcasecmp(s, "false")) {
		fe_obs_g.stats = 1;
		if (strcmp(s, "1") && strcasecmp(s, "on") && strcasecmp(s, "yes") && strcasecmp(s, "true") &&
		    strcasecmp(s, "stderr")) {
			const char *p = strstr(s, "%p");
			if (p)
				snprintf(fe_obs_g.path, sizeof(fe_obs_g.path), "%.*s%d%s", (int)(p - s), s, (int)getpid(), p + 2);
			else
				snprintf(fe_obs_g.path, sizeof(fe_obs_g.path), "%s", s);
			size_t n = strlen(fe_obs_g.path);
			fe_obs_g.json = n > 5 && !strcmp(fe_obs_g.path + n - 5, ".json");
		}
	}
	parse_trace(t);
	if (!fe_obs_g.stats && !fe_obs_g.ntrace)
		return;
	const char *sm = getenv("REMOTE_GPU_STATS_SAMPLE");
	fe_obs_g.sample = sm && atoi(sm) > 0 ? atoi(sm) : SAMPLE_EVERY;
	rg_log_init("libremote");
	fe_obs_g.tick0 = ticks();
	fe_obs_g.ns0 = fe_obs_now_ns();
	/* Row 0 and function 0 collect what does not fit in the tables. */
	snprintf(fe_obs_g.fn[0].name, sizeof(fe_obs_g.fn[0].name), "(other)");
	fe_obs_g.nfn = 1;
	snprintf(fe_obs_g.lib[0].path, sizeof(fe_obs_g.lib[0].path), "?");
	fe_obs_g.lib[0].base = fe_obs_g.lib[0].path;
	atomic_store(&fe_obs_g.nlib, 1);
	atomic_store(&fe_obs_g.nrow, 1);
	dl_iterate_phdr(self_range, (void *)(uintptr_t)obs_setup);
	if (fe_obs_g.stats)
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
	pthread_mutex_lock(&fe_obs_g.lock);
	uint32_t h = fn_hash(key);
	fn_info *f = &fe_obs_g.fn[0];
	for (;;) {
		const char *k = atomic_load_explicit(&fe_obs_g.fkey[h], memory_order_relaxed);
		if (k == key) {
			f = &fe_obs_g.fn[fe_obs_g.fidx[h]];
			break;
		}
		if (!k) {
			if (fe_obs_g.nfn == MAX_FN)
				break;
			f = &fe_obs_g.fn[fe_obs_g.nfn];
			f->key = key;
			snprintf(f->name, sizeof(f->name), "%s", key);
			for (int i = 0; i < fe_obs_g.ntrace; i++)
				if (!strcmp(fe_obs_g.trace[i].name, "*") || !strcmp(fe_obs_g.trace[i].name, key))
					f->trace = fe_obs_g.trace[i].level;
			fe_obs_g.fidx[h] = (uint16_t)fe_obs_g.nfn++;
			atomic_store_explicit(&fe_obs_g.fkey[h], key, memory_order_release);
			break;
		}
		h = (h + 1) & (FN_HASH - 1);
	}
	pthread_mutex_unlock(&fe_obs_g.lock);
	return f;
}

/* By the address of the name (__func__): no string compare, no lock. */
static inline fn_info *fn_of(const char *key)
{
	uint32_t h = fn_hash(key);
	for (;;) {
		const char *k = atomic_load_explicit(&fe_obs_g.fkey[h], memory_order_acquire);
		if (k == key)
			return &fe_obs_g.fn[fe_obs_g.fidx[h]];
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
 * without fe_obs_g.lock (dl_iterate_phdr takes the loader's lock). */
static int lib_of(uintptr_t addr, uintptr_t *lo, uintptr_t *hi)
{
	int n = atomic_load_explicit(&fe_obs_g.nlib, memory_order_acquire);
	for (int i = 1; i < n; i++)
		if (addr >= fe_obs_g.lib[i].lo && addr < fe_obs_g.lib[i].hi) {
			*lo = fe_obs_g.lib[i].lo;
			*hi = fe_obs_g.lib[i].hi;
			return i;
		}
	lib_find q = {.addr = addr};
	Dl_info di;
	const ElfW(Sym) *sym = NULL;
	if (addr >= fe_obs_g.self_lo && addr < fe_obs_g.self_hi &&
	    dladdr1((void *)addr, &di, (void **)&sym, RTLD_DL_SYMENT) && sym && di.dli_sname &&
	    addr - (uintptr_t)di.dli_saddr < sym->st_size) {
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
	pthread_mutex_lock(&fe_obs_g.lock);
	n = atomic_load_explicit(&fe_obs_g.nlib, memory_order_relaxed);
	int i;
	for (i = 1; i < n; i++)
		if (fe_obs_g.lib[i].lo == q.lo && fe_obs_g.lib[i].hi == q.hi)
			break;
	if (i == n && n < MAX_LIB) {
		lib_info *l = &fe_obs_g.lib[n];
		l->lo = q.lo;
		l->hi = q.hi;
		memcpy(l->path, q.path, sizeof(l->path));
		const char *slash = strrchr(l->path, '/');
		l->base = slash ? slash + 1 : l->path;
		atomic_store_explicit(&fe_obs_g.nlib, n + 1, memory_order_release);
	} else if (i == n) {
		i = 0;
	}
	pthread_mutex_unlock(&fe_obs_g.lock);
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
	pthread_mutex_lock(&fe_obs_g.lock);
	for (uint32_t r = f->rows; r; r = fe_obs_g.row[r - 1].next)
		if (fe_obs_g.row[r - 1].lib == lib) {
			row = r - 1;
			goto found;
		}
	int n = atomic_load_explicit(&fe_obs_g.nrow, memory_order_relaxed);
	if (n < MAX_ROW && f != &fe_obs_g.fn[0]) {
		row = (uint32_t)n;
		fe_obs_g.row[n] = (row_info){(uint16_t)(f - fe_obs_g.fn), (uint16_t)lib, f->rows};
		f->rows = row + 1;
		atomic_store_explicit(&fe_obs_g.nrow, n + 1, memory_order_release);
	}
found:
	if (fe_obs_g.nhit < MAX_HIT) {
		fe_obs_g.hit[fe_obs_g.nhit] = (hit_info){lo, hi, row};
		atomic_store_explicit(&f->hit, (uint32_t)++fe_obs_g.nhit, memory_order_release);
	}
	pthread_mutex_unlock(&fe_obs_g.lock);
	return row;
}

static inline uint32_t row_of(fn_info *f, uintptr_t ra)
{
	uint32_t h = atomic_load_explicit(&f->hit, memory_order_acquire);
	if (h) {
		const hit_info *x = &fe_obs_g.hit[h - 1];
		if (ra - x->lo < x->hi - x->lo)
			return x->row;
	}
	return row_slow(f, ra);
}

/* ---- threads ---- */

void fe_obs_add_counts(cnt *dst, const cnt *src)
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

/* fe_obs_g.lock held. */
void fe_obs_merge_table(thr *dst, thr *src)
{
	for (int b = 0; b < MAX_ROW / BLK; b++) {
		if (!src->blk[b])
			continue;
		if (!dst->blk[b] && !(dst->blk[b] = calloc(BLK, sizeof(cnt))))
			continue;
		for (int i = 0; i < BLK; i++)
			fe_obs_add_counts(&dst->blk[b][i], &src->blk[b][i]);
	}
}

static void thr_exit(void *p)
{
	thr *t = p;
	pthread_mutex_lock(&fe_obs_g.lock);
	fe_obs_merge_table(&fe_obs_g.retired, t);
	for (thr **pp = &fe_obs_g.threads; *pp; pp = &(*pp)->next)
		if (*pp == t) {
			*pp = t->next;
			break;
		}
	pthread_mutex_unlock(&fe_obs_g.lock);
	for (int b = 0; b < MAX_ROW / BLK; b++)
		free(t->blk[b]);
	free(t);
	fe_obs_tls_thr = NULL;
}

static thr *thr_new(void)
{
	pthread_once(&fe_obs_g.once, lazy_init);
	thr *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	pthread_mutex_lock(&fe_obs_g.lock);
	t->next = fe_obs_g.threads;
	fe_obs_g.threads = t;
	pthread_mutex_unlock(&fe_obs_g.lock);
	atomic_fetch_add(&fe_obs_g.nthreads, 1);
	pthread_setspecific(fe_obs_g.key, t);
	fe_obs_tls_thr = t;
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
		pthread_mutex_lock(&fe_obs_g.lock);
		t->blk[row / BLK] = b = nb;
		pthread_mutex_unlock(&fe_obs_g.lock);
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
	thr *t = fe_obs_tls_thr;
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
	if (__builtin_expect(!atomic_load_explicit(&fe_obs_g.first_ns, memory_order_relaxed), 0)) {
		uint64_t zero = 0;
		atomic_compare_exchange_strong(&fe_obs_g.first_ns, &zero, fe_obs_now_ns());
	}
	t->cur = row + 1;
	t->rt0 = fe_obs_t.rt;
	t->tx0 = fe_obs_t.tx;
	t->rx0 = fe_obs_t.rx;
	t->traced = f->trace;
	if (__builtin_expect(f->trace, 0)) {
		fe_obs_t.trace_args = f->trace & 2;
		if (f->trace & 1)
			printers.trace_enter(f, &fe_obs_g.lib[fe_obs_g.row[row].lib], ra);
	}
	/* Timed from here, or (if it waits for the server) from its first request. */
	if (atomic_load_explicit(&c->timed, memory_order_relaxed) < FULL_TIMED || --fe_obs_t.skip <= 0 || f->trace) {
		fe_obs_t.skip = fe_obs_g.sample;
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
	thr *t = fe_obs_tls_thr;
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
			printers.trace_leave(&fe_obs_g.fn[fe_obs_g.row[row].fn], status, d, t);
		fe_obs_t.trace_args = 0;
		t->traced = 0;
	}
	if (__builtin_expect(status == cudaErrorMemoryAllocation, 0) && fe_obs_g.stats)
		printers.report_oom();
}

void fe_obs_mem(int device, int64_t delta)
{
	if (device < 0 || device >= FE_MAX_DEVICES)
		return;
	int64_t v = atomic_fetch_add(&fe_obs_g.mem_cur[device], delta) + delta;
	int64_t p = atomic_load(&fe_obs_g.mem_peak[device]);
	while (v > p && !atomic_compare_exchange_weak(&fe_obs_g.mem_peak[device], &p, v))
		;
	int n = atomic_load(&fe_obs_g.mem_devs);
	while (device >= n && !atomic_compare_exchange_weak(&fe_obs_g.mem_devs, &n, device + 1))
		;
}

/* ---- on demand, fork ---- */

static void on_sigusr1(int sig)
{
	int e = errno;
	sem_post(&fe_obs_g.sem);
	errno = e;
}

static void *dumper_main(void *arg)
{
	pthread_setname_np(pthread_self(), "rg-stats");
	for (;;) {
		if (sem_wait(&fe_obs_g.sem) != 0) {
			if (errno == EINTR)
				continue;
			return NULL;
		}
		printers.dump("on SIGUSR1");
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
	if (sem_init(&fe_obs_g.sem, 0, 0) != 0)
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
	fe_obs_g.dumper = 1;
}

/* The child starts counting from zero (its parent prints its own), with the
 * forking thread as its only thread. */
static void atfork_child(void)
{
	pthread_mutex_init(&fe_obs_g.lock, NULL);
	pthread_mutex_init(&fe_obs_g.dump_lock, NULL);
	for (thr *t = fe_obs_g.threads; t; t = t->next)
		for (int b = 0; b < MAX_ROW / BLK; b++)
			if (t->blk[b])
				memset(t->blk[b], 0, BLK * sizeof(cnt));
	for (int b = 0; b < MAX_ROW / BLK; b++)
		if (fe_obs_g.retired.blk[b])
			memset(fe_obs_g.retired.blk[b], 0, BLK * sizeof(cnt));
	for (int i = 0; i < FE_MAX_DEVICES; i++) {
		atomic_store(&fe_obs_g.mem_cur[i], 0);
		atomic_store(&fe_obs_g.mem_peak[i], 0);
	}
	atomic_store(&fe_obs_g.first_ns, 0);
	fe_obs_g.written = 0;
	if (fe_obs_g.path[0]) { /* a %p in REMOTE_GPU_STATS names the child's own file */
		const char *s = getenv("REMOTE_GPU_STATS"), *p = s ? strstr(s, "%p") : NULL;
		if (p)
			snprintf(fe_obs_g.path, sizeof(fe_obs_g.path), "%.*s%d%s", (int)(p - s), s, (int)getpid(), p + 2);
	}
	if (fe_obs_g.dumper) { /* the thread is gone: SIGUSR1 would post to nobody */
		fe_obs_g.dumper = 0;
		signal(SIGUSR1, SIG_DFL);
		start_dumper();
	}
}

static void lazy_init(void)
{
	pthread_key_create(&fe_obs_g.key, thr_exit);
	pthread_atfork(NULL, NULL, atfork_child);
	if (fe_obs_g.stats)
		start_dumper();
}
