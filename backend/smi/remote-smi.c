/*
 * remote-smi: what the remote-gpud servers of this host are doing, as
 * nvidia-smi shows it for a local GPU: each server's device, and its live
 * sessions with their client (host, pid, program), device memory, calls and
 * bytes per second.
 *
 *   remote-smi [--run-dir DIR | --port N] [--json | --prometheus] [--ops]
 *              [--watch SEC]
 *
 * It reads the servers' run directories (backend/src/status.h): the counters
 * that each session process keeps in a file there, live, so it asks no server
 * anything and works while a session is busy or stuck. Without --run-dir or
 * --port it shows every server found in $TMPDIR/remote-gpud-* (/tmp without
 * TMPDIR) whose process is alive.
 *
 * Exit status: 0; 1 when no server was found (text output only: --json and
 * --prometheus print an empty list and exit 0); 2 for a usage error.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "proto.h"
#include "status.h"
#include "rg_args.h"
#include "rg_opt.h"

static void usage(FILE *f)
{
	fputs("usage: remote-smi [options]\n"
	      "  --run-dir DIR   the server whose run directory is DIR (remote-gpud --run-dir)\n"
	      "  --port N        the server listening on port N (its default run directory)\n"
	      "  --json          machine-readable output\n"
	      "  --prometheus    Prometheus text format (what remote-gpud --metrics-port serves)\n"
	      "  --ops           calls per protocol op for each session\n"
	      "  --watch SEC     print again every SEC seconds until interrupted\n"
	      "  -h, --help, --version   (options take --opt VALUE and --opt=VALUE; usage errors exit 2)\n"
	      "Without --run-dir or --port: every live server in $TMPDIR/remote-gpud-*.\n",
	      f);
}

static int64_t now_unix_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static const char *human(uint64_t b, char *buf, size_t cap)
{
	static const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	double v = (double)b;
	int i = 0;
	while (v >= 1024 && i < 5) {
		v /= 1024;
		i++;
	}
	if (i == 0)
		snprintf(buf, cap, "%" PRIu64 " B", b);
	else
		snprintf(buf, cap, "%.1f %s", v, u[i]);
	return buf;
}

static const char *duration(int64_t ns, char *buf, size_t cap)
{
	int64_t s = ns > 0 ? ns / 1000000000 : 0;
	if (s >= 86400)
		snprintf(buf, cap, "%" PRId64 "d%02d:%02d:%02d", s / 86400, (int)(s / 3600 % 24), (int)(s / 60 % 60),
			 (int)(s % 60));
	else
		snprintf(buf, cap, "%d:%02d:%02d", (int)(s / 3600), (int)(s / 60 % 60), (int)(s % 60));
	return buf;
}

static void uuid_str(const uint8_t *u, char *buf, size_t cap)
{
	snprintf(buf, cap, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2],
		 u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
}

static const char *op_name(uint32_t op, char *buf, size_t cap)
{
	const char *n = op == 0 ? "unknown" : op < PROTO_OP_COUNT ? proto_op_name(op) : NULL;
	if (!n || !strcmp(n, "?")) {
		snprintf(buf, cap, "op%u", op);
		n = buf;
	}
	return n;
}

/* ---- text ---- */

static const char *class_name(uint32_t k) { return k == 1 ? "latency" : k == 2 ? "batch" : "?"; }

/* The tenants of --tenants: memory as their quotas count it, sessions. */
static void print_tenants(const be_snap *s)
{
	char m[32], p[32], q[32], n[32];
	if (!s->ntenants)
		return;
	printf("  %-20s %-8s %10s %10s %10s %9s %8s\n", "TENANT", "CLASS", "MEMORY", "PEAK", "QUOTA", "SESSIONS",
	       "REFUSED");
	for (size_t i = 0; i < s->ntenants; i++) {
		const be_snap_tenant *t = &s->tenants[i];
		if (t->max_sessions)
			snprintf(n, sizeof(n), "%" PRIu64 "/%u", t->sessions, t->max_sessions);
		else
			snprintf(n, sizeof(n), "%" PRIu64, t->sessions);
		printf("  %-20s %-8s %10s %10s %10s %9s %8" PRIu64 "%s\n", t->name, class_name(t->klass),
		       human(t->used, m, sizeof(m)), human(t->peak, p, sizeof(p)),
		       t->quota == UINT64_MAX ? "none" : human(t->quota, q, sizeof(q)), n, t->refused_mem + t->refused_sess,
		       t->removed ? "  (removed: no new sessions)" : "");
	}
}

