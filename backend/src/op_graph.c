/*
 * Stream capture and graphs, executed on the server: the client names graphs and
 * their executable instances with its own ids; the objects stay here.
 */
#include "backend.h"

#include <inttypes.h>

#include "ops.h"

static int id_free(be_session *s, const be_htab *t, const char *kind, uint64_t id)
{
	if (id != 0 && be_htab_get(t, id, NULL, NULL) != BE_H_OK)
		return 0;
	LOG_INFO(BE_LOG, "session %" PRIu64 ": %s id %" PRIu64 " %s", s->id, kind, id,
		 id ? "already in use" : "0 is reserved");
	return CUDA_ERROR_INVALID_HANDLE;
}

int be_op_capture_end(be_session *s, be_req *rq, uint64_t stream_id, uint64_t g_id)
{
	CUstream st;
	CUgraph g = NULL;
	CUresult r;
	int err;

	if ((err = be_get_stream(s, stream_id, &st)))
		return err;
	/* End the capture even for a bad graph id: the stream must not stay in
	 * capture mode because of it. */
	if ((r = be_drv.cuStreamEndCapture(st, &g)) != CUDA_SUCCESS)
		return r;
	if ((err = id_free(s, &s->graphs, "graph", g_id)) || (err = be_htab_add(&s->graphs, g_id, g, 0))) {
		be_drv.cuGraphDestroy(g);
		return err == BE_H_ENOMEM ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_HANDLE;
	}
	return CUDA_SUCCESS;
}

/* The executor thread takes the mode the client's calling thread set: the calls
 * that follow run in it (a cudaMalloc in relaxed mode during a global capture is
 * legal; in global mode it fails and invalidates the capture, as on a GPU). The
 * client sends it only when it differs from the mode it last sent. */
int be_op_capture_mode(be_session *s, be_req *rq, uint32_t mode)
{
	CUstreamCaptureMode m = (CUstreamCaptureMode)mode;
	if (mode > CU_STREAM_CAPTURE_MODE_RELAXED)
		return CUDA_ERROR_INVALID_VALUE;
	return be_drv.cuThreadExchangeStreamCaptureMode(&m);
}

int be_op_graph_instantiate(be_session *s, be_req *rq, uint64_t x_id, uint64_t g_id, uint64_t flags)
{
	CUgraph g;
	CUgraphExec x;
	CUresult r;
	int err;

	if ((err = be_get_graph(s, g_id, &g)) || (err = id_free(s, &s->gexecs, "graph exec", x_id)))
		return err;
	/* cuGraphInstantiate is cuGraphInstantiateWithFlags in CUDA 13. */
	if ((r = be_drv.cuGraphInstantiate(&x, g, (unsigned long long)flags)) != CUDA_SUCCESS)
		return r;
	if ((err = be_htab_add(&s->gexecs, x_id, x, 0))) {
		be_drv.cuGraphExecDestroy(x);
		return err == BE_H_ENOMEM ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_HANDLE;
	}
	return CUDA_SUCCESS;
}

int be_op_graph_destroy(be_session *s, be_req *rq, uint64_t g_id)
{
	void *g;
	int err = be_htab_get(&s->graphs, g_id, &g, NULL);
	if (!err) {
		be_graph_forget_nodes(s, g_id, (CUgraph)g);
		err = be_htab_del(&s->graphs, g_id, &g, NULL);
	}
	if (err) {
		LOG_INFO(BE_LOG, "session %" PRIu64 ": graph_destroy %" PRIu64 ": %s", s->id, g_id, be_h_strerror(err));
		return CUDA_ERROR_INVALID_HANDLE;
	}
	return be_drv.cuGraphDestroy((CUgraph)g);
}

int be_op_graph_exec_destroy(be_session *s, be_req *rq, uint64_t x_id)
{
	void *x;
	int err = be_htab_del(&s->gexecs, x_id, &x, NULL);
	if (err) {
		LOG_INFO(BE_LOG, "session %" PRIu64 ": graph_exec_destroy %" PRIu64 ": %s", s->id, x_id,
			 be_h_strerror(err));
		return CUDA_ERROR_INVALID_HANDLE;
	}
	return be_drv.cuGraphExecDestroy((CUgraphExec)x);
}

int be_op_graph_node_count(be_session *s, be_req *rq, uint64_t g_id)
{
	CUgraph g;
	size_t n = 0;
	CUresult r;
	int err;

	if ((err = be_get_graph(s, g_id, &g)))
		return err;
	if ((r = be_drv.cuGraphGetNodes(g, NULL, &n)) != CUDA_SUCCESS)
		return r;
	return be_reply_u64(s, rq, (uint64_t)n);
}
