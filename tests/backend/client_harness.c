/*
 * test_client's harness: the server process (started on the driver test
 * double with a fresh store, stopped with SIGTERM) and a client of the
 * protocol (hello, calls, replies with their payloads, host function events).
 */
#define _GNU_SOURCE
#include "test_client.h"

const char *g_server, *g_driver, *g_fatbin;

void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	return remove(path);
}

/* token, quota: --token, --store-quota (NULL: none, the default). */
int srv_start(srv *s, const char *token, const char *quota)
{
	const char *argv[16];
	int n = 0;
	char pf[128], store[128];

	snprintf(s->dir, sizeof(s->dir), "/tmp/rgbe.XXXXXX");
	if (!mkdtemp(s->dir))
		return -1;
	snprintf(pf, sizeof(pf), "%s/port", s->dir);
	/* A fresh kernel image store: the module tests expect to upload. */
	snprintf(store, sizeof(store), "%s/store", s->dir);
	s->pid = fork();
	if (s->pid < 0)
		return -1;
	if (s->pid == 0) {
		const char *fixed[] = {g_server, "--listen", "127.0.0.1:0", "--port-file", pf, "--driver", g_driver,
				       "--cubin-store", store, "--drain-seconds", "0"};
		for (size_t i = 0; i < sizeof(fixed) / sizeof(*fixed); i++)
			argv[n++] = fixed[i];
		if (token) {
			argv[n++] = "--token";
			argv[n++] = token;
		}
		if (quota) {
			argv[n++] = "--store-quota";
			argv[n++] = quota;
		}
		argv[n] = NULL;
		execv(g_server, (char *const *)argv);
		_exit(127);
	}
	for (int i = 0; i < 1000; i++) {
		FILE *f = fopen(pf, "r");
		if (f) {
			int ok = fscanf(f, "%d", &s->port) == 1;
			fclose(f);
			if (ok && s->port > 0)
				return 0;
		}
		if (waitpid(s->pid, NULL, WNOHANG) == s->pid) {
			s->pid = 0;
			return -1;
		}
		sleep_ms(10);
	}
	return -1;
}

/* SIGTERM; returns the exit status, or -1 if it did not exit within 20 s. */
int srv_stop(srv *s)
{
	int st = 0;

	if (s->pid <= 0)
		return -1;
	kill(s->pid, SIGTERM);
	for (int i = 0; i < 2000; i++) {
		if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
			nftw(s->dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
			s->pid = 0;
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		}
		sleep_ms(10);
	}
	kill(s->pid, SIGKILL);
	waitpid(s->pid, NULL, 0);
	s->pid = 0;
	return -1;
}

int srv_alive(srv *s) { return s->pid > 0 && waitpid(s->pid, NULL, WNOHANG) == 0; }

/* ---- a client ---- */

int cli_open(cli *k, int port)
{
	transport_addr a;
	char s[64];
	memset(k, 0, sizeof(*k));
	snprintf(s, sizeof(s), "127.0.0.1:%d", port);
	if (transport_parse_addr(s, &a) || transport_connect(&a, &k->c))
		return -1;
	return 0;
}

void cli_close(cli *k)
{
	if (k->c)
		transport_close(k->c);
	k->c = NULL;
}

void rep_free(rep *r)
{
	if (r->msg) {
		proto_view_free(&r->v);
		free(r->msg);
	}
	r->msg = NULL;
}

static void vbuild(cli *k, proto_msg *m, uint32_t op, uint64_t seq, const char *fmt, va_list ap)
{
	proto_msg_begin(m, op, seq, (uint32_t)strlen(fmt));
	for (const char *f = fmt; *f; f++) {
		switch (*f) {
		case 'u': proto_msg_u64(m, va_arg(ap, uint64_t)); break;
		case 'i': proto_msg_i64(m, va_arg(ap, int64_t)); break;
		case 's': proto_msg_str(m, va_arg(ap, const char *)); break;
		case 'b': {
			const void *p = va_arg(ap, const void *);
			size_t n = va_arg(ap, size_t);
			proto_msg_bin(m, p ? p : (const void *)"", n);
			break;
		}
		case 'n': proto_msg_nil(m); break;
		}
	}
}

int sendm(cli *k, proto_msg *m, uint16_t flags, const void *payload, uint64_t plen)
{
	struct iovec iov[2] = {{m->data, 0}, {(void *)payload, plen}};
	proto_msg_finish(m, flags, plen);
	iov[0].iov_len = m->len;
	int r = transport_sendv(k->c, iov, plen ? 2 : 1);
	proto_msg_free(m);
	return r;
}

void *dest_cb(void *ctx, const transport_frame *f)
{
	dest *d = ctx;
	return d && f->hdr.payload_len <= d->cap ? d->buf : NULL;
}

/* Receives frames until the reply to seq; host function events on the way are
 * recorded. Returns 0 or a transport error. */
