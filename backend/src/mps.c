/*
 * CUDA MPS for the session processes of different tenants (--priority mps,
 * mps+admit; docs/TENANTS.md "Latency first").
 *
 * Without MPS the GPU time-slices between the contexts of different
 * processes: a training tenant with a deep queue takes whole slices from an
 * inference tenant, whatever admission does on the server (prio.c). Under
 * MPS the kernels of all client processes run side by side, each client
 * keeps its own GPU address space (Volta and later: tenants still cannot
 * read each other's memory), and each client can be given a priority
 * (CUDA_MPS_CLIENT_PRIORITY: 0 normal, 1 below normal) and a share of the
 * SMs (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE). The price: a fatal GPU fault of
 * one client ends the work of every client on that GPU (NVIDIA's MPS guide,
 * "Error Containment"), where a process of its own per session kept it to
 * the faulting session. So it is chosen, not the default.
 *
 * The supervisor:
 *   - finds nvidia-cuda-mps-control (--mps-control PATH, else PATH, else
 *     /usr/local/nvidia/bin) and starts it in the foreground (-f) as its own
 *     child, in a session of its own (a terminal's ^C is not for it), with
 *     CUDA_MPS_PIPE_DIRECTORY and CUDA_MPS_LOG_DIRECTORY in RUN_DIR/mps: a
 *     daemon no other server shares. A child, so its death is seen at once:
 *     logged, shown in remote-smi and /metrics (mps "dead"), and the
 *     session processes that start after it refuse their clients (below).
 *     Or, with --mps-pipe-dir DIR, uses an operator's daemon there.
 *   - does its own cuInit with the pipe directory pointed at an empty folder
 *     of its own: it makes no context, and as an MPS client it would never
 *     end, which the daemon's `quit` and the MPS server's recovery after a
 *     fault (it waits for every client of the GPU to exit) would wait for.
 *   - before it accepts anyone, runs `remote-gpud --mps-probe` under the
 *     daemon: a process that must find every device reached through MPS
 *     (CU_DEVICE_ATTRIBUTE_MPS_ENABLED) and get a context on it. The driver
 *     runs a program without MPS when it cannot reach the daemon, silently;
 *     the server never does: no daemon, a daemon that does not come up, a GPU
 *     whose compute mode refuses MPS: the server does not start, and says
 *     which.
 *   - at exit, once the sessions are gone, sends `quit` through the control
 *     program and waits for the daemon (then SIGKILL, logged).
 *
 * A session process (--mps-client N) does not start CUDA until its client's
 * hello has named the tenant: the MPS client settings are read from the
 * environment when CUDA starts, and a process is spawned before anyone has
 * authenticated. At the hello it sets CUDA_MPS_CLIENT_PRIORITY (latency and
 * tenants without a class 0, batch 1) and, for batch tenants with
 * --batch-sm-percent N, CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=N, then initialises
 * the devices, and refuses the session unless every device is reached
 * through MPS.
 */
#include "backend.h"
#include "mps.h"
#include "prio.h"
#include "tenants.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define MPS_CONTROL "nvidia-cuda-mps-control"
#define MPS_FALLBACK_DIR "/usr/local/nvidia/bin"
#define MPS_READY_MS 10000 /* the daemon answers its control program within */
#define MPS_PROBE_MS 120000 /* an MPS server's start and a context on each device (a large GPU: seconds) */
#define MPS_QUIT_MS 10000
#define MPS_CTL_MS 5000

static void on_daemon_exit(uv_process_t *p, int64_t status, int signal);

static struct {
	const char *control_opt; /* --mps-control */
	const char *pipe_opt;    /* --mps-pipe-dir: an operator's daemon */
	unsigned sm_percent;     /* --batch-sm-percent: 0 none */
	int client;              /* --mps-client given: a session process under MPS */
	int probing;             /* --mps-probe */
	char control[4096];      /* the control program found */
	char pipe[4096], log[4096], none[4096];
	char smbuf[8];
	uv_process_t daemon;
	int running, stopping, quit_late;
	int (*init)(const char *);
	const char *device;
	int inited;
} X;

