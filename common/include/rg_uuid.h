/*
 * A GPU's 16-byte UUID as NVML and nvidia-smi print it:
 * "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (40 characters and a NUL).
 */
#ifndef RG_UUID_H
#define RG_UUID_H

#include <stdint.h>

#define RG_UUID_STR_LEN 41

void rg_uuid_format(const uint8_t u[16], char out[RG_UUID_STR_LEN]);

#endif
