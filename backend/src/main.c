/*
 * remote-gpud: serves one or more GPUs to remote-gpu clients (libremote.so).
 *
 *   remote-gpud [options]    (options.c parses them; remote-gpud --help lists them)
 *
 * The main thread runs the libuv loop: the listener, the signals and, with
 * --isolation thread, every session's connection callbacks. By default each
 * session is served by a process of its own (isolate.c), started as
 * `remote-gpud --session-fd 3 ...`, which serves that one connection and exits
 * (rdma: `--session-listen rdma://HOST:0 --port-fd 3`, to which the client is
 * sent, see isolate.c).
 * SIGTERM or SIGINT drains: the server stops accepting (process mode closes the
 * listener; thread mode, whose listener holds the sessions' connections,
 * refuses each new one at once), lets live sessions finish for --drain-seconds,
 * then passes the signal to the session processes (thread mode: closes the
 * connections); each session tears itself down (freeing all it created on the
 * GPU), and once the last one is gone the loop has nothing left and the process
 * exits 0. A second signal ends the grace at once; a third exits at once. A
 * session process ends its session at the first signal.
 *
 * The token reaches session processes through their environment
 * (REMOTE_GPU_TOKEN, readable only by this user in /proc/PID/environ), never
 * through their command line, which every local user can read.
 */
#include "backend.h"
#include "lib.h"
#include "listen_tls.h"
#include "peer.h"
#include "stripe.h"
#include "ticket.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "admit.h"
#include "mps.h"
#include "options.h"
#include "tenants.h"

#define FD_RESERVE 64          /* thread mode: descriptors kept for the listener, logs, the driver */
#define FD_PER_SESSION 8       /* thread mode: descriptors one session may hold (socket, driver's) */

be_server be_srv;

static struct {
	uv_loop_t loop;
	uv_signal_t sigterm, sigint;
	transport_listener *listener;
	transport_listener *offer; /* --shm-offer's shm:// listener (the supervisor's) */
	int stopping;
	int session_fd; /* >= 0: this process serves that one connection */
	const char *session_listen; /* rdma session process: listen here for the one client */
	int port_fd;                /* ... and write the port there */
	int served;                 /* ... its client came */
	transport_cookie cookie;    /* ... which presents this */
	uv_timer_t no_client;
	uv_timer_t drain;           /* supervisor: SIGTERM's grace, checked every DRAIN_TICK_MS */
	uint64_t drain_end_ns;
	unsigned drain_s;
	int ending;                 /* the grace is over: sessions were told to end */
	int process_mode;           /* supervisor of session processes */
} M = {.session_fd = -1, .port_fd = -1, .drain_s = BE_DEFAULT_DRAIN_S};

#define DRAIN_TICK_MS 100

/* Immutable facts about one device, asked once and handed to every client. */
static void gpu_info(be_gpu *g)
{
	if (be_drv.cuDeviceGetName(g->name, sizeof(g->name) - 1, g->dev) != CUDA_SUCCESS)
		snprintf(g->name, sizeof(g->name), "CUDA device %d", g->ordinal);
	if (be_drv.cuDeviceGetUuid(&g->uuid, g->dev) != CUDA_SUCCESS)
		memset(&g->uuid, 0, sizeof(g->uuid));
	if (be_drv.cuDeviceTotalMem(&g->total_mem, g->dev) != CUDA_SUCCESS)
		g->total_mem = 0;
	if (be_drv.cuDeviceGetPCIBusId(g->pci_bus_id, sizeof(g->pci_bus_id) - 1, g->dev) != CUDA_SUCCESS)
		g->pci_bus_id[0] = 0;
	for (int i = 0; i < CU_DEVICE_ATTRIBUTE_MAX; i++) {
		int v = 0;
		if (be_drv.cuDeviceGetAttribute(&v, (CUdevice_attribute)i, g->dev) != CUDA_SUCCESS)
			v = 0;
		g->attrs[i] = v;
	}
}

