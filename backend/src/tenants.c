/*
 * Tenants in the server: the --tenants option, its reload on SIGHUP, the
 * ledger's way to session processes, and what a session asks of it (tenants.h;
 * the file's format in tenants_file.c, the ledger's design in tenant_ledger.c).
 *
 * The supervisor reads the file and puts it in force in the ledger; session
 * processes get the ledger as fd 4 (--ledger-fd 4 on their command line, which
 * carries no token), find their tenant there at the hello by the SHA-256 of
 * the token the client presented, and charge their allocations to it. A file
 * that fails to parse on reload changes nothing: the old tenants stay.
 *
 * Thread mode serves one tenant (contexts of one process read each other's
 * memory, docs/SECURITY.md): a tenants file with more than one is refused at
 * start and on reload.
 */
#include "backend.h"
#include "handover.h"
#include "prio.h"
#include "tenant_ledger.h"
#include "tenants.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cubin.h"

static int load_file(be_tenant_table *tab, char *err, size_t cap);
static void on_sighup(uv_signal_t *h, int signum);

static struct {
	const char *path; /* --tenants */
	int ledger_fd_arg; /* --ledger-fd: a session process */
	int thread_mode;
	be_ledger *l;
	int fd;
	be_tenant_table tab; /* supervisor: as read at start or at the last good reload */
	uv_signal_t sighup;
	char store_id[BE_TENANT_NAME_MAX]; /* session process: its tenant's name */
} T = {.ledger_fd_arg = -1, .fd = -1};

int be_tenants_option(const char *opt, const char *value)
{
	if (!strcmp(opt, "--tenants")) {
		T.path = value;
		return 0;
	}
	if (!strcmp(opt, "--ledger-fd")) {
		char *end;
		long fd = strtol(value, &end, 10);
		if (*end || end == value || fd < 3 || fd > 1024) {
			fprintf(stderr, "remote-gpud: --ledger-fd %s: not a descriptor\n", value);
			return 2;
		}
		T.ledger_fd_arg = (int)fd;
		return 0;
	}
	return -1;
}

/* The file, checked for the isolation mode. */
static int load_file(be_tenant_table *tab, char *err, size_t cap)
{
	if (be_tenants_parse(T.path, tab, err, cap) != 0)
		return -1;
	if (T.thread_mode && tab->n > 1) {
		snprintf(err, cap, "%s: %zu tenants, but --isolation thread serves one (sessions of different tenants "
			 "never share a process): use --isolation process", T.path, tab->n);
		return -1;
	}
	return 0;
}

int be_tenants_setup(int session_process, int thread_mode)
{
	char err[512];

	T.thread_mode = thread_mode;
	if (session_process) {
		/* The supervisor re-reads the file on SIGHUP; `pkill -HUP remote-gpud`
		 * reaches its session processes too, which must not die of it. */
		signal(SIGHUP, SIG_IGN);
		if (T.ledger_fd_arg < 0)
			return 0;
		if (!(T.l = be_ledger_map(T.ledger_fd_arg)))
			return 2;
		T.fd = T.ledger_fd_arg;
		return 0;
	}
	if (!T.path)
		return 0;
	if (load_file(&T.tab, err, sizeof(err)) != 0) {
		fprintf(stderr, "remote-gpud: --tenants %s\n", err);
		return 2;
	}
	return 0;
}

int be_tenants_start(void *loop, const char *run_dir)
{
	if (!T.path)
		return 0;
	if (!(T.l = be_ledger_create(run_dir, &T.fd)))
		return -1;
	if (be_ledger_publish(T.l, &T.tab) != BE_LEDGER_OK) {
		LOG_ERROR(BE_LOG, "--tenants %s: more than %d tenants", T.path, BE_TENANTS_MAX);
		return -1;
	}
	be_prio_publish(T.l);
	be_handover_publish(T.l);
	LOG_INFO(BE_LOG, "--tenants %s: %zu tenants", T.path, T.tab.n);
	uv_signal_init(loop, &T.sighup);
	uv_signal_start(&T.sighup, on_sighup, SIGHUP);
	uv_unref((uv_handle_t *)&T.sighup); /* the loop ends with the sessions, not with this */
	return 0;
}

void be_tenants_stop(void)
{
	char path[4200];
	if (!T.l || T.ledger_fd_arg >= 0)
		return;
	uv_signal_stop(&T.sighup);
	uv_close((uv_handle_t *)&T.sighup, NULL);
	if (be_status_dir()[0]) {
		snprintf(path, sizeof(path), "%s/" BE_LEDGER_FILE, be_status_dir());
		unlink(path);
	}
}

