/*
 * Driver API: modules, libraries, kernels and functions, launches, occupancy.
 *
 * A CUmodule and a CUlibrary are an image record (module.h), a CUfunction and a
 * CUkernel a kernel record: cuLibraryGetKernel's handle launches as a
 * CUfunction, as in CUDA 12, and the runtime's calls take it too. Loading an
 * image costs nothing here: it travels to the server by content hash, and only
 * if the server lacks it, when a name in it is first asked for on a device
 * (libraries such as cuDNN load hundreds of images and use few). Each name
 * asked for later costs one round trip (module_resolve), in the same server
 * module, so kernels and globals stay one instance.
 *
 * The image's bytes stay the caller's where they lie in a read-only segment of
 * a loaded object (a library's embedded kernels); anything else is copied,
 * since the caller may free it once the load returns
 * (CU_LIBRARY_BINARY_IS_PRESERVED is a hint the driver may ignore: so do we).
 *
 * Unloading forgets the handle here; the server keeps the module until the
 * session ends (kernels of it may still be queued).
 */
#define _GNU_SOURCE
#include <elf.h>
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drv.h"
#include "module.h"
#include "rg_log.h"
#include "rt.h"

/* A call that needs the current device's channel, counted under the entry
 * point (stats.h); the runtime's last error stays as it was. */
#define DRV_ENTER(c) (fe_drv_begin(), fe_drv_end(fe_rt_enter(c)))

static CUresult status_of(int st) { return st < 0 ? CUDA_ERROR_DEVICE_UNAVAILABLE : (CUresult)st; }

static int unsupported(const char *what)
{
	rg_log_once("frontend", "not supported", what);
	return CUDA_ERROR_NOT_SUPPORTED;
}

/* ---- images */

struct fatbin_wrapper {
	uint32_t magic, version;
	const void *data;
	void *filename_or_fatbins;
};

/* An ELF's extent: the furthest of its headers, program headers, section
 * headers and sections; 0 if that is past avail. */
static size_t elf_size(const uint8_t *p, size_t avail)
{
	Elf64_Ehdr eh;
	if (avail < sizeof(eh))
		return 0;
	memcpy(&eh, p, sizeof(eh));
	uint64_t end = sizeof(eh);
	if (eh.e_phoff && eh.e_phoff + (uint64_t)eh.e_phnum * eh.e_phentsize > end)
		end = eh.e_phoff + (uint64_t)eh.e_phnum * eh.e_phentsize;
	if (!eh.e_shoff || eh.e_shentsize < sizeof(Elf64_Shdr))
		return end <= avail ? end : 0;
	Elf64_Shdr sh;
	if (eh.e_shoff > avail || avail - eh.e_shoff < sizeof(sh))
		return 0;
	memcpy(&sh, p + eh.e_shoff, sizeof(sh));
	uint64_t n = eh.e_shnum ? eh.e_shnum : sh.sh_size; /* extended numbering */
	if (n > (avail - eh.e_shoff) / eh.e_shentsize)
		return 0;
	if (eh.e_shoff + n * eh.e_shentsize > end)
		end = eh.e_shoff + n * eh.e_shentsize;
	for (uint64_t i = 0; i < n; i++) {
		memcpy(&sh, p + eh.e_shoff + i * eh.e_shentsize, sizeof(sh));
		if (sh.sh_type != SHT_NOBITS && sh.sh_offset + sh.sh_size > end)
			end = sh.sh_offset + sh.sh_size;
	}
	return end <= avail ? end : 0;
}

/* Where an image the driver takes starts and how long it is: a cubin (ELF), a
 * fatbin, the wrapper nvcc hands to __cudaRegisterFatBinary, or PTX text.
 * avail bounds what may be read (SIZE_MAX: the caller's memory, trusted as
 * the driver trusts it). */
static CUresult image_extent(const void *image, size_t avail, const void **data, size_t *size)
{
	const uint8_t *p = image;
	uint32_t magic = 0;
	if (avail < 4)
		return CUDA_ERROR_INVALID_IMAGE;
	memcpy(&magic, p, 4);
	if (magic == CUBIN_FATBIN_WRAPPER_MAGIC && avail == SIZE_MAX) {
		const struct fatbin_wrapper *w = image;
		if (w->version == 2 && w->filename_or_fatbins)
			return unsupported("module from a relocatable (-rdc) fatbin list");
		if (!w->data)
			return CUDA_ERROR_INVALID_IMAGE;
		p = w->data;
		memcpy(&magic, p, 4);
	}
	*data = p;
	if (magic == CUBIN_FATBIN_MAGIC)
		return cubin_fatbin_size(p, avail, size) == CUBIN_OK ? CUDA_SUCCESS : CUDA_ERROR_INVALID_IMAGE;
	if (memcmp(p, ELFMAG, SELFMAG) == 0) {
		if (avail <= EI_CLASS || p[EI_CLASS] != ELFCLASS64)
			return CUDA_ERROR_INVALID_IMAGE;
		*size = elf_size(p, avail);
		return *size ? CUDA_SUCCESS : CUDA_ERROR_INVALID_IMAGE;
	}
	/* PTX: text that declares its version (after comments, if any). */
	if ((p[0] < 0x20 && p[0] != '\n' && p[0] != '\r' && p[0] != '\t') || p[0] > 0x7e)
		return CUDA_ERROR_INVALID_IMAGE;
	if (!strstr((const char *)p, ".version"))
		return CUDA_ERROR_INVALID_PTX;
	*size = strlen((const char *)p) + 1;
	return *size <= avail ? CUDA_SUCCESS : CUDA_ERROR_INVALID_IMAGE;
}