static void print_text(const be_snap *s, int ops)
{
	char a[64], b[64], c[64], e[64];
	int64_t now = now_unix_ns();
	uint64_t used = 0;
	for (size_t j = 0; j < s->nsess; j++)
		used += s->sess[j].mem_bytes;

	if (s->has_server) {
		printf("remote-gpud %s:%d  pid %" PRId64 "%s  up %s  isolation %s  %zu session%s (%" PRIu64
		       " since start)",
		       s->listen_host, s->port, s->pid, s->alive ? "" : " (gone)", duration(now - s->start_unix_ns, a, sizeof(a)),
		       s->isolation, s->nsess, s->nsess == 1 ? "" : "s", s->sessions_started);
		if (s->metrics_port)
			printf("  metrics http://127.0.0.1:%d/metrics", s->metrics_port);
		if (s->mps)
			printf("  mps %s", be_status_mps_name(s->mps));
		printf("\n");
		for (int g = 0; g < s->ngpu; g++) {
			uuid_str(s->gpu[g].uuid, b, sizeof(b));
			printf("  GPU %d  %s  %s  %s  driver %d.%d\n", s->gpu[g].ordinal, s->gpu[g].name, b,
			       s->gpu[g].pci_bus_id, s->driver_version / 1000, s->driver_version % 1000 / 10);
		}
		printf("  memory: %s used by sessions, of %s\n", human(used, a, sizeof(a)), human(s->total_mem, c, sizeof(c)));
	} else {
		printf("%s: no server.stat (sessions only)\n", s->dir);
	}
	print_tenants(s);
	if (!s->nsess) {
		printf("  no sessions\n");
		return;
	}
	/* Columns as wide as their widest cell. */
	enum { ID, CLIENT, PID, PROG, MEM, PEAK, CPS, IN, OUT, CALLS, ERR, UP, NCOL };
	static const char *head[NCOL] = {"SESSION", "CLIENT", "PID", "PROGRAM", "MEMORY", "PEAK", "CALLS/S",
					 "IN/S", "OUT/S", "CALLS", "ERRORS", "UP"};
	char(*cell)[NCOL][160] = calloc(s->nsess, sizeof(*cell));
	int w[NCOL];
	if (!cell)
		return;
	for (int k = 0; k < NCOL; k++)
		w[k] = (int)strlen(head[k]);
	for (size_t j = 0; j < s->nsess; j++) {
		const be_snap_session *x = &s->sess[j];
		char(*c)[160] = cell[j];
		snprintf(c[ID], 160, "%" PRId64 "-%" PRIu64, x->pid, x->id);
		if (x->state == BE_STAT_RUNNING) {
			/* the command line, its program by its base name */
			const char *prog = x->program, *sp = strchr(prog, ' '), *sl = prog;
			for (const char *q = prog; *q && (!sp || q < sp); q++)
				if (*q == '/')
					sl = q + 1;
			snprintf(c[CLIENT], 160, "%s (%s)", x->client_host, x->peer);
			snprintf(c[PID], 160, "%" PRId64, x->client_pid);
			snprintf(c[PROG], 160, "%.39s", sl);
		} else {
			snprintf(c[CLIENT], 160, "%s (no hello yet)", x->peer);
			snprintf(c[PID], 160, "-");
			snprintf(c[PROG], 160, "-");
		}
		human(x->mem_bytes, c[MEM], 160);
		human(x->mem_peak, c[PEAK], 160);
		snprintf(c[CPS], 160, "%" PRIu64, x->rate_calls);
		snprintf(c[IN], 160, "%s/s", human(x->rate_bytes_in, a, sizeof(a)));
		snprintf(c[OUT], 160, "%s/s", human(x->rate_bytes_out, a, sizeof(a)));
		snprintf(c[CALLS], 160, "%" PRIu64, x->calls);
		snprintf(c[ERR], 160, "%" PRIu64, x->errors);
		duration(now - x->start_unix_ns, c[UP], 160);
		for (int k = 0; k < NCOL; k++)
			if ((int)strlen(c[k]) > w[k])
				w[k] = (int)strlen(c[k]);
	}
	/* text columns left-aligned, numbers right-aligned */
	static const int left[NCOL] = {[ID] = 1, [CLIENT] = 1, [PROG] = 1};
	printf(" ");
	for (int k = 0; k < NCOL; k++)
		printf(" %*s", left[k] ? -w[k] : w[k], head[k]);
	printf("\n");
	for (size_t j = 0; j < s->nsess; j++) {
		const be_snap_session *x = &s->sess[j];
		printf(" ");
		for (int k = 0; k < NCOL; k++)
			printf(" %*s", left[k] ? -w[k] : w[k], cell[j][k]);
		printf("\n");
		if (ops) {
			int any = 0;
			for (uint32_t op = 0; op < x->nops; op++)
				if (x->op_calls[op]) {
					printf("%s%s %" PRIu64, any ? ", " : "    calls: ", op_name(op, e, sizeof(e)),
					       x->op_calls[op]);
					any = 1;
				}
			if (any)
				printf("\n");
		}
	}
	free(cell);
}