int recv_reply(cli *k, uint64_t seq, rep *r, void *buf, size_t cap)
{
	dest d = {buf, cap};
	memset(r, 0, sizeof(*r));
	for (;;) {
		transport_frame f;
		int e = transport_recv_frame(k->c, &f, dest_cb, &d);
		if (e)
			return e;
		proto_view v;
		if (proto_view_init(&v, &f.hdr, f.msg) != PROTO_OK) {
			transport_frame_free(&f);
			return PROTO_EDECODE;
		}
		if (f.hdr.flags & PROTO_F_EVENT) {
			uint64_t id = 0;
			uint32_t op = v.op;
			proto_arg_u64(&v, 0, &id);
			if (k->nevents < 16) {
				k->event_ops[k->nevents] = op;
				k->events[k->nevents++] = id;
			}
			proto_view_free(&v);
			transport_frame_free(&f);
			if (op == PROTO_OP_HOSTFN && k->auto_done)
				post(k, NULL, 0, PROTO_OP_HOSTFN_DONE, "u", id);
			continue;
		}
		int32_t st = -1, la = -1;
		if (proto_reply_status(&v, &st, &la) != PROTO_OK || v.seq != seq) {
			fprintf(stderr, "unexpected frame op %u seq %" PRIu64 " (waiting for %" PRIu64 ")\n", v.op, v.seq,
				seq);
			proto_view_free(&v);
			transport_frame_free(&f);
			return PROTO_EDECODE;
		}
		r->status = st;
		r->latched = la;
		r->v = v;
		r->msg = f.msg;
		r->plen = f.hdr.payload_len;
		k->latched = la;
		return 0;
	}
}

/* A sync call: its status (or a negative transport error); *r kept if non-NULL. */
int call(cli *k, rep *r, void *buf, size_t cap, const void *payload, uint64_t plen, uint32_t op,
		const char *fmt, ...)
{
	proto_msg m;
	rep tmp;
	va_list ap;
	uint64_t seq = ++k->seq;
	if (r)
		memset(r, 0, sizeof(*r));
	va_start(ap, fmt);
	vbuild(k, &m, op, seq, fmt, ap);
	va_end(ap);
	int e = sendm(k, &m, 0, payload, plen);
	if (e)
		return e;
	if (!r)
		r = &tmp;
	memset(r, 0, sizeof(*r));
	if ((e = recv_reply(k, seq, r, buf, cap)))
		return e;
	int st = r->status;
	if (r == &tmp)
		rep_free(r);
	return st;
}

/* An async call: no reply. */
int post(cli *k, const void *payload, uint64_t plen, uint32_t op, const char *fmt, ...)
{
	proto_msg m;
	va_list ap;
	va_start(ap, fmt);
	vbuild(k, &m, op, ++k->seq, fmt, ap);
	va_end(ap);
	return sendm(k, &m, PROTO_F_ASYNC, payload, plen);
}

int hello(cli *k, uint32_t version, const char *token, rep *r)
{
	return call(k, r, NULL, 0, NULL, 0, PROTO_OP_HELLO, "ususs", U(version), token ? token : "", U(getpid()),
		    "testhost", "test_client");
}

int open_session(cli *k, int port)
{
	if (cli_open(k, port))
		return -1;
	return hello(k, PROTO_VERSION, NULL, NULL) == 0 ? 0 : -1;
}

uint64_t u64_result(rep *r, int i)
{
	uint64_t v = 0;
	proto_arg_u64(&r->v, PROTO_REPLY_FIRST + i, &v);
	return v;
}

uint64_t mem_alloc(cli *k, uint64_t size)
{
	rep r;
	uint64_t p = 0;
	if (call(k, &r, NULL, 0, NULL, 0, PROTO_OP_MEM_ALLOC, "u", size) == 0)
		p = u64_result(&r, 0);
	rep_free(&r);
	return p;
}

uint64_t mem_free_bytes(cli *k)
{
	rep r;
	uint64_t v = 0;
	if (call(k, &r, NULL, 0, NULL, 0, PROTO_OP_MEM_GET_INFO, "") == 0)
		v = u64_result(&r, 0);
	rep_free(&r);
	return v;
}

int htod(cli *k, uint64_t dst, const void *p, uint64_t n, uint64_t stream)
{
	return post(k, p, n, PROTO_OP_MEMCPY_HTOD, "uu", dst, stream);
}

int dtoh(cli *k, void *p, uint64_t src, uint64_t n, uint64_t stream)
{
	rep r;
	int st = call(k, &r, p, n, NULL, 0, PROTO_OP_MEMCPY_DTOH, "uuu", src, n, stream);
	if (st == 0 && r.plen != n)
		st = -999;
	rep_free(&r);
	return st;
}

/* Whether the connection was closed by the server (a recv ends with an error). */
int closed_by_server(cli *k)
{
	rep r;
	int e = recv_reply(k, UINT64_MAX, &r, NULL, 0);
	rep_free(&r);
	return e == TRANSPORT_ECLOSED || e == TRANSPORT_EIO;
}

void fill(uint8_t *p, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		p[i] = (uint8_t)(seed >> 16);
	}
}

uint64_t g_baseline;

/* Teardown is asynchronous: wait (a little) for the memory to come back. */
uint64_t wait_baseline(cli *k)
{
	uint64_t v = 0;
	for (int i = 0; i < 300; i++) {
		v = mem_free_bytes(k);
		if (v == g_baseline)
			break;
		sleep_ms(10);
	}
	return v;
}
