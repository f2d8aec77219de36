/*
 * Internals shared by the runtime API files (rt_*.c): the per-process client state,
 * error bookkeeping with CUDA's sticky/non-sticky rules, and the mapping between the
 * handles the program sees and the ids on the wire.
 */
#ifndef FE_RT_H
#define FE_RT_H

#include <pthread.h>
#include <stdint.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "conn.h"

#define FE_MAX_DEVICES 16
/* Copies are cut into frames of this size so the wire and the server's PCIe copy
 * overlap (the server copies chunk k while chunk k+1 arrives). */
#define FE_COPY_CHUNK (4u << 20)

/* One device the program sees: a device of one of REMOTE_GPU's servers. The
 * devices of one server share its session (conn: views of one channel,
 * fe_conn_view), in the server's order. */
typedef struct fe_device {
	transport_addr addr;
	fe_conn *conn;
	int remote;     /* its index among the server's devices (the frames' device) */
	int first;      /* the slot of the server's device 0 in REMOTE_GPU's list (names the server) */
	int ordinal;    /* its ordinal in the program (after CUDA_VISIBLE_DEVICES); -1: not visible */
	int nremote;    /* how many devices the server serves */
	uint64_t peers; /* bit j: it can access the server's device j (the server's driver says) */
	int driver_version;
	char name[256];
	uint8_t uuid[16];
	uint64_t total_mem;
	int32_t attrs[CU_DEVICE_ATTRIBUTE_MAX];
	char pci_bus_id[32];
	int prio_least, prio_greatest;
	struct cudaDeviceProp prop;
} fe_device;

/* Enter a runtime call on the current device: initialises the client on first use,
 * returns the sticky error if one is set. */
cudaError_t fe_rt_enter(fe_conn **c);
/* Leave with the result of a forwarded call: maps channel errors, surfaces an
 * async error the server latched, records the thread's last error. */
cudaError_t fe_rt_leave(int status);
/* Record and return a locally detected error. */
cudaError_t fe_rt_fail(cudaError_t e);

#include "stats.h"
/* Statistics and traces (stats.h) see each call here, under the name and caller
 * of the function the macro is used in: the API entry point, or the site that a
 * helper shared by several entry points was handed (FE_API_SITE). Off, each is
 * one predicted branch. */
#define fe_rt_enter(c) (FE_OBS_ENTER(__func__, __builtin_return_address(0)), (fe_rt_enter)(c))
#define fe_rt_enter_site(c, site) (FE_OBS_ENTER((site).fn, (site).ra), (fe_rt_enter)(c))
#define fe_rt_leave(st) ((cudaError_t)fe_obs_leave_ret((fe_rt_leave)(st)))

/* What a file forgets when sessions end: dev >= 0, that device's (cudaDeviceReset,
 * cuDevicePrimaryCtxReset: a new session); FE_RT_FORK, every one (the child after
 * fork starts over). Files register from a constructor (fe_rt_on_forget), so
 * rt_state.c calls no file above it by name. */
#define FE_RT_FORK (-1)
typedef void (*fe_rt_forget_fn)(int dev);
void fe_rt_on_forget(fe_rt_forget_fn fn);

int fe_rt_device_count(void);
/* Whether ordinals a and b are devices of one server (one session). */
int fe_rt_same_server(int a, int b);
fe_device *fe_rt_device(int ordinal); /* NULL if out of range or not initialised */
/* An attribute (0 < attr < CU_DEVICE_ATTRIBUTE_MAX) as both APIs answer it: the
 * server's value, less what cannot work across hosts (rt_hello.c). */
int fe_rt_device_attr(const fe_device *d, int attr);
int fe_rt_current_device(void);
void fe_rt_set_current_device(int ordinal);
cudaError_t fe_rt_init(void);
/* cudaDeviceReset of one device: a fresh session, the old one's state forgotten. */
cudaError_t fe_rt_reset_device(int ordinal);
/* The device whose primary context the runtime layer has made current on this
 * thread (at its first call that needs the device, outside driver entry
 * points), -1 for none; unbind: the driver changed the thread's context. Used:
 * the runtime layer has used the device (its primary context is active). */
int fe_rt_thread_bound(void);
void fe_rt_thread_unbind(void);
int fe_rt_device_used(int ordinal);

/* Handle <-> wire id. Streams 0, cudaStreamLegacy and cudaStreamPerThread are the
 * NULL stream (id 0): the server runs one executor per session, so per-thread
 * default streams collapse into the legacy one (documented limitation). */
