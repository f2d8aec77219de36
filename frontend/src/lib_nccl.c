/*
 * NCCL on the client, the part api/nccl.api cannot say in a line: the entry
 * points marked `custom` and those answered here (`local`).
 *
 * The server runs NCCL (its transports need the GPUs); the client names
 * communicators by ids (lib.h), buffers by the server's device addresses and
 * streams by their ids. Torch's libtorch_cuda.so needs libnccl.so.2, which is
 * loaded on the client too: libremote.so is preloaded, so every name of this
 * file and of gen/lib_nccl.c wins the binding, and the client's copy of NCCL
 * never runs.
 *
 * Configs. ncclConfig_t grows with NCCL versions (`size` and `version` say which
 * fields a program's struct has) and carries two host strings. The client sends
 * a whole struct of its own header's size: the initializer's values, then as much
 * of the program's as it has, with the strings cleared (logged once if set); the
 * server clears them again (backend/src/lib_nccl.c), as it follows no client
 * pointer.
 *
 * ncclCommSplit with NCCL_SPLIT_NOCOLOR: NCCL makes no communicator and answers
 * NULL; the client does the same (the server keeps a NULL entry under the id
 * until the session ends).
 *
 * Not forwarded (they answer ncclInvalidUsage and log their name once):
 * ncclMemAlloc/ncclMemFree (NCCL's own allocations would be device memory the
 * client does not know, so no copy could reach it), buffer and window
 * registration (they want such memory), device communicators, and
 * ncclGroupSimulateEnd.
 */
#include <stddef.h>
#include <stdatomic.h>
#include <string.h>

#include "lib_nccl.h"
#include "rg_log.h"

static ncclResult_t not_supported(const char *name)
{
	rg_log_once("frontend", "not supported (answered ncclInvalidUsage)", name);
	return ncclInvalidUsage;
}

/* ---- sizes and pointer modes (api/nccl.api) ---- */

size_t fe_nccl_dtype_size(ncclDataType_t t)
{
	switch (t) {
	case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2:
		return 1;
	case ncclFloat16: case ncclBfloat16:
		return 2;
	case ncclInt32: case ncclUint32: case ncclFloat32:
		return 4;
	case ncclInt64: case ncclUint64: case ncclFloat64:
		return 8;
	default:
		return 0; /* nothing travels: the server's NCCL refuses the type */
	}
}

int fe_nccl_mode_residence(uint64_t residence, int which)
{
	(void)which;
	return residence == (uint64_t)ncclScalarDevice;
}

/* ---- version: the server's library, asked once ---- */

static atomic_int version;

ncclResult_t ncclGetVersion(int *v)
{
	if (!v)
		return ncclInvalidArgument;
	int known = atomic_load(&version);
	if (known) {
		*v = known;
		return ncclSuccess;
	}
	ncclResult_t r = fe_lib_ncclGetVersion(v);
	if (r == ncclSuccess && *v > 0)
		atomic_store(&version, *v);
	return r;
}

/* ---- configs ---- */

static ncclConfig_t *config_copy(const ncclConfig_t *in, ncclConfig_t *out)
{
	if (!in)
		return NULL;
	ncclConfig_t init = NCCL_CONFIG_INITIALIZER;
	*out = init;
	size_t n = in->size < sizeof(*out) ? in->size : sizeof(*out);
	memcpy(out, in, n);
	if ((n > offsetof(ncclConfig_t, netName) && out->netName) ||
	    (n > offsetof(ncclConfig_t, commName) && out->commName))
		rg_log_once("frontend", "ncclConfig_t netName and commName are not forwarded (the server's NCCL picks "
			    "the network)", "NCCL");
	out->netName = NULL;
	out->commName = NULL;
	return out;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t *config)
{
	ncclConfig_t c;
	return fe_lib_ncclCommInitRankConfig(comm, nranks, commId, rank, config_copy(config, &c));
}

ncclResult_t ncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId, ncclUniqueId *commIds,
				      ncclConfig_t *config)
{
	ncclConfig_t c;
	if (nId < 0)
		return ncclInvalidArgument;
	return fe_lib_ncclCommInitRankScalable(newcomm, nranks, myrank, nId, commIds, config_copy(config, &c));
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config)
{
	ncclConfig_t c;
	ncclResult_t r = fe_lib_ncclCommSplit(comm, color, key, newcomm, config_copy(config, &c));
	if (r == ncclSuccess && color == NCCL_SPLIT_NOCOLOR) {
		fe_lib_forget(fe_lib_id(*newcomm));
		*newcomm = NULL;
	}
	return r;
}

