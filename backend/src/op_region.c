/*
 * Shared regions: over shm:// the client's pinned allocations are memory both
 * processes map (the transport carries the memfd and maps it here:
 * transport_region_*). region_add registers the mapping with the driver
 * (cuMemHostRegister), so a copy is one DMA between the client's own pages
 * and the device; the copies name their host side as (region, offset,
 * length) and carry no payload, the transport checks that range against the
 * mapping, and the device side is checked against the session's allocations
 * as for every copy. A region the driver refuses to register still works
 * (the driver stages pageable memory itself), only slower.
 *
 * Order and lifetime. Everything here runs on the executor, in the order the
 * client sent it, so a copy follows the region_add that made its region and
 * precedes the region_drop that ends it. region_drop waits for the devices'
 * work (cudaFreeHost synchronizes too) before it unregisters and unmaps: an
 * async copy may still be reading the pages. At teardown the devices' work
 * is done (be_session_teardown synchronized every context) before
 * be_region_teardown unregisters what is left; the transport unmaps the
 * mappings when the connection is freed, after that.
 *
 * The _wait copies are answered once done (an event after them, as
 * be_op_stream_sync would wait): a synchronous copy of pinned memory is then
 * one round trip, and the bounce buffer (frontend/src/host_bounce.c) paces
 * its pipeline by their replies. The loop thread runs them inline when the
 * executor is idle (+now, executor.c), unless the region is not registered:
 * the driver's copy from pageable memory would block the thread.
 *
 * A copy on a capturing stream is refused as staging copies are: the graph
 * would keep the address after the region is gone.
 */
#include "backend.h"

#include <inttypes.h>
#include <stdlib.h>

#include "ops.h"

typedef struct be_region {
	uint32_t id;
	int registered;
	void *base;
	uint64_t len;
} be_region;

struct be_region_tab {
	be_region *r;
	size_t n, cap;
	/* for the session's last log line (run-gpu.sh shows it: the proof
	 * that pinned copies took the regions) */
	uint64_t added, registered, copies, bytes;
};

static be_region *find(be_session *s, uint32_t id)
{
	struct be_region_tab *t = s->regions;
	for (size_t i = 0; t && i < t->n; i++)
		if (t->r[i].id == id)
			return &t->r[i];
	return NULL;
}

static int unregister(be_session *s, be_region *r)
{
	CUresult e = r->registered ? be_drv.cuMemHostUnregister(r->base) : CUDA_SUCCESS;
	if (e != CUDA_SUCCESS)
		LOG_WARN(BE_LOG, "session %" PRIu64 ": cuMemHostUnregister of region %u: %s", s->id, r->id,
			 be_errname(e));
	r->registered = 0;
	return e;
}

int be_op_region_add(be_session *s, be_req *rq, uint32_t region, uint64_t len)
{
	void *base;
	if (len == 0 || find(s, region) || transport_region_get(s->conn, region, 0, len, &base) != TRANSPORT_OK) {
		LOG_INFO(BE_LOG, "session %" PRIu64 ": region_add %u of %" PRIu64 " bytes: no such shared region",
			 s->id, region, len);
		return CUDA_ERROR_INVALID_VALUE;
	}
	struct be_region_tab *t = s->regions;
	if (!t && !(t = s->regions = calloc(1, sizeof(*t))))
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 16;
		be_region *r = realloc(t->r, cap * sizeof(*r));
		if (!r)
			return CUDA_ERROR_OUT_OF_MEMORY;
		t->r = r;
		t->cap = cap;
	}
	CUresult e = be_drv.cuMemHostRegister(base, (size_t)len, CU_MEMHOSTREGISTER_PORTABLE);
	if (e != CUDA_SUCCESS)
		LOG_INFO(BE_LOG, "session %" PRIu64 ": cuMemHostRegister of region %u (%" PRIu64 " bytes): %s; its "
			 "copies are staged by the driver", s->id, region, len, be_errname(e));
	t->r[t->n++] = (be_region){region, e == CUDA_SUCCESS, base, len};
	t->added++;
	t->registered += e == CUDA_SUCCESS;
	return CUDA_SUCCESS;
}

typedef struct capture_scan {
	int capturing;
} capture_scan;

static void note_capture(void *ctx, uint64_t id, void *obj, uint64_t aux)
{
	if (aux & BE_GRAPH_CAPTURING)
		((capture_scan *)ctx)->capturing = 1;
}

/* A stream that is not capturing: its copies end before the region goes. */
static void sync_uncaptured(void *ctx, uint64_t id, void *obj, uint64_t aux)
{
	if (!be_stream_capturing((CUstream)obj))
		be_drv.cuStreamSynchronize((CUstream)obj);
}