static int opt_percent(const char *opt, const char *v, unsigned *out)
{
	char *end;
	errno = 0;
	unsigned long n = strtoul(v, &end, 10);
	if (errno || end == v || *end || *v == '-' || n < 1 || n > 100) {
		fprintf(stderr, "remote-gpud: %s %s: expected a percentage from 1 to 100\n", opt, v);
		return 2;
	}
	*out = (unsigned)n;
	return 0;
}

int be_mps_option(const char *opt, const char *v)
{
	if (!strcmp(opt, "--mps-control"))
		X.control_opt = v;
	else if (!strcmp(opt, "--mps-pipe-dir"))
		X.pipe_opt = v;
	else if (!strcmp(opt, "--batch-sm-percent"))
		return opt_percent(opt, v, &X.sm_percent);
	else if (!strcmp(opt, "--mps-client")) {
		X.client = 1;
		if (strcmp(v, "0") != 0)
			return opt_percent(opt, v, &X.sm_percent);
	} else if (!strcmp(opt, "--mps-probe"))
		X.probing = 1;
	else
		return -1;
	return 0;
}

int be_mps_probing(void) { return X.probing; }
int be_mps_client(void) { return X.client; }

/* An executable file: 1. */
static int runnable(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* The control program: --mps-control, else the first on PATH, else the
 * folder NVIDIA's container toolkit puts the driver's programs in. */
static int find_control(void)
{
	if (X.control_opt) {
		if (!runnable(X.control_opt)) {
			fprintf(stderr, "remote-gpud: --mps-control %s: %s\n", X.control_opt,
				access(X.control_opt, F_OK) ? "no such file" : "not an executable file");
			return -1;
		}
		snprintf(X.control, sizeof(X.control), "%s", X.control_opt);
		return 0;
	}
	const char *path = getenv("PATH");
	for (const char *p = path && *path ? path : NULL; p;) {
		const char *c = strchr(p, ':');
		size_t n = c ? (size_t)(c - p) : strlen(p);
		if (n && snprintf(X.control, sizeof(X.control), "%.*s/" MPS_CONTROL, (int)n, p) < (int)sizeof(X.control) &&
		    runnable(X.control))
			return 0;
		p = c ? c + 1 : NULL;
	}
	snprintf(X.control, sizeof(X.control), MPS_FALLBACK_DIR "/" MPS_CONTROL);
	if (runnable(X.control))
		return 0;
	fprintf(stderr, "remote-gpud: --priority mps: " MPS_CONTROL " is neither on PATH nor in " MPS_FALLBACK_DIR
		" (the NVIDIA driver's utilities; or give it with --mps-control PATH)\n");
	return -1;
}

int be_mps_setup(int session_process, int thread_mode)
{
	if (session_process || X.probing)
		return 0;
	if (!be_prio_mps()) {
		const char *o = X.control_opt ? "--mps-control" : X.pipe_opt ? "--mps-pipe-dir"
			      : X.sm_percent ? "--batch-sm-percent" : NULL;
		if (o) {
			fprintf(stderr, "remote-gpud: %s goes with --priority mps or mps+admit\n", o);
			return 2;
		}
		return 0;
	}
	if (thread_mode) {
		fprintf(stderr, "remote-gpud: --priority mps makes each session process an MPS client; "
			"--isolation thread has one process: use --isolation process\n");
		return 2;
	}
	if (X.pipe_opt && X.control_opt) {
		fprintf(stderr, "remote-gpud: --mps-pipe-dir uses a running daemon; --mps-control starts one: "
			"give one of them\n");
		return 2;
	}
	if (!X.pipe_opt && find_control() != 0)
		return 1;
	return 0;
}

/* ---- the supervisor ---- */

void be_mps_init_begin(void)
{
	if (!be_prio_mps() || X.client || X.probing)
		return;
	const char *tmp = getenv("TMPDIR");
	snprintf(X.none, sizeof(X.none), "%s/remote-gpud-nomps.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(X.none))
		snprintf(X.none, sizeof(X.none), "/proc/self/remote-gpud-no-mps"); /* where no one can make a socket */
	setenv("CUDA_MPS_PIPE_DIRECTORY", X.none, 1);
}

void be_mps_init_end(void)
{
	if (!X.none[0])
		return;
	rmdir(X.none);
	unsetenv("CUDA_MPS_PIPE_DIRECTORY");
}

/* mkdir -m 0700, or an existing folder of ours. */
static int own_dir(const char *dir)
{
	struct stat st;
	if (mkdir(dir, 0700) != 0 && errno != EEXIST)
		return -1;
	if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
		errno = EPERM;
		return -1;
	}
	return 0;
}

/* Runs argv with the environment, stdin from in (NULL: /dev/null), stdout and
 * stderr into out (cap bytes, NUL-terminated; NULL: ours), for at most ms.
 * Its exit status, 128 + a signal, or -1 (could not start; timed out:
 * killed). */
static int run_wait(char *const *argv, const char *in, char *out, size_t cap, int ms)
{
	int ip[2] = {-1, -1}, op[2] = {-1, -1};
	posix_spawn_file_actions_t fa;
	pid_t pid;
	if (pipe2(ip, O_CLOEXEC) != 0)
		return -1;
	if (out && pipe2(op, O_CLOEXEC) != 0) {
		close(ip[0]);
		close(ip[1]);
		return -1;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, ip[0], 0);
	if (out) {
		posix_spawn_file_actions_adddup2(&fa, op[1], 1);
		posix_spawn_file_actions_adddup2(&fa, op[1], 2);
	}
	int r = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(ip[0]);
	if (out)
		close(op[1]);
	if (r != 0) {
		close(ip[1]);
		if (out) {
			close(op[0]);
			snprintf(out, cap, "%s", strerror(r));
		}
		return -1;
	}
	if (in && write(ip[1], in, strlen(in)) < 0)
		LOG_DEBUG(BE_LOG, "%s: stdin: %s", argv[0], strerror(errno));
	close(ip[1]);
	size_t n = 0;
	uint64_t end = rg_clock_ns() + (uint64_t)ms * 1000000u;
	int status = 0, done = 0;
	while (!done) {
		uint64_t now = rg_clock_ns();
		if (now >= end)
			break;
		if (out && op[0] >= 0) {
			struct pollfd p = {.fd = op[0], .events = POLLIN};
			if (poll(&p, 1, 20) > 0) {
				char scratch[256];
				char *dst = n + 1 < cap ? out + n : scratch;
				size_t room = n + 1 < cap ? cap - 1 - n : sizeof(scratch);
				ssize_t k = read(op[0], dst, room);
				if (k > 0 && dst != scratch)
					n += (size_t)k;
				if (k == 0) {
					close(op[0]);
					op[0] = -1;
				}
			}
		} else {
			struct timespec ts = {0, 20 * 1000000};
			nanosleep(&ts, NULL);
		}
		done = waitpid(pid, &status, WNOHANG) == pid;
	}
	if (!done) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
	}
	if (out) {
		if (op[0] >= 0)
			close(op[0]);
		out[n] = 0;
		while (n && (out[n - 1] == '\n' || out[n - 1] == ' '))
			out[--n] = 0;
	}
	if (!done)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* One command to the daemon through its control program (the interface
 * NVIDIA documents: commands on its standard input). */
static int control_cmd(const char *cmd, char *out, size_t cap, int ms)
{
	char line[128];
	char *argv[] = {X.control, NULL};
	snprintf(line, sizeof(line), "%s\n", cmd);
	return run_wait(argv, line, out, cap, ms);
}

static void on_daemon_closed(uv_handle_t *h) {}

static void on_daemon_exit(uv_process_t *p, int64_t status, int sig)
{
	X.running = 0;
	if (X.stopping)
		LOG_INFO(BE_LOG, "MPS control daemon %d ended (%s %lld)", p->pid, sig ? "signal" : "status",
			 (long long)(sig ? sig : status));
	else {
		LOG_ERROR(BE_LOG, "MPS control daemon %d %s %lld: sessions that start now cannot be MPS clients and "
			  "are refused; live ones may fail; restart remote-gpud (its log: %s)", p->pid,
			  sig ? "killed by signal" : "exited with", (long long)(sig ? sig : status), X.log);
		be_status_set_mps(BE_STAT_MPS_DEAD);
	}
	uv_close((uv_handle_t *)p, on_daemon_closed);
}

/* Our daemon has exited (a zombie until the loop reaps it) or is no more. */
static int daemon_gone(void)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", X.daemon.pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 1;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	const char *e = strrchr(buf, ')');
	return !e || e[1] != ' ' || e[2] == 'Z' || e[2] == 'X';
}

