#include "rg_log.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_RULES 16

struct rule {
	char module[32];
	int level;
};

static struct {
	pthread_once_t once;
	int level;
	struct rule rules[MAX_RULES];
	int nrules;
	FILE *out;
	int sync; /* REMOTE_GPU_LOG_SYNC: flush stdout before each line (rg_log.h) */
	char prog[32];
	pthread_mutex_t lock;
	char seen[64][64]; /* names already logged once */
	int nseen;
} L = {PTHREAD_ONCE_INIT, RG_LOG_WARN, .lock = PTHREAD_MUTEX_INITIALIZER};

static int parse_level(const char *s, size_t n)
{
	static const char *names[] = {"error", "warn", "info", "debug", "trace"};
	for (int i = 0; i < 5; i++)
		if (strlen(names[i]) == n && strncmp(s, names[i], n) == 0)
			return i;
	return -1;
}

static void log_setup(void)
{
	const char *spec = getenv("REMOTE_GPU_LOG");
	while (spec && *spec) {
		const char *end = strchr(spec, ',');
		size_t n = end ? (size_t)(end - spec) : strlen(spec);
		const char *eq = memchr(spec, '=', n);
		if (eq && L.nrules < MAX_RULES) {
			struct rule *r = &L.rules[L.nrules];
			size_t mn = (size_t)(eq - spec);
			int lv = parse_level(eq + 1, n - mn - 1);
			if (lv >= 0 && mn < sizeof(r->module)) {
				memcpy(r->module, spec, mn);
				r->module[mn] = 0;
				r->level = lv;
				L.nrules++;
			}
		} else if (!eq) {
			int lv = parse_level(spec, n);
			if (lv >= 0)
				L.level = lv;
		}
		spec = end ? end + 1 : NULL;
	}
	L.out = stderr;
	const char *sync = getenv("REMOTE_GPU_LOG_SYNC");
	L.sync = sync && *sync && strcmp(sync, "0") != 0;
	const char *file = getenv("REMOTE_GPU_LOG_FILE");
	if (file && *file) {
		char path[512];
		const char *p = strstr(file, "%p");
		if (p)
			snprintf(path, sizeof(path), "%.*s%d%s", (int)(p - file), file, (int)getpid(), p + 2);
		else
			snprintf(path, sizeof(path), "%s", file);
		FILE *f = fopen(path, "a");
		if (f) {
			setvbuf(f, NULL, _IOLBF, 0);
			L.out = f;
			L.sync = 0;
		}
	}
}

void rg_log_init(const char *prog)
{
	pthread_once(&L.once, log_setup);
	if (prog)
		snprintf(L.prog, sizeof(L.prog), "%s", prog);
}

int rg_log_enabled(int level, const char *module)
{
	pthread_once(&L.once, log_setup);
	for (int i = 0; i < L.nrules; i++)
		if (strcmp(L.rules[i].module, module) == 0)
			return level <= L.rules[i].level;
	return level <= L.level;
}

int rg_log_prefix(char *buf, size_t cap, int level, const char *module)
{
	static const char *tags[] = {"error", "warn", "info", "debug", "trace"};
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	if (level < 0 || level > RG_LOG_TRACE)
		level = RG_LOG_INFO;
	int n = snprintf(buf, cap, "[%s %d %ld.%06ld %s %s] ", L.prog[0] ? L.prog : "remote-gpu", (int)getpid(),
			 (long)ts.tv_sec, ts.tv_nsec / 1000, tags[level], module);
	if (n < 0)
		n = 0;
	return (size_t)n < cap ? n : (int)cap - 1;
}

/* Writes under L.lock: lines of several threads never mix. In sync mode the
 * program's buffered stdout goes first (rg_log.h). */
static void out_locked(const char *text, size_t len)
{
	if (L.sync)
		fflush(stdout);
	fwrite(text, 1, len, L.out);
	fflush(L.out);
}

void rg_log_write(int level, const char *module, const char *fmt, ...)
{
	char line[1024];
	pthread_once(&L.once, log_setup);
	int n = rg_log_prefix(line, sizeof(line) - 1, level, module);
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(line + n, sizeof(line) - 1 - (size_t)n, fmt, ap);
	va_end(ap);
	if (m < 0)
		m = 0;
	n += (size_t)m < sizeof(line) - 1 - (size_t)n ? m : (int)(sizeof(line) - 2 - (size_t)n);
	line[n++] = '\n';
	pthread_mutex_lock(&L.lock);
	out_locked(line, (size_t)n);
	pthread_mutex_unlock(&L.lock);
}

void rg_log_block(const char *text, size_t len)
{
	pthread_once(&L.once, log_setup);
	pthread_mutex_lock(&L.lock);
	out_locked(text, len);
	pthread_mutex_unlock(&L.lock);
}

void rg_log_once(const char *module, const char *what, const char *name)
{
	pthread_mutex_lock(&L.lock);
	for (int i = 0; i < L.nseen; i++)
		if (strcmp(L.seen[i], name) == 0) {
			pthread_mutex_unlock(&L.lock);
			return;
		}
	if (L.nseen < 64)
		snprintf(L.seen[L.nseen++], sizeof(L.seen[0]), "%s", name);
	pthread_mutex_unlock(&L.lock);
	LOG_WARN(module, "%s: %s", what, name);
}
