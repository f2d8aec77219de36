/*
 * Readers of the tenant ledger (tenant_ledger.h) for remote-smi and GET
 * /metrics: the run directory's tenants.stat, mapped read-only, its counters
 * loaded without the writers' lock (each is one atomic word; a table read
 * during a reload may mix a tenant's old and new quota, never a torn number).
 */
#include "backend.h"
#include "tenant_ledger.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define LD(x) atomic_load_explicit(&(x), memory_order_relaxed)

int be_snap_read_tenants(const char *dir, be_snap *out)
{
	char path[4200];
	struct stat st;
	snprintf(path, sizeof(path), "%s/" BE_LEDGER_FILE, dir);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return 0; /* no --tenants */
	be_ledger *l = MAP_FAILED;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size == sizeof(be_ledger))
		l = mmap(NULL, sizeof(be_ledger), PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (l == MAP_FAILED)
		return -1;
	int r = -1;
	if (l->magic == BE_LEDGER_MAGIC && l->version == BE_LEDGER_VERSION && l->size == sizeof(be_ledger) &&
	    (out->tenants = calloc(BE_TENANTS_MAX, sizeof(*out->tenants)))) {
		r = 0;
		for (int i = 0; i < BE_TENANTS_MAX; i++) {
			be_ledger_tenant *t = &l->t[i];
			uint32_t state = atomic_load_explicit(&t->state, memory_order_acquire);
			if (state == BE_LT_FREE)
				continue;
			be_snap_tenant *o = &out->tenants[out->ntenants++];
			memcpy(o->name, t->name, sizeof(o->name));
			o->name[sizeof(o->name) - 1] = 0;
			o->klass = t->klass;
			o->max_sessions = t->max_sessions;
			o->removed = state == BE_LT_REMOVED;
			o->quota = LD(t->quota);
			o->used = LD(t->used);
			o->peak = LD(t->peak);
			o->sessions = LD(t->sessions);
			o->started = LD(t->started);
			o->refused_mem = LD(t->refused_mem);
			o->refused_sess = LD(t->refused_sess);
			o->busy = LD(t->busy);
			o->held_now = LD(t->held_now);
			o->holds = LD(t->holds);
			o->hold_timeouts = LD(t->hold_timeouts);
			o->held_ns = LD(t->held_ns);
			o->ahead_waits = LD(t->ahead_waits);
			o->handovers = LD(t->handovers);
			o->handover_timeouts = LD(t->handover_timeouts);
			o->handover_ok = LD(t->handover_ok);
			o->releases = LD(t->releases);
			o->released_bytes = LD(t->released_bytes);
			o->alloc_waits = LD(t->alloc_waits);
		}
	}
	munmap(l, sizeof(be_ledger));
	return r;
}
