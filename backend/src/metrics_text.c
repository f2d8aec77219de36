/*
 * Prometheus text exposition format (version 0.0.4) of run-directory snapshots
 * (status.h): what GET /metrics answers, and `remote-smi --prometheus`.
 *
 * The format's rules that matter here: every line of one metric family is in
 * one group, after its # HELP and # TYPE lines; label values escape backslash,
 * double quote and newline; the text is UTF-8, so client-supplied strings
 * (program names) have any invalid byte replaced. Counters end in _total.
 * Per-op call counts are given only for ops a session used.
 */
#include "rg_uuid.h"
#include "status.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

/* A label value: escaped, and invalid UTF-8 replaced by '?'. */
static void put_label(FILE *f, const char *name, const char *v)
{
	const unsigned char *p = (const unsigned char *)v;
	fprintf(f, "%s=\"", name);
	while (*p) {
		unsigned c = *p;
		int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
		int ok = n > 0;
		for (int i = 1; ok && i < n; i++)
			ok = (p[i] & 0xc0) == 0x80;
		if (ok && n == 2 && c < 0xc2)
			ok = 0; /* overlong */
		if (ok && n == 3 && ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] >= 0xa0)))
			ok = 0; /* overlong, or a surrogate */
		if (ok && n == 4 && ((c == 0xf0 && p[1] < 0x90) || c > 0xf4 || (c == 0xf4 && p[1] >= 0x90)))
			ok = 0;
		if (!ok) {
			fputc('?', f);
			p++;
			continue;
		}
		if (c == '\\')
			fputs("\\\\", f);
		else if (c == '"')
			fputs("\\\"", f);
		else if (c == '\n')
			fputs("\\n", f);
		else
			fwrite(p, 1, (size_t)n, f);
		p += n;
	}
	fputc('"', f);
}

static void family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void server_labels(FILE *f, const be_snap *s)
{
	char v[128];
	snprintf(v, sizeof(v), "%s:%d", s->listen_host, s->port);
	put_label(f, "server", v);
}

static void session_labels(FILE *f, const be_snap *s, const be_snap_session *x)
{
	char v[64];
	server_labels(f, s);
	snprintf(v, sizeof(v), "%" PRId64 "-%" PRIu64, x->pid, x->id);
	fputc(',', f);
	put_label(f, "session", v);
}

enum { V_MEM, V_PEAK, V_IN, V_OUT, V_ERR, V_START };

static void session_family(FILE *f, const be_snap *snaps, size_t n, const char *name, const char *type,
			   const char *help, int which)
{
	family(f, name, type, help);
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < snaps[i].nsess; j++) {
			const be_snap_session *x = &snaps[i].sess[j];
			fprintf(f, "%s{", name);
			session_labels(f, &snaps[i], x);
			switch (which) {
			case V_MEM: fprintf(f, "} %" PRIu64 "\n", x->mem_bytes); break;
			case V_PEAK: fprintf(f, "} %" PRIu64 "\n", x->mem_peak); break;
			case V_IN: fprintf(f, "} %" PRIu64 "\n", x->bytes_in); break;
			case V_OUT: fprintf(f, "} %" PRIu64 "\n", x->bytes_out); break;
			case V_ERR: fprintf(f, "} %" PRIu64 "\n", x->errors); break;
			case V_START:
				fprintf(f, "} %" PRId64 ".%03d\n", x->start_unix_ns / 1000000000,
					(int)(x->start_unix_ns % 1000000000 / 1000000));
				break;
			}
		}
}

enum { T_USED, T_PEAK, T_QUOTA, T_SESS, T_MAXSESS, T_STARTED, T_REFMEM, T_REFSESS, T_BUSY, T_HELDNOW, T_HOLDS,
       T_HOLDTO, T_HELDNS, T_AHEAD, T_HANDOVERS, T_HANDOVER_TO, T_HANDOVER_OK, T_RELEASES, T_RELEASED, T_ALLOCWAIT };

/* Per tenant of --tenants: labelled by name and class (names are the
 * operator's, not a client's). A quota or maximum that is unlimited is left
 * out, as Prometheus has no infinity worth graphing. */
