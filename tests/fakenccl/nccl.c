/*
 * fakenccl: a test double of libnccl.so.2 for CI, where remote-gpud runs on the
 * driver test double (tests/fakecuda: device memory is host RAM). README.md says
 * what it does; in short:
 *
 *  - every call appends one line with every argument to $FAKENCCL_LOG, so a test
 *    checks byte for byte what the server handed the library;
 *  - communicators are objects with a serial number (comm#1, comm#2), each
 *    holding FN_COMM_BYTES of the fake driver's device memory while alive, so a
 *    communicator the server forgets shows in the device's free memory;
 *  - with one rank, collectives copy sendbuff to recvbuff, so data can be checked.
 *
 * Nothing talks to another process: ranks of a communicator do not meet.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda.h>

#pragma GCC visibility push(default)
#include <nccl.h>
#pragma GCC visibility pop

#define FN_MAGIC 0x66616b656e63636cull /* "fakenccl" */
#define FN_VERSION 22899                /* ncclGetVersion: not a real release */
#define FN_COMM_BYTES (1u << 20)
#define FN_ASYNC_FAIL_COUNT 0xfa11      /* a collective of this count sets ncclRemoteError */
#define FN_MAX_OPS 8                    /* ncclRedOpCreatePreMulSum per communicator */

typedef struct fn_comm {
	uint64_t magic;
	int serial, nranks, rank;
	ncclResult_t async; /* ncclCommGetAsyncError's answer */
	CUdeviceptr mem;    /* FN_COMM_BYTES of device memory */
	int ops[FN_MAX_OPS];
} fn_comm;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int comm_serial, id_serial;
static _Thread_local int group_depth;

/* ---- the fake driver, found without linking to it ---- */

static void *drv(const char *name)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	return h ? dlsym(h, name) : NULL;
}

static int range_ok(const void *p, size_t n)
{
	CUresult (*range)(CUdeviceptr *, size_t *, CUdeviceptr) =
		(CUresult(*)(CUdeviceptr *, size_t *, CUdeviceptr))drv("cuMemGetAddressRange_v2");
	CUdeviceptr base;
	size_t size;
	return range && p && range(&base, &size, (CUdeviceptr)(uintptr_t)p) == CUDA_SUCCESS &&
	       (uintptr_t)p + n <= base + size;
}

/* ---- the call log: one write per line ---- */

static void say(const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	const char *path = getenv("FAKENCCL_LOG");
	int fd = path && *path ? open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644) : -1;
	if (fd < 0)
		return;
	ssize_t w = write(fd, line, (size_t)n);
	(void)w;
	close(fd);
}

typedef struct txt {
	char s[96];
} txt;

static fn_comm *live(const void *c)
{
	const fn_comm *k = c;
	return k && k->magic == FN_MAGIC ? (fn_comm *)k : NULL;
}

static txt comm_txt(const void *c)
{
	txt t;
	if (!c)
		snprintf(t.s, sizeof(t.s), "null");
	else if (!live(c))
		snprintf(t.s, sizeof(t.s), "bad");
	else
		snprintf(t.s, sizeof(t.s), "comm#%d", ((const fn_comm *)c)->serial);
	return t;
}

static int capturing(cudaStream_t s)
{
	CUresult (*is)(CUstream, CUstreamCaptureStatus *) =
		(CUresult(*)(CUstream, CUstreamCaptureStatus *))drv("cuStreamIsCapturing");
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
	return is && is((CUstream)s, &st) == CUDA_SUCCESS && st == CU_STREAM_CAPTURE_STATUS_ACTIVE;
}

/* null, prio:<n> (the fake driver's priority: tests give their streams a
 * distinctive one; "+capturing" while the stream captures), else the handle's
 * address */
