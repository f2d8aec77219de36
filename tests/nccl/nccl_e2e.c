/*
 * End-to-end test of NCCL forwarding: a plain C program linked with NVIDIA's
 * libnccl and libcudart, run with LD_PRELOAD=libremote.so against remote-gpud on
 * the test doubles (tests/fakecuda, tests/fakenccl). Run by run_nccl.sh, which
 * also checks what it prints:
 *
 *   expect nccl LINE            LINE is in the fake's call log ($FAKENCCL_LOG),
 *                               these lines in this order, byte for byte
 *   expect-teardown nccl LINE   appears once the program has exited (the server
 *                               aborted what the session left alive)
 *   expect-count nccl N TEXT    exactly N lines of the log contain TEXT
 *   (stderr) ...: check failed  a check of a result or a status failed
 *
 * Covered: every forwarded function with its arguments as the library saw them
 * (pointers, counts, data types, operators, roots, peers, communicators,
 * streams, configs), the unique id's 128 bytes both ways, group calls in order,
 * a collective on a capturing stream, data through the one-rank collectives,
 * statuses (the server's for unknown communicators, the library's at once for
 * sync calls and latched for async ones, ncclInProgress of a nonblocking init),
 * the answers given on the client, and a communicator left for the teardown.
 *
 *   nccl_e2e                          the test
 *   nccl_e2e --free                   prints the device's free memory only
 *   nccl_e2e --hold FILE              makes a communicator, writes FILE, sleeps
 *                                     (the caller kills it)
 *   nccl_e2e --rank R --idfile FILE   rank R of 2: rank 0 writes its unique id's
 *                                     bytes to FILE, rank 1 reads them; both
 *                                     init and all-reduce
 */
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "check.h" /* tests/unit: failed checks go to stderr */

#define FN_VERSION 22899          /* tests/fakenccl/nccl.c */
#define FN_ASYNC_FAIL_COUNT 0xfa11

static int nserial; /* the fake's communicator serials, in this process's server */
#define OK(x) CHECK_EQ((x), 0)
#define E(...) (printf("expect nccl " __VA_ARGS__), printf("\n"))

static cudaStream_t stream; /* priority -3: the fake logs it as prio:-3 */

/* The first 12 bytes of an id in hex, as the fake logs them. */
typedef struct idtxt {
	char s[25];
} idtxt;

static idtxt idhex(const ncclUniqueId *id)
{
	idtxt t;
	for (int i = 0; i < 12; i++)
		snprintf(t.s + 2 * i, 3, "%02x", (unsigned char)id->internal[i]);
	return t;
}

static void *dalloc(size_t n)
{
	void *p = NULL;
	OK(cudaMalloc(&p, n));
	return p;
}

static ncclComm_t init1(ncclUniqueId *id)
{
	ncclComm_t c = NULL;
	OK(ncclGetUniqueId(id));
	E("ncclGetUniqueId id=%s", idhex(id).s);
	CHECK_EQ((unsigned char)id->internal[127], 0x7f);
	OK(ncclCommInitRank(&c, 1, *id, 0));
	E("ncclCommInitRank new=comm#%d nranks=1 id=%s last=7f rank=0 = 0", ++nserial, idhex(id).s);
	return c;
}

static void sync_ok(void) { OK(cudaStreamSynchronize(stream)); }

/* ---- collectives: arguments as the library saw them; data with one rank ---- */

