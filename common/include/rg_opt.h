/*
 * Command-line conventions of every tool: getopt_long with one wording for
 * errors and one exit status for usage errors.
 *
 * rg_opt_next is getopt_long (both "--opt VALUE" and "--opt=VALUE") with
 * getopt's own messages turned off: an unknown option or a missing value is
 * reported as
 *
 *     PROG: unknown option '--bogus'
 *     PROG: option '--listen' needs a value
 *     Try 'PROG --help'.
 *
 * and '?' is returned; the caller exits with RG_EXIT_USAGE. shortopts must
 * begin with ':' (or "+:" to stop at the first non-option, for tools that run
 * a command), so that a missing value is told from an unknown option.
 * rg_opt_error reports any other usage error (a bad value, a missing
 * argument) in the same wording and returns RG_EXIT_USAGE.
 */
#ifndef RG_OPT_H
#define RG_OPT_H

#include <getopt.h>

#define RG_EXIT_USAGE 2

int rg_opt_next(int argc, char **argv, const char *shortopts, const struct option *longopts, const char *prog);

/* Prints "PROG: MESSAGE" and the --help hint to stderr; returns RG_EXIT_USAGE. */
int rg_opt_error(const char *prog, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Parses a whole decimal number in [lo, hi] for option name; on anything else
 * reports "option 'NAME' takes a number from LO to HI" and returns -1. */
int rg_opt_long(const char *prog, const char *name, const char *s, long lo, long hi, long *out);

#endif
