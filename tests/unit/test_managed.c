/*
 * Managed memory's coherence (frontend/src/managed.c), built into this test on
 * its own: the calls it makes to the rest of libremote.so (allocations, copies
 * each way, managed_fetch, its streams, the memory map, the hook conn.c calls
 * before each frame) are the doubles below, which record every transfer (op,
 * connection, address, length, stream), and a fake device memory behind them.
 * The page protection and the SIGSEGV handler are the real ones: the test
 * reads and writes the allocations as a program does, and reads who owns one
 * from its pages' protection in /proc/self/maps (rw-: the host's, HOST;
 * r--: both equal, CLEAN; ---: the device's, DEVICE).
 *
 * Covered: allocation (the server's block, the page-aligned address mapped
 * here, another block where that address is taken here); who owns an
 * allocation after host writes, reads, a launch, a query, a prefetch; that a
 * launch after a host write uploads that allocation once, on our own stream,
 * then syncs it; that a host read after a launch fetches exactly that
 * allocation once (mapped host memory and host functions through
 * managed_fetch); failed copies; frees; mapped host memory
 * (fe_managed_alloc_mapped); what a device reset forgets. The size under which
 * pinned memory becomes mapped (REMOTE_GPU_MAPPED_PINNED_MAX, 4095) is
 * rt_memory.c's, not managed.c's, and not tested here.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"
#include "errors.h"
#include "managed.h"
#include "proto_ops.h"
#include "rpc.h"
#include "rt.h"
#include "stats.h"

/* ---- the doubles: what managed.c needs from the rest of libremote.so ---- */

enum { E_ALLOC = 1, E_FREE, E_HTOD, E_DTOH, E_FETCH, E_SCREATE, E_SSYNC };
typedef struct ev {
	int op;
	const fe_conn *c;
	uint64_t a;   /* address; a stream's id for E_SCREATE, E_SSYNC */
	uint64_t n;   /* length; flags for E_SCREATE */
	uint64_t sid; /* the copy's stream */
	int x;        /* E_DTOH: async; E_FETCH: landed in place (dest is src, dest_len is len) */
} ev;
static ev evs[64];
static int nev;

static void record(int op, const fe_conn *c, uint64_t a, uint64_t n, uint64_t sid, int x)
{
	if (nev < 64)
		evs[nev] = (ev){op, c, a, n, sid, x};
	nev++;
}

/* Two devices, each its own session. */
static char conn_tag[2];
#define CONN(d) ((fe_conn *)&conn_tag[d])
static fe_device devs[2];
static int cur_dev;
static int in_hostfn;
static uint64_t next_id = 1000;
static int leave_status = -1;

/* Device memory: blocks at addresses no mapping of this process uses, their
 * bytes kept here. */
typedef struct block {
	uint64_t p, n;
	uint8_t *bytes;
} block;
static block blocks[32];
static int nblocks;
static uintptr_t dev_next;
static uint64_t forced[8]; /* addresses fe_rpc_mem_alloc answers first (taken here) */
static int nforced;
/* Failures the next call of each kind answers. */
static int fail_htod, fail_dtoh, fail_fetch, fail_screate;
static int free_status;

static fe_conn_before_fn before_send;
static fe_rt_forget_fn forget_fn;

static uint8_t *dev_bytes(uint64_t a, uint64_t n)
{
	for (int i = 0; i < nblocks; i++)
		if (blocks[i].bytes && a >= blocks[i].p && a + n <= blocks[i].p + blocks[i].n)
			return blocks[i].bytes + (a - blocks[i].p);
	return NULL;
}

/* conn.c calls the hook before every frame it sends; so do these. */
static void sending(uint32_t op)
{
	if (before_send)
		before_send(op);
}

int fe_obs_on;
void fe_obs_enter(const char *fn, void *ra) { (void)fn, (void)ra; }
void fe_obs_leave(int status) { (void)status; }
cudaError_t(fe_rt_enter)(fe_conn **c)
{
	*c = CONN(cur_dev);
	return cudaSuccess;
}
cudaError_t(fe_rt_leave)(int status)
{
	leave_status = status;
	return (cudaError_t)status;
}
cudaError_t fe_rt_fail(cudaError_t e) { return e; }
cudaError_t fe_capture_unsafe(void) { return cudaSuccess; }
int fe_rt_current_device(void) { return cur_dev; }
fe_device *fe_rt_device(int ordinal) { return ordinal >= 0 && ordinal < 2 ? &devs[ordinal] : NULL; }
uint64_t fe_rt_new_id(void) { return next_id++; }
int fe_hostfn_in_thread(void) { return in_hostfn; }
void fe_rt_on_forget(fe_rt_forget_fn fn) { forget_fn = fn; }
void fe_conn_on_before_send(fe_conn_before_fn fn) { before_send = fn; }
const char *fe_status_name(int status) { return status ? "error" : "CUDA_SUCCESS"; }

