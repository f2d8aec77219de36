/*
 * graph_exec.c: graph execs: instantiation (the graph flattened into steps in a
 * dependency order), update, per-step parameter changes, upload and replay
 * (graph.c's top comment has the design).
 */
#include "graph_int.h"

#include <stdlib.h>
#include <string.h>

static void exec_free(fk_exec *x)
{
	for (size_t i = 0; i < x->n; i++)
		if (fk_node_has_op(x->steps[i].type))
			fk_op_free(&x->steps[i].op);
	free(x->steps);
	free(x);
}

void fk_exec_destroy(void *o)
{
	fk_exec *x = o;
	fk_handle_del(x->id);
	if (x->busy)
		x->dead = 1;
	else
		exec_free(x);
}


/* Appends g's nodes to x's steps in a dependency order (Kahn's algorithm, lowest
 * index first, so a captured graph keeps its capture order); child graphs inline.
 * CUDA_ERROR_INVALID_VALUE for a cycle. */
static CUresult flatten(const fk_ctx *c, fk_exec *x, size_t *cap, const fk_graph *g)
{
	CUresult rc = CUDA_SUCCESS;
	unsigned char *done = calloc(g->n ? g->n : 1, 1);
	if (!done)
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (size_t left = g->n; left && rc == CUDA_SUCCESS; left--) {
		size_t i;
		for (i = 0; i < g->n; i++) {
			if (done[i])
				continue;
			size_t ready = 1;
			for (size_t d = 0; d < g->nodes[i].ndeps && ready; d++)
				for (size_t j = 0; j < g->n; j++)
					if (g->nodes[j].id == g->nodes[i].deps[d] && !done[j])
						ready = 0;
			if (ready)
				break;
		}
		if (i == g->n) {
			rc = CUDA_ERROR_INVALID_VALUE; /* a cycle */
			break;
		}
		done[i] = 1;
		const fk_gnode *nd = &g->nodes[i];
		if (nd->child) {
			rc = flatten(c, x, cap, nd->child);
			continue;
		}
		if (nd->type == CU_GRAPH_NODE_TYPE_EMPTY || nd->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC ||
		    nd->type == CU_GRAPH_NODE_TYPE_MEM_FREE)
			continue; /* memory nodes: made and freed at capture (fk_capture_mem_node) */
		if (x->n == *cap) {
			size_t ncap = *cap ? *cap * 2 : 16;
			fk_step *st = realloc(x->steps, ncap * sizeof *st);
			if (!st) {
				rc = CUDA_ERROR_OUT_OF_MEMORY;
				break;
			}
			x->steps = st;
			*cap = ncap;
		}
		/* A GPU's driver refuses a memset node into no allocation here, at
		 * instantiation (the capture recorded it as asked). */
		if (nd->type == CU_GRAPH_NODE_TYPE_MEMSET &&
		    nd->op.u.s.height && !fk_range_ok(c, nd->op.u.s.dst,
		                 nd->op.u.s.pitch * (nd->op.u.s.height - 1) + nd->op.u.s.width * nd->op.u.s.elem)) {
			rc = CUDA_ERROR_INVALID_VALUE;
			break;
		}
		fk_step *st = &x->steps[x->n];
		*st = (fk_step){ .node = nd->id, .type = nd->type, .event = nd->event };
		if (fk_node_has_op(nd->type) && fk_op_clone(&st->op, &nd->op) != 0) {
			rc = CUDA_ERROR_OUT_OF_MEMORY;
			break;
		}
		x->n++;
	}
	free(done);
	return rc;
}

CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                             unsigned long long flags)
{
	GRAPH_BEGIN(hGraph);
	fk_exec *x = NULL;
	size_t cap = 0;
	const unsigned long long known = CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH |
	                                 CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |
	                                 CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH |
	                                 CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;

	if (rc == CUDA_SUCCESS && (!phGraphExec || (flags & ~known)))
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS && (flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH))
		rc = CUDA_ERROR_NOT_SUPPORTED;
	if (rc == CUDA_SUCCESS && !(x = calloc(1, sizeof *x)))
		rc = CUDA_ERROR_OUT_OF_MEMORY;
	if (rc == CUDA_SUCCESS)
		rc = flatten(c, x, &cap, g);
	if (rc == CUDA_SUCCESS) {
		x->ctx = c;
		x->flags = flags;
		if (!(x->id = fk_handle_new(FK_GRAPH_EXEC, x, c)))
			rc = CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (rc == CUDA_SUCCESS) {
		*phGraphExec = (CUgraphExec)(uintptr_t)x->id;
	} else if (x) {
		exec_free(x);
		x = NULL;
	}
	return fk_end(rc, __func__, "%p, %#llx -> %#llx", (void *)hGraph, flags,
	              x ? (unsigned long long)x->id : 0ull);
}

