/*
 * module.c: loading kernel images, functions and their attributes, globals.
 *
 * An image is a fatbin (magic 0xBA55ED50), the wrapper nvcc hands to
 * __cudaRegisterFatBinary (magic 0x466243B1, pointing at a fatbin), or a bare cubin
 * (ELF). From a fatbin the cubin for sm_90 is taken, else the newest one below it,
 * else the oldest one above it: the fake runs no code, so any cubin will do, but the
 * choice is the one a driver for a 9.0 device would make where it can. A fatbin with
 * only PTX, or PTX text, fails with CUDA_ERROR_NO_BINARY_FOR_GPU: the fake has no JIT.
 *
 * Kernel names and parameter layouts come from rg_cubin (cubin_elf_kernels); globals
 * (.nv.global*, .nv.constant* symbols) from elf.c. Each global gets backing memory of
 * its size, initialized from the image, which is an allocation of the context (a valid
 * device range) until the module is unloaded.
 *
 * Function attributes are fixed, plausible values (NUM_REGS is always FK_FUNC_NUM_REGS),
 * except SHARED_SIZE_BYTES (the size of .nv.shared.<kernel>), BINARY_VERSION and
 * PTX_VERSION (the arch of the cubin loaded) and the ones cuFuncSetAttribute sets.
 */
#include "fake.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FK_DEVICE_ARCH (FK_CC_MAJOR * 10 + FK_CC_MINOR)
#define FK_IMAGE_MAX ((size_t)1 << 32)

typedef struct fatbin_wrapper {
	int magic;
	int version;
	const void *data;
	void *filename_or_fatbins;
} fatbin_wrapper;

static CUresult load_image(fk_ctx *c, const void *image, size_t avail, fk_module **out);
static CUresult module_from_elf(fk_ctx *c, const uint8_t *elf, size_t size, uint32_t arch,
                                fk_module **out);

