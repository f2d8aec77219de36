/*
 * test_client: module loads and launches, graphs, host functions and host
 * nodes (the events the client gets, in order).
 */
#define _GNU_SOURCE
#include "test_client.h"

/* Module load, kernel parameter layouts, launches, globals. Needs the test
 * kernels fatbin (built by tests/fakecuda when nvcc exists). */
void t_modules(srv *s)
{
	cli k;
	rep r;
	struct stat sb;
	if (!g_fatbin || stat(g_fatbin, &sb) != 0) {
		printf("t_modules: no kernels fatbin, module tests skipped\n");
		return;
	}
	FILE *f = fopen(g_fatbin, "rb");
	size_t n = (size_t)sb.st_size;
	uint8_t *img = malloc(n);
	if (!CHECK(f && fread(img, 1, n, f) == n)) {
		if (f)
			fclose(f);
		free(img);
		return;
	}
	fclose(f);
	char hash[CUBIN_HASH_HEX], bad[CUBIN_HASH_HEX];
	cubin_hash(img, n, hash);
	memcpy(bad, hash, sizeof(bad));
	bad[0] = bad[0] == '0' ? '1' : '0';
	const char *names = "f:1:rgtest_fill_u32\nf:2:mixed\nv:gvar\nf:3:noparams\nf:4:no_such_kernel\nv:ginit\n";

	if (!CHECK(open_session(&k, s->port) == 0))
		goto out;
	/* not cached yet: FILE_NOT_FOUND; then the upload */
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MODULE_LOAD, "ubus", U(1), hash, (size_t)CUBIN_HASH_LEN, U(n), names),
		 CUDA_ERROR_FILE_NOT_FOUND);
	CHECK_EQ(call(&k, NULL, NULL, 0, img, n, PROTO_OP_MODULE_LOAD, "ubus", U(1), bad, (size_t)CUBIN_HASH_LEN, U(n), names),
		 CUDA_ERROR_INVALID_SOURCE); /* bytes that do not hash to the name */
	CHECK_EQ(call(&k, NULL, NULL, 0, img, n, PROTO_OP_MODULE_LOAD, "ubus", U(1), hash, (size_t)CUBIN_HASH_LEN, U(n + 1), names),
		 CUDA_ERROR_INVALID_SOURCE);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MODULE_LOAD, "ubus", U(1), hash, (size_t)32, U(n), names), /* XXH3-128's length */
		 CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MODULE_LOAD, "ubus", U(0), hash, (size_t)CUBIN_HASH_LEN, U(n), names),
		 CUDA_ERROR_INVALID_HANDLE);
	CHECK_EQ(call(&k, NULL, NULL, 0, img, n, PROTO_OP_MODULE_LOAD, "ubus", U(1), hash, (size_t)CUBIN_HASH_LEN, U(n),
		      "f:x:bad\n"), CUDA_ERROR_INVALID_VALUE);
	int st = call(&k, &r, NULL, 0, img, n, PROTO_OP_MODULE_LOAD, "ubus", U(1), hash, (size_t)CUBIN_HASH_LEN, U(n), names);
	CHECK_EQ(st, 0);
	uint64_t gvar = 0, gsize = 0;
	if (st == 0) {
		const msgpack_object *e;
		uint32_t ne;
		if (CHECK(proto_arg_array(&r.v, PROTO_REPLY_FIRST, &e, &ne) == 0 && ne == 6)) {
			/* f:1 rgtest_fill_u32(unsigned *, unsigned, unsigned long long) */
			CHECK(e[0].type == MSGPACK_OBJECT_ARRAY && e[0].via.array.size == 2);
			CHECK(e[0].via.array.ptr[0].via.u64 == 0);
			const msgpack_object_bin *lb = &e[0].via.array.ptr[1].via.bin;
			static const uint8_t want[] = {0, 0, 0, 0, 8, 0, 0, 0, 8, 0, 0, 0, 4, 0, 0, 0,
						       16, 0, 0, 0, 8, 0, 0, 0};
			CHECK(lb->size == sizeof(want) && memcmp(lb->ptr, want, sizeof(want)) == 0);
			/* v:gvar */
			CHECK(e[2].via.array.size == 3 && e[2].via.array.ptr[0].via.u64 == 0);
			gvar = e[2].via.array.ptr[1].via.u64;
			gsize = e[2].via.array.ptr[2].via.u64;
			CHECK_EQ(gsize, 40);
			/* f:3 noparams: an empty layout */
			CHECK(e[3].via.array.ptr[0].via.u64 == 0 && e[3].via.array.ptr[1].via.bin.size == 0);
			/* f:4: not found, the others still resolved */
			CHECK(e[4].via.array.ptr[0].type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
			      e[4].via.array.ptr[0].via.u64 == CUDA_ERROR_NOT_FOUND);
		}
	}
	rep_free(&r);
	/* the module id is taken now */
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MODULE_LOAD, "ubus", U(1), hash, (size_t)CUBIN_HASH_LEN, U(n), ""),
		 CUDA_ERROR_INVALID_HANDLE);
	/* launch rgtest_fill_u32(p, 0x11223344, 1000) */
	uint64_t p = mem_alloc(&k, 4000);
	uint8_t params[24] = {0}, back[4000];
	uint32_t v = 0x11223344;
	uint64_t cnt = 1000;
	memcpy(params, &p, 8);
	memcpy(params + 8, &v, 4);
	memcpy(params + 16, &cnt, 8);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_LAUNCH, "uuuuuuuuubb", U(1), U(4), U(1), U(1), U(256), U(1), U(1), U(0),
		      U(0), params, (size_t)24, NULL, (size_t)0), 0);
	CHECK_EQ(dtoh(&k, back, p, 4000, 0), 0);
	int ok = 1;
	for (int i = 0; i < 1000; i++)
		ok &= memcmp(back + 4 * i, &v, 4) == 0;
	CHECK(ok);
	CHECK_EQ(k.latched, 0);
	/* wrong argument size; an unknown function; a launch attribute with a handle */
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_LAUNCH, "uuuuuuuuubb", U(1), U(1), U(1), U(1), U(1), U(1), U(1), U(0),
		      U(0), params, (size_t)20, NULL, (size_t)0), 0);
	CHECK_EQ(mem_free_bytes(&k) > 0, 1);
	CHECK_EQ(k.latched, CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_LAUNCH, "uuuuuuuuubb", U(99), U(1), U(1), U(1), U(1), U(1), U(1), U(0),
		      U(0), params, (size_t)24, NULL, (size_t)0), 0);
	CHECK_EQ(mem_free_bytes(&k) > 0, 1);
	CHECK_EQ(k.latched, CUDA_ERROR_INVALID_HANDLE);
	CUlaunchAttribute at[2];
	memset(at, 0, sizeof(at));
	at[0].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
	at[0].value.priority = 0;
	at[1].id = CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT;
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_LAUNCH, "uuuuuuuuubb", U(1), U(1), U(1), U(1), U(32), U(1), U(1), U(0),
		      U(0), params, (size_t)24, at, sizeof(at)), 0);
	CHECK_EQ(mem_free_bytes(&k) > 0, 1);
	CHECK_EQ(k.latched, CUDA_ERROR_NOT_SUPPORTED);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_LAUNCH, "uuuuuuuuubb", U(1), U(1), U(1), U(1), U(32), U(1), U(1), U(0),
		      U(0), params, (size_t)24, at, sizeof(at[0])), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_LAUNCH, "uuuuuuuuubb", U(1), U(1), U(1), U(1), U(32), U(1), U(1), U(0),
		      U(0), params, (size_t)24, at, (size_t)5), 0);
	CHECK_EQ(mem_free_bytes(&k) > 0, 1);
	CHECK_EQ(k.latched, CUDA_ERROR_INVALID_VALUE); /* the first launch went, the second did not */
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_LAUNCH, "uuuuuuuuubb", U(3), U(1), U(1), U(1), U(1), U(1), U(1), U(0),
		      U(0), NULL, (size_t)0, NULL, (size_t)0), 0);
	CHECK_EQ(mem_free_bytes(&k) > 0, 1);
	CHECK_EQ(k.latched, 0);
	/* function attributes */
	CHECK_EQ(call(&k, &r, NULL, 0, NULL, 0, PROTO_OP_FUNC_GET_ATTRS, "u", U(1)), 0);
	const void *ab;
	size_t an = 0;
	CHECK(proto_arg_bin(&r.v, PROTO_REPLY_FIRST, &ab, &an) == 0 && an == 4 * CU_FUNC_ATTRIBUTE_MAX);
	rep_free(&r);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_FUNC_GET_ATTRS, "u", U(5)), CUDA_ERROR_INVALID_HANDLE);
	/* a global is a valid copy range, not a freeable allocation */
	if (gvar) {
		uint8_t g[40];
		fill(g, 40, 9);
		CHECK_EQ(htod(&k, gvar, g, 40, 0), 0);
		CHECK_EQ(dtoh(&k, back, gvar, 40, 0), 0);
		CHECK_MEM(g, back, 40);
		CHECK_EQ(dtoh(&k, back, gvar, 41, 0), CUDA_ERROR_INVALID_VALUE);
		CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEM_FREE, "u", gvar), CUDA_ERROR_INVALID_VALUE);
	}
	/* cached now: another id loads without the image, in a new session too */
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MODULE_LOAD, "ubus", U(2), hash, (size_t)CUBIN_HASH_LEN, U(n),
		      "f:11:rgtest_fill_u32"), 0);
	cli_close(&k);
	if (CHECK(open_session(&k, s->port) == 0)) {
		CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MODULE_LOAD, "ubus", U(1), hash, (size_t)CUBIN_HASH_LEN, U(n),
			      "f:1:rgtest_fill_u32"), 0);
		cli_close(&k);
	}
	/* module globals are device memory too: gone with the sessions */
	if (CHECK(open_session(&k, s->port) == 0)) {
		CHECK_EQ(wait_baseline(&k), g_baseline);
		cli_close(&k);
	}
