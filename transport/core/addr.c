/*
 * The transport core: address parsing, the provider table and dispatch by
 * scheme, error strings.
 *
 * An address is "[scheme://]host:port". The scheme defaults to "tcp"; an IPv6
 * host is written in brackets ("[::1]:7420", "tcp://[fe80::1%eth0]:7420") because
 * its colons would otherwise be ambiguous with the port separator. Parsing
 * failures are logged at warn level with the reason (the return code alone,
 * TRANSPORT_EADDR, cannot say what was wrong with REMOTE_GPU).
 *
 * Providers: see transport_int.h. The table is small and fixed-size; lookups
 * take a mutex because registration may in principle happen on another thread,
 * and connect/listen are far from any hot path.
 */
#include "transport_int.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "rg_clock.h"
#include "rg_log.h"

#define MAX_PROVIDERS 8

static int enotsup_connect(const transport_addr *a, unsigned timeout_ms, transport_conn **out);
static int enotsup_connect_cookie(const transport_addr *a, unsigned timeout_ms, const transport_cookie *cookie,
				  transport_conn **out);
static int enotsup_listen(uv_loop_t *loop, const transport_addr *a, const transport_server_cb *cb, void *ctx,
			  transport_listener **out);
static void noop_listener_close(transport_listener *l);
static int enotsup_adopt(uv_loop_t *loop, int fd, const transport_server_cb *cb, void *ctx, transport_listener **out);
static int enotsup_wrap_fd(int fd, transport_conn **out);
static void providers_init(void);
static const transport_provider *provider_find(const char *scheme);
static int scheme_valid(const char *s, size_t n);

/* Schemes the design names; they parse even when their provider is not built, so
 * that connect can answer "not supported" rather than "bad address". */
static const char *const known_schemes[] = {"tcp", "tls", "rdma", "shm", "rdma+tls"};

static struct {
	pthread_once_t once;
	pthread_mutex_t lock;
	transport_provider tab[MAX_PROVIDERS];
	int n;
} P = {PTHREAD_ONCE_INIT, PTHREAD_MUTEX_INITIALIZER};

/* ---- providers ---- */

static int enotsup_connect(const transport_addr *a, unsigned timeout_ms, transport_conn **out)
{
	*out = NULL;
	return TRANSPORT_ENOTSUP;
}

static int enotsup_connect_cookie(const transport_addr *a, unsigned timeout_ms, const transport_cookie *cookie,
				  transport_conn **out)
{
	*out = NULL;
	return TRANSPORT_ENOTSUP;
}

static int enotsup_listen(uv_loop_t *loop, const transport_addr *a, const transport_server_cb *cb, void *ctx,
			  transport_listener **out)
{
	*out = NULL;
	return TRANSPORT_ENOTSUP;
}

/* A provider that cannot listen never hands out a listener, so this is never
 * reached; it exists so the slot is filled. */
static void noop_listener_close(transport_listener *l) {}

/* An rdma connection, say, cannot change process. */
static int enotsup_adopt(uv_loop_t *loop, int fd, const transport_server_cb *cb, void *ctx, transport_listener **out)
{
	*out = NULL;
	return TRANSPORT_ENOTSUP;
}

static int enotsup_wrap_fd(int fd, transport_conn **out)
{
	*out = NULL;
	return TRANSPORT_ENOTSUP;
}

void tp_provider_fill(transport_provider *p)
{
	if (!p->connect)
		p->connect = enotsup_connect;
	if (!p->connect_cookie)
		p->connect_cookie = enotsup_connect_cookie;
	if (!p->listen)
		p->listen = enotsup_listen;
	if (!p->listener_close)
		p->listener_close = noop_listener_close;
	if (!p->adopt)
		p->adopt = enotsup_adopt;
	if (!p->wrap_fd)
		p->wrap_fd = enotsup_wrap_fd;
}

/* Lower-case letters, digits and '+' (as in "rdma+tls": rdma whose session
 * is set up over tls), starting with a letter. */
static int scheme_valid(const char *s, size_t n)
{
	if (n == 0 || n >= sizeof(((transport_addr *)0)->scheme) || !islower((unsigned char)s[0]))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!islower((unsigned char)s[i]) && !isdigit((unsigned char)s[i]) && s[i] != '+')
			return 0;
	return 1;
}

/* Caller holds P.lock (or runs inside pthread_once). */
static int provider_add_locked(const transport_provider *p)
{
	transport_provider fill = *p;
	if (!fill.scheme || !scheme_valid(fill.scheme, strlen(fill.scheme)))
		return TRANSPORT_EADDR;
	tp_provider_fill(&fill);
	for (int i = 0; i < P.n; i++) {
		if (strcmp(P.tab[i].scheme, fill.scheme) == 0) {
			P.tab[i] = fill;
			return TRANSPORT_OK;
		}
	}
	if (P.n == MAX_PROVIDERS)
		return TRANSPORT_ENOMEM;
	P.tab[P.n++] = fill;
	return TRANSPORT_OK;
}