typedef struct range_probe {
	uintptr_t lo, hi;
	int found;
} range_probe;

static int probe_segment(struct dl_phdr_info *info, size_t size, void *arg)
{
	range_probe *r = arg;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_LOAD && !(ph->p_flags & PF_W) && r->lo >= lo && r->hi <= lo + ph->p_memsz) {
			r->found = 1;
			return 1;
		}
	}
	return 0;
}

/* [p, p + n) lies in a read-only segment of a loaded object. */
static int in_readonly_segment(const void *p, size_t n)
{
	range_probe r = {(uintptr_t)p, (uintptr_t)p + n, 0};
	dl_iterate_phdr(probe_segment, &r);
	return r.found;
}

/* The object whose read-only segment holds an image stays loaded while the
 * image is referenced: its bytes are read at first use, perhaps long after a
 * dlclose (a reference taken once per object, never given back). */
static void hold_object(const void *p)
{
	static _Thread_local const char *held;
	Dl_info info;
	if (!dladdr(p, &info) || !info.dli_fname || info.dli_fname == held)
		return;
	if (dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD))
		held = info.dli_fname;
}

/* A new image record of data (size bytes), its bytes kept (owned: ours
 * already; or in a loaded object's read-only segment, which is then held) or
 * copied. */
static CUresult image_new(void **out, const void *data, size_t size, int kind, void *owned)
{
	void *copy = owned;
	if (!copy && !in_readonly_segment(data, size)) {
		if (!(copy = malloc(size)))
			return CUDA_ERROR_OUT_OF_MEMORY;
		memcpy(copy, data, size);
	} else if (!copy) {
		hold_object(data);
	}
	fe_fatbin *fb = fe_image_new(copy ? copy : data, size, kind);
	if (!fb) {
		if (copy != owned) /* the caller frees what it owned */
			free(copy);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	fb->owned = copy != NULL;
	*out = fb;
	return CUDA_SUCCESS;
}

/* The JIT options a load takes: those that only steer the compiler (and change
 * nothing a program can rely on) are dropped, the logs come back empty (the
 * compiler runs on the server, at first use), the rest are not supported. */
CUresult fe_drv_jit_options(unsigned n, CUjit_option *o, void **v)
{
	if (n && (!o || !v))
		return CUDA_ERROR_INVALID_VALUE;
	for (unsigned i = 0; i < n; i++) /* an empty log, where its buffer has room */
		for (unsigned j = 0; j < n; j++)
			if ((o[i] == CU_JIT_INFO_LOG_BUFFER || o[i] == CU_JIT_ERROR_LOG_BUFFER) && o[j] == o[i] + 1 &&
			    v[i] && (uintptr_t)v[j])
				*(char *)v[i] = 0;
	for (unsigned i = 0; i < n; i++) {
		switch (o[i]) {
		case CU_JIT_MAX_REGISTERS:
		case CU_JIT_THREADS_PER_BLOCK:
		case CU_JIT_MIN_CTA_PER_SM:
		case CU_JIT_MAX_THREADS_PER_BLOCK:
		case CU_JIT_OVERRIDE_DIRECTIVE_VALUES:
			/* they change what PTX compiles to: said, as the server compiles
			 * with its defaults */
			rg_log_once("frontend", "JIT option ignored (the server compiles PTX with its defaults)",
				    "CU_JIT_MAX_REGISTERS, THREADS_PER_BLOCK, MIN_CTA_PER_SM or MAX_THREADS_PER_BLOCK");
			break;
		case CU_JIT_OPTIMIZATION_LEVEL:
		case CU_JIT_TARGET_FROM_CUCONTEXT:
		case CU_JIT_FALLBACK_STRATEGY:
		case CU_JIT_GENERATE_DEBUG_INFO:
		case CU_JIT_LOG_VERBOSE:
		case CU_JIT_GENERATE_LINE_INFO:
		case CU_JIT_CACHE_MODE:
		case CU_JIT_POSITION_INDEPENDENT_CODE:
		case CU_JIT_FAST_COMPILE:
		case CU_JIT_SPLIT_COMPILE:
			break;
		case CU_JIT_WALL_TIME: {
			float ms = 0;
			memcpy(&v[i], &ms, sizeof(ms));
			break;
		}
		case CU_JIT_INFO_LOG_BUFFER:
		case CU_JIT_ERROR_LOG_BUFFER:
			break;
		case CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES:
		case CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES:
			v[i] = (void *)(uintptr_t)0;
			break;
		default: {
			char what[64];
			snprintf(what, sizeof(what), "JIT option %d", (int)o[i]);
			return unsupported(what);
		}
		}
	}
	return CUDA_SUCCESS;
}

static CUresult load(void **out, const void *image, int kind)
{
	if (!out || !image)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult r = (CUresult)fe_rt_init();
	if (r)
		return r;
	const void *data;
	size_t size;
	if ((r = image_extent(image, SIZE_MAX, &data, &size))) {
		uint32_t head;
		memcpy(&head, image, sizeof(head));
		LOG_DEBUG("frontend", "%s of the image at %p (it begins %08x): not a cubin, fatbin or PTX (%d)",
			  kind == FE_IMAGE_LIBRARY ? "cuLibraryLoadData" : "cuModuleLoadData", image, head, (int)r);
		return r;
	}
	if ((r = image_new(out, data, size, kind, NULL)) == CUDA_SUCCESS)
		LOG_DEBUG("frontend", "%s: image %p (%zu bytes): %p", kind == FE_IMAGE_LIBRARY ? "cuLibraryLoadData" :
			  "cuModuleLoadData", data, size, *out);
	return r;
}

CUresult fe_drv_read_file(const char *path, void **data, size_t *size)
{
	if (!path)
		return CUDA_ERROR_INVALID_VALUE;
	FILE *f = fopen(path, "rb");
	if (!f)
		return CUDA_ERROR_FILE_NOT_FOUND;
	char *buf = NULL;
	size_t n = 0, cap = 0, got;
	do {
		if (n + 65536 + 1 > cap) {
			char *nb = realloc(buf, cap = (n + 65536 + 1) * 2);
			if (!nb) {
				free(buf);
				fclose(f);
				return CUDA_ERROR_OUT_OF_MEMORY;
			}
			buf = nb;
		}
		n += got = fread(buf + n, 1, 65536, f);
	} while (got);
	int err = ferror(f);
	fclose(f);
	if (err || !n) {
		free(buf);
		return CUDA_ERROR_FILE_NOT_FOUND;
	}
	buf[n] = 0;
	*data = buf;
	*size = n;
	return CUDA_SUCCESS;
}

static CUresult load_file(void **out, const char *path, int kind)
{
	if (!out || !path)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult r = (CUresult)fe_rt_init();
	void *buf;
	size_t n;
	if (r || (r = fe_drv_read_file(path, &buf, &n)))
		return r;
	const void *data;
	size_t size;
	r = image_extent(buf, n + 1, &data, &size); /* the NUL we added ends PTX text */
	if (!r)
		r = image_new(out, buf, size, kind, buf);
	if (r)
		free(buf);
	return r;
}

CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
	return load((void **)module, image, FE_IMAGE_MODULE);
}

CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int n, CUjit_option *o, void **v)
{
	CUresult r = fe_drv_jit_options(n, o, v);
	return r ? r : load((void **)module, image, FE_IMAGE_MODULE);
}

CUresult cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
	return load((void **)module, fatCubin, FE_IMAGE_MODULE);
}

CUresult cuModuleLoad(CUmodule *module, const char *fname)
{
	return load_file((void **)module, fname, FE_IMAGE_MODULE);
}

/* The image record behind a handle (lock held), NULL if it is none or was
 * unloaded. */
static fe_fatbin *image_locked(const void *h)
{
	fe_fatbin *fb = fe_image_valid_locked(h) ? (fe_fatbin *)h : NULL;
	return fb && !fb->unloaded ? fb : NULL;
}

static CUresult unload(const void *h)
{
	fe_module_lock();
	fe_fatbin *fb = image_locked(h);
	if (fb && fb->kind != FE_IMAGE_REGISTERED) {
		fb->unloaded = 1;
		memset(fb->loaded, 0, sizeof(fb->loaded)); /* launches of its kernels take the slow path and fail */
		if (fb->owned)
			free((void *)fb->data);
		fb->data = NULL;
	}
	fe_module_unlock();
	return fb && fb->kind != FE_IMAGE_REGISTERED ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuModuleUnload(CUmodule hmod) { return unload(hmod); }

CUresult cuModuleGetLoadingMode(CUmoduleLoadingMode *mode)
{
	if (!mode)
		return CUDA_ERROR_INVALID_VALUE;
	*mode = CU_MODULE_LAZY_LOADING;
	return CUDA_SUCCESS;
}

/* The kernel record for name in image h, resolved on the current device:
 * CUDA_ERROR_NOT_FOUND when the image has no such kernel. */
static CUresult get_kernel(fe_conn *c, void **out, const void *h, const char *name)
{
	int dev = fe_rt_current_device();
	fe_module_lock();
	fe_fatbin *fb = image_locked(h);
	int st = CUDA_ERROR_INVALID_HANDLE;
	if (fb) {
		fe_kernel *k = fe_image_kernel_locked(fb, name);
		if (!k)
			k = fe_image_add_kernel_locked(fb, name);
		st = k ? fe_image_resolve_locked(fb, dev, c, k, NULL) : CUDA_ERROR_OUT_OF_MEMORY;
		if (st == 0 && (st = k->status[dev]) == 0)
			*out = k;
	}
	fe_module_unlock();
	if (st)
		LOG_DEBUG("frontend", "kernel %s of image %p: %s (%d)", name, h,
			  fb ? "not found or not loaded" : "no such module or library", st);
	return status_of(st);
}

static CUresult get_global(fe_conn *c, CUdeviceptr *dptr, size_t *bytes, const void *h, const char *name)
{
	int dev = fe_rt_current_device();
	fe_module_lock();
	fe_fatbin *fb = image_locked(h);
	int st = CUDA_ERROR_INVALID_HANDLE;
	if (fb) {
		fe_var *v = fe_image_var_locked(fb, name);
		if (!v)
			v = fe_image_add_var_locked(fb, name);
		st = v ? fe_image_resolve_locked(fb, dev, c, NULL, v) : CUDA_ERROR_OUT_OF_MEMORY;
		if (st == 0 && (st = v->status[dev]) == 0) {
			if (dptr)
				*dptr = (CUdeviceptr)v->dptr[dev];
			if (bytes)
				*bytes = v->size;
		}
	}
	fe_module_unlock();
	return status_of(st);
}

CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
	fe_conn *c;
	CUresult r = DRV_ENTER(&c);
	if (r)
		return r;
	if (!hfunc || !name)
		return CUDA_ERROR_INVALID_VALUE;
	return get_kernel(c, (void **)hfunc, hmod, name);
}

