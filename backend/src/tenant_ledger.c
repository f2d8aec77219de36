/*
 * The tenant ledger: who holds how much device memory, across processes.
 *
 * With a process per session, one tenant's sessions are separate processes, so
 * their total cannot live in any one of them. The supervisor makes one shared
 * mapping (a file in the run directory, so remote-smi can read it, or a memfd)
 * and hands its descriptor to every session process as fd 4. It holds:
 *
 *   - the tenants in force (name, token's SHA-256, quota, class, max sessions)
 *     and per tenant the bytes in use and at their peak and the live sessions;
 *   - one slot per live session: its pid, its tenant, the bytes it holds.
 *
 * An allocation is charged before the driver is asked (and uncharged if the
 * driver fails), under one process-shared mutex, so two sessions of a tenant
 * can never pass its quota together. Each session's charge is also in its slot,
 * and that is what makes crashes safe: when a session process ends in any way,
 * the supervisor (which sees every child exit) releases that pid's slots,
 * giving their bytes and sessions back to their tenants.
 *
 * The mutex is robust: if a session process dies while holding it (between
 * updating its slot and its tenant, say), the next locker gets EOWNERDEAD and
 * recounts every tenant from the slots, which are the truth. A session process
 * stopped (SIGSTOP) while holding it would stall the others' allocations and
 * the supervisor's reaping; it holds it for a few instructions only.
 *
 * Sessions keep the tenant they started with: a reload updates records by
 * name, and a tenant removed from the file only stops taking sessions; its
 * record stays (state REMOVED) until its last session is gone.
 */
#include "backend.h"
#include "tenant_ledger.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static void ledger_lock(be_ledger *l);
static void ledger_recount(be_ledger *l);
static void slot_release(be_ledger *l, be_ledger_slot *sl);
static int sha_equal(const char *a, const char *b);

static void ledger_recount(be_ledger *l)
{
	uint64_t lat = 0;
	for (int i = 0; i < BE_TENANTS_MAX; i++) {
		atomic_store(&l->t[i].used, 0);
		atomic_store(&l->t[i].sessions, 0);
	}
	for (int i = 0; i < BE_LEDGER_SLOTS; i++) {
		be_ledger_slot *sl = &l->slot[i];
		if (!atomic_load(&sl->pid) || sl->tenant >= BE_TENANTS_MAX)
			continue;
		be_ledger_tenant *t = &l->t[sl->tenant];
		atomic_store(&t->used, atomic_load(&t->used) + sl->charged);
		atomic_store(&t->sessions, atomic_load(&t->sessions) + 1);
		lat += sl->klass == BE_TENANT_LATENCY;
	}
	atomic_store(&l->prio.latency_sessions, lat);
}

static void ledger_lock(be_ledger *l)
{
	int r = pthread_mutex_lock(&l->mu);
	if (r == EOWNERDEAD) {
		LOG_WARN(BE_LOG, "tenant ledger: a session process died holding it: recounting from the sessions' slots");
		ledger_recount(l);
		pthread_mutex_consistent(&l->mu);
	} else if (r != 0) {
		LOG_ERROR(BE_LOG, "tenant ledger: lock: %s", strerror(r));
		abort(); /* ENOTRECOVERABLE: only after a consistent() was skipped, a bug here */
	}
}

/* Constant time in where the strings differ: 64 hex digits each. */
static int sha_equal(const char *a, const char *b)
{
	unsigned char diff = 0;
	for (int i = 0; i < 64; i++)
		diff |= (unsigned char)(a[i] ^ b[i]);
	return diff == 0;
}