/* The last line of the daemon's own output (RUN_DIR/mps/log/control.out). */
static void daemon_said(char *buf, size_t cap)
{
	char path[4200];
	buf[0] = 0;
	snprintf(path, sizeof(path), "%s/control.out", X.log);
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	char line[512];
	while (fgets(line, sizeof(line), f))
		if (line[0] != '\n')
			snprintf(buf, cap, "%s", line);
	fclose(f);
	buf[strcspn(buf, "\n")] = 0;
}

static int daemon_start(uv_loop_t *loop)
{
	char path[4200];
	snprintf(path, sizeof(path), "%s/control.out", X.log);
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0) {
		fprintf(stderr, "remote-gpud: %s: %s\n", path, strerror(errno));
		return -1;
	}
	char *args[] = {X.control, "-f", NULL};
	uv_stdio_container_t stdio[3] = {
		{.flags = UV_IGNORE},
		{.flags = UV_INHERIT_FD, .data.fd = fd},
		{.flags = UV_INHERIT_FD, .data.fd = fd},
	};
	uv_process_options_t o = {
		.exit_cb = on_daemon_exit,
		.file = X.control,
		.args = args,
		.stdio_count = 3,
		.stdio = stdio,
		.flags = UV_PROCESS_DETACHED, /* a session of its own: ^C at our terminal is not for it */
	};
	int r = uv_spawn(loop, &X.daemon, &o);
	close(fd);
	if (r < 0) {
		fprintf(stderr, "remote-gpud: %s -f: %s\n", X.control, uv_strerror(r));
		uv_close((uv_handle_t *)&X.daemon, on_daemon_closed);
		return -1;
	}
	X.running = 1;
	char out[512] = "";
	uint64_t end = rg_clock_ns() + (uint64_t)MPS_READY_MS * 1000000u;
	for (;;) {
		/* Not the loop's exit callback: running the loop now would accept
		 * clients on the listener before MPS is ready. */
		if (daemon_gone()) {
			daemon_said(out, sizeof(out));
			fprintf(stderr, "remote-gpud: --priority mps: %s -f exited at once%s%s (its log: %s)\n", X.control,
				out[0] ? ": " : "", out, X.log);
			return -1;
		}
		/* Its pid file (NVIDIA documents it in the pipe directory), and an
		 * answer to its control program. */
		char pidf[4200];
		snprintf(pidf, sizeof(pidf), "%s/nvidia-cuda-mps-control.pid", X.pipe);
		if (access(pidf, F_OK) == 0 && control_cmd("get_server_list", out, sizeof(out), MPS_CTL_MS) == 0)
			break;
		if (rg_clock_ns() >= end) {
			fprintf(stderr, "remote-gpud: --priority mps: the MPS control daemon (pid %d) did not answer "
				"within %d ms: %s (its log: %s)\n", X.daemon.pid, MPS_READY_MS, out, X.log);
			be_mps_stop(loop);
			return -1;
		}
		struct timespec ts = {0, 50 * 1000000};
		nanosleep(&ts, NULL);
	}
	uv_unref((uv_handle_t *)&X.daemon); /* the loop ends with the sessions; be_mps_stop quits it */
	LOG_INFO(BE_LOG, "MPS control daemon %d (%s -f), pipe directory %s, log %s", X.daemon.pid, X.control, X.pipe,
		 X.log);
	return 0;
}