static void collectives(ncclComm_t c, int cn)
{
	float h[4] = {1, 2, 3, 4}, got[4] = {0};
	float *a = dalloc(sizeof(h)), *b = dalloc(sizeof(h));
	OK(cudaMemcpy(a, h, sizeof(h), cudaMemcpyHostToDevice));
	OK(cudaMemset(b, 0, sizeof(h)));

	OK(ncclAllReduce(a, b, 4, ncclFloat32, ncclSum, c, stream));
	E("ncclAllReduce sendbuff=%p recvbuff=%p count=4 datatype=7 op=0 comm=comm#%d stream=prio:-3 = 0", (void *)a,
	  (void *)b, cn);
	sync_ok();
	OK(cudaMemcpy(got, b, sizeof(got), cudaMemcpyDeviceToHost));
	CHECK(!memcmp(got, h, sizeof(h)));

	OK(ncclBroadcast(a, b, 3, ncclFloat16, 0, c, stream));
	E("ncclBroadcast sendbuff=%p recvbuff=%p count=3 datatype=6 root=0 comm=comm#%d stream=prio:-3 = 0", (void *)a,
	  (void *)b, cn);
	OK(ncclBcast(b, 2, ncclInt64, 0, c, NULL));
	E("ncclBcast buff=%p count=2 datatype=4 root=0 comm=comm#%d stream=null = 0", (void *)b, cn);
	OK(ncclReduce(a, b, 4, ncclFloat32, ncclMax, 0, c, stream));
	E("ncclReduce sendbuff=%p recvbuff=%p count=4 datatype=7 op=2 root=0 comm=comm#%d stream=prio:-3 = 0",
	  (void *)a, (void *)b, cn);
	OK(ncclAllGather(a, b, 1, ncclBfloat16, c, stream));
	E("ncclAllGather sendbuff=%p recvbuff=%p count=1 datatype=9 comm=comm#%d stream=prio:-3 = 0", (void *)a,
	  (void *)b, cn);
	OK(ncclReduceScatter(a, b, 2, ncclFloat64, ncclAvg, c, stream));
	E("ncclReduceScatter sendbuff=%p recvbuff=%p count=2 datatype=8 op=4 comm=comm#%d stream=prio:-3 = 0",
	  (void *)a, (void *)b, cn);
	OK(ncclAlltoAll(a, b, 4, ncclUint8, c, stream));
	E("ncclAlltoAll sendbuff=%p recvbuff=%p count=4 datatype=1 comm=comm#%d stream=prio:-3 = 0", (void *)a,
	  (void *)b, cn);
	OK(ncclGather(a, b, 2, ncclInt32, 0, c, stream));
	E("ncclGather sendbuff=%p recvbuff=%p count=2 datatype=2 root=0 comm=comm#%d stream=prio:-3 = 0", (void *)a,
	  (void *)b, cn);
	OK(ncclScatter(a, b, 2, ncclUint32, 0, c, stream));
	E("ncclScatter sendbuff=%p recvbuff=%p count=2 datatype=3 root=0 comm=comm#%d stream=prio:-3 = 0", (void *)a,
	  (void *)b, cn);

	/* a group: framed on the server in the client's order, nested too */
	OK(ncclGroupStart());
	OK(ncclGroupStart());
	OK(ncclSend(a, 4, ncclFloat32, 0, c, stream));
	OK(ncclRecv(b, 4, ncclFloat32, 0, c, stream));
	OK(ncclGroupEnd());
	OK(ncclAllReduce(b, b, 4, ncclFloat32, ncclMin, c, stream));
	OK(ncclGroupEnd());
	E("ncclGroupStart depth=1");
	E("ncclGroupStart depth=2");
	E("ncclSend sendbuff=%p count=4 datatype=7 peer=0 comm=comm#%d stream=prio:-3 = 0", (void *)a, cn);
	E("ncclRecv recvbuff=%p count=4 datatype=7 peer=0 comm=comm#%d stream=prio:-3 = 0", (void *)b, cn);
	E("ncclGroupEnd depth=1 = 0");
	E("ncclAllReduce sendbuff=%p recvbuff=%p count=4 datatype=7 op=3 comm=comm#%d stream=prio:-3 = 0", (void *)b,
	  (void *)b, cn);
	E("ncclGroupEnd depth=0 = 0");

	/* premultiplied sums: the scalar's bytes (host) or its address (device) */
	ncclRedOp_t op = ncclSum, op2 = ncclSum;
	float half = 0.5f;
	OK(ncclRedOpCreatePreMulSum(&op, &half, ncclFloat32, ncclScalarHostImmediate, c));
	CHECK_EQ(op, ncclNumOps);
	E("ncclRedOpCreatePreMulSum op=5 scalar=h:0000003f datatype=7 residence=1 comm=comm#%d = 0", cn);
	OK(ncclRedOpCreatePreMulSum(&op2, a, ncclFloat32, ncclScalarDevice, c));
	CHECK_EQ(op2, ncclNumOps + 1);
	E("ncclRedOpCreatePreMulSum op=6 scalar=d:%p datatype=7 residence=0 comm=comm#%d = 0", (void *)a, cn);
	OK(ncclAllReduce(a, b, 4, ncclFloat32, op, c, stream));
	E("ncclAllReduce sendbuff=%p recvbuff=%p count=4 datatype=7 op=5 comm=comm#%d stream=prio:-3 = 0", (void *)a,
	  (void *)b, cn);
	OK(ncclRedOpDestroy(op, c));
	E("ncclRedOpDestroy op=5 comm=comm#%d = 0", cn);
	OK(ncclRedOpDestroy(op2, c));
	E("ncclRedOpDestroy op=6 comm=comm#%d = 0", cn);

	/* a collective on a stream being captured: the server's NCCL sees it capturing */
	cudaGraph_t g = NULL;
	OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
	OK(ncclAllReduce(a, b, 4, ncclFloat32, ncclSum, c, stream));
	OK(cudaStreamEndCapture(stream, &g));
	E("ncclAllReduce sendbuff=%p recvbuff=%p count=4 datatype=7 op=0 comm=comm#%d stream=prio:-3+capturing = 0",
	  (void *)a, (void *)b, cn);
	if (g)
		OK(cudaGraphDestroy(g));
	sync_ok();
	OK(cudaFree(a));
	OK(cudaFree(b));
}