int fe_rpc_mem_alloc(fe_conn *c, uint64_t size, uint64_t *dptr)
{
	sending(PROTO_OP_MEM_ALLOC);
	uint64_t p;
	if (nforced) {
		p = forced[0];
		memmove(forced, forced + 1, --nforced * sizeof(forced[0]));
	} else {
		p = dev_next + 16; /* not page-aligned, as the server's blocks may be */
		dev_next += (size + 16 + 0xffff) & ~(uintptr_t)0xffff;
		blocks[nblocks++] = (block){p, size, calloc(1, size)};
	}
	record(E_ALLOC, c, p, size, 0, 0);
	*dptr = p;
	return 0;
}

int fe_rpc_mem_free(fe_conn *c, uint64_t ptr)
{
	sending(PROTO_OP_MEM_FREE);
	record(E_FREE, c, ptr, 0, 0, 0);
	for (int i = 0; i < nblocks; i++)
		if (blocks[i].p == ptr) {
			free(blocks[i].bytes);
			blocks[i].bytes = NULL;
		}
	return free_status;
}

int fe_copy_htod(fe_conn *c, uint64_t dst, const uint8_t *src, size_t len, uint64_t sid)
{
	sending(PROTO_OP_MEMCPY_HTOD);
	record(E_HTOD, c, dst, len, sid, 0);
	if (fail_htod)
		return fail_htod--, CUDA_ERROR_ILLEGAL_ADDRESS;
	uint8_t *d = dev_bytes(dst, len);
	if (!d)
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(d, src, len);
	return 0;
}

/* The device's bytes into the host's, unless a failure is due. */
static int copy_back(void *dst, uint64_t src, uint64_t len, int *fail)
{
	if (*fail)
		return (*fail)--, CUDA_ERROR_ILLEGAL_ADDRESS;
	const uint8_t *s = dev_bytes(src, len);
	if (!s)
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(dst, s, len);
	return 0;
}

int fe_copy_dtoh(fe_conn *c, uint8_t *dst, uint64_t src, size_t len, uint64_t sid, int async)
{
	sending(PROTO_OP_MEMCPY_DTOH);
	record(E_DTOH, c, src, len, sid, async);
	return copy_back(dst, src, len, &fail_dtoh);
}

int fe_rpc_managed_fetch(fe_conn *c, uint64_t src, uint64_t len, void *dest, uint64_t dest_len)
{
	sending(PROTO_OP_MANAGED_FETCH);
	record(E_FETCH, c, src, len, 0, dest == (void *)(uintptr_t)src && dest_len == len);
	return copy_back(dest, src, len, &fail_fetch);
}

int fe_rpc_stream_create(fe_conn *c, uint64_t stream, uint32_t flags, int32_t priority)
{
	sending(PROTO_OP_STREAM_CREATE);
	record(E_SCREATE, c, stream, flags, 0, priority);
	if (fail_screate)
		return fail_screate--, CUDA_ERROR_OUT_OF_MEMORY;
	return 0;
}

int fe_rpc_stream_sync(fe_conn *c, uint64_t stream)
{
	sending(PROTO_OP_STREAM_SYNC);
	record(E_SSYNC, c, stream, 0, 0, 0);
	return 0;
}

/* The memory map: managed.c adds its ranges and asks whether a pointer is in one. */
static fe_range ranges[16];
static int nranges;
void fe_mem_add(uint64_t base, uint64_t size, int kind, int device)
{
	ranges[nranges++] = (fe_range){.base = base, .size = size, .kind = kind, .device = device};
}
int fe_mem_remove(uint64_t base, int kind, fe_range *out)
{
	for (int i = 0; i < nranges; i++)
		if (ranges[i].base == base && ranges[i].kind == kind) {
			if (out)
				*out = ranges[i];
			ranges[i] = ranges[--nranges];
			return 0;
		}
	return -1;
}
int fe_mem_find(uint64_t p, uint64_t len, fe_range *out)
{
	for (int i = 0; i < nranges; i++)
		if (p >= ranges[i].base && p < ranges[i].base + ranges[i].size) {
			*out = ranges[i];
			return p + len <= ranges[i].base + ranges[i].size ? 0 : 1;
		}
	return -1;
}

/* ---- helpers ---- */

static size_t pg;

/* The protection of the page at p, as the kernel has it: "rw-", "r--", "---",
 * or "" when nothing is mapped there. */