int be_mps_start(uv_loop_t *loop, const char *run_dir, char *const *probe_argv)
{
	if (!be_prio_mps())
		return 0;
	if (X.pipe_opt) {
		struct stat st;
		if (stat(X.pipe_opt, &st) != 0 || !S_ISDIR(st.st_mode)) {
			fprintf(stderr, "remote-gpud: --mps-pipe-dir %s: not a folder\n", X.pipe_opt);
			return -1;
		}
		snprintf(X.pipe, sizeof(X.pipe), "%s", X.pipe_opt);
		snprintf(X.log, sizeof(X.log), "%s", getenv("CUDA_MPS_LOG_DIRECTORY") ? getenv("CUDA_MPS_LOG_DIRECTORY")
										  : "the operator's");
		setenv("CUDA_MPS_PIPE_DIRECTORY", X.pipe, 1);
	} else {
		char base[4096];
		if (!run_dir || !*run_dir) {
			fprintf(stderr, "remote-gpud: --priority mps keeps its daemon's folders in the run directory, and "
				"there is none (--run-dir)\n");
			return -1;
		}
		snprintf(base, sizeof(base), "%s/mps", run_dir);
		snprintf(X.pipe, sizeof(X.pipe), "%s/pipe", base);
		snprintf(X.log, sizeof(X.log), "%s/log", base);
		if (own_dir(base) || own_dir(X.pipe) || own_dir(X.log)) {
			fprintf(stderr, "remote-gpud: --priority mps: %s: %s\n", base, strerror(errno));
			return -1;
		}
		setenv("CUDA_MPS_PIPE_DIRECTORY", X.pipe, 1);
		setenv("CUDA_MPS_LOG_DIRECTORY", X.log, 1);
		if (daemon_start(loop) != 0)
			return -1;
	}
	/* The probe: a process of ours must come up as an MPS client. */
	char out[2048];
	int r = run_wait(probe_argv, NULL, out, sizeof(out), MPS_PROBE_MS);
	if (r != 0) {
		fprintf(stderr, "remote-gpud: --priority mps: MPS is not in force for this server's devices%s%s "
			"(pipe directory %s, MPS logs in %s; the GPU's compute mode must be Default or Exclusive_Process)\n",
			out[0] ? ": " : "", out, X.pipe, X.log);
		be_mps_stop(loop);
		return -1;
	}
	be_status_set_mps(X.pipe_opt ? BE_STAT_MPS_EXTERNAL : BE_STAT_MPS_UP);
	if (X.sm_percent)
		LOG_INFO(BE_LOG, "MPS: session processes are its clients (priority latency 0, batch 1; batch %u%% of the "
			 "SMs)", X.sm_percent);
	else
		LOG_INFO(BE_LOG, "MPS: session processes are its clients (priority latency 0, batch 1)");
	return 0;
}

