/*
 * probe: prints the device's memory as cudaMemGetInfo reports it, one line:
 *   free=<bytes> total=<bytes>
 * The harnesses run it through the remote before and after other clients to
 * see that the server gave back everything a finished (or killed) client held.
 * It allocates nothing itself.
 */
#include "rgtest.h"

int main(void)
{
	size_t fr = 0, tot = 0;
	CK(cudaSetDevice(0));
	CK(cudaMemGetInfo(&fr, &tot));
	printf("free=%zu total=%zu\n", fr, tot);
	return 0;
}
