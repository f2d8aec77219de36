/*
 * launch.c: kernel launches, the launch log, emulated test kernels, host functions,
 * occupancy.
 *
 * A launch is checked as a driver checks it (function of this context, grid and block
 * within the device's limits, dynamic shared memory within the function's limit, a
 * complete parameter list), then its parameters are packed by the layout the cubin
 * declares: byte i of the packed buffer is byte i of the kernel's parameter space,
 * with gaps between parameters zero, whether they came as kernelParams or as one
 * CU_LAUNCH_PARAM_BUFFER_POINTER buffer. The packed launch becomes a stream operation
 * (fk_op), run at once or recorded by a capture.
 *
 * Running a launch appends one line to the file named by FAKECUDA_LAUNCH_LOG (opened
 * with O_APPEND for each line, written with one write(), so lines from several
 * threads or processes do not interleave):
 *
 *   launch <kernel> grid=X,Y,Z block=X,Y,Z shmem=N params=<hex of the packed bytes>
 *
 * and, for the kernels below, does what the kernel does, on the host. Their pointer
 * arguments must lie inside allocations of the context; if not, the kernel "faults":
 * the context's sticky error becomes CUDA_ERROR_ILLEGAL_ADDRESS. The launch itself
 * returns CUDA_SUCCESS, as an asynchronous launch on a GPU does; the fault shows at
 * the next call. Emulation covers the whole range n, whatever the grid.
 *
 *   rgtest_fill_u32(unsigned *p, unsigned v, unsigned long long n)  p[i] = v
 *   rgtest_add_f32(const float *a, const float *b, float *c, int n) c[i] = a[i] + b[i]
 *   rgtest_scale_f32(float *p, float s, int n)                      p[i] *= s
 *   rgtest_fault(int *p)                                            always faults
 *   rgtest_print_i32(int v)                                         device printf of
 *                                                                   "rgtest_print_i32 <v>\n"
 *
 * Device printf: the text a kernel prints waits in the context until a
 * synchronisation (context, stream or event synchronize, the context's
 * destruction), which writes it to the process's stdout through stdio, as the
 * driver flushes its printf buffer.
 */
#include "fake.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FK_EXTRA_MAX 64 /* entries of an extra[] list looked at before giving up */
/* cuda.h keeps CU_LAUNCH_ATTRIBUTE_MAX to the driver's own build */
#define FK_LAUNCH_ATTRIBUTE_END (CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING + 1)

typedef struct emu {
	const char *name;
	uint32_t nparams;
	uint32_t sizes[4];
	void (*run)(fk_ctx *c, const uint8_t *const *arg);
} emu;

static void emu_fill_u32(fk_ctx *c, const uint8_t *const *arg);
static void emu_add_f32(fk_ctx *c, const uint8_t *const *arg);
static void emu_scale_f32(fk_ctx *c, const uint8_t *const *arg);
static void emu_fault(fk_ctx *c, const uint8_t *const *arg);
static void emu_print_i32(fk_ctx *c, const uint8_t *const *arg);

static const emu emus[] = {
	{ "rgtest_fill_u32", 3, { 8, 4, 8 }, emu_fill_u32 },
	{ "rgtest_add_f32", 4, { 8, 8, 8, 4 }, emu_add_f32 },
	{ "rgtest_scale_f32", 3, { 8, 4, 4 }, emu_scale_f32 },
	{ "rgtest_fault", 1, { 8 }, emu_fault },
	{ "rgtest_print_i32", 1, { 4 }, emu_print_i32 },
};

/* ---- emulated kernels ---- */

static void emu_print_i32(fk_ctx *c, const uint8_t *const *arg)
{
	int32_t v;
	char line[48];
	memcpy(&v, arg[0], 4);
	int n = snprintf(line, sizeof line, "rgtest_print_i32 %d\n", (int)v);
	char *b = realloc(c->printf_buf, c->printf_len + (size_t)n);
	if (!b)
		return; /* lost, as a full device printf buffer loses text */
	memcpy(b + c->printf_len, line, (size_t)n);
	c->printf_buf = b;
	c->printf_len += (size_t)n;
}