int be_op_region_drop(be_session *s, be_req *rq, uint32_t region)
{
	be_region *r = find(s, region);
	if (!r)
		return CUDA_ERROR_INVALID_VALUE;
	/* Copies on any device may still read or write it. While a capture is
	 * under way (a cudaFreeHost the client's capture rules allow, from a
	 * thread outside it), a context synchronize would invalidate it: the
	 * streams outside it are waited for instead (a region copy is never
	 * captured; the legacy stream's work is not waited for then). */
	capture_scan cs = {0};
	be_htab_each(&s->graphs, note_capture, &cs);
	for (int d = 0; d < be_srv.ngpu; d++)
		if (s->ctxs[d] && be_session_select(s, (uint32_t)d) == CUDA_SUCCESS) {
			if (!cs.capturing)
				be_drv.cuCtxSynchronize();
			else
				be_htab_each_dev(&s->streams, d, sync_uncaptured, NULL);
		}
	be_session_select(s, (uint32_t)rq->view.status);
	unregister(s, r);
	transport_region_drop(s->conn, region);
	*r = s->regions->r[--s->regions->n];
	return CUDA_SUCCESS;
}

/* The host side of a copy: [off, off+len) of the region, or NULL. */
static void *host_side(be_session *s, const char *op, uint32_t region, uint64_t off, uint64_t len)
{
	void *p;
	if (find(s, region) && transport_region_get(s->conn, region, off, len, &p) == TRANSPORT_OK)
		return p;
	LOG_INFO(BE_LOG, "session %" PRIu64 ": %s: region %u [%" PRIu64 ", +%" PRIu64 ") is not inside a shared "
		 "region of this session", s->id, op, region, off, len);
	return NULL;
}

/* A copy between [dptr, +len) on the device and [off, +len) of region, in
 * stream order, either way; with wait (rq) answered once it is done. */
static int region_copy(be_session *s, be_req *wait, const char *op, int to_device, CUdeviceptr dptr, uint32_t region,
		       uint64_t off, uint64_t len, uint64_t stream_id)
{
	CUstream st;
	int err;
	if ((err = be_get_stream(s, stream_id, &st)))
		return err;
	if (len == 0)
		return CUDA_SUCCESS;
	void *host = host_side(s, op, region, off, len);
	if (!host)
		return CUDA_ERROR_INVALID_VALUE;
	if (!be_ranges_check(&s->ranges, dptr, len))
		return be_bad_range(s, op, dptr, len);
	if ((err = be_stream_capturing(st)))
		return err;
	if (wait && be_inline_now() && !find(s, region)->registered)
		return BE_NOT_NOW;
	s->regions->copies++;
	s->regions->bytes += len;
	CUresult r = to_device ? be_drv.cuMemcpyHtoDAsync(dptr, host, (size_t)len, st)
			       : be_drv.cuMemcpyDtoHAsync(host, dptr, (size_t)len, st);
	if (r != CUDA_SUCCESS || !wait)
		return r;
	return be_waiter_after(s, st, wait, NULL, 0, NULL);
}

int be_op_memcpy_htod_region(be_session *s, be_req *rq, CUdeviceptr dst, uint32_t region, uint64_t off,
			     uint64_t len, uint64_t stream_id)
{
	return region_copy(s, NULL, "memcpy_htod_region", 1, dst, region, off, len, stream_id);
}

int be_op_memcpy_dtoh_region(be_session *s, be_req *rq, CUdeviceptr src, uint32_t region, uint64_t off,
			     uint64_t len, uint64_t stream_id)
{
	return region_copy(s, NULL, "memcpy_dtoh_region", 0, src, region, off, len, stream_id);
}

int be_op_memcpy_htod_region_wait(be_session *s, be_req *rq, CUdeviceptr dst, uint32_t region, uint64_t off,
				  uint64_t len, uint64_t stream_id)
{
	return region_copy(s, rq, "memcpy_htod_region_wait", 1, dst, region, off, len, stream_id);
}

int be_op_memcpy_dtoh_region_wait(be_session *s, be_req *rq, CUdeviceptr src, uint32_t region, uint64_t off,
				  uint64_t len, uint64_t stream_id)
{
	return region_copy(s, rq, "memcpy_dtoh_region_wait", 0, src, region, off, len, stream_id);
}

void be_region_teardown(be_session *s)
{
	struct be_region_tab *t = s->regions;
	if (!t)
		return;
	unsigned n = 0;
	for (size_t i = 0; i < t->n; i++) {
		n += t->r[i].registered;
		unregister(s, &t->r[i]);
	}
	LOG_INFO(BE_LOG, "session %" PRIu64 ": shared regions: %" PRIu64 " added (%" PRIu64 " registered), %" PRIu64
		 " copies of %" PRIu64 " bytes between them and the device; %zu left, %u registrations released", s->id,
		 t->added, t->registered, t->copies, t->bytes, t->n, n);
	free(t->r);
	free(t);
	s->regions = NULL;
}
