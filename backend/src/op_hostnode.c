/*
 * Host nodes: a host function in a graph (cudaGraphAddHostNode, or
 * cudaLaunchHostFunc on a capturing stream) runs in the client at every replay.
 * The driver's node calls back here with a record (the client's id for its
 * function and data); the callback sends the hostfn event and blocks the graph
 * until the client answers hostfn_done, as a stream's host function does
 * (op_hostfn.c). The launch itself stays one async call.
 *
 * A record must outlive every node the driver may still run with it, and the
 * driver copies nodes where we cannot see them (instantiation, clones, child
 * graphs, exec updates, a graph launched into a capture). So records are
 * counted by holders, not by nodes: each graph and each graph exec of the
 * session that may contain a record's node has a holder listing it (a set), and
 * every way a node is copied merges the source's holder into the target's. A
 * holder only grows; it goes when its graph or exec is destroyed, and a record
 * held by no holder is freed, and the client told (hostfn_forget event) so it
 * can forget its function. A destroyed exec may still run (CUDA frees it when
 * its launches end), so each launch of an exec with a holder also holds that
 * holder, until a host function of the server's own that follows the launch in
 * its stream. Where memory runs out, the records concerned are pinned (held
 * until the session ends) rather than freed early. The teardown frees all, after
 * the contexts are gone.
 *
 * Records and holder counts are shared with the driver's callback threads
 * (hn->mu); the holder tables belong to the executor.
 */
#include "backend.h"

#include <inttypes.h>
#include <stdlib.h>

#include "ops.h"

struct be_hnrec {
	be_session *s;
	uint64_t id;
	unsigned refs; /* holders that list it, and pins (mu) */
	struct be_hnrec *prev, *next;
};

typedef struct hn_hold {
	be_session *s;
	unsigned refs; /* its graph or exec, and launches in flight (mu) */
	size_t n, cap;
	be_hnrec **v;
	struct hn_hold *prev, *next;
} hn_hold;

struct be_hn_sess {
	pthread_mutex_t mu;
	be_hnrec *recs;
	hn_hold *holds;
	be_htab graphs, execs; /* client id -> hn_hold */
};

static void CUDA_CB node_cb(void *data)
{
	be_hnrec *r = data;
	be_hostfn_call(r->s, r->id);
}

static be_hn_sess *sess(be_session *s)
{
	if (s->hn)
		return s->hn;
	be_hn_sess *h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	pthread_mutex_init(&h->mu, NULL);
	be_htab_init(&h->graphs);
	be_htab_init(&h->execs);
	return s->hn = h;
}

static be_htab *table(be_hn_sess *h, int exec) { return exec ? &h->execs : &h->graphs; }

/* Tells the client that id is gone, unless the connection is. */
static void tell_forget(be_session *s, uint64_t id)
{
	pthread_mutex_lock(&s->hf_mu);
	int dying = s->hf_dying;
	pthread_mutex_unlock(&s->hf_mu);
	if (dying)
		return;
	proto_msg m;
	proto_msg_begin(&m, PROTO_OP_HOSTFN_FORGET, 0, 1);
	proto_msg_u64(&m, id);
	int err = be_event_send(s, &m);
	if (err)
		LOG_DEBUG(BE_LOG, "session %" PRIu64 ": forget host function %" PRIu64 ": %s", s->id, id,
			  transport_strerror(err));
}

be_hnrec *be_hostnode_new(be_session *s, uint64_t id)
{
	be_hn_sess *h = sess(s);
	be_hnrec *r = h ? calloc(1, sizeof(*r)) : NULL;
	if (!r)
		return NULL;
	r->s = s;
	r->id = id;
	pthread_mutex_lock(&h->mu);
	r->next = h->recs;
	if (h->recs)
		h->recs->prev = r;
	h->recs = r;
	pthread_mutex_unlock(&h->mu);
	return r;
}

/* (mu) */
static void rec_unlink(be_hn_sess *h, be_hnrec *r)
{
	if (r->prev)
		r->prev->next = r->next;
	else
		h->recs = r->next;
	if (r->next)
		r->next->prev = r->prev;
}

void be_hostnode_abandon(be_session *s, be_hnrec *r, int tell)
{
	be_hn_sess *h = s->hn;
	uint64_t id = r->id;
	pthread_mutex_lock(&h->mu);
	rec_unlink(h, r);
	pthread_mutex_unlock(&h->mu);
	free(r);
	if (tell)
		tell_forget(s, id);
}

void be_hostnode_params(be_hnrec *r, CUDA_HOST_NODE_PARAMS *p)
{
	p->fn = node_cb;
	p->userData = r;
}

int be_hostnode_id_of(be_session *s, const CUDA_HOST_NODE_PARAMS *p, uint64_t *id)
{
	be_hn_sess *h = s->hn;
	int found = 0;
	if (h && p->fn == node_cb) {
		pthread_mutex_lock(&h->mu);
		for (be_hnrec *r = h->recs; r && !found; r = r->next)
			if (r == p->userData) {
				*id = r->id;
				found = 1;
			}
		pthread_mutex_unlock(&h->mu);
	}
	if (!found)
		LOG_INFO(BE_LOG, "session %" PRIu64 ": a host node without a record of the session's", s->id);
	return found ? 0 : CUDA_ERROR_INVALID_VALUE;
}