/* ---- JSON ---- */

/* A JSON string: escapes, and invalid UTF-8 replaced by '?'. */
static void jstr(const char *v)
{
	const unsigned char *p = (const unsigned char *)v;
	putchar('"');
	while (*p) {
		unsigned c = *p;
		int n = c < 0x80 ? 1 : (c >> 5) == 6 && c >= 0xc2 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 && c <= 0xf4 ? 4 : 0;
		int ok = n > 0;
		for (int i = 1; ok && i < n; i++)
			ok = (p[i] & 0xc0) == 0x80;
		if (ok && n == 3 && ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] >= 0xa0)))
			ok = 0;
		if (ok && n == 4 && ((c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] >= 0x90)))
			ok = 0;
		if (!ok) {
			putchar('?');
			p++;
			continue;
		}
		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			fwrite(p, 1, (size_t)n, stdout);
		p += n;
	}
	putchar('"');
}

/* One served device as a JSON object (used: the sessions' memory, or NULL). */
static void json_gpu(const be_stat_gpu *d, int driver_version, const uint64_t *used)
{
	char b[48];
	uuid_str(d->uuid, b, sizeof(b));
	printf("{\"ordinal\": %d, \"name\": ", d->ordinal);
	jstr(d->name);
	printf(", \"uuid\": \"%s\", \"pci_bus_id\": ", b);
	jstr(d->pci_bus_id);
	printf(", \"driver_version\": %d, \"total_memory\": %" PRIu64, driver_version, d->total_mem);
	if (used)
		printf(", \"used_memory\": %" PRIu64, *used);
	printf("}");
}

