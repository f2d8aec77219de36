/*
 * The handshake: protocol version, token, who we are; the server answers with its
 * devices and every attribute of each, which the client keeps so that device queries
 * (torch asks on every allocation) never cross the wire again.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "errors.h"
#include "rg_log.h"
#include "rt.h"

static void program_name(char *out, size_t n)
{
	FILE *f = fopen("/proc/self/cmdline", "r");
	size_t len = f ? fread(out, 1, n - 1, f) : 0;
	if (f)
		fclose(f);
	out[len] = 0;
	for (size_t i = 0; i + 1 < len; i++)
		if (out[i] == 0)
			out[i] = ' ';
}

/* Capabilities that need the GPU in this host (mapping its memory, host and
 * device touching managed memory at once) are reported absent, whatever the
 * remote device can do locally; so are those libremote.so does not carry
 * across (IPC and export handles, sparse arrays, GPUDirect RDMA, external
 * semaphores, host memory pools). Managed memory itself works (managed.c), and
 * so does virtual memory management without export handles (drv_vmm.c): its
 * attribute is the server's. Both APIs answer from here (rt.h). */
int fe_rt_device_attr(const fe_device *d, int attr)
{
	switch (attr) {
	case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
		return 1;
	case CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID:
		return -1;
	case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
	case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
	case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS:
	case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES:
	case CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST:
	case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM:
	case CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_ONLY_PARTIAL_HOST_NATIVE_ATOMIC_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES:
	case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_HANDLE_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_KMT_HANDLE_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_SPARSE_CUDA_ARRAY_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_TIMELINE_SEMAPHORE_INTEROP_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS:
	case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING:
	case CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES:
	case CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_HOST_NUMA_MEMORY_POOLS_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_HOST_NUMA_MULTINODE_IPC_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_HOST_MEMORY_POOLS_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_HOST_ALLOC_DMA_BUF_SUPPORTED:
		return 0;
	}
	return d->attrs[attr];
}

static int attr(const fe_device *d, CUdevice_attribute a) { return fe_rt_device_attr(d, a); }