out:
	free(img);
}

void t_graphs(srv *s)
{
	cli k;
	rep r;
	if (!CHECK(open_session(&k, s->port) == 0))
		return;
	uint64_t p = mem_alloc(&k, 1024);
	uint8_t back[16];
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_MEMSET, "uuuuu", p, U(0), U(1), U(1024), U(0)), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_STREAM_CREATE, "uui", U(3), U(1), I(0)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_DEVICE_SYNC, ""), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_CAPTURE_BEGIN, "uuu", U(3), U(0), U(0)),
		 CUDA_ERROR_INVALID_HANDLE); /* the graph id 0 */
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_CAPTURE_BEGIN, "uuu", U(3), U(0), U(20)), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_MEMSET, "uuuuu", p, U(0x5a), U(1), U(16), U(3)), 0);
	/* the capture's graph has its id already: one dependency, the memset */
	CHECK_EQ(call(&k, &r, NULL, 0, NULL, 0, PROTO_OP_CAPTURE_INFO, "uuu", U(3), U(20), U(8)), 0);
	CHECK_EQ(u64_result(&r, 0), CU_STREAM_CAPTURE_STATUS_ACTIVE);
	CHECK_EQ(u64_result(&r, 2), 1);
	rep_free(&r);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_CAPTURE_INFO, "uuu", U(3), U(21), U(8)),
		 CUDA_ERROR_INVALID_VALUE); /* not the capture's graph */
	/* the capture owns it: no destroy, and the end names it */
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_GRAPH_DESTROY, "u", U(20)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_CAPTURE_END, "uu", U(3), U(21)), CUDA_ERROR_INVALID_HANDLE);
	CHECK_EQ(k.latched, CUDA_ERROR_ILLEGAL_STATE);
	/* a mode out of range; devout is not a request */
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_CAPTURE_MODE, "u", U(7)), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_DEVOUT, "b", "x", (size_t)1), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_STREAM_QUERY, "u", U(0)), 0);
	CHECK_EQ(k.latched, CUDA_ERROR_INVALID_VALUE);
	/* a staging copy into a capturing stream is refused */
	CHECK_EQ(dtoh(&k, back, p, 16, 3), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_CAPTURE_END, "uu", U(3), U(20)), 0);
	CHECK_EQ(call(&k, &r, NULL, 0, NULL, 0, PROTO_OP_GRAPH_NODE_COUNT, "u", U(20)), 0);
	CHECK_EQ(u64_result(&r, 0), 1);
	rep_free(&r);
	CHECK_EQ(dtoh(&k, back, p, 16, 0), 0);
	CHECK(back[0] == 0 && back[15] == 0); /* captured, not run */
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_GRAPH_INSTANTIATE, "uuu", U(30), U(20), U(0)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_GRAPH_INSTANTIATE, "uuu", U(30), U(20), U(0)),
		 CUDA_ERROR_INVALID_HANDLE);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_GRAPH_LAUNCH, "uu", U(30), U(3)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_STREAM_SYNC, "u", U(3)), 0);
	CHECK_EQ(dtoh(&k, back, p, 16, 0), 0);
	CHECK(back[0] == 0x5a && back[15] == 0x5a);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_GRAPH_EXEC_DESTROY, "u", U(30)), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_GRAPH_LAUNCH, "uu", U(30), U(3)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_GRAPH_NODE_COUNT, "u", U(21)), CUDA_ERROR_INVALID_HANDLE);
	CHECK_EQ(k.latched, CUDA_ERROR_INVALID_HANDLE);
	/* a second graph and exec left for the teardown */
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_CAPTURE_BEGIN, "uuu", U(3), U(0), U(20)),
		 CUDA_ERROR_INVALID_HANDLE); /* id in use */
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_CAPTURE_BEGIN, "uuu", U(3), U(0), U(21)), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_MEMSET, "uuuuu", p, U(1), U(1), U(16), U(3)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_CAPTURE_END, "uu", U(3), U(21)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_GRAPH_INSTANTIATE, "uuu", U(31), U(21), U(0)), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_GRAPH_DESTROY, "u", U(20)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_GRAPH_NODE_COUNT, "u", U(20)), CUDA_ERROR_INVALID_HANDLE);
	/* memory pool attributes */
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEMPOOL_SET_ATTR, "uiu", U(0), I(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD),
		      U(1 << 20)), 0);
	CHECK_EQ(call(&k, &r, NULL, 0, NULL, 0, PROTO_OP_MEMPOOL_GET_ATTR, "ui", U(0), I(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)), 0);
	CHECK_EQ(u64_result(&r, 0), 1 << 20);
	rep_free(&r);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEMPOOL_SET_ATTR, "uiu", U(0), I(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD),
		      U(0)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEMPOOL_GET_ATTR, "ui", U(0), I(999)), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEMPOOL_SET_ATTR, "uiu",
		      U(0), I(CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC), U(1ull << 40)), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_MEMPOOL_TRIM, "uu", U(0), U(0)), 0);
	/* a pool of the session's: attributes, an allocation from it, the current
	 * pool; destroyed, its id is stale; another left for the teardown */
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEMPOOL_CREATE, "uuuu", U(0x1880), U(CU_MEM_ALLOCATION_TYPE_PINNED),
		      U(0), U(0)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEMPOOL_CREATE, "uuuu", U(0x1880), U(CU_MEM_ALLOCATION_TYPE_PINNED),
		      U(0), U(0)), CUDA_ERROR_INVALID_VALUE); /* id in use */
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEMPOOL_SET_ATTR, "uiu", U(0x1880),
		      I(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), U(4096)), 0);
	CHECK_EQ(call(&k, &r, NULL, 0, NULL, 0, PROTO_OP_MEMPOOL_GET_ATTR, "ui", U(0x1880), I(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)), 0);
	CHECK_EQ(u64_result(&r, 0), 4096);
	rep_free(&r);
	CHECK_EQ(call(&k, &r, NULL, 0, NULL, 0, PROTO_OP_MEM_ALLOC_POOL, "uuu", U(1000), U(0x1880), U(0)), 0);
	uint64_t pp = u64_result(&r, 0);
	rep_free(&r);
	CHECK_EQ(call(&k, &r, NULL, 0, NULL, 0, PROTO_OP_MEMPOOL_GET_ATTR, "ui", U(0x1880), I(CU_MEMPOOL_ATTR_USED_MEM_CURRENT)), 0);
	CHECK_EQ(u64_result(&r, 0), 1024);
	rep_free(&r);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEMPOOL_SET_CURRENT, "u", U(0x1880)), 0);
	CHECK_EQ(call(&k, &r, NULL, 0, NULL, 0, PROTO_OP_MEMPOOL_GET_CURRENT, ""), 0);
	CHECK_EQ(u64_result(&r, 0), 0x1880);
	rep_free(&r);
	CHECK_EQ(call(&k, &r, NULL, 0, NULL, 0, PROTO_OP_MEMPOOL_GET_ACCESS, "u", U(0x1880)), 0);
	rep_free(&r);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEMPOOL_DESTROY, "u", U(0)), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEMPOOL_DESTROY, "u", U(0x1880)), 0);
	CHECK_EQ(call(&k, &r, NULL, 0, NULL, 0, PROTO_OP_MEMPOOL_GET_CURRENT, ""), 0);
	CHECK_EQ(u64_result(&r, 0), 0); /* back to the default pool */
	rep_free(&r);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEM_FREE, "u", U(pp)), 0); /* still live until freed */
	CHECK_EQ(call(&k, &r, NULL, 0, NULL, 0, PROTO_OP_MEM_ALLOC_POOL, "uuu", U(64), U(0x1880), U(0)),
		 CUDA_ERROR_INVALID_HANDLE);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEMPOOL_SET_CURRENT, "u", U(0x1980)), CUDA_ERROR_INVALID_HANDLE);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_MEMPOOL_CREATE, "uuuu", U(0x1980), U(CU_MEM_ALLOCATION_TYPE_PINNED),
		      U(0), U(0)), 0);
	CHECK_EQ(call(&k, &r, NULL, 0, NULL, 0, PROTO_OP_MEM_ALLOC_POOL, "uuu", U(4096), U(0x1980), U(0)), 0);
	rep_free(&r);
	cli_close(&k);
	if (CHECK(open_session(&k, s->port) == 0)) {
		CHECK_EQ(wait_baseline(&k), g_baseline);
		cli_close(&k);
	}
}

