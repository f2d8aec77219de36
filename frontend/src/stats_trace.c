/*
 * Traces (REMOTE_GPU_TRACE): for the functions named there, level 1 logs each
 * call's backtrace (native frames, then Python's), level 2 what the call sends,
 * as the server will decode it, and its result.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr1 */
#endif
#include "stats_int.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <inttypes.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "proto.h"
#include "rg_log.h"
#include "rt.h"

#define MAX_BT 64 /* native frames */

static void trace_enter(const fn_info *fn, const lib_info *lib, void *ra)
{
	void *bt[MAX_BT];
	int n = backtrace(bt, MAX_BT);
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (!f)
		return;
	char pre[160];
	rg_log_prefix(pre, sizeof(pre), RG_LOG_INFO, "trace");
	fprintf(f, "%s%s called from %s (thread %ld)\n", pre, fn->name, lib->base, (long)syscall(SYS_gettid));
	/* Our own frames first: skip to the caller of the API function. */
	int i = 0;
	while (i < n && (uintptr_t)bt[i] >= fe_obs_g.self_lo && (uintptr_t)bt[i] < fe_obs_g.self_hi)
		i++;
	for (int k = 0; i < n; i++, k++) {
		Dl_info di;
		struct link_map *lm = NULL;
		uintptr_t a = (uintptr_t)bt[i];
		if (dladdr1(bt[i], &di, (void **)&lm, RTLD_DL_LINKMAP) && di.dli_fname) {
			const char *obj = di.dli_fname[0] ? di.dli_fname : fe_obs_get_program_name();
			if (di.dli_sname && di.dli_saddr)
				fprintf(f, "    #%d 0x%" PRIxPTR " %s(%s+0x%" PRIxPTR ")\n", k, a, obj, di.dli_sname,
					a - (uintptr_t)di.dli_saddr);
			else /* the offset nm and addr2line use: from the object's load bias */
				fprintf(f, "    #%d 0x%" PRIxPTR " %s(+0x%" PRIxPTR ")\n", k, a, obj,
					a - (lm ? (uintptr_t)lm->l_addr : (uintptr_t)di.dli_fbase));
		} else {
			fprintf(f, "    #%d 0x%" PRIxPTR " ?\n", k, a);
		}
	}
	fe_obs_print_py_frames(f);
	fclose(f);
	if (text)
		rg_log_block(text, len);
	free(text);
}

/* A msgpack object, shortly: integers >= 64 Ki in hex (addresses, handles). */
static void put_obj(FILE *f, const msgpack_object *o, int depth)
{
	switch (o->type) {
	case MSGPACK_OBJECT_NIL: fputs("nil", f); break;
	case MSGPACK_OBJECT_BOOLEAN: fputs(o->via.boolean ? "true" : "false", f); break;
	case MSGPACK_OBJECT_POSITIVE_INTEGER:
		fprintf(f, o->via.u64 >= 65536 ? "0x%" PRIx64 : "%" PRIu64, o->via.u64);
		break;
	case MSGPACK_OBJECT_NEGATIVE_INTEGER: fprintf(f, "%" PRId64, o->via.i64); break;
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64: fprintf(f, "%g", o->via.f64); break;
	case MSGPACK_OBJECT_STR: {
		uint32_t n = o->via.str.size < 80 ? o->via.str.size : 80;
		fputc('"', f);
		for (uint32_t i = 0; i < n; i++) {
			unsigned char c = (unsigned char)o->via.str.ptr[i];
			fputc(c < 0x20 || c == 0x7f ? '?' : c, f);
		}
		fputs(n < o->via.str.size ? "...\"" : "\"", f);
		break;
	}
	case MSGPACK_OBJECT_BIN: {
		uint32_t n = o->via.bin.size < 32 ? o->via.bin.size : 32;
		fprintf(f, "<%u bytes:", o->via.bin.size);
		for (uint32_t i = 0; i < n; i++)
			fprintf(f, " %02x", (unsigned char)o->via.bin.ptr[i]);
		fputs(n < o->via.bin.size ? " ...>" : ">", f);
		break;
	}
	case MSGPACK_OBJECT_ARRAY:
		fputc('[', f);
		for (uint32_t i = 0; i < o->via.array.size; i++) {
			if (i)
				fputs(", ", f);
			if (depth > 4 || i >= 16) {
				fputs("...", f);
				break;
			}
			put_obj(f, &o->via.array.ptr[i], depth + 1);
		}
		fputc(']', f);
		break;
	case MSGPACK_OBJECT_MAP:
		fputs("{...}", f);
		break;
	default: fputs("?", f); break;
	}
}

static void trace_send(const void *frame, size_t len, uint64_t plen)
{
	const thr *t = fe_obs_tls_thr;
	proto_hdr h;
	proto_view v;
	if (!t || !t->cur || len < PROTO_HDR_SIZE || proto_decode_hdr(frame, &h) != PROTO_OK ||
	    h.hdr_len > len - PROTO_HDR_SIZE)
		return;
	if (proto_view_init(&v, &h, (const uint8_t *)frame + PROTO_HDR_SIZE) != PROTO_OK) {
		proto_view_free(&v);
		return;
	}
	char *text = NULL;
	size_t tlen = 0;
	FILE *f = open_memstream(&text, &tlen);
	if (f) {
		char pre[160];
		rg_log_prefix(pre, sizeof(pre), RG_LOG_INFO, "trace");
		fprintf(f, "%s%s -> %s(", pre, fe_obs_g.fn[fe_obs_g.row[t->cur - 1].fn].name, proto_op_name(v.op));
		for (uint32_t i = 0; i < v.n; i++) {
			if (i)
				fputs(", ", f);
			put_obj(f, &v.items[i], 0);
		}
		fputc(')', f);
		if (plen)
			fprintf(f, " + %" PRIu64 " payload bytes", plen);
		fputs(h.flags & PROTO_F_ASYNC ? " [async]\n" : "\n", f);
		fclose(f);
		if (text)
			rg_log_block(text, tlen);
		free(text);
	}
	proto_view_free(&v);
}

static void trace_leave(const fn_info *fn, int status, uint64_t d, const thr *t)
{
	char pre[160], s[32], r[32];
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (!f)
		return;
	uint64_t rt = fe_obs_t.rt - t->rt0;
	rg_log_prefix(pre, sizeof(pre), RG_LOG_INFO, "trace");
	fprintf(f, "%s%s = %s (%d) in %.2f us; %" PRIu64 " round trip%s, %s sent, %s received\n", pre, fn->name,
		cudaGetErrorName((cudaError_t)status), status, (double)d * fe_obs_ns_per_tick() / 1e3, rt, rt == 1 ? "" : "s",
		fe_obs_format_bytes(fe_obs_t.tx - t->tx0, s, sizeof(s)), fe_obs_format_bytes(fe_obs_t.rx - t->rx0, r, sizeof(r)));
	fclose(f);
	if (text)
		rg_log_block(text, len);
	free(text);
}

/* stats.c is below every file and calls the printers it is given. */
__attribute__((constructor)) static void register_trace(void) { fe_obs_set_trace(trace_enter, trace_send, trace_leave); }
