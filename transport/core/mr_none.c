/* Memory registration of providers that need none (transport_int.h). */
#include <stdlib.h>

#include "transport_int.h"

int tp_reg_mem_none(transport_conn *c, void *addr, size_t len, transport_mr **out)
{
	transport_mr *mr = calloc(1, sizeof(*mr));
	*out = mr;
	if (!mr)
		return TRANSPORT_ENOMEM;
	mr->addr = addr;
	mr->len = len;
	return TRANSPORT_OK;
}

int tp_dereg_mem_none(transport_conn *c, transport_mr *mr)
{
	free(mr);
	return TRANSPORT_OK;
}