int be_mps_child_args(char **argv, int n)
{
	if (!be_prio_mps())
		return n;
	snprintf(X.smbuf, sizeof(X.smbuf), "%u", X.sm_percent);
	argv[n++] = "--mps-client";
	argv[n++] = X.smbuf;
	return n;
}

static void on_quit_late(uv_timer_t *t) { X.quit_late = 1; }

void be_mps_stop(uv_loop_t *loop)
{
	if (!X.running)
		return;
	X.stopping = 1;
	uv_ref((uv_handle_t *)&X.daemon); /* the loop waits for its exit now */
	char out[512];
	int r = control_cmd("quit", out, sizeof(out), MPS_QUIT_MS);
	if (r != 0)
		LOG_WARN(BE_LOG, "MPS: quit: %s %d%s%s", r < 0 ? "no answer within ms" : "exit status", r < 0 ? MPS_QUIT_MS : r,
			 out[0] ? ": " : "", out);
	uv_timer_t t;
	uv_timer_init(loop, &t);
	uv_timer_start(&t, on_quit_late, MPS_QUIT_MS, 0);
	while (X.running && !X.quit_late)
		uv_run(loop, UV_RUN_ONCE);
	if (X.running) {
		LOG_WARN(BE_LOG, "MPS control daemon %d still running %d ms after quit: killed", X.daemon.pid, MPS_QUIT_MS);
		uv_process_kill(&X.daemon, SIGKILL);
		while (X.running)
			uv_run(loop, UV_RUN_ONCE);
	}
	uv_close((uv_handle_t *)&t, NULL);
	uv_run(loop, UV_RUN_NOWAIT); /* the handles' close */
	rmdir(X.pipe); /* empty once the daemon has gone; its logs stay */
}

