/*
 * The writing side of the run directory (status.h): the supervisor's
 * server.stat and each session's counters file.
 *
 * A session's file is created as "<name>.tmp", sized, mapped, filled and then
 * renamed, so readers only ever see complete headers. The session counts
 * straight into the mapping for its whole life; a timer of the session's loop
 * turns the counters into per-second rates once a second (unref'd: it never
 * keeps a finished session's loop alive). Without a usable directory the
 * counters live in ordinary memory and nobody sees them, which costs the
 * session nothing more.
 */
#include "backend.h"
#include "status.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct be_status_sess {
	uv_timer_t timer;
	be_stat_session *m;
	size_t len;
	int mapped; /* m is a file mapping (else malloc'd) */
	char path[4096];
	uint64_t last_calls, last_in, last_out;
} be_status_sess;

static struct {
	char dir[3900];
	be_stat_server *srv; /* supervisor (or thread isolation): server.stat mapped */
	int owner;           /* this process created server.stat */
} S;

static int map_new(const char *path, size_t len, void **out);
static int ensure_dir(const char *dir);
static void clear_stale(const char *dir);
static void sess_tick(uv_timer_t *t);
static void sess_closed(uv_handle_t *h);

static int64_t unix_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

const char *be_status_dir(void) { return S.dir; }

void be_status_use_dir(const char *dir) { snprintf(S.dir, sizeof(S.dir), "%s", dir ? dir : ""); }

/* The directory must be ours and a real directory: $TMPDIR is shared, and a
 * directory another user planted (or a symlink) must not receive our files.
 * It is 0700 (and its files 0600): it names every session's client host, pid
 * and command line, which are for this user (remote-smi) only. */
static int ensure_dir(const char *dir)
{
	struct stat st;
	if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
		LOG_WARN(BE_LOG, "run directory %s: %s", dir, strerror(errno));
		return -1;
	}
	if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
		LOG_ERROR(BE_LOG, "run directory %s: owned by another user (or not a directory): refused, no status "
			  "for remote-smi (choose one of yours with --run-dir)", dir);
		return -1;
	}
	if ((st.st_mode & 077) && chmod(dir, 0700) != 0) { /* made by an older version */
		LOG_WARN(BE_LOG, "run directory %s: chmod 0700: %s", dir, strerror(errno));
		return -1;
	}
	return 0;
}

/* Creates path (via a temporary name), len bytes of zeros, mapped shared. The
 * caller fills it and then calls publish(). */
static int map_new(const char *path, size_t len, void **out)
{
	char tmp[4200];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	int fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -1;
	fchmod(fd, 0600); /* a leftover of an older version kept its mode */
	if (ftruncate(fd, (off_t)len) != 0) {
		close(fd);
		unlink(tmp);
		return -1;
	}
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		unlink(tmp);
		return -1;
	}
	*out = p;
	return 0;
}

static int publish(const char *path)
{
	char tmp[4200];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	if (rename(tmp, path) == 0)
		return 0;
	unlink(tmp);
	return -1;
}

/* Parses "session-<pid>-<id>.stat[.tmp]" or "server.stat[.tmp]". */
static int file_pid(const char *dir, const char *name, int64_t *pid)
{
	long long p;
	if (sscanf(name, "session-%lld-", &p) == 1) {
		*pid = p;
		return 1;
	}
	if (strncmp(name, "server.stat", 11) == 0) {
		char path[4400];
		snprintf(path, sizeof(path), "%s/%s", dir, name);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		be_stat_server h;
		int ok = fd >= 0 && read(fd, &h, sizeof(h)) == (ssize_t)sizeof(h) && h.magic == BE_STAT_MAGIC;
		if (fd >= 0)
			close(fd);
		*pid = ok ? h.pid : 0;
		return 1;
	}
	return 0;
}

static void clear_stale(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	if (!d)
		return;
	while ((e = readdir(d))) {
		int64_t pid;
		if (!file_pid(dir, e->d_name, &pid) || (pid > 0 && be_status_pid_alive(pid)))
			continue;
		char path[4400];
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		unlink(path);
	}
	closedir(d);
}

