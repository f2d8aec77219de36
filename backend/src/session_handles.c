/*
 * A session's handle tables (the tables themselves: handles.c) and its
 * allocation ranges: their setup and free, and the typed lookups handlers
 * use, which log an unknown or stale id by kind and answer
 * CUDA_ERROR_INVALID_HANDLE (be_bad_range: the same for a device range that is
 * not the session's, CUDA_ERROR_INVALID_VALUE).
 */
#include "backend.h"

#include <inttypes.h>
#include <string.h>

/* Every handle table of s; the first NTABS_DEV are destroyed with each
 * device's context current (teardown.c), so they note the device. */
#define NTABS 12
#define NTABS_DEV 9

static void tables(be_session *s, be_htab *t[NTABS]);
static int lookup(be_session *s, const be_htab *t, const char *kind, uint64_t id, void **obj, uint64_t *aux);

static void tables(be_session *s, be_htab *t[NTABS])
{
	be_htab *all[NTABS] = {&s->streams, &s->events,   &s->modules, &s->funcs,    &s->graphs, &s->gexecs,
			       &s->arrays,  &s->texobjs,  &s->surfobjs, &s->nodes,   &s->node_ids, &s->pools};
	memcpy(t, all, sizeof(all));
}

void be_session_handles_init(be_session *s)
{
	be_htab *t[NTABS];
	tables(s, t);
	for (int i = 0; i < NTABS; i++) {
		be_htab_init(t[i]);
		if (i < NTABS_DEV)
			t[i]->dev_src = &s->cur;
	}
	be_ranges_init(&s->ranges);
	s->ranges.dev_src = &s->cur;
}

void be_session_handles_free(be_session *s)
{
	be_htab *t[NTABS];
	tables(s, t);
	for (int i = 0; i < NTABS; i++)
		be_htab_free(t[i]);
	be_ranges_free(&s->ranges);
}

static int lookup(be_session *s, const be_htab *t, const char *kind, uint64_t id, void **obj, uint64_t *aux)
{
	int r = be_htab_get(t, id, obj, aux);
	if (r == BE_H_OK)
		return 0;
	LOG_INFO(BE_LOG, "session %" PRIu64 ": %s %" PRIu64 ": %s", s->id, kind, id, be_h_strerror(r));
	return CUDA_ERROR_INVALID_HANDLE;
}

int be_get_stream(be_session *s, uint64_t id, CUstream *out)
{
	void *o = NULL;
	if (id == 0) { /* the NULL stream of the session's context */
		*out = NULL;
		return 0;
	}
	int r = lookup(s, &s->streams, "stream", id, &o, NULL);
	*out = o;
	return r;
}

/* The typed lookups of session.h: one table each, named in the log. */
#define BE_GETTER(name, type, table, label)                                  \
	int be_get_##name(be_session *s, uint64_t id, type *out)            \
	{                                                                    \
		void *o = NULL;                                              \
		int r = lookup(s, &s->table, label, id, &o, NULL);           \
		*out = o;                                                    \
		return r;                                                    \
	}
BE_GETTER(event, CUevent, events, "event")
BE_GETTER(module, CUmodule, modules, "module")
BE_GETTER(func, CUfunction, funcs, "function")
BE_GETTER(graph, CUgraph, graphs, "graph")
BE_GETTER(gexec, CUgraphExec, gexecs, "graph exec")
BE_GETTER(array, be_array *, arrays, "array")
#undef BE_GETTER

int be_stream_capturing(CUstream st)
{
	CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
	if (!be_drv.cuStreamIsCapturing)
		return 0;
	CUresult r = be_drv.cuStreamIsCapturing(st, &cs);
	if (r != CUDA_SUCCESS)
		return r;
	return cs == CU_STREAM_CAPTURE_STATUS_NONE ? 0 : CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

int be_bad_range(be_session *s, const char *op, uint64_t p, uint64_t len)
{
	LOG_INFO(BE_LOG, "session %" PRIu64 ": %s: [0x%" PRIx64 ", +%" PRIu64 ") is not inside one allocation of this "
		 "session", s->id, op, p, len);
	return CUDA_ERROR_INVALID_VALUE;
}
