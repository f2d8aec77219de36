/*
 * The driver calls make_shim.py's libcuda.so.1 logs (to $SHIM_OUT, else
 * stderr), each then made by the real driver: loading images, looking up
 * kernels and globals, and cuGetProcAddress, which hands these same
 * functions to a runtime that asks for them by name.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#undef cuGetProcAddress
CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags);

void *trace_real(const char *name);

static FILE *out(void)
{
	static FILE *f;
	if (!f) {
		const char *p = getenv("SHIM_OUT");
		f = p ? fopen(p, "w") : NULL;
		if (!f)
			f = stderr;
		setvbuf(f, NULL, _IOLBF, 0);
	}
	return f;
}

#define REAL(fn) \
	static __typeof__(&fn) real_fn; \
	if (!real_fn) \
		real_fn = (__typeof__(&fn))trace_real(#fn)

CUresult cuLibraryLoadData(CUlibrary *lib, const void *code, CUjit_option *jo, void **jv, unsigned nj,
			   CUlibraryOption *lo, void **lv, unsigned nl)
{
	REAL(cuLibraryLoadData);
	CUresult r = real_fn(lib, code, jo, jv, nj, lo, lv, nl);
	unsigned magic = 0;
	if (code)
		memcpy(&magic, code, sizeof(magic));
	fprintf(out(), "cuLibraryLoadData(%p, begins %08x, %u JIT options, %u library options%s) = %d -> %p\n", code,
		magic, nj, nl, nl && !lv ? " without values" : "", r, lib ? (void *)*lib : NULL);
	return r;
}

CUresult cuLibraryLoadFromFile(CUlibrary *lib, const char *file, CUjit_option *jo, void **jv, unsigned nj,
			       CUlibraryOption *lo, void **lv, unsigned nl)
{
	REAL(cuLibraryLoadFromFile);
	CUresult r = real_fn(lib, file, jo, jv, nj, lo, lv, nl);
	fprintf(out(), "cuLibraryLoadFromFile(%s) = %d -> %p\n", file, r, lib ? (void *)*lib : NULL);
	return r;
}

CUresult cuLibraryGetKernel(CUkernel *k, CUlibrary lib, const char *name)
{
	REAL(cuLibraryGetKernel);
	CUresult r = real_fn(k, lib, name);
	fprintf(out(), "cuLibraryGetKernel(%p, %s) = %d\n", (void *)lib, name, r);
	return r;
}

CUresult cuLibraryGetGlobal(CUdeviceptr *p, size_t *bytes, CUlibrary lib, const char *name)
{
	REAL(cuLibraryGetGlobal);
	CUresult r = real_fn(p, bytes, lib, name);
	fprintf(out(), "cuLibraryGetGlobal(%p, %s) = %d\n", (void *)lib, name, r);
	return r;
}

CUresult cuModuleLoadData(CUmodule *m, const void *image)
{
	REAL(cuModuleLoadData);
	CUresult r = real_fn(m, image);
	fprintf(out(), "cuModuleLoadData(%p) = %d -> %p\n", image, r, m ? (void *)*m : NULL);
	return r;
}

CUresult cuModuleLoadDataEx(CUmodule *m, const void *image, unsigned n, CUjit_option *o, void **v)
{
	REAL(cuModuleLoadDataEx);
	CUresult r = real_fn(m, image, n, o, v);
	fprintf(out(), "cuModuleLoadDataEx(%p, %u options) = %d -> %p\n", image, n, r, m ? (void *)*m : NULL);
	return r;
}

CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name)
{
	REAL(cuModuleGetFunction);
	CUresult r = real_fn(f, m, name);
	fprintf(out(), "cuModuleGetFunction(%p, %s) = %d\n", (void *)m, name, r);
	return r;
}

/* The functions above, for a runtime that asks for them by name. */
static void *traced(const char *symbol)
{
	static const char *const names[] = {"cuLibraryLoadData", "cuLibraryLoadFromFile", "cuLibraryGetKernel",
					    "cuLibraryGetGlobal", "cuModuleLoadData", "cuModuleLoadDataEx",
					    "cuModuleGetFunction"};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(symbol, names[i]) == 0)
			return dlsym(RTLD_DEFAULT, symbol);
	return NULL;
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
			     CUdriverProcAddressQueryResult *status)
{
	REAL(cuGetProcAddress_v2);
	CUresult r = real_fn(symbol, pfn, version, flags, status);
	void *mine = r == CUDA_SUCCESS && symbol ? traced(symbol) : NULL;
	if (mine)
		*pfn = mine;
	fprintf(out(), "cuGetProcAddress(%s, %d, %llu) = %d%s\n", symbol ? symbol : "(null)", version,
		(unsigned long long)flags, r, mine ? " (traced)" : "");
	return r;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
	return cuGetProcAddress_v2(symbol, pfn, version, flags, NULL);
}
