/*
 * NCCL on the client: the helpers api/nccl.api's lines name (lib_nccl.c). The
 * generated entry points (gen/lib_nccl.c) include this.
 */
#ifndef FE_LIB_NCCL_H
#define FE_LIB_NCCL_H

#include <stddef.h>

#include "lib.h"
#include "lib_nccl_gen.h"

/* Bytes of one value of an NCCL data type (ncclFloat32: 4); 0 if unknown. */
size_t fe_nccl_dtype_size(ncclDataType_t t);

#endif