static int looks_like_ptx(const uint8_t *p)
{
	/* PTX text begins, after blanks, with a comment or a directive. Stop at the
	 * first NUL: the buffer is a C string if it is PTX at all. */
	size_t i = 0;
	while (i < 256 && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r'))
		i++;
	return (p[i] == '/' && p[i + 1] == '/') ||
	       (p[i] == '.' && (!strncmp((const char *)p + i, ".version", 8) ||
	                        !strncmp((const char *)p + i, ".target", 7)));
}

static int entry_rank(uint32_t arch)
{
	/* higher is better: sm_90, then older ones newest first, then newer ones */
	return arch <= FK_DEVICE_ARCH ? 100000 + (int)arch : 100000 - (int)arch;
}

static CUresult load_fatbin(fk_ctx *c, const uint8_t *p, size_t avail, fk_module **out)
{
	cubin_fatbin fb;
	size_t size;
	const cubin_entry *best = NULL;
	int ptx = 0;
	CUresult rc;

	if (cubin_fatbin_size(p, avail, &size) != CUBIN_OK || size > FK_IMAGE_MAX)
		return CUDA_ERROR_INVALID_IMAGE;
	if (cubin_fatbin_parse(p, size, &fb) != CUBIN_OK)
		return CUDA_ERROR_INVALID_IMAGE;
	for (uint32_t i = 0; i < fb.n; i++) {
		const cubin_entry *e = &fb.e[i];
		if (e->kind == CUBIN_ENTRY_PTX)
			ptx = 1;
		else if (e->kind == CUBIN_ENTRY_ELF &&
		         (!best || entry_rank(e->arch) > entry_rank(best->arch)))
			best = e;
	}
	if (best)
		rc = module_from_elf(c, best->data, best->size, best->arch, out);
	else
		rc = ptx ? CUDA_ERROR_NO_BINARY_FOR_GPU : CUDA_ERROR_INVALID_IMAGE;
	cubin_fatbin_free(&fb);
	return rc;
}

static CUresult load_image(fk_ctx *c, const void *image, size_t avail, fk_module **out)
{
	const uint8_t *p = image;
	uint32_t magic;

	if (!image || avail < 4)
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(&magic, p, 4);
	if (magic == CUBIN_FATBIN_MAGIC)
		return load_fatbin(c, p, avail, out);
	if (magic == CUBIN_FATBIN_WRAPPER_MAGIC && avail >= sizeof(fatbin_wrapper)) {
		fatbin_wrapper w;
		memcpy(&w, p, sizeof w);
		if ((w.version != 1 && w.version != 2) || !w.data)
			return CUDA_ERROR_INVALID_IMAGE;
		return load_fatbin(c, w.data, SIZE_MAX, out);
	}
	if (!memcmp(p, "\177ELF", 4)) {
		size_t size;
		uint32_t arch;
		if (fk_elf_size(p, avail, &size) != 0 ||
		    fk_elf_arch(p, size, &arch) != 0)
			return CUDA_ERROR_INVALID_IMAGE;
		return module_from_elf(c, p, size, arch, out);
	}
	return looks_like_ptx(p) ? CUDA_ERROR_NO_BINARY_FOR_GPU : CUDA_ERROR_INVALID_IMAGE;
}

/* ---- building a module ---- */

typedef struct globals_acc {
	fk_ctx *c;
	fk_module *m;
	CUresult rc;
} globals_acc;

static int add_global(void *arg, const char *name, const uint8_t *init, size_t size)
{
	globals_acc *g = arg;
	fk_module *m = g->m;
	uintptr_t p;
	fk_global *ng = realloc(m->globals, (m->nglobals + 1) * sizeof *ng);

	if (!ng) {
		g->rc = CUDA_ERROR_OUT_OF_MEMORY;
		return -1;
	}
	m->globals = ng;
	if ((g->rc = fk_mem_new(g->c, size, FK_MEM_GLOBAL, &p)) != CUDA_SUCCESS)
		return -1;
	if (init)
		memcpy((void *)p, init, size);
	else
		memset((void *)p, 0, size);
	m->globals[m->nglobals] = (fk_global){ strdup(name), p, size };
	if (!m->globals[m->nglobals].name) {
		fk_mem_free(g->c, p, 1u << FK_MEM_GLOBAL);
		g->rc = CUDA_ERROR_OUT_OF_MEMORY;
		return -1;
	}
	m->nglobals++;
	return 0;
}

static void module_free(fk_module *m)
{
	for (uint32_t i = 0; i < m->nfuncs; i++) {
		if (m->funcs[i].id)
			fk_handle_del(m->funcs[i].id);
		free(m->funcs[i].name);
		free(m->funcs[i].params);
	}
	for (uint32_t i = 0; i < m->nglobals; i++) {
		fk_mem_free(m->ctx, m->globals[i].ptr, 1u << FK_MEM_GLOBAL);
		free(m->globals[i].name);
	}
	if (m->id)
		fk_handle_del(m->id);
	free(m->funcs);
	free(m->globals);
	free(m);
}

void fk_module_destroy(fk_module *m)
{
	module_free(m);
}

static CUresult module_from_elf(fk_ctx *c, const uint8_t *elf, size_t size, uint32_t arch,
                                fk_module **out)
{
	cubin_kernels ks;
	fk_module *m;
	int err = cubin_elf_kernels(elf, size, &ks);

	if (err == CUBIN_ENOMEM)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (err != CUBIN_OK)
		return CUDA_ERROR_INVALID_IMAGE;
	m = calloc(1, sizeof *m);
	if (!m || (ks.n && !(m->funcs = calloc(ks.n, sizeof *m->funcs)))) {
		free(m);
		cubin_kernels_free(&ks);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	m->ctx = c;
	m->arch = arch;

	CUresult rc = CUDA_SUCCESS;
	for (uint32_t i = 0; i < ks.n && rc == CUDA_SUCCESS; i++) {
		const cubin_kernel *k = &ks.k[i];
		fk_func *f = &m->funcs[m->nfuncs++];
		char sec[512];

		f->mod = m;
		f->name = strdup(k->name);
		f->nparams = k->nparams;
		if (k->nparams)
			f->params = malloc(k->nparams * sizeof *f->params);
		if (!f->name || (k->nparams && !f->params)) {
			rc = CUDA_ERROR_OUT_OF_MEMORY;
			break;
		}
		if (k->nparams)
			memcpy(f->params, k->params, k->nparams * sizeof *f->params);
		for (uint32_t j = 0; j < k->nparams; j++) {
			size_t end = (size_t)k->params[j].offset + k->params[j].size;
			if (end > f->argsize)
				f->argsize = end;
		}
		if ((size_t)snprintf(sec, sizeof sec, ".nv.shared.%s", k->name) < sizeof sec)
			fk_elf_section_size(elf, size, sec, &f->static_shmem);
		f->max_dyn_shmem = f->static_shmem < FK_SHARED_PER_BLOCK
		                           ? (int)(FK_SHARED_PER_BLOCK - f->static_shmem)
		                           : 0;
		f->carveout = -1;
		f->cache = CU_FUNC_CACHE_PREFER_NONE;
	}
	cubin_kernels_free(&ks);

	if (rc == CUDA_SUCCESS) {
		globals_acc g = { c, m, CUDA_SUCCESS };
		if (fk_elf_each_global(elf, size, add_global, &g) != 0)
			rc = g.rc != CUDA_SUCCESS ? g.rc : CUDA_ERROR_INVALID_IMAGE;
	}
	if (rc == CUDA_SUCCESS && !(m->id = fk_handle_new(FK_MODULE, m, c)))
		rc = CUDA_ERROR_OUT_OF_MEMORY;
	for (uint32_t i = 0; i < m->nfuncs && rc == CUDA_SUCCESS; i++)
		if (!(m->funcs[i].id = fk_handle_new(FK_FUNC, &m->funcs[i], c)))
			rc = CUDA_ERROR_OUT_OF_MEMORY;
	if (rc != CUDA_SUCCESS) {
		module_free(m);
		return rc;
	}
	*out = m;
	return CUDA_SUCCESS;
}

/* ---- API: modules ---- */

static CUresult load_api(CUmodule *module, const void *image, size_t avail, const char *fn)
{
	fk_ctx *c;
	fk_module *m = NULL;
	CUresult rc = fk_begin(&c);

	if (rc == CUDA_SUCCESS && !module)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS)
		rc = load_image(c, image, avail, &m);
	if (rc == CUDA_SUCCESS)
		*module = (CUmodule)(uintptr_t)m->id;
	return fk_end(rc, fn, "%p -> %#llx (%u kernels, %u globals, sm_%u)", image,
	              m ? (unsigned long long)m->id : 0ull, m ? m->nfuncs : 0,
	              m ? m->nglobals : 0, m ? m->arch : 0);
}

CUresult CUDAAPI cuModuleLoadData(CUmodule *module, const void *image)
{
	return load_api(module, image, SIZE_MAX, __func__);
}

CUresult CUDAAPI cuModuleLoadDataEx(CUmodule *module, const void *image,
                                    unsigned int numOptions, CUjit_option *options,
                                    void **optionValues)
{
	/* JIT options steer a compiler the fake does not have; they are ignored. */
	return load_api(module, image, SIZE_MAX, __func__);
}

CUresult CUDAAPI cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
	return load_api(module, fatCubin, SIZE_MAX, __func__);
}

