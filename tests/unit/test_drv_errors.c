/*
 * libremote.so's driver-API error calls, which need no server: cuGetErrorName
 * and cuGetErrorString answer from cuda.h's own table (the driver's names, not
 * the runtime's: the two enums number alike but name differently), an unknown
 * code is an invalid value with a NULL string as with the real driver, and
 * cuGetExportTable (the driver's private tables, which NVRTC asks for) is
 * refused rather than missing.
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
	return check_summary("test_drv_errors");
}