/* --device: "all", or ordinals separated by commas ("0", "1,0"), each once;
 * the list's order is the order the client sees them in. */
static int device_list(const char *spec, int count, int *out)
{
	if (!strcmp(spec, "all")) {
		int n = count < BE_MAX_GPUS ? count : BE_MAX_GPUS;
		for (int i = 0; i < n; i++)
			out[i] = i;
		return n;
	}
	int n = 0;
	const char *p = spec;
	for (;;) {
		char *end;
		errno = 0;
		long d = strtol(p, &end, 10);
		if (errno || end == p || d < 0 || d >= count || n == BE_MAX_GPUS) {
			LOG_ERROR(BE_LOG, "--device %s: not a list of device ordinals in 0-%d (at most %d) or all", spec,
				  count - 1, BE_MAX_GPUS);
			return -1;
		}
		for (int i = 0; i < n; i++)
			if (out[i] == d) {
				LOG_ERROR(BE_LOG, "--device %s: device %ld named twice", spec, d);
				return -1;
			}
		out[n++] = (int)d;
		if (!*end)
			return n;
		if (*end != ',') {
			LOG_ERROR(BE_LOG, "--device %s: not a list of device ordinals or all", spec);
			return -1;
		}
		p = end + 1;
	}
}

/* The devices of --device and what each client is told about them. */
static int device_info(const char *spec)
{
	CUresult r;
	int count = 0, ords[BE_MAX_GPUS];

	if ((r = be_drv.cuInit(0)) != CUDA_SUCCESS) {
		LOG_ERROR(BE_LOG, "cuInit: %s", be_errname(r));
		return -1;
	}
	be_driver_thread_relaxed(); /* the loop thread runs short ops inline */
	if ((r = be_drv.cuDeviceGetCount(&count)) != CUDA_SUCCESS || count == 0) {
		LOG_ERROR(BE_LOG, "no CUDA device (%s)", r ? be_errname(r) : "count 0");
		return -1;
	}
	int n = device_list(spec, count, ords);
	if (n <= 0)
		return -1;
	if (be_drv.cuDriverGetVersion(&be_srv.driver_version) != CUDA_SUCCESS)
		be_srv.driver_version = 0;
	for (int i = 0; i < n; i++) {
		be_gpu *g = &be_srv.gpu[i];
		g->ordinal = ords[i];
		if ((r = be_drv.cuDeviceGet(&g->dev, ords[i])) != CUDA_SUCCESS) {
			LOG_ERROR(BE_LOG, "cuDeviceGet(%d): %s", ords[i], be_errname(r));
			return -1;
		}
		gpu_info(g);
	}
	/* Which device may map which one's memory: the driver's answer, asked
	 * once (the client's cudaDeviceCanAccessPeer reads it from the hello). */
	for (int i = 0; i < n; i++)
		for (int j = 0; j < n; j++) {
			int can = 0;
			if (i != j && be_drv.cuDeviceCanAccessPeer(&can, be_srv.gpu[i].dev, be_srv.gpu[j].dev) == CUDA_SUCCESS &&
			    can)
				be_srv.gpu[i].peers |= 1ull << j;
		}
	be_srv.ngpu = n;
	return 0;
}

/* The devices now, or, in a session process under MPS, at the hello, once
 * the tenant's class is known (mps.c). */
static int devices_now(const char *spec)
{
	if (!be_mps_client())
		return device_info(spec);
	be_mps_defer(device_info, spec);
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
	be_peer_listen_close();
	be_stripe_listen_close();
	if (M.offer) {
		transport_listener_close(M.offer);
		M.offer = NULL;
	}
}

/* This server's instance id: the supervisor draws it and hands it to its
 * session processes through the environment (REMOTE_GPUD_INSTANCE, hex). */
