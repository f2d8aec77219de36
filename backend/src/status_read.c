/*
 * The reading side of the run directory (status.h), shared by remote-smi and
 * the supervisor's metrics endpoint. Files are mapped read-only and copied out
 * field by field with atomic loads, so a counter is never seen half written;
 * a file that is too short, of another layout, or of a process that is gone
 * is skipped. Nothing here belongs to a running server: no locks, no state.
 */
#include "status.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define LD(x) atomic_load_explicit(&(x), memory_order_relaxed)

static int read_session(const char *path, be_snap_session *o);

const char *be_status_mps_name(uint32_t state)
{
	static const char *const names[] = {"off", "up", "dead", "external"};
	return state < sizeof(names) / sizeof(names[0]) ? names[state] : "?";
}

int be_status_pid_alive(int64_t pid)
{
	if (pid <= 0 || pid > INT32_MAX)
		return 0;
	return kill((pid_t)pid, 0) == 0 || errno == EPERM;
}

void be_status_default_dir(int port, char *buf, size_t cap)
{
	const char *tmp = getenv("TMPDIR");
	snprintf(buf, cap, "%s/remote-gpud-%d", tmp && *tmp ? tmp : "/tmp", port);
}

/* Maps path read-only if it is a regular file of at least min bytes. */
static void *map_file(const char *path, size_t min, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;
	void *p = NULL;
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size >= min) {
		p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
		if (p == MAP_FAILED)
			p = NULL;
		*len = (size_t)st.st_size;
	}
	close(fd);
	return p;
}

static void copy_str(char *dst, size_t cap, const char *src, size_t srccap)
{
	size_t n = strnlen(src, srccap);
	if (n >= cap)
		n = cap - 1;
	memcpy(dst, src, n);
	dst[n] = 0;
}

static int read_server(const char *dir, be_snap *o)
{
	char path[4200];
	size_t len = 0;
	snprintf(path, sizeof(path), "%s/server.stat", dir);
	const be_stat_server *h = map_file(path, sizeof(be_stat_server), &len);
	if (!h)
		return -1;
	int ok = h->magic == BE_STAT_MAGIC && h->version == BE_STAT_VERSION && h->kind == BE_STAT_SERVER &&
		 h->size == sizeof(*h) && h->size <= len;
	if (ok) {
		o->pid = h->pid;
		o->start_unix_ns = h->start_unix_ns;
		copy_str(o->listen_host, sizeof(o->listen_host), h->listen_host, sizeof(h->listen_host));
		o->port = h->port;
		o->metrics_port = h->metrics_port;
		copy_str(o->isolation, sizeof(o->isolation), h->isolation, sizeof(h->isolation));
		o->driver_version = h->driver_version;
		o->ngpu = h->ngpu >= 0 && h->ngpu <= BE_STAT_MAX_GPUS ? h->ngpu : 0;
		o->total_mem = 0;
		for (int i = 0; i < o->ngpu; i++) {
			const be_stat_gpu *g = &h->gpu[i];
			be_stat_gpu *d = &o->gpu[i];
			d->ordinal = g->ordinal;
			copy_str(d->name, sizeof(d->name), g->name, sizeof(g->name));
			memcpy(d->uuid, g->uuid, sizeof(d->uuid));
			copy_str(d->pci_bus_id, sizeof(d->pci_bus_id), g->pci_bus_id, sizeof(g->pci_bus_id));
			d->total_mem = g->total_mem;
			o->total_mem += g->total_mem;
		}
		o->sessions_started = LD(((be_stat_server *)h)->sessions_started);
		o->mps = atomic_load_explicit(&((be_stat_server *)h)->mps, memory_order_relaxed);
		o->has_server = 1;
		o->alive = be_status_pid_alive(o->pid);
	}
	munmap((void *)h, len);
	return ok ? 0 : -1;
}

