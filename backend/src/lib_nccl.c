/*
 * NCCL on the server: what api/nccl.api cannot say in a line. Everything else
 * (loading libnccl.so.2, the function table, handlers, the communicator table,
 * aborting what a session left) is generated into gen/lib_nccl.c on top of lib.c.
 *
 * Communicators span servers: ncclGetUniqueId runs here, so the id the client
 * carries to the other ranks names this server's bootstrap address, and the
 * servers talk NCCL's own transports to each other (NVLink, PCIe and shared
 * memory on one host, sockets or InfiniBand between hosts).
 *
 * What the other ranks see when a client dies: its session aborts its
 * communicators (ncclCommAbort, before the teardown waits for the GPU). Ranks
 * on other hosts lose their sockets to it, and ncclCommGetAsyncError answers
 * them ncclRemoteError or ncclSystemError. Ranks on the same host (NVLink, PCIe,
 * shared memory) are not told: a collective that waits for the dead rank waits
 * until their own program aborts it (PyTorch's watchdog does after its timeout,
 * TORCH_NCCL_ASYNC_ERROR_HANDLING). A session whose executor is inside a
 * blocking NCCL call that waits for a rank that never comes (ncclCommInitRank,
 * the first collective's connection to a peer) ends only when NCCL returns;
 * with process isolation (the default) that holds its own process only.
 */
#include "backend.h"

#include <stdlib.h>

#include "lib_nccl_gen.h"

int be_nccl_mode_residence(void *residence, int which)
{
	(void)which;
	return (intptr_t)residence == ncclScalarDevice;
}

/* A config from the client: its strings would be client addresses, and NCCL
 * reads `size` bytes of it. */
void be_nccl_fix_config(ncclConfig_t *c)
{
	if (c->size > sizeof(*c))
		c->size = sizeof(*c);
	c->netName = NULL;
	c->commName = NULL;
}

void be_nccl_env_defaults(void)
{
	/* NVLink SHARP (multicast) is off unless the operator asks for it: the
	 * lent machines forbid it, and a communicator that tries it fails. */
	if (setenv("NCCL_NVLS_ENABLE", "0", 0) != 0)
		LOG_WARN(BE_LOG, "cannot set NCCL_NVLS_ENABLE");
}
