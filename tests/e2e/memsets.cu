/*
 * memsets: cudaMemset, cudaMemsetAsync, cudaMemset2D(Async) at odd sizes and
 * unaligned offsets. Each case first fills the whole allocation with a known
 * pattern, sets a range, reads everything back and checks that exactly that
 * range changed (only the low byte of the value counts, as in CUDA). Pinned
 * memory as a memset's, a copy's and a kernel's device memory.
 */
#include "rgtest.h"
#include "rgtest_kernels.cuh"

#define MiB (1024ull * 1024)

static void check_set(const char *label, const unsigned char *got, const unsigned char *before,
                      size_t total, size_t off, size_t n, unsigned char v)
{
	for (size_t i = 0; i < total; i++) {
		unsigned char want = (i >= off && i < off + n) ? v : before[i];
		if (got[i] != want) {
			fprintf(stderr, "%s: byte %zu: got %02x want %02x\n", label, i, got[i], want);
			printf("%s: MISMATCH\n", label);
			rg_failures++;
			return;
		}
	}
	printf("%s: ok fnv=%016llx\n", label, (unsigned long long)rg_fnv(got, total));
}

static void linear(int async)
{
	static const size_t sizes[] = {0, 1, 3, 4097, MiB + 1};
	static const int offs[] = {0, 1, 3};
	static const int vals[] = {0x00, 0xA5, 0x1234};
	cudaStream_t s = 0;
	if (async)
		CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	for (int si = 0; si < 5; si++) {
		for (int oi = 0; oi < 3; oi++) {
			size_t n = sizes[si], total = n + 8;
			int off = offs[oi], v = vals[(si + oi) % 3];
			unsigned char *before = (unsigned char *)malloc(total), *got = (unsigned char *)malloc(total);
			unsigned char *d;
			CK(cudaMalloc(&d, total));
			rg_pattern(before, total, si * 3 + oi + (async ? 50 : 0));
			CK(cudaMemcpy(d, before, total, cudaMemcpyHostToDevice));
			/* a pageable cudaMemcpy may return before its DMA is done, and a
			 * non-blocking stream does not wait for it */
			CK(cudaDeviceSynchronize());
			if (async) {
				CK(cudaMemsetAsync(d + off, v, n, s));
				CK(cudaMemcpyAsync(got, d, total, cudaMemcpyDeviceToHost, s));
				CK(cudaStreamSynchronize(s));
			} else {
				CK(cudaMemset(d + off, v, n));
				CK(cudaMemcpy(got, d, total, cudaMemcpyDeviceToHost));
			}
			char label[96];
			snprintf(label, sizeof label, "%s size=%zu off=%d value=0x%x", async ? "memsetasync" : "memset", n,
			         off, v);
			check_set(label, got, before, total, off, n, (unsigned char)v);
			CK(cudaFree(d));
			free(before);
			free(got);
		}
	}
	if (async)
		CK(cudaStreamDestroy(s));
}

static void twod(int async)
{
	size_t w = 33, h = 17, pitch;
	unsigned char *d;
	CK(cudaMallocPitch(&d, &pitch, w + 5, h + 2));
	size_t total = pitch * (h + 2);
	unsigned char *before = (unsigned char *)malloc(total), *got = (unsigned char *)malloc(total);
	rg_pattern(before, total, async ? 91 : 90);
	CK(cudaMemcpy(d, before, total, cudaMemcpyHostToDevice));
	CK(cudaDeviceSynchronize());
	/* start at row 1, column 2 */
	unsigned char *base = d + pitch + 2;
	cudaStream_t s = 0;
	if (async) {
		CK(cudaStreamCreate(&s));
		CK(cudaMemset2DAsync(base, pitch, 0x5A, w, h, s));
		CK(cudaStreamSynchronize(s));
		CK(cudaStreamDestroy(s));
	} else {
		CK(cudaMemset2D(base, pitch, 0x5A, w, h));
	}
	CK(cudaMemcpy(got, d, total, cudaMemcpyDeviceToHost));
	/* compare row by row with the expected image (the pitch itself is not printed) */
	int bad = 0;
	for (size_t r = 0; r < h + 2 && !bad; r++)
		for (size_t c = 0; c < pitch; c++) {
			int inside = r >= 1 && r < 1 + h && c >= 2 && c < 2 + w;
			unsigned char want = inside ? 0x5A : before[r * pitch + c];
			if (got[r * pitch + c] != want) {
				fprintf(stderr, "memset2d row %zu col %zu: got %02x want %02x\n", r, c, got[r * pitch + c], want);
				bad = 1;
				break;
			}
		}
	/* checksum of the w x h window only: independent of the pitch */
	unsigned char *win = (unsigned char *)malloc(w * h);
	for (size_t r = 0; r < h; r++)
		memcpy(win + r * w, got + (r + 1) * pitch + 2, w);
	if (bad) {
		rg_failures++;
		printf("%s 33x17 value=0x5a: MISMATCH\n", async ? "memset2dasync" : "memset2d");
	} else {
		printf("%s 33x17 value=0x5a: ok fnv=%016llx\n", async ? "memset2dasync" : "memset2d",
		       (unsigned long long)rg_fnv(win, w * h));
	}
	free(win);
	free(before);
	free(got);
	CK(cudaFree(d));
}

