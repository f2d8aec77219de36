/*
 * remote-gpu doctor: the checks a failing setup needs, each said in plain
 * words, in the order a program meets them:
 *
 *   1. libremote.so and its driver folder are found;
 *   2. a server list is given, the token file and the CA can be read;
 *   3. each server: connects (TCP, then TLS), takes the token, speaks our
 *      protocol version (probe.c);
 *   4. the preload takes effect and libremote.so reaches the servers: a child
 *      started with run's environment (remote-gpu __preload-check) checks that
 *      cudaGetDeviceCount is libremote.so's and asks it;
 *   5. with a COMMAND: whether the preload can reach that program at all
 *      (static, set-user-ID, static CUDA runtime: elfcheck.c).
 *
 * Exit status 0 when nothing is wrong, 1 when something is.
 */
#include "launcher.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int problems;

static void say_ok(const char *fmt, const char *a) { printf("ok       "), printf(fmt, a), putchar('\n'); }

static void say_problem(const char *what, const char *why)
{
	printf("PROBLEM  %s: %s\n", what, why);
	problems++;
}

/* Exit statuses of __preload-check. */
enum { PC_OK = 0, PC_NOT_PRELOADED = 3, PC_NO_DEVICE = 4 };

int ln_preload_check(void)
{
	typedef int (*count_fn)(int *);
	count_fn f = (count_fn)dlsym(RTLD_DEFAULT, "cudaGetDeviceCount");
	Dl_info di;
	const char *want = getenv("REMOTE_GPU_DOCTOR_LIB");
	if (!f || !dladdr((void *)f, &di) || !di.dli_fname || !want || strcmp(di.dli_fname, want) != 0) {
		printf("cudaGetDeviceCount is %s\n", f && dladdr((void *)f, &di) && di.dli_fname ? di.dli_fname : "not defined");
		return PC_NOT_PRELOADED;
	}
	int n = 0, e = f(&n);
	printf("%d\n", e == 0 ? n : -e);
	return e == 0 && n > 0 ? PC_OK : PC_NO_DEVICE;
}

/* Runs this program as __preload-check with run's environment. */
static void doctor_preload(const ln_paths *p)
{
	int fds[2];
	char self[PATH_MAX], out[512] = "";
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0 || pipe(fds) != 0) {
		say_problem("preload", "cannot start a child process to check it");
		return;
	}
	self[n] = 0;
	setenv("REMOTE_GPU_DOCTOR_LIB", p->lib, 1);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		execl(self, self, "__preload-check", (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	size_t got = 0;
	while (pid > 0 && got < sizeof(out) - 1 && (n = read(fds[0], out + got, sizeof(out) - 1 - got)) > 0)
		got += (size_t)n;
	out[got] = 0;
	out[strcspn(out, "\n")] = 0;
	close(fds[0]);
	int st = 0;
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) {
		say_problem("preload", "the check's child process did not finish (see its messages above)");
		return;
	}
	char msg[700];
	switch (WEXITSTATUS(st)) {
	case PC_OK:
		snprintf(msg, sizeof(msg), "preload in effect: through libremote.so a program sees %s device(s)", out);
		say_ok("%s", msg);
		break;
	case PC_NOT_PRELOADED:
		snprintf(msg, sizeof(msg),
			 "LD_PRELOAD=%s did not take effect (%s): is the library built for this machine, "
			 "and is the dynamic linker allowed to preload (not in secure mode)?",
			 p->lib, out);
		say_problem("preload", msg);
		break;
	default:
		snprintf(msg, sizeof(msg), "libremote.so is preloaded but finds no device (cudaGetDeviceCount: %s); "
					   "its own message is above",
			 out[0] == '-' ? out + 1 : out);
		say_problem("preload", msg);
	}
}