static void instance_init(void)
{
	const char *e = getenv("REMOTE_GPUD_INSTANCE");
	unsigned v;
	int ok = e && strlen(e) == 2 * sizeof(be_srv.instance);
	for (size_t i = 0; ok && i < sizeof(be_srv.instance); i++) {
		ok = sscanf(e + 2 * i, "%2x", &v) == 1;
		be_srv.instance[i] = (uint8_t)v;
	}
	if (ok)
		return;
	char hex[2 * sizeof(be_srv.instance) + 1];
	if (getrandom(be_srv.instance, sizeof(be_srv.instance), 0) != (ssize_t)sizeof(be_srv.instance))
		memset(be_srv.instance, 0, sizeof(be_srv.instance)); /* all zero: never matched (op_hello.c) */
	for (size_t i = 0; i < sizeof(be_srv.instance); i++)
		snprintf(hex + 2 * i, 3, "%02x", be_srv.instance[i]);
	setenv("REMOTE_GPUD_INSTANCE", hex, 1);
}

/* --shm-offer PATH: the supervisor also listens on shm://PATH, with the
 * main listener's callbacks; op_hello.c offers the path to tcp clients on
 * this host. */
static int offer_listen(const char *path, const transport_server_cb *cb)
{
	char s[300];
	transport_addr a;
	snprintf(s, sizeof(s), "shm://%s", path);
	int r = transport_parse_addr(s, &a);
	if (r == TRANSPORT_OK)
		r = transport_listen(&M.loop, &a, cb, &M.loop, &M.offer);
	if (r != TRANSPORT_OK) {
		fprintf(stderr, "remote-gpud: --shm-offer %s: %s\n", path, transport_strerror(r));
		return -1;
	}
	return 0;
}

static void on_handle_closed(uv_handle_t *h) {}

/* Tells every session to end now: the session processes get signum, thread
 * mode's connections close with the listener. */
static void sessions_end(int signum)
{
	M.ending = 1;
	be_sessions_shutdown();
	be_isolate_shutdown(signum);
	be_metrics_stop();
	listener_close_once();
	/* Keep catching signals (another one forces the exit), but do not keep
	 * the loop alive for them: it ends when the last session is gone. */
	uv_unref((uv_handle_t *)&M.sigterm);
	uv_unref((uv_handle_t *)&M.sigint);
}

/* Supervisor, during the drain: done once no session is left, or the grace is
 * over. */
static void on_drain_tick(uv_timer_t *t)
{
	int live = be_sessions_live() + be_isolate_live();
	if (live > 0 && rg_clock_ns() < M.drain_end_ns)
		return;
	if (live > 0)
		LOG_WARN(BE_LOG, "drain: %d sessions still live after %u s (--drain-seconds): ending them", live,
			 M.drain_s);
	uv_timer_stop(t);
	uv_close((uv_handle_t *)t, on_handle_closed);
	sessions_end(SIGTERM);
}

static void on_signal(uv_signal_t *h, int signum)
{
	int live = be_sessions_live() + be_isolate_live();
	int session_process = M.session_fd >= 0 || M.session_listen;

	if (M.ending) {
		LOG_WARN(BE_LOG, "%s again: exiting now", strsignal(signum));
		_exit(1);
	}
	if (M.stopping || session_process || M.drain_s == 0 || live == 0) {
		LOG_INFO(BE_LOG, "%s: shutting down (%d sessions)", strsignal(signum), live);
		if (M.stopping)
			uv_close((uv_handle_t *)&M.drain, on_handle_closed);
		M.stopping = 1;
		sessions_end(signum);
		return;
	}
	M.stopping = 1;
	LOG_INFO(BE_LOG, "%s: draining: no new connections; %d sessions have %u s to finish (--drain-seconds; "
		 "a second signal ends them now)", strsignal(signum), live, M.drain_s);
	be_sessions_shutdown(); /* thread mode: new connections are refused at once */
	if (M.process_mode)
		listener_close_once(); /* its sessions are in processes of their own */
	M.drain_end_ns = rg_clock_ns() + (uint64_t)M.drain_s * 1000000000u;
	uv_timer_init(&M.loop, &M.drain);
	uv_timer_start(&M.drain, on_drain_tick, DRAIN_TICK_MS, DRAIN_TICK_MS);
}

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