static void on_sighup(uv_signal_t *h, int signum)
{
	static be_tenant_table tab; /* large: not on the loop's stack */
	char err[512];

	if (load_file(&tab, err, sizeof(err)) != 0) {
		LOG_ERROR(BE_LOG, "SIGHUP: --tenants %s; the tenants in force stay", err);
		return;
	}
	if (be_ledger_publish(T.l, &tab) != BE_LEDGER_OK) {
		LOG_ERROR(BE_LOG, "SIGHUP: --tenants %s: with the removed tenants that still have sessions, more than "
			  "%d; the tenants in force stay", T.path, BE_TENANTS_MAX);
		return;
	}
	T.tab = tab;
	LOG_WARN(BE_LOG, "SIGHUP: --tenants %s reloaded: %zu tenants (live sessions keep theirs)", T.path, tab.n);
}

int be_tenants_active(void) { return T.path != NULL || T.ledger_fd_arg >= 0; }

int be_tenants_child_args(char **argv, int n)
{
	if (!T.path)
		return n;
	argv[n++] = "--ledger-fd";
	argv[n++] = "4";
	return n;
}

int be_tenants_ledger_fd(void) { return T.ledger_fd_arg < 0 ? T.fd : -1; }

void be_tenants_reap(int pid)
{
	if (T.l && T.ledger_fd_arg < 0)
		be_ledger_reap(T.l, pid);
}

const char *be_tenants_store_id(void) { return T.store_id[0] ? T.store_id : NULL; }

/* ---- per session ---- */

int be_tenant_login(be_session *s, const char *token, size_t len)
{
	char sha[CUBIN_HASH_HEX];
	uint32_t slot = 0, ti = 0;

	cubin_hash(token, len, sha);
	int r = be_ledger_login(T.l, sha, (int64_t)getpid(), &slot, &ti);
	explicit_bzero(sha, sizeof(sha));
	const be_ledger_tenant *t = &T.l->t[ti];
	switch (r) {
	case BE_LEDGER_OK:
		s->tenant_slot = slot + 1;
		be_prio_login(s, T.l, slot);
		be_handover_login(s, T.l, slot);
		/* One session a process (process mode), one tenant a process (thread
		 * mode): the store's quota is this process's tenant's. */
		snprintf(T.store_id, sizeof(T.store_id), "%s", t->name);
		LOG_INFO(BE_LOG, "session %" PRIu64 ": tenant %s (%s, memory %" PRIu64 "%s)", s->id, t->name,
			 be_tenant_class_name(t->klass), atomic_load(&t->quota) == BE_TENANT_UNLIMITED ? 0 : atomic_load(&t->quota),
			 atomic_load(&t->quota) == BE_TENANT_UNLIMITED ? " = unlimited" : " bytes");
		return 0;
	case BE_LEDGER_UNKNOWN:
		return CUDA_ERROR_NOT_PERMITTED;
	case BE_LEDGER_FULL:
		LOG_WARN(BE_LOG, "session %" PRIu64 " (%s): tenant %s has its maximum of %u sessions: refused", s->id,
			 s->peer, t->name, t->max_sessions);
		return CUDA_ERROR_TOO_MANY_PEERS;
	default:
		LOG_WARN(BE_LOG, "session %" PRIu64 " (%s): %d sessions live, the most the tenant ledger holds: refused",
			 s->id, s->peer, BE_LEDGER_SLOTS);
		return CUDA_ERROR_TOO_MANY_PEERS;
	}
}

int be_tenant_charge(be_session *s, uint64_t size)
{
	if (!s->tenant_slot || !T.l)
		return 0;
	if (be_ledger_charge(T.l, s->tenant_slot - 1, size) == BE_LEDGER_OK)
		return 0;
	const be_ledger_tenant *t = &T.l->t[T.l->slot[s->tenant_slot - 1].tenant];
	LOG_INFO(BE_LOG, "session %" PRIu64 ": tenant %s: %" PRIu64 " bytes more would pass its memory quota (%" PRIu64
		 " of %" PRIu64 " in use): out of memory", s->id, t->name, size, atomic_load(&t->used),
		 atomic_load(&t->quota));
	return CUDA_ERROR_OUT_OF_MEMORY;
}

void be_tenant_uncharge(be_session *s, uint64_t size)
{
	if (s->tenant_slot && T.l)
		be_ledger_uncharge(T.l, s->tenant_slot - 1, size);
}

uint32_t be_tenant_class(const be_session *s)
{
	return s->tenant_slot && T.l ? T.l->slot[s->tenant_slot - 1].klass : 0;
}

void be_tenant_logout(be_session *s)
{
	be_handover_logout(s);
	be_prio_logout(s);
	if (s->tenant_slot && T.l)
		be_ledger_logout(T.l, s->tenant_slot - 1);
	s->tenant_slot = 0;
}