/* ---- session processes and the probe ---- */

void be_mps_defer(int (*init)(const char *device), const char *device)
{
	X.init = init;
	X.device = device;
}

/* Every served device reached through MPS. */
static int all_mps(void)
{
	for (int i = 0; i < be_srv.ngpu; i++)
		if (be_srv.gpu[i].attrs[CU_DEVICE_ATTRIBUTE_MPS_ENABLED] != 1)
			return 0;
	return be_srv.ngpu > 0;
}

int be_mps_session_start(unsigned klass)
{
	if (!X.client)
		return CUDA_SUCCESS;
	if (X.inited)
		return X.inited > 0 ? CUDA_SUCCESS : CUDA_ERROR_MPS_CONNECTION_FAILED;
	setenv("CUDA_MPS_CLIENT_PRIORITY", klass == BE_TENANT_BATCH ? "1" : "0", 1);
	if (klass == BE_TENANT_BATCH && X.sm_percent) {
		snprintf(X.smbuf, sizeof(X.smbuf), "%u", X.sm_percent);
		setenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", X.smbuf, 1);
	}
	X.inited = -1;
	if (!X.init || X.init(X.device) != 0) {
		LOG_ERROR(BE_LOG, "MPS client: the devices did not start (above): session refused");
		return CUDA_ERROR_MPS_CONNECTION_FAILED;
	}
	if (!all_mps()) {
		const char *d = getenv("CUDA_MPS_PIPE_DIRECTORY");
		LOG_ERROR(BE_LOG, "MPS client: the driver runs this process without MPS (no daemon answers in %s: did it "
			  "die?): session refused, never served outside MPS", d ? d : "?");
		return CUDA_ERROR_MPS_CONNECTION_FAILED;
	}
	X.inited = 1;
	LOG_INFO(BE_LOG, "MPS client: priority %s%s%s", klass == BE_TENANT_BATCH ? "1 (batch)" : "0",
		 klass == BE_TENANT_BATCH && X.sm_percent ? ", SM share " : "",
		 klass == BE_TENANT_BATCH && X.sm_percent ? X.smbuf : "");
	return CUDA_SUCCESS;
}

int be_mps_probe(void)
{
	if (!all_mps()) {
		fprintf(stderr, "the driver runs a client without MPS: no daemon answers in %s\n",
			getenv("CUDA_MPS_PIPE_DIRECTORY") ? getenv("CUDA_MPS_PIPE_DIRECTORY") : "/tmp/nvidia-mps");
		return 1;
	}
	for (int i = 0; i < be_srv.ngpu; i++) {
		CUcontext c;
		CUresult r = be_drv.cuDevicePrimaryCtxRetain(&c, be_srv.gpu[i].dev);
		if (r != CUDA_SUCCESS) {
			fprintf(stderr, "no MPS client context on device %d: %s\n", be_srv.gpu[i].ordinal, be_errname(r));
			return 1;
		}
		be_drv.cuDevicePrimaryCtxRelease(be_srv.gpu[i].dev);
	}
	return 0;
}