CUresult CUDAAPI cuModuleLoad(CUmodule *module, const char *fname)
{
	FILE *f = fname ? fopen(fname, "rb") : NULL;
	uint8_t *buf = NULL;
	long n = -1;
	CUresult rc;

	if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (buf = malloc((size_t)n + 1)) && fread(buf, 1, (size_t)n, f) == (size_t)n) {
		buf[n] = 0; /* PTX text is looked at as a string */
		rc = load_api(module, buf, (size_t)n, __func__);
	} else {
		fk_begin_raw();
		rc = fk_end(fname ? CUDA_ERROR_FILE_NOT_FOUND : CUDA_ERROR_INVALID_VALUE, __func__,
		            "%s", fname ? fname : "(null)");
	}
	if (f)
		fclose(f);
	free(buf);
	return rc;
}

CUresult CUDAAPI cuModuleUnload(CUmodule hmod)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	fk_module *m = rc == CUDA_SUCCESS ? fk_handle_get(FK_H(hmod), FK_MODULE, c) : NULL;

	if (rc == CUDA_SUCCESS && !m)
		rc = CUDA_ERROR_INVALID_HANDLE;
	if (rc == CUDA_SUCCESS)
		module_free(m);
	return fk_end(rc, __func__, "%#llx", (unsigned long long)FK_H(hmod));
}

