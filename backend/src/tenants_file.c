/*
 * The tenants file (remote-gpud --tenants FILE). One tenant a line, fields
 * separated by blanks: a name, then four KEY=VALUE fields, each exactly once,
 * in any order:
 *
 *   # name   token                        memory  class         sessions
 *   alice    token=9f2c...e1              memory=8G   class=latency sessions=4
 *   bob      token=77ab...03              memory=none class=batch   sessions=16
 *
 *   name      [a-z0-9][a-z0-9_-]*, at most 63 characters, unique (it names the
 *             tenant in logs, remote-smi, /metrics and the store's quota)
 *   token=    what the tenant's clients put in REMOTE_GPU_TOKEN: no blanks, at
 *             most 4096 bytes, unique
 *   memory=   device memory the tenant's sessions may hold together: bytes, or
 *             with K, M, G or T (powers of 1024); none: no limit
 *   class=    latency or batch (shown; scheduling by it is issue 22 item 3)
 *   sessions= sessions at once, 1 or more; none: no limit
 *
 * Blank lines and lines starting with # are ignored. Anything else is an error
 * naming the line: a strict format, so that a typo never silently grants a
 * tenant more than meant. Only the SHA-256 of each token is kept after reading.
 */
#include "backend.h"
#include "tenants.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cubin.h"

#define LINE_MAX_BYTES (BE_TENANT_TOKEN_MAX + 512)

static int fail(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int name_ok(const char *s);
static int parse_line(char *line, be_tenant_def *d, char *tok_out, char *why, size_t cap);
static int parse_count(const char *v, uint32_t *out);

static int fail(char *err, size_t cap, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, cap, fmt, ap);
	va_end(ap);
	return -1;
}

const char *be_tenant_class_name(uint32_t klass)
{
	return klass == BE_TENANT_LATENCY ? "latency" : klass == BE_TENANT_BATCH ? "batch" : "?";
}

static int name_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n >= BE_TENANT_NAME_MAX || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9')))
		return 0;
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '_'))
			return 0;
	return 1;
}

static int parse_count(const char *v, uint32_t *out)
{
	char *end;
	if (!strcmp(v, "none")) {
		*out = 0;
		return 0;
	}
	errno = 0;
	unsigned long n = strtoul(v, &end, 10);
	if (errno || end == v || *end || v[0] == '-' || n == 0 || n > 1000000)
		return -1;
	*out = (uint32_t)n;
	return 0;
}

/* One tenant's line, cut in place. 0, or -1 with why. tok_out gets the token
 * (BE_TENANT_TOKEN_MAX + 1 bytes), for the duplicate check only. */
static int parse_line(char *line, be_tenant_def *d, char *tok_out, char *why, size_t cap)
{
	static const char *const keys[] = {"token", "memory", "class", "sessions"};
	int seen[4] = {0};
	char *save = NULL;
	char *f = strtok_r(line, " \t", &save);

	memset(d, 0, sizeof(*d));
	if (!name_ok(f))
		return fail(why, cap, "tenant name '%.80s': use 1-63 of a-z, 0-9, '-', '_' (starting with a letter or digit)",
			    f);
	snprintf(d->name, sizeof(d->name), "%s", f);
	while ((f = strtok_r(NULL, " \t", &save))) {
		char *eq = strchr(f, '=');
		int k = -1;
		if (eq) {
			*eq = 0;
			for (int i = 0; i < 4; i++)
				if (!strcmp(f, keys[i]))
					k = i;
		}
		if (k < 0)
			return fail(why, cap, "'%.80s': expected token=, memory=, class= or sessions=", f);
		if (seen[k]++)
			return fail(why, cap, "%s= given twice", keys[k]);
		const char *v = eq + 1;
		if (k == 0) {
			size_t n = strlen(v);
			if (n == 0 || n > BE_TENANT_TOKEN_MAX)
				return fail(why, cap, "token= must have 1 to %d bytes", BE_TENANT_TOKEN_MAX);
			memcpy(tok_out, v, n + 1);
			cubin_hash(v, n, d->token_sha);
		} else if (k == 1) {
			if (!strcmp(v, "none"))
				d->quota = BE_TENANT_UNLIMITED;
			else if (be_quota_parse(v, &d->quota) != 0 || d->quota == BE_TENANT_UNLIMITED)
				return fail(why, cap, "memory=%.80s: not a size (bytes, or with K, M, G, T; or none)", v);
		} else if (k == 2) {
			if (!strcmp(v, "latency"))
				d->klass = BE_TENANT_LATENCY;
			else if (!strcmp(v, "batch"))
				d->klass = BE_TENANT_BATCH;
			else
				return fail(why, cap, "class=%.80s: expected latency or batch", v);
		} else if (parse_count(v, &d->max_sessions) != 0) {
			return fail(why, cap, "sessions=%.80s: expected a number from 1 to 1000000, or none", v);
		}
	}
	for (int i = 0; i < 4; i++)
		if (!seen[i])
			return fail(why, cap, "%s= missing", keys[i]);
	return 0;
}

