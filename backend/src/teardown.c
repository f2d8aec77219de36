/*
 * The teardown of a session (executor thread, when the connection ended): what
 * the session created goes, so the devices' memory is back where it was.
 * Order matters (see each step): server to server pushes joined, NCCL
 * communicators aborted (a kernel waiting on a peer would hold everything
 * below), the waiter stopped (bounded: stuck in the driver, the session is
 * leaked instead), every device synchronised, shared regions unregistered,
 * library objects, then graphs, events, streams, modules, texture and surface
 * objects, arrays, VMM memory, allocations, pools, staging, the contexts; a
 * context with a sticky error gives its VMM memory back under a fresh one.
 * The tenant's charges go last. One line of counts ends it.
 */
#include "backend.h"
#include "prio.h"
#include "stripe.h"
#include "peer.h"
#include "teardown.h"
#include "tenants.h"

#include <inttypes.h>
#include <stdlib.h>

typedef struct td_count {
	be_session *s;
	unsigned n, failed;
} td_count;

static void td_graph(void *ctx, uint64_t id, void *obj, uint64_t aux);
static void td_array(void *ctx, uint64_t id, void *obj, uint64_t aux);
static void teardown_vmm_fresh(be_session *s);

/* An htab_each callback per kind: destroys one object, counts it and its
 * failure. */
#define TD_DESTROY(kind, call)                                                  \
	static void td_##kind(void *ctx, uint64_t id, void *obj, uint64_t aux)  \
	{                                                                       \
		td_count *c = ctx;                                              \
		(void)id, (void)obj, (void)aux;                                 \
		c->n++;                                                         \
		c->failed += (call) != CUDA_SUCCESS;                            \
	}
TD_DESTROY(gexec, be_drv.cuGraphExecDestroy((CUgraphExec)obj))
TD_DESTROY(event, be_drv.cuEventDestroy((CUevent)obj))
TD_DESTROY(stream, be_drv.cuStreamDestroy((CUstream)obj))
TD_DESTROY(module, be_drv.cuModuleUnload((CUmodule)obj))
TD_DESTROY(texobj, be_drv.cuTexObjectDestroy((CUtexObject)id))
TD_DESTROY(surfobj, be_drv.cuSurfObjectDestroy((CUsurfObject)id))
/* After the session's allocations are freed: a pool is the device's, not the
 * context's, so cuCtxDestroy would leave it and its reserve behind. */
TD_DESTROY(pool, be_drv.cuMemPoolDestroy((CUmemoryPool)obj))
#undef TD_DESTROY

static void td_graph(void *ctx, uint64_t id, void *obj, uint64_t aux)
{
	td_count *c = ctx;
	if (aux & BE_GRAPH_CAPTURING)
		return; /* a capture's: it goes with its stream, below */
	c->n++;
	c->failed += be_drv.cuGraphDestroy((CUgraph)obj) != CUDA_SUCCESS;
}

static void td_array(void *ctx, uint64_t id, void *obj, uint64_t aux)
{
	td_count *c = ctx;
	be_array *a = obj;
	c->n++;
	c->failed += be_drv.cuArrayDestroy(a->h) != CUDA_SUCCESS;
	free(a);
}

/* The session's VMM objects under a context of its own, when the session's
 * context had a sticky error (be_session_teardown). Without one they are
 * only forgotten, and the failure logged. */
static void teardown_vmm_fresh(be_session *s)
{
	CUcontext tmp = NULL;
	CUresult r = be_drv.cuCtxCreate(&tmp, NULL, 0, be_srv.gpu[0].dev);

	if (r != CUDA_SUCCESS)
		LOG_WARN(BE_LOG, "session %" PRIu64 ": no context to release VMM memory after a sticky error: %s",
			 s->id, be_errname(r));
	be_vmm_teardown(s);
	if (tmp && (r = be_drv.cuCtxDestroy(tmp)) != CUDA_SUCCESS)
		LOG_WARN(BE_LOG, "session %" PRIu64 ": cuCtxDestroy: %s", s->id, be_errname(r));
}