/* The holder of graph or exec id, made if asked (NULL: none, or no memory). */
static hn_hold *hold_get(be_session *s, int exec, uint64_t id, int make)
{
	be_hn_sess *h = make ? sess(s) : s->hn;
	void *o;
	if (!h)
		return NULL;
	if (be_htab_get(table(h, exec), id, &o, NULL) == BE_H_OK)
		return o;
	if (!make)
		return NULL;
	hn_hold *hd = calloc(1, sizeof(*hd));
	if (!hd)
		return NULL;
	hd->s = s;
	hd->refs = 1;
	if (be_htab_add(table(h, exec), id, hd, 0) != BE_H_OK) {
		free(hd);
		return NULL;
	}
	pthread_mutex_lock(&h->mu);
	hd->next = h->holds;
	if (h->holds)
		h->holds->prev = hd;
	h->holds = hd;
	pthread_mutex_unlock(&h->mu);
	return hd;
}

/* Adds r to hd (NULL: no holder could be made), or pins r (mu). */
static void hold_add_locked(be_session *s, hn_hold *hd, be_hnrec *r)
{
	if (hd) {
		for (size_t i = 0; i < hd->n; i++)
			if (hd->v[i] == r)
				return;
		if (hd->n == hd->cap) {
			size_t cap = hd->cap ? 2 * hd->cap : 4;
			be_hnrec **v = realloc(hd->v, cap * sizeof(*v));
			if (v) {
				hd->v = v;
				hd->cap = cap;
			}
		}
		if (hd->n < hd->cap) {
			hd->v[hd->n++] = r;
			r->refs++;
			return;
		}
	}
	r->refs++; /* pinned: freed with the session */
	LOG_WARN(BE_LOG, "session %" PRIu64 ": out of memory: host function %" PRIu64 " kept until the end", s->id,
		 r->id);
}

void be_hostnode_hold(be_session *s, int exec, uint64_t id, be_hnrec *r)
{
	hn_hold *hd = hold_get(s, exec, id, 1);
	pthread_mutex_lock(&s->hn->mu);
	hold_add_locked(s, hd, r);
	pthread_mutex_unlock(&s->hn->mu);
}

void be_hostnode_merge(be_session *s, int to_exec, uint64_t to_id, int from_exec, uint64_t from_id)
{
	hn_hold *from = hold_get(s, from_exec, from_id, 0);
	if (!from)
		return; /* no host nodes: nothing to do, nothing allocated */
	hn_hold *to = hold_get(s, to_exec, to_id, 1);
	pthread_mutex_lock(&s->hn->mu);
	for (size_t i = 0; i < from->n; i++)
		hold_add_locked(s, to, from->v[i]);
	pthread_mutex_unlock(&s->hn->mu);
}

/* One reference to hd less: at none it goes, and the records it was the last
 * holder of (the client is told). Any thread. */
static void hold_unref(be_hn_sess *h, hn_hold *hd)
{
	be_hnrec *dead = NULL;
	be_session *s = hd->s;
	pthread_mutex_lock(&h->mu);
	if (--hd->refs > 0) {
		pthread_mutex_unlock(&h->mu);
		return;
	}
	for (size_t i = 0; i < hd->n; i++) {
		be_hnrec *r = hd->v[i];
		if (--r->refs == 0) {
			rec_unlink(h, r);
			r->next = dead;
			dead = r;
		}
	}
	if (hd->prev)
		hd->prev->next = hd->next;
	else
		h->holds = hd->next;
	if (hd->next)
		hd->next->prev = hd->prev;
	pthread_mutex_unlock(&h->mu);
	free(hd->v);
	free(hd);
	while (dead) {
		be_hnrec *r = dead;
		dead = r->next;
		tell_forget(s, r->id);
		free(r);
	}
}

void be_hostnode_drop(be_session *s, int exec, uint64_t id)
{
	void *o;
	if (s->hn && be_htab_del(table(s->hn, exec), id, &o, NULL) == BE_H_OK)
		hold_unref(s->hn, o);
}

static void CUDA_CB launch_done(void *data)
{
	hn_hold *hd = data;
	hold_unref(hd->s->hn, hd);
}

int be_hostnode_launched(be_session *s, uint64_t x_id, CUstream st)
{
	hn_hold *hd = hold_get(s, 1, x_id, 0);
	uint64_t g_id;
	int err;

	if (!hd)
		return CUDA_SUCCESS;
	if ((err = be_stream_capturing(st))) {
		/* Captured: the capture's graph holds what the exec holds. */
		if (err != CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED || (err = be_capture_graph_id(s, st, &g_id)))
			return err;
		be_hostnode_merge(s, 0, g_id, 1, x_id);
		return CUDA_SUCCESS;
	}
	pthread_mutex_lock(&s->hn->mu);
	hd->refs++;
	pthread_mutex_unlock(&s->hn->mu);
	CUresult r = be_drv.cuLaunchHostFunc(st, launch_done, hd);
	if (r != CUDA_SUCCESS) /* the reference stays: the session's end frees hd */
		LOG_WARN(BE_LOG, "session %" PRIu64 ": graph exec %" PRIu64 ": host nodes kept until the end: %s", s->id,
			 x_id, be_errname(r));
	return CUDA_SUCCESS;
}