static void tenant_family(FILE *f, const be_snap *snaps, size_t n, const char *name, const char *type,
			  const char *help, int which)
{
	int any = 0;
	for (size_t i = 0; i < n; i++)
		any |= snaps[i].ntenants > 0;
	if (!any)
		return;
	family(f, name, type, help);
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < snaps[i].ntenants; j++) {
			const be_snap_tenant *t = &snaps[i].tenants[j];
			uint64_t v = 0;
			switch (which) {
			case T_USED: v = t->used; break;
			case T_PEAK: v = t->peak; break;
			case T_QUOTA: v = t->quota; break;
			case T_SESS: v = t->sessions; break;
			case T_MAXSESS: v = t->max_sessions; break;
			case T_STARTED: v = t->started; break;
			case T_REFMEM: v = t->refused_mem; break;
			case T_REFSESS: v = t->refused_sess; break;
			case T_BUSY: v = t->busy; break;
			case T_HELDNOW: v = t->held_now; break;
			case T_HOLDS: v = t->holds; break;
			case T_HOLDTO: v = t->hold_timeouts; break;
			case T_HELDNS: v = t->held_ns; break;
			case T_AHEAD: v = t->ahead_waits; break;
			case T_HANDOVERS: v = t->handovers; break;
			case T_HANDOVER_TO: v = t->handover_timeouts; break;
			case T_HANDOVER_OK: v = t->handover_ok; break;
			case T_RELEASES: v = t->releases; break;
			case T_RELEASED: v = t->released_bytes; break;
			case T_ALLOCWAIT: v = t->alloc_waits; break;
			}
			if ((which == T_QUOTA && v == UINT64_MAX) || (which == T_MAXSESS && v == 0))
				continue;
			fprintf(f, "%s{", name);
			server_labels(f, &snaps[i]);
			fputc(',', f);
			put_label(f, "tenant", t->name);
			fputc(',', f);
			put_label(f, "class", t->klass == 1 ? "latency" : t->klass == 2 ? "batch" : "?");
			if (which == T_HELDNS)
				fprintf(f, "} %.6f\n", (double)v / 1e9);
			else
				fprintf(f, "} %" PRIu64 "\n", v);
		}
}