/* A unix socket came from an shm:// listener; otherwise tcp (or tls). */
static const char *adopt_scheme(int fd)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0 && ss.ss_family == AF_UNIX)
		return "shm";
	return be_tls_adopt_scheme();
}

/* Server to server copies land in this process on the address its client
 * reached it on (peer_listen.c). */
static void peer_listen_here(int fd)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char host[INET6_ADDRSTRLEN] = "";
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0)
		return;
	if (ss.ss_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, host, sizeof(host));
	else if (ss.ss_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, host, sizeof(host));
	if (*host) {
		be_peer_listen_init(&M.loop, be_tls_adopt_scheme(), host);
		be_stripe_listen_init(&M.loop, be_tls_adopt_scheme(), host);
	}
}

/* --session-fd: serve the one connection the supervisor handed over, then exit. */
static int serve_one(int fd)
{
	static const transport_server_cb cb = {
		.on_accept = be_on_accept,
		.payload_dest = be_payload_dest,
		.frame_ok = be_frame_ok,
		.on_frame = be_on_frame,
		.on_close = on_close_last,
	};
	pthread_setname_np(pthread_self(), "rg-session"); /* not "exe", from /proc/self/exe */
	peer_listen_here(fd);
	int r = transport_adopt(&M.loop, adopt_scheme(fd), fd, &cb, &M.loop, &M.listener);
	if (r != TRANSPORT_OK) {
		LOG_ERROR(BE_LOG, "--session-fd %d: %s", fd, transport_strerror(r));
		return stop_early();
	}
	uv_run(&M.loop, UV_RUN_DEFAULT);
	int rc = session_process_end();
	return atomic_load(&be_srv.auth_failed) ? BE_EXIT_AUTH : rc;
}