int be_hostnode_capture(be_session *s, CUstream st, uint64_t id)
{
	uint64_t g_id = 0;
	int err = be_capture_graph_id(s, st, &g_id);
	be_hnrec *r = err ? NULL : be_hostnode_new(s, id);
	if (!err && !r)
		err = CUDA_ERROR_OUT_OF_MEMORY;
	if (err) {
		tell_forget(s, id); /* async: the client learns of the failure only here */
		return err;
	}
	CUresult cr = be_drv.cuLaunchHostFunc(st, node_cb, r);
	if (cr != CUDA_SUCCESS) {
		be_hostnode_abandon(s, r, 1);
		return cr;
	}
	be_hostnode_hold(s, 0, g_id, r);
	return CUDA_SUCCESS;
}

void be_hostnode_cleanup(be_session *s)
{
	be_hn_sess *h = s->hn;
	if (!h)
		return;
	/* Every holder is in the list, those of destroyed execs too. */
	while (h->holds) {
		hn_hold *hd = h->holds;
		h->holds = hd->next;
		free(hd->v);
		free(hd);
	}
	while (h->recs) {
		be_hnrec *r = h->recs;
		h->recs = r->next;
		free(r);
	}
	be_htab_free(&h->graphs);
	be_htab_free(&h->execs);
	pthread_mutex_destroy(&h->mu);
	free(h);
	s->hn = NULL;
}

int be_op_hostfn_forget(be_session *s, be_req *rq, uint64_t id)
{
	LOG_INFO(BE_LOG, "session %" PRIu64 ": hostfn_forget is an event of the server's, not a request", s->id);
	return CUDA_ERROR_NOT_SUPPORTED;
}

/* ---- the node calls */

typedef struct host_arg {
	CUDA_HOST_NODE_PARAMS p;
	be_session *s;
	uint64_t g_id;
} host_arg;

static CUresult add_host(CUgraphNode *n, CUgraph g, const CUgraphNode *deps, size_t nd, const void *arg)
{
	const host_arg *a = arg;
	CUresult r = be_drv.cuGraphAddHostNode(n, g, deps, nd, &a->p);
	if (r == CUDA_SUCCESS) /* before anything can fail: the node has it now */
		be_hostnode_hold(a->s, 0, a->g_id, a->p.userData);
	return r;
}

int be_op_graph_add_host(be_session *s, be_req *rq, uint64_t g_id, const void *deps, size_t deps_len, uint64_t id)
{
	host_arg a = {.s = s, .g_id = g_id};
	be_hnrec *r = be_hostnode_new(s, id);
	if (!r)
		return CUDA_ERROR_OUT_OF_MEMORY;
	be_hostnode_params(r, &a.p);
	int err = be_graph_add_node(s, rq, g_id, deps, deps_len, add_host, &a);
	/* Not added: the client forgets the function itself (a sync call). */
	if (err && !r->refs)
		be_hostnode_abandon(s, r, 0);
	return err;
}

int be_op_graph_host_get(be_session *s, be_req *rq, uint64_t node_id)
{
	CUgraphNode n;
	CUDA_HOST_NODE_PARAMS p;
	uint64_t id;
	CUresult r;
	int err;

	if ((err = be_graph_node_get(s, node_id, &n, NULL)))
		return err;
	if ((r = be_drv.cuGraphHostNodeGetParams(n, &p)) != CUDA_SUCCESS)
		return r;
	if ((err = be_hostnode_id_of(s, &p, &id)))
		return err;
	return be_reply_u64(s, rq, id);
}

/* x_id 0: the node in its graph; else its copy in that exec. */
int be_op_graph_host_set(be_session *s, be_req *rq, uint64_t x_id, uint64_t node_id, uint64_t id)
{
	CUgraphExec x = NULL;
	CUgraphNode n;
	CUDA_HOST_NODE_PARAMS p;
	uint64_t g_id = 0;
	int err;

	if ((x_id && (err = be_get_gexec(s, x_id, &x))) || (err = be_graph_node_get(s, node_id, &n, &g_id)))
		return err;
	be_hnrec *r = be_hostnode_new(s, id);
	if (!r)
		return CUDA_ERROR_OUT_OF_MEMORY;
	be_hostnode_params(r, &p);
	CUresult cr = x ? be_drv.cuGraphExecHostNodeSetParams(x, n, &p) : be_drv.cuGraphHostNodeSetParams(n, &p);
	if (cr != CUDA_SUCCESS) {
		be_hostnode_abandon(s, r, 0);
		return cr;
	}
	/* The old record stays held: other copies of the node may have it. */
	be_hostnode_hold(s, x ? 1 : 0, x ? x_id : g_id, r);
	return CUDA_SUCCESS;
}