static txt stream_txt(cudaStream_t s)
{
	CUresult (*prio)(CUstream, int *) = (CUresult(*)(CUstream, int *))drv("cuStreamGetPriority");
	txt t;
	int p;
	if (!s)
		snprintf(t.s, sizeof(t.s), "null");
	else if (prio && prio((CUstream)s, &p) == CUDA_SUCCESS)
		snprintf(t.s, sizeof(t.s), "prio:%d%s", p, capturing(s) ? "+capturing" : "");
	else
		snprintf(t.s, sizeof(t.s), "%p", (void *)s);
	return t;
}

static txt hex_txt(const void *p, size_t n)
{
	txt t;
	size_t i;
	for (i = 0; i < n && 2 * i + 2 < sizeof(t.s); i++)
		snprintf(t.s + 2 * i, 3, "%02x", ((const unsigned char *)p)[i]);
	t.s[2 * i] = 0;
	return t;
}

static size_t type_size(ncclDataType_t t)
{
	static const size_t sz[ncclNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
	return (unsigned)t < ncclNumTypes ? sz[t] : 0;
}

/* ---- communicators ---- */

static ncclResult_t comm_new(ncclComm_t *out, int nranks, int rank)
{
	CUresult (*alloc)(CUdeviceptr *, size_t) = (CUresult(*)(CUdeviceptr *, size_t))drv("cuMemAlloc_v2");
	fn_comm *c = calloc(1, sizeof(*c));
	if (!c)
		return ncclSystemError;
	if (alloc && alloc(&c->mem, FN_COMM_BYTES) != CUDA_SUCCESS) {
		free(c);
		return ncclUnhandledCudaError;
	}
	c->magic = FN_MAGIC;
	c->nranks = nranks;
	c->rank = rank;
	pthread_mutex_lock(&mu);
	c->serial = ++comm_serial;
	pthread_mutex_unlock(&mu);
	*out = (ncclComm_t)c;
	return ncclSuccess;
}

static void comm_free(fn_comm *c)
{
	CUresult (*release)(CUdeviceptr) = (CUresult(*)(CUdeviceptr))drv("cuMemFree_v2");
	if (release && c->mem)
		release(c->mem);
	c->magic = 0;
	free(c);
}

/* As NCCL's init does with cudaSetDevice: the device's primary context is
 * current on the calling thread afterwards (the server must restore its own). */
static void primary_current(void)
{
	CUresult (*retain)(CUcontext *, CUdevice) = (CUresult(*)(CUcontext *, CUdevice))drv("cuDevicePrimaryCtxRetain");
	CUresult (*set)(CUcontext) = (CUresult(*)(CUcontext))drv("cuCtxSetCurrent");
	static CUcontext primary; /* retained once, never released: NCCL's runtime keeps it too */
	pthread_mutex_lock(&mu);
	if (!primary && retain && retain(&primary, 0) != CUDA_SUCCESS)
		primary = NULL;
	pthread_mutex_unlock(&mu);
	if (primary && set)
		set(primary);
}

static int id_ok(const ncclUniqueId *id)
{
	uint64_t m;
	memcpy(&m, id->internal, sizeof(m));
	return m == FN_MAGIC;
}

ncclResult_t ncclGetVersion(int *version)
{
	if (!version)
		return ncclInvalidArgument;
	*version = FN_VERSION;
	return ncclSuccess;
}

/* "fakenccl", the serial (4 bytes), the server's pid (4 bytes), zeros */
ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
	if (!id)
		return ncclInvalidArgument;
	memset(id, 0, sizeof(*id));
	uint64_t m = FN_MAGIC;
	pthread_mutex_lock(&mu);
	uint32_t serial = (uint32_t)++id_serial;
	pthread_mutex_unlock(&mu);
	uint32_t pid = (uint32_t)getpid();
	memcpy(id->internal, &m, 8);
	memcpy(id->internal + 8, &serial, 4);
	memcpy(id->internal + 12, &pid, 4);
	id->internal[127] = 0x7f; /* the last byte travels too */
	say("ncclGetUniqueId id=%s", hex_txt(id->internal, 12).s);
	return ncclSuccess;
}