/* ---- statuses ---- */

static void statuses(ncclComm_t c, int cn)
{
	ncclComm_t bogus = (ncclComm_t)(uintptr_t)0x7777;
	int n = -1;
	ncclResult_t ae = ncclSuccess;
	float *a = dalloc(64);

	/* sync calls: the server's answer for an unknown communicator, at once */
	CHECK_EQ(ncclCommUserRank(bogus, &n), ncclInvalidArgument);
	CHECK_EQ(ncclCommCount(c, &n), ncclSuccess);
	CHECK_EQ(n, 1);
	OK(ncclCommUserRank(c, &n));
	CHECK_EQ(n, 0);
	OK(ncclCommCuDevice(c, &n));
	CHECK_EQ(n, 0);
	CHECK_EQ(ncclCommCuDevice(bogus, &n), ncclInvalidArgument);

	/* async: accepted, latched, returned by the next sync call, once */
	OK(ncclAllReduce(a, a, 4, ncclFloat32, ncclSum, bogus, stream));
	CHECK_EQ(ncclCommCount(c, &n), ncclInvalidArgument);
	OK(ncclCommCount(c, &n));
	/* the library's own refusal of an async call: latched the same way */
	OK(ncclAllReduce(a, a, 4, (ncclDataType_t)99, ncclSum, c, stream));
	E("ncclAllReduce sendbuff=%p recvbuff=%p count=4 datatype=99 op=0 comm=comm#%d stream=prio:-3 = 4", (void *)a,
	  (void *)a, cn);
	OK(ncclGroupEnd()); /* no group started: ncclInvalidUsage, latched */
	E("ncclGroupEnd depth=0 = 5");
	CHECK_EQ(ncclCommUserRank(c, &n), ncclInvalidArgument); /* the first latched one */
	OK(ncclCommUserRank(c, &n));

	/* an asynchronous error of the communicator: ncclCommGetAsyncError's output */
	OK(ncclAllReduce(a, a, FN_ASYNC_FAIL_COUNT, ncclFloat32, ncclSum, c, stream));
	OK(ncclCommGetAsyncError(c, &ae));
	CHECK_EQ(ae, ncclRemoteError);
	CHECK_EQ(ncclCommGetAsyncError(bogus, &ae), ncclInvalidArgument);

	/* a unique id the library did not make: its status, at once */
	ncclUniqueId zero;
	ncclComm_t none = NULL;
	memset(&zero, 0, sizeof(zero));
	CHECK_EQ(ncclCommInitRank(&none, 1, zero, 0), ncclInvalidArgument);
	CHECK(none == NULL);

	/* answered on the client */
	int v = 0;
	OK(ncclGetVersion(&v));
	CHECK_EQ(v, FN_VERSION);
	OK(ncclGetVersion(&v));
	CHECK_EQ(v, FN_VERSION);
	CHECK(!strcmp(ncclGetErrorString(ncclInvalidArgument), "invalid argument"));
	CHECK(ncclGetLastError(c) != NULL);
	void *p = NULL;
	CHECK_EQ(ncclMemAlloc(&p, 4096), ncclInvalidUsage);
	CHECK_EQ(ncclCommRegister(c, a, 64, &p), ncclInvalidUsage);
	OK(cudaFree(a));
}

