/*
 * managed: cudaMallocManaged memory touched by the host and the device in
 * turn. Copies and memsets move bytes on the device side (they run on the
 * driver test double too); on a GPU, kernels read and write the memory as
 * well, the way tutorials use it (initialise on the host, launch, synchronise,
 * read on the host). Also: pointer attributes, prefetch and advice, invalid
 * arguments, and the memory back to its baseline after cudaFree.
 */
#include "rgtest.h"

__global__ void add(int n, const float *x, float *y)
{
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
		y[i] = x[i] + y[i];
}

__global__ void scale(int n, unsigned *v, unsigned k)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		v[i] = v[i] * k + (unsigned)i;
}

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

static void kernels(void)
{
	int n = 1 << 20;
	float *x, *y;
	CK(cudaMallocManaged(&x, n * sizeof(float)));
	CK(cudaMallocManaged(&y, n * sizeof(float)));
	for (int i = 0; i < n; i++) {
		x[i] = 1.0f;
		y[i] = 2.0f;
	}
	add<<<(n + 255) / 256, 256>>>(n, x, y);
	CK(cudaGetLastError());
	CK(cudaDeviceSynchronize());
	float maxerr = 0;
	for (int i = 0; i < n; i++)
		maxerr = fmaxf(maxerr, fabsf(y[i] - 3.0f));
	printf("add: max error %g\n", maxerr);

	/* several rounds of host and device writes to the same memory */
	unsigned *v;
	int m = 4099;
	CK(cudaMallocManaged(&v, m * sizeof(unsigned)));
	for (int i = 0; i < m; i++)
		v[i] = (unsigned)i;
	for (unsigned k = 2; k < 6; k++) {
		scale<<<(m + 127) / 128, 128>>>(m, v, k);
		CK(cudaDeviceSynchronize());
		v[k] += 1000u * k; /* a host write between launches */
	}
	printf("scale: fnv=%016llx\n", (unsigned long long)rg_fnv(v, m * sizeof(unsigned)));

	/* prefetching either way changes nothing but where the bytes are */
	cudaMemLocation dev = {cudaMemLocationTypeDevice, 0}, host = {cudaMemLocationTypeHost, 0};
	CK(cudaMemPrefetchAsync(v, m * sizeof(unsigned), dev, 0, 0));
	scale<<<(m + 127) / 128, 128>>>(m, v, 3);
	CK(cudaMemPrefetchAsync(v, m * sizeof(unsigned), host, 0, 0));
	CK(cudaDeviceSynchronize());
	printf("prefetch: fnv=%016llx\n", (unsigned long long)rg_fnv(v, m * sizeof(unsigned)));
	CK(cudaFree(x));
	CK(cudaFree(y));
	CK(cudaFree(v));
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

	if (!rg_fake())
		kernels();
	return rg_finish("managed");
}