static void *accept_one(void *ctx, transport_conn *c)
{
	if (M.served || !transport_cookie_equal(&c->cookie, &M.cookie)) {
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
	LOG_WARN(BE_LOG, "the client sent to this session process did not come within %d ms",
		 be_srv.cookie_auth ? BE_TICKET_CONNECT_MS : BE_SESSION_CONNECT_MS);
	on_close_last(NULL, 0);
}

/* --session-listen ADDR --port-fd N (rdma, isolate.c): listen, say the port,
 * load the driver, serve the one client the supervisor sends, exit. ADDR
 * rdma+tls:// (ticket.c): listen on rdma; the client got the cookie inside TLS
 * after its token was checked, so the cookie authenticates it. */
static int serve_sent(transport_addr *addr, const char *driver, const char *device, const char *store)
{
	static const transport_server_cb cb = {
		.on_accept = accept_one,
		.payload_dest = be_payload_dest,
		.frame_ok = be_frame_ok,
		.on_frame = be_on_frame,
		.on_close = on_close_last,
	};
	pthread_setname_np(pthread_self(), "rg-session"); /* not "exe", from /proc/self/exe */
	if (!strcmp(addr->scheme, "rdma+tls")) {
		strcpy(addr->scheme, "rdma");
		be_srv.cookie_auth = 1;
	}
	loop_start();
	int r = transport_listen(&M.loop, addr, &cb, &M.loop, &M.listener);
	if (r != TRANSPORT_OK) {
		LOG_ERROR(BE_LOG, "--session-listen %s:%d: %s", addr->host, addr->port, transport_strerror(r));
		close(M.port_fd);
		return stop_early();
	}
	/* The cookie keeps a stranger who finds the port from taking the session
	 * the supervisor made for its client. */
	if (getrandom(&M.cookie, sizeof(M.cookie), 0) != sizeof(M.cookie) ||
	    !transport_cookie_equal(&M.cookie, &M.cookie)) {
		LOG_ERROR(BE_LOG, "session process: no random cookie");
		close(M.port_fd);
		listener_close_once();
		return stop_early();
	}
	char line[64];
	int n = snprintf(line, sizeof(line), "%d ", transport_listener_port(M.listener));
	for (int i = 0; i < TRANSPORT_COOKIE_LEN; i++)
		n += snprintf(line + n, sizeof(line) - (size_t)n, "%02x", M.cookie.b[i]);
	n += snprintf(line + n, sizeof(line) - (size_t)n, "\n");
	int ok = write(M.port_fd, line, (size_t)n) == n;
	close(M.port_fd);
	if (!ok || be_driver_load(driver) != 0 || devices_now(device) != 0 || be_imgcache_open_store(store) != 0) {
		LOG_ERROR(BE_LOG, "session process: %s", ok ? "no usable CUDA driver/device" : "cannot report the port");
		listener_close_once();
		return stop_early();
	}
	be_status_use_dir(getenv("REMOTE_GPUD_RUN_DIR"));
	uv_timer_init(&M.loop, &M.no_client);
	uv_timer_start(&M.no_client, on_no_client, be_srv.cookie_auth ? BE_TICKET_CONNECT_MS : BE_SESSION_CONNECT_MS,
		       0);
	uv_unref((uv_handle_t *)&M.no_client);
	uv_run(&M.loop, UV_RUN_DEFAULT);
	uv_close((uv_handle_t *)&M.no_client, on_handle_closed);
	int rc = session_process_end();
	return atomic_load(&be_srv.auth_failed) ? BE_EXIT_AUTH : rc;
}

/* A directory in a shared temporary folder (sticky and world-writable, as
 * /tmp) that another user made, or a symlink there, is refused: whoever made it
 * could have planted kernel images in it for every tenant to load. 0, or -1
 * after saying why. (Elsewhere a store another user prepared is an operator's
 * choice.) */
static int dir_not_planted(const char *dir, const char *opt)
{
	struct stat st, pst;
	char parent[4096];
	if (lstat(dir, &st) != 0)
		return 0; /* made by us, later */
	snprintf(parent, sizeof(parent), "%s", dir);
	char *slash = strrchr(parent, '/');
	while (slash && slash > parent && slash[1] == 0) { /* "dir/" */
		*slash = 0;
		slash = strrchr(parent, '/');
	}
	if (!slash)
		snprintf(parent, sizeof(parent), ".");
	else
		slash[slash == parent] = 0; /* "/x" -> "/" */
	if (stat(parent, &pst) != 0 || !(pst.st_mode & S_ISVTX) || !(pst.st_mode & S_IWOTH))
		return 0;
	if (S_ISLNK(st.st_mode) || st.st_uid != geteuid()) {
		fprintf(stderr,
			"remote-gpud: %s %s: %s in the shared folder %s, not by this user (uid %d): refused; "
			"remove it or choose another with %s\n",
			opt, dir, S_ISLNK(st.st_mode) ? "a symlink" : "made by another user", parent, (int)geteuid(), opt);
		return -1;
	}
	return 0;
}

/* Thread mode keeps every session's descriptors in this process: raise the
 * soft limit to the hard one, and keep max_conns where they all fit with room
 * to spare, so the listener never meets EMFILE (libuv then accepts and resets
 * connections, honest ones included). */
static void fd_headroom(int thread_mode, unsigned *max_conns)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return;
	if (rl.rlim_cur < rl.rlim_max) {
		rlim_t want = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > (1u << 20) ? (1u << 20) : rl.rlim_max;
		if (want > rl.rlim_cur) {
			rl.rlim_cur = want;
			if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
				getrlimit(RLIMIT_NOFILE, &rl);
		}
	}
	if (!thread_mode)
		return;
	rlim_t fit = rl.rlim_cur > FD_RESERVE + FD_PER_SESSION ? (rl.rlim_cur - FD_RESERVE) / FD_PER_SESSION : 1;
	if (*max_conns == 0 || *max_conns > fit) {
		LOG_WARN(BE_LOG, "--max-connections %u: the descriptor limit (%llu) fits %llu thread-mode sessions; "
			 "using %llu", *max_conns, (unsigned long long)rl.rlim_cur, (unsigned long long)fit,
			 (unsigned long long)fit);
		*max_conns = (unsigned)fit;
	}
}