CUresult CUDAAPI cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	fk_module *m = rc == CUDA_SUCCESS ? fk_handle_get(FK_H(hmod), FK_MODULE, c) : NULL;

	if (rc == CUDA_SUCCESS && !m)
		rc = CUDA_ERROR_INVALID_HANDLE;
	else if (rc == CUDA_SUCCESS && (!hfunc || !name))
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS) {
		rc = CUDA_ERROR_NOT_FOUND;
		for (uint32_t i = 0; i < m->nfuncs; i++) {
			if (strcmp(m->funcs[i].name, name) == 0) {
				*hfunc = (CUfunction)(uintptr_t)m->funcs[i].id;
				rc = CUDA_SUCCESS;
				break;
			}
		}
	}
	return fk_end(rc, __func__, "%#llx, %s", (unsigned long long)FK_H(hmod),
	              name ? name : "(null)");
}

CUresult CUDAAPI cuModuleGetFunctionCount(unsigned int *count, CUmodule mod)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	fk_module *m = rc == CUDA_SUCCESS ? fk_handle_get(FK_H(mod), FK_MODULE, c) : NULL;

	if (rc == CUDA_SUCCESS && !m)
		rc = CUDA_ERROR_INVALID_HANDLE;
	else if (rc == CUDA_SUCCESS && !count)
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS)
		*count = m->nfuncs;
	return fk_end(rc, __func__, NULL);
}

CUresult CUDAAPI cuModuleEnumerateFunctions(CUfunction *functions, unsigned int numFunctions,
                                            CUmodule mod)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	fk_module *m = rc == CUDA_SUCCESS ? fk_handle_get(FK_H(mod), FK_MODULE, c) : NULL;

	if (rc == CUDA_SUCCESS && !m)
		rc = CUDA_ERROR_INVALID_HANDLE;
	else if (rc == CUDA_SUCCESS && !functions)
		rc = CUDA_ERROR_INVALID_VALUE;
	for (uint32_t i = 0; rc == CUDA_SUCCESS && i < m->nfuncs && i < numFunctions; i++)
		functions[i] = (CUfunction)(uintptr_t)m->funcs[i].id;
	return fk_end(rc, __func__, NULL);
}

CUresult CUDAAPI cuModuleGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod,
                                   const char *name)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	fk_module *m = rc == CUDA_SUCCESS ? fk_handle_get(FK_H(hmod), FK_MODULE, c) : NULL;

	if (rc == CUDA_SUCCESS && !m)
		rc = CUDA_ERROR_INVALID_HANDLE;
	else if (rc == CUDA_SUCCESS && !name)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS) {
		rc = CUDA_ERROR_NOT_FOUND;
		for (uint32_t i = 0; i < m->nglobals; i++) {
			if (strcmp(m->globals[i].name, name) == 0) {
				if (dptr)
					*dptr = m->globals[i].ptr;
				if (bytes)
					*bytes = m->globals[i].size;
				rc = CUDA_SUCCESS;
				break;
			}
		}
	}
	return fk_end(rc, __func__, "%#llx, %s", (unsigned long long)FK_H(hmod),
	              name ? name : "(null)");
}

CUresult CUDAAPI cuModuleGetLoadingMode(CUmoduleLoadingMode *mode)
{
	CUresult rc = fk_begin_init();
	if (rc == CUDA_SUCCESS && !mode)
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS)
		*mode = CU_MODULE_EAGER_LOADING;
	return fk_end(rc, __func__, NULL);
}

