/*
 * managed: cudaMallocManaged memory touched by the host and the device in
 * turn: copies and memsets move bytes on the device side, so this runs on
 * the driver test double too (kernels on managed memory: examples/cuda/
 * unified_add.cu, on a GPU). Also pointer attributes, advice, invalid
 * arguments, and the memory back to its baseline after cudaFree.
 */
#include "rgtest.h"

static void check_bytes(const char *label, const unsigned char *got, const unsigned char *want, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (got[i] != want[i]) {
			fprintf(stderr, "%s: byte %zu: got %02x want %02x\n", label, i, got[i], want[i]);
			printf("%s: MISMATCH\n", label);
			rg_failures++;
			return;
		}
	printf("%s: ok fnv=%016llx\n", label, (unsigned long long)rg_fnv(got, n));
}

/* Host writes reach the device; device writes reach the host; and again. */
static void copies(size_t n)
{
	unsigned char *m, *d, *want = (unsigned char *)malloc(n), *got = (unsigned char *)malloc(n);
	char label[64];
	CK(cudaMallocManaged(&m, n));
	CK(cudaMalloc(&d, n));
	rg_pattern(m, n, n); /* the host writes first */
	memcpy(want, m, n);
	CK(cudaMemcpy(d, m, n, cudaMemcpyDefault)); /* device to device */
	CK(cudaMemcpy(got, d, n, cudaMemcpyDeviceToHost));
	snprintf(label, sizeof(label), "host->device %zu", n);
	check_bytes(label, got, want, n);

	/* the device writes: a memset in the middle, a copy at the start */
	size_t off = n / 3, len = n / 3 + 1;
	CK(cudaMemset(m + off, 0x5a, len));
	memset(want + off, 0x5a, len);
	rg_pattern(got, n / 4 + 1, n + 7);
	CK(cudaMemcpy(m, got, n / 4 + 1, cudaMemcpyHostToDevice));
	memcpy(want, got, n / 4 + 1);
	CK(cudaDeviceSynchronize());
	snprintf(label, sizeof(label), "device->host %zu", n);
	check_bytes(label, m, want, n); /* the host reads managed memory directly */

	/* the host writes again, after having read */
	for (size_t i = 0; i < n; i += 97)
		m[i] ^= 0xff, want[i] ^= 0xff;
	CK(cudaMemcpy(got, m, n, cudaMemcpyDeviceToHost)); /* the device's copy */
	snprintf(label, sizeof(label), "host again %zu", n);
	check_bytes(label, got, want, n);

	CK(cudaFree(m));
	CK(cudaFree(d));
	free(want);
	free(got);
}

int main(void)
{
	int attr = -1;
	CK(cudaDeviceGetAttribute(&attr, cudaDevAttrManagedMemory, 0));
	printf("managed memory attribute: %d\n", attr);

	copies(1);
	copies(4096);
	copies(3 * 4096 + 5);
	copies(5 << 20);

	int *p;
	CK(cudaMallocManaged(&p, 100, cudaMemAttachGlobal));
	struct cudaPointerAttributes a;
	CK(cudaPointerGetAttributes(&a, p + 3));
	printf("attributes: managed %d host==device %d\n", a.type == cudaMemoryTypeManaged,
	       a.hostPointer == a.devicePointer);
	cudaMemLocation dev = {cudaMemLocationTypeDevice, 0};
	CK(cudaMemAdvise(p, 100, cudaMemAdviseSetReadMostly, dev));
	int *q;
	rg_expect("size 0", cudaMallocManaged(&q, 0), cudaSuccess);
	rg_expect("bad flags", cudaMallocManaged(&q, 16, 7), cudaErrorInvalidValue);
	rg_expect("last error", cudaGetLastError(), cudaErrorInvalidValue); /* and cleared */
	CK(cudaFree(p));

	return rg_finish("managed");
}
