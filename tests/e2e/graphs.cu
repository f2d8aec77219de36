/*
 * graphs: stream capture of kernels, a memset and a D2D copy into a graph,
 * cudaGraphInstantiate, and cudaGraphLaunch twice, checking results after
 * each launch. A second graph that only scales shows that each launch runs the
 * work again (x2 per launch).
 */
#include "rgtest.h"
#include "rgtest_kernels.cuh"

#define N (1u << 20)

int main(void)
{
	CK(cudaSetDevice(0));
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	float *p, *q, *h = (float *)malloc(N * 4);
	unsigned char *m;
	CK(cudaMalloc(&p, N * 4));
	CK(cudaMalloc(&q, N * 4));
	CK(cudaMalloc(&m, 4096));

	cudaStreamCaptureStatus st;
	CK(cudaStreamIsCapturing(s, &st));
	printf("capturing before begin: %d\n", (int)st);

	/* graph A: fill p with 2.0, scale by 1.5, memset m, copy p -> q */
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	CK(cudaStreamIsCapturing(s, &st));
	printf("capturing after begin: %d\n", (int)st);
	rgtest_fill_u32<<<rgtest_grid(N), 256, 0, s>>>((unsigned *)p, rg_f2u(2.0f), N);
	CK(cudaGetLastError());
	rgtest_scale_f32<<<rgtest_grid(N), 256, 0, s>>>(p, 1.5f, N);
	CK(cudaGetLastError());
	CK(cudaMemsetAsync(m, 0x3C, 4096, s));
	CK(cudaMemcpyAsync(q, p, N * 4, cudaMemcpyDeviceToDevice, s));
	cudaGraph_t ga;
	CK(cudaStreamEndCapture(s, &ga));
	CK(cudaStreamIsCapturing(s, &st));
	printf("capturing after end: %d\n", (int)st);
	size_t nodes = 0;
	CK(cudaGraphGetNodes(ga, NULL, &nodes));
	printf("graph A nodes: %zu\n", nodes);

	/* nothing ran during capture */
	CK(cudaMemset(q, 0, N * 4));
	CK(cudaDeviceSynchronize());

	cudaGraphExec_t xa;
	CK(cudaGraphInstantiate(&xa, ga, 0));
	for (int launch = 1; launch <= 2; launch++) {
		CK(cudaMemset(q, 0, N * 4)); /* cleared between launches */
		CK(cudaGraphLaunch(xa, s));
		CK(cudaStreamSynchronize(s));
		CK(cudaMemcpy(h, q, N * 4, cudaMemcpyDeviceToHost));
		char label[64];
		snprintf(label, sizeof label, "graph A launch %d: q", launch);
		rg_check_f32(label, h, N, 3.0f);
		unsigned char mh[4096];
		CK(cudaMemcpy(mh, m, 4096, cudaMemcpyDeviceToHost));
		int ok = 1;
		for (int i = 0; i < 4096; i++)
			ok &= mh[i] == 0x3C;
		printf("graph A launch %d: memset node %s\n", launch, ok ? "ok" : "MISMATCH");
		if (!ok)
			rg_failures++;
	}

	/* graph B: scale q by 2; each launch doubles it again */
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
	rgtest_scale_f32<<<rgtest_grid(N), 256, 0, s>>>(q, 2.0f, N);
	CK(cudaGetLastError());
	cudaGraph_t gb;
	CK(cudaStreamEndCapture(s, &gb));
	cudaGraphExec_t xb;
	CK(cudaGraphInstantiateWithFlags(&xb, gb, 0));
	CK(cudaGraphLaunch(xb, s));
	CK(cudaGraphLaunch(xb, s));
	CK(cudaStreamSynchronize(s));
	CK(cudaMemcpy(h, q, N * 4, cudaMemcpyDeviceToHost));
	rg_check_f32("graph B launched twice: q", h, N, 12.0f);

	/* a graph launched on the NULL stream, ordered with a plain copy */
	CK(cudaGraphLaunch(xa, 0));
	CK(cudaMemcpy(h, q, N * 4, cudaMemcpyDeviceToHost));
	rg_check_f32("graph A on NULL stream: q", h, N, 3.0f);

	CK(cudaGraphExecDestroy(xa));
	CK(cudaGraphExecDestroy(xb));
	CK(cudaGraphDestroy(ga));
	CK(cudaGraphDestroy(gb));
	CK(cudaStreamDestroy(s));
	CK(cudaFree(p));
	CK(cudaFree(q));
	CK(cudaFree(m));
	free(h);
	return rg_finish("graphs");
}