/* ---- API: functions ---- */

fk_func *fk_func_get(fk_ctx *c, CUfunction f)
{
	return fk_handle_get(FK_H(f), FK_FUNC, c);
}

#define FUNC_BEGIN(f)                                                 \
	fk_ctx *c;                                                    \
	CUresult rc = fk_begin(&c);                                   \
	fk_func *fn = rc == CUDA_SUCCESS ? fk_func_get(c, f) : NULL;  \
	if (rc == CUDA_SUCCESS && !fn)                                \
		rc = CUDA_ERROR_INVALID_HANDLE

CUresult CUDAAPI cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t *paramOffset,
                                    size_t *paramSize)
{
	FUNC_BEGIN(func);
	if (rc == CUDA_SUCCESS && paramIndex >= fn->nparams)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS) {
		if (paramOffset)
			*paramOffset = fn->params[paramIndex].offset;
		if (paramSize)
			*paramSize = fn->params[paramIndex].size;
	}
	return fk_end(rc, __func__, "%s, %zu", fn ? fn->name : "?", paramIndex);
}

CUresult CUDAAPI cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
	FUNC_BEGIN(hfunc);
	if (rc == CUDA_SUCCESS && !pi)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS) {
		switch (attrib) {
		case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = FK_MAX_THREADS_PER_BLOCK; break;
		case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: *pi = (int)fn->static_shmem; break;
		case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES: *pi = (int)fn->const_size; break;
		case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES: *pi = 0; break;
		case CU_FUNC_ATTRIBUTE_NUM_REGS: *pi = FK_FUNC_NUM_REGS; break;
		case CU_FUNC_ATTRIBUTE_PTX_VERSION: *pi = (int)fn->mod->arch; break;
		case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *pi = (int)fn->mod->arch; break;
		case CU_FUNC_ATTRIBUTE_CACHE_MODE_CA: *pi = 0; break;
		case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *pi = fn->max_dyn_shmem; break;
		case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT: *pi = fn->carveout; break;
		case CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET: *pi = 0; break;
		case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH: *pi = fn->cluster[0]; break;
		case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT: *pi = fn->cluster[1]; break;
		case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH: *pi = fn->cluster[2]; break;
		case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED: *pi = fn->nonportable; break;
		case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE: *pi = fn->sched; break;
		default: rc = CUDA_ERROR_INVALID_VALUE;
		}
	}
	return fk_end(rc, __func__, "%s, %d", fn ? fn->name : "?", (int)attrib);
}

CUresult CUDAAPI cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value)
{
	FUNC_BEGIN(hfunc);
	if (rc == CUDA_SUCCESS) {
		switch (attrib) {
		case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
			if (value < 0 ||
			    (size_t)value + fn->static_shmem > FK_SHARED_PER_BLOCK_OPTIN)
				rc = CUDA_ERROR_INVALID_VALUE;
			else
				fn->max_dyn_shmem = value;
			break;
		case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
			if (value < -1 || value > 100)
				rc = CUDA_ERROR_INVALID_VALUE;
			else
				fn->carveout = value;
			break;
		case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
		case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
		case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
			if (value < 0 || value > 8)
				rc = CUDA_ERROR_INVALID_VALUE;
			else
				fn->cluster[attrib - CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH] = value;
			break;
		case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
			fn->nonportable = value != 0;
			break;
		case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
			if (value < 0 || value > CU_CLUSTER_SCHEDULING_POLICY_LOAD_BALANCING)
				rc = CUDA_ERROR_INVALID_VALUE;
			else
				fn->sched = value;
			break;
		default: /* the others are read-only */
			rc = CUDA_ERROR_INVALID_VALUE;
		}
	}
	return fk_end(rc, __func__, "%s, %d, %d", fn ? fn->name : "?", (int)attrib, value);
}

