/*
 * mempools: memory pools the program makes (cudaMemPoolCreate): allocations
 * from them on a stream carry bytes (memset, copies), attributes set and read
 * back, used and reserved memory as relations that hold on a GPU (reserved
 * memory is rounded to the driver's granularity, so no sizes are printed), the
 * device's current pool (cudaDeviceSetMemPool: cudaMallocAsync takes from it;
 * destroying it brings back the default one), access, a pool destroyed with a
 * live allocation (which stays usable), and a pool with an allocation left for
 * the end of the process (the session's teardown on the server).
 *
 * Errors: the default pool cannot be destroyed; a bad allocation type. A pool
 * that exports handles (IPC: refused by the remote) and a destroyed pool's
 * handle (a dangling pointer for the real runtime) are used through the remote
 * only; a local run prints the lines the remote must print.
 */
#include "rgtest.h"

#define BIG ((1u << 20) + 100) /* bytes */

static unsigned char hin[BIG], hout[BIG];

static cudaMemPool_t make_pool(void)
{
	cudaMemPoolProps props;
	memset(&props, 0, sizeof props);
	props.allocType = cudaMemAllocationTypePinned;
	props.handleTypes = cudaMemHandleTypeNone;
	props.location.type = cudaMemLocationTypeDevice;
	props.location.id = 0;
	cudaMemPool_t pool = NULL;
	CK(cudaMemPoolCreate(&pool, &props));
	return pool;
}

static unsigned long long attr64(cudaMemPool_t pool, enum cudaMemPoolAttr a)
{
	unsigned long long v = 0;
	CK(cudaMemPoolGetAttribute(pool, a, &v));
	return v;
}

static int attr_int(cudaMemPool_t pool, enum cudaMemPoolAttr a)
{
	int v = -1;
	CK(cudaMemPoolGetAttribute(pool, a, &v));
	return v;
}

/* Bytes through p: a pattern up, copied within p, read back; a memset. */
static void bytes_through(const char *label, unsigned char *p, size_t n, cudaStream_t s)
{
	rg_pattern(hin, n, n);
	CK(cudaMemcpyAsync(p, hin, n / 2, cudaMemcpyHostToDevice, s));
	CK(cudaMemcpyAsync(p + n / 2, p, n / 2, cudaMemcpyDeviceToDevice, s));
	CK(cudaMemsetAsync(p + 2 * (n / 2), 0x5a, n - 2 * (n / 2), s));
	CK(cudaMemcpyAsync(hout, p, n, cudaMemcpyDeviceToHost, s));
	CK(cudaStreamSynchronize(s));
	int ok = memcmp(hout, hin, n / 2) == 0 && memcmp(hout + n / 2, hin, n / 2) == 0;
	for (size_t i = 2 * (n / 2); i < n; i++)
		ok &= hout[i] == 0x5a;
	printf("%s: %s fnv=%016llx\n", label, ok ? "ok" : "MISMATCH", (unsigned long long)rg_fnv(hout, n));
	if (!ok)
		rg_failures++;
}