/* The events k received since nevents was 0: n of them, each of op, with the
 * ids of want in any order. */
static int events_are(cli *k, uint32_t op, const uint64_t *want, int n)
{
	if (k->nevents != n)
		return 0;
	for (int i = 0; i < n; i++) {
		int found = 0;
		for (int j = 0; j < n; j++)
			found |= k->event_ops[j] == op && k->events[j] == want[i];
		if (!found)
			return 0;
	}
	return 1;
}

/* Host nodes: each replay of an exec calls the client (hostfn events, answered
 * at once here); a record goes, and the client is told (hostfn_forget), when the
 * last graph or exec that holds it is destroyed, not before. */
void t_hostnodes(srv *s)
{
	cli k;
	rep r;
	if (!CHECK(open_session(&k, s->port) == 0))
		return;
	k.auto_done = 1;
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_STREAM_CREATE, "uui", U(4), U(1), I(0)), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_GRAPH_CREATE, "uu", U(40), U(0)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_GRAPH_ADD_HOST, "ubu", U(41), NULL, (size_t)0, U(500)),
		 CUDA_ERROR_INVALID_HANDLE); /* no graph 41 */
	CHECK_EQ(call(&k, &r, NULL, 0, NULL, 0, PROTO_OP_GRAPH_ADD_HOST, "ubu", U(40), NULL, (size_t)0, U(501)), 0);
	uint64_t h1 = u64_result(&r, 0);
	rep_free(&r);
	CHECK_EQ(call(&k, &r, NULL, 0, NULL, 0, PROTO_OP_GRAPH_ADD_HOST, "ubu", U(40), &h1, (size_t)8, U(502)), 0);
	uint64_t h2 = u64_result(&r, 0);
	rep_free(&r);
	CHECK_EQ(call(&k, &r, NULL, 0, NULL, 0, PROTO_OP_GRAPH_HOST_GET, "u", U(h2)), 0);
	CHECK_EQ(u64_result(&r, 0), 502);
	rep_free(&r);
	CHECK_EQ(call(&k, &r, NULL, 0, NULL, 0, PROTO_OP_GRAPH_NODE_TYPE, "u", U(h1)), 0);
	rep_free(&r);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_GRAPH_INSTANTIATE, "uuu", U(42), U(40), U(0)), 0);
	/* the exec's copy of h1 calls 503, then 508 (while its graph, which names the
	 * node, lives); the exec keeps holding 501 and 503 all the same */
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_GRAPH_HOST_SET, "uuu", U(42), U(h1), U(503)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_GRAPH_HOST_SET, "uuu", U(42), U(h1), U(508)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_GRAPH_HOST_SET, "uuu", U(43), U(h1), U(509)),
		 CUDA_ERROR_INVALID_HANDLE); /* no exec 43 */
	k.nevents = 0;
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_GRAPH_DESTROY, "u", U(40)), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_GRAPH_LAUNCH, "uu", U(42), U(4)), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_GRAPH_LAUNCH, "uu", U(42), U(4)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_STREAM_SYNC, "u", U(4)), 0);
	CHECK_EQ(k.latched, 0);
	/* in the graph's order at each replay; the exec holds them: nothing forgotten */
	CHECK_EQ(k.nevents, 4);
	for (int i = 0; i < 4 && i < k.nevents; i++) {
		CHECK_EQ(k.event_ops[i], PROTO_OP_HOSTFN);
		CHECK_EQ(k.events[i], i % 2 ? 502 : 508);
	}
	/* its destroy ends all four */
	k.nevents = 0;
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_GRAPH_EXEC_DESTROY, "u", U(42)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_DEVICE_SYNC, ""), 0);
	CHECK(events_are(&k, PROTO_OP_HOSTFN_FORGET, (const uint64_t[]){501, 502, 503, 508}, 4));
	/* a graph alone: its destroy */
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_GRAPH_CREATE, "uu", U(43), U(0)), 0);
	CHECK_EQ(call(&k, &r, NULL, 0, NULL, 0, PROTO_OP_GRAPH_ADD_HOST, "ubu", U(43), NULL, (size_t)0, U(504)), 0);
	rep_free(&r);
	k.nevents = 0;
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_GRAPH_DESTROY, "u", U(43)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_DEVICE_SYNC, ""), 0);
	CHECK(events_are(&k, PROTO_OP_HOSTFN_FORGET, (const uint64_t[]){504}, 1));
	/* captured: the graph and its exec hold it; the exec outlives the graph */
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_CAPTURE_BEGIN, "uuu", U(4), U(0), U(44)), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_HOSTFN, "uu", U(4), U(505)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_CAPTURE_END, "uu", U(4), U(44)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_GRAPH_INSTANTIATE, "uuu", U(45), U(44), U(0)), 0);
	k.nevents = 0;
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_GRAPH_DESTROY, "u", U(44)), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_GRAPH_LAUNCH, "uu", U(45), U(4)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_STREAM_SYNC, "u", U(4)), 0);
	CHECK(events_are(&k, PROTO_OP_HOSTFN, (const uint64_t[]){505}, 1));
	k.nevents = 0;
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_GRAPH_EXEC_DESTROY, "u", U(45)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_DEVICE_SYNC, ""), 0);
	CHECK(events_are(&k, PROTO_OP_HOSTFN_FORGET, (const uint64_t[]){505}, 1));
	/* a capture that fails: the record goes with it */
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_CAPTURE_BEGIN, "uuu", U(4), U(0), U(46)), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_HOSTFN, "uu", U(4), U(506)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_STREAM_SYNC, "u", U(4)), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	k.nevents = 0;
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_CAPTURE_END, "uu", U(4), U(46)),
		 CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
	CHECK(events_are(&k, PROTO_OP_HOSTFN_FORGET, (const uint64_t[]){506}, 1));
	/* hostfn_forget is not a request; a graph and exec left for the teardown */
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_HOSTFN_FORGET, "u", U(1)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_DEVICE_SYNC, ""), 0);
	CHECK_EQ(k.latched, CUDA_ERROR_NOT_SUPPORTED);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_GRAPH_CREATE, "uu", U(47), U(0)), 0);
	CHECK_EQ(call(&k, &r, NULL, 0, NULL, 0, PROTO_OP_GRAPH_ADD_HOST, "ubu", U(47), NULL, (size_t)0, U(507)), 0);
	rep_free(&r);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_GRAPH_INSTANTIATE, "uuu", U(48), U(47), U(0)), 0);
	CHECK_EQ(post(&k, NULL, 0, PROTO_OP_GRAPH_LAUNCH, "uu", U(48), U(4)), 0);
	CHECK_EQ(call(&k, NULL, NULL, 0, NULL, 0, PROTO_OP_STREAM_SYNC, "u", U(4)), 0);
	cli_close(&k);
	if (CHECK(open_session(&k, s->port) == 0)) {
		CHECK_EQ(wait_baseline(&k), g_baseline);
		cli_close(&k);
	}
}
