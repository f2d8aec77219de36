/*
 * remote-cubin internals: one file per command (cmd_*.c), input mapping and
 * classification (input.c), JSON output helpers (json.c).
 */
#ifndef REMOTE_CUBIN_TOOL_H
#define REMOTE_CUBIN_TOOL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cubin.h"

enum input_kind {
	INPUT_HOST_ELF = 1, /* executable, shared library or object: .nv_fatbin */
	INPUT_CUBIN,        /* ELF for a GPU (e_machine EM_CUDA) */
	INPUT_FATBIN,       /* one or more fatbins back to back (.fatbin file) */
};

typedef struct input {
	const char *path;
	const uint8_t *data; /* the whole file, mapped read-only */
	size_t size;
	int kind;
} input;

/* Maps and classifies path; on failure prints "remote-cubin: path: why". */
int input_open(input *in, const char *path);
void input_close(input *in);

/* One module image of an input: a fatbin, or the whole cubin. */
typedef struct image {
	const uint8_t *data;
	size_t size;
	size_t offset; /* in the input file */
	int is_cubin;
} image;
typedef int (*image_fn)(void *ctx, const input *in, const image *img);
/* Calls fn for each image; returns a CUBIN_E* code or fn's nonzero result. */
int input_each_image(const input *in, image_fn fn, void *ctx);
/* sm_XX of a cubin image (0 when unknown). */
uint32_t image_cubin_arch(const image *img);

/* JSON string with escaping (bytes >= 0x80 as \u00XX: names are not UTF-8-checked). */
void json_str(FILE *f, const char *s);

void tool_error(const char *path, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int tool_isatty_stderr(void);

int cmd_extract(int argc, char **argv);
int cmd_ls(int argc, char **argv);
int cmd_verify(int argc, char **argv);

#endif
