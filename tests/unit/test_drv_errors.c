/*
 * libremote.so's driver-API error calls, which need no server: cuGetErrorName
 * and cuGetErrorString answer from cuda.h's own table (the driver's names, not
 * the runtime's: the two enums number alike but name differently), an unknown
 * code is an invalid value with a NULL string as with the real driver, and
 * cuGetExportTable (the driver's private tables, which the static runtime
 * asks for) answers the known tables with their sizes in slot 0, the
 * integrity check's fixed answers, and refuses an unknown one.
 *
 *   test_drv_errors path/to/libremote.so
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include <cuda.h>

#include "check.h"

typedef CUresult (*name_fn)(CUresult, const char **);
typedef CUresult (*table_fn)(const void **, const CUuuid *);

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: test_drv_errors libremote.so\n");
		return 2;
	}
	void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	CHECK(h != NULL);
	if (!h) {
		fprintf(stderr, "%s\n", dlerror());
		return check_summary("test_drv_errors");
	}
	name_fn get_name = (name_fn)dlsym(h, "cuGetErrorName");
	name_fn get_string = (name_fn)dlsym(h, "cuGetErrorString");
	table_fn export_table = (table_fn)dlsym(h, "cuGetExportTable");
	CHECK(get_name && get_string && export_table);
	if (!get_name || !get_string || !export_table)
		return check_summary("test_drv_errors");

	const char *s = "x";
	CHECK_EQ(get_name(CUDA_ERROR_NOT_FOUND, &s), CUDA_SUCCESS);
	CHECK(s && strcmp(s, "CUDA_ERROR_NOT_FOUND") == 0);
	/* 201: the runtime's cudaErrorDeviceUninitialized */
	CHECK_EQ(get_name(CUDA_ERROR_INVALID_CONTEXT, &s), CUDA_SUCCESS);
	CHECK(s && strcmp(s, "CUDA_ERROR_INVALID_CONTEXT") == 0);
	CHECK_EQ(get_name(CUDA_SUCCESS, &s), CUDA_SUCCESS);
	CHECK(s && strcmp(s, "CUDA_SUCCESS") == 0);
	s = "x";
	CHECK_EQ(get_name((CUresult)99999, &s), CUDA_ERROR_INVALID_VALUE);
	CHECK(s == NULL);
	CHECK_EQ(get_name(CUDA_ERROR_NOT_FOUND, NULL), CUDA_ERROR_INVALID_VALUE);

	/* No server here: the text falls back to cuda.h's first sentence. */
	s = NULL;
	CHECK_EQ(get_string(CUDA_ERROR_NOT_FOUND, &s), CUDA_SUCCESS);
	CHECK(s && strcmp(s, "This indicates that a named symbol was not found") == 0);
	s = "x";
	CHECK_EQ(get_string((CUresult)99999, &s), CUDA_ERROR_INVALID_VALUE);
	CHECK(s == NULL);

	const void *t = &t;
	CUuuid id = {{0}};
	CHECK_EQ(export_table(&t, &id), CUDA_ERROR_NOT_SUPPORTED);
	CHECK(t == NULL);
	CHECK_EQ(export_table(&t, NULL), CUDA_ERROR_INVALID_VALUE);

	static const CUuuid cudart = {{0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a, 0x89, 0x87, 0xd9, 0x39, 0x12,
				       0xfd, 0x9d, 0xf9}};
	static const CUuuid integrity = {{0xd4, 0x08, 0x20, 0x55, 0xbd, 0xe6, 0x70, 0x4b, 0x8d, 0x34, 0xba, 0x12, 0x3c,
					  0x66, 0xe1, 0xf2}};
	static const CUuuid cls = {{0xc6, 0x93, 0x33, 0x6e, 0x11, 0x21, 0xdf, 0x11, 0xa8, 0xc3, 0x68, 0xf3, 0x55, 0xd8,
				    0x95, 0x93}};
	const void *const *tab = NULL;
	CHECK_EQ(export_table((const void **)&tab, &cudart), CUDA_SUCCESS);
	CHECK(tab && (size_t)tab[0] == 13 * sizeof(void *));
	CHECK_EQ(export_table((const void **)&tab, &cls), CUDA_SUCCESS);
	CHECK(tab && tab[0] && tab[1] && tab[2] && !tab[3]); /* no size slot */
	CHECK_EQ(export_table((const void **)&tab, &integrity), CUDA_SUCCESS);
	CHECK(tab && (size_t)tab[0] == 3 * sizeof(void *));
	if (tab) {
		typedef CUresult (*check_fn)(unsigned, unsigned long long, unsigned long long *);
		unsigned long long r[2] = {0, 0};
		CHECK_EQ(((check_fn)tab[1])(13000, 1700000000ull, r), CUDA_SUCCESS);
		CHECK(r[0] == 0x3341181C03CB675Cull && r[1] == 0x8ED383AA1F4CD1E8ull);
		CHECK_EQ(((check_fn)tab[1])(13001, 1700000000ull, r), CUDA_SUCCESS);
		CHECK(r[0] == 0x1841181C03CB675Cull && r[1] == 0x8ED383AA1F4CD1E8ull);
	}
	return check_summary("test_drv_errors");
}
