/* transport_parse_addr, dispatch by scheme through the provider table, and the
 * error strings. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "transport_int.h"

static void ok(const char *s, const char *scheme, const char *host, int port)
{
	transport_addr a;
	int err = transport_parse_addr(s, &a);
	if (!CHECK_EQ(err, TRANSPORT_OK)) {
		fprintf(stderr, "    address: %s\n", s);
		return;
	}
	if (!CHECK(strcmp(a.scheme, scheme) == 0 && strcmp(a.host, host) == 0 && a.port == port))
		fprintf(stderr, "    %s -> %s | %s | %d\n", s, a.scheme, a.host, a.port);
}

static void bad(const char *s)
{
	transport_addr a;
	if (!CHECK_EQ(transport_parse_addr(s, &a), TRANSPORT_EADDR))
		fprintf(stderr, "    address: %s\n", s ? s : "(null)");
}

static void test_parse(void)
{
	ok("gpu-node:7420", "tcp", "gpu-node", 7420);
	ok("tcp://gpu-node:7420", "tcp", "gpu-node", 7420);
	ok("rdma://10.0.0.2:7421", "rdma", "10.0.0.2", 7421);
	ok("shm:///run/remote-gpu/gpud.sock", "shm", "/run/remote-gpu/gpud.sock", 0); /* a socket's path */
	ok("127.0.0.1:65535", "tcp", "127.0.0.1", 65535);
	ok("127.0.0.1:0", "tcp", "127.0.0.1", 0);
	ok("[::1]:7420", "tcp", "::1", 7420);
	ok("tcp://[fe80::1%eth0]:9", "tcp", "fe80::1%eth0", 9);
	ok("[2001:db8::42]:07420", "tcp", "2001:db8::42", 7420);
	ok("a.b-c_d.example:80", "tcp", "a.b-c_d.example", 80);
}

static void test_parse_long(void)
{
	char s[300];
	transport_addr a;

	memset(s, 'h', 255); /* host[256] holds 255 characters */
	strcpy(s + 255, ":1");
	CHECK(transport_parse_addr(s, &a) == TRANSPORT_OK && strlen(a.host) == 255);
	memset(s, 'h', 256);
	strcpy(s + 256, ":1");
	bad(s);
}

static void test_parse_bad(void)
{
	bad(NULL);
	bad("");
	bad("gpu-node");            /* no port */
	bad("gpu-node:");           /* empty port */
	bad(":7420");               /* empty host */
	bad("gpu-node:70000");      /* port range */
	bad("shm://gpu.sock");      /* shm: an absolute path */
	bad("shm://");
	bad("gpu-node:99999999999999999999");
	bad("gpu-node:-1");
	bad("gpu-node:+1");
	bad("gpu-node:0x10");
	bad("gpu-node:74 20");
	bad(" gpu-node:7420");
	bad("gpu-node:7420\n");
	bad("::1:7420");            /* IPv6 without brackets */
	bad("[::1]");               /* no port */
	bad("[::1]7420");
	bad("[::1:7420");
	bad("[]:7420");
	bad("host]:7420");
	bad("udp://gpu-node:7420"); /* unknown scheme */
	bad("TCP://gpu-node:7420"); /* schemes are lower case */
	bad("://gpu-node:7420");
	bad("toolongscheme://gpu-node:7420");
	bad("tcp://");
	bad("tcp://a/b:1");
	bad("tcp:/gpu-node:7420");  /* "tcp" becomes the host, "/gpu-node" no port */
}

/* A provider that only counts calls: dispatch reaches it once registered, and
 * its missing slots are filled. */
static int fake_connects;
static int fake_connect(const transport_addr *a, unsigned timeout_ms, transport_conn **out)
{
	fake_connects++;
	*out = NULL;
	return TRANSPORT_ETIMEDOUT;
}

static void test_dispatch(void)
{
	transport_addr a;
	transport_conn *c = (transport_conn *)1;
	transport_listener *l = (transport_listener *)1;

	/* A scheme the design names that no provider serves (rdma+tls: the upper
	 * layers compose it of tls and rdma): not supported, not a bad address. */
	CHECK_EQ(transport_parse_addr("rdma+tls://127.0.0.1:1", &a), TRANSPORT_OK);
	CHECK_EQ(transport_connect(&a, &c), TRANSPORT_ENOTSUP);
	CHECK(c == NULL);
	CHECK_EQ(transport_listen(NULL, &a, NULL, NULL, &l), TRANSPORT_ENOTSUP);
	CHECK(l == NULL);

	/* Plug a provider in for it (connect only): */
	static const transport_provider fake = {.scheme = "rdma+tls", .connect = fake_connect};
	CHECK_EQ(tp_register_provider(&fake), TRANSPORT_OK);
	CHECK_EQ(transport_connect(&a, &c), TRANSPORT_ETIMEDOUT);
	CHECK_EQ(fake_connects, 1);
	CHECK_EQ(transport_listen(NULL, &a, NULL, NULL, &l), TRANSPORT_ENOTSUP); /* filled slot */
	/* a registered scheme parses even when the design does not name it */
	static const transport_provider fake2 = {.scheme = "fake9", .connect = fake_connect};
	CHECK_EQ(transport_parse_addr("fake9://x:1", &a), TRANSPORT_EADDR);
	CHECK_EQ(tp_register_provider(&fake2), TRANSPORT_OK);
	CHECK_EQ(transport_parse_addr("fake9://x:1", &a), TRANSPORT_OK);
	CHECK_EQ(transport_connect(&a, &c), TRANSPORT_ETIMEDOUT);
	static const transport_provider badp = {.scheme = "Bad!"};
	CHECK_EQ(tp_register_provider(&badp), TRANSPORT_EADDR);

	/* tcp: a refused connection and an unresolvable host */
	CHECK_EQ(transport_parse_addr("127.0.0.1:1", &a), TRANSPORT_OK);
	CHECK_EQ(transport_connect(&a, &c), TRANSPORT_ECONNECT);
	CHECK(c == NULL);
	CHECK_EQ(transport_parse_addr("no-such-host.invalid:7420", &a), TRANSPORT_OK);
	CHECK_EQ(transport_connect(&a, &c), TRANSPORT_EADDR);
}

static void test_strerror(void)
{
	for (int e = TRANSPORT_EIO; e >= TRANSPORT_ENOMEM; e--)
		CHECK(strcmp(transport_strerror(e), "unknown transport error") != 0);
	CHECK(strcmp(transport_strerror(PROTO_EVERSION), proto_strerror(PROTO_EVERSION)) == 0);
	CHECK(strcmp(transport_strerror(PROTO_ETOOBIG), proto_strerror(PROTO_ETOOBIG)) == 0);
	CHECK(strcmp(transport_strerror(0), "ok") == 0);
	CHECK(transport_strerror(-12345) != NULL);

	transport_frame f = {.msg = malloc(10)};
	transport_frame_free(&f);
	CHECK(f.msg == NULL);
	transport_frame_free(&f); /* twice is harmless */
	transport_frame_free(NULL);
}

int main(void)
{
	test_parse();
	test_parse_long();
	test_parse_bad();
	test_dispatch();
	test_strerror();
	return check_summary("test_addr");
}