CUresult CUDAAPI cuFuncSetCacheConfig(CUfunction hfunc, CUfunc_cache config)
{
	FUNC_BEGIN(hfunc);
	if (rc == CUDA_SUCCESS && (unsigned)config > CU_FUNC_CACHE_PREFER_EQUAL)
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS)
		fn->cache = config;
	return fk_end(rc, __func__, "%d", (int)config);
}

CUresult CUDAAPI cuFuncGetName(const char **name, CUfunction hfunc)
{
	FUNC_BEGIN(hfunc);
	if (rc == CUDA_SUCCESS && !name)
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS)
		*name = fn->name; /* valid until the module is unloaded */
	return fk_end(rc, __func__, NULL);
}

CUresult CUDAAPI cuFuncGetModule(CUmodule *hmod, CUfunction hfunc)
{
	FUNC_BEGIN(hfunc);
	if (rc == CUDA_SUCCESS && !hmod)
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS)
		*hmod = (CUmodule)(uintptr_t)fn->mod->id;
	return fk_end(rc, __func__, NULL);
}

CUresult CUDAAPI cuFuncIsLoaded(CUfunctionLoadingState *state, CUfunction function)
{
	FUNC_BEGIN(function);
	if (rc == CUDA_SUCCESS && !state)
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS)
		*state = CU_FUNCTION_LOADING_STATE_LOADED; /* modules load eagerly */
	return fk_end(rc, __func__, NULL);
}

CUresult CUDAAPI cuFuncLoad(CUfunction function)
{
	FUNC_BEGIN(function);
	return fk_end(rc, __func__, NULL);
}

/* ---- libraries and kernels: not emulated ---- */

#define NOT_SUPPORTED_BODY()                                           \
	do {                                                           \
		fk_begin_raw();                                        \
		return fk_end(CUDA_ERROR_NOT_SUPPORTED, __func__, NULL); \
	} while (0)

CUresult CUDAAPI cuLibraryLoadData(CUlibrary *library, const void *code,
                                   CUjit_option *jitOptions, void **jitOptionsValues,
                                   unsigned int numJitOptions,
                                   CUlibraryOption *libraryOptions,
                                   void **libraryOptionValues, unsigned int numLibraryOptions)
{
	NOT_SUPPORTED_BODY();
}

CUresult CUDAAPI cuLibraryLoadFromFile(CUlibrary *library, const char *fileName,
                                       CUjit_option *jitOptions, void **jitOptionsValues,
                                       unsigned int numJitOptions,
                                       CUlibraryOption *libraryOptions,
                                       void **libraryOptionValues,
                                       unsigned int numLibraryOptions)
{
	NOT_SUPPORTED_BODY();
}

CUresult CUDAAPI cuLibraryUnload(CUlibrary library)
{
	NOT_SUPPORTED_BODY();
}

CUresult CUDAAPI cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
	NOT_SUPPORTED_BODY();
}

CUresult CUDAAPI cuLibraryGetModule(CUmodule *pMod, CUlibrary library)
{
	NOT_SUPPORTED_BODY();
}

CUresult CUDAAPI cuLibraryGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUlibrary library,
                                    const char *name)
{
	NOT_SUPPORTED_BODY();
}

CUresult CUDAAPI cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
	NOT_SUPPORTED_BODY();
}

CUresult CUDAAPI cuKernelGetAttribute(int *pi, CUfunction_attribute attrib, CUkernel kernel,
                                      CUdevice dev)
{
	NOT_SUPPORTED_BODY();
}

CUresult CUDAAPI cuKernelSetAttribute(CUfunction_attribute attrib, int val, CUkernel kernel,
                                      CUdevice dev)
{
	NOT_SUPPORTED_BODY();
}

CUresult CUDAAPI cuKernelGetName(const char **name, CUkernel hfunc)
{
	NOT_SUPPORTED_BODY();
}

CUresult CUDAAPI cuKernelGetParamInfo(CUkernel kernel, size_t paramIndex, size_t *paramOffset,
                                      size_t *paramSize)
{
	NOT_SUPPORTED_BODY();
}
