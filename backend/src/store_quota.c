/*
 * The per-tenant quota on uploaded kernel images. An upload that loaded is added
 * to the shared store (imgcache.c), where it stays for every later session: so
 * the bytes each tenant has put there are counted, and an upload that would pass
 * --store-quota is refused with CUDA_ERROR_OUT_OF_MEMORY (the program's module
 * load fails as when the device is full). Images an operator extracted with
 * remote-cubin count against nobody.
 *
 * The count lives in the store (cubin_store_tenant_*), shared by the session
 * processes of every server on that store. With --tenants the id is the
 * session's tenant name (tenants.c); without, the tenant is the one token: its
 * SHA-256, so the token is never written.
 */
#include "backend.h"

#include <string.h>

#include "cubin.h"
#include "cubin_store.h"
#include "tenants.h"

static void tenant_make(void);
static const char *tenant_id(void);

/* Without a store, uploads live only in this process: counted here. */
static struct {
	pthread_mutex_t mu;
	uint64_t used;
} Q = {PTHREAD_MUTEX_INITIALIZER};

static char tenant[CUBIN_HASH_HEX];

static void tenant_make(void)
{
	if (be_srv.token)
		cubin_hash(be_srv.token, strlen(be_srv.token), tenant);
	else
		strcpy(tenant, "anonymous");
}

static const char *tenant_id(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	const char *name = be_tenants_store_id();
	if (name)
		return name;
	pthread_once(&once, tenant_make);
	return tenant;
}

int be_quota_admits(uint64_t size)
{
	uint64_t used = 0;

	if (be_srv.store) {
		if (cubin_store_tenant_usage(be_srv.store, tenant_id(), &used) != CUBIN_OK)
			return 0;
	} else {
		pthread_mutex_lock(&Q.mu);
		used = Q.used;
		pthread_mutex_unlock(&Q.mu);
	}
	return size <= be_srv.store_quota && used <= be_srv.store_quota - size;
}

int be_quota_charge(const char *hash, uint64_t size)
{
	int r;

	if (be_srv.store) {
		r = cubin_store_tenant_charge(be_srv.store, tenant_id(), hash, size, be_srv.store_quota);
		if (r < 0)
			LOG_WARN(BE_LOG, "cubin store: cannot count an upload of %s: %s", hash, cubin_strerror(r));
		return r == 1 ? 0 : CUDA_ERROR_OUT_OF_MEMORY;
	}
	pthread_mutex_lock(&Q.mu);
	r = size <= be_srv.store_quota && Q.used <= be_srv.store_quota - size;
	if (r)
		Q.used += size;
	pthread_mutex_unlock(&Q.mu);
	return r ? 0 : CUDA_ERROR_OUT_OF_MEMORY;
}