uint64_t fe_rt_stream(cudaStream_t s);
uint64_t fe_rt_event(cudaEvent_t e);
uint64_t fe_rt_gexec(cudaGraphExec_t x);
uint64_t fe_rt_new_id(void);

/* Device allocations (client view: address ranges), for cudaMemcpyDefault,
 * cudaPointerGetAttributes and local range checks. */
enum fe_mem_kind {
	FE_MEM_DEVICE = 1,
	FE_MEM_HOST_PINNED = 2,
	FE_MEM_HOST_REGISTERED = 3,
	FE_MEM_MODULE = 4,
	FE_MEM_MANAGED = 5, /* device memory mapped here too (managed.c) */
};
typedef struct fe_range {
	uint64_t base, size;
	int kind;
	int device;
	uint64_t id;    /* unique for the process's life, never reused (CU_POINTER_ATTRIBUTE_BUFFER_ID) */
	uint64_t pool;  /* stream-ordered allocations: the cudaMemPool_t they came from; 0 otherwise */
	unsigned flags; /* host memory: cudaHostAllocWriteCombined, cudaHostRegisterPortable if asked for */
} fe_range;
/* flags of a FE_MEM_DEVICE range mapped with cuMemMap (drv_vmm.c): not freeable,
 * and mapped ranges back to back are one range for fe_mem_find's len. */
#define FE_MEM_VMM 0x80000000u
void fe_mem_add(uint64_t base, uint64_t size, int kind, int device);
void fe_mem_add_tagged(uint64_t base, uint64_t size, int kind, int device, uint64_t pool, unsigned flags);
int fe_mem_remove(uint64_t base, int kind, fe_range *out); /* 0 if it was the start of a range */
/* Range containing [p, p+len); 0 if found. */
int fe_mem_find(uint64_t p, uint64_t len, fe_range *out);
/* The first range (by base) that [p, p+len) overlaps; 0 if there is one. */
int fe_mem_overlap(uint64_t p, uint64_t len, fe_range *out);
/* The kind of memory p lies in (FE_MEM_*), 0 for memory this process owns. */
int fe_mem_kind(const void *p);
/* Memory of that kind is on the device (allocated, a module global, managed). */
static inline int fe_mem_kind_device(int kind)
{
	return kind == FE_MEM_DEVICE || kind == FE_MEM_MODULE || kind == FE_MEM_MANAGED;
}
/* [p, p + len) lies in one range of device memory (allocated, a module global,
 * managed): what a copy may touch on the device side. */
int fe_mem_device_ok(const void *p, size_t len);
/* Whether a memset or device copy of [p, p + len) on stream sid is recorded as
 * asked though the range is no device memory of this program: sid captures
 * (the driver records it; rt_copy.c). */
int fe_mem_captured(const void *p, size_t len, uint64_t sid);
/* st, or a synchronous copy's or memset's wait for stream sid when its
 * destination dst is mapped host memory (rt_copy.c). */
int fe_copy_settle_mapped(fe_conn *c, const void *dst, uint64_t sid, int async, int st);
/* Stream-ordered operations on pinned or registered host memory (host_ops.c).
 * fe_host_pinned: [p, p + len) lies in one such range. fe_host_memset: a
 * memset of it (width in elements of elem bytes, rows pitch bytes apart);
 * fe_host_copy: a host-to-host copy touching it; each runs here in the
 * stream's order, sync: waits for it. Both call the runtime's entry points, so
 * the caller returns their result as it is. fe_host_pending: one of them has
 * not run yet (a copy that reads pinned memory waits for its stream first). */
int fe_host_pinned(const void *p, size_t len);
cudaError_t fe_host_memset(void *p, size_t pitch, uint32_t value, uint32_t elem, size_t width, size_t height,
			   cudaStream_t stream, int sync);
cudaError_t fe_host_copy(void *dst, const void *src, size_t n, cudaStream_t stream, int sync);
int fe_host_pending(void);

/* The handshake (rt_hello.c): devs[0].conn is open; fills devs[0 .. *ndev)
 * (at most max). offer (may be NULL): what the server offers beyond its
 * devices, a shm:// socket for a client on its host and its instance id. */
typedef struct fe_hello_offer {
	char shm_path[108];
	uint8_t instance[16];
	int has_instance;
} fe_hello_offer;
int fe_hello(fe_device *devs, int max, int *ndev, fe_hello_offer *offer);
/* A tcp session of d[0 .. *n) whose hello offered a shm:// socket moves
 * there when it can (rt_upgrade.c); otherwise it stays as it is. */
