/* See fk_check.h. */
#include "fk_check.h"

#include <stdlib.h>
#include <string.h>

#define DEFN(f) __typeof__(f) *p_##f;
API(DEFN)

void *lib;
_Atomic int failures, checks;
char log_path[256];

const char *ename(CUresult rc)
{
	const char *s = NULL;
	if (p_cuGetErrorName(rc, &s) != CUDA_SUCCESS)
		return "?";
	return s;
}

#ifdef FK_KERNELS_DIR
void *read_file(const char *name, size_t *size)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", FK_KERNELS_DIR, name);
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	void *b = malloc((size_t)n + 1);
	if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
		free(b);
		b = NULL;
	}
	fclose(f);
	if (size)
		*size = (size_t)n;
	return b;
}

char *log_read(int *nlines)
{
	FILE *f = fopen(log_path, "rb");
	char *b = NULL;
	size_t n = 0;
	*nlines = 0;
	if (!f)
		return strdup("");
	fseek(f, 0, SEEK_END);
	n = (size_t)ftell(f);
	fseek(f, 0, SEEK_SET);
	b = calloc(1, n + 1);
	if (fread(b, 1, n, f) != n)
		b[0] = 0;
	fclose(f);
	for (size_t i = 0; i < n; i++)
		*nlines += b[i] == '\n';
	return b;
}

void log_clear(void)
{
	FILE *f = fopen(log_path, "w");
	if (f)
		fclose(f);
}

void hex(char *out, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
	out[2 * n] = 0;
}
#endif

size_t free_mem(void)
{
	size_t f = 0, t = 0;
	OK(p_cuMemGetInfo(&f, &t));
	return f;
}

void host_inc(void *p) { (*(int *)p)++; }
