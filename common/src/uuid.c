#include "rg_uuid.h"

#include <stdio.h>

void rg_uuid_format(const uint8_t u[16], char out[RG_UUID_STR_LEN])
{
	snprintf(out, RG_UUID_STR_LEN, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
		 u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
}
