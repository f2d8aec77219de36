/*
 * Stream capture on the server. The client names a capture's graph at its
 * begin: the driver creates the graph there, and the id goes into the session's
 * graph table at once, marked BE_GRAPH_CAPTURING, so that
 * cudaStreamGetCaptureInfo can name it and its nodes while the capture is under
 * way (and cudaStreamUpdateCaptureDependencies take node ids of it). The end
 * hands out the same graph under the same id. The stream that began the capture
 * keeps the graph's id as its aux in s->streams until the end, which is how the
 * server knows which graph an end, or the destroy of that stream, concerns,
 * whatever id the client says.
 *
 * Everything the capture records (kernels, copies, memsets, library calls such as
 * cuBLAS's: they run on the executor thread with the handle's stream, which is the
 * capturing one) goes into the driver's graph in the order the calls arrive.
 */
#include "backend.h"

#include <inttypes.h>
#include <stdlib.h>

#include "ops.h"

/* The id of the graph stream_id's capture was begun with (0: none). */
static uint64_t capture_graph_of(be_session *s, uint64_t stream_id)
{
	uint64_t g_id = 0;
	if (stream_id && be_htab_get(&s->streams, stream_id, NULL, &g_id) != BE_H_OK)
		return 0;
	return g_id;
}

/* Sets the aux of stream stream_id (its capture's graph id, 0 at the end). */
static int stream_mark(be_session *s, uint64_t stream_id, uint64_t g_id)
{
	void *st;
	if (be_htab_del(&s->streams, stream_id, &st, NULL) != BE_H_OK)
		return CUDA_ERROR_INVALID_HANDLE;
	return be_htab_add(&s->streams, stream_id, st, g_id) == BE_H_OK ? 0 : CUDA_ERROR_OUT_OF_MEMORY;
}

int be_op_capture_begin(be_session *s, be_req *rq, uint64_t stream_id, uint32_t mode, uint64_t g_id)
{
	CUstream st;
	CUgraph g = NULL;
	CUstreamCaptureStatus cs;
	cuuint64_t cid;
	CUresult r;
	int err;

	if ((err = be_get_stream(s, stream_id, &st)))
		return err;
	if (g_id == 0 || be_htab_get(&s->graphs, g_id, NULL, NULL) == BE_H_OK) {
		LOG_INFO(BE_LOG, "session %" PRIu64 ": capture graph id %" PRIu64 " %s", s->id, g_id,
			 g_id ? "already in use" : "0 is reserved");
		return CUDA_ERROR_INVALID_HANDLE;
	}
	if ((r = be_drv.cuStreamBeginCapture(st, (CUstreamCaptureMode)mode)) != CUDA_SUCCESS)
		return r;
	r = be_drv.cuStreamGetCaptureInfo(st, &cs, &cid, &g, NULL, NULL, NULL);
	if (r == CUDA_SUCCESS) {
		if (be_htab_add(&s->graphs, g_id, g, BE_GRAPH_CAPTURING) != BE_H_OK)
			err = CUDA_ERROR_OUT_OF_MEMORY; /* g_id is free (above): only memory fails */
		else if ((err = stream_mark(s, stream_id, g_id)) == CUDA_SUCCESS)
			return CUDA_SUCCESS;
		else
			be_htab_del(&s->graphs, g_id, NULL, NULL);
	}
	/* Not recorded: the capture must not go on without its id. */
	g = NULL;
	if (be_drv.cuStreamEndCapture(st, &g) == CUDA_SUCCESS && g)
		be_drv.cuGraphDestroy(g);
	return r != CUDA_SUCCESS ? (int)r : err;
}

/* Forgets the graph of a capture that ended without handing it out (the driver
 * destroyed it) and its node ids. */
static void forget_capture_graph(be_session *s, uint64_t g_id)
{
	be_graph_forget_owned(s, g_id);
	be_htab_del(&s->graphs, g_id, NULL, NULL);
	be_graph_dropped(s, g_id);
}

typedef struct find_graph {
	CUgraph g;
	uint64_t id;
} find_graph;

static void match_capturing(void *ctx, uint64_t id, void *obj, uint64_t aux)
{
	find_graph *f = ctx;
	if ((aux & BE_GRAPH_CAPTURING) && obj == f->g)
		f->id = id;
}