static void print_json(const be_snap *snaps, size_t n)
{
	int64_t now = now_unix_ns();
	char b[64];
	printf("{\"servers\": [");
	for (size_t i = 0; i < n; i++) {
		const be_snap *s = &snaps[i];
		uint64_t used = 0;
		for (size_t j = 0; j < s->nsess; j++)
			used += s->sess[j].mem_bytes;
		printf("%s\n  {\"run_dir\": ", i ? "," : "");
		jstr(s->dir);
		if (s->has_server) {
			printf(", \"pid\": %" PRId64 ", \"alive\": %s, \"host\": ", s->pid, s->alive ? "true" : "false");
			jstr(s->listen_host);
			printf(", \"port\": %d, \"isolation\": ", s->port);
			jstr(s->isolation);
			printf(", \"metrics_port\": %d, \"start_time\": %.3f, \"uptime_s\": %.3f, \"sessions_started\": %" PRIu64,
			       s->metrics_port, s->start_unix_ns / 1e9, (now - s->start_unix_ns) / 1e9, s->sessions_started);
			printf(", \"mps\": \"%s\"", be_status_mps_name(s->mps));
			/* "device": the first served device, with the sessions' memory on
			 * all of them; "devices": every one */
			if (s->ngpu > 0) {
				printf(",\n   \"device\": ");
				json_gpu(&s->gpu[0], s->driver_version, &used);
			}
			printf(",\n   \"devices\": [");
			for (int g = 0; g < s->ngpu; g++) {
				printf("%s", g ? ", " : "");
				json_gpu(&s->gpu[g], s->driver_version, NULL);
			}
			printf("]");
		}
		if (s->tenants) {
			printf(",\n   \"tenants\": [");
			for (size_t j = 0; j < s->ntenants; j++) {
				const be_snap_tenant *t = &s->tenants[j];
				printf("%s\n    {\"name\": ", j ? "," : "");
				jstr(t->name);
				printf(", \"class\": \"%s\", \"memory\": %" PRIu64 ", \"memory_peak\": %" PRIu64
				       ", \"memory_quota\": ", class_name(t->klass), t->used, t->peak);
				if (t->quota == UINT64_MAX)
					printf("null");
				else
					printf("%" PRIu64, t->quota);
				printf(", \"sessions\": %" PRIu64 ", \"max_sessions\": ", t->sessions);
				if (t->max_sessions)
					printf("%u", t->max_sessions);
				else
					printf("null");
				printf(", \"sessions_started\": %" PRIu64 ", \"allocations_refused\": %" PRIu64
				       ", \"sessions_refused\": %" PRIu64 ", \"removed\": %s",
				       t->started, t->refused_mem, t->refused_sess, t->removed ? "true" : "false");
				printf(", \"busy_sessions\": %" PRIu64 ", \"held_sessions\": %" PRIu64 ", \"holds\": %" PRIu64
				       ", \"hold_timeouts\": %" PRIu64 ", \"held_seconds\": %.6f, \"ahead_waits\": %" PRIu64,
				       t->busy, t->held_now, t->holds, t->hold_timeouts, (double)t->held_ns / 1e9,
				       t->ahead_waits);
				printf(", \"handovers\": %" PRIu64 ", \"handover_timeouts\": %" PRIu64 ", \"handovers_served\": %" PRIu64
				       ", \"releases\": %" PRIu64 ", \"released_bytes\": %" PRIu64 ", \"alloc_waits\": %" PRIu64 "}",
				       t->handovers, t->handover_timeouts, t->handover_ok, t->releases, t->released_bytes,
				       t->alloc_waits);
			}
			printf("%s]", s->ntenants ? "\n   " : "");
		}
		printf(",\n   \"sessions\": [");
		for (size_t j = 0; j < s->nsess; j++) {
			const be_snap_session *x = &s->sess[j];
			printf("%s\n    {\"id\": \"%" PRId64 "-%" PRIu64 "\", \"pid\": %" PRId64 ", \"session\": %" PRIu64
			       ", \"peer\": ",
			       j ? "," : "", x->pid, x->id, x->pid, x->id);
			jstr(x->peer);
			printf(", \"state\": \"%s\"", x->state == BE_STAT_RUNNING ? "running" : "connected");
			if (x->state == BE_STAT_RUNNING) {
				printf(", \"client_host\": ");
				jstr(x->client_host);
				printf(", \"client_pid\": %" PRId64 ", \"program\": ", x->client_pid);
				jstr(x->program);
			}
			printf(", \"start_time\": %.3f, \"uptime_s\": %.3f,\n     \"memory\": %" PRIu64
			       ", \"memory_peak\": %" PRIu64 ", \"calls\": %" PRIu64 ", \"errors\": %" PRIu64
			       ", \"bytes_in\": %" PRIu64 ", \"bytes_out\": %" PRIu64 ", \"calls_per_s\": %" PRIu64
			       ", \"bytes_in_per_s\": %" PRIu64 ", \"bytes_out_per_s\": %" PRIu64 ",\n     \"calls_by_op\": {",
			       x->start_unix_ns / 1e9, (now - x->start_unix_ns) / 1e9, x->mem_bytes, x->mem_peak, x->calls,
			       x->errors, x->bytes_in, x->bytes_out, x->rate_calls, x->rate_bytes_in, x->rate_bytes_out);
			int any = 0;
			for (uint32_t op = 0; op < x->nops; op++)
				if (x->op_calls[op]) {
					printf("%s", any ? ", " : "");
					jstr(op_name(op, b, sizeof(b)));
					printf(": %" PRIu64, x->op_calls[op]);
					any = 1;
				}
			printf("}}");
		}
		printf("%s]}", s->nsess ? "\n   " : "");
	}
	printf("%s]}\n", n ? "\n" : "");
}

