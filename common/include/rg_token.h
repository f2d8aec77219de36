/*
 * Token files (remote-gpud --token-file, remote-gpu --token-file): the first
 * line of a regular file that only its owner may read. A file others can read
 * is refused, not used: the token would be theirs too.
 */
#ifndef RG_TOKEN_H
#define RG_TOKEN_H

#include <stddef.h>

#define RG_TOKEN_MAX 4096

/* Reads the token into out (cap >= RG_TOKEN_MAX + 2). 0, or -1 with the
 * reason in err ("PATH: readable by group or others ...; run: chmod 600 PATH"). */
int rg_token_file_read(const char *path, char *out, size_t cap, char *err, size_t errcap);

#endif
