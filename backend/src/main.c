/*
 * remote-gpud: serves one GPU to remote-gpu clients (libremote.so).
 *
 *   remote-gpud [--listen HOST:PORT] [--port-file FILE] [--device N]
 *               [--driver PATH] [--token T] [--isolation process|thread]
 *               [--cublas PATH] [--cublaslt PATH]
 *               [--run-dir DIR] [--metrics-port N]
 *
 * The main thread runs the libuv loop: the listener, the signals and, with
 * --isolation thread, every session's connection callbacks. By default each
 * session is served by a process of its own (isolate.c), started as
 * `remote-gpud --session-fd 3 ...`, which serves that one connection and exits
 * (rdma: `--session-listen rdma://HOST:0 --port-fd 3`, to which the client is
 * sent, see isolate.c).
 * SIGTERM or SIGINT closes the listener and passes the signal to the session
 * processes; each session tears itself down (freeing all it created on the GPU),
 * and once the last one is gone the loop has nothing left and the process exits
 * 0. A second signal during that exits at once.
 */
#include "backend.h"
#include "lib.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#define DEFAULT_LISTEN "127.0.0.1:7420"

be_server be_srv;

static struct {
	uv_loop_t loop;
	uv_signal_t sigterm, sigint;
	transport_listener *listener;
	int stopping;
	int session_fd; /* >= 0: this process serves that one connection */
	const char *session_listen; /* rdma session process: listen here for the one client */
	int port_fd;                /* ... and write the port there */
	int served;                 /* ... its client came */
	uint64_t cookie;            /* ... which presents this */
	uv_timer_t no_client;
} M = {.session_fd = -1, .port_fd = -1};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: remote-gpud [options]\n"
		"  --listen ADDR       [tcp://|rdma://]HOST:PORT to listen on (default " DEFAULT_LISTEN ";\n"
		"                      port 0: any free port)\n"
		"  --port-file FILE    write the bound port to FILE once listening\n"
		"  --device N          GPU ordinal to serve (default 0)\n"
		"  --driver PATH       CUDA driver library (default libcuda.so.1)\n"
		"  --cublas PATH       cuBLAS (default libcublas.so.13; also REMOTE_GPU_CUBLAS)\n"
		"  --cublaslt PATH     cuBLASLt (default libcublasLt.so.13; also REMOTE_GPU_CUBLASLT)\n"
		"  --token T           clients must present this token (also REMOTE_GPU_TOKEN)\n"
		"  --cubin-store DIR   kernel images on disk (remote-cubin extract; uploads are added)\n"
		"                      default: $TMPDIR/remote-gpud-store2-<uid>\n"
		"  --store-quota N     bytes of images each tenant may upload to the store\n"
		"                      (suffix K, M, G; default 1G; 0: no uploads)\n"
		"  --isolation MODE    process (default): each session in a process of its own, so a\n"
		"                      kernel fault cannot reach other clients; thread: all in one\n"
		"                      process (faster session start, no fault isolation)\n"
		"  --run-dir DIR       where the status of the server and its sessions is kept for\n"
		"                      remote-smi (default $TMPDIR/remote-gpud-<port>)\n"
		"  --metrics-port N    serve Prometheus metrics at http://127.0.0.1:N/metrics\n"
		"                      (0: any free port, printed at start)\n"
		"  --help\n"
		"Logging: REMOTE_GPU_LOG=info (or debug, or \"warn,backend=debug\"), REMOTE_GPU_LOG_FILE,\n"
		"REMOTE_GPU_LOG_SYNC=1. Status of the server and its sessions: remote-smi.\n");
}