int be_status_server_open(const char *dir, const char *host, int port, const char *isolation, int metrics_port)
{
	char path[4096];
	if (dir && *dir)
		snprintf(S.dir, sizeof(S.dir), "%s", dir);
	else
		be_status_default_dir(port, S.dir, sizeof(S.dir));
	if (ensure_dir(S.dir) != 0)
		goto none;
	snprintf(path, sizeof(path), "%s/server.stat", S.dir);
	int64_t other = 0;
	if (file_pid(S.dir, "server.stat", &other) && other > 0 && other != getpid() && be_status_pid_alive(other)) {
		LOG_WARN(BE_LOG, "run directory %s belongs to remote-gpud pid %" PRId64 "; no status for remote-smi "
			 "(choose another with --run-dir)", S.dir, other);
		goto none;
	}
	clear_stale(S.dir);
	void *p;
	if (map_new(path, sizeof(be_stat_server), &p) != 0) {
		LOG_WARN(BE_LOG, "%s: %s; no status for remote-smi", path, strerror(errno));
		goto none;
	}
	be_stat_server *h = p;
	h->magic = BE_STAT_MAGIC;
	h->version = BE_STAT_VERSION;
	h->size = sizeof(*h);
	h->kind = BE_STAT_SERVER;
	h->pid = getpid();
	h->start_unix_ns = unix_ns();
	snprintf(h->listen_host, sizeof(h->listen_host), "%s", host);
	h->port = port;
	h->metrics_port = metrics_port;
	snprintf(h->isolation, sizeof(h->isolation), "%s", isolation);
	h->driver_version = be_srv.driver_version;
	h->ngpu = be_srv.ngpu < BE_STAT_MAX_GPUS ? be_srv.ngpu : BE_STAT_MAX_GPUS;
	for (int i = 0; i < h->ngpu; i++) {
		const be_gpu *g = &be_srv.gpu[i];
		be_stat_gpu *o = &h->gpu[i];
		o->ordinal = g->ordinal;
		snprintf(o->name, sizeof(o->name), "%s", g->name);
		memcpy(o->uuid, g->uuid.bytes, sizeof(o->uuid));
		snprintf(o->pci_bus_id, sizeof(o->pci_bus_id), "%s", g->pci_bus_id);
		o->total_mem = g->total_mem;
	}
	if (publish(path) != 0) {
		LOG_WARN(BE_LOG, "%s: %s; no status for remote-smi", path, strerror(errno));
		munmap(p, sizeof(*h));
		goto none;
	}
	S.srv = h;
	S.owner = 1;
	LOG_INFO(BE_LOG, "status in %s (remote-smi reads it)", S.dir);
	return 0;
none:
	S.dir[0] = 0;
	return -1;
}

void be_status_server_close(void)
{
	if (!S.owner)
		return;
	char path[4096];
	snprintf(path, sizeof(path), "%s/server.stat", S.dir);
	unlink(path);
	munmap(S.srv, sizeof(*S.srv));
	S.srv = NULL;
	S.owner = 0;
	clear_stale(S.dir);
	rmdir(S.dir); /* fails, harmlessly, while another process still has a file there */
}

void be_status_set_mps(uint32_t state)
{
	if (S.srv)
		atomic_store_explicit(&S.srv->mps, state, memory_order_relaxed);
}

void be_status_count_session(void)
{
	if (S.srv)
		atomic_fetch_add_explicit(&S.srv->sessions_started, 1, memory_order_relaxed);
}

void be_status_reap(int pid)
{
	DIR *d;
	struct dirent *e;
	char prefix[64];
	if (!S.dir[0] || !(d = opendir(S.dir)))
		return;
	int n = snprintf(prefix, sizeof(prefix), "session-%d-", pid);
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, prefix, (size_t)n) != 0)
			continue;
		char path[4400];
		snprintf(path, sizeof(path), "%s/%s", S.dir, e->d_name);
		unlink(path);
	}
	closedir(d);
}

/* ---- sessions ---- */

/* Sessions that could not get anything: they share one region (counts mix, but
 * only when memory is exhausted). */
