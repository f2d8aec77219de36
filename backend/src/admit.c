/*
 * Admission: who may open a connection, decided before anything is spent on it.
 *
 * Nothing a client has not earned by authenticating may cost the server more
 * than a descriptor for a few seconds. Three rules, checked when a connection
 * is accepted (a session process, or a session of a thread-mode server, costs
 * threads, memory and descriptors before its hello arrives):
 *
 *   - at most max_conns connections at once (in process mode: session
 *     processes), and at most max_per_source from one source address, so one
 *     host's flood of idle connections cannot crowd the others out;
 *   - a source whose client presented a wrong token waits, before it may
 *     connect again, 250 ms, then twice as long after each further failure, up
 *     to 60 s: guessing tokens drops from hundreds a second to a handful a
 *     minute. The count is forgotten after 10 minutes without a failure.
 *
 * A connection over a limit is closed at once: accepted (so the kernel's
 * backlog never fills and honest clients never see their connect time out) and
 * closed, with a log line at most once a second (a flood must not become a
 * flood of log lines).
 *
 * Sources are kept in a small table, found by a linear search: its size is
 * bounded by the connections (each live one has an entry) plus the sources in
 * back-off, and at these sizes a search costs less than a hash. The table is
 * guarded by a mutex: the loop thread admits and releases, and in thread mode
 * the executor of a session reports a wrong token.
 */
#include "backend.h"
#include "admit.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define ADMIT_SOURCES 1024                       /* table entries */
#define ADMIT_BACKOFF_MIN_NS (250ull * 1000000)  /* first back-off */
#define ADMIT_BACKOFF_MAX_NS (60ull * 1000000000) /* longest back-off */
#define ADMIT_FORGET_NS (600ull * 1000000000)    /* failures forgotten after this quiet time */
#define ADMIT_LOG_EVERY_NS 1000000000ull         /* at most one refusal line a second */

typedef struct source {
	char host[64];     /* "" : free entry */
	int conns;         /* live connections from it */
	unsigned failures; /* wrong tokens in a row */
	uint64_t until;    /* refused until then (back-off) */
	uint64_t last_fail;
} source;

static struct {
	pthread_mutex_t mu;
	int active;                    /* be_admit_init ran: this process admits */
	int max_conns, max_per_source; /* 0: no limit */
	int conns;
	source src[ADMIT_SOURCES];
	uint64_t last_log;
	uint64_t unlogged; /* refusals since the last line */
	be_admit_counts counts;
} A = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void source_host(const char *peer, char *host, size_t cap);
static source *source_find(const char *host, int create, uint64_t now);
static void refuse_log(const char *peer, const char *why, uint64_t now);

void be_admit_init(int max_conns, int max_per_source)
{
	pthread_mutex_lock(&A.mu);
	A.active = 1;
	A.max_conns = max_conns;
	A.max_per_source = max_per_source;
	pthread_mutex_unlock(&A.mu);
}

/* "host:port" or "[v6]:port" -> the host: the source address. */
static void source_host(const char *peer, char *host, size_t cap)
{
	const char *colon = strrchr(peer, ':');
	size_t n = colon ? (size_t)(colon - peer) : strlen(peer);
	if (n >= cap)
		n = cap - 1;
	memcpy(host, peer, n);
	host[n] = 0;
}

/* Under A.mu. An entry that is neither connected nor in back-off is free to
 * reuse, so the table holds only sources that matter now. */
static source *source_find(const char *host, int create, uint64_t now)
{
	source *spare = NULL;
	for (int i = 0; i < ADMIT_SOURCES; i++) {
		source *e = &A.src[i];
		if (e->host[0] && !strcmp(e->host, host))
			return e;
		int idle = !e->host[0] || (e->conns == 0 && now >= e->until && now - e->last_fail > ADMIT_FORGET_NS);
		if (!spare && idle)
			spare = e;
	}
	if (!create || !spare)
		return NULL;
	memset(spare, 0, sizeof(*spare));
	snprintf(spare->host, sizeof(spare->host), "%s", host);
	return spare;
}

/* Under A.mu. */
static void refuse_log(const char *peer, const char *why, uint64_t now)
{
	A.unlogged++;
	if (now - A.last_log < ADMIT_LOG_EVERY_NS && A.last_log)
		return;
	if (A.unlogged > 1)
		LOG_WARN(BE_LOG, "%s: %s: connection refused (and %llu more refused in the last %.0f s)", peer, why,
			 (unsigned long long)(A.unlogged - 1), (double)(now - A.last_log) / 1e9);
	else
		LOG_WARN(BE_LOG, "%s: %s: connection refused", peer, why);
	A.last_log = now;
	A.unlogged = 0;
}

int be_admit_take(const char *peer)
{
	char host[64], why[160]; /* room for the longest message and host */
	uint64_t now = rg_clock_ns();
	int ok = 0;

	source_host(peer, host, sizeof(host));
	pthread_mutex_lock(&A.mu);
	source *e = source_find(host, 1, now);
	if (!e) {
		snprintf(why, sizeof(why), "too many sources being tracked (%d)", ADMIT_SOURCES);
		A.counts.refused_limit++;
	} else if (now < e->until) {
		snprintf(why, sizeof(why), "wrong tokens from %s: in back-off for %.1f s more", host,
			 (double)(e->until - now) / 1e9);
		A.counts.refused_backoff++;
	} else if (A.max_conns && A.conns >= A.max_conns) {
		snprintf(why, sizeof(why), "%d connections already (--max-connections)", A.conns);
		A.counts.refused_limit++;
	} else if (A.max_per_source && e->conns >= A.max_per_source) {
		snprintf(why, sizeof(why), "%d connections from %s already (--max-per-source)", e->conns, host);
		A.counts.refused_limit++;
	} else {
		e->conns++;
		A.conns++;
		ok = 1;
	}
	if (!ok)
		refuse_log(peer, why, now);
	pthread_mutex_unlock(&A.mu);
	return ok ? 0 : -1;
}

void be_admit_release(const char *peer)
{
	char host[64];
	source_host(peer, host, sizeof(host));
	pthread_mutex_lock(&A.mu);
	source *e = source_find(host, 0, rg_clock_ns());
	if (e && e->conns > 0) {
		e->conns--;
		A.conns--;
	}
	pthread_mutex_unlock(&A.mu);
}

void be_admit_auth_failed(const char *peer)
{
	char host[64];
	uint64_t now = rg_clock_ns();
	source_host(peer, host, sizeof(host));
	pthread_mutex_lock(&A.mu);
	source *e = A.active ? source_find(host, 1, now) : NULL;
	if (e) {
		if (now - e->last_fail > ADMIT_FORGET_NS)
			e->failures = 0;
		e->failures++;
		unsigned shift = e->failures - 1 < 16 ? e->failures - 1 : 16;
		uint64_t wait = ADMIT_BACKOFF_MIN_NS << shift;
		if (wait > ADMIT_BACKOFF_MAX_NS)
			wait = ADMIT_BACKOFF_MAX_NS;
		e->until = now + wait;
		e->last_fail = now;
		LOG_WARN(BE_LOG, "%s: wrong token (%u in a row): connections from %s refused for %.2f s", peer,
			 e->failures, host, (double)wait / 1e9);
	}
	A.counts.auth_failures++;
	pthread_mutex_unlock(&A.mu);
}

be_admit_counts be_admit_get_counts(void)
{
	pthread_mutex_lock(&A.mu);
	be_admit_counts c = A.counts;
	c.connections = A.conns;
	pthread_mutex_unlock(&A.mu);
	return c;
}
