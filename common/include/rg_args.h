/*
 * Command-line conventions shared by every tool.
 *
 * The tools parse their options with loops of their own ("--opt VALUE" pairs);
 * rg_args_split lets each of them also take "--opt=VALUE", the form operators
 * type from getopt_long habits and the form systemd units and compose files
 * often carry, without rewriting the loops: it hands back an argv in which
 * every "--opt=VALUE" before a lone "--" is two arguments. The value keeps
 * pointing into the original argument's memory, so a loop that scrubs a secret
 * value (remote-gpud --token) still scrubs what /proc/PID/cmdline shows.
 *
 * rg_version_print answers --version the same way everywhere:
 * "<prog> <version>", the version set in the top CMakeLists.txt, with git
 * describe's answer when the build had one (rg_version.h, generated).
 */
#ifndef RG_ARGS_H
#define RG_ARGS_H

#include <stdio.h>

/* Replaces *argv (and *argc) with the split vector; the new vector lives as
 * long as the process. 0, or -1 when out of memory (the caller's argv is then
 * unchanged). */
int rg_args_split(int *argc, char ***argv);

/* Prints "<prog> <version>\n" to f. */
void rg_version_print(FILE *f, const char *prog);

/* The version string alone: "0.1.0" or "0.1.0 (git v0.1.0-12-gabcdef0)". */
const char *rg_version(void);

#endif