#define EXEC_BEGIN(h)                                                                      \
	fk_ctx *c;                                                                         \
	CUresult rc = fk_begin(&c);                                                        \
	fk_exec *x = rc == CUDA_SUCCESS ? fk_handle_get(FK_H(h), FK_GRAPH_EXEC, c) : NULL;  \
	if (rc == CUDA_SUCCESS && !x)                                                      \
		rc = CUDA_ERROR_INVALID_HANDLE

/* An update takes the new graph when it flattens into as many steps of the same
 * types, in order (the fake's notion of an unchanged topology); the exec keeps
 * its steps' node ids. */
CUresult CUDAAPI cuGraphExecUpdate(CUgraphExec hGraphExec, CUgraph hGraph, CUgraphExecUpdateResultInfo *resultInfo)
{
	GRAPH_BEGIN(hGraph);
	fk_exec *x = rc == CUDA_SUCCESS ? fk_handle_get(FK_H(hGraphExec), FK_GRAPH_EXEC, c) : NULL;
	fk_exec t = {0};
	size_t cap = 0;

	if (rc == CUDA_SUCCESS && !x)
		rc = CUDA_ERROR_INVALID_HANDLE;
	else if (rc == CUDA_SUCCESS && !resultInfo)
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS && x->busy)
		rc = CUDA_ERROR_NOT_SUPPORTED;
	if (rc == CUDA_SUCCESS)
		rc = flatten(c, &t, &cap, g);
	if (rc == CUDA_SUCCESS) {
		*resultInfo = (CUgraphExecUpdateResultInfo){ .result = CU_GRAPH_EXEC_UPDATE_SUCCESS };
		if (t.n != x->n) {
			resultInfo->result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
			rc = CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
		}
		for (size_t i = 0; rc == CUDA_SUCCESS && i < t.n; i++) {
			if (t.steps[i].type != x->steps[i].type) {
				resultInfo->result = CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
				resultInfo->errorNode = (CUgraphNode)(uintptr_t)t.steps[i].node;
				rc = CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
			}
		}
	}
	if (rc == CUDA_SUCCESS) {
		for (size_t i = 0; i < x->n; i++) {
			t.steps[i].node = x->steps[i].node;
			if (fk_node_has_op(x->steps[i].type))
				fk_op_free(&x->steps[i].op);
		}
		free(x->steps);
		x->steps = t.steps;
	} else {
		for (size_t i = 0; i < t.n; i++)
			if (fk_node_has_op(t.steps[i].type))
				fk_op_free(&t.steps[i].op);
		free(t.steps);
	}
	return fk_end(rc, __func__, "%p, %p", (void *)hGraphExec, (void *)hGraph);
}

CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec hGraphExec)
{
	EXEC_BEGIN(hGraphExec);
	if (rc == CUDA_SUCCESS)
		fk_exec_destroy(x);
	return fk_end(rc, __func__, "%p", (void *)hGraphExec);
}

CUresult CUDAAPI cuGraphExecGetFlags(CUgraphExec hGraphExec, cuuint64_t *flags)
{
	EXEC_BEGIN(hGraphExec);
	if (rc == CUDA_SUCCESS && !flags)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS)
		*flags = x->flags;
	return fk_end(rc, __func__, "%p", (void *)hGraphExec);
}

/* The step of exec x that node h became, if it is of type (else NULL). */
static fk_step *exec_step(fk_exec *x, CUgraphNode h, int type)
{
	for (size_t i = 0; x && i < x->n; i++)
		if (x->steps[i].node == FK_H(h))
			return x->steps[i].type == type ? &x->steps[i] : NULL;
	return NULL;
}