/* ---- configs, splits, shrinks, the scalable init, releases ---- */

static void comms(ncclComm_t c, int cn)
{
	ncclUniqueId id, ids[2];
	ncclComm_t nb = NULL, oc = NULL, s = NULL, none = (ncclComm_t)(uintptr_t)1, sh = NULL, sc = NULL, all = NULL;
	ncclResult_t ae = ncclSuccess;

	/* nonblocking: ncclInProgress delivers the communicator; the strings stay home */
	OK(ncclGetUniqueId(&id));
	E("ncclGetUniqueId id=%s", idhex(&id).s);
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	cfg.blocking = 0;
	cfg.cgaClusterSize = 2;
	cfg.minCTAs = 4;
	cfg.maxCTAs = 8;
	cfg.netName = "eth9";
	cfg.commName = "mine";
	CHECK_EQ(ncclCommInitRankConfig(&nb, 1, id, 0, &cfg), ncclInProgress);
	CHECK(nb != NULL);
	int nbn = ++nserial;
	E("ncclCommInitRankConfig new=comm#%d nranks=1 id=%s last=7f rank=0 size=%zu blocking=0 cga=2 minCTAs=4 "
	  "maxCTAs=8 splitShare=%d netName=null commName=null last=%d = 0",
	  nbn, idhex(&id).s, sizeof(cfg), INT_MIN, INT_MIN);
	OK(ncclCommGetAsyncError(nb, &ae));
	CHECK_EQ(ae, ncclInProgress);
	OK(ncclCommGetAsyncError(nb, &ae));
	CHECK_EQ(ae, ncclSuccess);

	/* an older program's smaller config: what it lacks keeps the initializer's values */
	ncclConfig_t old = NCCL_CONFIG_INITIALIZER;
	old.size = offsetof(ncclConfig_t, collnetEnable);
	old.splitShare = 1;
	old.nvlinkCentricSched = 77; /* past its size: not read */
	OK(ncclCommInitRankConfig(&oc, 1, id, 0, &old));
	E("ncclCommInitRankConfig new=comm#%d nranks=1 id=%s last=7f rank=0 size=%zu blocking=%d cga=%d minCTAs=%d "
	  "maxCTAs=%d splitShare=1 netName=null commName=null last=%d = 0",
	  ++nserial, idhex(&id).s, offsetof(ncclConfig_t, collnetEnable), INT_MIN, INT_MIN, INT_MIN, INT_MIN,
	  INT_MIN);
	OK(ncclCommDestroy(oc));

	OK(ncclCommSplit(c, 3, 9, &s, &old));
	CHECK(s != NULL);
	int sn = ++nserial;
	E("ncclCommSplit comm=comm#%d color=3 key=9 new=comm#%d config=set = 0", cn, sn);
	OK(ncclCommSplit(c, NCCL_SPLIT_NOCOLOR, 0, &none, NULL));
	CHECK(none == NULL);
	E("ncclCommSplit comm=comm#%d color=%d key=0 new=none config=null = 0", cn, NCCL_SPLIT_NOCOLOR);

	int excl[2] = {5, 7};
	OK(ncclCommShrink(c, excl, 2, &sh, NULL, NCCL_SHRINK_ABORT));
	E("ncclCommShrink comm=comm#%d exclude=[5,7] new=comm#%d config=null flags=1 = 0", cn, ++nserial);

	OK(ncclGetUniqueId(&ids[0]));
	OK(ncclGetUniqueId(&ids[1]));
	OK(ncclCommInitRankScalable(&sc, 1, 0, 2, ids, NULL));
	E("ncclCommInitRankScalable nId=2 last_id=%s", idhex(&ids[1]).s);
	E("ncclCommInitRankScalable new=comm#%d nranks=1 id=%s last=7f rank=0 = 0", ++nserial, idhex(&ids[0]).s);

	/* one device: an id and a one-rank init (counted in main) */
	OK(ncclCommInitAll(&all, 1, NULL));
	++nserial;
	CHECK_EQ(ncclCommInitAll(&all, 2, NULL), ncclInvalidUsage);

	OK(ncclCommFinalize(nb));
	E("ncclCommFinalize comm=comm#%d", nbn);
	OK(ncclCommRevoke(s, 0));
	E("ncclCommRevoke comm=comm#%d flags=0", sn);
	OK(ncclCommDestroy(nb));
	E("ncclCommDestroy comm=comm#%d", nbn);
	OK(ncclCommAbort(s));
	E("ncclCommAbort comm=comm#%d", sn);
	OK(ncclCommDestroy(sh));
	OK(ncclCommDestroy(sc));
	OK(ncclCommDestroy(all));
	/* released: the server no longer knows them */
	CHECK_EQ(ncclCommDestroy(nb), ncclInvalidArgument);
	int n;
	CHECK_EQ(ncclCommCount(s, &n), ncclInvalidArgument);
}