CUresult cuModuleGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod, const char *name)
{
	fe_conn *c;
	CUresult r = DRV_ENTER(&c);
	if (r)
		return r;
	if (!name || (!dptr && !bytes)) /* each is optional, not both (as the driver answers) */
		return CUDA_ERROR_INVALID_VALUE;
	return get_global(c, dptr, bytes, hmod, name);
}

/* The image's kernels, as the server's driver lists them (asked once per
 * image): their count, or (out) up to max records, made by name and resolved
 * only when used, as lazy loading does. */
static CUresult enumerate(fe_conn *c, unsigned *count, void **out, unsigned max, const void *h)
{
	int dev = fe_rt_current_device();
	fe_module_lock();
	fe_fatbin *fb = image_locked(h);
	int st = fb ? 0 : CUDA_ERROR_INVALID_HANDLE;
	if (fb && !fb->names)
		st = fe_image_names_locked(fb, dev, c, &fb->names);
	unsigned n = 0;
	for (char *p = st ? NULL : fb->names, *nl; p && *p && (!out || n < max); p = nl + 1, n++) {
		if (!(nl = strchr(p, '\n')))
			break;
		if (!out)
			continue;
		*nl = 0;
		fe_kernel *k = fe_image_kernel_locked(fb, p);
		if (!k)
			k = fe_image_add_kernel_locked(fb, p);
		*nl = '\n';
		if (!k) {
			st = CUDA_ERROR_OUT_OF_MEMORY;
			break;
		}
		out[n] = k;
	}
	fe_module_unlock();
	if (count)
		*count = n;
	return status_of(st);
}

CUresult cuModuleGetFunctionCount(unsigned int *count, CUmodule mod)
{
	fe_conn *c;
	CUresult r = DRV_ENTER(&c);
	if (r)
		return r;
	return count ? enumerate(c, count, NULL, 0, mod) : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuModuleEnumerateFunctions(CUfunction *functions, unsigned int numFunctions, CUmodule mod)
{
	fe_conn *c;
	CUresult r = DRV_ENTER(&c);
	if (r)
		return r;
	return functions ? enumerate(c, NULL, (void **)functions, numFunctions, mod) : CUDA_ERROR_INVALID_VALUE;
}

/* ---- libraries: images loaded in every context (device) that uses them */

/* The values may be NULL: CU_LIBRARY_BINARY_IS_PRESERVED takes none, and
 * cuBLASLt passes it so when it loads the CUTLASS cubins it unpacks. */
static CUresult library_options(unsigned n, CUlibraryOption *o, void **v, int from_file)
{
	(void)v;
	if (n && !o)
		return CUDA_ERROR_INVALID_VALUE;
	for (unsigned i = 0; i < n; i++) {
		if (o[i] == CU_LIBRARY_BINARY_IS_PRESERVED && !from_file)
			continue;
		if (o[i] == CU_LIBRARY_HOST_UNIVERSAL_FUNCTION_AND_DATA_TABLE)
			return unsupported("cuLibraryLoadData(CU_LIBRARY_HOST_UNIVERSAL_FUNCTION_AND_DATA_TABLE)");
		LOG_DEBUG("frontend", "%s: library option %d refused", from_file ? "cuLibraryLoadFromFile" : "cuLibraryLoadData",
			  (int)o[i]);
		return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions, void **jitOptionsValues,
			   unsigned int numJitOptions, CUlibraryOption *libraryOptions, void **libraryOptionValues,
			   unsigned int numLibraryOptions)
{
	CUresult r = fe_drv_jit_options(numJitOptions, jitOptions, jitOptionsValues);
	if (!r)
		r = library_options(numLibraryOptions, libraryOptions, libraryOptionValues, 0);
	return r ? r : load((void **)library, code, FE_IMAGE_LIBRARY);
}

CUresult cuLibraryLoadFromFile(CUlibrary *library, const char *fileName, CUjit_option *jitOptions,
			       void **jitOptionsValues, unsigned int numJitOptions, CUlibraryOption *libraryOptions,
			       void **libraryOptionValues, unsigned int numLibraryOptions)
{
	CUresult r = fe_drv_jit_options(numJitOptions, jitOptions, jitOptionsValues);
	if (!r)
		r = library_options(numLibraryOptions, libraryOptions, libraryOptionValues, 1);
	return r ? r : load_file((void **)library, fileName, FE_IMAGE_LIBRARY);
}

CUresult cuLibraryUnload(CUlibrary library) { return unload(library); }

/* A library and a module are one image record here, a CUkernel its CUfunction. */
CUresult cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
	return cuModuleGetFunction((CUfunction *)pKernel, (CUmodule)library, name);
}

CUresult cuLibraryGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUlibrary library, const char *name)
{
	return cuModuleGetGlobal(dptr, bytes, (CUmodule)library, name);
}

