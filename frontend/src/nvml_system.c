/*
 * NVML's system calls and the ways to a device handle. The devices are the
 * remote ones, in CUDA's order: index i is CUDA device i of this program.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "nvml_int.h"
#include "proto_nvml.h"

static nvmlReturn_t handle_by_index(unsigned int index, nvmlDevice_t *device);
static nvmlReturn_t handle_by_pci(const char *bus_id, nvmlDevice_t *device);
static nvmlReturn_t server_text(uint32_t what, char *out, unsigned int len);
static int parse_bus_id(const char *s, unsigned *domain, unsigned *bus, unsigned *dev);

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
	nvmlReturn_t r = fe_nvml_ready();
	if (r != NVML_SUCCESS)
		return r;
	if (!deviceCount)
		return NVML_ERROR_INVALID_ARGUMENT;
	*deviceCount = (unsigned)fe_rt_device_count();
	return NVML_SUCCESS;
}
/* the symbol programs built before NVML 5.319 call */
nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount);
nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount) { return nvmlDeviceGetCount_v2(deviceCount); }

static nvmlReturn_t handle_by_index(unsigned int index, nvmlDevice_t *device)
{
	nvmlReturn_t r = fe_nvml_ready();
	if (r != NVML_SUCCESS)
		return r;
	if (!device || index >= (unsigned)fe_rt_device_count())
		return NVML_ERROR_INVALID_ARGUMENT;
	*device = fe_nvml_handle((int)index);
	return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
	return handle_by_index(index, device);
}
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
	return handle_by_index(index, device);
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
	nvmlReturn_t r = fe_nvml_ready();
	if (r != NVML_SUCCESS)
		return r;
	if (!uuid || !device)
		return NVML_ERROR_INVALID_ARGUMENT;
	for (int i = 0; i < fe_rt_device_count(); i++) {
		char s[NVML_DEVICE_UUID_BUFFER_SIZE];
		fe_nvml_format_uuid(fe_rt_device(i), s);
		if (!strcasecmp(s, uuid)) {
			*device = fe_nvml_handle(i);
			return NVML_SUCCESS;
		}
	}
	return NVML_ERROR_NOT_FOUND;
}

/* "domain:bus:device.function" or "bus:device.function", hexadecimal. */
static int parse_bus_id(const char *s, unsigned *domain, unsigned *bus, unsigned *dev)
{
	unsigned fn;
	char end;
	*domain = 0;
	if (sscanf(s, "%x:%x:%x.%x%c", domain, bus, dev, &fn, &end) == 4)
		return 0;
	*domain = 0;
	return sscanf(s, "%x:%x.%x%c", bus, dev, &fn, &end) == 3 ? 0 : -1;
}

static nvmlReturn_t handle_by_pci(const char *bus_id, nvmlDevice_t *device)
{
	nvmlReturn_t r = fe_nvml_ready();
	if (r != NVML_SUCCESS)
		return r;
	unsigned domain, bus, dev;
	if (!bus_id || !device || parse_bus_id(bus_id, &domain, &bus, &dev))
		return NVML_ERROR_INVALID_ARGUMENT;
	for (int i = 0; i < fe_rt_device_count(); i++) {
		const fe_device *d = fe_rt_device(i);
		if ((unsigned)fe_rt_device_attr(d, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID) == domain &&
		    (unsigned)fe_rt_device_attr(d, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID) == bus &&
		    (unsigned)fe_rt_device_attr(d, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID) == dev) {
			*device = fe_nvml_handle(i);
			return NVML_SUCCESS;
		}
	}
	return NVML_ERROR_NOT_FOUND;
}
nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device)
{
	return handle_by_pci(pciBusId, device);
}
nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *pciBusId, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *pciBusId, nvmlDevice_t *device)
{
	return handle_by_pci(pciBusId, device);
}

/* The CUDA driver version the remote devices run (the first one's: CUDA too
 * reports one version for all). */
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion);
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion)
{
	nvmlReturn_t r = fe_nvml_ready();
	if (r != NVML_SUCCESS)
		return r;
	const fe_device *d = fe_rt_device(0);
	if (!cudaDriverVersion)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (!d)
		return NVML_ERROR_NOT_SUPPORTED;
	*cudaDriverVersion = d->driver_version;
	return NVML_SUCCESS;
}
nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion);
nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion)
{
	return nvmlSystemGetCudaDriverVersion_v2(cudaDriverVersion);
}

/* The first device's server answers for the system. */
static nvmlReturn_t server_text(uint32_t what, char *out, unsigned int len)
{
	nvmlReturn_t r = fe_nvml_ready();
	if (r != NVML_SUCCESS)
		return r;
	if (!out)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (fe_rt_device_count() == 0)
		return NVML_ERROR_NOT_SUPPORTED;
	uint64_t v[4];
	char text[96];
	if ((r = fe_nvml_query(fe_nvml_handle(0), what, 0, v, text, sizeof(text))) != NVML_SUCCESS)
		return r;
	return fe_nvml_copy_str(out, len, text);
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length);
nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
	return server_text(PROTO_NVML_DRIVER_VERSION, version, length);
}

nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length);
nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
	return server_text(PROTO_NVML_NVML_VERSION, version, length);
}