static void providers_init(void)
{
#define TP_ADD(n) provider_add_locked(&tp_##n##_provider);
	TP_PROVIDERS(TP_ADD)
#undef TP_ADD
}

int tp_register_provider(const transport_provider *p)
{
	pthread_once(&P.once, providers_init);
	pthread_mutex_lock(&P.lock);
	int err = provider_add_locked(p);
	pthread_mutex_unlock(&P.lock);
	return err;
}

/* Returns a pointer into the table; entries are replaced in place but never
 * removed, so the pointer stays valid (and a concurrent replacement of the same
 * scheme is a caller bug we do not defend against). */
static const transport_provider *provider_find(const char *scheme)
{
	const transport_provider *found = NULL;
	pthread_once(&P.once, providers_init);
	pthread_mutex_lock(&P.lock);
	for (int i = 0; i < P.n; i++)
		if (strcmp(P.tab[i].scheme, scheme) == 0)
			found = &P.tab[i];
	pthread_mutex_unlock(&P.lock);
	return found;
}

/* ---- addresses ---- */

static int addr_fail(const char *s, const char *why)
{
	LOG_WARN("transport", "bad address \"%s\": %s (expected [scheme://]host:port or shm:///path)", s, why);
	return TRANSPORT_EADDR;
}

/* shm:///path/to/socket: an absolute path, short enough for a unix socket
 * (sun_path: 108 bytes with its NUL), in host; port 0. */
static int parse_shm_path(const char *s, const char *path, transport_addr *out)
{
	if (path[0] != '/')
		return addr_fail(s, "shm:// takes an absolute path to the server's socket (shm:///run/remote-gpu/sock)");
	if (strlen(path) >= 108)
		return addr_fail(s, "socket path too long (at most 107 bytes)");
	strcpy(out->host, path);
	out->port = 0;
	return TRANSPORT_OK;
}

transport_err transport_parse_addr(const char *s, transport_addr *out)
{
	const char *p, *host, *hend, *port;
	size_t n;

	memset(out, 0, sizeof(*out));
	if (!s || !*s)
		return addr_fail("", "empty");
	for (p = s; *p; p++)
		if (isspace((unsigned char)*p) || !isprint((unsigned char)*p))
			return addr_fail(s, "contains whitespace or control characters");

	p = strstr(s, "://");
	if (p) {
		n = (size_t)(p - s);
		if (!scheme_valid(s, n))
			return addr_fail(s, "invalid scheme");
		memcpy(out->scheme, s, n);
		out->scheme[n] = 0;
		out->scheme_given = 1;
		int known = 0;
		for (size_t i = 0; i < sizeof(known_schemes) / sizeof(known_schemes[0]); i++)
			known |= strcmp(out->scheme, known_schemes[i]) == 0;
		if (!known && !provider_find(out->scheme))
			return addr_fail(s, "unknown scheme (tcp, tls, rdma, rdma+tls or shm)");
		host = p + 3;
		if (strcmp(out->scheme, "shm") == 0)
			return parse_shm_path(s, host, out);
	} else {
		strcpy(out->scheme, "tcp");
		host = s;
	}

	if (*host == '[') {
		host++;
		hend = strchr(host, ']');
		if (!hend)
			return addr_fail(s, "missing ']' after IPv6 address");
		if (hend[1] != ':')
			return addr_fail(s, "missing :port after ']'");
		port = hend + 2;
	} else {
		hend = strrchr(host, ':');
		if (!hend)
			return addr_fail(s, "missing :port");
		if (memchr(host, ':', (size_t)(hend - host)))
			return addr_fail(s, "IPv6 addresses must be written in brackets, as [::1]:7420");
		if (memchr(host, '[', (size_t)(hend - host)) || memchr(host, ']', (size_t)(hend - host)))
			return addr_fail(s, "stray bracket in host");
		port = hend + 1;
	}
	n = (size_t)(hend - host);
	if (n == 0)
		return addr_fail(s, "empty host");
	if (n >= sizeof(out->host))
		return addr_fail(s, "host name too long");
	if (memchr(host, '/', n))
		return addr_fail(s, "'/' in host");
	memcpy(out->host, host, n);
	out->host[n] = 0;

	/* Decimal digits only: strtol would accept signs, spaces and hex prefixes. */
	if (!*port)
		return addr_fail(s, "empty port");
	long v = 0;
	for (p = port; *p; p++) {
		if (!isdigit((unsigned char)*p))
			return addr_fail(s, "port is not a decimal number");
		v = v * 10 + (*p - '0');
		if (v > 65535)
			return addr_fail(s, "port out of range (0-65535)");
	}
	out->port = (int)v; /* 0 only makes sense to listen: "any free port" */
	return TRANSPORT_OK;
}