int be_capture_graph_id(be_session *s, CUstream st, uint64_t *g_id)
{
	CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
	cuuint64_t cid;
	find_graph f = {0};
	CUresult r = be_drv.cuStreamGetCaptureInfo(st, &cs, &cid, &f.g, NULL, NULL, NULL);
	if (r != CUDA_SUCCESS)
		return r;
	if (cs == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
		return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
	if (cs != CU_STREAM_CAPTURE_STATUS_ACTIVE)
		return CUDA_ERROR_ILLEGAL_STATE;
	be_htab_each(&s->graphs, match_capturing, &f);
	if (!f.id) {
		LOG_INFO(BE_LOG, "session %" PRIu64 ": a capture whose graph has no id", s->id);
		return CUDA_ERROR_ILLEGAL_STATE;
	}
	*g_id = f.id;
	return 0;
}

int be_op_capture_end(be_session *s, be_req *rq, uint64_t stream_id, uint64_t g_id)
{
	CUstream st;
	CUgraph g = NULL;
	void *o = NULL;
	CUresult r;
	int err;

	if ((err = be_get_stream(s, stream_id, &st)))
		return err;
	uint64_t cap_id = capture_graph_of(s, stream_id);
	if (!cap_id) /* not the stream that began a capture: the driver's answer */
		return be_drv.cuStreamEndCapture(st, &g);
	if (cap_id != g_id) {
		LOG_INFO(BE_LOG, "session %" PRIu64 ": capture_end names graph %" PRIu64 ", the capture's is %" PRIu64,
			 s->id, g_id, cap_id);
		return CUDA_ERROR_INVALID_HANDLE;
	}
	uint64_t aux = 0;
	be_htab_get(&s->graphs, cap_id, &o, &aux);
	r = be_drv.cuStreamEndCapture(st, &g);
	if (r == CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD)
		return r; /* still under way */
	stream_mark(s, stream_id, 0);
	if (r != CUDA_SUCCESS) {
		forget_capture_graph(s, cap_id);
		return r;
	}
	/* The graph the capture built is the one its begin named. */
	be_htab_del(&s->graphs, cap_id, NULL, NULL);
	if (g != o) {
		LOG_WARN(BE_LOG, "session %" PRIu64 ": the driver ended a capture with another graph than it began",
			 s->id);
		be_graph_forget_owned(s, cap_id);
	}
	if ((err = be_htab_add(&s->graphs, cap_id, g, aux & BE_GRAPH_UNCHECKED))) {
		be_drv.cuGraphDestroy(g);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	return CUDA_SUCCESS;
}

int be_capture_unchecked(be_session *s, CUstream st, const char *op, uint64_t p, uint64_t len)
{
	uint64_t g_id, aux = 0;
	if (be_capture_graph_id(s, st, &g_id) || be_htab_get(&s->graphs, g_id, NULL, &aux) != BE_H_OK)
		return be_bad_range(s, op, p, len);
	if (!(aux & BE_GRAPH_UNCHECKED))
		LOG_INFO(BE_LOG, "session %" PRIu64 ": %s: [0x%" PRIx64 ", +%" PRIu64 ") is not this session's memory: "
			 "recorded into graph %" PRIu64 ", whose execs will not launch", s->id, op, p, len, g_id);
	be_htab_set_aux(&s->graphs, g_id, aux | BE_GRAPH_UNCHECKED);
	return 0;
}

void be_capture_drop(CUstream st, uint64_t g_id, be_session *s)
{
	CUgraph g = NULL;
	forget_capture_graph(s, g_id);
	if (be_drv.cuStreamEndCapture(st, &g) == CUDA_SUCCESS && g)
		be_drv.cuGraphDestroy(g);
}

/* The graph of the capture stream_id takes part in, if it is the graph g_id. */
static int capture_graph(be_session *s, CUstream st, uint64_t g_id, CUstreamCaptureStatus *cs, cuuint64_t *cid,
			 CUgraph *g, const CUgraphNode **deps, size_t *n)
{
	void *o;
	uint64_t aux = 0;
	CUresult r = be_drv.cuStreamGetCaptureInfo(st, cs, cid, g, deps, NULL, n);
	if (r != CUDA_SUCCESS || *cs != CU_STREAM_CAPTURE_STATUS_ACTIVE)
		return r;
	if (be_htab_get(&s->graphs, g_id, &o, &aux) != BE_H_OK || !(aux & BE_GRAPH_CAPTURING) || o != *g) {
		LOG_INFO(BE_LOG, "session %" PRIu64 ": graph %" PRIu64 " is not the graph of the stream's capture", s->id,
			 g_id);
		return CUDA_ERROR_INVALID_VALUE;
	}
	return 0;
}

int be_op_capture_info(be_session *s, be_req *rq, uint64_t stream_id, uint64_t g_id, uint64_t max)
{
	CUstream st;
	CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
	cuuint64_t cid = 0;
	CUgraph g = NULL;
	const CUgraphNode *deps = NULL;
	size_t n = 0;
	int err;

	if ((err = be_get_stream(s, stream_id, &st)) || (err = capture_graph(s, st, g_id, &cs, &cid, &g, &deps, &n)))
		return err;
	if (cs != CU_STREAM_CAPTURE_STATUS_ACTIVE)
		n = 0;
	size_t k = n < max ? n : (size_t)max;
	uint8_t *ids = malloc(k ? k * 8 : 1);
	if (!ids)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (!(err = be_graph_name_nodes(s, g_id, deps, k, ids))) {
		proto_msg *m = be_reply_begin(s, rq, 4);
		proto_msg_u64(m, (uint64_t)cs);
		proto_msg_u64(m, (uint64_t)cid);
		proto_msg_u64(m, (uint64_t)n);
		proto_msg_bin(m, ids, k * 8);
		err = be_reply_end(s, rq, m, NULL, 0);
	}
	free(ids);
	return err;
}

int be_op_capture_set_deps(be_session *s, be_req *rq, uint64_t stream_id, uint64_t g_id, const void *deps,
			   size_t deps_len, uint32_t flags)
{
	CUstream st;
	CUstreamCaptureStatus cs;
	cuuint64_t cid;
	CUgraph g;
	const CUgraphNode *now;
	CUgraphNode small[16], *v;
	size_t n, nv;
	int err;

	if (!be_drv.cuStreamUpdateCaptureDependencies) {
		rg_log_once(BE_LOG, "not supported by the server's driver", "cuStreamUpdateCaptureDependencies");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	if ((err = be_get_stream(s, stream_id, &st)) || (err = capture_graph(s, st, g_id, &cs, &cid, &g, &now, &n)))
		return err;
	if (cs != CU_STREAM_CAPTURE_STATUS_ACTIVE)
		return CUDA_ERROR_ILLEGAL_STATE;
	if ((err = be_graph_node_list(s, g_id, deps, deps_len, small, 16, &v, &nv)))
		return err;
	CUresult r = be_drv.cuStreamUpdateCaptureDependencies(st, v, NULL, nv, flags);
	if (v != small)
		free(v);
	return r;
}