void fk_printf_flush(fk_ctx *c)
{
	if (c->printf_len)
		fwrite(c->printf_buf, 1, c->printf_len, stdout);
	free(c->printf_buf);
	c->printf_buf = NULL;
	c->printf_len = 0;
}

static uint64_t arg_u64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

static uint32_t arg_u32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

static void fault(fk_ctx *c)
{
	c->sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
}

/* Whether n elements of 4 bytes at p lie inside one allocation. */
static int range4_ok(fk_ctx *c, uint64_t p, uint64_t n)
{
	return n <= SIZE_MAX / 4 && fk_range_ok(c, (uintptr_t)p, (size_t)n * 4);
}

static void emu_fill_u32(fk_ctx *c, const uint8_t *const *arg)
{
	uint64_t p = arg_u64(arg[0]), n = arg_u64(arg[2]);
	uint32_t v = arg_u32(arg[1]);

	if (!range4_ok(c, p, n)) {
		fault(c);
		return;
	}
	for (uint64_t i = 0; i < n; i++)
		memcpy((uint8_t *)(uintptr_t)p + 4 * i, &v, 4);
}

static void emu_add_f32(fk_ctx *c, const uint8_t *const *arg)
{
	uint64_t a = arg_u64(arg[0]), b = arg_u64(arg[1]), d = arg_u64(arg[2]);
	int32_t n = (int32_t)arg_u32(arg[3]);

	if (n <= 0)
		return;
	if (!range4_ok(c, a, (uint64_t)n) || !range4_ok(c, b, (uint64_t)n) ||
	    !range4_ok(c, d, (uint64_t)n)) {
		fault(c);
		return;
	}
	for (int32_t i = 0; i < n; i++) {
		float x, y;
		memcpy(&x, (uint8_t *)(uintptr_t)a + 4 * (size_t)i, 4);
		memcpy(&y, (uint8_t *)(uintptr_t)b + 4 * (size_t)i, 4);
		x += y;
		memcpy((uint8_t *)(uintptr_t)d + 4 * (size_t)i, &x, 4);
	}
}

static void emu_scale_f32(fk_ctx *c, const uint8_t *const *arg)
{
	uint64_t p = arg_u64(arg[0]);
	float s;
	int32_t n = (int32_t)arg_u32(arg[2]);

	memcpy(&s, arg[1], 4);
	if (n <= 0)
		return;
	if (!range4_ok(c, p, (uint64_t)n)) {
		fault(c);
		return;
	}
	for (int32_t i = 0; i < n; i++) {
		float x;
		memcpy(&x, (uint8_t *)(uintptr_t)p + 4 * (size_t)i, 4);
		x *= s;
		memcpy((uint8_t *)(uintptr_t)p + 4 * (size_t)i, &x, 4);
	}
}

static void emu_fault(fk_ctx *c, const uint8_t *const *arg)
{
	fault(c);
}

static void emulate(fk_ctx *c, const fk_func *fn, const uint8_t *args)
{
	for (size_t i = 0; i < sizeof emus / sizeof emus[0]; i++) {
		const emu *e = &emus[i];
		const uint8_t *arg[4];

		if (strcmp(e->name, fn->name) != 0)
			continue;
		/* Emulate only a kernel whose layout is the one declared above; one of the
		 * same name with other parameters is just logged. */
		if (fn->nparams != e->nparams)
			return;
		for (uint32_t j = 0; j < e->nparams; j++) {
			if (fn->params[j].size != e->sizes[j])
				return;
			arg[j] = args + fn->params[j].offset;
		}
		e->run(c, arg);
		return;
	}
}

/* ---- the launch log ---- */

