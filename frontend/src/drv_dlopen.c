/*
 * dlopen("libcuda.so.1") -> libremote.so: PyTorch, Triton and the static CUDA
 * runtime open the driver by name; on a host with no driver, libremote.so is it.
 * So is it for NVML (libnvidia-ml.so.1, nvml_*.c), which torch, XLA and
 * monitoring tools open by name to count and describe the devices.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>

#include "rg_log.h"

static int has_stem(const char *base, const char *stem)
{
	size_t n = strlen(stem);
	return strncmp(base, stem, n) == 0 && (base[n] == 0 || base[n] == '.');
}

/* libcuda.so, libnvidia-ml.so and their versioned names, in any folder */
static int is_driver_name(const char *file)
{
	const char *base = strrchr(file, '/');
	base = base ? base + 1 : file;
	return has_stem(base, "libcuda.so") || has_stem(base, "libnvidia-ml.so");
}

/* glibc searches the RUNPATH of dlopen's caller (its return address): every
 * other library must reach the real dlopen by a tail call, which leaves the
 * program's return address in place, also in builds without optimisation. */
__attribute__((optimize("optimize-sibling-calls"))) void *dlopen(const char *file, int flags)
{
	static void *(*real_dlopen)(const char *, int);
	if (!real_dlopen)
		real_dlopen = (void *(*)(const char *, int))dlsym(RTLD_NEXT, "dlopen");
	if (file && is_driver_name(file)) {
		/* not &dlopen: that resolves to the first dlopen in the global scope,
		 * another interposer's (libasan's) when it is preloaded before us */
		Dl_info self;
		if (dladdr((void *)is_driver_name, &self) && self.dli_fname) {
			LOG_DEBUG("frontend", "dlopen(%s): the remote driver (%s)", file, self.dli_fname);
			return real_dlopen(self.dli_fname, flags);
		}
	}
	return real_dlopen(file, flags);
}

