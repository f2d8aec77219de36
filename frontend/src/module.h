/*
 * Kernel images and what is named in them (rt_module.c): one record per image,
 * whether nvcc's start-up code registered it (__cudaRegisterFatBinary) or the
 * program loaded it through the driver API (drv_module.c: a CUmodule and a
 * CUlibrary are an image, a CUfunction and a CUkernel a kernel record). An
 * image is loaded on a device at its first use there, by content hash.
 */
#ifndef FE_MODULE_H
#define FE_MODULE_H

#include <stddef.h>
#include <stdint.h>

#include "cubin.h"
#include "rt.h"

typedef struct fe_fatbin fe_fatbin;

typedef struct fe_kernel {
	const void *host_fn; /* the host stub nvcc registered; NULL for the driver's */
	char *name;
	fe_fatbin *fb;
	struct fe_kernel *next_in_fb;
	/* per device, filled when the fatbin is loaded there */
	uint64_t func_id[FE_MAX_DEVICES];
	/* The id asked for in the load being sent: fresh for every load, since an
	 * image loaded again (cuModuleGetFunction of a new name) gets new server
	 * handles and the server refuses to reuse a live id. */
	uint64_t load_id;
	int status[FE_MAX_DEVICES];
	uint32_t resolved; /* devices whose status and func_id are filled */
	uint32_t nparams;
	uint32_t *off, *size;
	uint32_t param_size;
	int attrs_valid[FE_MAX_DEVICES];
	int32_t attrs[FE_MAX_DEVICES][CU_FUNC_ATTRIBUTE_MAX];
} fe_kernel;

typedef struct fe_var {
	const void *host_var; /* the shadow nvcc registered; NULL for the driver's */
	char *name;
	size_t size;
	fe_fatbin *fb;
	struct fe_var *next_in_fb;
	uint64_t dptr[FE_MAX_DEVICES];
	int status[FE_MAX_DEVICES];
	uint32_t resolved;
} fe_var;

enum fe_image_kind { FE_IMAGE_REGISTERED = 0, FE_IMAGE_MODULE = 1, FE_IMAGE_LIBRARY = 2 };

struct fe_fatbin {
	const void *data;
	size_t size;
	char hash[CUBIN_HASH_HEX];
	fe_kernel *kernels;
	fe_var *vars;
	int loaded[FE_MAX_DEVICES]; /* 0 not yet, 1 loaded, -1 failed (status in load_err) */
	int load_err[FE_MAX_DEVICES];
	uint64_t module_id[FE_MAX_DEVICES]; /* the server's module, while loaded */
	int kind;                           /* enum fe_image_kind */
	int owned;                          /* data is our copy */
	int unloaded;                       /* cuModuleUnload / cuLibraryUnload */
	char *names;                        /* its kernels' names, once asked for */
	struct fe_fatbin *next_image;
};

/* The lock over every image, kernel and variable record. */
void fe_module_lock(void);
void fe_module_unlock(void);
/* A new image record of the driver API (kind FE_IMAGE_MODULE or _LIBRARY) over
 * data, which must stay valid while the record lives; not loaded anywhere. */
fe_fatbin *fe_image_new(const void *data, size_t size, int kind);
/* Makes k (or v) usable on device dev (lock held): loads the image there if it
 * is not yet (with every kernel and variable it names so far), else resolves
 * this one name in the loaded module. 0, the driver's error, or <0 when the
 * channel broke. k->status[dev] / v->status[dev] says whether the name exists. */
int fe_image_resolve_locked(fe_fatbin *fb, int dev, fe_conn *c, fe_kernel *k, fe_var *v);
/* Whether p is an image record: a CUmodule / CUlibrary handle (lock held). */
int fe_image_valid_locked(const void *p);
/* The names of the image's kernels, one per line, as the server's driver lists
 * them (lock held; the image is loaded on dev first): *names malloc'd. */
int fe_image_names_locked(fe_fatbin *fb, int dev, fe_conn *c, char **names);
/* A kernel or variable record of the image by name (lock held), NULL if none. */
fe_kernel *fe_image_kernel_locked(fe_fatbin *fb, const char *name);
fe_var *fe_image_var_locked(fe_fatbin *fb, const char *name);
/* A new record for name in fb (lock held), NULL when out of memory. */
fe_kernel *fe_image_add_kernel_locked(fe_fatbin *fb, const char *name);
fe_var *fe_image_add_var_locked(fe_fatbin *fb, const char *name);
/* Whether p is a kernel record: a CUfunction / CUkernel handle. */
int fe_kernel_valid(const void *p);
/* The kernel record a runtime call's func names: a host stub nvcc registered,
 * or a kernel record itself (CUDA 12 takes a cudaKernel_t cast to func). */
fe_kernel *fe_kernel_of(const void *func);
/* k's attributes on device dev, asked once, then cached (k loaded there). */
cudaError_t fe_kernel_attrs(fe_kernel *k, fe_conn *c, int dev);
/* A launch of kernel record k (the driver's CUfunction: no second lookup) on
 * the current device, its arguments as pointers (args) or, with buf not NULL,
 * packed already (cuLaunchKernel's `extra`: len bytes, the parameter size),
 * with launch attributes as the wire carries them. Counted under the caller. */
cudaError_t fe_kernel_launch_at(fe_api_site site, fe_kernel *k, dim3 g, dim3 b, void **args, const void *buf,
				size_t len, size_t shmem, cudaStream_t stream, const void *attrs, size_t attrs_len);
#define fe_kernel_launch(...) fe_kernel_launch_at(FE_API_SITE, __VA_ARGS__)

#endif