static const char *prot_at(const void *p)
{
	static char perms[8];
	perms[0] = 0;
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return perms;
	unsigned long lo, hi;
	char pm[8];
	char line[512];
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx %4s", &lo, &hi, pm) == 3 && (uintptr_t)p >= lo && (uintptr_t)p < hi) {
			memcpy(perms, pm, 3);
			perms[3] = 0;
			break;
		}
	fclose(f);
	return perms;
}
#define HOST "rw-"
#define CLEAN "r--"
#define DEVICE "---"
#define CHECK_STATE(p, s) CHECK(strcmp(prot_at(p), (s)) == 0)

static void reset_events(void) { nev = 0; }

#define CHECK_EV(i, op_, c_, a_, n_, sid_)                                                                        \
	do {                                                                                                      \
		CHECK_EQ(evs[i].op, op_);                                                                         \
		CHECK(evs[i].c == (c_));                                                                          \
		CHECK_EQ(evs[i].a, a_);                                                                           \
		CHECK_EQ(evs[i].n, n_);                                                                           \
		CHECK_EQ(evs[i].sid, sid_);                                                                       \
	} while (0)

/* A call that may run device work, as conn.c announces it. */
static void launch(void) { sending(PROTO_OP_LAUNCH); }

/* A kernel's write: the device's bytes change behind the host's back. */
static void device_write(const void *p, size_t off, uint8_t v)
{
	uint8_t *d = dev_bytes((uintptr_t)p + off, 1);
	if (CHECK(d != NULL))
		*d = v;
}

static volatile uint8_t sink;

/* The host's accesses, as a program makes them. A fault's handler changes
 * memory the compiler cannot see change (the events, the pages): the fences
 * keep the access where it is written among the checks around it. */
static uint8_t rd(const uint8_t *p, size_t i)
{
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	uint8_t v = ((const volatile uint8_t *)p)[i];
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	return v;
}

static void wr(uint8_t *p, size_t i, uint8_t v)
{
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	((volatile uint8_t *)p)[i] = v;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
}

/* A prefetch to the host whose copy back (op) fails: one copy tried, the
 * allocation (one page at p, device 0) still the device's. */
static void prefetch_fails(const uint8_t *p, int op, int *fail)
{
	struct cudaMemLocation host = {.type = cudaMemLocationTypeHost, .id = 0};
	*fail = 1;
	reset_events();
	leave_status = -1;
	cudaMemPrefetchAsync(p, 1, host, 0, 0);
	CHECK_EQ(leave_status, CUDA_ERROR_UNKNOWN);
	CHECK_EQ(nev, 1);
	CHECK_EV(0, op, CONN(0), (uintptr_t)p, pg, 0);
	CHECK_STATE(p, DEVICE);
}

/* ---- a handler of the program's own, behind managed.c's ---- */

static sigjmp_buf program_jmp;
static volatile sig_atomic_t program_segv;
static void program_handler(int sig)
{
	(void)sig;
	program_segv++;
	siglongjmp(program_jmp, 1);
}

/* Reads p[off]; 1 if the program's handler got the fault instead. */
static int read_faults(const uint8_t *p, size_t off)
{
	if (sigsetjmp(program_jmp, 1))
		return 1;
	sink = rd(p, off);
	return 0;
}

/* ---- the tests ---- */

static void test_args(void)
{
	void *p = (void *)1;
	reset_events();
	CHECK_EQ(cudaMallocManaged(NULL, 64, cudaMemAttachGlobal), cudaErrorInvalidValue);
	CHECK_EQ(cudaMallocManaged(&p, 64, 4), cudaErrorInvalidValue);
	CHECK_EQ(cudaMallocManaged(&p, 0, cudaMemAttachGlobal), cudaSuccess);
	CHECK(p == NULL);
	CHECK_EQ(nev, 0);
	CHECK_EQ(fe_managed_any(), 0);
	CHECK_EQ(fe_managed_free(CONN(0), 0x1000), -1);
	CHECK_EQ(fe_managed_mapped_host((void *)0x1000, 0), 0);
}

/* Allocation: the server's block one page larger, the page-aligned address in
 * it mapped here, zero, the host's. */
