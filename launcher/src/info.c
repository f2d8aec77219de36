/*
 * remote-gpu info: one probe per server, in REMOTE_GPU's order, which is the
 * order of the devices a program sees (a server's devices, then the next
 * server's).
 */
#include "launcher.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* REMOTE_GPU_TIMEOUT (seconds) bounds each connection, as in libremote.so
 * (frontend/src/live.c), whose default, 10 s, applies when it is unset or 0. */
unsigned ln_timeout_ms(void)
{
	const char *v = getenv("REMOTE_GPU_TIMEOUT");
	double s = v && *v ? atof(v) : 10.0;
	return s > 0 ? (unsigned)(s * 1000) : 10000;
}

/* first: the client's number of the server's first device. */
void ln_probe_print(int first, const ln_probe *p)
{
	printf("%s\n", p->entry);
	if (p->state != LN_OK) {
		printf("  error       %s%s%s%s\n", ln_probe_explain(p), p->detail[0] ? " (" : "", p->detail,
		       p->detail[0] ? ")" : "");
		return;
	}
	printf("  server      remote-gpud %s, protocol %u, driver %d.%d\n",
	       p->version[0] ? p->version : "(version not sent: older than 0.1.0)", p->proto, p->driver_version / 1000,
	       p->driver_version % 1000 / 10);
	for (int d = 0; d < p->ndev; d++)
		printf("  device %-4d %s, %.1f GiB (its GPU %u)\n", first + d, p->dev[d].name,
		       (double)p->dev[d].total_mem / (1024.0 * 1024 * 1024), p->dev[d].ordinal);
	printf("  round trip  %.1f us (median of %d null calls; fastest %.1f us)\n", p->rtt_median_us, LN_PINGS,
	       p->rtt_min_us);
}

int ln_info(const ln_opts *o)
{
	const char *servers;
	int st = ln_env_client(o, &servers);
	if (st)
		return st;
	char *list = strdup(servers), *save = NULL;
	int n = 0, ok = 0, ndev = 0;
	for (char *e = strtok_r(list, ",", &save); e; e = strtok_r(NULL, ",", &save), n++) {
		ln_probe p;
		ln_probe_run(e, ln_timeout_ms(), &p);
		ln_probe_print(ndev, &p);
		ok += p.state == LN_OK;
		ndev += p.ndev;
	}
	free(list);
	printf("servers answering: %d of %d; devices: %d\n", ok, n, ndev);
	return ok == n ? 0 : 1;
}