CUresult cuLibraryGetKernelCount(unsigned int *count, CUlibrary lib)
{
	return cuModuleGetFunctionCount(count, (CUmodule)lib);
}

CUresult cuLibraryEnumerateKernels(CUkernel *kernels, unsigned int numKernels, CUlibrary lib)
{
	return cuModuleEnumerateFunctions((CUfunction *)kernels, numKernels, (CUmodule)lib);
}

/* The module of a library in the current context: the same record. */
CUresult cuLibraryGetModule(CUmodule *pMod, CUlibrary library)
{
	if (!pMod)
		return CUDA_ERROR_INVALID_VALUE;
	fe_module_lock();
	fe_fatbin *fb = image_locked(library);
	fe_module_unlock();
	if (!fb)
		return CUDA_ERROR_INVALID_HANDLE;
	*pMod = (CUmodule)fb;
	return CUDA_SUCCESS;
}

/* ---- kernels and functions: one record */

/* The kernel record behind a CUfunction / CUkernel, NULL if it is none. */
static fe_kernel *kernel_of(const void *h) { return fe_kernel_valid(h) ? (fe_kernel *)h : NULL; }

/* k made usable on the current device (its image loaded there, its layout
 * known). */
static CUresult kernel_ready(fe_conn *c, fe_kernel *k)
{
	int dev = fe_rt_current_device();
	if (k->fb->loaded[dev] > 0 && (k->resolved >> dev & 1))
		return (CUresult)k->status[dev];
	fe_module_lock();
	int st = k->fb->unloaded ? CUDA_ERROR_INVALID_HANDLE : fe_image_resolve_locked(k->fb, dev, c, k, NULL);
	fe_module_unlock();
	return status_of(st ? st : k->status[dev]);
}

CUresult cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
	fe_conn *c;
	CUresult r = DRV_ENTER(&c);
	if (r)
		return r;
	fe_kernel *k = kernel_of(kernel);
	if (!pFunc)
		return CUDA_ERROR_INVALID_VALUE;
	if (!k)
		return CUDA_ERROR_INVALID_HANDLE;
	if ((r = kernel_ready(c, k)))
		return r;
	*pFunc = (CUfunction)k;
	return CUDA_SUCCESS;
}

CUresult cuKernelGetLibrary(CUlibrary *pLib, CUkernel kernel)
{
	fe_kernel *k = kernel_of(kernel);
	if (!pLib)
		return CUDA_ERROR_INVALID_VALUE;
	if (!k || k->fb->kind == FE_IMAGE_REGISTERED)
		return CUDA_ERROR_INVALID_HANDLE;
	*pLib = (CUlibrary)k->fb;
	return CUDA_SUCCESS;
}

CUresult cuFuncGetModule(CUmodule *hmod, CUfunction hfunc)
{
	fe_kernel *k = kernel_of(hfunc);
	if (!hmod)
		return CUDA_ERROR_INVALID_VALUE;
	if (!k)
		return CUDA_ERROR_INVALID_HANDLE;
	*hmod = (CUmodule)k->fb;
	return CUDA_SUCCESS;
}

static CUresult get_name(const char **name, const void *h)
{
	fe_kernel *k = kernel_of(h);
	if (!name)
		return CUDA_ERROR_INVALID_VALUE;
	if (!k)
		return CUDA_ERROR_INVALID_HANDLE;
	*name = k->name;
	return CUDA_SUCCESS;
}