static void test_alloc(void)
{
	uint8_t *p = NULL;
	reset_events();
	CHECK_EQ(cudaMallocManaged((void **)&p, 100, cudaMemAttachGlobal), cudaSuccess);
	if (!CHECK(p != NULL))
		return;
	CHECK_EQ(nev, 1);
	CHECK_EV(0, E_ALLOC, CONN(0), evs[0].a, pg + pg, 0);
	CHECK_EQ((uintptr_t)p, (evs[0].a + pg - 1) & ~(uint64_t)(pg - 1));
	CHECK_EQ(nranges, 1);
	CHECK_EQ(ranges[0].base, (uintptr_t)p);
	CHECK_EQ(ranges[0].size, pg);
	CHECK_EQ(ranges[0].kind, FE_MEM_MANAGED);
	CHECK_EQ(ranges[0].device, 0);
	CHECK_EQ(fe_managed_any(), 1);
	CHECK_EQ(fe_managed_mapped_host(p, 0), 0);
	CHECK_STATE(p, HOST);
	uint8_t zero[100] = {0};
	CHECK_MEM(p, zero, 100);

	/* A query or a wait hands nothing over. */
	sending(PROTO_OP_STREAM_SYNC);
	sending(PROTO_OP_DEVICE_SYNC);
	sending(PROTO_OP_EVENT_QUERY);
	CHECK_EQ(nev, 1);
	CHECK_STATE(p, HOST);

	uint64_t alloc = evs[0].a;
	reset_events();
	CHECK_EQ(fe_managed_free(CONN(0), (uintptr_t)p + 1), -1); /* not its start */
	CHECK_EQ(nev, 0);
	CHECK_EQ(fe_managed_free(CONN(0), (uintptr_t)p), 0);
	CHECK_EQ(nev, 1);
	CHECK_EV(0, E_FREE, CONN(0), alloc, 0, 0); /* the server's block, not the address mapped here */
	CHECK_EQ(nranges, 0);
	CHECK_STATE(p, ""); /* unmapped */
	CHECK_EQ(fe_managed_any(), 0);
}

/* Write, launch (one upload, on our stream, synced), launch (nothing), kernel
 * writes, read (one fetch of the whole allocation), read (nothing), write
 * (nothing sent), launch (one upload). */
static void test_write_launch_read(void)
{
	uint8_t *p = NULL;
	size_t size = 3 * pg - 5;
	CHECK_EQ(cudaMallocManaged((void **)&p, size, cudaMemAttachGlobal), cudaSuccess);
	if (!CHECK(p != NULL))
		return;
	memset(p, 0x11, size);
	CHECK_STATE(p, HOST);

	reset_events();
	launch();
	CHECK_EQ(nev, 3);
	uint64_t sid = evs[0].a;
	CHECK_EV(0, E_SCREATE, CONN(0), sid, cudaStreamNonBlocking, 0); /* our stream, at its first use */
	CHECK_EV(1, E_HTOD, CONN(0), (uintptr_t)p, 3 * pg, sid);         /* the whole allocation */
	CHECK_EV(2, E_SSYNC, CONN(0), sid, 0, 0);
	CHECK_STATE(p, DEVICE);
	CHECK_STATE(p + 3 * pg - 1, DEVICE);
	uint8_t *d = dev_bytes((uintptr_t)p, size);
	if (!CHECK(d != NULL))
		return;
	CHECK_EQ(d[0], 0x11);
	CHECK_EQ(d[size - 1], 0x11);

	reset_events();
	launch();
	CHECK_EQ(nev, 0); /* the device's already */
	CHECK_STATE(p, DEVICE);

	device_write(p, 2 * pg + 7, 0x5a);
	reset_events();
	CHECK_EQ(rd(p, 2 * pg + 7), 0x5a); /* a fault; the handler copies the allocation back */
	CHECK_EQ(nev, 1);
	CHECK_EV(0, E_DTOH, CONN(0), (uintptr_t)p, 3 * pg, 0); /* the legacy stream, */
	CHECK_EQ(evs[0].x, 0);                                  /* synchronous */
	CHECK_EQ(rd(p, 0), 0x11);
	CHECK_STATE(p, CLEAN);

	reset_events();
	CHECK_EQ(rd(p, size - 1), 0x11);
	CHECK_EQ(nev, 0);

	wr(p, 1, 0x22); /* CLEAN -> HOST: nothing sent */
	CHECK_EQ(nev, 0);
	CHECK_STATE(p, HOST);
	CHECK_EQ(d[1], 0x11);

	launch();
	CHECK_EQ(nev, 2); /* the stream exists: upload, sync */
	CHECK_EV(0, E_HTOD, CONN(0), (uintptr_t)p, 3 * pg, sid);
	CHECK_EV(1, E_SSYNC, CONN(0), sid, 0, 0);
	CHECK_EQ(d[1], 0x22);
	CHECK_EQ(d[2 * pg + 7], 0x5a);
	CHECK_STATE(p, DEVICE);

	/* Read, then a launch: both were equal, nothing to upload. */
	reset_events();
	sink = rd(p, 0);
	CHECK_EQ(nev, 1);
	CHECK_EQ(evs[0].op, E_DTOH);
	launch();
	CHECK_EQ(nev, 1);
	CHECK_STATE(p, DEVICE);

	/* A write into the device's copy: fetched first (the rest of the
	 * allocation is the device's bytes), then the host's. */
	device_write(p, 3, 0x33);
	reset_events();
	wr(p, 4, 0x44);
	CHECK_EQ(nev, 1);
	CHECK_EV(0, E_DTOH, CONN(0), (uintptr_t)p, 3 * pg, 0);
	CHECK_STATE(p, HOST);
	CHECK_EQ(rd(p, 3), 0x33);
	CHECK_EQ(rd(p, 4), 0x44);
	launch();
	CHECK_EQ(nev, 3);
	CHECK_EV(1, E_HTOD, CONN(0), (uintptr_t)p, 3 * pg, sid);
	CHECK_EV(2, E_SSYNC, CONN(0), sid, 0, 0);
	CHECK_EQ(d[4], 0x44);

	reset_events();
	CHECK_EQ(fe_managed_free(CONN(0), (uintptr_t)p), 0);
	CHECK_EQ(nev, 1);
	CHECK_EQ(evs[0].op, E_FREE);
	CHECK_EQ(fe_managed_any(), 0);
}

