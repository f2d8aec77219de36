/*
 * Driver entry points by name: cuGetProcAddress (what the static CUDA runtime in
 * every library and nvcc-built program asks for ~480 functions with),
 * cudaGetDriverEntryPoint, and the answer for functions not implemented here.
 */
#include <string.h>

#include "drv.h"
#include "rg_log.h"
#include "rt.h"

/* The generated stubs jump here from assembly, which link-time optimisation
 * does not see: keep the symbol as it is. */
__attribute__((used, externally_visible, visibility("hidden"))) CUresult fe_drv_unsupported(const char *symbol)
{
	rg_log_once("frontend", "driver function not supported (not implemented by libremote.so)", symbol);
	return CUDA_ERROR_NOT_SUPPORTED;
}

/* First entry of name in the sorted table, or fe_drv_entries_n. */
static size_t first_of(const char *name)
{
	size_t lo = 0, hi = fe_drv_entries_n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (strcmp(fe_drv_entries[mid].name, name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < fe_drv_entries_n && strcmp(fe_drv_entries[lo].name, name) == 0 ? lo : fe_drv_entries_n;
}

void *fe_drv_proc(const char *name, int version, int per_thread, CUdriverProcAddressQueryResult *why)
{
	size_t i = first_of(name);
	if (i == fe_drv_entries_n) {
		*why = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
		return NULL;
	}
	/* The newest plain variant not newer than version; then its per-thread
	 * variant, if asked for: the one of that symbol. */
	const fe_drv_entry *best = NULL;
	for (; i < fe_drv_entries_n && strcmp(fe_drv_entries[i].name, name) == 0; i++) {
		const fe_drv_entry *e = &fe_drv_entries[i];
		if (!e->pt && e->version <= version && (!best || e->version > best->version))
			best = e;
	}
	if (!best) {
		*why = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
		return NULL;
	}
	if (per_thread) {
		size_t n = strlen(best->symbol);
		for (i = first_of(name); i < fe_drv_entries_n && strcmp(fe_drv_entries[i].name, name) == 0; i++) {
			const fe_drv_entry *e = &fe_drv_entries[i];
			if (e->pt && strncmp(e->symbol, best->symbol, n) == 0 && e->symbol[n] == '_' &&
			    strchr(e->symbol + n + 1, '_') == NULL) {
				best = e;
				break;
			}
		}
	}
	*why = CU_GET_PROC_ADDRESS_SUCCESS;
	return best->fn;
}

static int wants_per_thread(cuuint64_t flags)
{
	/* CU_GET_PROC_ADDRESS_DEFAULT is the legacy stream here: this library is
	 * not built for per-thread default streams. */
	return (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags,
			  CUdriverProcAddressQueryResult *status)
{
	CUdriverProcAddressQueryResult why;
	if (!symbol || !pfn)
		return CUDA_ERROR_INVALID_VALUE;
	if (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))
		return CUDA_ERROR_INVALID_VALUE;
	*pfn = fe_drv_proc(symbol, version, wants_per_thread(flags), &why);
	if (status)
		*status = why;
	if (!*pfn) {
		LOG_DEBUG("frontend", "cuGetProcAddress(%s, %d): %s", symbol, version,
			  why == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND ? "no such function" : "version not sufficient");
		return CUDA_ERROR_NOT_FOUND;
	}
	return CUDA_SUCCESS;
}

/* CUDA 11.3-11.8's cuGetProcAddress, without the status. */
CUresult fe_drv_get_proc_address_v1(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
	return cuGetProcAddress(symbol, pfn, version, flags, NULL);
}

cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **funcPtr, unsigned int cudaVersion,
					     unsigned long long flags, enum cudaDriverEntryPointQueryResult *driverStatus)
{
	CUdriverProcAddressQueryResult why;
	if (!symbol || !funcPtr)
		return fe_rt_fail(cudaErrorInvalidValue);
	*funcPtr = fe_drv_proc(symbol, (int)cudaVersion, (flags & cudaEnablePerThreadDefaultStream) != 0, &why);
	if (driverStatus)
		*driverStatus = why == CU_GET_PROC_ADDRESS_SUCCESS	     ? cudaDriverEntryPointSuccess
				: why == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND ? cudaDriverEntryPointSymbolNotFound
									      : cudaDriverEntryPointVersionNotSufficent;
	/* As CUDA does: an unknown symbol is reported in driverStatus, the call
	 * itself succeeds. */
	return cudaSuccess;
}

cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **funcPtr, unsigned long long flags,
				    enum cudaDriverEntryPointQueryResult *driverStatus)
{
	return cudaGetDriverEntryPointByVersion(symbol, funcPtr, CUDART_VERSION, flags, driverStatus);
}