static void doctor_program(const char *cmd)
{
	ln_elf e;
	char msg[PATH_MAX + 400];
	ln_elf_check(cmd, &e);
	for (int depth = 0; e.kind == LN_ELF_NOT_ELF && e.interp[0] && depth < 2; depth++) {
		printf("note     %s is a script run by %s: checking that\n", e.path, e.interp);
		char interp[PATH_MAX];
		snprintf(interp, sizeof(interp), "%s", e.interp);
		ln_elf_check(interp, &e);
	}
	const char *p = e.path;
	switch (e.kind) {
	case LN_ELF_NOT_FOUND:
		snprintf(msg, sizeof(msg), "%s not found (not a file, nor on PATH)", cmd);
		say_problem("program", msg);
		break;
	case LN_ELF_SETID:
		snprintf(msg, sizeof(msg), "%s is set-user-ID or set-group-ID: the dynamic linker ignores LD_PRELOAD "
					   "and LD_LIBRARY_PATH for it, so it cannot use remote GPUs; run a copy "
					   "without the bit",
			 p);
		say_problem("program", msg);
		break;
	case LN_ELF_STATIC:
		snprintf(msg, sizeof(msg), "%s is a static executable: no dynamic linker starts it, so nothing can be "
					   "preloaded into it; it needs to be linked dynamically",
			 p);
		say_problem("program", msg);
		break;
	case LN_ELF_CUDART_SHARED:
		say_ok("%s links the CUDA runtime dynamically: the preload answers its calls", p);
		break;
	case LN_ELF_CUDA_DRIVER:
		say_ok("%s links the CUDA driver (libcuda.so): remote-gpu run's LD_LIBRARY_PATH gives it libremote.so", p);
		break;
	case LN_ELF_CUDART_STATIC:
		printf("note     %s links the CUDA runtime statically (nvcc's default): the preload does not replace "
		       "its runtime calls, but that runtime opens libcuda.so.1, which libremote.so answers, so it "
		       "runs over the driver API path\n",
		       p);
		break;
	case LN_ELF_NOT_ELF:
		printf("note     %s is not an ELF program: nothing to check\n", p);
		break;
	default:
		printf("note     %s links no CUDA library: fine if it loads one later (python with torch, "
		       "CuPy, JAX): those are covered by the preload and the driver folder\n",
		       p);
	}
}

int ln_doctor(const ln_opts *o)
{
	ln_paths p;
	char why[PATH_MAX * 3];
	problems = 0;
	if (ln_locate(&p, why, sizeof(why)) != 0) {
		say_problem("libremote.so not found", why);
	} else {
		char msg[PATH_MAX + 64];
		snprintf(msg, sizeof(msg), "libremote.so: %s (%s)", p.lib, p.how);
		say_ok("%s", msg);
		if (!p.driver[0])
			say_problem("driver folder", "no driver/ or remote-gpu/driver/ beside libremote.so: programs "
						     "linked with -lcuda and Triton will not find the driver");
		else
			say_ok("driver folder: %s", p.driver);
	}
	const char *servers = ln_servers(o);
	int reachable = 1;
	if (!servers) {
		say_problem("servers", "none given: use --server HOST:PORT or set REMOTE_GPU");
		reachable = 0;
	} else if (ln_env_secrets(o) != 0) {
		problems++;
		reachable = 0;
	} else {
		char *list = strdup(servers), *save = NULL;
		int n = 0;
		for (char *e = strtok_r(list, ",", &save); e; e = strtok_r(NULL, ",", &save), n++) {
			ln_probe pr;
			ln_probe_run(e, ln_timeout_ms(), &pr);
			char msg[1024];
			if (pr.state == LN_OK) {
				snprintf(msg, sizeof(msg), "server %s: remote-gpud %s, %d device(s) (%s), round trip %.1f us",
					 e, pr.version[0] ? pr.version : "(older than 0.1.0)", pr.ndev,
					 pr.ndev ? pr.dev[0].name : "", pr.rtt_median_us);
				say_ok("%s", msg);
			} else if (pr.state == LN_NOT_PROBED) {
				printf("note     server %s: %s\n", e, ln_probe_explain(&pr));
			} else {
				snprintf(msg, sizeof(msg), "%s%s%s%s", ln_probe_explain(&pr), pr.detail[0] ? " (" : "",
					 pr.detail, pr.detail[0] ? ")" : "");
				char what[400];
				snprintf(what, sizeof(what), "server %s", e);
				say_problem(what, msg);
				reachable = 0;
			}
		}
		free(list);
	}
	/* With every server answering, the preload check shows the whole path. */
	if (reachable && p.lib[0] && ln_env_setup(o, &p) == 0)
		doctor_preload(&p);
	if (o->argc > 0)
		doctor_program(o->argv[0]);
	printf(problems ? "%d problem%s found\n" : "no problems found\n", problems, problems == 1 ? "" : "s");
	return problems ? 1 : 0;
}