static union {
	be_stat_session h;
	unsigned char bytes[sizeof(be_stat_session) + PROTO_OP_COUNT * sizeof(uint64_t)];
} fallback = {.h.nops = PROTO_OP_COUNT};

void be_status_session_open(be_session *s, uv_loop_t *loop)
{
	size_t len = sizeof(be_stat_session) + PROTO_OP_COUNT * sizeof(uint64_t);
	be_status_sess *ss = calloc(1, sizeof(*ss));
	void *p = NULL;

	if (!ss) {
		s->stat = &fallback.h;
		return;
	}
	if (S.dir[0]) {
		snprintf(ss->path, sizeof(ss->path), "%s/session-%d-%" PRIu64 ".stat", S.dir, (int)getpid(), s->id);
		if (map_new(ss->path, len, &p) == 0)
			ss->mapped = 1;
		else
			LOG_INFO(BE_LOG, "session %" PRIu64 ": %s: %s (not shown by remote-smi)", s->id, ss->path,
				 strerror(errno));
	}
	if (!p && !(p = calloc(1, len))) {
		free(ss);
		s->stat = &fallback.h;
		return;
	}
	be_stat_session *m = p;
	m->magic = BE_STAT_MAGIC;
	m->version = BE_STAT_VERSION;
	m->size = (uint32_t)len;
	m->kind = BE_STAT_SESSION;
	m->pid = getpid();
	m->id = s->id;
	m->start_unix_ns = unix_ns();
	snprintf(m->peer, sizeof(m->peer), "%s", s->peer);
	m->nops = PROTO_OP_COUNT;
	if (ss->mapped && publish(ss->path) != 0)
		ss->path[0] = 0; /* counts in the (now nameless) mapping, unseen */
	ss->m = p;
	ss->len = len;
	uv_timer_init(loop, &ss->timer);
	ss->timer.data = ss;
	uv_timer_start(&ss->timer, sess_tick, 1000, 1000);
	uv_unref((uv_handle_t *)&ss->timer);
	s->status = ss;
	s->stat = ss->m;
}

static void sess_tick(uv_timer_t *t)
{
	be_status_sess *ss = t->data;
	be_stat_session *m = ss->m;
	uint64_t c = atomic_load_explicit(&m->calls, memory_order_relaxed);
	uint64_t i = atomic_load_explicit(&m->bytes_in, memory_order_relaxed);
	uint64_t o = atomic_load_explicit(&m->bytes_out, memory_order_relaxed);
	atomic_store_explicit(&m->rate_calls, c - ss->last_calls, memory_order_relaxed);
	atomic_store_explicit(&m->rate_bytes_in, i - ss->last_in, memory_order_relaxed);
	atomic_store_explicit(&m->rate_bytes_out, o - ss->last_out, memory_order_relaxed);
	ss->last_calls = c;
	ss->last_in = i;
	ss->last_out = o;
}

void be_status_session_hello(be_session *s)
{
	be_stat_session *m = s->stat;
	if (m == &fallback.h)
		return;
	m->client_pid = (int64_t)s->pid;
	snprintf(m->client_host, sizeof(m->client_host), "%s", s->client_host);
	snprintf(m->program, sizeof(m->program), "%s", s->program);
	atomic_store_explicit(&m->state, BE_STAT_RUNNING, memory_order_release);
}

void be_status_session_close(be_session *s)
{
	be_status_sess *ss = s->status;
	if (!ss)
		return;
	if (ss->mapped && ss->path[0])
		unlink(ss->path);
	s->status = NULL;
	/* A leaked session's stuck waiter may still count replies into the
	 * region: it stays (unlinked) until the process ends. */
	if (s->leaked)
		ss->len = 0;
	else
		s->stat = &fallback.h;
	uv_close((uv_handle_t *)&ss->timer, sess_closed);
}

static void sess_closed(uv_handle_t *h)
{
	be_status_sess *ss = h->data;
	if (ss->len) {
		if (ss->mapped)
			munmap(ss->m, ss->len);
		else
			free(ss->m);
	}
	free(ss);
}