static size_t free_mem(void)
{
	size_t f = 0, t = 0;
	OK(cudaMemGetInfo(&f, &t));
	return f;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static int hold(const char *file)
{
	ncclUniqueId id;
	ncclComm_t c = init1(&id);
	float *a = dalloc(64);
	OK(ncclAllReduce(a, a, 16, ncclFloat32, ncclSum, c, stream));
	sync_ok();
	FILE *f = fopen(file, "w");
	if (!f || atomic_load(&check_failed_))
		return 1;
	fprintf(f, "ready\n");
	fclose(f);
	for (;;)
		sleep_ms(1000);
}

static int two_ranks(int rank, const char *file)
{
	ncclUniqueId id;
	ncclComm_t c = NULL;
	if (rank == 0) {
		OK(ncclGetUniqueId(&id));
		char tmp[256];
		snprintf(tmp, sizeof(tmp), "%s.tmp", file);
		FILE *f = fopen(tmp, "w");
		if (!f || fwrite(&id, sizeof(id), 1, f) != 1)
			return 1;
		fclose(f);
		if (rename(tmp, file) != 0)
			return 1;
	} else {
		FILE *f = NULL;
		for (int i = 0; i < 500 && !(f = fopen(file, "r")); i++)
			sleep_ms(10);
		if (!f || fread(&id, sizeof(id), 1, f) != 1)
			return 1;
		fclose(f);
	}
	OK(ncclCommInitRank(&c, 2, id, rank));
	printf("id=%s last=%02x\n", idhex(&id).s, (unsigned char)id.internal[127]);
	float *a = dalloc(64);
	OK(ncclAllReduce(a, a, 16, ncclFloat32, ncclSum, c, stream));
	int n = -1;
	OK(ncclCommUserRank(c, &n));
	CHECK_EQ(n, rank);
	OK(ncclCommDestroy(c));
	OK(cudaFree(a));
	return check_summary("nccl_e2e rank");
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1 && !strcmp(argv[1], "--free")) {
		printf("free=%zu\n", free_mem());
		return 0;
	}
	if (cudaSetDevice(0) != cudaSuccess) {
		fprintf(stderr, "nccl_e2e: no device (run it through libremote.so)\n");
		return 1;
	}
	OK(cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking, -3));
	if (argc > 2 && !strcmp(argv[1], "--hold"))
		return hold(argv[2]);
	if (argc > 4 && !strcmp(argv[1], "--rank") && !strcmp(argv[3], "--idfile"))
		return two_ranks(atoi(argv[2]), argv[4]);

	ncclUniqueId id;
	ncclComm_t c = init1(&id);
	int cn = nserial;
	collectives(c, cn);
	statuses(c, cn);
	comms(c, cn);
	/* the server refused the unknown communicator: it never reached the library */
	printf("expect-count nccl 0 comm=bad\n");
	printf("expect-count nccl 2 ncclCommInitRank new=comm#\n"); /* init1 and ncclCommInitAll */
	printf("expect-count nccl 5 ncclGetUniqueId id=\n");

	/* left alive: the session's teardown aborts it */
	printf("expect-teardown nccl ncclCommAbort comm=comm#%d\n", cn);
	OK(cudaStreamDestroy(stream));
	return check_summary("nccl_e2e");
}
