/*
 * remote-gpu: the launcher's command line (launcher.h has the map).
 *
 *   remote-gpu run    [OPTIONS] [--] COMMAND [ARGS...]
 *   remote-gpu info   [OPTIONS]
 *   remote-gpu doctor [OPTIONS] [-- COMMAND [ARGS...]]
 */
#include "launcher.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rg_args.h"
#include "rg_opt.h"


static void usage(FILE *f)
{
	fprintf(f,
		"usage: remote-gpu run    [OPTIONS] [--] COMMAND [ARGS...]\n"
		"       remote-gpu info   [OPTIONS]\n"
		"       remote-gpu doctor [OPTIONS] [-- COMMAND [ARGS...]]\n"
		"\n"
		"run     runs COMMAND with libremote.so preloaded: sets LD_PRELOAD, REMOTE_GPU,\n"
		"        LD_LIBRARY_PATH and TRITON_LIBCUDA_PATH (the driver folder), and\n"
		"        REMOTE_GPU_TOKEN / REMOTE_GPU_TLS_CA from the options below\n"
		"info    lists the devices a program would see: per server its address, version,\n"
		"        device, memory and round trip (exit 1 if a server does not answer)\n"
		"doctor  checks the setup and says what is wrong (exit 1 if something is); with a\n"
		"        COMMAND, also whether the preload can reach that program\n"
		"\n"
		"options:\n"
		"  -s, --server ADDR     a server, [scheme://]host:port (tcp, tls, rdma, rdma+tls);\n"
		"                        repeat for several, one device each (default: $REMOTE_GPU)\n"
		"  -t, --token-file F    the token, first line of F (mode 0600); given to the\n"
		"                        program in its environment, never on a command line\n"
		"  -c, --tls-ca F        the CA that signed the servers' certificates (tls://)\n"
		"  -h, --help            this text\n"
		"  -V, --version         the version\n"
		"\n"
		"environment: REMOTE_GPU_LIB (libremote.so, if not installed beside this program),\n"
		"REMOTE_GPU, REMOTE_GPU_TOKEN, REMOTE_GPU_TLS_CA, REMOTE_GPU_TIMEOUT.\n"
		"exit status: run: the command's; 2: usage; 126/127: the command cannot run.\n");
}

/* Appends a --server value to the comma-joined list. */
static int add_server(ln_opts *o, const char *s)
{
	size_t old = o->servers ? strlen(o->servers) : 0;
	char *n = realloc(o->servers, old + strlen(s) + 2);
	if (!n)
		return -1;
	sprintf(n + old, "%s%s", old ? "," : "", s);
	o->servers = n;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"server", required_argument, NULL, 's'}, {"token-file", required_argument, NULL, 't'},
		{"tls-ca", required_argument, NULL, 'c'}, {"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},      {NULL, 0, NULL, 0},
	};
	setvbuf(stdout, NULL, _IOLBF, 0); /* in order with the transport's log lines on stderr */
	if (argc == 2 && !strcmp(argv[1], "__preload-check"))
		return ln_preload_check();
	if (argc < 2)
		return rg_opt_error(LN_PROG, "no subcommand (run, info or doctor)");
	const char *sub = argv[1];
	if (!strcmp(sub, "-h") || !strcmp(sub, "--help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(sub, "-V") || !strcmp(sub, "--version")) {
		rg_version_print(stdout, LN_PROG);
		return 0;
	}
	int (*fn)(const ln_opts *) = !strcmp(sub, "run") ? ln_run :
				     !strcmp(sub, "info") ? ln_info :
				     !strcmp(sub, "doctor") ? ln_doctor : NULL;
	if (!fn)
		return rg_opt_error(LN_PROG, "unknown subcommand '%s' (run, info or doctor)", sub);

	ln_opts o = {0};
	int c, sargc = argc - 1;
	char **sargv = argv + 1; /* getopt reads from sargv[1]; "+": the command's options are its own */
	optind = 1;
	while ((c = rg_opt_next(sargc, sargv, "+:s:t:c:hV", longopts, LN_PROG)) != -1) {
		switch (c) {
		case 's':
			if (add_server(&o, optarg) != 0)
				return 1;
			break;
		case 't': o.token_file = optarg; break;
		case 'c': o.tls_ca = optarg; break;
		case 'h': usage(stdout); return 0;
		case 'V': rg_version_print(stdout, LN_PROG); return 0;
		default: return RG_EXIT_USAGE;
		}
	}
	o.argc = sargc - optind;
	o.argv = sargv + optind;
	if (fn == ln_info && o.argc > 0)
		return rg_opt_error(LN_PROG, "info: unexpected argument '%s'", o.argv[0]);
	return fn(&o);
}
