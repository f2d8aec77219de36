/* A map from host addresses (kernel stubs, variable shadows) to records: open
 * addressing with linear probing. PyTorch registers tens of thousands of kernels
 * at import, and a launch looks one up every time. */
#ifndef FE_PTRMAP_H
#define FE_PTRMAP_H

#include <stddef.h>

typedef struct fe_ptrmap {
	const void **keys;
	void **vals;
	size_t cap, n;
} fe_ptrmap;

int fe_ptrmap_put(fe_ptrmap *m, const void *key, void *val);
void *fe_ptrmap_get(const fe_ptrmap *m, const void *key);

#endif
