/*
 * remote-gpud --config FILE. The file holds "name = value" lines, the names
 * those of the long options without their dashes:
 *
 *     # /etc/remote-gpu/gpu0.conf
 *     listen = 0.0.0.0:7420
 *     device = 0
 *     token-file = /etc/remote-gpu/token
 *     tls-cert = /etc/remote-gpu/server.pem
 *     insecure = no
 *
 * Blank lines and lines starting with '#' are skipped; a value may be quoted
 * with "..." (for spaces at its ends). An option without a value (insecure)
 * is set with yes/true/1 and left out with no/false/0. The settings become
 * arguments in front of the command line's, and the option loop takes the
 * last value of an option, so the command line overrides the file. Not
 * allowed in the file: token (a secret in a file others may be allowed to
 * read: use token-file, whose mode is checked), config itself, and the
 * options remote-gpud gives its own session processes.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rg_opt.h"

#define CFG_PROG "remote-gpud"

static const char *const cfg_refused[] = {"token", "config", "session-fd", "session-listen", "port-fd", "ledger-fd"};

typedef struct cfg_args {
	char **v;
	int n, cap;
} cfg_args;

static int cfg_push(cfg_args *a, char *s)
{
	if (!s)
		return -1;
	if (a->n + 1 >= a->cap) {
		int cap = a->cap ? a->cap * 2 : 32;
		char **v = realloc(a->v, (size_t)cap * sizeof(*v));
		if (!v)
			return -1;
		a->v = v;
		a->cap = cap;
	}
	a->v[a->n++] = s;
	a->v[a->n] = NULL;
	return 0;
}

static char *trim(char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	size_t n = strlen(s);
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r'))
		s[--n] = 0;
	return s;
}

static int cfg_line(cfg_args *a, const char *path, int lineno, char *line)
{
	char *s = trim(line);
	if (!*s || *s == '#')
		return 0;
	char *eq = strchr(s, '=');
	if (!eq)
		return rg_opt_error(CFG_PROG, "--config %s:%d: not 'name = value'", path, lineno);
	*eq = 0;
	char *name = trim(s), *val = trim(eq + 1);
	size_t vn = strlen(val);
	if (vn >= 2 && val[0] == '"' && val[vn - 1] == '"') {
		val[vn - 1] = 0;
		val++;
	}
	if (!*name || !strncmp(name, "-", 1))
		return rg_opt_error(CFG_PROG, "--config %s:%d: a name without dashes, as 'listen = 0.0.0.0:7420'", path,
				    lineno);
	for (size_t i = 0; i < sizeof(cfg_refused) / sizeof(*cfg_refused); i++)
		if (!strcmp(name, cfg_refused[i]))
			return rg_opt_error(CFG_PROG, "--config %s:%d: '%s' is not allowed in a file%s", path, lineno,
					    name, strcmp(name, "token") ? "" : " (use token-file)");
	char opt[128];
	snprintf(opt, sizeof(opt), "--%s", name);
	if (!strcmp(val, "no") || !strcmp(val, "false") || !strcmp(val, "0")) {
		if (!strcmp(name, "insecure"))
			return 0;
	} else if (!strcmp(val, "yes") || !strcmp(val, "true") || !strcmp(val, "1")) {
		if (!strcmp(name, "insecure"))
			return cfg_push(a, strdup(opt)) ? 1 : 0;
	}
	if (!strcmp(name, "insecure"))
		return rg_opt_error(CFG_PROG, "--config %s:%d: insecure takes yes or no", path, lineno);
	return cfg_push(a, strdup(opt)) || cfg_push(a, strdup(val)) ? 1 : 0;
}

static int cfg_read(cfg_args *a, const char *path)
{
	FILE *f = fopen(path, "re");
	if (!f) {
		fprintf(stderr, CFG_PROG ": --config %s: %s\n", path, strerror(errno));
		return 1;
	}
	char line[8192];
	int lineno = 0, r = 0;
	while (!r && fgets(line, sizeof(line), f))
		r = cfg_line(a, path, ++lineno, line);
	fclose(f);
	return r;
}

int be_config_expand(int *argc, char ***argv)
{
	char **in = *argv;
	int n = *argc, at = -1;
	for (int i = 1; i < n && strcmp(in[i], "--"); i++) {
		if (!strcmp(in[i], "--config")) {
			if (at >= 0)
				return rg_opt_error(CFG_PROG, "option '--config' given twice");
			if (i + 1 >= n)
				return rg_opt_error(CFG_PROG, "option '--config' needs a value");
			at = i++;
		}
	}
	if (at < 0)
		return 0;
	cfg_args a = {0};
	int r = cfg_push(&a, in[0]) ? 1 : cfg_read(&a, in[at + 1]);
	for (int i = 1; !r && i < n; i++)
		if (i != at && i != at + 1)
			r = cfg_push(&a, in[i]) ? 1 : 0;
	if (r)
		return r; /* a's strings leak: the caller exits */
	*argc = a.n;
	*argv = a.v;
	return 0;
}
