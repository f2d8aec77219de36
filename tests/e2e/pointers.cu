/*
 * pointers: cudaPointerGetAttributes on device allocations (also interior and
 * stream-ordered ones), pinned, registered, pageable and stack memory, and
 * freed allocations; IPC handles.
 *
 * IPC is where the remote path differs from a GPU by design: libremote.so
 * answers cudaIpcGetMemHandle with an error (memory of a remote GPU cannot be
 * shared with another local process), while a local GPU succeeds. The program
 * checks the behaviour of its mode (REMOTE_GPU set or not) and prints the same
 * line in both.
 */
#include "rgtest.h"

static const char *type_name(cudaMemoryType t)
{
	switch (t) {
	case cudaMemoryTypeUnregistered: return "unregistered";
	case cudaMemoryTypeHost: return "host";
	case cudaMemoryTypeDevice: return "device";
	case cudaMemoryTypeManaged: return "managed";
	}
	return "?";
}

/* Prints the call's status, the memory type, and whether the pointers match. */
static void show(const char *label, const void *p, const void *want_dev, const void *want_host)
{
	cudaPointerAttributes a;
	memset(&a, 0x5c, sizeof a);
	cudaError_t e = cudaPointerGetAttributes(&a, p);
	if (e != cudaSuccess) {
		printf("%s: %s\n", label, cudaGetErrorName(e));
		cudaGetLastError();
		return;
	}
	printf("%s: type %s", label, type_name(a.type));
	if (a.type == cudaMemoryTypeDevice)
		printf(", device %d, devicePointer %s, hostPointer %s", a.device,
		       a.devicePointer == want_dev ? "matches" : "DIFFERS", a.hostPointer == NULL ? "null" : "set");
	if (a.type == cudaMemoryTypeHost)
		printf(", hostPointer %s", a.hostPointer == want_host ? "matches" : "DIFFERS");
	if (a.type == cudaMemoryTypeUnregistered)
		printf(", devicePointer %s, hostPointer %s", a.devicePointer == NULL ? "null" : "set",
		       a.hostPointer == NULL ? "null" : "set");
	printf("\n");
}

int main(void)
{
	CK(cudaSetDevice(0));
	char *d, *h, *r = (char *)malloc(1 << 20), *pg = (char *)malloc(4096), stack[64];
	CK(cudaMalloc(&d, 1 << 20));
	CK(cudaMallocHost(&h, 1 << 20));
	CK(cudaHostRegister(r, 1 << 20, cudaHostRegisterDefault));

	show("device allocation", d, d, NULL);
	show("device interior +100", d + 100, d + 100, NULL);
	show("device last byte", d + (1 << 20) - 1, d + (1 << 20) - 1, NULL);
	show("cudaMallocHost", h, NULL, h);
	show("cudaMallocHost interior +5", h + 5, NULL, h + 5);
	show("cudaHostRegister", r, NULL, r);
	show("pageable malloc", pg, NULL, NULL);
	show("stack", stack, NULL, NULL);

	cudaStream_t s;
	CK(cudaStreamCreate(&s));
	char *a = NULL;
	CK(cudaMallocAsync((void **)&a, 4096, s));
	CK(cudaStreamSynchronize(s));
	show("cudaMallocAsync", a, a, NULL);
	CK(cudaFreeAsync(a, s));
	CK(cudaStreamSynchronize(s));

	/* IPC */
	cudaIpcMemHandle_t mh;
	cudaError_t e = cudaIpcGetMemHandle(&mh, d);
	int ok = rg_remote() ? e != cudaSuccess : e == cudaSuccess;
	printf("ipc mem handle: %s\n", ok ? "as expected for this mode" : "UNEXPECTED");
	if (!ok) {
		fprintf(stderr, "cudaIpcGetMemHandle -> %s (remote=%d)\n", cudaGetErrorName(e), rg_remote());
		rg_failures++;
	}
	cudaGetLastError();
	cudaEvent_t ev;
	CK(cudaEventCreateWithFlags(&ev, cudaEventInterprocess | cudaEventDisableTiming));
	cudaIpcEventHandle_t eh;
	e = cudaIpcGetEventHandle(&eh, ev);
	ok = rg_remote() ? e != cudaSuccess : e == cudaSuccess;
	printf("ipc event handle: %s\n", ok ? "as expected for this mode" : "UNEXPECTED");
	if (!ok) {
		fprintf(stderr, "cudaIpcGetEventHandle -> %s (remote=%d)\n", cudaGetErrorName(e), rg_remote());
		rg_failures++;
	}
	cudaGetLastError();
	CK(cudaEventDestroy(ev));
	/* the device is still usable after the refused IPC calls */
	CK(cudaMemset(d, 1, 16));
	CK(cudaDeviceSynchronize());

	CK(cudaHostUnregister(r));
	show("after cudaHostUnregister", r, NULL, NULL);
	CK(cudaFree(d));
	show("freed device allocation", d, NULL, NULL);
	CK(cudaFreeHost(h));
	CK(cudaStreamDestroy(s));
	free(r);
	free(pg);
	return rg_finish("pointers");
}
