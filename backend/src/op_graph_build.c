/*
 * Graphs built node by node (cudaGraphCreate, cudaGraphAdd*Node, edges, node
 * queries, clones), on the driver's cuGraph* calls.
 *
 * Nodes are the one kind of handle the server names rather than the client: the
 * driver creates nodes of its own (stream capture, cuGraphClone), which the
 * client meets only when it lists a graph. A node gets an id from the session's
 * counter the first time the client sees it (its add, or a list that holds it),
 * and two tables map both ways: nodes (id -> CUgraphNode) and node_ids
 * (CUgraphNode -> id), each entry's aux the client id of the node's graph. An id
 * of another graph, a destroyed node or an unknown number is
 * CUDA_ERROR_INVALID_VALUE, as CUDA answers for a bad node, and never reaches the
 * driver. Destroying a node or its graph forgets its ids; the driver frees the
 * nodes with their graph, so the session's end only drops the tables.
 *
 * Copies and memsets in nodes are checked against the session's allocations when
 * added, as a stream's are; the driver runs them in the session's context. A
 * graph a capture recorded unchecked nodes into keeps its mark through clones and
 * child nodes (BE_GRAPH_UNCHECKED).
 */
#include "backend.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

/* A node list from the wire is bounded: the server allocates for it. */
#define MAX_LIST (1u << 20)

static int node_get(be_session *s, uint64_t id, uint64_t g_id, CUgraphNode *out)
{
	void *o = NULL;
	uint64_t owner = 0;
	int err = be_htab_get(&s->nodes, id, &o, &owner);
	if (err || (g_id && owner != g_id)) {
		LOG_INFO(BE_LOG, "session %" PRIu64 ": graph node %" PRIu64 ": %s", s->id, id,
			 err ? be_h_strerror(err) : "belongs to another graph");
		return CUDA_ERROR_INVALID_VALUE;
	}
	*out = o;
	return 0;
}

/* The id of node n of graph g_id, named now if the client has not seen it. */
static be_graph_watch watch; /* set before any session */

void be_graph_set_watch(const be_graph_watch *w) { watch = *w; }

void be_graph_copied(be_session *s, uint64_t to_id, uint64_t from_id)
{
	if (watch.merge)
		watch.merge(s, 0, to_id, 0, from_id);
	uint64_t from = 0, to = 0;
	if (be_htab_get(&s->graphs, from_id, NULL, &from) == BE_H_OK && (from & BE_GRAPH_UNCHECKED) &&
	    be_htab_get(&s->graphs, to_id, NULL, &to) == BE_H_OK)
		be_htab_set_aux(&s->graphs, to_id, to | BE_GRAPH_UNCHECKED);
}

void be_graph_dropped(be_session *s, uint64_t g_id)
{
	if (watch.drop)
		watch.drop(s, 0, g_id);
}