/* Pinned and registered host memory: a local GPU reaches it at its host
 * address (unified addressing), so memsets on it are legal. The synchronous
 * ones are done when they return; the asynchronous ones keep the stream's
 * order (a copy into the buffer before the memset, on the same stream). */
static void pinned(void)
{
	const size_t n = 4096;
	uint8_t *h, *d, *want = (uint8_t *)malloc(n), *reg = (uint8_t *)malloc(n);
	CK(cudaMallocHost((void **)&h, n));
	CK(cudaMalloc((void **)&d, n));
	CK(cudaMemset(d, 0x77, n));
	CK(cudaDeviceSynchronize());
	memset(h, 0x01, n);
	memset(want, 0x01, n);
	CK(cudaMemset(h + 100, 0x5a, 1000)); /* done on return: no synchronisation */
	memset(want + 100, 0x5a, 1000);
	int ok = !memcmp(h, want, n);
	cudaStream_t s;
	CK(cudaStreamCreate(&s));
	CK(cudaMemcpyAsync(h, d, 2048, cudaMemcpyDeviceToHost, s));
	CK(cudaMemsetAsync(h + 1024, 0x22, 512, s));
	CK(cudaMemset2DAsync(h + 3000, 64, 0x33, 10, 5, s));
	CK(cudaStreamSynchronize(s));
	memset(want, 0x77, 2048);
	memset(want + 1024, 0x22, 512);
	for (int r = 0; r < 5; r++)
		memset(want + 3000 + 64 * r, 0x33, 10);
	ok = ok && !memcmp(h, want, n);
	printf("memset pinned: %s fnv=%016llx\n", ok ? "ok" : "MISMATCH", (unsigned long long)rg_fnv(h, n));
	if (!ok)
		rg_failures++;

	memset(reg, 0x02, n);
	CK(cudaHostRegister(reg, n, cudaHostRegisterDefault));
	CK(cudaMemsetAsync(reg + 8, 0x44, 16, s));
	CK(cudaStreamSynchronize(s));
	memset(want, 0x02, n);
	memset(want + 8, 0x44, 16);
	ok = !memcmp(reg, want, n);
	printf("memset registered: %s\n", ok ? "ok" : "MISMATCH");
	if (!ok)
		rg_failures++;
	CK(cudaHostUnregister(reg));
	CK(cudaStreamDestroy(s));
	CK(cudaFreeHost(h));
	CK(cudaFree(d));
	free(reg);
	free(want);
}

/* Pinned memory named as a copy's device side (XLA reads 8-byte results out of
 * pinned buffers with cuMemcpyDtoHAsync): with unified addressing the GPU
 * reaches it, and the copy keeps the stream's order (after the memset). */
