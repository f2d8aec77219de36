/*
 * fakecuda: a test double of the CUDA driver library (libcuda.so.1).
 *
 * CI has no GPU, so the end-to-end tests run remote-gpud against this library
 * instead of NVIDIA's. It implements a slice of the driver API truthfully enough
 * that the tests can assert on what the backend did:
 *
 *  - "device memory" is host memory: cuMemAlloc returns an address in an arena
 *    apart from every host heap (devmem.c), so the backend's copies really move
 *    bytes and can be read back, and no host pointer ever equals a device one;
 *  - every device range a copy, memset or emulated kernel touches must lie inside one
 *    allocation of the current context, else the call fails: a backend that forwards
 *    a bad range is caught here, not by a segfault;
 *  - handles are opaque 64-bit ids looked up in one registry, never pointers, so a
 *    stale or forged handle is answered with CUDA_ERROR_INVALID_HANDLE;
 *  - streams run eagerly: an async call has finished when it returns;
 *  - every kernel launch is appended to $FAKECUDA_LAUNCH_LOG, and a few kernels
 *    named rgtest_* are emulated on the host.
 *
 * Anything not implemented is either not exported or answers CUDA_ERROR_NOT_SUPPORTED;
 * nothing pretends to work. README.md lists what is and is not emulated.
 *
 * Locking: one process-wide mutex (fk_mu) guards all state. Every API function takes
 * it in fk_begin*() and drops it in fk_end(). It is released only around user host
 * callbacks (cuLaunchHostFunc, cuStreamAddCallback, graph host nodes), after which
 * the caller looks its objects up again by id.
 */
#ifndef FAKECUDA_FAKE_H
#define FAKECUDA_FAKE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* The library is built with -fvisibility=hidden; the driver functions declared by
 * cuda.h keep default visibility, so exactly the ones defined here are exported,
 * under the (versioned) names cuda.h's macros give them. */
#pragma GCC visibility push(default)
#include <cuda.h>
#include <cudaProfiler.h>
#pragma GCC visibility pop

#include "cubin.h"

#if defined(CUDA_API_PER_THREAD_DEFAULT_STREAM)
#error "fakecuda exports the legacy-stream entry points; build without CUDA_API_PER_THREAD_DEFAULT_STREAM"
#endif

#define FK_MAX_DEVICES 16
#define FK_MAX_PEERS 16
#define FK_ALIGN 256u                  /* cuMemAlloc alignment */
#define FK_DRIVER_VERSION 13000
#define FK_CC_MAJOR 9
#define FK_CC_MINOR 0
#define FK_SM_COUNT 132
#define FK_MAX_THREADS_PER_BLOCK 1024
#define FK_MAX_THREADS_PER_SM 2048
#define FK_MAX_BLOCKS_PER_SM 32
#define FK_REGS_PER_SM 65536
#define FK_SHARED_PER_BLOCK 49152      /* default limit of static + dynamic */
#define FK_SHARED_PER_BLOCK_OPTIN 232448
#define FK_SHARED_PER_SM 233472
#define FK_RESERVED_SHARED_PER_BLOCK 1024
#define FK_FUNC_NUM_REGS 32            /* reported for every kernel */
#define FK_STREAM_PRIO_LEAST 0
#define FK_STREAM_PRIO_GREATEST (-5)

/* Kinds of handle in the registry. */
enum fk_kind {
	FK_CTX = 1,
	FK_STREAM,
	FK_EVENT,
	FK_MODULE,
	FK_FUNC,
	FK_GRAPH,
	FK_GRAPH_EXEC,
	FK_NODE,
	FK_POOL,
	FK_ARRAY,
	FK_TEXOBJ,
	FK_SURFOBJ,
};

typedef struct fk_ctx fk_ctx;
typedef struct fk_stream fk_stream;
typedef struct fk_capture fk_capture;
typedef struct fk_graph fk_graph;
typedef struct fk_module fk_module;

/* ---- devices (device.c) ---- */

/* Device memory charged (devshare.c): this process's, or with
 * FAKECUDA_MEM_SHARED that of every process sharing the file, as one GPU's
 * memory is shared by the processes that use it. */
struct fk_dev;
void fk_devshare_init(void);
/* mps.c: cuInit's attempt to reach an MPS control daemon; 1 if this process
 * is an MPS client (CU_DEVICE_ATTRIBUTE_MPS_ENABLED). */
void fk_mps_init(void);
extern int fk_mps;
size_t fk_dev_free(const struct fk_dev *d);
void fk_dev_charge(struct fk_dev *d, size_t n);
void fk_dev_uncharge(struct fk_dev *d, size_t n);