/* Several allocations: a launch uploads only those the host wrote, syncs each
 * device's stream once; a read fetches only the allocation read; a free of one
 * the host holds forgets it (no upload at the next launch). */
static void test_several(void)
{
	uint8_t *a = NULL, *b = NULL, *c = NULL, *m = NULL;
	CHECK_EQ(cudaMallocManaged((void **)&a, pg, cudaMemAttachGlobal), cudaSuccess);
	CHECK_EQ(cudaMallocManaged((void **)&b, 2 * pg, cudaMemAttachHost), cudaSuccess);
	cur_dev = 1;
	CHECK_EQ(cudaMallocManaged((void **)&c, 10, cudaMemAttachGlobal), cudaSuccess);
	cur_dev = 0;
	if (!CHECK(a && b && c))
		return;
	reset_events();
	launch(); /* all three new: uploaded */
	CHECK_STATE(a, DEVICE);
	CHECK_STATE(b, DEVICE);
	CHECK_STATE(c, DEVICE);
	/* Newest first: c (device 1: our stream there made first), b, a (device
	 * 0's stream made in test_write_launch_read); each device's stream synced. */
	CHECK_EQ(nev, 6);
	uint64_t sid1 = evs[0].a, sid0 = evs[3].sid;
	CHECK_EV(0, E_SCREATE, CONN(1), sid1, cudaStreamNonBlocking, 0);
	CHECK_EV(1, E_HTOD, CONN(1), (uintptr_t)c, pg, sid1);
	CHECK_EV(2, E_HTOD, CONN(0), (uintptr_t)b, 2 * pg, sid0);
	CHECK_EV(3, E_HTOD, CONN(0), (uintptr_t)a, pg, sid0);
	CHECK_EV(4, E_SSYNC, CONN(0), sid0, 0, 0);
	CHECK_EV(5, E_SSYNC, CONN(1), sid1, 0, 0);
	CHECK(sid0 != 0 && sid0 != sid1); /* a stream of ours per device */

	reset_events();
	wr(b, pg + 1, 7); /* fetch b, then it is the host's */
	wr(c, 0, 8);      /* fetch c (device 1), then the host's */
	CHECK_EQ(nev, 2);
	CHECK_EV(0, E_DTOH, CONN(0), (uintptr_t)b, 2 * pg, 0);
	CHECK_EV(1, E_DTOH, CONN(1), (uintptr_t)c, pg, 0);
	CHECK_STATE(a, DEVICE);
	CHECK_STATE(b, HOST);
	CHECK_STATE(c, HOST);

	reset_events();
	launch(); /* newest first; then each device's stream synced once, in device order */
	CHECK_EQ(nev, 4);
	CHECK_EV(0, E_HTOD, CONN(1), (uintptr_t)c, pg, sid1);
	CHECK_EV(1, E_HTOD, CONN(0), (uintptr_t)b, 2 * pg, sid0);
	CHECK_EV(2, E_SSYNC, CONN(0), sid0, 0, 0);
	CHECK_EV(3, E_SSYNC, CONN(1), sid1, 0, 0);
	CHECK_EQ(*dev_bytes((uintptr_t)b + pg + 1, 1), 7);
	CHECK_EQ(*dev_bytes((uintptr_t)c, 1), 8);

	/* The host writes b; b is freed before any launch: nothing uploaded. */
	reset_events();
	wr(b, 0, 1);
	CHECK_EQ(nev, 1);
	CHECK_EQ(fe_managed_free(CONN(0), (uintptr_t)b), 0);
	CHECK_EQ(nev, 2);
	CHECK_EQ(evs[1].op, E_FREE);
	launch();
	CHECK_EQ(nev, 2);

	/* Prefetch to the device uploads that allocation only; to the host
	 * fetches it only. */
	CHECK_EQ(cudaMallocManaged((void **)&m, pg, cudaMemAttachGlobal), cudaSuccess);
	wr(a, 0, 9); /* fetch, host's */
	reset_events();
	struct cudaMemLocation dev = {.type = cudaMemLocationTypeDevice, .id = 0};
	struct cudaMemLocation host = {.type = cudaMemLocationTypeHost, .id = 0};
	CHECK_EQ(cudaMemPrefetchAsync(m, pg, dev, 0, 0), cudaSuccess);
	CHECK_EQ(nev, 2);
	CHECK_EV(0, E_HTOD, CONN(0), (uintptr_t)m, pg, sid0);
	CHECK_EV(1, E_SSYNC, CONN(0), sid0, 0, 0);
	CHECK_STATE(m, DEVICE);
	CHECK_STATE(a, HOST);
	CHECK_EQ(cudaMemPrefetchAsync(m, 1, host, 0, 0), cudaSuccess);
	CHECK_EQ(nev, 3);
	CHECK_EV(2, E_DTOH, CONN(0), (uintptr_t)m, pg, 0);
	CHECK_STATE(m, CLEAN);
	CHECK_EQ(cudaMemPrefetchAsync(m, 1, host, 0, 0), cudaSuccess); /* already here */
	CHECK_EQ(cudaMemPrefetchAsync(a, pg, host, 0, 0), cudaSuccess);
	CHECK_EQ(nev, 3);
	CHECK_STATE(a, HOST);
	CHECK_EQ(cudaMemPrefetchAsync(m, 0, dev, 0, 0), cudaErrorInvalidValue);
	uint8_t local[8];
	CHECK_EQ(cudaMemPrefetchAsync(local, 8, dev, 0, 0), cudaErrorInvalidValue);
	CHECK_EQ(cudaMemAdvise(m, pg, cudaMemAdviseSetReadMostly, dev), cudaSuccess);
	CHECK_EQ(cudaMemAdvise(m, pg, (enum cudaMemoryAdvise)0, dev), cudaErrorInvalidValue);
	CHECK_EQ(cudaMemAdvise(local, 8, cudaMemAdviseSetReadMostly, dev), cudaErrorInvalidValue);
	CHECK_EQ(nev, 3);

	/* Device 1 reset: its allocations are forgotten (no call to its old
	 * session), and its stream with them. */
	reset_events();
	wr(c, 1, 1); /* fetch, host's: one upload outstanding for device 1 */
	CHECK_EQ(nev, 1);
	if (CHECK(forget_fn != NULL))
		forget_fn(1);
	CHECK_STATE(c, "");
	launch(); /* a is the host's (device 0): no stream created */
	CHECK_EQ(nev, 3);
	CHECK_EV(1, E_HTOD, CONN(0), (uintptr_t)a, pg, sid0);
	CHECK_EV(2, E_SSYNC, CONN(0), sid0, 0, 0);
	cur_dev = 1;
	uint8_t *e = NULL;
	CHECK_EQ(cudaMallocManaged((void **)&e, 1, cudaMemAttachGlobal), cudaSuccess);
	cur_dev = 0;
	reset_events();
	launch(); /* device 1's new session: a new stream */
	CHECK_EQ(nev, 3);
	CHECK_EQ(evs[0].op, E_SCREATE);
	CHECK(evs[0].c == CONN(1));
	CHECK(evs[0].a != sid1);
	CHECK_EV(1, E_HTOD, CONN(1), (uintptr_t)e, pg, evs[0].a);
	CHECK_EV(2, E_SSYNC, CONN(1), evs[0].a, 0, 0);

	CHECK_EQ(fe_managed_free(CONN(1), (uintptr_t)e), 0);
	CHECK_EQ(fe_managed_free(CONN(0), (uintptr_t)m), 0);
	CHECK_EQ(fe_managed_free(CONN(0), (uintptr_t)a), 0);
	CHECK_EQ(fe_managed_any(), 0);
	nranges = 0; /* device 1's reset left its range to mem_ranges.c's own forget */
}

