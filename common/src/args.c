/*
 * rg_args.h: "--opt=VALUE" for hand-written option loops, and --version.
 */
#include "rg_args.h"
#include "rg_version.h"

#include <stdlib.h>
#include <string.h>

int rg_args_split(int *argc, char ***argv)
{
	int n = *argc, extra = 0, i, k;
	char **in = *argv, **out;

	for (i = 1; i < n && strcmp(in[i], "--") != 0; i++)
		if (!strncmp(in[i], "--", 2) && strchr(in[i], '='))
			extra++;
	if (!extra)
		return 0;
	if (!(out = calloc((size_t)n + (size_t)extra + 1, sizeof(*out))))
		return -1;
	out[0] = in[0];
	for (i = 1, k = 1; i < n; i++) {
		char *eq = strncmp(in[i], "--", 2) ? NULL : strchr(in[i], '=');
		if (!strcmp(in[i], "--")) { /* the rest is the program's own, as is */
			while (i < n)
				out[k++] = in[i++];
			break;
		}
		if (!eq) {
			out[k++] = in[i];
			continue;
		}
		/* The name is copied, the value stays in place (see the header). */
		char *name = strndup(in[i], (size_t)(eq - in[i]));
		if (!name) {
			free(out); /* names copied so far leak: the caller exits anyway */
			return -1;
		}
		out[k++] = name;
		out[k++] = eq + 1;
	}
	out[k] = NULL;
	*argc = k;
	*argv = out;
	return 0;
}

const char *rg_version(void)
{
	return RG_VERSION_GIT[0] ? RG_VERSION " (git " RG_VERSION_GIT ")" : RG_VERSION;
}

void rg_version_print(FILE *f, const char *prog)
{
	fprintf(f, "%s %s\n", prog, rg_version());
}