static void log_launch(const fk_func *fn, const fk_op *op)
{
	static const char hex[] = "0123456789abcdef";
	const char *path = getenv("FAKECUDA_LAUNCH_LOG");
	char head[160];
	int fd, n;

	if (!path || !*path)
		return;
	n = snprintf(head, sizeof head, " grid=%u,%u,%u block=%u,%u,%u shmem=%u params=",
	             op->u.k.grid[0], op->u.k.grid[1], op->u.k.grid[2], op->u.k.block[0],
	             op->u.k.block[1], op->u.k.block[2], op->u.k.shmem);
	size_t name_len = strlen(fn->name);
	size_t len = 7 + name_len + (size_t)n + 2 * op->u.k.nargs + 1;
	char *line = malloc(len);
	if (!line)
		return;
	char *w = line;
	memcpy(w, "launch ", 7);
	w += 7;
	memcpy(w, fn->name, name_len);
	w += name_len;
	memcpy(w, head, (size_t)n);
	w += n;
	for (size_t i = 0; i < op->u.k.nargs; i++) {
		*w++ = hex[op->u.k.args[i] >> 4];
		*w++ = hex[op->u.k.args[i] & 15];
	}
	*w++ = '\n';

	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd >= 0) {
		if (write(fd, line, len) != (ssize_t)len) {
			/* a log that cannot be written is the test's to notice */
		}
		close(fd);
	}
	free(line);
}

/* FAKECUDA_KERNEL_MS: a long kernel. Streams run eagerly, so the call that
 * executes it (the launch, a graph launch) takes that long: what a client of a
 * server busy with a long kernel must wait out (tests/e2e/liveness.sh). */
static void kernel_delay(void)
{
	const char *v = getenv("FAKECUDA_KERNEL_MS");
	long ms = v ? strtol(v, NULL, 10) : 0;
	if (ms > 0) {
		struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
		while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
			;
	}
}

CUresult fk_kernel_run(fk_ctx *c, const fk_op *op)
{
	fk_func *fn = fk_handle_get(op->u.k.func, FK_FUNC, c);

	/* A graph may outlive the module of one of its kernels. */
	if (!fn)
		return CUDA_ERROR_INVALID_HANDLE;
	log_launch(fn, op);
	emulate(c, fn, op->u.k.args);
	kernel_delay();
	return CUDA_SUCCESS;
}

/* ---- occupancy ---- */

/* Resident blocks per SM for a block size, from threads, registers (FK_FUNC_NUM_REGS
 * per thread, allocated per warp in units of 256) and shared memory. */
static int occupancy(size_t static_shmem, int block, size_t dyn)
{
	if (block <= 0 || block > FK_MAX_THREADS_PER_BLOCK ||
	    static_shmem + dyn > FK_SHARED_PER_BLOCK_OPTIN)
		return 0;
	int warps = (block + 31) / 32;
	int by_threads = FK_MAX_THREADS_PER_SM / (warps * 32);
	int regs_per_warp = (FK_FUNC_NUM_REGS * 32 + 255) / 256 * 256;
	int by_regs = FK_REGS_PER_SM / (regs_per_warp * warps);
	int by_smem = (int)(FK_SHARED_PER_SM / (static_shmem + dyn + FK_RESERVED_SHARED_PER_BLOCK));
	int n = FK_MAX_BLOCKS_PER_SM;
	if (by_threads < n)
		n = by_threads;
	if (by_regs < n)
		n = by_regs;
	if (by_smem < n)
		n = by_smem;
	return n;
}

static CUresult max_active(int *numBlocks, CUfunction func, int blockSize, size_t dyn,
                           unsigned flags, const char *name)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	fk_func *fn = rc == CUDA_SUCCESS ? fk_func_get(c, func) : NULL;

	if (rc == CUDA_SUCCESS && !fn)
		rc = CUDA_ERROR_INVALID_HANDLE;
	else if (rc == CUDA_SUCCESS && (!numBlocks || blockSize <= 0 ||
	                                (flags & ~(unsigned)CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE)))
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS)
		*numBlocks = occupancy(fn->static_shmem, blockSize, dyn);
	return fk_end(rc, name, "%d, %zu -> %d", blockSize, dyn,
	              rc == CUDA_SUCCESS ? *numBlocks : -1);
}

CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, CUfunction func,
                                                             int blockSize,
                                                             size_t dynamicSMemSize)
{
	return max_active(numBlocks, func, blockSize, dynamicSMemSize, 0, __func__);
}

CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
	int *numBlocks, CUfunction func, int blockSize, size_t dynamicSMemSize,
	unsigned int flags)
{
	return max_active(numBlocks, func, blockSize, dynamicSMemSize, flags, __func__);
}

/* Clusters: as many whole clusters as the resident blocks of all
 * multiprocessors make; the largest cluster size is the portable 8. */