int main(int argc, char **argv)
{
	be_options o;
	transport_addr addr;
	int r;

	rg_log_init("remote-gpud");
	be_hostfn_set_capture(be_hostnode_capture); /* op_hostfn.c reaches op_hostnode.c through it */
	be_graph_set_watch(&(be_graph_watch){be_hostnode_merge, be_hostnode_drop}); /* and the graph files */
	be_nccl_env_defaults(); /* inherited by the session processes */
	if ((r = be_options_parse(&argc, &argv, &o)) >= 0) /* options.c */
		return r;
	const char *listen = o.listen, *port_file = o.port_file, *driver = o.driver, *token = o.token;
	const char *isolation = o.isolation, *store = o.store, *run_dir = o.run_dir, *store_quota = o.store_quota;
	const char *token_file = o.token_file, *metrics_host = o.metrics_host, *device = o.device;
	int metrics_port = o.metrics_port;
	unsigned hello_s = o.hello_s, idle_s = o.idle_s, max_conns = o.max_conns, max_per_source = o.max_per_source;
	M.drain_s = o.drain_s;
	M.session_fd = o.session_fd;
	M.session_listen = o.session_listen;
	M.port_fd = o.port_fd;
	if ((r = be_tenants_setup(M.session_fd >= 0 || M.session_listen, !strcmp(isolation, "thread"))) != 0)
		return r;
	if ((r = be_mps_setup(M.session_fd >= 0 || M.session_listen, !strcmp(isolation, "thread"))) != 0)
		return r;
	if (be_mps_probing()) /* mps.c: started by the supervisor under its MPS daemon */
		return be_driver_load(driver) != 0 || device_info(device) != 0 ? 1 : be_mps_probe();
	/* one session per process: only then may it have the primary context */
	const char *oc = getenv("REMOTE_GPU_OWN_CONTEXT");
	be_srv.primary_ctx = (M.session_fd >= 0 || M.session_listen) && !(oc && !strcmp(oc, "1"));
	if (be_tenants_active() && (token || token_file)) {
		fprintf(stderr, "remote-gpud: --tenants holds the tokens: leave out --token and --token-file\n");
		return 2;
	}
	if (!token && !be_tenants_active())
		token = getenv("REMOTE_GPU_TOKEN");
	be_srv.token = token && *token ? token : NULL;
	be_srv.shm_offer = o.shm_offer;
	instance_init();
	be_srv.hello_timeout_ms = hello_s * 1000u;
	be_srv.idle_timeout_ms = idle_s * 1000u;
	/* For tests: make every synchronising call take the waiter's path. */
	const char *nf = getenv("REMOTE_GPU_NO_FASTPATH");
	be_srv.no_fastpath = nf && *nf && strcmp(nf, "0") != 0;

	signal(SIGPIPE, SIG_IGN); /* a vanished client is an error code, not a death */
	if (transport_parse_addr(listen, &addr) != TRANSPORT_OK) {
		fprintf(stderr, "remote-gpud: --listen %s: bad address (expected HOST:PORT)\n", listen);
		return 2;
	}
	int rdma_tls = !strcmp(addr.scheme, "rdma+tls"); /* ticket.c; its listener becomes a tls one */
	if ((r = be_tls_setup(&addr, M.session_fd >= 0 || M.session_listen)) != 0)
		return r;
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
		be_devout_init();
		return serve_sent(&sa, driver, device, store);
	}
	be_mps_init_begin();
	r = be_driver_load(driver) != 0 || devices_now(device) != 0;
	be_mps_init_end();
	if (r) {
		fprintf(stderr, "remote-gpud: no usable CUDA driver/device (see the log above)\n");
		be_driver_unload();
		return 1;
	}

	if (dir_not_planted(store, "--cubin-store") != 0 || be_imgcache_open_store(store) != 0)
		return 1;

	loop_start();
	static const transport_server_cb cb = {
		.on_accept = be_on_accept,
		.payload_dest = be_payload_dest,
		.frame_ok = be_frame_ok,
		.on_frame = be_on_frame,
		.on_close = be_on_close,
	};
	if (M.session_fd >= 0) {
		/* The supervisor passes its run directory down (status.h). */
		be_status_use_dir(run_dir ? run_dir : getenv("REMOTE_GPUD_RUN_DIR"));
		be_devout_init(); /* the one client's: device printf reaches it (devout.c) */
		return serve_one(M.session_fd);
	}
	transport_server_cb lcb = cb;
	char *child_argv[32], *child_argv_listen[36];
	M.process_mode = !strcmp(isolation, "process");
	if (rdma_tls && !M.process_mode) {
		fprintf(stderr, "remote-gpud: rdma+tls:// needs --isolation process (a session process per client)\n");
		return stop_early();
	}
	/* The ticket (ticket.c) checks the one token; a tenant's login and its
	 * ledger slot would have to travel with the cookie, which they do not yet. */
	if (rdma_tls && be_tenants_active()) {
		fprintf(stderr, "remote-gpud: rdma+tls:// does not take --tenants yet: use tcp:// or tls://\n");
		return stop_early();
	}
	fd_headroom(!M.process_mode, &max_conns);
	be_admit_init((int)max_conns, (int)max_per_source);
	if (M.process_mode) {
		int n = 0;
		child_argv[n++] = argv[0];
		child_argv[n++] = "--session-fd";
		child_argv[n++] = "3";
		int common = n;
		child_argv[n++] = "--device";
		child_argv[n++] = (char *)device;
		if (driver) {
			child_argv[n++] = "--driver";
			child_argv[n++] = (char *)driver;
		}
		child_argv[n++] = "--cubin-store";
		child_argv[n++] = (char *)store;
		child_argv[n++] = "--store-quota";
		child_argv[n++] = (char *)store_quota;
		static char hellobuf[16], idlebuf[16];
		snprintf(hellobuf, sizeof(hellobuf), "%u", hello_s);
		snprintf(idlebuf, sizeof(idlebuf), "%u", idle_s);
		child_argv[n++] = "--hello-timeout";
		child_argv[n++] = hellobuf;
		child_argv[n++] = "--idle-timeout";
		child_argv[n++] = idlebuf;
		if (be_srv.shm_offer) {
			child_argv[n++] = "--shm-offer";
			child_argv[n++] = (char *)be_srv.shm_offer;
		}
		n = be_tls_child_args(child_argv, n);
		n = be_tenants_child_args(child_argv, n);
		n = be_mps_child_args(child_argv, n);
		child_argv[n] = NULL;
		/* The token goes through the environment, which only this user can
		 * read, not the command line, which everyone can (ps). An empty one
		 * from our own environment means none, here as there. */
		if (be_srv.token ? setenv("REMOTE_GPU_TOKEN", be_srv.token, 1) : unsetenv("REMOTE_GPU_TOKEN")) {
			fprintf(stderr, "remote-gpud: cannot pass the token on: %s\n", strerror(errno));
			return stop_early();
		}
		/* rdma: the same, but it listens on the address of this listener. */
		static char listen_addr[300];
		snprintf(listen_addr, sizeof(listen_addr), strchr(addr.host, ':') ? "%s://[%s]:0" : "%s://%s:0",
			 rdma_tls ? "rdma+tls" : addr.scheme, addr.host);
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
		if (rdma_tls)
			lcb = *be_ticket_callbacks();
	}
	if (!M.process_mode) {
		be_peer_listen_init(&M.loop, addr.scheme, addr.host);
		be_stripe_listen_init(&M.loop, addr.scheme, addr.host);
	}
	if ((r = transport_listen(&M.loop, &addr, &lcb, &M.loop, &M.listener)) != TRANSPORT_OK) {
		fprintf(stderr, "remote-gpud: cannot listen on %s: %s\n", listen, transport_strerror(r));
		return stop_early();
	}
	if (be_srv.shm_offer && strcmp(addr.scheme, "tcp") != 0) {
		fprintf(stderr, "remote-gpud: --shm-offer goes with a tcp:// --listen (it is offered to tcp clients)\n");
		listener_close_once();
		return stop_early();
	}
	if (be_srv.shm_offer && offer_listen(be_srv.shm_offer, &lcb) != 0) {
		listener_close_once();
		return stop_early();
	}
	int port = transport_listener_port(M.listener);
	int mport = 0;
	if (metrics_port >= 0 && (mport = be_metrics_start(&M.loop, metrics_host, metrics_port)) < 0) {
		transport_listener_close(M.listener);
		return stop_early();
	}
	/* shm:// has no port to name the run directory by: the socket's path does. */
	static char shm_run_dir[300];
	if (!run_dir && !strcmp(addr.scheme, "shm")) {
		snprintf(shm_run_dir, sizeof(shm_run_dir), "%s.run", addr.host);
		run_dir = shm_run_dir;
	}
	if (be_status_server_open(run_dir, addr.host, port, isolation, mport) == 0)
		setenv("REMOTE_GPUD_RUN_DIR", be_status_dir(), 1); /* for the session processes */
	/* MPS before anyone is accepted: sessions are its clients. */
	static char *probe_argv[8];
	int np = 0;
	probe_argv[np++] = "/proc/self/exe";
	probe_argv[np++] = "--mps-probe";
	probe_argv[np++] = "--device";
	probe_argv[np++] = (char *)device;
	if (driver) {
		probe_argv[np++] = "--driver";
		probe_argv[np++] = (char *)driver;
	}
	probe_argv[np] = NULL;
	if (be_mps_start(&M.loop, be_status_dir(), probe_argv) != 0 || be_tenants_start(&M.loop, be_status_dir()) != 0) {
		be_mps_stop(&M.loop);
		transport_listener_close(M.listener);
		be_metrics_stop();
		be_status_server_close();
		return stop_early();
	}
	if (port_file && write_port_file(port_file, port) != 0) {
		be_mps_stop(&M.loop);
		transport_listener_close(M.listener);
		be_metrics_stop();
		be_status_server_close();
		return stop_early();
	}
	/* Printed whatever REMOTE_GPU_LOG says: scripts wait for it. */
	rg_log_write(RG_LOG_INFO, BE_LOG, "listening on %s:%d, device %s: %s (%zu MiB)%s%s%s, a %s per session",
		     addr.host, port, device, be_srv.gpu[0].name, be_srv.gpu[0].total_mem >> 20,
		     be_srv.ngpu > 1 ? " and more" : "", be_srv.token ? ", token required" : "",
		     rdma_tls ? ", rdma+tls" : strcmp(addr.scheme, "tls") ? "" : ", tls", isolation);
	if (mport > 0)
		rg_log_write(RG_LOG_INFO, BE_LOG, strchr(metrics_host, ':') ? "metrics at http://[%s]:%d/metrics"
			     : "metrics at http://%s:%d/metrics", metrics_host, mport);

	uv_run(&M.loop, UV_RUN_DEFAULT);
	be_mps_stop(&M.loop); /* the sessions, its clients, are gone */
	be_tenants_stop();
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
