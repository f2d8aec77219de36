/* rdma-core through dlopen: see rdma_lib.h for why. */
#include "rdma_lib.h"

#include <dlfcn.h>
#include <pthread.h>

#include "rg_log.h"
#include "transport.h"

rdma_lib tp_rdma_v;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int load_err;

static void load(void)
{
	/* The sonames of rdma-core's stable ABI (libibverbs.so.1 since 2006). */
	void *verbs = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_GLOBAL);
	void *cm = verbs ? dlopen("librdmacm.so.1", RTLD_NOW | RTLD_GLOBAL) : NULL;
	if (!verbs || !cm) {
		LOG_ERROR("transport", "rdma: cannot load %s (%s): install rdma-core (Debian: libibverbs1 "
			  "librdmacm1 ibverbs-providers)", verbs ? "librdmacm.so.1" : "libibverbs.so.1", dlerror());
		load_err = TRANSPORT_ENOTSUP;
		return;
	}
#define RDMA_LIB_LOAD(lib, field, sym)                                                              \
	if (!(tp_rdma_v.field = (__typeof__(tp_rdma_v.field))dlsym(lib, #sym))) {                                   \
		LOG_ERROR("transport", "rdma: %s not found in rdma-core (too old?)", #sym);         \
		load_err = TRANSPORT_ENOTSUP;                                                       \
		return;                                                                             \
	}
	RDMA_LIB_SYMBOLS(RDMA_LIB_LOAD)
#undef RDMA_LIB_LOAD
	/* The handles stay open for the life of the process: verbs contexts and
	 * the provider plugins live inside them. */
}

int tp_rdma_lib_load(void)
{
	pthread_once(&once, load);
	return load_err;
}