char *be_metrics_render(const be_snap *snaps, size_t n, size_t *len)
{
	char *buf = NULL;
	size_t blen = 0;
	FILE *f = open_memstream(&buf, &blen);
	if (!f)
		return NULL;

	family(f, "remote_gpud_up", "gauge", "1 if the remote-gpud process of this run directory is alive.");
	for (size_t i = 0; i < n; i++)
		if (snaps[i].has_server) {
			fputs("remote_gpud_up{", f);
			server_labels(f, &snaps[i]);
			fprintf(f, "} %d\n", snaps[i].alive ? 1 : 0);
		}
	family(f, "remote_gpud_info", "gauge", "A served device; always 1.");
	for (size_t i = 0; i < n; i++) {
		const be_snap *s = &snaps[i];
		char v[64], uuid[48];
		if (!s->has_server)
			continue;
		for (int g = 0; g < s->ngpu; g++) {
			const be_stat_gpu *d = &s->gpu[g];
			fputs("remote_gpud_info{", f);
			server_labels(f, s);
			snprintf(v, sizeof(v), "%" PRId64, s->pid);
			fputc(',', f);
			put_label(f, "pid", v);
			fputc(',', f);
			put_label(f, "isolation", s->isolation);
			snprintf(v, sizeof(v), "%d", d->ordinal);
			fputc(',', f);
			put_label(f, "device", v);
			fputc(',', f);
			put_label(f, "name", d->name);
			rg_uuid_format(d->uuid, uuid);
			fputc(',', f);
			put_label(f, "uuid", uuid);
			fputc(',', f);
			put_label(f, "pci_bus_id", d->pci_bus_id);
			snprintf(v, sizeof(v), "%d", s->driver_version);
			fputc(',', f);
			put_label(f, "driver_version", v);
			fputs("} 1\n", f);
		}
	}
	family(f, "remote_gpud_start_time_seconds", "gauge", "When the server started (Unix time).");
	for (size_t i = 0; i < n; i++)
		if (snaps[i].has_server) {
			fputs("remote_gpud_start_time_seconds{", f);
			server_labels(f, &snaps[i]);
			fprintf(f, "} %" PRId64 ".%03d\n", snaps[i].start_unix_ns / 1000000000,
				(int)(snaps[i].start_unix_ns % 1000000000 / 1000000));
		}
	family(f, "remote_gpud_mps_up", "gauge",
	       "--priority mps: 1 while the sessions' MPS control daemon runs (or an operator's is used), 0 once "
	       "it died; absent without MPS.");
	for (size_t i = 0; i < n; i++)
		if (snaps[i].has_server && snaps[i].mps != BE_STAT_MPS_OFF) {
			fputs("remote_gpud_mps_up{", f);
			server_labels(f, &snaps[i]);
			fprintf(f, "} %d\n", snaps[i].mps != BE_STAT_MPS_DEAD);
		}
	family(f, "remote_gpud_device_memory_total_bytes", "gauge", "Memory of the served devices (all of them).");
	for (size_t i = 0; i < n; i++)
		if (snaps[i].has_server) {
			fputs("remote_gpud_device_memory_total_bytes{", f);
			server_labels(f, &snaps[i]);
			fprintf(f, "} %" PRIu64 "\n", snaps[i].total_mem);
		}
	family(f, "remote_gpud_device_memory_used_bytes", "gauge",
	       "Device memory allocated by the live sessions (sum of their allocations).");
	for (size_t i = 0; i < n; i++) {
		uint64_t used = 0;
		for (size_t j = 0; j < snaps[i].nsess; j++)
			used += snaps[i].sess[j].mem_bytes;
		fputs("remote_gpud_device_memory_used_bytes{", f);
		server_labels(f, &snaps[i]);
		fprintf(f, "} %" PRIu64 "\n", used);
	}
	family(f, "remote_gpud_sessions", "gauge", "Live sessions (client connections).");
	for (size_t i = 0; i < n; i++) {
		fputs("remote_gpud_sessions{", f);
		server_labels(f, &snaps[i]);
		fprintf(f, "} %zu\n", snaps[i].nsess);
	}
	family(f, "remote_gpud_sessions_started_total", "counter", "Sessions accepted since the server started.");
	for (size_t i = 0; i < n; i++)
		if (snaps[i].has_server) {
			fputs("remote_gpud_sessions_started_total{", f);
			server_labels(f, &snaps[i]);
			fprintf(f, "} %" PRIu64 "\n", snaps[i].sessions_started);
		}

	tenant_family(f, snaps, n, "remote_gpud_tenant_memory_bytes", "gauge",
		      "Device memory the tenant's sessions hold now, as its quota counts it.", T_USED);
	tenant_family(f, snaps, n, "remote_gpud_tenant_memory_peak_bytes", "gauge",
		      "Most device memory the tenant's sessions held at once.", T_PEAK);
	tenant_family(f, snaps, n, "remote_gpud_tenant_memory_quota_bytes", "gauge",
		      "The tenant's device memory quota (absent: unlimited).", T_QUOTA);
	tenant_family(f, snaps, n, "remote_gpud_tenant_sessions", "gauge", "Live sessions of the tenant.", T_SESS);
	tenant_family(f, snaps, n, "remote_gpud_tenant_sessions_max", "gauge",
		      "Sessions the tenant may have at once (absent: unlimited).", T_MAXSESS);
	tenant_family(f, snaps, n, "remote_gpud_tenant_sessions_started_total", "counter",
		      "Sessions the tenant started.", T_STARTED);
	tenant_family(f, snaps, n, "remote_gpud_tenant_allocations_refused_total", "counter",
		      "Allocations refused because they would pass the tenant's quota.", T_REFMEM);
	tenant_family(f, snaps, n, "remote_gpud_tenant_sessions_refused_total", "counter",
		      "Sessions refused because the tenant had its maximum.", T_REFSESS);
	tenant_family(f, snaps, n, "remote_gpud_tenant_busy_sessions", "gauge",
		      "Latency tenant: its sessions with work now (batch work is held back meanwhile).", T_BUSY);
	tenant_family(f, snaps, n, "remote_gpud_tenant_held_sessions", "gauge",
		      "Batch tenant: its sessions held back now for latency work.", T_HELDNOW);
	tenant_family(f, snaps, n, "remote_gpud_tenant_holds_total", "counter",
		      "Batch tenant: frames held back for latency work.", T_HOLDS);
	tenant_family(f, snaps, n, "remote_gpud_tenant_hold_timeouts_total", "counter",
		      "Batch tenant: holds that reached --batch-hold-ms.", T_HOLDTO);
	tenant_family(f, snaps, n, "remote_gpud_tenant_held_seconds_total", "counter",
		      "Batch tenant: time its sessions were held back.", T_HELDNS);
	tenant_family(f, snaps, n, "remote_gpud_tenant_ahead_waits_total", "counter",
		      "Batch tenant: waits for its own work queued on the GPU to drain (--batch-ahead).", T_AHEAD);
	tenant_family(f, snaps, n, "remote_gpud_tenant_handovers_total", "counter",
		      "Latency tenant: allocations the device could not serve that asked batch tenants to release.",
		      T_HANDOVERS);
	tenant_family(f, snaps, n, "remote_gpud_tenant_handover_timeouts_total", "counter",
		      "Latency tenant: handovers whose wait reached --handover-wait-ms.", T_HANDOVER_TO);
	tenant_family(f, snaps, n, "remote_gpud_tenant_handovers_served_total", "counter",
		      "Latency tenant: handovers after which the allocation succeeded.", T_HANDOVER_OK);
	tenant_family(f, snaps, n, "remote_gpud_tenant_releases_total", "counter",
		      "Batch tenant: release requests its clients answered.", T_RELEASES);
	tenant_family(f, snaps, n, "remote_gpud_tenant_released_bytes_total", "counter",
		      "Batch tenant: device memory its clients released when asked.", T_RELEASED);
	tenant_family(f, snaps, n, "remote_gpud_tenant_alloc_waits_total", "counter",
		      "Batch tenant: allocations that waited for memory (--batch-alloc-wait-ms).", T_ALLOCWAIT);

	/* No family names a session's client (host, pid, command line): /metrics
	 * answers anyone who can reach the port, and a tenant's command line is
	 * not the others' business. remote-smi shows them to the server's user,
	 * from the run directory (mode 0700). */
	session_family(f, snaps, n, "remote_gpud_session_start_time_seconds", "gauge",
		       "When the session was accepted (Unix time).", V_START);
	session_family(f, snaps, n, "remote_gpud_session_memory_bytes", "gauge",
		       "Device memory the session has allocated now.", V_MEM);
	session_family(f, snaps, n, "remote_gpud_session_memory_peak_bytes", "gauge",
		       "Most device memory the session had allocated at once.", V_PEAK);
	family(f, "remote_gpud_session_calls_total", "counter", "Calls (frames) received, per protocol op.");
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < snaps[i].nsess; j++) {
			const be_snap_session *x = &snaps[i].sess[j];
			for (uint32_t op = 0; op < x->nops; op++) {
				char other[32];
				const char *name = op == 0 ? "unknown" : op < PROTO_OP_COUNT ? proto_op_name(op) : NULL;
				if (!x->op_calls[op])
					continue;
				if (!name || !strcmp(name, "?"))
					snprintf(other, sizeof(other), "op%u", op), name = other;
				fputs("remote_gpud_session_calls_total{", f);
				session_labels(f, &snaps[i], x);
				fputc(',', f);
				put_label(f, "op", name);
				fprintf(f, "} %" PRIu64 "\n", x->op_calls[op]);
			}
		}
	session_family(f, snaps, n, "remote_gpud_session_errors_total", "counter",
		       "Calls of the session that ended in a CUDA error.", V_ERR);
	session_family(f, snaps, n, "remote_gpud_session_received_bytes_total", "counter",
		       "Bytes received from the client (frame headers, messages, payloads).", V_IN);
	session_family(f, snaps, n, "remote_gpud_session_sent_bytes_total", "counter",
		       "Bytes sent to the client (replies and events).", V_OUT);
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	*len = blen;
	return buf;
}
