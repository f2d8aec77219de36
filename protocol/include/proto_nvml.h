/*
 * The queries of op nvml_query: what the client's NVML (frontend/src/nvml_*.c)
 * asks the server's NVML (backend/src/op_nvml.c) about the session's device.
 * Values travel in the reply's v0..v3 (and text), as listed per query; a value
 * the client already has from the handshake (name, UUID, PCI address, compute
 * capability) is never asked.
 */
#ifndef PROTO_NVML_H
#define PROTO_NVML_H

enum proto_nvml_query {
	PROTO_NVML_MEMORY = 1,       /* v0 total, v1 free, v2 used, v3 reserved (bytes) */
	PROTO_NVML_UTILIZATION = 2,  /* v0 gpu, v1 memory (percent) */
	PROTO_NVML_TEMPERATURE = 3,  /* arg sensor; v0 degrees C */
	PROTO_NVML_POWER = 4,        /* v0 milliwatts */
	PROTO_NVML_CLOCK = 5,        /* arg clock type; v0 MHz */
	PROTO_NVML_MAX_CLOCK = 6,    /* arg clock type; v0 MHz */
	PROTO_NVML_BAR1 = 7,         /* v0 total, v1 free, v2 used (bytes) */
	PROTO_NVML_PCIE_LINK = 8,    /* v0 current generation, v1 current width */
	PROTO_NVML_PCI_IDS = 9,      /* v0 pciDeviceId, v1 pciSubSystemId */
	PROTO_NVML_MINOR = 10,       /* v0 the minor number of /dev/nvidiaN */
	PROTO_NVML_PROCESS = 11,     /* v0 the GPU memory of the session's process; NOT_FOUND: none */
	PROTO_NVML_PERSISTENCE = 12, /* v0 nvmlEnableState_t */
	PROTO_NVML_COMPUTE_MODE = 13, /* v0 nvmlComputeMode_t */
	PROTO_NVML_MIG_MODE = 14,    /* v0 current, v1 pending */
	PROTO_NVML_DRIVER_VERSION = 15, /* text: the server's driver version ("580.65.06") */
	PROTO_NVML_NVML_VERSION = 16,   /* text: the server's NVML version */
	PROTO_NVML_FIELD = 17,  /* arg fieldId | scopeId << 16; text: the nvmlFieldValue_t NVML filled */
	PROTO_NVML_FABRIC = 18, /* arg the caller's nvmlGpuFabricInfoV_t version; text: the structure
				 * NVML filled (its size from the version, at most 95 bytes) */
};

#endif