void fe_upgrade_shm(fe_device *d, int max, int *n, const fe_hello_offer *o, fe_hostfn_cb hostfn);

/* Pinned memory in shared regions, when a server is reached over shm
 * (host_region.c): fe_region_alloc answers NULL when none is (or the memory
 * cannot be made); fe_region_free returns 0 for memory it did not make. A
 * copy whose host side lies in a region shared with c's server goes as a
 * region copy: fe_region_copy returns 1 with its status in *st, else 0. */
void *fe_region_alloc(size_t size);
/* The same, shared with c's server alone (host_bounce.c's buffers). */
void *fe_region_alloc_conn(fe_conn *c, size_t size);
int fe_region_free(void *p);
/* A synchronous copy of pageable memory over shm, of FE_BOUNCE_MIN bytes or
 * more, through a region of c's server (host_bounce.c): 1 with its status in
 * *st, or 0 (the caller copies through the rings). */
#define FE_BOUNCE_MIN (1u << 20)
/* A synchronous copy to the device from a shared region of fewer bytes than
 * this goes as bytes in frames (returns once sent, as over tcp), not as a
 * region copy (waits for the DMA): REMOTE_GPU_REGION_SYNC_MIN, default 1 MiB,
 * 0: every one a region copy (host_region.c). */
size_t fe_region_sync_min(void);
int fe_bounce_copy(fe_conn *c, int to_device, uint64_t dptr, void *host, size_t len, uint64_t sid, int *st);
int fe_region_copy(fe_conn *c, int to_device, uint64_t dptr, const void *host, size_t len, uint64_t sid, int async,
		   int *st);
/* The share of [p, p+len) with c's server: 1 and its region id and offset. */
int fe_region_find(fe_conn *c, const void *p, size_t len, uint32_t *id, uint64_t *off);
/* memcpy of large buffers split across REMOTE_GPU_COPY_THREADS threads, the
 * caller's included (par_copy.c); smaller ones are a plain memcpy. */
void fe_par_memcpy(void *dst, const void *src, size_t n);

/* Between devices (rt_peer.c): a copy of n bytes from srcdev's memory to
 * dstdev's (on one server by its driver, else staged through this process),
 * and peer access of dev's context to peer's memory (enable 0: disable). */
cudaError_t fe_peer_copy(fe_api_site site, void *dst, int dstdev, const void *src, int srcdev, size_t n,
			 cudaStream_t stream, int async);
cudaError_t fe_peer_access(int dev, int peer, int enable, unsigned flags);
/* Whether device dev can access peer's memory (rt_peer.c). */
int fe_peer_can(int dev, int peer);

/* The pool cudaMallocAsync on a device allocates from (rt_mempool.c), as this
 * process last set or read it (forgotten with the session, fe_rt_on_forget). */
cudaMemPool_t fe_mempool_current(int device);

/* Copies between a host buffer and device memory (copy_bytes.c): chunked; to
 * the host pipelined, or detached when async. */
int fe_copy_htod(fe_conn *c, uint64_t dst, const uint8_t *src, size_t len, uint64_t sid);
int fe_copy_dtoh(fe_conn *c, uint8_t *dst, uint64_t src, size_t len, uint64_t sid, int async);

/* CUDA arrays (rt_array.c). A client's cudaArray_t is an id; the record keeps
 * what copies and texture objects need to know of it without asking. */
typedef struct fe_array {
	uint64_t id;
	int device;
	struct cudaChannelFormatDesc desc;
	struct cudaExtent extent; /* as created: height, depth 0 below 2D, 3D */
	unsigned flags;
	unsigned format, channels; /* the driver's CUarray_format and channel count */
	uint32_t elem;             /* bytes per element */
	struct fe_array *next;
} fe_array;
/* A copy of the record of a, or cudaErrorInvalidResourceHandle. */
cudaError_t fe_array_get(cudaArray_const_t a, fe_array *out);
/* The driver's format, channel count and element size of a channel descriptor:
 * cudaErrorInvalidChannelDescriptor, or cudaErrorNotSupported for the kinds not
 * taken here (normalized, block-compressed, NV12). */
cudaError_t fe_channel_format(const struct cudaChannelFormatDesc *d, unsigned *format, unsigned *channels,
			      uint32_t *elem);