int transport_addr_is_loopback(const transport_addr *a)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *res = NULL;
	int loop = 1;

	if (getaddrinfo(a->host, "0", &hints, &res) != 0)
		return 0;
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		if (ai->ai_family == AF_INET) {
			const struct sockaddr_in *s4 = (const void *)ai->ai_addr;
			loop &= (ntohl(s4->sin_addr.s_addr) >> 24) == 127;
		} else if (ai->ai_family == AF_INET6) {
			const struct sockaddr_in6 *s6 = (const void *)ai->ai_addr;
			loop &= IN6_IS_ADDR_LOOPBACK(&s6->sin6_addr);
		} else {
			loop = 0;
		}
	}
	freeaddrinfo(res);
	return loop;
}

/* ---- dispatch ---- */

transport_err transport_connect_within(const transport_addr *a, unsigned timeout_ms, transport_conn **out)
{
	const transport_provider *prov = provider_find(a->scheme);
	*out = NULL;
	if (!prov) {
		LOG_WARN("transport", "scheme \"%s\" is not supported by this build", a->scheme);
		return TRANSPORT_ENOTSUP;
	}
	return prov->connect(a, timeout_ms, out);
}

transport_err transport_connect_cookie(const transport_addr *a, unsigned timeout_ms, const transport_cookie *cookie,
			     transport_conn **out)
{
	const transport_provider *prov = provider_find(a->scheme);
	*out = NULL;
	if (!prov) {
		LOG_WARN("transport", "scheme \"%s\" is not supported by this build", a->scheme);
		return TRANSPORT_ENOTSUP;
	}
	return prov->connect_cookie(a, timeout_ms, cookie, out);
}

transport_err transport_wrap_fd(const char *scheme, int fd, transport_conn **out)
{
	const transport_provider *prov = provider_find(scheme);
	*out = NULL;
	return prov ? prov->wrap_fd(fd, out) : TRANSPORT_ENOTSUP;
}

int transport_cookie_equal(const transport_cookie *a, const transport_cookie *b)
{
	unsigned char diff = 0, any = 0;
	for (size_t i = 0; i < TRANSPORT_COOKIE_LEN; i++) {
		diff |= (unsigned char)(a->b[i] ^ b->b[i]);
		any |= a->b[i];
	}
	return diff == 0 && any != 0;
}

/* ---- deadlines ---- */

uint64_t tp_deadline(unsigned timeout_ms)
{
	return timeout_ms ? rg_clock_ns() + (uint64_t)timeout_ms * 1000000ull : 0;
}

int tp_deadline_left_ms(uint64_t end)
{
	if (!end)
		return -1;
	uint64_t now = rg_clock_ns();
	if (now >= end)
		return 0;
	uint64_t ms = (end - now + 999999) / 1000000;
	return ms > INT_MAX ? INT_MAX : (int)ms;
}

/* ---- misc ---- */

/* Each code's name and meaning (transport_strerror, transport_err_name). */
static const struct {
	int code;
	const char *name, *text;
} errs[] = {
	{TRANSPORT_OK, "TRANSPORT_OK", "ok"},
	{TRANSPORT_EIO, "TRANSPORT_EIO", "connection broken"},
	{TRANSPORT_ECLOSED, "TRANSPORT_ECLOSED", "connection closed"},
	{TRANSPORT_EADDR, "TRANSPORT_EADDR", "bad address or scheme"},
	{TRANSPORT_ECONNECT, "TRANSPORT_ECONNECT", "could not connect"},
	{TRANSPORT_ENOTSUP, "TRANSPORT_ENOTSUP", "not supported by this transport"},
	{TRANSPORT_ETIMEDOUT, "TRANSPORT_ETIMEDOUT", "timed out"},
	{TRANSPORT_ENOMEM, "TRANSPORT_ENOMEM", "out of memory"},
};

const char *transport_strerror(int err)
{
	for (size_t i = 0; i < sizeof(errs) / sizeof(errs[0]); i++)
		if (errs[i].code == err)
			return errs[i].text;
	if (err < 0 && err >= PROTO_ETLS)
		return proto_strerror(err);
	return "unknown transport error";
}

const char *transport_err_name(int err)
{
	for (size_t i = 0; i < sizeof(errs) / sizeof(errs[0]); i++)
		if (errs[i].code == err)
			return errs[i].name;
	if (err < 0 && err >= PROTO_ETLS)
		return proto_err_name(err);
	return "TRANSPORT_?";
}

void transport_frame_free(transport_frame *f)
{
	if (!f)
		return;
	if (!f->msg_lent)
		free(f->msg);
	f->msg = NULL;
	f->msg_lent = 0;
}

transport_err transport_frame_keep(transport_frame *f)
{
	if (!f->msg_lent)
		return TRANSPORT_OK;
	uint8_t *p = malloc(f->hdr.hdr_len);
	if (!p)
		return TRANSPORT_ENOMEM;
	memcpy(p, f->msg, f->hdr.hdr_len);
	f->msg = p;
	f->msg_lent = 0;
	return TRANSPORT_OK;
}
