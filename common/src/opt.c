/*
 * rg_opt.h: getopt_long with the tools' one wording for usage errors.
 */
#include "rg_opt.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void opt_hint(const char *prog) { fprintf(stderr, "Try '%s --help'.\n", prog); }

int rg_opt_next(int argc, char **argv, const char *shortopts, const struct option *longopts, const char *prog)
{
	opterr = 0;
	int c = getopt_long(argc, argv, shortopts, longopts, NULL);
	if (c != '?' && c != ':')
		return c;
	/* argv[optind - 1] is the argument getopt stopped at; a short option's
	 * letter is in optopt when it was one of a group ("-xv"). */
	const char *arg = optind > 0 && optind <= argc ? argv[optind - 1] : "";
	char shortname[3] = {'-', (char)optopt, 0};
	const char *name = (optopt && strncmp(arg, "--", 2) != 0) ? shortname : arg;
	char buf[128];
	const char *eq = strchr(name, '=');
	if (eq) { /* "--bogus=x": name the option, not its value */
		snprintf(buf, sizeof(buf), "%.*s", (int)(eq - name), name);
		name = buf;
	}
	if (c == ':')
		fprintf(stderr, "%s: option '%s' needs a value\n", prog, name);
	else
		fprintf(stderr, "%s: unknown option '%s'\n", prog, name);
	opt_hint(prog);
	return '?';
}

int rg_opt_error(const char *prog, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	opt_hint(prog);
	return RG_EXIT_USAGE;
}

int rg_opt_long(const char *prog, const char *name, const char *s, long lo, long hi, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (!*s || *end || errno || v < lo || v > hi) {
		rg_opt_error(prog, "option '%s' takes a number from %ld to %ld, not '%s'", name, lo, hi, s);
		return -1;
	}
	*out = v;
	return 0;
}