typedef struct fk_pool fk_pool;

typedef struct fk_dev {
	size_t total;          /* FAKECUDA_MEM_BYTES */
	size_t used;           /* bytes charged: live allocations, all contexts, and the
	                          memory pools keep in reserve */
	_Atomic unsigned long long *shared; /* FAKECUDA_MEM_SHARED: used, over all processes */
	fk_pool *pool;         /* the default memory pool */
	fk_pool *cur_pool;     /* cuDeviceSetMemPool's (the default one at first) */
	fk_ctx *primary;       /* primary context while retained */
	unsigned primary_refs;
	unsigned primary_flags;
} fk_dev;

extern int fk_ndev;
extern fk_dev fk_devs[FK_MAX_DEVICES];

/* ---- memory pools (pool.c) ---- */

/* A pool's reserve: memory its allocations freed stays charged to the device
 * (reserved) until a synchronisation releases it down to the release threshold,
 * or cuMemPoolTrimTo down to what it is asked to keep, as on a GPU (less the
 * GPU's granularity: reserved is exact here). */
struct fk_pool {
	uint64_t id;           /* handle; 0 once destroyed */
	int dev;
	size_t used, used_high, reserved, reserved_high;
	size_t max_size;       /* 0: no limit */
	uint64_t release_threshold;
	int reuse[3];          /* REUSE_FOLLOW_EVENT_DEPENDENCIES .. INTERNAL_DEPENDENCIES */
	size_t nallocs;        /* live allocations: a destroyed pool goes with its last */
};

fk_pool *fk_pool_new(int dev);
/* A freed allocation of p: charged bytes back to its reserve (or to the device,
 * and p freed with its last allocation, once destroyed). */
void fk_pool_put(fk_pool *p, size_t charged);
/* A synchronisation: every pool of dev releases its reserve down to its threshold. */
void fk_pools_sync(int dev);

/* ---- the device arena (devmem.c) ---- */

/* charged bytes (a multiple of FK_ALIGN) of device addresses, apart from every
 * host heap; 0 if none are left. */
uintptr_t fk_devmem_alloc(size_t charged);
/* Back to the arena: base and charged as fk_devmem_alloc gave and took them. */
void fk_devmem_free(uintptr_t base, size_t charged);

/* ---- device allocations (memory.c) ---- */

/* FK_MEM_MAPPED: a cuMemMap'd range (vmm.c), valid as a range, not freeable, its
 * memory owned by the physical allocation mapped there. */
enum fk_mem_kind { FK_MEM_DEVICE, FK_MEM_ASYNC, FK_MEM_GLOBAL, FK_MEM_MAPPED };

typedef struct fk_alloc {
	uintptr_t base;
	size_t size;           /* as requested */
	size_t charged;        /* size rounded up to FK_ALIGN, counted in fk_dev.used */
	int kind;              /* enum fk_mem_kind */
	uint64_t buffer_id;    /* CU_POINTER_ATTRIBUTE_BUFFER_ID */
	fk_pool *pool;         /* FK_MEM_ASYNC: the pool it came from */
} fk_alloc;

CUresult fk_mem_new(fk_ctx *c, size_t size, int kind, uintptr_t *out);
/* An allocation from pool p (FK_MEM_ASYNC), charged to the device as p's reserve grows. */
CUresult fk_mem_new_pool(fk_ctx *c, size_t size, fk_pool *p, uintptr_t *out);
/* Frees the allocation that starts at p; kinds is a bit mask of (1 << fk_mem_kind). */
CUresult fk_mem_free(fk_ctx *c, uintptr_t p, unsigned kinds);
void fk_mem_free_all(fk_ctx *c);
const fk_alloc *fk_mem_find(const fk_ctx *c, uintptr_t p);
/* A mapped range of c (vmm.c): an allocation of kind FK_MEM_MAPPED that owns nothing. */
CUresult fk_mem_add_mapped(fk_ctx *c, uintptr_t base, size_t size);
/* Whether [p, p + len) lies inside one allocation of c, or in mapped ranges back
 * to back (one virtual range). len 0 is always fine. */
int fk_range_ok(const fk_ctx *c, uintptr_t p, size_t len);
/* Same for height rows of width bytes, pitch apart. */
int fk_range2d_ok(const fk_ctx *c, uintptr_t p, size_t pitch, size_t width, size_t height);
void fk_host_release_ctx(fk_ctx *c);

/* ---- stream-ordered operations (graph.c runs and records them) ---- */

enum fk_op_kind { FK_OP_KERNEL, FK_OP_COPY, FK_OP_SET, FK_OP_HOST };