/* cudaDeviceProp from driver attributes, as the CUDA runtime builds it. */
static void build_prop(fe_device *d)
{
	struct cudaDeviceProp *p = &d->prop;
	memset(p, 0, sizeof(*p));
	snprintf(p->name, sizeof(p->name), "%s", d->name);
	memcpy(&p->uuid, d->uuid, sizeof(p->uuid));
	p->totalGlobalMem = d->total_mem;
	p->sharedMemPerBlock = (size_t)attr(d, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
	p->regsPerBlock = attr(d, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK);
	p->warpSize = attr(d, CU_DEVICE_ATTRIBUTE_WARP_SIZE);
	p->memPitch = (size_t)attr(d, CU_DEVICE_ATTRIBUTE_MAX_PITCH);
	p->maxThreadsPerBlock = attr(d, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
	p->maxThreadsDim[0] = attr(d, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X);
	p->maxThreadsDim[1] = attr(d, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y);
	p->maxThreadsDim[2] = attr(d, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z);
	p->maxGridSize[0] = attr(d, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X);
	p->maxGridSize[1] = attr(d, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y);
	p->maxGridSize[2] = attr(d, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z);
	p->totalConstMem = (size_t)attr(d, CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY);
	p->major = attr(d, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
	p->minor = attr(d, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
	p->textureAlignment = (size_t)attr(d, CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT);
	p->texturePitchAlignment = (size_t)attr(d, CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT);
	p->multiProcessorCount = attr(d, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
	p->integrated = attr(d, CU_DEVICE_ATTRIBUTE_INTEGRATED);
	/* Host memory of this process cannot be mapped into a GPU on another host. */
	p->canMapHostMemory = 0;
	p->maxTexture1D = attr(d, CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_WIDTH);
	p->maxTexture2D[0] = attr(d, CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_WIDTH);
	p->maxTexture2D[1] = attr(d, CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_HEIGHT);
	p->maxTexture3D[0] = attr(d, CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH);
	p->maxTexture3D[1] = attr(d, CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT);
	p->maxTexture3D[2] = attr(d, CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH);
	p->surfaceAlignment = (size_t)attr(d, CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT);
	p->concurrentKernels = attr(d, CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS);
	p->ECCEnabled = attr(d, CU_DEVICE_ATTRIBUTE_ECC_ENABLED);
	p->pciBusID = attr(d, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID);
	p->pciDeviceID = attr(d, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID);
	p->pciDomainID = attr(d, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID);
	p->tccDriver = attr(d, CU_DEVICE_ATTRIBUTE_TCC_DRIVER);
	p->asyncEngineCount = attr(d, CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT);
	p->unifiedAddressing = attr(d, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING);
	p->memoryBusWidth = attr(d, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
	p->l2CacheSize = attr(d, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
	p->persistingL2CacheMaxSize = attr(d, CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE);
	p->maxThreadsPerMultiProcessor = attr(d, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
	p->streamPrioritiesSupported = attr(d, CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED);
	p->globalL1CacheSupported = attr(d, CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED);
	p->localL1CacheSupported = attr(d, CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED);
	p->sharedMemPerMultiprocessor = (size_t)attr(d, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
	p->regsPerMultiprocessor = attr(d, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
	/* Managed memory works, coherent at the calls (managed.c); host and
	 * device touching it at once needs the GPU in this host. */
	p->managedMemory = 1;
	p->concurrentManagedAccess = 0;
	p->isMultiGpuBoard = attr(d, CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD);
	p->multiGpuBoardGroupID = attr(d, CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID);
	p->computePreemptionSupported = attr(d, CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED);
	p->cooperativeLaunch = attr(d, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH);
	p->sharedMemPerBlockOptin = (size_t)attr(d, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
	p->maxBlocksPerMultiProcessor = attr(d, CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR);
	p->accessPolicyMaxWindowSize = attr(d, CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE);
	p->reservedSharedMemPerBlock = (size_t)attr(d, CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK);
	p->hostRegisterSupported = attr(d, CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED);
	p->sparseCudaArraySupported = attr(d, CU_DEVICE_ATTRIBUTE_SPARSE_CUDA_ARRAY_SUPPORTED);
	p->memoryPoolsSupported = attr(d, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED);
	p->gpuDirectRDMASupported = attr(d, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED);
	p->clusterLaunch = attr(d, CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH);
	p->unifiedFunctionPointers = attr(d, CU_DEVICE_ATTRIBUTE_UNIFIED_FUNCTION_POINTERS);
	p->deviceNumaConfig = attr(d, CU_DEVICE_ATTRIBUTE_NUMA_CONFIG);
	p->deviceNumaId = attr(d, CU_DEVICE_ATTRIBUTE_NUMA_ID);
	p->mpsEnabled = attr(d, CU_DEVICE_ATTRIBUTE_MPS_ENABLED);
	p->hostNumaId = -1;
}

/* One device of the hello's reply, from index *i on (op_hello.c's layout). */
static int hello_device(const proto_view *v, uint32_t *pi, fe_device *d)
{
	uint32_t i = *pi, ordinal;
	int32_t lo, hi;
	const char *s;
	size_t n;
	const void *b;
	size_t bn;
	int bad = proto_arg_u32(v, i++, &ordinal);
	if (!bad && !(bad = proto_arg_str(v, i++, &s, &n)))
		snprintf(d->name, sizeof(d->name), "%.*s", (int)n, s);
	if (!bad && !(bad = proto_arg_bin(v, i++, &b, &bn)) && bn == sizeof(d->uuid))
		memcpy(d->uuid, b, bn);
	bad = bad || proto_arg_u64(v, i++, &d->total_mem);
	if (!bad && !(bad = proto_arg_bin(v, i++, &b, &bn)))
		memcpy(d->attrs, b, bn < sizeof(d->attrs) ? bn : sizeof(d->attrs));
	if (!bad && !(bad = proto_arg_str(v, i++, &s, &n)))
		snprintf(d->pci_bus_id, sizeof(d->pci_bus_id), "%.*s", (int)n, s);
	bad = bad || proto_arg_i32(v, i++, &lo) || proto_arg_i32(v, i++, &hi) || proto_arg_u64(v, i++, &d->peers);
	d->prio_least = lo;
	d->prio_greatest = hi;
	*pi = i;
	return bad;
}

/* What follows the devices: the software version (not read), the shm://
 * path the server offers ("" or absent: none) and its instance id (absent
 * from servers before the offer). */
static void hello_offer(const proto_view *v, uint32_t i, fe_hello_offer *o)
{
	const char *s;
	size_t n;
	const void *b;
	memset(o, 0, sizeof(*o));
	if (proto_arg_str(v, i + 1, &s, &n) == PROTO_OK && n > 0 && n < sizeof(o->shm_path)) {
		memcpy(o->shm_path, s, n);
		o->shm_path[n] = 0;
	}
	if (proto_arg_bin(v, i + 2, &b, &n) == PROTO_OK && n == sizeof(o->instance)) {
		memcpy(o->instance, b, n);
		o->has_instance = 1;
	}
}

int fe_hello(fe_device *devs, int max, int *ndev, fe_hello_offer *offer)
{
	fe_device *d = &devs[0];
	char host[256] = "", prog[512];
	gethostname(host, sizeof(host) - 1);
	program_name(prog, sizeof(prog));
	/* rdma+tls: the token went inside TLS; the cookie that admitted this
	 * connection stands for it (ticket.c). */
	const char *token = fe_conn_ticketed(d->conn) ? NULL : getenv("REMOTE_GPU_TOKEN");
	proto_msg m;
	proto_msg_begin(&m, PROTO_OP_HELLO, fe_conn_next_seq(d->conn), 5);
	proto_msg_u64(&m, PROTO_VERSION);
	proto_msg_str(&m, token ? token : "");
	proto_msg_u64(&m, (uint64_t)getpid());
	proto_msg_str(&m, host);
	proto_msg_str(&m, prog);
	fe_reply r;
	int st = fe_conn_call(d->conn, &m, NULL, 0, NULL, 0, &r);
	if (st != 0) {
		if (st == CUDA_ERROR_NOT_SUPPORTED || st == PROTO_EVERSION)
			LOG_ERROR("frontend", "%s speaks another protocol version (ours is %d): upgrade one side",
				  fe_conn_peer(d->conn), PROTO_VERSION);
		else if (st == PROTO_ETLS)
			LOG_ERROR("frontend", "%s takes only TLS connections: use REMOTE_GPU=tls://host:port",
				  fe_conn_peer(d->conn));
		else if (st == CUDA_ERROR_NOT_PERMITTED)
			LOG_ERROR("frontend", "%s refused the session: REMOTE_GPU_TOKEN does not match", fe_conn_peer(d->conn));
		else if (st == CUDA_ERROR_TOO_MANY_PEERS)
			LOG_ERROR("frontend", "%s refused the session: this token's tenant has its maximum of sessions "
				  "(remote-gpud --tenants)", fe_conn_peer(d->conn));
		else
			LOG_ERROR("frontend", "handshake with %s failed: %s (%d)", fe_conn_peer(d->conn), fe_status_name(st),
				  st);
		return st < 0 ? cudaErrorDevicesUnavailable : (st == CUDA_ERROR_NOT_PERMITTED ? cudaErrorNotPermitted : cudaErrorInitializationError);
	}
	const proto_view *v = &r.view;
	uint32_t i = PROTO_REPLY_FIRST, version, n = 0;
	int32_t drv;
	int bad = proto_arg_u32(v, i++, &version) || proto_arg_i32(v, i++, &drv) || proto_arg_u32(v, i++, &n) || n == 0;
	if (!bad && (int)n > max) {
		/* never a silent cut: the caller fails (cudaErrorInvalidValue is this case alone) */
		LOG_ERROR("frontend", "%s serves %u devices, more than the %d this client has left of its most, %d "
				      "(FE_MAX_DEVICES): shorten REMOTE_GPU",
			  fe_conn_peer(d->conn), n, max, FE_MAX_DEVICES);
		fe_reply_free(&r);
		return cudaErrorInvalidValue;
	}
	uint32_t use = n;
	fe_conn *chan = d->conn;
	for (uint32_t k = 0; k < use && !bad; k++) {
		fe_device *x = &devs[k];
		if (k > 0) {
			memset(x, 0, sizeof(*x));
			x->addr = d->addr;
			if (!(x->conn = fe_conn_view(chan, k))) {
				bad = 1;
				break;
			}
		}
		bad = hello_device(v, &i, x);
		x->remote = (int)k;
		x->nremote = (int)n;
		x->driver_version = drv;
	}
	if (!bad && offer)
		hello_offer(v, i, offer);
	/* After the offer: 1 if the server may ask this client to release cached
	 * memory (a batch tenant's session; release.c), so it listens while idle. */
	uint64_t listen = 0;
	if (!bad && proto_arg_u64(v, i + 3, &listen) == PROTO_OK && listen)
		fe_conn_expect_events(d->conn);
	fe_reply_free(&r);
	if (bad) {
		for (uint32_t k = 1; k < use; k++)
			if (devs[k].conn)
				fe_conn_close(devs[k].conn);
		LOG_ERROR("frontend", "malformed handshake reply from %s", fe_conn_peer(d->conn));
		return cudaErrorInitializationError;
	}
	fe_conn_enable_pings(d->conn);
	for (uint32_t k = 0; k < use; k++) {
		build_prop(&devs[k]);
		LOG_INFO("frontend", "remote device '%s' at %s (its device %u)", devs[k].name, fe_conn_peer(d->conn), k);
	}
	*ndev = (int)use;
	return cudaSuccess;
}