CUresult cuFuncGetName(const char **name, CUfunction hfunc) { return get_name(name, hfunc); }
CUresult cuKernelGetName(const char **name, CUkernel hfunc) { return get_name(name, hfunc); }

/* A parameter's place in the kernel's parameter buffer, as the server read it
 * from the image when the kernel was resolved. */
static CUresult param_info(fe_conn *c, const void *h, size_t i, size_t *off, size_t *size)
{
	fe_kernel *k = kernel_of(h);
	if (!k)
		return CUDA_ERROR_INVALID_HANDLE;
	CUresult r = kernel_ready(c, k);
	if (r)
		return r;
	if (i >= k->nparams || (!off && !size))
		return CUDA_ERROR_INVALID_VALUE;
	if (off)
		*off = k->off[i];
	if (size)
		*size = k->size[i];
	return CUDA_SUCCESS;
}

CUresult cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t *paramOffset, size_t *paramSize)
{
	fe_conn *c;
	CUresult r = DRV_ENTER(&c);
	return r ? r : param_info(c, func, paramIndex, paramOffset, paramSize);
}

CUresult cuKernelGetParamInfo(CUkernel kernel, size_t paramIndex, size_t *paramOffset, size_t *paramSize)
{
	fe_conn *c;
	CUresult r = DRV_ENTER(&c);
	return r ? r : param_info(c, kernel, paramIndex, paramOffset, paramSize);
}

CUresult cuFuncIsLoaded(CUfunctionLoadingState *state, CUfunction function)
{
	fe_kernel *k = kernel_of(function);
	if (!state)
		return CUDA_ERROR_INVALID_VALUE;
	if (!k)
		return CUDA_ERROR_INVALID_HANDLE;
	int dev = fe_rt_current_device();
	int ok = k->fb->loaded[dev] > 0 && (k->resolved >> dev & 1) && k->status[dev] == 0;
	*state = ok ? CU_FUNCTION_LOADING_STATE_LOADED : CU_FUNCTION_LOADING_STATE_UNLOADED;
	return CUDA_SUCCESS;
}

CUresult cuFuncLoad(CUfunction function)
{
	fe_conn *c;
	CUresult r = DRV_ENTER(&c);
	if (r)
		return r;
	fe_kernel *k = kernel_of(function);
	return k ? kernel_ready(c, k) : CUDA_ERROR_INVALID_HANDLE;
}

/* ---- function attributes: the server's, asked once per kernel and device */

static CUresult func_attr(int *pi, CUfunction_attribute attrib, fe_kernel *k)
{
	fe_conn *c;
	CUresult r = DRV_ENTER(&c);
	if (r)
		return r;
	if (!pi || (int)attrib < 0 || attrib >= CU_FUNC_ATTRIBUTE_MAX)
		return CUDA_ERROR_INVALID_VALUE;
	if (!k)
		return CUDA_ERROR_INVALID_HANDLE;
	if ((r = kernel_ready(c, k)))
		return r;
	int dev = fe_rt_current_device();
	if ((r = FE_DRV(fe_kernel_attrs(k, c, dev))))
		return r;
	*pi = k->attrs[dev][attrib];
	return CUDA_SUCCESS;
}

CUresult cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
	return func_attr(pi, attrib, kernel_of(hfunc));
}

CUresult cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value)
{
	if (!kernel_of(hfunc))
		return CUDA_ERROR_INVALID_HANDLE;
	return FE_DRV(cudaFuncSetAttribute(hfunc, (enum cudaFuncAttribute)attrib, value));
}

CUresult cuFuncSetCacheConfig(CUfunction hfunc, CUfunc_cache config)
{
	if (!kernel_of(hfunc))
		return CUDA_ERROR_INVALID_HANDLE;
	return FE_DRV(cudaFuncSetCacheConfig(hfunc, (enum cudaFuncCache)config));
}

/* Bank size has been fixed at four bytes since Maxwell: nothing to set, as the
 * driver does on those devices. */
