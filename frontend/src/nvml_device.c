/*
 * What NVML tells about a device that the handshake already told the client:
 * name, UUID, PCI address, index, compute capability; and what follows from
 * the devices being on other hosts (a peer-to-peer path only between devices of
 * one server, where its driver says so).
 * Nothing here crosses the wire, except the PCI ids that CUDA does not know.
 */
#include <stdio.h>
#include <string.h>

#include "nvml_int.h"
#include "proto_nvml.h"
#include "rg_uuid.h"

static nvmlReturn_t pci_info(nvmlDevice_t device, nvmlPciInfo_t *pci);
static nvmlReturn_t two_devices(nvmlDevice_t h1, nvmlDevice_t h2, const void *out, fe_device **a, fe_device **b);

void fe_nvml_format_uuid(const fe_device *d, char out[NVML_DEVICE_UUID_BUFFER_SIZE])
{
	_Static_assert(NVML_DEVICE_UUID_BUFFER_SIZE >= RG_UUID_STR_LEN, "room for a UUID");
	rg_uuid_format(d->uuid, out);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length);
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
	fe_device *d;
	nvmlReturn_t r = fe_nvml_device(device, &d);
	return r != NVML_SUCCESS ? r : fe_nvml_copy_str(name, length, d->name);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length);
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
	fe_device *d;
	nvmlReturn_t r = fe_nvml_device(device, &d);
	if (r != NVML_SUCCESS)
		return r;
	char s[NVML_DEVICE_UUID_BUFFER_SIZE];
	fe_nvml_format_uuid(d, s);
	return fe_nvml_copy_str(uuid, length, s);
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index);
nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
	fe_device *d;
	nvmlReturn_t r = fe_nvml_device(device, &d);
	if (r != NVML_SUCCESS)
		return r;
	if (!index)
		return NVML_ERROR_INVALID_ARGUMENT;
	*index = (unsigned)device->index;
	return NVML_SUCCESS;
}

/* The address from the handshake; the ids (device and vendor, subsystem) from
 * the server's NVML, 0 where it has none. */
static nvmlReturn_t pci_info(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
	fe_device *d;
	nvmlReturn_t r = fe_nvml_device(device, &d);
	if (r != NVML_SUCCESS)
		return r;
	if (!pci)
		return NVML_ERROR_INVALID_ARGUMENT;
	memset(pci, 0, sizeof(*pci));
	pci->domain = (unsigned)fe_rt_device_attr(d, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID);
	pci->bus = (unsigned)fe_rt_device_attr(d, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID);
	pci->device = (unsigned)fe_rt_device_attr(d, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID);
	snprintf(pci->busId, sizeof(pci->busId), "%08X:%02X:%02X.0", pci->domain, pci->bus, pci->device);
	snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "%04X:%02X:%02X.0", pci->domain & 0xffff, pci->bus & 0xff,
		 pci->device & 0xff);
	uint64_t v[4];
	if (fe_nvml_query(device, PROTO_NVML_PCI_IDS, 0, v, NULL, 0) == NVML_SUCCESS) {
		pci->pciDeviceId = (unsigned)v[0];
		pci->pciSubSystemId = (unsigned)v[1];
	}
	return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci);
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci) { return pci_info(device, pci); }
nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t *pci);
nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t *pci) { return pci_info(device, pci); }
/* v1 wrote the legacy form into busId */
nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t *pci);
nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
	nvmlReturn_t r = pci_info(device, pci);
	if (r == NVML_SUCCESS)
		snprintf(pci->busId, sizeof(pci->busId), "%s", pci->busIdLegacy);
	return r;
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor);
nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor)
{
	fe_device *d;
	nvmlReturn_t r = fe_nvml_device(device, &d);
	if (r != NVML_SUCCESS)
		return r;
	if (!major || !minor)
		return NVML_ERROR_INVALID_ARGUMENT;
	*major = fe_rt_device_attr(d, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
	*minor = fe_rt_device_attr(d, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
	return NVML_SUCCESS;
}

static nvmlReturn_t two_devices(nvmlDevice_t h1, nvmlDevice_t h2, const void *out, fe_device **a, fe_device **b)
{
	nvmlReturn_t r = fe_nvml_device(h1, a);
	if (r == NVML_SUCCESS)
		r = fe_nvml_device(h2, b);
	if (r == NVML_SUCCESS && !out)
		r = NVML_ERROR_INVALID_ARGUMENT;
	return r;
}

/* Reads and writes between two devices of one server: as its driver's
 * cudaDeviceCanAccessPeer says; devices of two servers have no peer path. The
 * other capabilities (NVLink, atomics) are not known here: not supported. */
nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t device1, nvmlDevice_t device2, int p2pIndex, int *p2pStatus);
nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t device1, nvmlDevice_t device2, int p2pIndex, int *p2pStatus)
{
	fe_device *a, *b;
	nvmlReturn_t r = two_devices(device1, device2, p2pIndex < 0 ? NULL : p2pStatus, &a, &b);
	if (r != NVML_SUCCESS)
		return r;
	int rw = p2pIndex == NVML_P2P_CAPS_INDEX_READ || p2pIndex == NVML_P2P_CAPS_INDEX_WRITE;
	*p2pStatus = rw && fe_peer_can(a->ordinal, b->ordinal) ? NVML_P2P_STATUS_OK
										 : NVML_P2P_STATUS_NOT_SUPPORTED;
	return NVML_SUCCESS;
}

/* Devices of different sessions meet only across the network: the widest
 * level NVML has. */
nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1, nvmlDevice_t device2, int *pathInfo);
nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1, nvmlDevice_t device2, int *pathInfo)
{
	fe_device *a, *b;
	nvmlReturn_t r = two_devices(device1, device2, pathInfo, &a, &b);
	if (r != NVML_SUCCESS)
		return r;
	*pathInfo = a == b ? NVML_TOPOLOGY_INTERNAL : NVML_TOPOLOGY_SYSTEM;
	return NVML_SUCCESS;
}