static CUresult clusters(int *out, CUfunction func, const CUlaunchConfig *config, int potential, const char *name)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	fk_func *fn = rc == CUDA_SUCCESS ? fk_func_get(c, func) : NULL;
	unsigned size = 1;

	if (rc == CUDA_SUCCESS && !fn)
		rc = CUDA_ERROR_INVALID_HANDLE;
	else if (rc == CUDA_SUCCESS && (!out || !config || (config->numAttrs && !config->attrs)))
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc != CUDA_SUCCESS)
		return fk_end(rc, name, NULL);
	for (unsigned i = 0; i < config->numAttrs; i++)
		if (config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
			size = config->attrs[i].value.clusterDim.x * config->attrs[i].value.clusterDim.y *
			       config->attrs[i].value.clusterDim.z;
	int threads = (int)(config->blockDimX * config->blockDimY * config->blockDimZ);
	if (potential)
		*out = 8;
	else
		*out = size ? occupancy(fn->static_shmem, threads, config->sharedMemBytes) * FK_SM_COUNT / (int)size : 0;
	return fk_end(rc, name, "-> %d", *out);
}

CUresult CUDAAPI cuOccupancyMaxActiveClusters(int *numClusters, CUfunction func, const CUlaunchConfig *config)
{
	return clusters(numClusters, func, config, 0, __func__);
}

CUresult CUDAAPI cuOccupancyMaxPotentialClusterSize(int *clusterSize, CUfunction func, const CUlaunchConfig *config)
{
	return clusters(clusterSize, func, config, 1, __func__);
}

static CUresult potential_block(int *minGridSize, int *blockSize, CUfunction func,
                                CUoccupancyB2DSize b2d, size_t dyn, int limit,
                                unsigned flags, const char *name)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	fk_func *fn = rc == CUDA_SUCCESS ? fk_func_get(c, func) : NULL;
	size_t static_shmem = 0;
	int max_dyn = 0, best_bs = 0, best_blocks = 0, best_occ = 0;

	if (rc == CUDA_SUCCESS && !fn)
		rc = CUDA_ERROR_INVALID_HANDLE;
	else if (rc == CUDA_SUCCESS && (!minGridSize || !blockSize ||
	                                (flags & ~(unsigned)CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE)))
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc != CUDA_SUCCESS)
		return fk_end(rc, name, NULL);
	static_shmem = fn->static_shmem;
	max_dyn = fn->max_dyn_shmem;
	/* The callback is the caller's code: run it without the lock. */
	pthread_mutex_unlock(&fk_mu);

	if (limit <= 0 || limit > FK_MAX_THREADS_PER_BLOCK)
		limit = FK_MAX_THREADS_PER_BLOCK;
	/* multiples of a warp from the limit down, or just the limit below one warp */
	for (int bs = limit >= 32 ? limit - limit % 32 : limit; bs > 0;
	     bs = bs >= 64 ? bs - 32 : 0) {
		size_t d = b2d ? b2d(bs) : dyn;
		if (d > (size_t)max_dyn)
			continue;
		int blocks = occupancy(static_shmem, bs, d);
		if (blocks * bs > best_occ) {
			best_occ = blocks * bs;
			best_bs = bs;
			best_blocks = blocks;
		}
	}
	*blockSize = best_bs;
	*minGridSize = best_blocks * FK_SM_COUNT;

	pthread_mutex_lock(&fk_mu);
	return fk_end(CUDA_SUCCESS, name, "limit %d -> block %d, grid %d", limit, best_bs,
	              best_blocks * FK_SM_COUNT);
}

CUresult CUDAAPI cuOccupancyMaxPotentialBlockSize(int *minGridSize, int *blockSize,
                                                  CUfunction func,
                                                  CUoccupancyB2DSize blockSizeToDynamicSMemSize,
                                                  size_t dynamicSMemSize, int blockSizeLimit)
{
	return potential_block(minGridSize, blockSize, func, blockSizeToDynamicSMemSize,
	                       dynamicSMemSize, blockSizeLimit, 0, __func__);
}

