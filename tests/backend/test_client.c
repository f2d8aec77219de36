/*
 * End-to-end test of remote-gpud without the frontend: starts the server on the
 * driver test double (tests/fakecuda) and speaks the protocol to it directly
 * with the transport and protocol libraries, one frame at a time, so every
 * reply, latched error and disconnect can be checked exactly.
 *
 *   test_client SERVER_BINARY FAKE_DRIVER [KERNELS_FATBIN]
 *
 * Covers: handshake (version, token), allocations and copies of every kind
 * checked byte for byte (copies to the host of many sizes: t_dtoh_sizes),
 * range and handle errors, streams, events, host
 * functions, modules and launches (when the fatbin is there), malformed and
 * hostile frames, a client killed in the middle of a copy, several clients at
 * once, striped copies (t_stripes: secrets, exact bytes, a stripe killed
 * mid-copy), a clean shutdown on SIGTERM, and a kernel image store that cannot be
 * poisoned (t_store_*: uploads verified, loaded before they are shared, within
 * a quota; images that collide under the old XXH3-128 addresses kept apart). Memory must be back to the baseline
 * after every session.
 *
 * The harness is client_harness.c; the tests, by subject: client_calls.c,
 * client_modules.c, client_hostile.c, client_store.c, client_stripes.c.
 */
#define _GNU_SOURCE
#include "test_client.h"

int main(int argc, char **argv)
{
	srv s;

	if (argc < 3) {
		fprintf(stderr, "usage: test_client SERVER_BINARY FAKE_DRIVER [KERNELS_FATBIN]\n");
		return 2;
	}
	g_server = argv[1];
	g_driver = argv[2];
	g_fatbin = argc > 3 ? argv[3] : NULL;
	signal(SIGPIPE, SIG_IGN);
	if (!CHECK(srv_start(&s, NULL, NULL) == 0))
		return check_summary("test_client");

	t_hello(&s);
	t_copies(&s);
	t_range_errors(&s);
	t_big(&s);
	t_dtoh_sizes(&s);
	t_stripes(&s);
	t_streams_events(&s);
	t_modules(&s);
	t_store(&s);
	t_graphs(&s);
	t_hostnodes(&s);
	t_bad_input(&s);
	t_concurrent(&s);
	CHECK(srv_alive(&s));
	CHECK_EQ(srv_stop(&s), 0);
	t_token();
	return check_summary("test_client");
}