be_ledger *be_ledger_create(const char *dir, int *fd_out)
{
	char path[4096], tmp[4200];
	int fd;

	if (dir && *dir) {
		snprintf(path, sizeof(path), "%s/" BE_LEDGER_FILE, dir);
		snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
		unlink(tmp);
		fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	} else {
		fd = memfd_create("remote-gpud-tenants", MFD_CLOEXEC);
	}
	if (fd < 0) {
		LOG_ERROR(BE_LOG, "tenant ledger: %s: %s", dir && *dir ? tmp : "memfd", strerror(errno));
		return NULL;
	}
	be_ledger *l = MAP_FAILED;
	if (ftruncate(fd, sizeof(be_ledger)) == 0)
		l = mmap(NULL, sizeof(be_ledger), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (l == MAP_FAILED) {
		LOG_ERROR(BE_LOG, "tenant ledger: %s", strerror(errno));
		close(fd);
		if (dir && *dir)
			unlink(tmp);
		return NULL;
	}
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(&l->mu, &a);
	pthread_mutexattr_destroy(&a);
	l->version = BE_LEDGER_VERSION;
	l->size = sizeof(be_ledger);
	atomic_thread_fence(memory_order_release);
	l->magic = BE_LEDGER_MAGIC;
	/* Complete before a reader can find it under its name. */
	if (dir && *dir && rename(tmp, path) != 0) {
		LOG_ERROR(BE_LOG, "tenant ledger: %s: %s", path, strerror(errno));
		munmap(l, sizeof(be_ledger));
		close(fd);
		unlink(tmp);
		return NULL;
	}
	*fd_out = fd;
	return l;
}

be_ledger *be_ledger_map(int fd)
{
	struct stat st;
	if (fstat(fd, &st) != 0 || (size_t)st.st_size != sizeof(be_ledger)) {
		LOG_ERROR(BE_LOG, "--ledger-fd %d: not a tenant ledger of this build", fd);
		return NULL;
	}
	be_ledger *l = mmap(NULL, sizeof(be_ledger), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (l == MAP_FAILED) {
		LOG_ERROR(BE_LOG, "--ledger-fd %d: %s", fd, strerror(errno));
		return NULL;
	}
	if (l->magic != BE_LEDGER_MAGIC || l->version != BE_LEDGER_VERSION || l->size != sizeof(be_ledger)) {
		LOG_ERROR(BE_LOG, "--ledger-fd %d: not a tenant ledger of this build", fd);
		munmap(l, sizeof(be_ledger));
		return NULL;
	}
	return l;
}

int be_ledger_publish(be_ledger *l, const be_tenant_table *tab)
{
	int match[BE_TENANTS_MAX];
	int r = BE_LEDGER_OK;

	ledger_lock(l);
	/* First find a record for every tenant, so that a table that does not
	 * fit changes nothing. */
	int freeable = 0;
	for (int i = 0; i < BE_TENANTS_MAX; i++) {
		be_ledger_tenant *t = &l->t[i];
		uint32_t st = atomic_load(&t->state);
		int kept = 0;
		for (size_t j = 0; st != BE_LT_FREE && j < tab->n && !kept; j++)
			kept = !strcmp(t->name, tab->t[j].name);
		freeable += st == BE_LT_FREE || (!kept && atomic_load(&t->sessions) == 0);
	}
	int need = 0;
	for (size_t j = 0; j < tab->n; j++) {
		match[j] = -1;
		for (int i = 0; i < BE_TENANTS_MAX && match[j] < 0; i++)
			if (atomic_load(&l->t[i].state) != BE_LT_FREE && !strcmp(l->t[i].name, tab->t[j].name))
				match[j] = i;
		need += match[j] < 0;
	}
	if (need > freeable) {
		r = BE_LEDGER_NOROOM;
		goto out;
	}
	/* Tenants gone from the file: no new sessions; freed once they have none. */
	for (int i = 0; i < BE_TENANTS_MAX; i++) {
		be_ledger_tenant *t = &l->t[i];
		if (atomic_load(&t->state) == BE_LT_FREE)
			continue;
		int kept = 0;
		for (size_t j = 0; j < tab->n && !kept; j++)
			kept = match[j] == i;
		if (kept)
			continue;
		memset(t->token_sha, 0, sizeof(t->token_sha));
		atomic_store(&t->state, atomic_load(&t->sessions) ? BE_LT_REMOVED : BE_LT_FREE);
	}
	for (size_t j = 0; j < tab->n; j++) {
		const be_tenant_def *d = &tab->t[j];
		int i = match[j];
		for (int k = 0; i < 0 && k < BE_TENANTS_MAX; k++)
			if (atomic_load(&l->t[k].state) == BE_LT_FREE)
				i = k;
		be_ledger_tenant *t = &l->t[i];
		if (match[j] < 0) {
			/* A fresh record: readers look at it only once its state says so. */
			memset(t, 0, sizeof(*t));
			snprintf(t->name, sizeof(t->name), "%s", d->name);
		}
		memcpy(t->token_sha, d->token_sha, 65);
		t->klass = d->klass;
		t->max_sessions = d->max_sessions;
		atomic_store(&t->quota, d->quota);
		atomic_store_explicit(&t->state, BE_LT_ACTIVE, memory_order_release);
	}
out:
	pthread_mutex_unlock(&l->mu);
	return r;
}

int be_ledger_login(be_ledger *l, const char *sha, int64_t pid, uint32_t *slot, uint32_t *tenant)
{
	int found = -1, r = BE_LEDGER_OK;

	ledger_lock(l);
	/* Every record is compared, whatever matched, so the time does not say
	 * which tenant (or whether any) a token belongs to. */
	for (int i = 0; i < BE_TENANTS_MAX; i++) {
		int eq = sha_equal(l->t[i].token_sha, sha) & (atomic_load(&l->t[i].state) == BE_LT_ACTIVE);
		found = eq ? i : found;
	}
	if (found < 0) {
		r = BE_LEDGER_UNKNOWN;
		goto out;
	}
	be_ledger_tenant *t = &l->t[found];
	if (t->max_sessions && atomic_load(&t->sessions) >= t->max_sessions) {
		atomic_fetch_add(&t->refused_sess, 1);
		r = BE_LEDGER_FULL;
		goto out;
	}
	r = BE_LEDGER_NOSLOT;
	for (uint32_t i = 0; i < BE_LEDGER_SLOTS; i++) {
		be_ledger_slot *sl = &l->slot[i];
		if (atomic_load(&sl->pid))
			continue;
		sl->tenant = (uint32_t)found;
		sl->klass = t->klass;
		sl->charged = 0;
		atomic_store(&sl->busy, 0);
		atomic_store(&sl->release_done, atomic_load(&sl->release_req)); /* nothing asked of it */
		if (t->klass == BE_TENANT_LATENCY)
			atomic_fetch_add(&l->prio.latency_sessions, 1);
		atomic_store(&sl->pid, pid);
		atomic_fetch_add(&t->sessions, 1);
		atomic_fetch_add(&t->started, 1);
		*slot = i;
		r = BE_LEDGER_OK;
		break;
	}
out:
	*tenant = found < 0 ? 0 : (uint32_t)found;
	pthread_mutex_unlock(&l->mu);
	return r;
}

int be_ledger_charge(be_ledger *l, uint32_t slot, uint64_t size)
{
	be_ledger_slot *sl = &l->slot[slot];
	be_ledger_tenant *t = &l->t[sl->tenant];
	int r = BE_LEDGER_OK;

	ledger_lock(l);
	uint64_t used = atomic_load(&t->used), quota = atomic_load(&t->quota);
	if (size > quota || used > quota - size) {
		atomic_fetch_add(&t->refused_mem, 1);
		r = BE_LEDGER_QUOTA;
	} else {
		/* The slot first: if we die between the two, the recount uses it. */
		sl->charged += size;
		atomic_store(&t->used, used + size);
		if (used + size > atomic_load(&t->peak))
			atomic_store(&t->peak, used + size);
	}
	pthread_mutex_unlock(&l->mu);
	return r;
}

void be_ledger_uncharge(be_ledger *l, uint32_t slot, uint64_t size)
{
	be_ledger_slot *sl = &l->slot[slot];
	be_ledger_tenant *t = &l->t[sl->tenant];

	ledger_lock(l);
	if (size > sl->charged)
		size = sl->charged; /* never below what the session was charged */
	sl->charged -= size;
	uint64_t used = atomic_load(&t->used);
	atomic_store(&t->used, used > size ? used - size : 0);
	pthread_mutex_unlock(&l->mu);
}

uint64_t be_ledger_slot_charged(be_ledger *l, uint32_t slot)
{
	ledger_lock(l);
	uint64_t n = l->slot[slot].charged;
	pthread_mutex_unlock(&l->mu);
	return n;
}

/* The exchange makes mark and unmark pairs whoever calls (the executor, the
 * waiter, the supervisor reaping a dead process): a count never goes twice. */
void be_ledger_busy(be_ledger *l, uint32_t slot, int busy, uint64_t now_ns)
{
	be_ledger_slot *sl = &l->slot[slot];
	be_ledger_tenant *t = &l->t[sl->tenant];
	if ((int)atomic_exchange(&sl->busy, (uint32_t)busy) == busy)
		return;
	if (busy) {
		atomic_fetch_add(&t->busy, 1);
		atomic_fetch_add(&l->prio.busy, 1);
		return;
	}
	if (now_ns)
		atomic_store(&l->prio.quiet_ns, now_ns);
	atomic_fetch_sub(&t->busy, 1);
	atomic_fetch_sub(&l->prio.busy, 1);
}

/* Under the lock. */
static void slot_release(be_ledger *l, be_ledger_slot *sl)
{
	be_ledger_tenant *t = &l->t[sl->tenant];
	uint64_t used = atomic_load(&t->used), n = atomic_load(&t->sessions);
	atomic_store(&t->used, used > sl->charged ? used - sl->charged : 0);
	atomic_store(&t->sessions, n ? n - 1 : 0);
	sl->charged = 0;
	be_ledger_busy(l, (uint32_t)(sl - l->slot), 0, 0);
	if (sl->klass == BE_TENANT_LATENCY) {
		uint64_t lat = atomic_load(&l->prio.latency_sessions);
		atomic_store(&l->prio.latency_sessions, lat ? lat - 1 : 0);
	}
	atomic_store(&sl->pid, 0);
	if (n <= 1 && atomic_load(&t->state) == BE_LT_REMOVED)
		atomic_store(&t->state, BE_LT_FREE);
}

void be_ledger_logout(be_ledger *l, uint32_t slot)
{
	ledger_lock(l);
	if (atomic_load(&l->slot[slot].pid))
		slot_release(l, &l->slot[slot]);
	pthread_mutex_unlock(&l->mu);
}

void be_ledger_reap(be_ledger *l, int64_t pid)
{
	ledger_lock(l);
	for (int i = 0; i < BE_LEDGER_SLOTS; i++)
		if (atomic_load(&l->slot[i].pid) == pid) {
			LOG_INFO(BE_LOG, "tenant %s: %llu bytes of ended process %lld released", l->t[l->slot[i].tenant].name,
				 (unsigned long long)l->slot[i].charged, (long long)pid);
			slot_release(l, &l->slot[i]);
		}
	pthread_mutex_unlock(&l->mu);
}