/* Mapped host memory: managed, fetched through managed_fetch (outside the
 * server's executor); so is any allocation a host function reads. */
static void test_mapped(void)
{
	uint8_t *h = NULL, *m = NULL;
	reset_events();
	CHECK_EQ(fe_managed_alloc_mapped((void **)&h, 8), cudaSuccess);
	CHECK_EQ(cudaMallocManaged((void **)&m, 8, cudaMemAttachGlobal), cudaSuccess);
	if (!CHECK(h && m))
		return;
	CHECK_EQ(nev, 2);
	CHECK_EV(0, E_ALLOC, CONN(0), evs[0].a, 2 * pg, 0);
	CHECK_EQ(fe_managed_mapped_host(h, 1), 1);
	CHECK_EQ(fe_managed_mapped_host(h + 1, 1), 0);
	CHECK_EQ(fe_managed_mapped_host(h + 1, 0), 1);
	CHECK_EQ(fe_managed_mapped_host(h + pg, 0), 0);
	CHECK_EQ(fe_managed_mapped_host(m, 1), 0);
	CHECK_EQ(ranges[0].kind, FE_MEM_MANAGED);
	CHECK_STATE(h, HOST);

	wr(h, 0, 1);
	reset_events();
	launch();
	CHECK_EQ(nev, 3); /* both new, uploaded the same way */
	CHECK_EV(0, E_HTOD, CONN(0), (uintptr_t)m, pg, evs[0].sid);
	CHECK_EV(1, E_HTOD, CONN(0), (uintptr_t)h, pg, evs[0].sid);
	CHECK_EV(2, E_SSYNC, CONN(0), evs[0].sid, 0, 0);
	CHECK_EQ(*dev_bytes((uintptr_t)h, 1), 1);

	device_write(h, 5, 0x77);
	reset_events();
	CHECK_EQ(rd(h, 5), 0x77);
	CHECK_EQ(nev, 1);
	CHECK_EV(0, E_FETCH, CONN(0), (uintptr_t)h, pg, 0);
	CHECK_EQ(evs[0].x, 1); /* into the host pages themselves */
	CHECK_EQ(rd(h, 0), 1);
	CHECK_STATE(h, CLEAN);

	in_hostfn = 1; /* on the host function thread, managed memory too */
	device_write(m, 0, 0x66);
	reset_events();
	CHECK_EQ(rd(m, 0), 0x66);
	CHECK_EQ(nev, 1);
	CHECK_EV(0, E_FETCH, CONN(0), (uintptr_t)m, pg, 0);
	in_hostfn = 0;

	/* A fetch that fails: still the device's. */
	launch();
	CHECK_STATE(h, DEVICE);
	prefetch_fails(h, E_FETCH, &fail_fetch);

	reset_events();
	CHECK_EQ(fe_managed_free(CONN(0), (uintptr_t)h), 0);
	CHECK_EQ(fe_managed_mapped_host(h, 0), 0);
	free_status = CUDA_ERROR_INVALID_VALUE; /* the server's answer is the free's */
	CHECK_EQ(fe_managed_free(CONN(0), (uintptr_t)m), CUDA_ERROR_INVALID_VALUE);
	free_status = 0;
	CHECK_EQ(nev, 2);
	CHECK_EQ(fe_managed_any(), 0);
}