/* cudaMemcpy3D(Async) when one side is an array (rt_copy.c hands it over). */
cudaError_t fe_memcpy3d_array(fe_api_site site, const struct cudaMemcpy3DParms *m, cudaStream_t stream);
/* The inverse of fe_channel_format (driver entry points, drv_array.c):
 * cudaErrorInvalidValue for a channel count other than 1, 2, 4 or a format the
 * driver does not define, cudaErrorNotSupported (logged) for one not taken here. */
cudaError_t fe_channel_desc(unsigned format, unsigned channels, struct cudaChannelFormatDesc *d, uint32_t *elem);
/* One side of a copy with an array: the array and the box's origin (x in
 * bytes, y in rows, z in slices), or a pointer: the box's first byte, its row
 * pitch and rows per slice (dev is set from the copy's kind). */
typedef struct fe_array_side {
	fe_array a;
	int is_array, dev;
	uint64_t x, y, z;
	char *p;
	size_t pitch, rows;
} fe_array_side;
/* A box of w bytes x h rows x d slices between two sides, at least one an
 * array, checked as the runtime's array copies are (driver entry points:
 * drv_array.c). */
cudaError_t fe_array_copy(fe_api_site site, fe_array_side *dst, fe_array_side *src, size_t w, size_t h, size_t d,
			  enum cudaMemcpyKind kind, cudaStream_t stream);
/* Texture and surface objects (rt_texture.c). */
/* From the driver's descriptors (drv_texture.c): create (view may be NULL),
 * destroy (value 0: nothing to do), and the descriptors of a live object of
 * the kind (any out pointer may be NULL; a view is left as it was if none was
 * given, as the driver does). A runtime-made object answers the driver's
 * descriptors its own were turned into, and the other way round. */
cudaError_t fe_texobj_create(fe_api_site site, uint64_t *out, int surface, const CUDA_RESOURCE_DESC *res,
			     const CUDA_TEXTURE_DESC *tex, const CUDA_RESOURCE_VIEW_DESC *view);
cudaError_t fe_texobj_destroy(fe_api_site site, uint64_t value, int surface);
cudaError_t fe_texobj_get(fe_api_site site, uint64_t value, int surface, CUDA_RESOURCE_DESC *res,
			  CUDA_TEXTURE_DESC *tex, CUDA_RESOURCE_VIEW_DESC *view);

/* A kernel's arguments packed by its parameter layout, for its server function
 * on the current device, after a launch's checks (rt_module.c): launches and
 * kernel graph nodes. The error, if any, is already recorded; fe_kargs_free
 * after sending. */
typedef struct fe_kargs {
	uint64_t func_id;
	uint8_t *buf; /* small, or malloc'd */
	uint32_t len;
	uint32_t nparams;
	const uint32_t *off; /* each parameter's offset in buf (the kernel's, kept for good) */
	uint8_t small[1024];
} fe_kargs;
cudaError_t fe_kernel_pack(fe_conn *c, const void *func, dim3 g, dim3 b, void **args, size_t shmem, fe_kargs *out);
void fe_kargs_free(fe_kargs *a);

/* Host functions (rt_hostfn.c): one called once (cudaLaunchHostFunc), one
 * of a host node (called at every replay until the server forgets it, or
 * dropped when the call that named it failed); a host node's function. 0: no
 * memory. The receiver's handler of hostfn (gone 0) and hostfn_forget (gone 1)
 * events is registered from a constructor (fe_rt_on_hostfn): every channel
 * rt_state.c opens gets it. */
void fe_rt_on_hostfn(fe_hostfn_cb fn);
uint64_t fe_hostfn_register(void (*fn)(void *), void *data, uint64_t after_seq);
/* 1 on the thread that runs host functions (its stream waits for it). */
int fe_hostfn_in_thread(void);
uint64_t fe_hostnode_register(void (*fn)(void *), void *data);
void fe_hostnode_drop(uint64_t id);
int fe_hostnode_lookup(uint64_t id, void (**fn)(void *), void **data);

/* Stream capture state known on the client from begin/end capture calls. */
int fe_stream_capturing(uint64_t sid);
/* Before a "potentially unsafe" call (allocations, frees, pinned host memory,
 * synchronous copies): cudaErrorStreamCaptureUnsupported where the captures
 * under way and the calling thread's mode forbid it, and those captures
 * invalidated (rt_stream.c). */
cudaError_t fe_capture_unsafe(void);
/* The calling thread's capture mode; the session's executor put in relaxed
 * mode once, before its first capture (rt_capture_mode.c). */
enum cudaStreamCaptureMode fe_capture_mode_current(void);
int fe_capture_mode_relax(fe_conn *c);

#endif