static ncclResult_t init(const char *fn, ncclComm_t *comm, int nranks, const ncclUniqueId *id, int rank,
			 const ncclConfig_t *cfg)
{
	ncclResult_t r = ncclSuccess;
	if (!comm || nranks < 1 || rank < 0 || rank >= nranks || !id_ok(id))
		r = ncclInvalidArgument;
	else
		r = comm_new(comm, nranks, rank);
	if (!r)
		primary_current();
	char conf[200] = "";
	if (cfg)
		snprintf(conf, sizeof(conf), " size=%zu blocking=%d cga=%d minCTAs=%d maxCTAs=%d splitShare=%d netName=%s "
			 "commName=%s last=%d", cfg->size, cfg->blocking, cfg->cgaClusterSize, cfg->minCTAs, cfg->maxCTAs,
			 cfg->splitShare, cfg->netName ? "set" : "null", cfg->commName ? "set" : "null",
			 cfg->nvlinkCentricSched);
	say("%s new=%s nranks=%d id=%s last=%02x rank=%d%s = %d", fn, r ? "none" : comm_txt(*comm).s, nranks,
	    hex_txt(id->internal, 12).s, (unsigned char)id->internal[127], rank, conf, r);
	/* a nonblocking communicator is made "in progress" once */
	if (!r && cfg && cfg->blocking == 0) {
		live(*comm)->async = ncclInProgress;
		return ncclInProgress;
	}
	return r;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
	return init("ncclCommInitRank", comm, nranks, &id, rank, NULL);
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t *config)
{
	return init("ncclCommInitRankConfig", comm, nranks, &id, rank, config);
}

ncclResult_t ncclCommInitRankScalable(ncclComm_t *comm, int nranks, int rank, int nId, ncclUniqueId *ids,
				      ncclConfig_t *config)
{
	if (nId < 1 || !ids)
		return ncclInvalidArgument;
	say("ncclCommInitRankScalable nId=%d last_id=%s", nId, hex_txt(ids[nId - 1].internal, 12).s);
	return init("ncclCommInitRankScalable", comm, nranks, &ids[0], rank, config);
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config)
{
	fn_comm *c = live(comm);
	ncclResult_t r = !c || !newcomm ? ncclInvalidArgument : ncclSuccess;
	if (!r && color == NCCL_SPLIT_NOCOLOR)
		*newcomm = NULL;
	else if (!r)
		r = comm_new(newcomm, 1, 0);
	say("ncclCommSplit comm=%s color=%d key=%d new=%s config=%s = %d", comm_txt(comm).s, color, key,
	    r || !*newcomm ? "none" : comm_txt(*newcomm).s, config ? "set" : "null", r);
	return r;
}

ncclResult_t ncclCommShrink(ncclComm_t comm, int *exclude, int n, ncclComm_t *newcomm, ncclConfig_t *config,
			    int flags)
{
	fn_comm *c = live(comm);
	ncclResult_t r = !c || !newcomm || n < 0 || (n && !exclude) ? ncclInvalidArgument : ncclSuccess;
	if (!r)
		r = comm_new(newcomm, c->nranks - n, 0);
	char list[64] = "";
	for (int i = 0, o = 0; !r && i < n && o < (int)sizeof(list) - 12; i++)
		o += snprintf(list + o, sizeof(list) - (size_t)o, "%s%d", i ? "," : "", exclude[i]);
	say("ncclCommShrink comm=%s exclude=[%s] new=%s config=%s flags=%d = %d", comm_txt(comm).s, list,
	    r ? "none" : comm_txt(*newcomm).s, config ? "set" : "null", flags, r);
	return r;
}

static ncclResult_t release(const char *fn, ncclComm_t comm)
{
	fn_comm *c = live(comm);
	say("%s comm=%s", fn, comm_txt(comm).s);
	if (!c)
		return comm ? ncclInvalidArgument : ncclSuccess;
	comm_free(c);
	return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) { return release("ncclCommDestroy", comm); }
