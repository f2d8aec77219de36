/*
 * rg_token.h: reading a token file.
 */
#include "rg_token.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int rg_token_file_read(const char *path, char *out, size_t cap, char *err, size_t errcap)
{
	struct stat st;
	FILE *f = fopen(path, "re");
	if (!f) {
		snprintf(err, errcap, "%s: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, errcap, "%s: not a regular file", path);
		fclose(f);
		return -1;
	}
	if (st.st_mode & 077) {
		snprintf(err, errcap, "%s: readable by group or others (mode %04o); run: chmod 600 %s", path,
			 (unsigned)(st.st_mode & 07777), path);
		fclose(f);
		return -1;
	}
	size_t n = fgets(out, (int)cap, f) ? strcspn(out, "\r\n") : 0;
	fclose(f);
	out[n] = 0;
	if (n == 0 || n > RG_TOKEN_MAX || n + 1 >= cap) {
		snprintf(err, errcap, "%s: %s", path, n ? "token longer than 4096 bytes" : "no token on the first line");
		return -1;
	}
	return 0;
}
