/* Kernels with the signatures of params.h (empty bodies: ptxas still describes
 * every parameter), plus one without parameters. */
#include <string.h>

#include "params.h"

#define PARAM(t, n) t n
#define DEFINE_KERNEL(name, LIST) extern "C" __global__ void name(LIST(PARAM, COMMA)) {}
KERNELS(DEFINE_KERNEL)

extern "C" __global__ void knone() {}

template <typename T> static T zero()
{
	T v;
	memset((void *)&v, 0, sizeof(v));
	return v;
}

/* Launching every kernel from host code also keeps it in a device-linked
 * (-rdc) image: nvlink drops kernels the host never launches. The registration
 * test's program calls this only when asked (it runs with no GPU). */
#define ZERO(t, n) zero<t>()
#define LAUNCH(name, LIST) name<<<1, 1>>>(LIST(ZERO, COMMA));
void params_launch_all()
{
	KERNELS(LAUNCH)
	knone<<<1, 1>>>();
}
