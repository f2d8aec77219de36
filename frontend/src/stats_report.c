/*
 * The statistics report (REMOTE_GPU_STATS): every thread's counters summed per
 * function and calling library, as a table or JSON, with device memory; written
 * where REMOTE_GPU_STATS says, or to the caller's FILE. Also the memory report
 * when a call fails for lack of device memory.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* program_invocation_name */
#endif
#include "stats_int.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rg_log.h"
#include "rt.h"

#define OOM_REPORTS 16 /* out-of-memory reports per process */

/* ---- output ---- */

const char *fe_obs_format_bytes(uint64_t b, char *buf, size_t cap)
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
	int nrow = atomic_load_explicit(&fe_obs_g.nrow, memory_order_acquire);
	thr sum;
	memset(&sum, 0, sizeof(sum));
	pthread_mutex_lock(&fe_obs_g.lock);
	fe_obs_merge_table(&sum, &fe_obs_g.retired);
	for (thr *t = fe_obs_g.threads; t; t = t->next)
		fe_obs_merge_table(&sum, t);
	pthread_mutex_unlock(&fe_obs_g.lock);

	agg *a = calloc((size_t)nrow + 1, sizeof(*a));
	size_t n = 0;
	for (int r = 0; a && r < nrow; r++) {
		cnt *c = sum.blk[r / BLK] ? &sum.blk[r / BLK][r % BLK] : NULL;
		if (!c || !V(c, calls))
			continue;
		const char *name = fe_obs_g.fn[fe_obs_g.row[r].fn].name;
		int lib = fe_obs_g.row[r].lib;
		size_t i;
		for (i = 0; i < n; i++)
			if (a[i].lib == lib && !strcmp(a[i].name, name))
				break;
		if (i == n) {
			a[n].name = name;
			a[n].lib = lib;
			n++;
		}
		fe_obs_add_counts(&a[i].c, c);
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

const char *fe_obs_get_program_name(void)
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
	int ndev = atomic_load(&fe_obs_g.mem_devs);
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
		int64_t cur = atomic_load(&fe_obs_g.mem_cur[d]), peak = atomic_load(&fe_obs_g.mem_peak[d]);
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
			fe_obs_format_bytes((uint64_t)(cur > 0 ? cur : 0), a, sizeof(a)),
			fe_obs_format_bytes((uint64_t)(peak > 0 ? peak : 0), b, sizeof(b)), live, live == 1 ? "" : "s");
		if (live) {
			fprintf(f, " (%s)\n  largest:", fe_obs_format_bytes(bytes, c, sizeof(c)));
			for (int j = 0; j < 5 && top[j]; j++)
				fprintf(f, "%s %s at 0x%" PRIx64, j ? "," : "", fe_obs_format_bytes(r[top[j] - 1].size, a, sizeof(a)),
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
	double npt = fe_obs_ns_per_tick();
	uint64_t first = atomic_load(&fe_obs_g.first_ns);
	double since = first ? (double)(fe_obs_now_ns() - first) / 1e9 : 0;
	int wf = 8, wl = 11; /* "function", "called from" */
	for (size_t i = 0; i < n; i++) {
		int l1 = (int)strlen(a[i].name), l2 = (int)strlen(fe_obs_g.lib[a[i].lib].base);
		wf = l1 > wf ? l1 : wf;
		wl = l2 > wl ? l2 : wl;
	}
	fprintf(f, "remote-gpu statistics %s: pid %d (%s), %.3f s since the first call, %d thread%s\n", why,
		(int)getpid(), fe_obs_get_program_name(), since, atomic_load(&fe_obs_g.nthreads),
		atomic_load(&fe_obs_g.nthreads) == 1 ? "" : "s");
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
			fe_obs_g.lib[a[i].lib].base, V(c, calls), V(c, rt), total, mean, max, fe_obs_format_bytes(V(c, tx), s, sizeof(s)),
			fe_obs_format_bytes(V(c, rx), r, sizeof(r)));
		tc += V(c, calls);
		trt += V(c, rt);
		ttx += V(c, tx);
		trx += V(c, rx);
		tms += ms;
	}
	char s[32], r[32];
	fprintf(f, "%-*s  %-*s %10" PRIu64 " %11" PRIu64 " %12.3f %10s %10s %11s %11s\n", wf, "total", wl, "", tc, trt,
		tms, "", "", fe_obs_format_bytes(ttx, s, sizeof(s)), fe_obs_format_bytes(trx, r, sizeof(r)));
	if (sampled)
		fprintf(f, "~: estimated: calls that do not wait for the server are timed one in %d after a function's "
			   "first %d on a thread (REMOTE_GPU_STATS_SAMPLE=1: all)\n",
			fe_obs_g.sample, FULL_TIMED);
	render_memory(f, 0);
	free(a);
}

static void render_json(FILE *f, const char *why)
{
	size_t n = 0;
	agg *a = collect(&n);
	double npt = fe_obs_ns_per_tick();
	uint64_t first = atomic_load(&fe_obs_g.first_ns);
	fprintf(f, "{\"pid\": %d, \"program\": ", (int)getpid());
	put_json_str(f, fe_obs_get_program_name());
	fprintf(f, ", \"when\": ");
	put_json_str(f, why);
	fprintf(f, ", \"seconds\": %.6f, \"threads\": %d,\n \"functions\": [",
		first ? (double)(fe_obs_now_ns() - first) / 1e9 : 0.0, atomic_load(&fe_obs_g.nthreads));
	for (size_t i = 0; i < n; i++) {
		const cnt *c = &a[i].c;
		fprintf(f, "%s\n  {\"function\": ", i ? "," : "");
		put_json_str(f, a[i].name);
		fprintf(f, ", \"library\": ");
		put_json_str(f, fe_obs_g.lib[a[i].lib].path);
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
	pthread_mutex_lock(&fe_obs_g.dump_lock);
	FILE *m = open_memstream(&text, &len);
	if (m) {
		if (fe_obs_g.json)
			render_json(m, why);
		else
			render_text(m, why);
		fclose(m);
	}
	if (!text) {
		pthread_mutex_unlock(&fe_obs_g.dump_lock);
		return;
	}
	if (!fe_obs_g.path[0]) {
		rg_log_block(text, len);
	} else {
		/* The first dump of the process starts the file; later text dumps
		 * follow it (JSON is one document: rewritten). */
		FILE *f = fopen(fe_obs_g.path, fe_obs_g.json || !fe_obs_g.written ? "w" : "a");
		if (f) {
			fwrite(text, 1, len, f);
			if (!fe_obs_g.json)
				fputc('\n', f);
			fclose(f);
			fe_obs_g.written = 1;
		} else {
			LOG_WARN("frontend", "REMOTE_GPU_STATS: cannot write %s: %s", fe_obs_g.path, strerror(errno));
		}
	}
	pthread_mutex_unlock(&fe_obs_g.dump_lock);
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
	pthread_mutex_lock(&fe_obs_g.dump_lock);
	render_text(f, "on demand");
	fflush(f);
	pthread_mutex_unlock(&fe_obs_g.dump_lock);
}

/* ---- out of memory ---- */

static void report_oom(void)
{
	if (atomic_fetch_add(&fe_obs_g.oom_reports, 1) >= OOM_REPORTS)
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

/* stats.c is below every file and calls the printers it is given. */
__attribute__((constructor)) static void register_report(void) { fe_obs_set_report(dump_to_dest, report_oom); }
