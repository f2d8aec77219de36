/*
 * fork: the parent uses CUDA, then forks. A child that uses CUDA either gets
 * its own working device (through libremote.so: a new connection of its own)
 * or a clean error (a local GPU: CUDA cannot be used in a child forked after
 * initialisation). Either way the parent's device state and channel must be
 * intact afterwards. A second child never touches CUDA and just exits (its exit
 * handlers must not close or write to the parent's channel).
 *
 * The child's outcome differs by mode, so it is reported only as clean or not;
 * the exit status of this program is nonzero if anything is wrong.
 */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rgtest.h"
#include "rgtest_kernels.cuh"

enum { N = 1 << 20 };

static int parent_check(unsigned *d, unsigned v)
{
	unsigned *h = (unsigned *)malloc(N * 4);
	rgtest_fill_u32<<<rgtest_grid(N), 256>>>(d, v, N);
	CK(cudaGetLastError());
	CK(cudaMemcpy(h, d, N * 4, cudaMemcpyDeviceToHost));
	int ok = 1;
	for (int i = 0; i < N; i++)
		ok &= h[i] == v;
	free(h);
	return ok;
}

/* In the child: 0 clean (worked or a clean error), 2 wrong data. */
static int child_body(void)
{
	alarm(30); /* a hang is a failure, not a stuck test */
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess) {
		fprintf(stderr, "fork child: cudaGetDeviceCount -> %s (clean error)\n", cudaGetErrorName(e));
		return 0;
	}
	unsigned *d = NULL;
	e = cudaMalloc(&d, N * 4);
	if (e != cudaSuccess) {
		fprintf(stderr, "fork child: cudaMalloc -> %s (clean error)\n", cudaGetErrorName(e));
		return 0;
	}
	unsigned *h = (unsigned *)malloc(N * 4);
	rgtest_fill_u32<<<rgtest_grid(N), 256>>>(d, 0xC41D, N);
	e = cudaMemcpy(h, d, N * 4, cudaMemcpyDeviceToHost);
	if (e != cudaSuccess) {
		fprintf(stderr, "fork child: cudaMemcpy -> %s (clean error)\n", cudaGetErrorName(e));
		return 0;
	}
	for (int i = 0; i < N; i++)
		if (h[i] != 0xC41D) {
			fprintf(stderr, "fork child: wrong data at %d: %08x\n", i, h[i]);
			return 2;
		}
	cudaFree(d);
	fprintf(stderr, "fork child: own device works\n");
	return 0;
}

static void run_child(const char *label, int use_cuda)
{
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	REQUIRE(pid >= 0, "fork failed");
	if (pid == 0)
		exit(use_cuda ? child_body() : 0); /* exit(), not _exit(): exit handlers run */
	int st = 0;
	REQUIRE(waitpid(pid, &st, 0) == pid, "waitpid");
	int clean = WIFEXITED(st) && WEXITSTATUS(st) == 0;
	printf("%s: %s\n", label, clean ? "clean" : "BAD");
	if (!clean) {
		if (WIFSIGNALED(st))
			fprintf(stderr, "%s: killed by signal %d\n", label, WTERMSIG(st));
		else
			fprintf(stderr, "%s: exit status %d\n", label, WEXITSTATUS(st));
		rg_failures++;
	}
}

int main(void)
{
	CK(cudaSetDevice(0));
	unsigned *d;
	CK(cudaMalloc(&d, N * 4));
	printf("parent before fork: %s\n", parent_check(d, 1) ? "ok" : "MISMATCH");

	run_child("child using CUDA", 1);
	int ok = parent_check(d, 2);
	printf("parent after child using CUDA: %s\n", ok ? "ok" : "MISMATCH");
	if (!ok)
		rg_failures++;

	run_child("child not using CUDA", 0);
	ok = parent_check(d, 3);
	printf("parent after child not using CUDA: %s\n", ok ? "ok" : "MISMATCH");
	if (!ok)
		rg_failures++;

	/* several children at once */
	fflush(stdout);
	pid_t kids[4];
	for (int i = 0; i < 4; i++) {
		kids[i] = fork();
		REQUIRE(kids[i] >= 0, "fork");
		if (kids[i] == 0)
			exit(child_body());
	}
	ok = parent_check(d, 4); /* the parent keeps working while they run */
	int clean = 1;
	for (int i = 0; i < 4; i++) {
		int st;
		waitpid(kids[i], &st, 0);
		clean &= WIFEXITED(st) && WEXITSTATUS(st) == 0;
	}
	printf("4 children at once: %s; parent meanwhile: %s\n", clean ? "clean" : "BAD", ok ? "ok" : "MISMATCH");
	if (!clean || !ok)
		rg_failures++;
	CK(cudaFree(d));
	return rg_finish("fork");
}