CUresult CUDAAPI cuOccupancyMaxPotentialBlockSizeWithFlags(
	int *minGridSize, int *blockSize, CUfunction func,
	CUoccupancyB2DSize blockSizeToDynamicSMemSize, size_t dynamicSMemSize,
	int blockSizeLimit, unsigned int flags)
{
	return potential_block(minGridSize, blockSize, func, blockSizeToDynamicSMemSize,
	                       dynamicSMemSize, blockSizeLimit, flags, __func__);
}

/* ---- launching ---- */

static CUresult pack_args(const fk_func *fn, void **params, void **extra, uint8_t **out)
{
	uint8_t *buf = NULL;
	const uint8_t *ebuf = NULL;
	size_t esize = 0;
	int have_size = 0;

	*out = NULL;
	if (params && extra)
		return CUDA_ERROR_INVALID_VALUE;
	if (extra) {
		size_t i;
		for (i = 0; i < FK_EXTRA_MAX && extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
			if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) {
				ebuf = extra[i + 1];
			} else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) {
				if (!extra[i + 1])
					return CUDA_ERROR_INVALID_VALUE;
				esize = *(size_t *)extra[i + 1];
				have_size = 1;
			} else {
				return CUDA_ERROR_INVALID_VALUE;
			}
		}
		if (i >= FK_EXTRA_MAX)
			return CUDA_ERROR_INVALID_VALUE;
		if (fn->argsize && (!ebuf || !have_size || esize < fn->argsize))
			return CUDA_ERROR_INVALID_VALUE;
	} else if (!params && fn->nparams) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (!fn->argsize)
		return CUDA_SUCCESS;
	if (!(buf = calloc(1, fn->argsize)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (uint32_t i = 0; i < fn->nparams; i++) {
		const cubin_param *p = &fn->params[i];
		const void *src = params ? params[i] : ebuf + p->offset;
		if (!src) {
			free(buf);
			return CUDA_ERROR_INVALID_VALUE;
		}
		memcpy(buf + p->offset, src, p->size);
	}
	*out = buf;
	return CUDA_SUCCESS;
}

CUresult fk_kernel_op(fk_ctx *c, CUfunction f, const unsigned grid[3], const unsigned block[3],
                      unsigned shmem, void **params, void **extra, int coop, fk_op *op)
{
	fk_func *fn = fk_func_get(c, f);
	uint8_t *args;
	CUresult rc;

	if (!fn)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!grid[0] || !grid[1] || !grid[2] || !block[0] || !block[1] || !block[2])
		return CUDA_ERROR_INVALID_VALUE;
	if (grid[0] > 2147483647u || grid[1] > 65535 || grid[2] > 65535 || block[0] > 1024 ||
	    block[1] > 1024 || block[2] > 64 ||
	    (uint64_t)block[0] * block[1] * block[2] > FK_MAX_THREADS_PER_BLOCK)
		return CUDA_ERROR_INVALID_VALUE;
	if (shmem > (unsigned)fn->max_dyn_shmem)
		return CUDA_ERROR_INVALID_VALUE;
	if (coop) {
		uint64_t blocks = (uint64_t)grid[0] * grid[1] * grid[2];
		int per_sm = occupancy(fn->static_shmem, (int)(block[0] * block[1] * block[2]), shmem);
		if (blocks > (uint64_t)per_sm * FK_SM_COUNT)
			return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
	}
	if ((rc = pack_args(fn, params, extra, &args)) != CUDA_SUCCESS)
		return rc;
	*op = (fk_op){ .kind = FK_OP_KERNEL };
	op->u.k.func = fn->id;
	memcpy(op->u.k.grid, grid, sizeof op->u.k.grid);
	memcpy(op->u.k.block, block, sizeof op->u.k.block);
	op->u.k.shmem = shmem;
	op->u.k.args = args;
	op->u.k.nargs = fn->argsize;
	return CUDA_SUCCESS;
}

static CUresult launch(fk_ctx *c, CUfunction f, const unsigned grid[3], const unsigned block[3],
                       unsigned shmem, CUstream h, void **params, void **extra, int coop)
{
	fk_stream *s = fk_stream_get(c, h);
	fk_op op;
	CUresult rc;

	if (!fk_func_get(c, f) || !s)
		return CUDA_ERROR_INVALID_HANDLE;
	if ((rc = fk_kernel_op(c, f, grid, block, shmem, params, extra, coop, &op)) != CUDA_SUCCESS)
		return rc;
	if ((rc = fk_stream_legacy_check(c, h)) != CUDA_SUCCESS) {
		fk_op_free(&op);
		return rc;
	}
	return fk_submit(c, s, &op);
}