/* Immutable facts about the device, asked once and handed to every client. */
static int device_info(int ordinal)
{
	CUresult r;
	int count = 0;

	if ((r = be_drv.cuInit(0)) != CUDA_SUCCESS) {
		LOG_ERROR(BE_LOG, "cuInit: %s", be_errname(r));
		return -1;
	}
	if ((r = be_drv.cuDeviceGetCount(&count)) != CUDA_SUCCESS || count == 0) {
		LOG_ERROR(BE_LOG, "no CUDA device (%s)", r ? be_errname(r) : "count 0");
		return -1;
	}
	if (ordinal < 0 || ordinal >= count) {
		LOG_ERROR(BE_LOG, "--device %d: there are %d devices (0-%d)", ordinal, count, count - 1);
		return -1;
	}
	if ((r = be_drv.cuDeviceGet(&be_srv.dev, ordinal)) != CUDA_SUCCESS) {
		LOG_ERROR(BE_LOG, "cuDeviceGet(%d): %s", ordinal, be_errname(r));
		return -1;
	}
	be_srv.ordinal = ordinal;
	if (be_drv.cuDriverGetVersion(&be_srv.driver_version) != CUDA_SUCCESS)
		be_srv.driver_version = 0;
	if (be_drv.cuDeviceGetName(be_srv.name, sizeof(be_srv.name) - 1, be_srv.dev) != CUDA_SUCCESS)
		snprintf(be_srv.name, sizeof(be_srv.name), "CUDA device %d", ordinal);
	if (be_drv.cuDeviceGetUuid(&be_srv.uuid, be_srv.dev) != CUDA_SUCCESS)
		memset(&be_srv.uuid, 0, sizeof(be_srv.uuid));
	if (be_drv.cuDeviceTotalMem(&be_srv.total_mem, be_srv.dev) != CUDA_SUCCESS)
		be_srv.total_mem = 0;
	if (be_drv.cuDeviceGetPCIBusId(be_srv.pci_bus_id, sizeof(be_srv.pci_bus_id) - 1, be_srv.dev) != CUDA_SUCCESS)
		be_srv.pci_bus_id[0] = 0;
	for (int i = 0; i < CU_DEVICE_ATTRIBUTE_MAX; i++) {
		int v = 0;
		if (be_drv.cuDeviceGetAttribute(&v, (CUdevice_attribute)i, be_srv.dev) != CUDA_SUCCESS)
			v = 0;
		be_srv.attrs[i] = v;
	}
	return 0;
}

/* Writes the port atomically: a reader sees the whole number or no file. */
static int write_port_file(const char *path, int port)
{
	char tmp[4096];
	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof(tmp)) {
		LOG_ERROR(BE_LOG, "--port-file: path too long");
		return -1;
	}
	FILE *f = fopen(tmp, "w");
	if (!f) {
		LOG_ERROR(BE_LOG, "--port-file %s: %s", tmp, strerror(errno));
		return -1;
	}
	int ok = fprintf(f, "%d\n", port) > 0;
	ok &= fclose(f) == 0;
	if (!ok || rename(tmp, path) != 0) {
		LOG_ERROR(BE_LOG, "--port-file %s: %s", path, strerror(errno));
		unlink(tmp);
		return -1;
	}
	return 0;
}

/* Closes the listener once: in a session process the connection's end and a
 * SIGTERM may both ask, and the listener is freed after the first close. */
static void listener_close_once(void)
{
	if (M.listener) {
		transport_listener_close(M.listener);
		M.listener = NULL;
	}
}

static void on_signal(uv_signal_t *h, int signum)
{
	if (M.stopping) {
		LOG_WARN(BE_LOG, "%s again: exiting now", strsignal(signum));
		_exit(1);
	}
	M.stopping = 1;
	LOG_INFO(BE_LOG, "%s: shutting down (%d sessions)", strsignal(signum), be_sessions_live() + be_isolate_live());
	be_sessions_shutdown();
	be_isolate_shutdown(signum);
	be_metrics_stop();
	listener_close_once();
	/* Keep catching signals (a second one forces the exit), but do not keep
	 * the loop alive for them: it ends when the last session is gone. */
	uv_unref((uv_handle_t *)&M.sigterm);
	uv_unref((uv_handle_t *)&M.sigint);
}

static void on_handle_closed(uv_handle_t *h) {}

/* Startup failed after the loop was set up: close what is open, exit 1. */
static int stop_early(void)
{
	uv_close((uv_handle_t *)&M.sigterm, on_handle_closed);
	uv_close((uv_handle_t *)&M.sigint, on_handle_closed);
	uv_run(&M.loop, UV_RUN_DEFAULT); /* lets a failed or closed listener release its handles */
	uv_loop_close(&M.loop);
	return 1;
}

/* A session process's connection ended (ctx NULL: an rdma session process whose
 * client never came): nothing is left to serve. */
static void on_close_last(void *ctx, int err)
{
	if (ctx)
		be_on_close(ctx, err);
	listener_close_once();
	uv_unref((uv_handle_t *)&M.sigterm);
	uv_unref((uv_handle_t *)&M.sigint);
}

/* The loop, with the signals first: a SIGTERM right after the port appears must
 * already mean a clean shutdown. */
