/* Device management and queries: answered from the handshake, except the calls
 * that must reach the GPU (synchronize, memory info). */
#include <stdio.h>
#include <string.h>

#include "rg_log.h"
#include "rpc.h"
#include "rt.h"

static fe_device *device_or_fail(int ordinal, cudaError_t *e)
{
	*e = fe_rt_init();
	if (*e != cudaSuccess)
		return NULL;
	fe_device *d = fe_rt_device(ordinal);
	if (!d)
		*e = cudaErrorInvalidDevice;
	return d;
}

cudaError_t cudaGetDeviceCount(int *count)
{
	if (!count)
		return fe_rt_fail(cudaErrorInvalidValue);
	cudaError_t e = fe_rt_init();
	*count = e == cudaSuccess ? fe_rt_device_count() : 0;
	return fe_rt_fail(e);
}

cudaError_t cudaGetDevice(int *device)
{
	if (!device)
		return fe_rt_fail(cudaErrorInvalidValue);
	*device = fe_rt_current_device();
	return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
	cudaError_t e;
	if (!device_or_fail(device, &e))
		return fe_rt_fail(e);
	fe_rt_set_current_device(device);
	return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
	cudaError_t e;
	fe_device *d = device_or_fail(device, &e);
	if (!d || !prop)
		return fe_rt_fail(d ? cudaErrorInvalidValue : e);
	*prop = d->prop;
	return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
	cudaError_t e;
	fe_device *d = device_or_fail(device, &e);
	if (!d)
		return fe_rt_fail(e);
	if (!value || (int)attr <= 0 || (int)attr >= CU_DEVICE_ATTRIBUTE_MAX)
		return fe_rt_fail(cudaErrorInvalidValue);
	*value = fe_rt_device_attr(d, attr);
	return cudaSuccess;
}

cudaError_t cudaDeviceGetStreamPriorityRange(int *least, int *greatest)
{
	cudaError_t e;
	fe_device *d = device_or_fail(fe_rt_current_device(), &e);
	if (!d)
		return fe_rt_fail(e);
	if (least)
		*least = d->prio_least;
	if (greatest)
		*greatest = d->prio_greatest;
	return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char *pciBusId, int len, int device)
{
	cudaError_t e;
	fe_device *d = device_or_fail(device, &e);
	if (!d)
		return fe_rt_fail(e);
	if (!pciBusId || len <= 0)
		return fe_rt_fail(cudaErrorInvalidValue);
	snprintf(pciBusId, (size_t)len, "%s", d->pci_bus_id);
	return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *version)
{
	if (!version)
		return fe_rt_fail(cudaErrorInvalidValue);
	fe_device *d = fe_rt_device(0);
	*version = d ? d->driver_version : 0;
	return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *version)
{
	if (!version)
		return fe_rt_fail(cudaErrorInvalidValue);
	*version = CUDART_VERSION;
	return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	int st = fe_rpc_device_sync(c);
	if (st == 0)
		st = fe_conn_drain_detached(c);
	return fe_rt_leave(st);
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	uint64_t f = 0, t = 0;
	int st = fe_rpc_mem_get_info(c, &f, &t);
	if (st == 0) {
		if (free_bytes)
			*free_bytes = f;
		if (total_bytes)
			*total_bytes = t;
	}
	return fe_rt_leave(st);
}

cudaError_t cudaSetDeviceFlags(unsigned int flags)
{
	/* Scheduling flags (spin/yield/blocking-sync) concern the waiting host
	 * thread: the client always waits on its socket, so they change nothing. */
	return cudaSuccess;
}

cudaError_t cudaGetDeviceFlags(unsigned int *flags)
{
	if (!flags)
		return fe_rt_fail(cudaErrorInvalidValue);
	*flags = cudaDeviceScheduleAuto;
	return cudaSuccess;
}

/* Limits and the cache preference belong to the session's context on the
 * server; the runtime's and the driver's enums share their numbers. */
cudaError_t cudaDeviceSetLimit(enum cudaLimit limit, size_t value)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	return fe_rt_leave(fe_rpc_ctx_set_limit(c, (int32_t)limit, value));
}

cudaError_t cudaDeviceGetLimit(size_t *pValue, enum cudaLimit limit)
{
	if (!pValue)
		return fe_rt_fail(cudaErrorInvalidValue);
	fe_conn *c;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	uint64_t v = 0;
	int st = fe_rpc_ctx_get_limit(c, (int32_t)limit, &v);
	if (st == 0)
		*pValue = (size_t)v;
	return fe_rt_leave(st);
}

static _Atomic int cache_config[FE_MAX_DEVICES]; /* as last set: the driver has no cheaper source */

cudaError_t cudaDeviceSetCacheConfig(enum cudaFuncCache config)
{
	fe_conn *c;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	if ((int)config < cudaFuncCachePreferNone || (int)config > cudaFuncCachePreferEqual)
		return fe_rt_fail(cudaErrorInvalidValue);
	int st = fe_rpc_ctx_set_cache(c, (int32_t)config);
	int dev = fe_rt_current_device();
	if (st == 0 && dev >= 0 && dev < FE_MAX_DEVICES)
		cache_config[dev] = (int)config;
	return fe_rt_leave(st);
}

cudaError_t cudaDeviceGetCacheConfig(enum cudaFuncCache *pCacheConfig)
{
	if (!pCacheConfig)
		return fe_rt_fail(cudaErrorInvalidValue);
	fe_conn *c;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	int dev = fe_rt_current_device();
	*pCacheConfig = (enum cudaFuncCache)(dev >= 0 && dev < FE_MAX_DEVICES ? cache_config[dev] : 0);
	return cudaSuccess;
}

/* The device whose compute capability is closest at or above the one asked
 * for (else the highest); with no capability asked, the current device. */
cudaError_t cudaChooseDevice(int *device, const struct cudaDeviceProp *prop)
{
	if (!device || !prop)
		return fe_rt_fail(cudaErrorInvalidValue);
	fe_conn *c;
	cudaError_t e = fe_rt_enter(&c);
	if (e != cudaSuccess)
		return e;
	int n = fe_rt_device_count(), best = -1, best_cc = 0, want = prop->major * 10 + prop->minor;
	if (want <= 0) {
		*device = fe_rt_current_device();
		return cudaSuccess;
	}
	for (int i = 0; i < n; i++) {
		fe_device *d = fe_rt_device(i);
		if (!d)
			continue;
		int cc = d->prop.major * 10 + d->prop.minor;
		int better = best < 0 || (cc >= want && (best_cc < want || cc < best_cc)) || (best_cc < want && cc > best_cc);
		if (better) {
			best = i;
			best_cc = cc;
		}
	}
	if (best < 0)
		return fe_rt_fail(cudaErrorNoDevice);
	*device = best;
	return cudaSuccess;
}

/* Not through fe_rt_enter: a sticky error must not stop the call that clears it. */
cudaError_t cudaDeviceReset(void)
{
	cudaError_t e = fe_rt_init();
	if (e == cudaSuccess)
		e = fe_rt_reset_device(fe_rt_current_device());
	return e == cudaSuccess ? cudaSuccess : fe_rt_fail(e);
}
