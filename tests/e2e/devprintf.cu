/*
 * devprintf: what kernels print with printf reaches this program's stdout at the
 * synchronisation points where the driver flushes it (a device, stream or event
 * synchronize, a blocking copy), between the host's own lines as a local run
 * prints them; a graph's kernel prints at each replay. Through libremote.so the
 * server's session process sends the text before the reply of the call that
 * synchronised (backend/src/devout.c).
 */
#include "rgtest.h"

/* Device printf of "rgtest_print_i32 <v>" from the first thread only. The
 * driver test double emulates it by name (tests/fakecuda/README.md): it writes
 * the same line at the next synchronisation. Not in rgtest_kernels.cuh: its
 * format string is a module global, which every program would load. */
extern "C" __global__ void rgtest_print_i32(int v)
{
	if (blockIdx.x == 0 && threadIdx.x == 0)
		printf("rgtest_print_i32 %d\n", v);
}

int main(void)
{
	CK(cudaSetDevice(0));
	cudaStream_t s;
	cudaEvent_t ev;
	int *d, h = 0;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaEventCreate(&ev));
	CK(cudaMalloc(&d, sizeof(int)));

	printf("host: start\n");
	rgtest_print_i32<<<1, 1>>>(1);
	CK(cudaGetLastError());
	CK(cudaDeviceSynchronize());
	printf("host: after device synchronize\n");

	rgtest_print_i32<<<1, 1, 0, s>>>(2);
	CK(cudaStreamSynchronize(s));
	printf("host: after stream synchronize\n");

	rgtest_print_i32<<<1, 1, 0, s>>>(3);
	CK(cudaEventRecord(ev, s));
	CK(cudaEventSynchronize(ev));
	printf("host: after event synchronize\n");

	rgtest_print_i32<<<1, 1>>>(4);
	CK(cudaMemcpy(&h, d, sizeof(int), cudaMemcpyDeviceToHost));
	printf("host: after a blocking copy\n");

	/* two kernels in a graph, replayed twice */
	cudaGraph_t g;
	cudaGraphExec_t x;
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	rgtest_print_i32<<<1, 1, 0, s>>>(5);
	rgtest_print_i32<<<1, 1, 0, s>>>(6);
	CK(cudaStreamEndCapture(s, &g));
	CK(cudaGraphInstantiate(&x, g, 0));
	CK(cudaGraphLaunch(x, s));
	CK(cudaGraphLaunch(x, s));
	CK(cudaStreamSynchronize(s));
	printf("host: after two replays\n");

	CK(cudaGraphExecDestroy(x));
	CK(cudaGraphDestroy(g));
	CK(cudaFree(d));
	CK(cudaEventDestroy(ev));
	CK(cudaStreamDestroy(s));
	printf("host: done\n");
	return 0;
}