typedef struct fk_op {
	int kind;
	union {
		struct {
			uint64_t func;           /* handle id, looked up again when run */
			unsigned grid[3], block[3], shmem;
			uint8_t *args;           /* packed parameters (owned) */
			size_t nargs;            /* bytes: end of the last parameter */
		} k;
		struct {
			uintptr_t dst, src;
			size_t dpitch, spitch, width, height;
			uint8_t dst_dev, src_dev; /* which side is device memory */
		} c;
		struct {
			uintptr_t dst;
			size_t pitch, width, height; /* width in elements */
			unsigned elem;           /* 1, 2 or 4 bytes */
			uint32_t value;
		} s;
		struct {
			CUhostFn fn;
			void *data;
		} h;
	} u;
} fk_op;

void fk_op_free(fk_op *op);
int fk_op_clone(fk_op *dst, const fk_op *src);
/* Runs op on stream s now, or records it if s is capturing. Takes ownership of op's
 * buffers. May drop the lock (host functions). */
CUresult fk_submit(fk_ctx *c, fk_stream *s, fk_op *op);
/* A capturing stream's cuMemAllocAsync / cuMemFreeAsync: a memory node of type
 * (CU_GRAPH_NODE_TYPE_MEM_ALLOC or _MEM_FREE) appended to its capture. The double
 * makes and frees the memory at the capture; replays do nothing for these nodes. */
CUresult fk_capture_mem_node(fk_stream *s, int type, uint64_t ptr, size_t size);
CUresult fk_copy_run(fk_ctx *c, const fk_op *op);  /* copy.c */
/* A 2D copy on stream h, checked as cuMemcpy2DAsync checks it (copy.c): a side
 * with *_dev 0 is not checked (host memory, or a CUDA array's storage). */
CUresult fk_copy_submit(fk_ctx *c, CUstream h, uintptr_t dst, int dst_dev, size_t dpitch, uintptr_t src,
                        int src_dev, size_t spitch, size_t width, size_t height);
CUresult fk_set_run(fk_ctx *c, const fk_op *op);   /* copy.c */
CUresult fk_kernel_run(fk_ctx *c, const fk_op *op); /* launch.c */
/* A launch of f checked as cuLaunchKernel checks it and packed into *op (launch.c):
 * what a launch submits and a kernel node keeps. */
CUresult fk_kernel_op(fk_ctx *c, CUfunction f, const unsigned grid[3], const unsigned block[3],
                      unsigned shmem, void **params, void **extra, int coop, fk_op *op);

/* ---- streams, capture (stream.c, graph.c) ---- */

struct fk_stream {
	uint64_t id;           /* 0 for a context's NULL stream */
	fk_ctx *ctx;
	unsigned flags;
	int priority;
	fk_capture *cap;       /* non-NULL while taking part in a capture */
	uint64_t last_node;    /* node last captured on this stream */
	CUgraphNode dep;       /* storage for cuStreamGetCaptureInfo's dependency list */
};

struct fk_capture {
	uint64_t seq;          /* capture id (cuStreamGetCaptureInfo) */
	fk_graph *graph;
	fk_stream *origin;
	int mode;
	int invalidated;
	unsigned nblocking;    /* streams in the capture without CU_STREAM_NON_BLOCKING */
	pthread_t thread;      /* that began it (modes other than relaxed end there) */
	fk_capture *next;      /* fk_captures list */
};

typedef struct fk_event {
	uint64_t id;
	fk_ctx *ctx;
	unsigned flags;
	int recorded;          /* recorded outside a capture at least once */
	uint64_t t_ns;         /* CLOCK_MONOTONIC at the last record */
	uint64_t cap_seq;      /* recorded into this capture (0: none) ... */
	uint64_t node;         /* ... after this node */
} fk_event;

extern fk_capture *fk_captures;

/* Resolves a stream handle of context c: NULL, CU_STREAM_LEGACY and
 * CU_STREAM_PER_THREAD are c's NULL stream. */
fk_stream *fk_stream_get(fk_ctx *c, CUstream h);
/* The rule that the legacy NULL stream synchronizes with blocking streams: work on it
 * while such a stream captures fails with CUDA_ERROR_STREAM_CAPTURE_IMPLICIT and
 * invalidates the capture. */
CUresult fk_stream_legacy_check(fk_ctx *c, CUstream h);
void fk_stream_destroy(fk_stream *s);
void fk_capture_leave(fk_stream *s);
void fk_capture_end(fk_capture *cap, int keep_graph);
/* Synchronizing a capturing stream is not allowed and invalidates its capture. */
CUresult fk_capture_sync_check(fk_stream *s);
/* The calling thread may not make a "potentially unsafe" call (cuMemAlloc,
 * cuMemFree, ...) now, by its capture mode and the captures under way: as CUDA
 * documents cudaStreamCaptureMode. Invalidates the captures that forbid it and
 * answers CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; CUDA_SUCCESS when allowed. */