static void loop_start(void)
{
	uv_loop_init(&M.loop);
	uv_signal_init(&M.loop, &M.sigterm);
	uv_signal_init(&M.loop, &M.sigint);
	uv_signal_start(&M.sigterm, on_signal, SIGTERM);
	uv_signal_start(&M.sigint, on_signal, SIGINT);
}

/* A session process's loop ran out (its session is over): close what is left. */
static int session_process_end(void)
{
	/* A SIGTERM the supervisor passes on now must not kill the process once
	 * libuv gives the signals back to their defaults. */
	signal(SIGTERM, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	uv_close((uv_handle_t *)&M.sigterm, on_handle_closed);
	uv_close((uv_handle_t *)&M.sigint, on_handle_closed);
	uv_run(&M.loop, UV_RUN_DEFAULT);
	uv_loop_close(&M.loop);
	be_imgcache_clear();
	return 0;
}

/* --session-fd: serve the one connection the supervisor handed over, then exit. */
static int serve_one(int fd)
{
	static const transport_server_cb cb = {
		.on_accept = be_on_accept,
		.payload_dest = be_payload_dest,
		.on_frame = be_on_frame,
		.on_close = on_close_last,
	};
	pthread_setname_np(pthread_self(), "rg-session"); /* not "exe", from /proc/self/exe */
	int r = transport_adopt(&M.loop, "tcp", fd, &cb, &M.loop, &M.listener);
	if (r != TRANSPORT_OK) {
		LOG_ERROR(BE_LOG, "--session-fd %d: %s", fd, transport_strerror(r));
		return stop_early();
	}
	uv_run(&M.loop, UV_RUN_DEFAULT);
	return session_process_end();
}

static void *accept_one(void *ctx, transport_conn *c)
{
	if (M.served || c->cookie != M.cookie) {
		LOG_WARN(BE_LOG, "%s: %s: refused", c->peer,
			 M.served ? "this session process already serves a client" : "not the client sent here");
		return NULL;
	}
	M.served = 1;
	uv_timer_stop(&M.no_client);
	return be_on_accept(ctx, c);
}

static void on_no_client(uv_timer_t *t)
{
	LOG_WARN(BE_LOG, "the client sent to this session process did not come within %d ms", BE_SESSION_CONNECT_MS);
	on_close_last(NULL, 0);
}

/* --session-listen ADDR --port-fd N (rdma, isolate.c): listen, say the port,
 * load the driver, serve the one client the supervisor sends, exit. */
static int serve_sent(const transport_addr *addr, const char *driver, int device, const char *store)
{
	static const transport_server_cb cb = {
		.on_accept = accept_one,
		.payload_dest = be_payload_dest,
		.on_frame = be_on_frame,
		.on_close = on_close_last,
	};
	pthread_setname_np(pthread_self(), "rg-session"); /* not "exe", from /proc/self/exe */
	loop_start();
	int r = transport_listen(&M.loop, addr, &cb, &M.loop, &M.listener);
	if (r != TRANSPORT_OK) {
		LOG_ERROR(BE_LOG, "--session-listen %s:%d: %s", addr->host, addr->port, transport_strerror(r));
		close(M.port_fd);
		return stop_early();
	}
	/* The cookie keeps a stranger who finds the port from taking the session
	 * the supervisor made for its client. */
	if (getrandom(&M.cookie, sizeof(M.cookie), 0) != sizeof(M.cookie) || !M.cookie) {
		LOG_ERROR(BE_LOG, "session process: no random cookie");
		close(M.port_fd);
		listener_close_once();
		return stop_early();
	}
	char line[48];
	int n = snprintf(line, sizeof(line), "%d %016llx\n", transport_listener_port(M.listener),
			 (unsigned long long)M.cookie);
	int ok = write(M.port_fd, line, (size_t)n) == n;
	close(M.port_fd);
	if (!ok || be_driver_load(driver) != 0 || device_info(device) != 0 || be_imgcache_open_store(store) != 0) {
		LOG_ERROR(BE_LOG, "session process: %s", ok ? "no usable CUDA driver/device" : "cannot report the port");
		listener_close_once();
		return stop_early();
	}
	be_status_use_dir(getenv("REMOTE_GPUD_RUN_DIR"));
	uv_timer_init(&M.loop, &M.no_client);
	uv_timer_start(&M.no_client, on_no_client, BE_SESSION_CONNECT_MS, 0);
	uv_unref((uv_handle_t *)&M.no_client);
	uv_run(&M.loop, UV_RUN_DEFAULT);
	uv_close((uv_handle_t *)&M.no_client, on_handle_closed);
	return session_process_end();
}

int main(int argc, char **argv)
{
	const char *listen = DEFAULT_LISTEN, *port_file = NULL, *driver = NULL, *token = NULL;
	const char *isolation = "process", *store = NULL, *run_dir = NULL, *store_quota = "1G";
	int metrics_port = -1;
	int device = 0;
	transport_addr addr;
	int r;

	rg_log_init("remote-gpud");
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			return 0;
		}
		if (!v || strncmp(a, "--", 2) != 0) {
			fprintf(stderr, "remote-gpud: %s: %s\n", a, v ? "unknown argument" : "missing value or unknown option");
			usage(stderr);
			return 2;
		}
		if (!strcmp(a, "--listen"))
			listen = v;
		else if (!strcmp(a, "--port-file"))
			port_file = v;
		else if (!strcmp(a, "--driver"))
			driver = v;
		else if (!strcmp(a, "--token"))
			token = v;
		else if (be_lib_option(a, v) == 0)
			; /* a forwarded library's path (lib.c): --cublas, --cublaslt */
		else if (!strcmp(a, "--isolation") && (!strcmp(v, "process") || !strcmp(v, "thread")))
			isolation = v;
		else if (!strcmp(a, "--cubin-store"))
			store = v;
		else if (!strcmp(a, "--store-quota"))
			store_quota = v;
		else if (!strcmp(a, "--run-dir"))
			run_dir = v;
		else if (!strcmp(a, "--metrics-port")) {
			char *end;
			errno = 0;
			long p = strtol(v, &end, 10);
			if (errno || *end || end == v || p < 0 || p > 65535) {
				fprintf(stderr, "remote-gpud: --metrics-port %s: not a port number\n", v);
				return 2;
			}
			metrics_port = (int)p;
		}
		else if (!strcmp(a, "--session-fd"))
			M.session_fd = atoi(v);
		else if (!strcmp(a, "--session-listen"))
			M.session_listen = v;
		else if (!strcmp(a, "--port-fd"))
			M.port_fd = atoi(v);
		else if (!strcmp(a, "--device")) {
			char *end;
			errno = 0;
			long d = strtol(v, &end, 10);
			if (errno || *end || end == v || d < 0 || d > 1024) {
				fprintf(stderr, "remote-gpud: --device %s: not a device ordinal\n", v);
				return 2;
			}
			device = (int)d;
		} else {
			fprintf(stderr, "remote-gpud: unknown option %s\n", a);
			usage(stderr);
			return 2;
		}
		i++;
	}
	if (be_quota_parse(store_quota, &be_srv.store_quota) != 0) {
		fprintf(stderr, "remote-gpud: --store-quota %s: not a size (bytes, or with K, M, G)\n", store_quota);
		return 2;
	}
	if (!token)
		token = getenv("REMOTE_GPU_TOKEN");
	be_srv.token = token && *token ? token : NULL;
	/* For tests: make every synchronising call take the waiter's path. */
	const char *nf = getenv("REMOTE_GPU_NO_FASTPATH");
	be_srv.no_fastpath = nf && *nf && strcmp(nf, "0") != 0;

	signal(SIGPIPE, SIG_IGN); /* a vanished client is an error code, not a death */
	if (transport_parse_addr(listen, &addr) != TRANSPORT_OK) {
		fprintf(stderr, "remote-gpud: --listen %s: bad address (expected HOST:PORT)\n", listen);
		return 2;
	}
	static char default_store[512];
	if (!store) {
		const char *tmp = getenv("TMPDIR");
		/* store2: SHA-256 addresses; a store of XXH3 ones is never opened as one. */
		snprintf(default_store, sizeof(default_store), "%s/remote-gpud-store2-%d", tmp && *tmp ? tmp : "/tmp",
			 (int)getuid());
		store = default_store;
	}
	if (M.session_listen) {
		transport_addr sa;
		if (M.port_fd < 0 || transport_parse_addr(M.session_listen, &sa) != TRANSPORT_OK) {
			fprintf(stderr, "remote-gpud: --session-listen needs an address and --port-fd\n");
			return 2;
		}
		return serve_sent(&sa, driver, device, store);
	}
	if (be_driver_load(driver) != 0 || device_info(device) != 0) {
		fprintf(stderr, "remote-gpud: no usable CUDA driver/device (see the log above)\n");
		be_driver_unload();
		return 1;
	}

	if (be_imgcache_open_store(store) != 0)
		return 1;

	loop_start();
	static const transport_server_cb cb = {
		.on_accept = be_on_accept,
		.payload_dest = be_payload_dest,
		.on_frame = be_on_frame,
		.on_close = be_on_close,
	};
	if (M.session_fd >= 0) {
		/* The supervisor passes its run directory down (status.h). */
		be_status_use_dir(run_dir ? run_dir : getenv("REMOTE_GPUD_RUN_DIR"));
		return serve_one(M.session_fd);
	}
	transport_server_cb lcb = cb;
	char *child_argv[16], *child_argv_listen[20];
	if (!strcmp(isolation, "process")) {
		int n = 0;
		child_argv[n++] = argv[0];
		child_argv[n++] = "--session-fd";
		child_argv[n++] = "3";
		int common = n;
		child_argv[n++] = "--device";
		static char devbuf[16];
		snprintf(devbuf, sizeof(devbuf), "%d", device);
		child_argv[n++] = devbuf;
		if (driver) {
			child_argv[n++] = "--driver";
			child_argv[n++] = (char *)driver;
		}
		child_argv[n++] = "--cubin-store";
		child_argv[n++] = (char *)store;
		child_argv[n++] = "--store-quota";
		child_argv[n++] = (char *)store_quota;
		if (be_srv.token) { /* the child also reads REMOTE_GPU_TOKEN; pass --token explicitly */
			child_argv[n++] = "--token";
			child_argv[n++] = (char *)be_srv.token;
		}
		child_argv[n] = NULL;
		/* rdma: the same, but it listens on the address of this listener. */
		static char listen_addr[300];
		snprintf(listen_addr, sizeof(listen_addr), strchr(addr.host, ':') ? "%s://[%s]:0" : "%s://%s:0",
			 addr.scheme, addr.host);
		int k = 0;
		child_argv_listen[k++] = argv[0];
		child_argv_listen[k++] = "--session-listen";
		child_argv_listen[k++] = listen_addr;
		child_argv_listen[k++] = "--port-fd";
		child_argv_listen[k++] = "3";
		for (int i = common; i <= n; i++)
			child_argv_listen[k++] = child_argv[i];
		be_isolate_init(&M.loop, child_argv, child_argv_listen);
		lcb.on_accept_fd = be_isolate_accept_fd;
		lcb.on_redirect = be_isolate_redirect;
	}
	if ((r = transport_listen(&M.loop, &addr, &lcb, &M.loop, &M.listener)) != TRANSPORT_OK) {
		fprintf(stderr, "remote-gpud: cannot listen on %s: %s\n", listen, transport_strerror(r));
		return stop_early();
	}
	int port = transport_listener_port(M.listener);
	int mport = 0;
	if (metrics_port >= 0 && (mport = be_metrics_start(&M.loop, metrics_port)) < 0) {
		transport_listener_close(M.listener);
		return stop_early();
	}
	if (be_status_server_open(run_dir, addr.host, port, isolation, mport) == 0)
		setenv("REMOTE_GPUD_RUN_DIR", be_status_dir(), 1); /* for the session processes */
	if (port_file && write_port_file(port_file, port) != 0) {
		transport_listener_close(M.listener);
		be_metrics_stop();
		be_status_server_close();
		return stop_early();
	}
	/* Printed whatever REMOTE_GPU_LOG says: scripts wait for it. */
	rg_log_write(RG_LOG_INFO, BE_LOG, "listening on %s:%d, device %d: %s (%zu MiB)%s, a %s per session", addr.host,
		     port, device, be_srv.name, be_srv.total_mem >> 20, be_srv.token ? ", token required" : "",
		     isolation);
	if (mport > 0)
		rg_log_write(RG_LOG_INFO, BE_LOG, "metrics at http://127.0.0.1:%d/metrics", mport);

	uv_run(&M.loop, UV_RUN_DEFAULT);
	be_status_server_close();

	uv_close((uv_handle_t *)&M.sigterm, on_handle_closed);
	uv_close((uv_handle_t *)&M.sigint, on_handle_closed);
	uv_run(&M.loop, UV_RUN_DEFAULT);
	if (uv_loop_close(&M.loop) != 0)
		LOG_WARN(BE_LOG, "loop closed with handles still open");
	be_imgcache_clear();
	/* The driver stays loaded: unloading libcuda at exit is not safe (its own
	 * threads and atexit handlers), and there is nothing to gain. */
	LOG_INFO(BE_LOG, "stopped");
	return 0;
}
