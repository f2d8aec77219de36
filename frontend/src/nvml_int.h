/*
 * NVML on the client: libremote.so answers libnvidia-ml.so.1 (drv_dlopen.c
 * sends dlopen of it here) with the remote devices, in the order of
 * REMOTE_GPU, as CUDA numbers them. What the handshake told (name, UUID, PCI
 * address, compute capability) is answered here; live values (memory,
 * utilization, temperature, power, clocks, this program's process) are asked
 * of the server's NVML (op nvml_query, nvml_live.c). Every other NVML function
 * answers NVML_ERROR_NOT_SUPPORTED and logs its name once (gen/nvml_stubs.c).
 *
 * nvml_init.c    init and shutdown, error strings, handle checks
 * nvml_system.c  versions, the device count, handles by index, UUID, PCI address
 * nvml_device.c  the static facts of a device
 * nvml_live.c    the values the server's NVML gives
 */
#ifndef FE_NVML_INT_H
#define FE_NVML_INT_H

#include <stddef.h>
#include <stdint.h>

#include "rg_nvml.h"
#include "rt.h"

/* A handle is the address of one of these (a fixed array, one per device), so
 * a handle stays valid across nvmlShutdown and nvmlInit, as NVML's do. */
struct nvmlDevice_st {
	int index;
};

/* NVML_ERROR_UNINITIALIZED outside nvmlInit .. nvmlShutdown. */
nvmlReturn_t fe_nvml_ready(void);
/* The device behind a handle: NVML_ERROR_INVALID_ARGUMENT for one that is not
 * ours (NULL, stale, forged). */
nvmlReturn_t fe_nvml_device(nvmlDevice_t h, fe_device **d);
nvmlDevice_t fe_nvml_handle(int index);
/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvmlDeviceGetUUID gives it. */
void fe_nvml_format_uuid(const fe_device *d, char out[NVML_DEVICE_UUID_BUFFER_SIZE]);
/* Copies s into a caller's buffer of len bytes: INSUFFICIENT_SIZE if it does not fit. */
nvmlReturn_t fe_nvml_copy_str(char *dst, unsigned len, const char *s);
/* The generated stubs' answer (gen/nvml_stubs.c). */
int fe_nvml_unsupported(const char *name);
/* One query of the server's NVML about h's device (proto_nvml.h). */
nvmlReturn_t fe_nvml_query(nvmlDevice_t h, uint32_t what, uint32_t arg, uint64_t v[4], char *text, size_t cap);

#endif