int be_graph_node_name(be_session *s, uint64_t g_id, CUgraphNode n, uint64_t *id)
{
	void *o;
	if (be_htab_get(&s->node_ids, (uint64_t)(uintptr_t)n, &o, NULL) == BE_H_OK) {
		*id = (uint64_t)(uintptr_t)o;
		return 0;
	}
	uint64_t nid = ++s->node_seq;
	if (be_htab_add(&s->nodes, nid, n, g_id))
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (be_htab_add(&s->node_ids, (uint64_t)(uintptr_t)n, (void *)(uintptr_t)nid, g_id)) {
		be_htab_del(&s->nodes, nid, NULL, NULL);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*id = nid;
	return 0;
}

static void node_forget(be_session *s, CUgraphNode n)
{
	void *o;
	if (be_htab_del(&s->node_ids, (uint64_t)(uintptr_t)n, &o, NULL) == BE_H_OK)
		be_htab_del(&s->nodes, (uint64_t)(uintptr_t)o, NULL, NULL);
}

void be_graph_forget_nodes(be_session *s, uint64_t g_id, CUgraph g)
{
	size_t n = 0;
	if (!be_htab_count(&s->nodes) || be_drv.cuGraphGetNodes(g, NULL, &n) != CUDA_SUCCESS || !n)
		return;
	CUgraphNode *v = malloc(n * sizeof(*v));
	if (!v)
		return; /* the ids stay; a later lookup of one still names this graph */
	if (be_drv.cuGraphGetNodes(g, v, &n) == CUDA_SUCCESS)
		for (size_t i = 0; i < n; i++)
			node_forget(s, v[i]);
	free(v);
}

typedef struct owned {
	uint64_t g_id;
	uint64_t *ids;
	size_t n, cap;
	int nomem;
} owned;

static void collect_owned(void *ctx, uint64_t id, void *obj, uint64_t aux)
{
	owned *o = ctx;
	if (aux != o->g_id)
		return;
	if (o->n == o->cap) {
		size_t cap = o->cap ? 2 * o->cap : 16;
		uint64_t *v = realloc(o->ids, cap * sizeof(*v));
		if (!v) {
			o->nomem = 1;
			return;
		}
		o->ids = v;
		o->cap = cap;
	}
	o->ids[o->n++] = id;
}

void be_graph_forget_owned(be_session *s, uint64_t g_id)
{
	owned o = {.g_id = g_id};
	if (!be_htab_count(&s->nodes))
		return;
	be_htab_each(&s->nodes, collect_owned, &o);
	if (o.nomem)
		LOG_WARN(BE_LOG, "session %" PRIu64 ": out of memory forgetting the node ids of graph %" PRIu64, s->id,
			 g_id);
	for (size_t i = 0; i < o.n; i++) {
		void *n;
		if (be_htab_del(&s->nodes, o.ids[i], &n, NULL) == BE_H_OK)
			be_htab_del(&s->node_ids, (uint64_t)(uintptr_t)n, NULL, NULL);
	}
	free(o.ids);
}

/* A node list (deps, edge ends) of graph g_id: *out is small or malloc'd (the
 * caller frees it if not). */
int be_graph_node_list(be_session *s, uint64_t g_id, const void *ids, size_t len, CUgraphNode *small, size_t nsmall,
		       CUgraphNode **out, size_t *n)
{
	int err;
	if (len % 8 || len / 8 > MAX_LIST) {
		LOG_INFO(BE_LOG, "session %" PRIu64 ": node list of %zu bytes", s->id, len);
		return CUDA_ERROR_INVALID_VALUE;
	}
	*n = len / 8;
	*out = small;
	if (*n > nsmall && !(*out = malloc(*n * sizeof(**out))))
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (size_t i = 0; i < *n; i++) {
		uint64_t id;
		memcpy(&id, (const uint8_t *)ids + 8 * i, 8);
		if ((err = node_get(s, id, g_id, &(*out)[i]))) {
			if (*out != small)
				free(*out);
			return err;
		}
	}
	return 0;
}

int be_graph_node_get(be_session *s, uint64_t id, CUgraphNode *out, uint64_t *g_id)
{
	int err = node_get(s, id, 0, out);
	if (!err && g_id)
		be_htab_get(&s->nodes, id, NULL, g_id);
	return err;
}

/* The common path of every add: graph and dependencies looked up, the driver's
 * add run by the caller's fn, the new node named and sent back. */
int be_graph_add_node(be_session *s, be_req *rq, uint64_t g_id, const void *deps, size_t deps_len, be_graph_add_fn fn,
		      const void *arg)
{
	CUgraph g;
	CUgraphNode small[16], *dv, n;
	size_t nd;
	uint64_t id;
	int err;

	if ((err = be_get_graph(s, g_id, &g)) || (err = be_graph_node_list(s, g_id, deps, deps_len, small, 16, &dv, &nd)))
		return err;
	CUresult r = fn(&n, g, dv, nd, arg);
	if (dv != small)
		free(dv);
	if (r != CUDA_SUCCESS)
		return r;
	if ((err = be_graph_node_name(s, g_id, n, &id))) {
		be_drv.cuGraphDestroyNode(n);
		return err;
	}
	return be_reply_u64(s, rq, id);
}

int be_op_graph_create(be_session *s, be_req *rq, uint64_t g_id, uint32_t flags)
{
	CUgraph g;
	CUresult r;
	int err;

	if (g_id == 0 || be_htab_get(&s->graphs, g_id, NULL, NULL) == BE_H_OK) {
		LOG_INFO(BE_LOG, "session %" PRIu64 ": graph id %" PRIu64 " is taken", s->id, g_id);
		return CUDA_ERROR_INVALID_HANDLE;
	}
	if ((r = be_drv.cuGraphCreate(&g, flags)) != CUDA_SUCCESS)
		return r;
	if ((err = be_htab_add(&s->graphs, g_id, g, 0))) {
		be_drv.cuGraphDestroy(g);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	return CUDA_SUCCESS;
}

int be_op_graph_clone(be_session *s, be_req *rq, uint64_t copy_id, uint64_t g_id)
{
	CUgraph g, c;
	CUresult r;
	int err;

	if ((err = be_get_graph(s, g_id, &g)))
		return err;
	if (copy_id == 0 || be_htab_get(&s->graphs, copy_id, NULL, NULL) == BE_H_OK) {
		LOG_INFO(BE_LOG, "session %" PRIu64 ": graph id %" PRIu64 " is taken", s->id, copy_id);
		return CUDA_ERROR_INVALID_HANDLE;
	}
	/* The copy's nodes are the driver's own: named when listed. */
	if ((r = be_drv.cuGraphClone(&c, g)) != CUDA_SUCCESS)
		return r;
	if (be_htab_add(&s->graphs, copy_id, c, 0)) {
		be_drv.cuGraphDestroy(c);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	be_graph_copied(s, copy_id, g_id); /* its host nodes, its mark */
	return CUDA_SUCCESS;
}

static CUresult add_empty(CUgraphNode *n, CUgraph g, const CUgraphNode *deps, size_t nd, const void *arg)
{
	return be_drv.cuGraphAddEmptyNode(n, g, deps, nd);
}

int be_op_graph_add_empty(be_session *s, be_req *rq, uint64_t g_id, const void *deps, size_t deps_len)
{
	return be_graph_add_node(s, rq, g_id, deps, deps_len, add_empty, NULL);
}

static CUresult add_kernel(CUgraphNode *n, CUgraph g, const CUgraphNode *deps, size_t nd, const void *arg)
{
	return be_drv.cuGraphAddKernelNode(n, g, deps, nd, arg);
}

static void kernel_params(CUDA_KERNEL_NODE_PARAMS *p, CUfunction fn, uint32_t gx, uint32_t gy, uint32_t gz,
			  uint32_t bx, uint32_t by, uint32_t bz, uint32_t shmem, be_kargs *a)
{
	memset(p, 0, sizeof(*p));
	p->func = fn;
	p->gridDimX = gx;
	p->gridDimY = gy;
	p->gridDimZ = gz;
	p->blockDimX = bx;
	p->blockDimY = by;
	p->blockDimZ = bz;
	p->sharedMemBytes = shmem;
	p->extra = a->extra; /* the driver copies the buffer into the node */
}

int be_op_graph_add_kernel(be_session *s, be_req *rq, uint64_t g_id, const void *deps, size_t deps_len, uint64_t f_id,
			   uint32_t gx, uint32_t gy, uint32_t gz, uint32_t bx, uint32_t by, uint32_t bz, uint32_t shmem,
			   const void *params, size_t params_len)
{
	CUfunction fn;
	CUDA_KERNEL_NODE_PARAMS p;
	be_kargs a;
	int err;

	if ((err = be_kargs_take(s, f_id, params, params_len, &fn, &a)))
		return err;
	kernel_params(&p, fn, gx, gy, gz, bx, by, bz, shmem, &a);
	err = be_graph_add_node(s, rq, g_id, deps, deps_len, add_kernel, &p);
	be_kargs_free(&a);
	return err;
}

int be_op_graph_kernel_set(be_session *s, be_req *rq, uint64_t x_id, uint64_t node_id, uint64_t f_id, uint32_t gx,
			   uint32_t gy, uint32_t gz, uint32_t bx, uint32_t by, uint32_t bz, uint32_t shmem,
			   const void *params, size_t params_len)
{
	CUgraphExec x = NULL;
	CUgraphNode n;
	CUfunction fn;
	CUDA_KERNEL_NODE_PARAMS p;
	be_kargs a;
	int err;

	/* x 0: the node in its graph; else the node's copy in that exec */
	if ((x_id && (err = be_get_gexec(s, x_id, &x))) || (err = node_get(s, node_id, 0, &n)) ||
	    (err = be_kargs_take(s, f_id, params, params_len, &fn, &a)))
		return err;
	kernel_params(&p, fn, gx, gy, gz, bx, by, bz, shmem, &a);
	CUresult r = x ? be_drv.cuGraphExecKernelNodeSetParams(x, n, &p) : be_drv.cuGraphKernelNodeSetParams(n, &p);
	be_kargs_free(&a);
	return r;
}

typedef struct memset_arg {
	CUDA_MEMSET_NODE_PARAMS p;
	CUcontext ctx;
} memset_arg;

static CUresult add_memset(CUgraphNode *n, CUgraph g, const CUgraphNode *deps, size_t nd, const void *arg)
{
	const memset_arg *m = arg;
	return be_drv.cuGraphAddMemsetNode(n, g, deps, nd, &m->p, m->ctx);
}

int be_op_graph_add_memset(be_session *s, be_req *rq, uint64_t g_id, const void *deps, size_t deps_len,
			   CUdeviceptr dst, uint64_t pitch, uint32_t value, uint32_t elemsize, uint64_t width,
			   uint64_t height)
{
	if (elemsize != 1 && elemsize != 2 && elemsize != 4)
		return CUDA_ERROR_INVALID_VALUE;
	if (width > UINT64_MAX / elemsize)
		return CUDA_ERROR_INVALID_VALUE;
	uint64_t wbytes = width * elemsize;
	/* the driver refuses an empty memset node itself */
	if (wbytes && height && !be_ranges_check_2d(&s->ranges, dst, height > 1 ? pitch : wbytes, wbytes, height))
		return be_bad_range(s, "graph memset node", dst, pitch * (height - 1) + wbytes);
	memset_arg m = {
		.p = {.dst = dst, .pitch = (size_t)pitch, .value = value, .elementSize = elemsize,
		      .width = (size_t)width, .height = (size_t)height},
		.ctx = s->ctx,
	};
	return be_graph_add_node(s, rq, g_id, deps, deps_len, add_memset, &m);
}

typedef struct memcpy_arg {
	CUDA_MEMCPY3D p;
	CUcontext ctx;
} memcpy_arg;

static CUresult add_memcpy(CUgraphNode *n, CUgraph g, const CUgraphNode *deps, size_t nd, const void *arg)
{
	const memcpy_arg *m = arg;
	return be_drv.cuGraphAddMemcpyNode(n, g, deps, nd, &m->p, m->ctx);
}

int be_op_graph_add_memcpy(be_session *s, be_req *rq, uint64_t g_id, const void *deps, size_t deps_len,
			   CUdeviceptr dst, uint64_t dpitch, uint64_t dheight, CUdeviceptr src, uint64_t spitch,
			   uint64_t sheight, uint64_t width, uint64_t height, uint64_t depth)
{
	if (width && height && depth) {
		if (!be_ranges_check_3d(&s->ranges, dst, dpitch, dheight, width, height, depth))
			return be_bad_range(s, "graph memcpy node (dst)", dst, width);
		if (!be_ranges_check_3d(&s->ranges, src, spitch, sheight, width, height, depth))
			return be_bad_range(s, "graph memcpy node (src)", src, width);
	}
	memcpy_arg m;
	memset(&m, 0, sizeof(m));
	m.p.srcMemoryType = CU_MEMORYTYPE_DEVICE;
	m.p.srcDevice = src;
	m.p.srcPitch = (size_t)spitch;
	m.p.srcHeight = (size_t)sheight;
	m.p.dstMemoryType = CU_MEMORYTYPE_DEVICE;
	m.p.dstDevice = dst;
	m.p.dstPitch = (size_t)dpitch;
	m.p.dstHeight = (size_t)dheight;
	m.p.WidthInBytes = (size_t)width;
	m.p.Height = (size_t)height;
	m.p.Depth = (size_t)depth;
	m.ctx = s->ctx;
	return be_graph_add_node(s, rq, g_id, deps, deps_len, add_memcpy, &m);
}

typedef struct event_arg {
	CUevent e;
	uint32_t wait;
} event_arg;

static CUresult add_event(CUgraphNode *n, CUgraph g, const CUgraphNode *deps, size_t nd, const void *arg)
{
	const event_arg *ev = arg;
	return ev->wait ? be_drv.cuGraphAddEventWaitNode(n, g, deps, nd, ev->e)
			: be_drv.cuGraphAddEventRecordNode(n, g, deps, nd, ev->e);
}

int be_op_graph_add_event(be_session *s, be_req *rq, uint64_t g_id, const void *deps, size_t deps_len, uint64_t e_id,
			  uint32_t wait)
{
	event_arg ev = {.wait = wait};
	int err;

	if ((err = be_get_event(s, e_id, &ev.e)))
		return err;
	return be_graph_add_node(s, rq, g_id, deps, deps_len, add_event, &ev);
}

static CUresult add_child(CUgraphNode *n, CUgraph g, const CUgraphNode *deps, size_t nd, const void *arg)
{
	return be_drv.cuGraphAddChildGraphNode(n, g, deps, nd, (CUgraph)arg);
}

int be_op_graph_add_child(be_session *s, be_req *rq, uint64_t g_id, const void *deps, size_t deps_len,
			  uint64_t child_id)
{
	CUgraph child, parent;
	int err;

	/* The node holds the driver's copy of child; its nodes get no ids. */
	if ((err = be_get_graph(s, child_id, &child)) || (err = be_get_graph(s, g_id, &parent)))
		return err;
	/* The copy's host nodes: held before it exists (holding more is harmless);
	 * marked even if the add fails (only launches are refused). */
	be_graph_copied(s, g_id, child_id);
	return be_graph_add_node(s, rq, g_id, deps, deps_len, add_child, child);
}

int be_op_graph_edges_edit(be_session *s, be_req *rq, uint64_t g_id, const void *from, size_t from_len,
			   const void *to, size_t to_len, uint32_t remove)
{
	CUgraph g;
	CUgraphNode fs[16], ts[16], *fv, *tv;
	size_t nf, nt;
	int err;

	if ((err = be_get_graph(s, g_id, &g)))
		return err;
	if (from_len != to_len)
		return CUDA_ERROR_INVALID_VALUE;
	if ((err = be_graph_node_list(s, g_id, from, from_len, fs, 16, &fv, &nf)))
		return err;
	if ((err = be_graph_node_list(s, g_id, to, to_len, ts, 16, &tv, &nt))) {
		if (fv != fs)
			free(fv);
		return err;
	}
	CUresult r = remove ? be_drv.cuGraphRemoveDependencies(g, fv, tv, NULL, nf)
			    : be_drv.cuGraphAddDependencies(g, fv, tv, NULL, nf);
	if (fv != fs)
		free(fv);
	if (tv != ts)
		free(tv);
	return r;
}

/* Names the n nodes of v into ids (little-endian u64). */
int be_graph_name_nodes(be_session *s, uint64_t g_id, const CUgraphNode *v, size_t n, uint8_t *ids)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t id;
		int err = be_graph_node_name(s, g_id, v[i], &id);
		if (err)
			return err;
		memcpy(ids + 8 * i, &id, 8);
	}
	return 0;
}

int be_op_graph_get_nodes(be_session *s, be_req *rq, uint64_t g_id, uint32_t roots, uint64_t max)
{
	CUgraph g;
	size_t n = 0;
	CUresult r;
	int err;

	if ((err = be_get_graph(s, g_id, &g)))
		return err;
	r = roots ? be_drv.cuGraphGetRootNodes(g, NULL, &n) : be_drv.cuGraphGetNodes(g, NULL, &n);
	if (r != CUDA_SUCCESS)
		return r;
	size_t k = n < max ? n : (size_t)max;
	CUgraphNode *v = malloc((n ? n : 1) * sizeof(*v));
	uint8_t *ids = malloc(k ? k * 8 : 1);
	err = !v || !ids ? CUDA_ERROR_OUT_OF_MEMORY : 0;
	if (!err && n)
		err = roots ? be_drv.cuGraphGetRootNodes(g, v, &n) : be_drv.cuGraphGetNodes(g, v, &n);
	if (!err && k > n)
		k = n;
	if (!err)
		err = be_graph_name_nodes(s, g_id, v, k, ids);
	if (!err) {
		proto_msg *m = be_reply_begin(s, rq, 2);
		proto_msg_u64(m, n);
		proto_msg_bin(m, ids, k * 8);
		err = be_reply_end(s, rq, m, NULL, 0);
	}
	free(v);
	free(ids);
	return err;
}

int be_op_graph_get_edges(be_session *s, be_req *rq, uint64_t g_id, uint64_t max)
{
	CUgraph g;
	size_t n = 0;
	CUresult r;
	int err;

	if ((err = be_get_graph(s, g_id, &g)))
		return err;
	if ((r = be_drv.cuGraphGetEdges(g, NULL, NULL, NULL, &n)) != CUDA_SUCCESS)
		return r;
	size_t k = n < max ? n : (size_t)max;
	CUgraphNode *from = malloc((n ? n : 1) * sizeof(*from)), *to = malloc((n ? n : 1) * sizeof(*to));
	uint8_t *fids = malloc(k ? k * 8 : 1), *tids = malloc(k ? k * 8 : 1);
	err = !from || !to || !fids || !tids ? CUDA_ERROR_OUT_OF_MEMORY : 0;
	if (!err && n)
		err = be_drv.cuGraphGetEdges(g, from, to, NULL, &n);
	if (!err && k > n)
		k = n;
	if (!err && !(err = be_graph_name_nodes(s, g_id, from, k, fids)))
		err = be_graph_name_nodes(s, g_id, to, k, tids);
	if (!err) {
		proto_msg *m = be_reply_begin(s, rq, 3);
		proto_msg_u64(m, n);
		proto_msg_bin(m, fids, k * 8);
		proto_msg_bin(m, tids, k * 8);
		err = be_reply_end(s, rq, m, NULL, 0);
	}
	free(from);
	free(to);
	free(fids);
	free(tids);
	return err;
}

int be_op_graph_node_type(be_session *s, be_req *rq, uint64_t node_id)
{
	CUgraphNode n;
	CUgraphNodeType t;
	CUresult r;
	int err;

	if ((err = node_get(s, node_id, 0, &n)))
		return err;
	if ((r = be_drv.cuGraphNodeGetType(n, &t)) != CUDA_SUCCESS)
		return r;
	proto_msg *m = be_reply_begin(s, rq, 1);
	proto_msg_i64(m, (int64_t)t);
	return be_reply_end(s, rq, m, NULL, 0);
}

int be_op_graph_destroy_node(be_session *s, be_req *rq, uint64_t node_id)
{
	CUgraphNode n;
	CUresult r;
	int err;

	if ((err = node_get(s, node_id, 0, &n)))
		return err;
	if ((r = be_drv.cuGraphDestroyNode(n)) != CUDA_SUCCESS)
		return r;
	node_forget(s, n);
	return CUDA_SUCCESS;
}