void be_session_teardown(be_session *s)
{
	td_count gx = {s}, gr = {s}, ev = {s}, st = {s}, mo = {s}, to = {s}, so = {s}, ar = {s}, po = {s};
	unsigned nalloc = 0, afailed = 0;
	uint64_t bytes = s->ranges.bytes;
	CUresult r;

	be_peer_push_join(s); /* they use the session's staging, streams and connection */
	be_fetch_stop(s);     /* its copies read the session's memory on streams of its own */
	be_stripe_secret_forget(s); /* no stripe joins s from now on */
	be_stripes_join_all(s);     /* the stripe threads use its staging */
	if (s->ctx) {
		/* Communicators first: an NCCL kernel waiting on a peer that will not
		 * come would hold the waiter and cuCtxSynchronize below forever. */
		be_drv.cuCtxSetCurrent(s->ctx);
		be_lib_teardown_early(s);
	}
	if (be_waiter_stop(s) != 0) {
		/* The waiter is inside the driver and does not come back: nothing of
		 * the session may be freed under it. Better a leak than a crash. */
		s->leaked = 1;
		LOG_ERROR(BE_LOG, "session %" PRIu64 ": waiter stuck in the driver for %d ms; the session's "
			  "resources are leaked", s->id, BE_WAITER_JOIN_MS);
		return;
	}
	unsigned nchunks = s->staging.nchunks;
	uint64_t fallbacks = s->staging.fallbacks;
	if (s->ctx) {
		/* Frees must not fail because a capture is under way, here (the client
		 * left in the middle of one) or in another session of the process. */
		CUstreamCaptureMode relaxed = CU_STREAM_CAPTURE_MODE_RELAXED;
		be_drv.cuThreadExchangeStreamCaptureMode(&relaxed);
		/* Every device's work ends first: a peer copy may still read memory
		 * of another device. */
		int poisoned = 0;
		for (int d = be_srv.ngpu - 1; d >= 0; d--) {
			if ((r = be_session_select(s, (uint32_t)d)) != CUDA_SUCCESS)
				LOG_WARN(BE_LOG, "session %" PRIu64 ": cuCtxSetCurrent: %s", s->id, be_errname(r));
			if ((r = be_drv.cuCtxSynchronize()) != CUDA_SUCCESS)
				LOG_INFO(BE_LOG, "session %" PRIu64 ": cuCtxSynchronize at teardown: %s", s->id,
					 be_errname(r));
			/* A failed synchronize means a sticky error (a kernel faulted): the
			 * context refuses every later call, cuMemRelease and cuMemUnmap too,
			 * and VMM memory is the device's, so cuCtxDestroy would not take it
			 * either. It is released under a fresh context instead, below. */
			poisoned |= r != CUDA_SUCCESS;
		}
		/* (device 0's context is current now) */
		be_region_teardown(s); /* no copy reads the regions any more */
		be_waiter_cleanup(s);
		be_prio_drop(s);    /* its marker events, while their contexts live */
		be_lib_teardown(s); /* library handles may use the streams below */
		/* Each object is destroyed with its own device's context current. */
		for (int d = be_srv.ngpu - 1; d >= 0; d--) {
			be_session_select(s, (uint32_t)d);
			be_htab_each_dev(&s->gexecs, d, td_gexec, &gx);
			be_htab_each_dev(&s->graphs, d, td_graph, &gr);
			be_htab_each_dev(&s->events, d, td_event, &ev);
			be_htab_each_dev(&s->streams, d, td_stream, &st);
			be_htab_each_dev(&s->modules, d, td_module, &mo);
			/* Objects that read an array go before it. */
			be_htab_each_dev(&s->texobjs, d, td_texobj, &to);
			be_htab_each_dev(&s->surfobjs, d, td_surfobj, &so);
			be_htab_each_dev(&s->arrays, d, td_array, &ar);
			if (!poisoned && d == 0)
				be_vmm_teardown(s); /* mappings before the memory behind them, reservations last */
			for (size_t i = 0; i < s->ranges.n; i++) {
				if (s->ranges.r[i].kind == BE_RANGE_VAR || s->ranges.r[i].kind == BE_RANGE_MAPPED ||
				    s->ranges.r[i].dev != d)
					continue;
				nalloc++;
				afailed += be_drv.cuMemFree((CUdeviceptr)s->ranges.r[i].base) != CUDA_SUCCESS;
			}
		}
		be_htab_each(&s->pools, td_pool, &po);
		be_staging_destroy(&s->staging);
		for (int d = be_srv.ngpu - 1; d >= 0; d--) {
			if (!s->ctxs[d])
				continue;
			r = be_srv.primary_ctx ? be_drv.cuDevicePrimaryCtxRelease(be_srv.gpu[d].dev)
					       : be_drv.cuCtxDestroy(s->ctxs[d]);
			if (r != CUDA_SUCCESS)
				LOG_WARN(BE_LOG, "session %" PRIu64 ": %s: %s", s->id,
					 be_srv.primary_ctx ? "cuDevicePrimaryCtxRelease" : "cuCtxDestroy", be_errname(r));
			s->ctxs[d] = NULL;
		}
		s->ctx = NULL;
		be_session_select_forget();
		if (poisoned)
			teardown_vmm_fresh(s);
	} else {
		be_region_teardown(s);
		be_waiter_cleanup(s);
		be_staging_destroy(&s->staging);
	}
	be_hostfn_cleanup(s);
	be_hostnode_cleanup(s);
	be_tenant_logout(s); /* after every free: what is left goes back at once */
	unsigned failed = gx.failed + gr.failed + ev.failed + st.failed + mo.failed + to.failed + so.failed + ar.failed +
			  po.failed + afailed;
	LOG_INFO(BE_LOG,
		 "session %" PRIu64 " (%s, pid %" PRIu64 " %s) ended: freed %u allocations (%" PRIu64 " bytes), "
		 "%u streams, %u events, %u modules, %u graphs, %u graph execs, %u arrays, %u texture and %u surface "
		 "objects, %u memory pools; staging %u chunks, %" PRIu64 " copies through pageable memory; %" PRIu64
		 " synchronous copies served by the receiving thread, %" PRIu64 " handed to the executor%s",
		 s->id, s->client_host[0] ? s->client_host : s->peer, s->pid, s->program[0] ? s->program : "?", nalloc,
		 bytes, st.n, ev.n, mo.n, gr.n, gx.n, ar.n, to.n, so.n, po.n, nchunks, fallbacks,
		 atomic_load_explicit(&s->now_inline, memory_order_relaxed),
		 atomic_load_explicit(&s->now_handed, memory_order_relaxed), failed ? " (some destroys failed)" : "");
}