static void pinned_as_device(void)
{
	const size_t n = 64;
	uint8_t *h, *out, *d, back[64], want[64];
	CK(cudaMallocHost((void **)&h, n));
	CK(cudaMallocHost((void **)&out, n));
	CK(cudaMalloc((void **)&d, n));
	memset(out, 0, n);
	cudaStream_t s;
	CK(cudaStreamCreate(&s));
	CK(cudaMemsetAsync(h, 0x3c, n, s));
	CK(cudaMemcpyAsync(out, h, n, cudaMemcpyDeviceToHost, s));    /* pinned to pinned */
	CK(cudaMemcpyAsync(d, h, n, cudaMemcpyDeviceToDevice, s));     /* pinned to device */
	CK(cudaMemsetAsync(d + 8, 0x5d, 8, s));
	CK(cudaMemcpyAsync(h, d, n, cudaMemcpyDeviceToDevice, s));     /* device to pinned */
	CK(cudaStreamSynchronize(s));
	CK(cudaMemcpy(back, h + 4, 16, cudaMemcpyDeviceToHost));       /* synchronous, to the stack */
	memset(want, 0x3c, n);
	int ok = !memcmp(out, want, n);
	memset(want + 8, 0x5d, 8);
	ok = ok && !memcmp(h, want, n) && !memcmp(back, want + 4, 16);
	printf("copy pinned as device side: %s\n", ok ? "ok" : "MISMATCH");
	if (!ok)
		rg_failures++;
	CK(cudaStreamDestroy(s));
	CK(cudaFreeHost(h));
	CK(cudaFreeHost(out));
	CK(cudaFree(d));
}

/* A few pinned bytes a kernel writes through the host address (XLA's
 * autotuner's redzone result): a local GPU reaches all pinned memory, so the
 * kernel's write is legal; the host reads it after a stream synchronisation;
 * memsets, copies out of it and kernels keep the stream's order. cudaHostAlloc(Portable) is cuMemHostAlloc's path. Through
 * the remote such small pinned memory is mapped by default
 * (REMOTE_GPU_MAPPED_PINNED_MAX, 4095). */
static void pinned_kernel_write(int portable)
{
	const char *name = portable ? "cudaHostAlloc(Portable)" : "cudaMallocHost";
	unsigned *h, out1[2] = {9, 9}, out2[2] = {9, 9};
	if (portable)
		CK(cudaHostAlloc((void **)&h, 8, cudaHostAllocPortable));
	else
		CK(cudaMallocHost((void **)&h, 8));
	struct cudaPointerAttributes a;
	CK(cudaPointerGetAttributes(&a, h));
	printf("8-byte %s: type %d, hostPointer %s\n", name, (int)a.type, a.hostPointer == h ? "matches" : "DIFFERS");
	cudaStream_t s;
	CK(cudaStreamCreate(&s));
	CK(cudaMemsetAsync(h, 0, 8, s));
	rgtest_fill_u32<<<1, 32, 0, s>>>(h, 0xc0ffee, 1);
	CK(cudaGetLastError());
	CK(cudaMemcpyAsync(out1, h, 8, cudaMemcpyDeviceToHost, s));
	CK(cudaMemsetAsync(h, 0x11, 8, s));
	CK(cudaMemcpyAsync(out2, h, 8, cudaMemcpyDeviceToHost, s));
	rgtest_fill_u32<<<1, 32, 0, s>>>(h + 1, 0xbeef, 1);
	CK(cudaStreamSynchronize(s));
	int ok = out1[0] == 0xc0ffee && out1[1] == 0 && out2[0] == 0x11111111 && out2[1] == 0x11111111 &&
		 h[0] == 0x11111111 && h[1] == 0xbeef;
	printf("8-byte %s written by a kernel: %s\n", name, ok ? "ok" : "MISMATCH");
	if (!ok) {
		fprintf(stderr, "%x %x / %x %x / %x %x\n", out1[0], out1[1], out2[0], out2[1], h[0], h[1]);
		rg_failures++;
	}
	CK(cudaStreamDestroy(s));
	CK(cudaFreeHost(h));
}

int main(void)
{
	CK(cudaSetDevice(0));
	linear(0);
	linear(1);
	twod(0);
	twod(1);
	pinned();
	pinned_as_device();
	pinned_kernel_write(0);
	pinned_kernel_write(1);
	return rg_finish("memsets");
}
