/*
 * The one kernel of remote-bench: it does nothing, so a launch costs only the launch
 * path (runtime, and with libremote.so the encoding and the socket write). The loop
 * lives here so that the host code stays plain C.
 */
#include <cuda_runtime.h>

#include "bench.h"

__global__ void rb_empty(void)
{
}

extern "C" int rb_launch_empty(int n, void *stream)
{
	cudaStream_t s = (cudaStream_t)stream;
	for (int i = 0; i < n; i++)
		rb_empty<<<1, 1, 0, s>>>();
	return (int)cudaGetLastError();
}