int be_tenants_parse(const char *path, be_tenant_table *out, char *err, size_t errcap)
{
	static char line[LINE_MAX_BYTES];
	static char tokens[BE_TENANTS_MAX][BE_TENANT_TOKEN_MAX + 1]; /* for duplicates; wiped after */
	struct stat st;
	char why[256];
	int lineno = 0, rc = 0;

	FILE *f = fopen(path, "re");
	if (!f)
		return fail(err, errcap, "%s: %s", path, strerror(errno));
	if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
		fclose(f);
		return fail(err, errcap, "%s: not a regular file", path);
	}
	/* It holds every tenant's token: as --token-file, others must not read it. */
	if (st.st_mode & 077) {
		fclose(f);
		return fail(err, errcap, "%s: readable by group or others (mode %04o); run: chmod 600 %s", path,
			    (unsigned)(st.st_mode & 07777), path);
	}
	out->n = 0;
	while (rc == 0 && fgets(line, sizeof(line), f)) {
		lineno++;
		size_t len = strlen(line);
		if (len == sizeof(line) - 1 && line[len - 1] != '\n') {
			rc = fail(err, errcap, "%s:%d: line too long", path, lineno);
			break;
		}
		line[strcspn(line, "\r\n")] = 0;
		char *p = line + strspn(line, " \t");
		if (!*p || *p == '#')
			continue;
		if (out->n == BE_TENANTS_MAX) {
			rc = fail(err, errcap, "%s:%d: more than %d tenants", path, lineno, BE_TENANTS_MAX);
			break;
		}
		be_tenant_def *d = &out->t[out->n];
		if (parse_line(p, d, tokens[out->n], why, sizeof(why)) != 0) {
			rc = fail(err, errcap, "%s:%d: %s", path, lineno, why);
			break;
		}
		for (size_t i = 0; i < out->n && rc == 0; i++) {
			if (!strcmp(out->t[i].name, d->name))
				rc = fail(err, errcap, "%s:%d: tenant %s named twice", path, lineno, d->name);
			else if (!strcmp(tokens[i], tokens[out->n]))
				rc = fail(err, errcap, "%s:%d: tenant %s has the token of tenant %s", path, lineno, d->name,
					  out->t[i].name);
		}
		out->n++;
	}
	if (rc == 0 && ferror(f))
		rc = fail(err, errcap, "%s: %s", path, strerror(errno));
	if (rc == 0 && out->n == 0)
		rc = fail(err, errcap, "%s: no tenant (one a line: NAME token=T memory=SIZE class=latency|batch sessions=N)",
			  path);
	fclose(f);
	explicit_bzero(tokens, sizeof(tokens));
	explicit_bzero(line, sizeof(line));
	return rc;
}

int be_quota_parse(const char *v, uint64_t *out)
{
	static const char units[] = "KMGT";
	uint64_t n = 0;
	const char *p = v;

	if (*p < '0' || *p > '9')
		return -1;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (n > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
			return -1;
		n = n * 10 + (uint64_t)(*p - '0');
	}
	if (*p) {
		const char *u = strchr(units, *p);
		if (!u || p[1])
			return -1;
		for (int shift = 10 * (int)(u - units + 1); shift; shift -= 10) {
			if (n > UINT64_MAX >> 10)
				return -1;
			n <<= 10;
		}
	}
	*out = n;
	return 0;
}