ncclResult_t ncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount, ncclComm_t *newcomm,
			    ncclConfig_t *config, int shrinkFlags)
{
	ncclConfig_t c;
	if (excludeRanksCount < 0)
		return ncclInvalidArgument;
	return fe_lib_ncclCommShrink(comm, excludeRanksList, excludeRanksCount, newcomm, config_copy(config, &c),
				     shrinkFlags);
}

/* ---- answered here ---- */

const char *ncclGetErrorString(ncclResult_t r)
{
	switch (r) {
	case ncclSuccess: return "no error";
	case ncclUnhandledCudaError: return "unhandled cuda error (the server's log has the detail)";
	case ncclSystemError: return "unhandled system error (the server's log has the detail)";
	case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
	case ncclInvalidArgument: return "invalid argument";
	case ncclInvalidUsage: return "invalid usage";
	case ncclRemoteError: return "remote process exited or there was a network error";
	case ncclInProgress: return "NCCL operation in progress";
	default: return "unknown result code";
	}
}

/* NCCL keeps its last error message in the server's process: its log
 * (REMOTE_GPU_LOG, NCCL_DEBUG=WARN on remote-gpud) has it. */
const char *ncclGetLastError(ncclComm_t comm)
{
	(void)comm;
	return "";
}

/* The client's number of the device the communicator was made on. */
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device)
{
	int dev = fe_lib_dev(fe_lib_id(comm));
	if (!device || dev < 0 || fe_lib_kind(fe_lib_id(comm)) != FE_NCCL_K_COMM)
		return ncclInvalidArgument;
	*device = dev;
	return ncclSuccess;
}

/* One device: what NCCL does for it (an id, one rank). Several devices of one
 * process need one server serving them all. */
ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist)
{
	if (!comm || ndev < 1)
		return ncclInvalidArgument;
	if (ndev > 1)
		return not_supported("ncclCommInitAll (more than one device)");
	int dev = devlist ? devlist[0] : 0, cur = fe_rt_current_device();
	if (!fe_rt_device(dev))
		return ncclInvalidArgument;
	fe_rt_set_current_device(dev); /* where the unique id and the init go */
	ncclUniqueId id;
	ncclResult_t r = ncclGetUniqueId(&id);
	if (r == ncclSuccess)
		r = ncclCommInitRank(comm, 1, id, 0);
	fe_rt_set_current_device(cur);
	return r;
}

ncclResult_t ncclMemAlloc(void **ptr, size_t size)
{
	(void)ptr, (void)size;
	return not_supported("ncclMemAlloc");
}

ncclResult_t ncclMemFree(void *ptr)
{
	(void)ptr;
	return not_supported("ncclMemFree");
}

ncclResult_t ncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle)
{
	(void)comm, (void)buff, (void)size, (void)handle;
	return not_supported("ncclCommRegister");
}

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void *handle)
{
	(void)comm, (void)handle;
	return not_supported("ncclCommDeregister");
}

ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win, int winFlags)
{
	(void)comm, (void)buff, (void)size, (void)win, (void)winFlags;
	return not_supported("ncclCommWindowRegister");
}

ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win)
{
	(void)comm, (void)win;
	return not_supported("ncclCommWindowDeregister");
}

/* nccl_device/core.h declares them, in C++ only: the types are opaque here. */
ncclResult_t ncclDevCommCreate(ncclComm_t comm, const void *reqs, void *outDevComm);
ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const void *devComm);

ncclResult_t ncclDevCommCreate(ncclComm_t comm, const void *reqs, void *outDevComm)
{
	(void)comm, (void)reqs, (void)outDevComm;
	return not_supported("ncclDevCommCreate");
}

ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const void *devComm)
{
	(void)comm, (void)devComm;
	return not_supported("ncclDevCommDestroy");
}

ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t *simInfo)
{
	(void)simInfo;
	return not_supported("ncclGroupSimulateEnd");
}