CUresult cuFuncSetSharedMemConfig(CUfunction hfunc, CUsharedconfig config)
{
	if (!kernel_of(hfunc))
		return CUDA_ERROR_INVALID_HANDLE;
	return (unsigned)config > CU_SHARED_MEM_CONFIG_EIGHT_BYTE_BANK_SIZE ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

/* A CUkernel's attribute on device dev: the call runs there. */
static int device_switch(CUdevice dev, int *saved)
{
	if (!fe_rt_device(dev))
		return 0;
	*saved = fe_rt_current_device();
	fe_rt_set_current_device(dev);
	return 1;
}

CUresult cuKernelGetAttribute(int *pi, CUfunction_attribute attrib, CUkernel kernel, CUdevice dev)
{
	int saved;
	if (!device_switch(dev, &saved))
		return CUDA_ERROR_INVALID_DEVICE;
	CUresult r = func_attr(pi, attrib, kernel_of(kernel));
	fe_rt_set_current_device(saved);
	return r;
}

CUresult cuKernelSetAttribute(CUfunction_attribute attrib, int val, CUkernel kernel, CUdevice dev)
{
	int saved;
	if (!kernel_of(kernel))
		return CUDA_ERROR_INVALID_HANDLE;
	if (!device_switch(dev, &saved))
		return CUDA_ERROR_INVALID_DEVICE;
	CUresult r = FE_DRV(cudaFuncSetAttribute(kernel, (enum cudaFuncAttribute)attrib, val));
	fe_rt_set_current_device(saved);
	return r;
}

CUresult cuKernelSetCacheConfig(CUkernel kernel, CUfunc_cache config, CUdevice dev)
{
	int saved;
	if (!kernel_of(kernel))
		return CUDA_ERROR_INVALID_HANDLE;
	if (!device_switch(dev, &saved))
		return CUDA_ERROR_INVALID_DEVICE;
	CUresult r = FE_DRV(cudaFuncSetCacheConfig(kernel, (enum cudaFuncCache)config));
	fe_rt_set_current_device(saved);
	return r;
}

/* ---- launches */

/* The `extra` list: the packed parameter buffer and its size. */
static CUresult extra_buffer(void **extra, const void **buf, size_t *len)
{
	int have_buf = 0, have_len = 0;
	*buf = NULL;
	*len = 0;
	for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
		if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) {
			*buf = extra[i + 1];
			have_buf = 1;
		} else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) {
			if (!extra[i + 1])
				return CUDA_ERROR_INVALID_VALUE;
			*len = *(size_t *)extra[i + 1];
			have_len = 1;
		} else {
			return CUDA_ERROR_INVALID_VALUE;
		}
	}
	if (have_buf != have_len || (have_buf && !*buf && *len))
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

static CUresult launch(fe_api_site site, fe_kernel *k, dim3 g, dim3 b, unsigned shmem, CUstream stream,
		       void **params, void **extra, const CUlaunchAttribute *attrs, unsigned nattrs)
{
	if (!k)
		return CUDA_ERROR_INVALID_HANDLE;
	if ((params && extra) || (nattrs && !attrs))
		return CUDA_ERROR_INVALID_VALUE;
	CUresult r;
	const void *buf = NULL;
	size_t len = 0;
	if (extra && (r = extra_buffer(extra, &buf, &len)))
		return r;
	/* packed: not NULL (an empty buffer for a kernel without parameters) */
	if (extra && !buf)
		buf = "";
	return FE_DRV(fe_kernel_launch_at(site, k, g, b, params, buf, len, shmem, (cudaStream_t)stream, attrs,
					  nattrs * sizeof(*attrs)));
}
/* Counted under the entry point (stats.h). */
#define launch(...) launch(FE_API_SITE, __VA_ARGS__)

CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
			unsigned int by, unsigned int bz, unsigned int shmem, CUstream stream, void **params, void **extra)
{
	return launch(kernel_of(f), (dim3){gx, gy, gz}, (dim3){bx, by, bz}, shmem, stream, params, extra, NULL, 0);
}

CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params, void **extra)
{
	if (!config)
		return CUDA_ERROR_INVALID_VALUE;
	return launch(kernel_of(f), (dim3){config->gridDimX, config->gridDimY, config->gridDimZ},
		      (dim3){config->blockDimX, config->blockDimY, config->blockDimZ}, config->sharedMemBytes,
		      config->hStream, params, extra, config->attrs, config->numAttrs);
}

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
				   unsigned int by, unsigned int bz, unsigned int shmem, CUstream stream, void **params)
{
	CUlaunchAttribute a;
	memset(&a, 0, sizeof(a));
	a.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
	a.value.cooperative = 1;
	return launch(kernel_of(f), (dim3){gx, gy, gz}, (dim3){bx, by, bz}, shmem, stream, params, NULL, &a, 1);
}

/* ---- occupancy: the server answers per block size; the searches over block
 * sizes and shared memory are made here, as the runtime's header does. */

static CUresult occupancy(int *n, fe_kernel *k, int block, size_t shmem, unsigned flags)
{
	return FE_DRV(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(n, k, block, shmem, flags));
}

CUresult cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *numBlocks, CUfunction func, int blockSize,
							      size_t dynamicSMemSize, unsigned int flags)
{
	fe_kernel *k = kernel_of(func);
	if (!numBlocks)
		return CUDA_ERROR_INVALID_VALUE;
	return k ? occupancy(numBlocks, k, blockSize, dynamicSMemSize, flags) : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, CUfunction func, int blockSize,
						     size_t dynamicSMemSize)
{
	return cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(numBlocks, func, blockSize, dynamicSMemSize, 0);
}