static const char *fname(fk_ctx *c, CUfunction f)
{
	fk_func *fn = c ? fk_func_get(c, f) : NULL;
	return fn ? fn->name : "?";
}

CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                unsigned int gridDimZ, unsigned int blockDimX,
                                unsigned int blockDimY, unsigned int blockDimZ,
                                unsigned int sharedMemBytes, CUstream hStream,
                                void **kernelParams, void **extra)
{
	fk_ctx *c;
	const unsigned grid[3] = { gridDimX, gridDimY, gridDimZ };
	const unsigned block[3] = { blockDimX, blockDimY, blockDimZ };
	CUresult rc = fk_begin(&c);

	if (rc == CUDA_SUCCESS)
		rc = launch(c, f, grid, block, sharedMemBytes, hStream, kernelParams, extra, 0);
	return fk_end(rc, __func__, "%s, (%u,%u,%u), (%u,%u,%u), %u, %p", fname(c, f), gridDimX,
	              gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes,
	              (void *)hStream);
}

CUresult CUDAAPI cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX,
                                           unsigned int gridDimY, unsigned int gridDimZ,
                                           unsigned int blockDimX, unsigned int blockDimY,
                                           unsigned int blockDimZ,
                                           unsigned int sharedMemBytes, CUstream hStream,
                                           void **kernelParams)
{
	fk_ctx *c;
	const unsigned grid[3] = { gridDimX, gridDimY, gridDimZ };
	const unsigned block[3] = { blockDimX, blockDimY, blockDimZ };
	CUresult rc = fk_begin(&c);

	if (rc == CUDA_SUCCESS)
		rc = launch(c, f, grid, block, sharedMemBytes, hStream, kernelParams, NULL, 1);
	return fk_end(rc, __func__, "%s", fname(c, f));
}

CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f,
                                  void **kernelParams, void **extra)
{
	fk_ctx *c;
	CUresult rc = fk_begin(&c);
	int coop = 0;

	if (rc == CUDA_SUCCESS && (!config || (config->numAttrs && !config->attrs)))
		rc = CUDA_ERROR_INVALID_VALUE;
	for (unsigned i = 0; rc == CUDA_SUCCESS && i < config->numAttrs; i++) {
		/* Attributes steer scheduling on a GPU; they change nothing here, but an
		 * unknown one is refused as a driver refuses it. */
		if ((unsigned)config->attrs[i].id >= FK_LAUNCH_ATTRIBUTE_END)
			rc = CUDA_ERROR_INVALID_VALUE;
		else if (config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE)
			coop = config->attrs[i].value.cooperative != 0;
	}
	if (rc == CUDA_SUCCESS) {
		const unsigned grid[3] = { config->gridDimX, config->gridDimY, config->gridDimZ };
		const unsigned block[3] = { config->blockDimX, config->blockDimY, config->blockDimZ };
		rc = launch(c, f, grid, block, config->sharedMemBytes, config->hStream, kernelParams,
		            extra, coop);
	}
	return fk_end(rc, __func__, "%s", fname(c, f));
}

CUresult CUDAAPI cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{
	fk_ctx *c;
	fk_stream *s = NULL;
	CUresult rc = fk_begin(&c);

	if (rc == CUDA_SUCCESS && !fn)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS && !(s = fk_stream_get(c, hStream)))
		rc = CUDA_ERROR_INVALID_HANDLE;
	if (rc == CUDA_SUCCESS)
		rc = fk_stream_legacy_check(c, hStream);
	if (rc == CUDA_SUCCESS) {
		fk_op op = { .kind = FK_OP_HOST };
		op.u.h.fn = fn;
		op.u.h.data = userData;
		rc = fk_submit(c, s, &op); /* runs fn on this thread, without the lock */
	}
	return fk_end(rc, __func__, "%p", (void *)hStream);
}