CUresult CUDAAPI cuGraphExecKernelNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                const CUDA_KERNEL_NODE_PARAMS *p)
{
	EXEC_BEGIN(hGraphExec);
	fk_step *st = exec_step(x, hNode, CU_GRAPH_NODE_TYPE_KERNEL);
	fk_op op;
	if (rc == CUDA_SUCCESS && !st)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS)
		rc = fk_kernel_node_params(c, p, &op);
	if (rc == CUDA_SUCCESS) {
		fk_op_free(&st->op);
		st->op = op;
	}
	return fk_end(rc, __func__, "%p, %p", (void *)hGraphExec, (void *)hNode);
}

CUresult CUDAAPI cuGraphExecHostNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                              const CUDA_HOST_NODE_PARAMS *p)
{
	EXEC_BEGIN(hGraphExec);
	fk_step *st = exec_step(x, hNode, CU_GRAPH_NODE_TYPE_HOST);
	fk_op op;
	if (rc == CUDA_SUCCESS && !st)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS && (rc = fk_host_node_params(p, &op)) == CUDA_SUCCESS)
		st->op = op;
	return fk_end(rc, __func__, "%p, %p", (void *)hGraphExec, (void *)hNode);
}

CUresult CUDAAPI cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream)
{
	EXEC_BEGIN(hGraphExec);
	if (rc == CUDA_SUCCESS && !fk_stream_get(c, hStream))
		rc = CUDA_ERROR_INVALID_HANDLE;
	return fk_end(rc, __func__, "%p", (void *)hGraphExec);
}

static CUresult replay(fk_ctx *c, fk_exec *x)
{
	uint64_t ctx_id = c->id;
	CUresult rc = CUDA_SUCCESS;

	x->busy++;
	for (size_t i = 0; i < x->n && rc == CUDA_SUCCESS && c->sticky == CUDA_SUCCESS; i++) {
		const fk_step *st = &x->steps[i];
		if (st->type == CU_GRAPH_NODE_TYPE_HOST) {
			CUhostFn fn = st->op.u.h.fn;
			void *data = st->op.u.h.data;
			pthread_mutex_unlock(&fk_mu);
			fn(data);
			pthread_mutex_lock(&fk_mu);
			/* the context may have gone while the lock was down */
			if (!(c = fk_handle_get(ctx_id, FK_CTX, NULL))) {
				rc = CUDA_ERROR_CONTEXT_IS_DESTROYED;
				break;
			}
		} else if (st->type == CU_GRAPH_NODE_TYPE_EVENT_RECORD) {
			fk_event *e = fk_handle_get(st->event, FK_EVENT, c);
			if (e) { /* an event destroyed since is skipped */
				e->recorded = 1;
				e->t_ns = fk_now_ns();
			}
		} else if (fk_node_has_op(st->type)) {
			rc = fk_op_run(c, &st->op);
		} /* event waits: everything before has run */
	}
	if (--x->busy == 0 && x->dead)
		exec_free(x);
	return rc;
}

CUresult CUDAAPI cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
	EXEC_BEGIN(hGraphExec);
	fk_stream *s = rc == CUDA_SUCCESS ? fk_stream_get(c, hStream) : NULL;

	if (rc == CUDA_SUCCESS && !s)
		rc = CUDA_ERROR_INVALID_HANDLE;
	if (rc == CUDA_SUCCESS)
		rc = fk_stream_legacy_check(c, hStream);
	if (rc == CUDA_SUCCESS && s->cap) {
		/* launching a graph into a capture captures its nodes (of the kinds a
		 * stream can capture) */
		for (size_t i = 0; i < x->n && rc == CUDA_SUCCESS; i++) {
			fk_op op;
			if (!fk_node_has_op(x->steps[i].type))
				continue;
			if (fk_op_clone(&op, &x->steps[i].op) != 0)
				rc = CUDA_ERROR_OUT_OF_MEMORY;
			else
				rc = fk_submit(c, s, &op);
		}
	} else if (rc == CUDA_SUCCESS) {
		rc = replay(c, x);
	}
	return fk_end(rc, __func__, "%p, %p", (void *)hGraphExec, (void *)hStream);
}