int main(void)
{
	cudaStream_t s;
	cudaMemPool_t def = NULL, cur = NULL;
	CK(cudaSetDevice(0));
	CK(cudaStreamCreate(&s));
	CK(cudaDeviceGetDefaultMemPool(&def, 0));
	CK(cudaDeviceGetMemPool(&cur, 0));
	printf("current pool is the default: %d\n", cur == def);
	unsigned long long def_used = attr64(def, cudaMemPoolAttrUsedMemCurrent);

	/* a pool, its attributes */
	cudaMemPool_t pool = make_pool();
	printf("pool is not the default: %d\n", pool != def);
	unsigned long long thr = 64ull << 20;
	CK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &thr));
	int zero = 0;
	CK(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowOpportunistic, &zero));
	printf("release threshold: %llu\n", attr64(pool, cudaMemPoolAttrReleaseThreshold));
	printf("reuse opportunistic: %d\n", attr_int(pool, cudaMemPoolReuseAllowOpportunistic));
	struct cudaMemLocation loc;
	loc.type = cudaMemLocationTypeDevice;
	loc.id = 0;
	enum cudaMemAccessFlags acc = cudaMemAccessFlagsProtNone;
	CK(cudaMemPoolGetAccess(&acc, pool, &loc));
	printf("access from device 0: %d\n", (int)acc);

	/* an allocation from it, bytes through it */
	unsigned char *p = NULL;
	CK(cudaMallocFromPoolAsync((void **)&p, BIG, pool, s));
	bytes_through("from pool", p, BIG, s);
	printf("used >= allocated: %d\n", attr64(pool, cudaMemPoolAttrUsedMemCurrent) >= BIG);
	printf("reserved >= used: %d\n",
	       attr64(pool, cudaMemPoolAttrReservedMemCurrent) >= attr64(pool, cudaMemPoolAttrUsedMemCurrent));
	CK(cudaFreeAsync(p, s));
	CK(cudaStreamSynchronize(s));
	printf("after free: used %llu, used high >= allocated: %d\n", attr64(pool, cudaMemPoolAttrUsedMemCurrent),
	       attr64(pool, cudaMemPoolAttrUsedMemHigh) >= BIG);
	printf("kept below the threshold: %d\n", attr64(pool, cudaMemPoolAttrReservedMemCurrent) > 0);
	CK(cudaMemPoolTrimTo(pool, 0));
	printf("after trim(0): reserved %llu\n", attr64(pool, cudaMemPoolAttrReservedMemCurrent));
	unsigned long long z = 0;
	CK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &z));
	CK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &z));
	printf("highs after reset: used %llu, reserved %llu\n", attr64(pool, cudaMemPoolAttrUsedMemHigh),
	       attr64(pool, cudaMemPoolAttrReservedMemHigh));

	/* the device's current pool: cudaMallocAsync takes from it */
	CK(cudaDeviceSetMemPool(0, pool));
	CK(cudaDeviceGetMemPool(&cur, 0));
	printf("current pool is the new one: %d\n", cur == pool);
	CK(cudaMallocAsync((void **)&p, BIG, s));
	bytes_through("mallocasync from the current pool", p, BIG, s);
	printf("pool used >= allocated: %d, default pool used unchanged: %d\n",
	       attr64(pool, cudaMemPoolAttrUsedMemCurrent) >= BIG,
	       attr64(def, cudaMemPoolAttrUsedMemCurrent) == def_used);
	CK(cudaFreeAsync(p, s));
	CK(cudaStreamSynchronize(s));
	printf("used after free: %llu\n", attr64(pool, cudaMemPoolAttrUsedMemCurrent));
	EXPECT_ERR("destroy the current pool", cudaMemPoolDestroy(pool), cudaSuccess);
	CK(cudaDeviceGetMemPool(&cur, 0));
	printf("current pool is the default again: %d\n", cur == def);

	/* a pool destroyed with a live allocation: the memory stays usable */
	cudaMemPool_t pool2 = make_pool();
	unsigned char *q = NULL;
	CK(cudaMallocFromPoolAsync((void **)&q, 4096, pool2, s));
	CK(cudaStreamSynchronize(s));
	EXPECT_ERR("destroy a pool with a live allocation", cudaMemPoolDestroy(pool2), cudaSuccess);
	bytes_through("memory of the destroyed pool", q, 4096, s);
	EXPECT_ERR("free it", cudaFreeAsync(q, s), cudaSuccess);
	CK(cudaStreamSynchronize(s));

	/* errors */
	EXPECT_ERR("destroy the default pool", cudaMemPoolDestroy(def), cudaErrorInvalidValue);
	cudaGetLastError();
	cudaMemPoolProps bad;
	memset(&bad, 0, sizeof bad);
	bad.allocType = cudaMemAllocationTypeInvalid;
	bad.location.type = cudaMemLocationTypeDevice;
	cudaMemPool_t none = NULL;
	EXPECT_ERR("create with a bad allocation type", cudaMemPoolCreate(&none, &bad), cudaErrorInvalidValue);
	cudaGetLastError();
	if (rg_remote()) {
		cudaMemPoolProps ipc;
		memset(&ipc, 0, sizeof ipc);
		ipc.allocType = cudaMemAllocationTypePinned;
		ipc.handleTypes = cudaMemHandleTypePosixFileDescriptor;
		ipc.location.type = cudaMemLocationTypeDevice;
		EXPECT_ERR("create a pool that exports handles", cudaMemPoolCreate(&none, &ipc), cudaErrorNotSupported);
		EXPECT_ERR("allocate from a destroyed pool", cudaMallocFromPoolAsync((void **)&q, 64, pool, s),
			   cudaErrorInvalidResourceHandle);
		EXPECT_ERR("attribute of a destroyed pool", cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &z),
			   cudaErrorInvalidResourceHandle);
		EXPECT_ERR("make a destroyed pool current", cudaDeviceSetMemPool(0, pool2), cudaErrorInvalidResourceHandle);
		cudaGetLastError();
	} else {
		printf("create a pool that exports handles: cudaErrorNotSupported\n");
		printf("allocate from a destroyed pool: cudaErrorInvalidResourceHandle\n");
		printf("attribute of a destroyed pool: cudaErrorInvalidResourceHandle\n");
		printf("make a destroyed pool current: cudaErrorInvalidResourceHandle\n");
	}

	/* left for the end: a pool with an allocation in it */
	cudaMemPool_t pool3 = make_pool();
	CK(cudaMallocFromPoolAsync((void **)&q, BIG, pool3, s));
	bytes_through("a pool left for the end", q, BIG, s);
	CK(cudaStreamDestroy(s));
	return rg_finish("mempools");
}
