/*
 * The fake's graphs, shared by capture.c (stream capture records ops as
 * nodes), graph.c (graphs and their nodes, the graph API) and graph_exec.c
 * (instantiation into steps, replay). graph.c's top comment is the design.
 */
#ifndef FK_GRAPH_INT_H
#define FK_GRAPH_INT_H

#include "fake.h"

typedef struct fk_gnode {
	uint64_t id;
	int type;              /* CUgraphNodeType */
	fk_op op;              /* kernel, memcpy, memset, host */
	uint64_t event;        /* event record / wait */
	fk_graph *child;       /* child graph: the node's own copy */
	uint64_t mem_ptr;      /* memory alloc / free node: the address */
	size_t mem_size;       /* memory alloc node: its size */
	uint64_t *deps;        /* nodes this one depends on */
	size_t ndeps;
} fk_gnode;

struct fk_graph {
	uint64_t id;           /* 0 for a child graph's copy (no handle) */
	fk_ctx *ctx;
	fk_gnode *nodes;
	size_t n, cap;
};

typedef struct fk_step {
	uint64_t node;         /* the graph node it came from */
	int type;
	fk_op op;
	uint64_t event;
} fk_step;

typedef struct fk_exec {
	uint64_t id;
	fk_ctx *ctx;
	fk_step *steps;
	size_t n;
	unsigned long long flags; /* as instantiated */
	unsigned busy;         /* replays in progress */
	int dead;              /* destroyed while busy */
} fk_exec;

/* Start of every call on a graph handle: c, rc and g, the graph of h. */
#define GRAPH_BEGIN(h)                                                                 \
	fk_ctx *c;                                                                     \
	CUresult rc = fk_begin(&c);                                                    \
	fk_graph *g = rc == CUDA_SUCCESS ? fk_handle_get(FK_H(h), FK_GRAPH, c) : NULL;  \
	if (rc == CUDA_SUCCESS && !g)                                                  \
		rc = CUDA_ERROR_INVALID_HANDLE

/* capture.c: runs one stream-ordered op now (a replay step, an op on a stream
 * that does not capture). */
CUresult fk_op_run(fk_ctx *c, const fk_op *op);
/* graph.c: whether a node of type carries an fk_op (kernel, memcpy, memset, host). */
int fk_node_has_op(int type);
/* A new empty graph of c (with_handle: one the program can name). */
fk_graph *fk_graph_new(fk_ctx *c, int with_handle);
/* The node id of g, or NULL. */
fk_gnode *fk_node_in(fk_graph *g, uint64_t id);
/* Appends a node of type depending on deps (checked by the caller); NULL when
 * out of memory. */
fk_gnode *fk_graph_add(fk_graph *g, int type, const uint64_t *deps, size_t ndeps);
/* A node handle of context c: its graph and record, or NULL. */
fk_gnode *fk_node_get(fk_ctx *c, CUgraphNode h, fk_graph **gp);
/* A kernel or host node's parameters, checked, as an op. */
CUresult fk_kernel_node_params(fk_ctx *c, const CUDA_KERNEL_NODE_PARAMS *p, fk_op *op);
CUresult fk_host_node_params(const CUDA_HOST_NODE_PARAMS *p, fk_op *op);

#endif
