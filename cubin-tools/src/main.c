/*
 * remote-cubin: builds and inspects the store of kernel images that remote-gpud
 * preloads, so that no fatbin crosses the wire twice. Needs no GPU and no
 * cuobjdump.
 *
 *   remote-cubin extract FILE... --store DIR   split .nv_fatbin into fatbins, store them
 *   remote-cubin ls FILE|DIR [--json]          kernels and parameter layouts
 *   remote-cubin verify DIR                    rehash every store entry
 *
 * Exit status: 0 success, 1 bad input or failed check, 2 usage.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tool.h"
#include "rg_args.h"
#include "rg_opt.h"

static void usage(FILE *f)
{
	fputs("usage: remote-cubin extract FILE... --store DIR [--quiet]\n"
	      "       remote-cubin ls FILE|DIR [--json]\n"
	      "       remote-cubin verify DIR\n"
	      "       remote-cubin --version | --help\n"
	      "  -s, --store DIR   the store to add to (extract)\n"
	      "  -q, --quiet       no line per image (extract)\n"
	      "  --json            machine-readable output (ls)\n"
	      "Options take --opt VALUE and --opt=VALUE; usage errors exit 2.\n"
	      "FILE: an ELF executable, shared library or object with a .nv_fatbin\n"
	      "section, a .fatbin file, or a .cubin file. DIR: a store made by extract.\n",
	      f);
}

void tool_error(const char *path, const char *fmt, ...)
{
	va_list ap;
	fputs("remote-cubin: ", stderr);
	if (path)
		fprintf(stderr, "%s: ", path);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int tool_isatty_stderr(void)
{
	return isatty(STDERR_FILENO);
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return rg_opt_error("remote-cubin", "no command (extract, ls or verify)");
	if (!strcmp(argv[1], "--version")) {
		rg_version_print(stdout, "remote-cubin");
		return 0;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "extract"))
		return cmd_extract(argc - 1, argv + 1); /* argv[0]: the command's name, for getopt */
	if (!strcmp(argv[1], "ls"))
		return cmd_ls(argc - 1, argv + 1);
	if (!strcmp(argv[1], "verify"))
		return cmd_verify(argc - 1, argv + 1);
	return rg_opt_error("remote-cubin", "unknown command '%s' (extract, ls or verify)", argv[1]);
}