ncclResult_t ncclCommAbort(ncclComm_t comm) { return release("ncclCommAbort", comm); }

ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
	say("ncclCommFinalize comm=%s", comm_txt(comm).s);
	return live(comm) ? ncclSuccess : ncclInvalidArgument;
}

ncclResult_t ncclCommRevoke(ncclComm_t comm, int flags)
{
	say("ncclCommRevoke comm=%s flags=%d", comm_txt(comm).s, flags);
	return live(comm) && flags == 0 ? ncclSuccess : ncclInvalidArgument;
}

/* Not logged: PyTorch's watchdog polls it. In progress turns into success
 * once asked. */
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *err)
{
	fn_comm *c = live(comm);
	if (!c || !err)
		return ncclInvalidArgument;
	*err = c->async;
	if (c->async == ncclInProgress)
		c->async = ncclSuccess;
	return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
	fn_comm *c = live(comm);
	if (!c || !count)
		return ncclInvalidArgument;
	*count = c->nranks;
	return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
	fn_comm *c = live(comm);
	if (!c || !rank)
		return ncclInvalidArgument;
	*rank = c->rank;
	return ncclSuccess;
}

/* ---- reduction operators ---- */

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t type,
				      ncclScalarResidence_t residence, ncclComm_t comm)
{
	fn_comm *c = live(comm);
	ncclResult_t r = !c || !op || !scalar || !type_size(type) ? ncclInvalidArgument : ncclSuccess;
	int slot = -1;
	for (int i = 0; !r && i < FN_MAX_OPS; i++)
		if (!c->ops[i]) {
			slot = i;
			break;
		}
	if (!r && slot < 0)
		r = ncclSystemError;
	if (!r) {
		c->ops[slot] = 1;
		*op = (ncclRedOp_t)(ncclNumOps + slot);
	}
	if (residence == ncclScalarHostImmediate && scalar)
		say("ncclRedOpCreatePreMulSum op=%d scalar=h:%s datatype=%d residence=%d comm=%s = %d", r ? -1 : (int)*op,
		    hex_txt(scalar, type_size(type)).s, type, residence, comm_txt(comm).s, r);
	else
		say("ncclRedOpCreatePreMulSum op=%d scalar=d:%p datatype=%d residence=%d comm=%s = %d", r ? -1 : (int)*op,
		    scalar, type, residence, comm_txt(comm).s, r);
	return r;
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm)
{
	fn_comm *c = live(comm);
	int slot = (int)op - ncclNumOps;
	ncclResult_t r = !c || slot < 0 || slot >= FN_MAX_OPS || !c->ops[slot] ? ncclInvalidArgument : ncclSuccess;
	if (!r)
		c->ops[slot] = 0;
	say("ncclRedOpDestroy op=%d comm=%s = %d", (int)op, comm_txt(comm).s, r);
	return r;
}

/* ---- collectives ---- */

/* Checks shared by every collective; with one rank, copies n elements. */
static ncclResult_t coll(fn_comm *c, const void *send, void *recv, size_t n, ncclDataType_t type, ncclRedOp_t op)
{
	if (!c || !type_size(type) || (int)op < 0 || ((int)op >= ncclNumOps && ((int)op - ncclNumOps >= FN_MAX_OPS ||
									     !c->ops[(int)op - ncclNumOps])))
		return ncclInvalidArgument;
	if (n == FN_ASYNC_FAIL_COUNT) {
		c->async = ncclRemoteError;
		return ncclSuccess;
	}
	size_t bytes = n * type_size(type);
	if (c->nranks == 1 && bytes && send && recv && send != recv) {
		if (!range_ok(send, bytes) || !range_ok(recv, bytes))
			return ncclUnhandledCudaError;
		memmove(recv, send, bytes);
	}
	return ncclSuccess;
}