int main(int argc, char **argv)
{
	const char *run_dir = NULL;
	int port = -1, json = 0, prom = 0, ops = 0;
	double watch = 0;

	static const struct option longopts[] = {
		{"run-dir", required_argument, NULL, 'd'}, {"port", required_argument, NULL, 'p'},
		{"json", no_argument, NULL, 'j'},          {"prometheus", no_argument, NULL, 'P'},
		{"ops", no_argument, NULL, 'o'},           {"watch", required_argument, NULL, 'w'},
		{"help", no_argument, NULL, 'h'},          {"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	int c;
	long lv;
	while ((c = rg_opt_next(argc, argv, ":h", longopts, "remote-smi")) != -1) {
		switch (c) {
		case 'h': usage(stdout); return 0;
		case 'V': rg_version_print(stdout, "remote-smi"); return 0;
		case 'j': json = 1; break;
		case 'P': prom = 1; break;
		case 'o': ops = 1; break;
		case 'd': run_dir = optarg; break;
		case 'p':
			if (rg_opt_long("remote-smi", "--port", optarg, 1, 65535, &lv) != 0)
				return RG_EXIT_USAGE;
			port = (int)lv;
			break;
		case 'w': {
			char *end;
			watch = strtod(optarg, &end);
			if (*end || end == optarg || !(watch > 0))
				return rg_opt_error("remote-smi", "option '--watch' takes a number of seconds, not '%s'",
						    optarg);
			break;
		}
		default: return RG_EXIT_USAGE;
		}
	}
	if (optind < argc)
		return rg_opt_error("remote-smi", "unexpected argument '%s'", argv[optind]);
	if (json && prom) {
		return rg_opt_error("remote-smi", "--json and --prometheus exclude each other");
	}

	for (;;) {
		char **dirs = NULL, one[4096];
		size_t n;
		if (run_dir || port > 0) {
			if (run_dir)
				snprintf(one, sizeof(one), "%s", run_dir);
			else
				be_status_default_dir(port, one, sizeof(one));
			dirs = malloc(sizeof(*dirs));
			dirs[0] = strdup(one);
			n = 1;
		} else {
			n = be_status_find_dirs(&dirs);
		}
		be_snap *snaps = calloc(n ? n : 1, sizeof(*snaps));
		size_t got = 0;
		for (size_t i = 0; snaps && i < n; i++) {
			int r = be_snap_read(dirs[i], &snaps[got]);
			if (r == 0 || snaps[got].nsess)
				got++;
			else
				be_snap_free(&snaps[got]);
			free(dirs[i]);
		}
		free(dirs);
		int rc = 0;
		if (json) {
			print_json(snaps, got);
		} else if (prom) {
			size_t len = 0;
			char *text = be_metrics_render(snaps, got, &len);
			if (text)
				fwrite(text, 1, len, stdout);
			free(text);
		} else if (!got) {
			if (run_dir || port > 0)
				fprintf(stderr, "remote-smi: no remote-gpud status in %s\n", one);
			else
				fprintf(stderr, "remote-smi: no running remote-gpud found in %s/remote-gpud-*\n",
					getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
			rc = 1;
		} else {
			for (size_t i = 0; i < got; i++) {
				if (i)
					printf("\n");
				print_text(&snaps[i], ops);
			}
		}
		for (size_t i = 0; i < got; i++)
			be_snap_free(&snaps[i]);
		free(snaps);
		fflush(stdout);
		if (!(watch > 0))
			return rc;
		usleep((useconds_t)(watch * 1e6));
		if (!json && !prom)
			printf("\n");
	}
}
