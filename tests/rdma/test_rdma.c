/*
 * rdma transport over real verbs (Soft-RoCE in the test guest, or any RDMA
 * device): a listener on a libuv loop in its own thread, clients made with
 * transport_connect("rdma://..."). Needs RDMA_TEST_IP (an address of an RDMA
 * device; tests/rdma/guest.sh sets it) and exits 77 (skipped) without one.
 *
 *  - frames of 0 B, 1 B, around the inline limit, 64 KiB, 1 MiB, 3 MiB, both
 *    ways, from pageable memory (bounce ring) and from registered memory
 *    (zero-copy), into malloc'd (landing ring) and registered destinations;
 *    bytes land exactly, guard bytes after each buffer stay untouched; the
 *    statistics show which path each took. A msgpack part larger than a
 *    control message; discarded payloads; two frames in one sendv.
 *  - concurrent sends: 4 client threads on one connection while 2 server
 *    threads send back; every frame whole, each thread's frames in order.
 *  - a send from the server's loop thread (inside on_frame) that must wait.
 *  - registration cache: the same and an enclosed range share one MR.
 *  - closes: client shutdown, server shutdown, listener close: on_close once.
 *  - faults: the server process SIGKILLed while the client waits for a frame
 *    and while it sends 64 MiB; a client process SIGKILLed in the middle of a
 *    frame (the server frees the session); the QP forced into the error
 *    state; a SIGSTOPped server (the sender times out). Each must end within
 *    a bound, never hang.
 *
 * Child processes are this program run again (--child-server, --child-client):
 * verbs resources must not cross a fork.
 */
#include <signal.h>

#include "rdma_harness.h"

static const char *volatile current_test;
static volatile uint64_t current_deadline;
static void *watchdog(void *arg)
{
	for (;;) {
		sleep(1);
		if (current_deadline && now_ms() > current_deadline) {
			printf("FAIL %s: still running after its time limit (hung)\n", current_test);
			fflush(stdout);
			_exit(1);
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	ip = getenv("RDMA_TEST_IP");
	if (!ip || !*ip) {
		printf("SKIP: RDMA_TEST_IP is not set (run in the Soft-RoCE guest: tests/rdma/guest.sh)\n");
		return 77;
	}
	if (readlink("/proc/self/exe", self_path, sizeof(self_path) - 1) < 0)
		return 1;
	/* short limits so the fault tests end quickly (read once per process) */
	setenv("REMOTE_GPU_RDMA_TIMEOUT_MS", "3000", 0);
	setenv("REMOTE_GPU_RDMA_KEEPALIVE_MS", "500", 0);
	if (argc >= 2 && !strcmp(argv[1], "--child-server"))
		return child_server();
	if (argc >= 4 && !strcmp(argv[1], "--child-client"))
		return child_client(argv[3]);
	signal(SIGPIPE, SIG_IGN);

	pthread_t wd;
	pthread_create(&wd, NULL, watchdog, NULL);
	if (server_start(&S) != 0) {
		printf("FAIL: cannot listen on rdma://%s:0\n", ip);
		return 1;
	}
	struct {
		const char *name;
		void (*fn)(void);
	} tests[] = {
		{"frames", test_frames},         {"regcache", test_regcache},
		{"concurrent", test_concurrent}, {"qp_error", test_qp_error},
		{"vanish", test_vanish},         {"redirect", test_redirect},
		{"client_death", test_client_death}, {"server_death", test_server_death},
		{"sent_async", test_sent_async},   {"bulk_and_calls", test_bulk_and_calls},
		{"lent", test_lent},             {"frame_refused", test_frame_refused},
		{"listener_close", test_listener_close}, /* last: it closes the listener */
	};
	const char *only = getenv("RDMA_TEST_ONLY");
	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		if (only && !strstr(only, tests[i].name))
			continue;
		int f0 = atomic_load(&check_failed_);
		uint64_t t0 = now_ms();
		current_test = tests[i].name;
		current_deadline = t0 + 120000;
		tests[i].fn();
		current_deadline = 0;
		printf("%s %s (%" PRIu64 " ms)\n", atomic_load(&check_failed_) == f0 ? "PASS" : "FAIL", tests[i].name,
		       now_ms() - t0);
	}
	server_stop(&S);
	return check_summary("test_rdma");
}