/* A collective's log line: the operator and the root where it has them. */
static ncclResult_t collective(const char *fn, const void *sendbuff, void *recvbuff, size_t count,
			       ncclDataType_t datatype, const ncclRedOp_t *op, const int *root, ncclComm_t comm,
			       cudaStream_t stream)
{
	ncclResult_t r = coll(live(comm), sendbuff, recvbuff, count, datatype, op ? *op : ncclSum);
	char extra[48] = "";
	if (op && root)
		snprintf(extra, sizeof(extra), " op=%d root=%d", (int)*op, *root);
	else if (op || root)
		snprintf(extra, sizeof(extra), " %s=%d", op ? "op" : "root", op ? (int)*op : *root);
	say("%s sendbuff=%p recvbuff=%p count=%zu datatype=%d%s comm=%s stream=%s = %d", fn, sendbuff, recvbuff, count,
	    datatype, extra, comm_txt(comm).s, stream_txt(stream).s, r);
	return r;
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
			   ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
	return collective("ncclAllReduce", sendbuff, recvbuff, count, datatype, &op, NULL, comm, stream);
}

ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype,
			       ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
	return collective("ncclReduceScatter", sendbuff, recvbuff, recvcount, datatype, &op, NULL, comm, stream);
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
			   ncclComm_t comm, cudaStream_t stream)
{
	return collective("ncclBroadcast", sendbuff, recvbuff, count, datatype, NULL, &root, comm, stream);
}

ncclResult_t ncclGather(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
			ncclComm_t comm, cudaStream_t stream)
{
	return collective("ncclGather", sendbuff, recvbuff, count, datatype, NULL, &root, comm, stream);
}

ncclResult_t ncclScatter(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
			 ncclComm_t comm, cudaStream_t stream)
{
	return collective("ncclScatter", sendbuff, recvbuff, count, datatype, NULL, &root, comm, stream);
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
			   ncclComm_t comm, cudaStream_t stream)
{
	return collective("ncclAllGather", sendbuff, recvbuff, sendcount, datatype, NULL, NULL, comm, stream);
}

ncclResult_t ncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
			  ncclComm_t comm, cudaStream_t stream)
{
	return collective("ncclAlltoAll", sendbuff, recvbuff, count, datatype, NULL, NULL, comm, stream);
}

ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
			int root, ncclComm_t comm, cudaStream_t stream)
{
	return collective("ncclReduce", sendbuff, recvbuff, count, datatype, &op, &root, comm, stream);
}

ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
		       cudaStream_t stream)
{
	ncclResult_t r = coll(live(comm), buff, buff, count, datatype, ncclSum);
	say("ncclBcast buff=%p count=%zu datatype=%d root=%d comm=%s stream=%s = %d", buff, count, datatype, root,
	    comm_txt(comm).s, stream_txt(stream).s, r);
	return r;
}

static ncclResult_t p2p(const char *fn, const char *what, const void *buf, size_t count, ncclDataType_t datatype,
			int peer, ncclComm_t comm, cudaStream_t stream)
{
	fn_comm *c = live(comm);
	ncclResult_t r = !c || !type_size(datatype) || peer < 0 || peer >= c->nranks ? ncclInvalidArgument : ncclSuccess;
	say("%s %s=%p count=%zu datatype=%d peer=%d comm=%s stream=%s = %d", fn, what, buf, count, datatype, peer,
	    comm_txt(comm).s, stream_txt(stream).s, r);
	return r;
}

ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
		      cudaStream_t stream)
{
	return p2p("ncclSend", "sendbuff", sendbuff, count, datatype, peer, comm, stream);
}

ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
		      cudaStream_t stream)
{
	return p2p("ncclRecv", "recvbuff", recvbuff, count, datatype, peer, comm, stream);
}

/* ---- groups: per thread, as NCCL's ---- */

ncclResult_t ncclGroupStart(void)
{
	group_depth++;
	say("ncclGroupStart depth=%d", group_depth);
	return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void)
{
	ncclResult_t r = group_depth > 0 ? ncclSuccess : ncclInvalidUsage;
	if (!r)
		group_depth--;
	say("ncclGroupEnd depth=%d = %d", group_depth, r);
	return r;
}
