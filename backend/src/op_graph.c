/*
 * Stream capture and graphs, executed on the server: the client names graphs and
 * their executable instances with its own ids; the objects stay here.
 */
#include "backend.h"

#include <inttypes.h>
#include <stdlib.h>

#include "ops.h"
#include "tenants.h"

static int id_free(be_session *s, const be_htab *t, const char *kind, uint64_t id)
{
	if (id != 0 && be_htab_get(t, id, NULL, NULL) != BE_H_OK)
		return 0;
	LOG_INFO(BE_LOG, "session %" PRIu64 ": %s id %" PRIu64 " %s", s->id, kind, id,
		 id ? "already in use" : "0 is reserved");
	return CUDA_ERROR_INVALID_HANDLE;
}

/* The executor runs in relaxed mode, as every thread of the server
 * (be_driver_thread_relaxed): the client judges its threads' modes. A client
 * asks for relaxed before its first capture (older servers needed it); another
 * mode would judge its calls against other tenants' captures, so it is refused. */
int be_op_capture_mode(be_session *s, be_req *rq, uint32_t mode)
{
	if (mode > CU_STREAM_CAPTURE_MODE_RELAXED)
		return CUDA_ERROR_INVALID_VALUE;
	if (mode != CU_STREAM_CAPTURE_MODE_RELAXED) {
		LOG_INFO(BE_LOG, "session %" PRIu64 ": capture mode %u refused: the server's threads stay relaxed",
			 s->id, mode);
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
	return be_drv.cuThreadExchangeStreamCaptureMode(&m);
}

/* The bytes g's memory-allocation nodes (cudaMallocAsync captured) may hold,
 * but for those already charged as live allocations of the session (captured
 * without their free: charged at the capture, until freed). The driver reserves
 * graph memory at an exec's upload or first launch and may share it between
 * execs; charging each exec the sum of its nodes while it lives is the bound the
 * tenant's quota can hold before any of it exists (graphs with memory nodes have
 * no child graphs, so the top level is all). */
static CUresult graph_alloc_bytes(be_session *s, CUgraph g, uint64_t *out)
{
	size_t n = 0;
	CUresult r;

	*out = 0;
	if ((r = be_drv.cuGraphGetNodes(g, NULL, &n)) != CUDA_SUCCESS || n == 0)
		return r;
	CUgraphNode *v = malloc(n * sizeof *v);
	if (!v)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if ((r = be_drv.cuGraphGetNodes(g, v, &n)) == CUDA_SUCCESS) {
		for (size_t i = 0; i < n && r == CUDA_SUCCESS; i++) {
			CUgraphNodeType t;
			CUDA_MEM_ALLOC_NODE_PARAMS p;
			if ((r = be_drv.cuGraphNodeGetType(v[i], &t)) != CUDA_SUCCESS || t != CU_GRAPH_NODE_TYPE_MEM_ALLOC)
				continue;
			if ((r = be_drv.cuGraphMemAllocNodeGetParams(v[i], &p)) != CUDA_SUCCESS)
				break;
			if (!be_ranges_check(&s->ranges, (uint64_t)p.dptr, p.bytesize))
				*out += p.bytesize;
		}
	}
	free(v);
	return r;
}

int be_op_graph_instantiate(be_session *s, be_req *rq, uint64_t x_id, uint64_t g_id, uint64_t flags)
{
	CUgraph g;
	CUgraphExec x;
	CUresult r;
	int err;

	if ((err = be_get_graph(s, g_id, &g)) || (err = id_free(s, &s->gexecs, "graph exec", x_id)))
		return err;
	uint64_t charge = 0;
	if (be_tenants_active() && (r = graph_alloc_bytes(s, g, &charge)) != CUDA_SUCCESS)
		return r;
	if (charge && (err = be_tenant_charge(s, charge)))
		return err; /* over the tenant's quota: nothing made */
	/* The exec's copies of the graph's host nodes: held before they exist. */
	be_hostnode_merge(s, 1, x_id, 0, g_id);
	/* cuGraphInstantiate is cuGraphInstantiateWithFlags in CUDA 13. */
	if ((r = be_drv.cuGraphInstantiate(&x, g, (unsigned long long)flags)) != CUDA_SUCCESS) {
		be_hostnode_drop(s, 1, x_id);
		be_tenant_uncharge(s, charge);
		return r;
	}
	/* aux: BE_GEXEC_UNCHECKED, and the bytes charged (given back when the exec goes) */
	uint64_t gaux = 0;
	be_htab_get(&s->graphs, g_id, NULL, &gaux);
	uint64_t xaux = ((gaux & BE_GRAPH_UNCHECKED) ? BE_GEXEC_UNCHECKED : 0) | charge << BE_GEXEC_CHARGE_SHIFT;
	if ((err = be_htab_add(&s->gexecs, x_id, x, xaux))) {
		be_drv.cuGraphExecDestroy(x);
		be_hostnode_drop(s, 1, x_id);
		be_tenant_uncharge(s, charge);
		return be_h_status(err, CUDA_ERROR_INVALID_HANDLE);
	}
	return CUDA_SUCCESS;
}

int be_op_graph_destroy(be_session *s, be_req *rq, uint64_t g_id)
{
	void *g;
	uint64_t aux = 0;
	int err = be_htab_get(&s->graphs, g_id, &g, &aux);
	if (!err && (aux & BE_GRAPH_CAPTURING)) {
		/* the capture owns it until its end (cudaStreamEndCapture) */
		LOG_INFO(BE_LOG, "session %" PRIu64 ": graph_destroy %" PRIu64 ": a capture is under way", s->id, g_id);
		return CUDA_ERROR_ILLEGAL_STATE;
	}
	if (!err) {
		be_graph_forget_nodes(s, g_id, (CUgraph)g);
		err = be_htab_del(&s->graphs, g_id, &g, NULL);
	}
	if (err) {
		LOG_INFO(BE_LOG, "session %" PRIu64 ": graph_destroy %" PRIu64 ": %s", s->id, g_id, be_h_strerror(err));
		return CUDA_ERROR_INVALID_HANDLE;
	}
	CUresult r = be_drv.cuGraphDestroy((CUgraph)g);
	be_hostnode_drop(s, 0, g_id); /* after: the graph's nodes are gone */
	return r;
}

int be_op_graph_exec_destroy(be_session *s, be_req *rq, uint64_t x_id)
{
	void *x;
	uint64_t aux = 0;
	int err = be_htab_del(&s->gexecs, x_id, &x, &aux);
	if (err) {
		LOG_INFO(BE_LOG, "session %" PRIu64 ": graph_exec_destroy %" PRIu64 ": %s", s->id, x_id,
			 be_h_strerror(err));
		return CUDA_ERROR_INVALID_HANDLE;
	}
	CUresult r = be_drv.cuGraphExecDestroy((CUgraphExec)x);
	be_tenant_uncharge(s, aux >> BE_GEXEC_CHARGE_SHIFT);
	/* Launches still in flight hold its host nodes' records themselves. */
	be_hostnode_drop(s, 1, x_id);
	return r;
}

int be_op_graph_launch(be_session *s, be_req *rq, uint64_t x_id, uint64_t stream_id)
{
	CUgraphExec x;
	CUstream st;
	CUresult r;
	int err;

	if ((err = be_get_gexec(s, x_id, &x)) || (err = be_get_stream(s, stream_id, &st)))
		return err;
	uint64_t aux = 0;
	if (be_htab_get(&s->gexecs, x_id, NULL, &aux) == BE_H_OK && (aux & BE_GEXEC_UNCHECKED)) {
		/* A node would touch memory that is not the session's: on a GPU the
		 * launch faults (the address is not mapped in this context). */
		LOG_INFO(BE_LOG, "session %" PRIu64 ": graph exec %" PRIu64 " has a memset or copy outside this "
			 "session's memory: not launched", s->id, x_id);
		return CUDA_ERROR_ILLEGAL_ADDRESS;
	}
	if ((r = be_drv.cuGraphLaunch(x, st)) != CUDA_SUCCESS)
		return r;
	return be_hostnode_launched(s, x_id, st);
}

/* cudaGraphExecUpdate: the driver updates the exec in place when the graph has
 * its topology. Its status travels as a result (err), with the result info: the
 * nodes it names are sent as node ids of graph g. */
int be_op_graph_exec_update(be_session *s, be_req *rq, uint64_t x_id, uint64_t g_id)
{
	CUgraphExec x;
	CUgraph g;
	CUgraphExecUpdateResultInfo info = {0};
	uint64_t node = 0, from = 0;
	int err;

	if (!be_drv.cuGraphExecUpdate) {
		rg_log_once(BE_LOG, "not supported by the server's driver", "cuGraphExecUpdate");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	if ((err = be_get_gexec(s, x_id, &x)) || (err = be_get_graph(s, g_id, &g)))
		return err;
	/* The host nodes the exec may take from g: held before, whatever the answer. */
	be_hostnode_merge(s, 1, x_id, 0, g_id);
	CUresult r = be_drv.cuGraphExecUpdate(x, g, &info);
	if (r == CUDA_SUCCESS) { /* the exec's nodes are g's now */
		uint64_t gaux = 0;
		be_htab_get(&s->graphs, g_id, NULL, &gaux);
		uint64_t xaux = 0;
		be_htab_get(&s->gexecs, x_id, NULL, &xaux);
		xaux = (xaux & ~(uint64_t)BE_GEXEC_UNCHECKED) | ((gaux & BE_GRAPH_UNCHECKED) ? BE_GEXEC_UNCHECKED : 0);
		be_htab_set_aux(&s->gexecs, x_id, xaux);
	}
	if (info.errorNode && be_graph_node_name(s, g_id, info.errorNode, &node))
		node = 0;
	if (info.errorFromNode && be_graph_node_name(s, g_id, info.errorFromNode, &from))
		from = 0;
	proto_msg *m = be_reply_begin(s, rq, 4);
	proto_msg_i64(m, (int64_t)r);
	proto_msg_i64(m, (int64_t)info.result);
	proto_msg_u64(m, node);
	proto_msg_u64(m, from);
	return be_reply_end(s, rq, m, NULL, 0);
}
