/*
 * remote-gpu run: the environment of a client, then execvp.
 *
 *   LD_PRELOAD           libremote.so first, then what was there
 *   REMOTE_GPU           the --server list (else the environment's)
 *   LD_LIBRARY_PATH      the driver folder first: programs linked with -lcuda
 *                        or -lnvidia-ml find libremote.so under those names
 *   TRITON_LIBCUDA_PATH  the driver folder: Triton (torch.compile) links its
 *                        launchers against libcuda.so from there
 *   REMOTE_GPU_TOKEN     from --token-file: the token travels in the
 *                        environment (readable by the same user only), never
 *                        on a command line (docs/SECURITY.md)
 *   REMOTE_GPU_TLS_CA    --tls-ca
 */
#include "launcher.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rg_opt.h"
#include "rg_token.h"

const char *ln_servers(const ln_opts *o)
{
	if (o->servers)
		return o->servers;
	const char *env = getenv("REMOTE_GPU");
	return env && *env ? env : NULL;
}

/* Sets name to "first" or "first<sep>old", leaving out first when old already
 * starts with it. */
static int env_prepend(const char *name, const char *first, char sep)
{
	const char *old = getenv(name);
	if (!old || !*old)
		return setenv(name, first, 1);
	size_t n = strlen(first);
	if (!strncmp(old, first, n) && (old[n] == 0 || old[n] == sep || old[n] == ' '))
		return 0;
	char *v = malloc(n + strlen(old) + 2);
	if (!v)
		return -1;
	sprintf(v, "%s%c%s", first, sep, old);
	int r = setenv(name, v, 1);
	free(v);
	return r;
}

int ln_token_read(const char *file, char *out, size_t cap)
{
	char err[PATH_MAX + 200];
	if (rg_token_file_read(file, out, cap, err, sizeof(err)) != 0) {
		fprintf(stderr, LN_PROG ": --token-file %s\n", err);
		return -1;
	}
	return 0;
}

int ln_env_secrets(const ln_opts *o)
{
	if (o->token_file) {
		static char tok[RG_TOKEN_MAX + 2];
		if (ln_token_read(o->token_file, tok, sizeof(tok)) != 0)
			return 1;
		if (setenv("REMOTE_GPU_TOKEN", tok, 1) != 0)
			return 1;
	}
	if (o->tls_ca) {
		if (access(o->tls_ca, R_OK) != 0) {
			fprintf(stderr, LN_PROG ": --tls-ca %s: %s\n", o->tls_ca, strerror(errno));
			return 1;
		}
		char abs[PATH_MAX];
		setenv("REMOTE_GPU_TLS_CA", realpath(o->tls_ca, abs) ? abs : o->tls_ca, 1);
	}
	return 0;
}

int ln_env_client(const ln_opts *o, const char **servers)
{
	if (!(*servers = ln_servers(o)))
		return rg_opt_error(LN_PROG, "no server: give --server HOST:PORT or set REMOTE_GPU");
	return ln_env_secrets(o);
}

int ln_env_setup(const ln_opts *o, const ln_paths *p)
{
	const char *servers;
	int st = ln_env_client(o, &servers);
	if (st)
		return st;
	if (setenv("REMOTE_GPU", servers, 1) != 0 || env_prepend("LD_PRELOAD", p->lib, ':') != 0)
		return 1;
	if (p->driver[0] &&
	    (env_prepend("LD_LIBRARY_PATH", p->driver, ':') != 0 || setenv("TRITON_LIBCUDA_PATH", p->driver, 1) != 0))
		return 1;
	return 0;
}

int ln_run(const ln_opts *o)
{
	ln_paths p;
	char why[PATH_MAX * 3];
	if (o->argc < 1)
		return rg_opt_error(LN_PROG, "run: no command (remote-gpu run [OPTIONS] -- COMMAND [ARGS...])");
	if (ln_locate(&p, why, sizeof(why)) != 0) {
		fprintf(stderr, LN_PROG ": %s\n", why);
		return 1;
	}
	int st = ln_env_setup(o, &p);
	if (st)
		return st;
	execvp(o->argv[0], o->argv);
	int e = errno;
	fprintf(stderr, LN_PROG ": cannot run %s: %s\n", o->argv[0], strerror(e));
	return e == ENOENT ? 127 : 126;
}
