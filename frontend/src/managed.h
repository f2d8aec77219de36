/* Managed memory: device allocations mapped at the same address here, kept
 * coherent at the calls (managed.c has the rules). */
#ifndef FE_MANAGED_H
#define FE_MANAGED_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "conn.h"

/* cudaFree of managed memory: 0 or the server's status; -1 if p is not the
 * start of a managed allocation. */
int fe_managed_free(fe_conn *c, uintptr_t p);
/* cudaHostAlloc(cudaHostAllocMapped): a managed allocation, freed by cudaFreeHost. */
cudaError_t fe_managed_alloc_mapped(void **p, size_t size);
/* p lies in (start: begins) such an allocation. */
int fe_managed_mapped_host(const void *p, int start);
/* Some managed memory exists (one atomic load). */
int fe_managed_any(void);

#endif