static int read_session(const char *path, be_snap_session *o)
{
	size_t len = 0;
	be_stat_session *m = map_file(path, sizeof(be_stat_session), &len);
	if (!m)
		return -1;
	int ok = m->magic == BE_STAT_MAGIC && m->version == BE_STAT_VERSION && m->kind == BE_STAT_SESSION &&
		 m->size <= len && m->size >= sizeof(*m) && m->nops <= (m->size - sizeof(*m)) / sizeof(uint64_t) &&
		 be_status_pid_alive(m->pid);
	if (ok) {
		memset(o, 0, sizeof(*o));
		o->pid = m->pid;
		o->id = m->id;
		o->start_unix_ns = m->start_unix_ns;
		copy_str(o->peer, sizeof(o->peer), m->peer, sizeof(m->peer));
		o->state = atomic_load_explicit(&m->state, memory_order_acquire);
		if (o->state == BE_STAT_RUNNING) {
			o->client_pid = m->client_pid;
			copy_str(o->client_host, sizeof(o->client_host), m->client_host, sizeof(m->client_host));
			copy_str(o->program, sizeof(o->program), m->program, sizeof(m->program));
		}
		o->calls = LD(m->calls);
		o->bytes_in = LD(m->bytes_in);
		o->bytes_out = LD(m->bytes_out);
		o->errors = LD(m->errors);
		o->mem_bytes = LD(m->mem_bytes);
		o->mem_peak = LD(m->mem_peak);
		o->rate_calls = LD(m->rate_calls);
		o->rate_bytes_in = LD(m->rate_bytes_in);
		o->rate_bytes_out = LD(m->rate_bytes_out);
		o->nops = m->nops;
		o->op_calls = calloc(o->nops ? o->nops : 1, sizeof(uint64_t));
		if (!o->op_calls)
			ok = 0;
		for (uint32_t i = 0; ok && i < o->nops; i++)
			o->op_calls[i] = LD(m->op_calls[i]);
	}
	munmap(m, len);
	return ok ? 0 : -1;
}

static int by_pid_id(const void *a, const void *b)
{
	const be_snap_session *x = a, *y = b;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

int be_snap_read(const char *dir, be_snap *out)
{
	memset(out, 0, sizeof(*out));
	snprintf(out->dir, sizeof(out->dir), "%s", dir);
	int r = read_server(dir, out);
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t cap = 0;
	if (!d)
		return -1;
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);
		if (strncmp(e->d_name, "session-", 8) != 0 || n < 5 || strcmp(e->d_name + n - 5, ".stat") != 0)
			continue;
		if (out->nsess == cap) {
			size_t nc = cap ? 2 * cap : 8;
			be_snap_session *ns = realloc(out->sess, nc * sizeof(*ns));
			if (!ns)
				break;
			out->sess = ns;
			cap = nc;
		}
		char path[4400];
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (read_session(path, &out->sess[out->nsess]) == 0)
			out->nsess++;
	}
	closedir(d);
	if (out->nsess)
		qsort(out->sess, out->nsess, sizeof(*out->sess), by_pid_id);
	be_snap_read_tenants(dir, out);
	return r;
}

void be_snap_free(be_snap *s)
{
	for (size_t i = 0; i < s->nsess; i++)
		free(s->sess[i].op_calls);
	free(s->sess);
	s->sess = NULL;
	s->nsess = 0;
	free(s->tenants);
	s->tenants = NULL;
	s->ntenants = 0;
}

size_t be_status_find_dirs(char ***dirs)
{
	const char *tmp = getenv("TMPDIR");
	char pat[4200];
	glob_t g;
	size_t n = 0;
	*dirs = NULL;
	snprintf(pat, sizeof(pat), "%s/remote-gpud-*/server.stat", tmp && *tmp ? tmp : "/tmp");
	if (glob(pat, 0, NULL, &g) != 0)
		return 0;
	char **v = calloc(g.gl_pathc ? g.gl_pathc : 1, sizeof(*v));
	for (size_t i = 0; v && i < g.gl_pathc; i++) {
		char *dir = strdup(g.gl_pathv[i]);
		if (!dir)
			break;
		dir[strlen(dir) - strlen("/server.stat")] = 0;
		be_snap s;
		int ok = read_server(dir, (memset(&s, 0, sizeof(s)), &s)) == 0 && s.alive;
		if (ok)
			v[n++] = dir;
		else
			free(dir);
	}
	globfree(&g);
	*dirs = v;
	return n;
}