/* Cluster occupancy: the driver's launch configuration as the runtime's. */
static CUresult occupancy_clusters(int *out, CUfunction func, const CUlaunchConfig *config, int potential)
{
	fe_kernel *k = kernel_of(func);
	if (!out || !config)
		return CUDA_ERROR_INVALID_VALUE;
	if (!k)
		return CUDA_ERROR_INVALID_HANDLE;
	cudaLaunchConfig_t c = {
		.gridDim = {config->gridDimX, config->gridDimY, config->gridDimZ},
		.blockDim = {config->blockDimX, config->blockDimY, config->blockDimZ},
		.dynamicSmemBytes = config->sharedMemBytes,
		.stream = (cudaStream_t)config->hStream,
		.attrs = (cudaLaunchAttribute *)config->attrs,
		.numAttrs = config->numAttrs,
	};
	return potential ? FE_DRV(cudaOccupancyMaxPotentialClusterSize(out, k, &c))
			 : FE_DRV(cudaOccupancyMaxActiveClusters(out, k, &c));
}

CUresult cuOccupancyMaxActiveClusters(int *numClusters, CUfunction func, const CUlaunchConfig *config)
{
	return occupancy_clusters(numClusters, func, config, 0);
}

CUresult cuOccupancyMaxPotentialClusterSize(int *clusterSize, CUfunction func, const CUlaunchConfig *config)
{
	return occupancy_clusters(clusterSize, func, config, 1);
}

/* The block size with the most resident threads per multiprocessor, largest
 * first (fewest questions when the largest already fills the multiprocessor),
 * in steps of a warp. */
CUresult cuOccupancyMaxPotentialBlockSizeWithFlags(int *minGridSize, int *blockSize, CUfunction func,
						   CUoccupancyB2DSize blockSizeToDynamicSMemSize, size_t dynamicSMemSize,
						   int blockSizeLimit, unsigned int flags)
{
	fe_kernel *k = kernel_of(func);
	if (!minGridSize || !blockSize || blockSizeLimit < 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (!k)
		return CUDA_ERROR_INVALID_HANDLE;
	int func_max = 0;
	CUresult r = cuFuncGetAttribute(&func_max, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, func);
	if (r)
		return r;
	const struct cudaDeviceProp *p = &fe_rt_device(fe_rt_current_device())->prop;
	int warp = p->warpSize > 0 ? p->warpSize : 32;
	int limit = blockSizeLimit ? blockSizeLimit : p->maxThreadsPerBlock;
	if (limit > p->maxThreadsPerBlock)
		limit = p->maxThreadsPerBlock;
	if (limit > func_max)
		limit = func_max;
	int best_threads = 0, best_block = 0, best_blocks = 0;
	for (int aligned = (limit + warp - 1) / warp * warp; aligned > 0; aligned -= warp) {
		int block = aligned < limit ? aligned : limit, n = 0;
		size_t shmem = blockSizeToDynamicSMemSize ? blockSizeToDynamicSMemSize(block) : dynamicSMemSize;
		if ((r = occupancy(&n, k, block, shmem, flags)))
			return r;
		if (n * block > best_threads) {
			best_threads = n * block;
			best_block = block;
			best_blocks = n;
		}
		if (best_threads == p->maxThreadsPerMultiProcessor)
			break;
	}
	*minGridSize = best_blocks * p->multiProcessorCount;
	*blockSize = best_block;
	return CUDA_SUCCESS;
}

CUresult cuOccupancyMaxPotentialBlockSize(int *minGridSize, int *blockSize, CUfunction func,
					  CUoccupancyB2DSize blockSizeToDynamicSMemSize, size_t dynamicSMemSize,
					  int blockSizeLimit)
{
	return cuOccupancyMaxPotentialBlockSizeWithFlags(minGridSize, blockSize, func, blockSizeToDynamicSMemSize,
							 dynamicSMemSize, blockSizeLimit, CU_OCCUPANCY_DEFAULT);
}

/* The most dynamic shared memory per block that still lets numBlocks blocks
 * of blockSize threads reside on a multiprocessor: a bisection over the
 * server's occupancy answers, up to the kernel's dynamic shared memory limit. */
CUresult cuOccupancyAvailableDynamicSMemPerBlock(size_t *dynamicSmemSize, CUfunction func, int numBlocks,
						 int blockSize)
{
	fe_kernel *k = kernel_of(func);
	if (!dynamicSmemSize || numBlocks <= 0 || blockSize <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (!k)
		return CUDA_ERROR_INVALID_HANDLE;
	int max_dyn = 0, n = 0;
	CUresult r = cuFuncGetAttribute(&max_dyn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, func);
	if (r || (r = occupancy(&n, k, blockSize, 0, 0)))
		return r;
	if (n < numBlocks) {
		*dynamicSmemSize = 0;
		return CUDA_SUCCESS;
	}
	size_t lo = 0, hi = (size_t)max_dyn; /* occupancy at lo is enough */
	while (lo < hi) {
		size_t mid = lo + (hi - lo + 1) / 2;
		if ((r = occupancy(&n, k, blockSize, mid, 0)))
			return r;
		if (n >= numBlocks)
			lo = mid;
		else
			hi = mid - 1;
	}
	*dynamicSmemSize = lo;
	return CUDA_SUCCESS;
}