/* Failed copies: an upload that fails leaves the allocation the host's, a
 * fetch that fails leaves it the device's (unreadable: the program's own
 * SIGSEGV handler gets the fault), a stream that cannot be made uploads
 * nothing. */
static void test_failures(void)
{
	uint8_t *p = NULL;
	CHECK_EQ(cudaMallocManaged((void **)&p, 16, cudaMemAttachGlobal), cudaSuccess);
	if (!CHECK(p != NULL))
		return;
	launch();
	CHECK_STATE(p, DEVICE);

	prefetch_fails(p, E_DTOH, &fail_dtoh);

	fail_dtoh = 1;
	reset_events();
	program_segv = 0;
	CHECK_EQ(read_faults(p, 0), 1);
	CHECK_EQ(program_segv, 1);
	CHECK_EQ(nev, 1);
	CHECK_EQ(evs[0].op, E_DTOH);
	CHECK_STATE(p, DEVICE);

	/* Not managed memory at all: the program's handler. */
	uint8_t *none = mmap(NULL, pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	reset_events();
	CHECK_EQ(read_faults(none, 0), 1);
	CHECK_EQ(program_segv, 2);
	CHECK_EQ(nev, 0);
	munmap(none, pg);

	wr(p, 0, 3); /* fetch, host's */
	CHECK_STATE(p, HOST);
	fail_htod = 1;
	reset_events();
	launch();
	CHECK_EQ(nev, 1);
	CHECK_EQ(evs[0].op, E_HTOD);
	/* still the newer copy, and writable (were it read-only, this write
	 * would fault forever: its handler finds nothing to change) */
	if (!CHECK_STATE(p, HOST))
		return;
	wr(p, 1, 4);
	reset_events();
	launch(); /* tried again at the next call */
	CHECK_EQ(nev, 2);
	CHECK_EQ(evs[0].op, E_HTOD);
	CHECK_EQ(evs[1].op, E_SSYNC);
	CHECK_EQ(*dev_bytes((uintptr_t)p + 1, 1), 4);
	CHECK_STATE(p, DEVICE);

	CHECK_EQ(fe_managed_free(CONN(0), (uintptr_t)p), 0);
}

/* A stream of ours that the server refuses: nothing uploaded, the host keeps
 * the allocation; the next call tries again. */
static void test_no_stream(void)
{
	forget_fn(1); /* device 1's session reset: no stream of ours there */
	uint8_t *p = NULL;
	cur_dev = 1;
	CHECK_EQ(cudaMallocManaged((void **)&p, 16, cudaMemAttachGlobal), cudaSuccess);
	cur_dev = 0;
	if (!CHECK(p != NULL))
		return;
	fail_screate = 1;
	reset_events();
	launch();
	CHECK_EQ(nev, 1);
	CHECK_EQ(evs[0].op, E_SCREATE);
	CHECK_STATE(p, HOST);
	wr(p, 0, 1);
	reset_events();
	launch();
	CHECK_EQ(nev, 3);
	CHECK_EQ(evs[0].op, E_SCREATE);
	CHECK_EV(1, E_HTOD, CONN(1), (uintptr_t)p, pg, evs[0].a);
	CHECK_EV(2, E_SSYNC, CONN(1), evs[0].a, 0, 0);
	CHECK_EQ(*dev_bytes((uintptr_t)p, 1), 1);
	CHECK_EQ(fe_managed_free(CONN(1), (uintptr_t)p), 0);
}

/* The device address is taken here: another block, the first given back; four
 * taken: out of memory, every block given back. */
static void test_taken(void)
{
	uint8_t *taken = mmap(NULL, 4 * pg, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!CHECK(taken != MAP_FAILED))
		return;
	uint8_t *p = NULL;
	forced[0] = (uintptr_t)taken - 16; /* its aligned address is taken's */
	nforced = 1;
	reset_events();
	CHECK_EQ(cudaMallocManaged((void **)&p, pg, cudaMemAttachGlobal), cudaSuccess);
	CHECK_EQ(nev, 3);
	CHECK_EV(0, E_ALLOC, CONN(0), (uintptr_t)taken - 16, 2 * pg, 0);
	CHECK_EV(1, E_ALLOC, CONN(0), evs[1].a, 2 * pg, 0);
	CHECK_EV(2, E_FREE, CONN(0), (uintptr_t)taken - 16, 0, 0);
	CHECK_EQ((uintptr_t)p, (evs[1].a + pg - 1) & ~(uint64_t)(pg - 1));
	CHECK_EQ(fe_managed_free(CONN(0), (uintptr_t)p), 0);

	for (int i = 0; i < 4; i++)
		forced[i] = (uintptr_t)taken + i * pg;
	nforced = 4;
	reset_events();
	leave_status = -1;
	p = NULL;
	cudaMallocManaged((void **)&p, pg, cudaMemAttachGlobal);
	CHECK_EQ(leave_status, CUDA_ERROR_OUT_OF_MEMORY);
	CHECK(p == NULL);
	CHECK_EQ(nev, 8);
	for (int i = 0; i < 4; i++) {
		CHECK_EV(i, E_ALLOC, CONN(0), (uintptr_t)taken + i * pg, 2 * pg, 0);
		CHECK_EV(4 + i, E_FREE, CONN(0), (uintptr_t)taken + i * pg, 0, 0);
	}
	CHECK_EQ(nranges, 0);
	CHECK_EQ(fe_managed_any(), 0);
	munmap(taken, 4 * pg);
}

int main(void)
{
	pg = (size_t)sysconf(_SC_PAGESIZE);
	/* Device addresses: an area no mapping of this process uses. */
	void *area = mmap(NULL, 256u << 20, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (area == MAP_FAILED)
		return 1;
	munmap(area, 256u << 20);
	dev_next = (uintptr_t)area;
	for (int d = 0; d < 2; d++)
		devs[d].conn = CONN(d);
	/* The program's own handler, installed before managed.c's (at its first
	 * allocation), which passes on faults that are not its own. */
	signal(SIGSEGV, program_handler);

	test_args();
	test_alloc();
	test_write_launch_read();
	test_several();
	test_mapped();
	test_failures();
	test_no_stream();
	test_taken();
	return check_summary("test_managed");
}
