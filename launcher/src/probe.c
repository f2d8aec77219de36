/*
 * A probe of one server, speaking the protocol itself (the transport and
 * protocol libraries, as libremote.so does) so that every way a connection
 * can fail is told apart: no TCP connection, TCP but no TLS (certificate,
 * CA), the wrong scheme, the token refused, another protocol version. After
 * the handshake it times LN_PINGS null calls (cuStreamQuery on the null
 * stream: a synchronous call the server answers at once) and closes; the
 * server ends the session and frees what it made for it.
 */
#include "launcher.h"

#include <cuda.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "proto.h"
#include "transport.h"

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int send_msg(transport_conn *c, proto_msg *m)
{
	int r = proto_msg_finish(m, 0, 0);
	if (r == PROTO_OK) {
		struct iovec iov = {m->data, m->len};
		r = transport_sendv(c, &iov, 1);
	}
	proto_msg_free(m);
	return r;
}

/* The reply to seq, skipping events. 0 with *f and *v to free, or an error. */
static int recv_reply(transport_conn *c, uint64_t seq, transport_frame *f, proto_view *v)
{
	for (;;) {
		int e = transport_recv_frame(c, f, NULL, NULL);
		if (e)
			return e;
		if (proto_view_init(v, &f->hdr, f->msg) != PROTO_OK) {
			transport_frame_free(f);
			return PROTO_EDECODE;
		}
		int32_t st, la;
		/* seq 0: the answer to a peer of another version comes before any seq */
		if (!(f->hdr.flags & PROTO_F_EVENT) && proto_reply_status(v, &st, &la) == PROTO_OK &&
		    (v->seq == seq || v->seq == 0))
			return 0;
		proto_view_free(v);
		transport_frame_free(f);
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void probe_pings(transport_conn *c, uint64_t *seq, ln_probe *p)
{
	double t[LN_PINGS];
	int n = 0;
	for (int i = 0; i < LN_PINGS; i++) {
		proto_msg m;
		transport_frame f;
		proto_view v;
		double t0 = now_us();
		proto_msg_begin(&m, PROTO_OP_STREAM_QUERY, ++*seq, 1);
		proto_msg_u64(&m, 0);
		if (send_msg(c, &m) != 0 || recv_reply(c, *seq, &f, &v) != 0)
			break;
		t[n++] = now_us() - t0;
		proto_view_free(&v);
		transport_frame_free(&f);
	}
	if (!n)
		return;
	qsort(t, (size_t)n, sizeof(*t), cmp_double);
	p->rtt_min_us = t[0];
	p->rtt_median_us = t[n / 2];
}

/* Reads the hello reply's results (frontend/src/rt_hello.c has the layout):
 * [version, driver version, then per device: ordinal, name, uuid, total
 * memory, attributes, PCI bus id, stream priorities least and greatest], or,
 * from servers of several devices, [version, driver version, n, then n such
 * groups each with a peers mask]; told apart by the type of the fourth result
 * (a name, or an ordinal). The server's software version follows, from
 * servers that send it. */
static void probe_read_hello(const proto_view *v, ln_probe *p)
{
	int32_t drv = 0, prio;
	uint32_t first = 2, per = 8, n = 1, ord;
	const char *s;
	const void *b;
	size_t len;
	uint64_t mem;
	int bad = proto_arg_u32(v, 0, &p->proto) || proto_arg_i32(v, 1, &drv);
	if (!bad && proto_arg_str(v, 3, &s, &len) != PROTO_OK) {
		bad = proto_arg_u32(v, 2, &n) || n > 1024;
		first = 3;
		per = 9;
	}
	for (uint32_t d = 0; !bad && d < n; d++) {
		uint32_t i = first + d * per;
		bad = proto_arg_u32(v, i, &ord) || proto_arg_str(v, i + 1, &s, &len) || proto_arg_bin(v, i + 2, &b, &len) ||
		      proto_arg_u64(v, i + 3, &mem) || proto_arg_bin(v, i + 4, &b, &len) ||
		      proto_arg_i32(v, i + 6, &prio) || proto_arg_i32(v, i + 7, &prio);
		if (!bad && p->ndev < LN_MAX_DEV) {
			struct ln_probe_dev *x = &p->dev[p->ndev++];
			x->ordinal = ord;
			x->total_mem = mem;
			proto_arg_str(v, i + 1, &s, &len);
			snprintf(x->name, sizeof(x->name), "%.*s", (int)len, s);
		}
	}
	p->driver_version = drv;
	if (!bad && proto_arg_str(v, first + n * per, &s, &len) == PROTO_OK)
		snprintf(p->version, sizeof(p->version), "%.*s", (int)len, s);
	if (bad) {
		p->state = LN_FAILED;
		snprintf(p->detail, sizeof(p->detail), "malformed handshake reply");
	}
}

static void probe_hello(transport_conn *c, ln_probe *p)
{
	char host[256] = "";
	uint64_t seq = 1;
	const char *token = getenv("REMOTE_GPU_TOKEN");
	gethostname(host, sizeof(host) - 1);
	proto_msg m;
	proto_msg_begin(&m, PROTO_OP_HELLO, seq, 5);
	proto_msg_u64(&m, PROTO_VERSION);
	proto_msg_str(&m, token ? token : "");
	proto_msg_u64(&m, (uint64_t)getpid());
	proto_msg_str(&m, host);
	proto_msg_str(&m, LN_PROG " probe");
	transport_frame f;
	proto_view v;
	int e = send_msg(c, &m);
	if (!e)
		e = recv_reply(c, seq, &f, &v);
	if (e) {
		p->err = e;
		p->state = e == PROTO_EVERSION ? LN_VERSION : LN_FAILED;
		snprintf(p->detail, sizeof(p->detail), "%s",
			 e <= PROTO_EMAGIC && e > -100 ? proto_strerror(e) : transport_strerror(e));
		return;
	}
	int32_t st = 0, la = 0;
	proto_reply_status(&v, &st, &la);
	p->err = st;
	if (st == PROTO_EVERSION || st == CUDA_ERROR_NOT_SUPPORTED) {
		p->state = LN_VERSION;
		if (st == PROTO_EVERSION)
			proto_arg_u32(&v, PROTO_REPLY_FIRST, &p->proto);
	} else if (st == PROTO_ETLS) {
		p->state = LN_NEEDS_TLS;
	} else if (st == CUDA_ERROR_NOT_PERMITTED) {
		p->state = LN_TOKEN;
	} else if (st == CUDA_ERROR_TOO_MANY_PEERS) {
		p->state = LN_BUSY;
	} else if (st != 0) {
		p->state = LN_FAILED;
		snprintf(p->detail, sizeof(p->detail), "status %d", st);
	} else {
		probe_read_hello(&v, p);
	}
	proto_view_free(&v);
	transport_frame_free(&f);
	if (p->state == LN_OK)
		probe_pings(c, &seq, p);
}

void ln_probe_run(const char *entry, unsigned timeout_ms, ln_probe *p)
{
	transport_addr a;
	transport_conn *c = NULL;
	memset(p, 0, sizeof(*p));
	snprintf(p->entry, sizeof(p->entry), "%s", entry);
	if (transport_parse_addr(entry, &a) != 0) {
		p->state = LN_BAD_ADDR;
		return;
	}
	if (!strcmp(a.scheme, "rdma+tls")) {
		p->state = LN_NOT_PROBED;
		return;
	}
	int e = transport_connect_within(&a, timeout_ms, &c);
	if (e) {
		p->err = e;
		snprintf(p->detail, sizeof(p->detail), "%s", transport_strerror(e));
		p->state = LN_UNREACHABLE;
		if (!strcmp(a.scheme, "tls")) { /* does plain TCP get through? */
			transport_addr plain = a;
			snprintf(plain.scheme, sizeof(plain.scheme), "tcp");
			if (transport_connect_within(&plain, timeout_ms, &c) == 0) {
				p->state = LN_TRANSPORT;
				transport_close(c);
			}
		}
		return;
	}
	probe_hello(c, p);
	transport_close(c);
}

const char *ln_probe_explain(const ln_probe *p)
{
	switch (p->state) {
	case LN_BAD_ADDR: return "not an address: write [scheme://]host:port (scheme tcp, tls, rdma, rdma+tls)";
	case LN_UNREACHABLE:
		return "server unreachable: no connection (is remote-gpud running there, on that port, "
		       "and does a firewall let it through?)";
	case LN_TRANSPORT:
		return "the TCP connection works but TLS does not: the server's certificate is not signed by "
		       "the CA you gave (--tls-ca, REMOTE_GPU_TLS_CA), does not name this host, or the server "
		       "does not speak TLS there (then use tcp://)";
	case LN_NEEDS_TLS: return "the server takes only TLS connections: write tls://host:port";
	case LN_TOKEN:
		return "the server refused the token: give the one in its --token-file "
		       "(remote-gpu --token-file F, or REMOTE_GPU_TOKEN)";
	case LN_BUSY: return "the server refused the session: this token's tenant has its maximum of sessions";
	case LN_VERSION:
		return "protocol version mismatch: the server and libremote.so come from different releases; "
		       "upgrade one side";
	case LN_NOT_PROBED: return "rdma+tls:// is not probed directly (checked through libremote.so below)";
	case LN_FAILED:
		if (p->err == TRANSPORT_ECLOSED || p->err == TRANSPORT_EIO)
			return "the server closed the connection before answering: after a wrong token it refuses "
			       "the address for a while (wait and retry), or it is full (--max-connections)";
		return "the handshake failed";
	default: return "ok";
	}
}