CUresult fk_capture_unsafe_check(void);
fk_capture *fk_capture_find(uint64_t seq);
void fk_capture_join(fk_capture *cap, fk_stream *s);
void fk_event_destroy(void *e);
void fk_graph_destroy(fk_graph *g);
void fk_exec_destroy(void *x);
void fk_module_destroy(fk_module *m);
/* array.c: a context's arrays, texture and surface objects (cuCtxDestroy). */
void fk_array_free_all(fk_ctx *c);

/* ---- contexts (context.c) ---- */

struct fk_ctx {
	uint64_t id;
	int dev;
	unsigned flags;
	int primary;
	CUresult sticky;       /* set by a device fault; every later call returns it */
	fk_alloc *allocs;      /* sorted by base */
	size_t nallocs, capallocs;
	fk_stream null_stream;
	size_t limits[CU_LIMIT_MAX];
	CUfunc_cache cache;
	uint64_t peers[FK_MAX_PEERS]; /* contexts whose memory it may access (peer.c) */
	int npeers;
	char *printf_buf;      /* what emulated kernels printed, until a synchronisation */
	size_t printf_len;
};

void fk_ctx_destroy(fk_ctx *c);
/* Writes what c's kernels printed to stdout, as the driver flushes its device
 * printf buffer at synchronisations (launch.c). */
void fk_printf_flush(fk_ctx *c);

/* ---- modules (module.c, elf.c) ---- */

typedef struct fk_func {
	uint64_t id;
	fk_module *mod;
	char *name;
	uint32_t nparams;
	cubin_param *params;   /* sorted by ordinal */
	size_t argsize;        /* end of the last parameter */
	size_t static_shmem, const_size;
	int max_dyn_shmem, carveout, cluster[3], nonportable, sched;
	CUfunc_cache cache;
} fk_func;

typedef struct fk_global {
	char *name;
	uintptr_t ptr;
	size_t size;
} fk_global;

struct fk_module {
	uint64_t id;
	fk_ctx *ctx;
	uint32_t arch;         /* sm_XX of the cubin that was loaded */
	fk_func *funcs;
	uint32_t nfuncs;
	fk_global *globals;
	uint32_t nglobals;
};

fk_func *fk_func_get(fk_ctx *c, CUfunction f);

/* ELF helpers for cubins (elf.c). All bounds-checked against size. */
/* Size of a cubin from its headers; avail bounds every read (SIZE_MAX: trusted). */
int fk_elf_size(const void *image, size_t avail, size_t *size);
int fk_elf_arch(const void *elf, size_t size, uint32_t *arch);
typedef int (*fk_elf_sym_fn)(void *arg, const char *name, const uint8_t *init,
                             size_t size);
int fk_elf_each_global(const void *elf, size_t size, fk_elf_sym_fn fn, void *arg);
int fk_elf_section_size(const void *elf, size_t size, const char *name, size_t *out);

/* ---- core (core.c) ---- */

extern pthread_mutex_t fk_mu;
extern int fk_initialized;

/* Each API function starts with one of these (they take fk_mu) and returns through
 * fk_end (which drops it and writes the trace line). */
CUresult fk_begin(fk_ctx **c);           /* initialized, current context, no fault */
CUresult fk_begin_any(fk_ctx **c);       /* same, but a faulted context is fine */
CUresult fk_begin_init(void);            /* initialized only */
void fk_begin_raw(void);                 /* nothing checked */
CUresult fk_end(CUresult rc, const char *fn, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

fk_ctx *fk_current(void);                /* the calling thread's context, NULL if none */
void fk_tls_push(uint64_t ctx);
uint64_t fk_tls_pop(void);
void fk_tls_set(uint64_t ctx);
uint64_t fk_tls_top(void);

/* Handle registry: ids are unique for the life of the process, never reused. */
uint64_t fk_handle_new(int kind, void *obj, fk_ctx *owner);
void *fk_handle_get(uint64_t id, int kind, const fk_ctx *owner); /* owner NULL: any */
void fk_handle_del(uint64_t id);
/* Ids of one kind owned by owner (NULL: all of that kind); malloc'd, caller frees. */
size_t fk_handle_list(int kind, const fk_ctx *owner, uint64_t **ids);

#define FK_H(id) ((uint64_t)(uintptr_t)(id))

uint64_t fk_now_ns(void);
const char *fk_err_name(CUresult rc);

#endif
