/*
 * options.h: remote-gpud's command line, parsed with getopt_long (rg_opt.h).
 */
#include "options.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "config.h"
#include "lib.h"
#include "listen_tls.h"
#include "rg_args.h"
#include "rg_opt.h"
#include "rg_token.h"
#include "handover.h"
#include "mps.h"
#include "prio.h"
#include "tenants.h"

#define OPT_PROG "remote-gpud"
#define TOKEN_MAX 4096

enum {
	O_LISTEN = 256, O_PORT_FILE, O_DEVICE, O_DRIVER, O_TOKEN, O_TOKEN_FILE, O_ISOLATION, O_OWN_CONTEXT,
	O_STORE, O_STORE_QUOTA, O_RUN_DIR, O_METRICS_PORT, O_METRICS_LISTEN, O_HELLO, O_IDLE, O_MAX_CONNS,
	O_MAX_PER_SOURCE, O_DRAIN, O_SESSION_FD, O_SESSION_LISTEN, O_PORT_FD, O_VERSION,
	O_CUBLAS, O_CUBLASLT, O_NCCL,       /* a forwarded library's path (lib.c) */
	O_TLS_CERT, O_TLS_KEY, O_TLS_CA, O_INSECURE, /* listen_tls.c */
	O_TENANTS, O_LEDGER_FD,            /* tenants.c */
	O_PRIORITY, O_BATCH_HOLD, O_BATCH_RUN, O_BATCH_AHEAD, /* prio.c */
	O_HANDOVER_WAIT, O_BATCH_ALLOC_WAIT,              /* handover.c */
	O_MPS_CONTROL, O_MPS_PIPE_DIR, O_BATCH_SM, O_MPS_CLIENT, O_MPS_PROBE, /* mps.c */
	O_SHM_OFFER,
	O_STRIPES,
};

/* Each option's val is its own: opt_name finds its name by it. */
static const struct option opt_long[] = {
	{"listen", required_argument, NULL, O_LISTEN},
	{"port-file", required_argument, NULL, O_PORT_FILE},
	{"device", required_argument, NULL, O_DEVICE},
	{"driver", required_argument, NULL, O_DRIVER},
	{"token", required_argument, NULL, O_TOKEN},
	{"token-file", required_argument, NULL, O_TOKEN_FILE},
	{"isolation", required_argument, NULL, O_ISOLATION},
	{"own-context", no_argument, NULL, O_OWN_CONTEXT},
	{"cubin-store", required_argument, NULL, O_STORE},
	{"store-quota", required_argument, NULL, O_STORE_QUOTA},
	{"run-dir", required_argument, NULL, O_RUN_DIR},
	{"metrics-port", required_argument, NULL, O_METRICS_PORT},
	{"metrics-listen", required_argument, NULL, O_METRICS_LISTEN},
	{"hello-timeout", required_argument, NULL, O_HELLO},
	{"idle-timeout", required_argument, NULL, O_IDLE},
	{"max-connections", required_argument, NULL, O_MAX_CONNS},
	{"max-per-source", required_argument, NULL, O_MAX_PER_SOURCE},
	{"drain-seconds", required_argument, NULL, O_DRAIN},
	{"cublas", required_argument, NULL, O_CUBLAS},
	{"cublaslt", required_argument, NULL, O_CUBLASLT},
	{"nccl", required_argument, NULL, O_NCCL},
	{"tls-cert", required_argument, NULL, O_TLS_CERT},
	{"tls-key", required_argument, NULL, O_TLS_KEY},
	{"tls-client-ca", required_argument, NULL, O_TLS_CA},
	{"insecure", no_argument, NULL, O_INSECURE},
	{"tenants", required_argument, NULL, O_TENANTS},
	{"ledger-fd", required_argument, NULL, O_LEDGER_FD},
	{"priority", required_argument, NULL, O_PRIORITY},
	{"batch-hold-ms", required_argument, NULL, O_BATCH_HOLD},
	{"batch-run-ms", required_argument, NULL, O_BATCH_RUN},
	{"batch-ahead", required_argument, NULL, O_BATCH_AHEAD},
	{"mps-control", required_argument, NULL, O_MPS_CONTROL},
	{"mps-pipe-dir", required_argument, NULL, O_MPS_PIPE_DIR},
	{"batch-sm-percent", required_argument, NULL, O_BATCH_SM},
	{"mps-client", required_argument, NULL, O_MPS_CLIENT},
	{"mps-probe", no_argument, NULL, O_MPS_PROBE},
	{"handover-wait-ms", required_argument, NULL, O_HANDOVER_WAIT},
	{"batch-alloc-wait-ms", required_argument, NULL, O_BATCH_ALLOC_WAIT},
	{"shm-offer", required_argument, NULL, O_SHM_OFFER},
	{"stripes", required_argument, NULL, O_STRIPES},
	{"session-fd", required_argument, NULL, O_SESSION_FD},
	{"session-listen", required_argument, NULL, O_SESSION_LISTEN},
	{"port-fd", required_argument, NULL, O_PORT_FD},
	{"help", no_argument, NULL, 'h'},
	{"version", no_argument, NULL, O_VERSION},
	{NULL, 0, NULL, 0},
};

static void opt_usage(FILE *f)
{
	fprintf(f,
		"usage: remote-gpud [options]\n"
		"  --listen ADDR       [tcp://|rdma://|rdma+tls://]HOST:PORT to listen on (default " BE_DEFAULT_LISTEN ";\n"
		"                      port 0: any free port), or shm:///PATH: a unix socket for clients\n"
		"                      on this host, frames through shared memory (put it in a 0700 folder)\n"
		"  --shm-offer PATH    also listen on shm://PATH and offer it in the handshake to tcp\n"
		"                      clients on this host (loopback), which then move to it by themselves\n"
		"                      unless their REMOTE_GPU entry says tcp://\n"
		"  --stripes N         tcp: a session may open up to N extra connections for large copies\n"
		"                      (default 8, at most 16; 0: none); also REMOTE_GPUD_STRIPES\n"
		"  --port-file FILE    write the bound port to FILE once listening\n"
		"  --device LIST       GPU ordinals to serve, comma-separated, or all (default 0);\n"
		"                      each client sees them as its devices 0, 1, ...\n"
		"  --driver PATH       CUDA driver library (default libcuda.so.1)\n"
		"  --cublas PATH       cuBLAS (default libcublas.so.13; also REMOTE_GPU_CUBLAS)\n"
		"  --cublaslt PATH     cuBLASLt (default libcublasLt.so.13; also REMOTE_GPU_CUBLASLT)\n"
		"  --nccl PATH         NCCL (default libnccl.so.2; also REMOTE_GPU_NCCL); NCCL_NVLS_ENABLE\n"
		"                      is 0 unless set in the environment\n"
		"  --own-context       a session process makes contexts of its own instead of running its\n"
		"                      session in the devices' primary contexts, as a local process does\n"
		"                      and libraries that call cudaSetDevice (NCCL) need; also\n"
		"                      REMOTE_GPU_OWN_CONTEXT=1 (thread isolation always has its own)\n"
		"  --token-file FILE   clients must present the token in FILE's first line (the file must\n"
		"                      not be readable by group or others); or REMOTE_GPU_TOKEN\n"
		"  --token T           the same, but visible to local users until it is scrubbed: prefer\n"
		"                      --token-file\n"
		"  --cubin-store DIR   kernel images on disk (remote-cubin extract; uploads are added)\n"
		"                      default: $TMPDIR/remote-gpud-store2-<uid>\n"
		"  --store-quota N     bytes of images each tenant may upload to the store\n"
		"                      (suffix K, M, G; default 1G; 0: no uploads)\n"
		"  --tenants FILE      tenants: each token's name, device memory quota, class and most\n"
		"                      sessions (format: docs/TENANTS.md); re-read on SIGHUP\n"
		"  --priority MODE     admit (default): with --tenants, batch tenants' work is held back\n"
		"                      while latency tenants' runs (docs/TENANTS.md); off: not;\n"
		"                      mps: session processes are clients of an MPS daemon of this\n"
		"                      server's, so tenants' kernels run side by side, batch tenants\n"
		"                      at MPS's lower client priority (a fatal GPU fault then ends\n"
		"                      every session on that GPU); mps+admit: both\n"
		"  --mps-control PATH  nvidia-cuda-mps-control to start (default: on PATH, else in\n"
		"                      /usr/local/nvidia/bin)\n"
		"  --mps-pipe-dir DIR  use the MPS daemon already running there instead\n"
		"  --batch-sm-percent N  with mps: batch tenants' sessions may use N%% of the SMs\n"
		"  --batch-hold-ms N   the longest one hold of a batch session (default %d) ...\n"
		"  --batch-run-ms N    ... after which it runs unheld for N ms (default %d)\n"
		"  --batch-ahead N     launches a batch session may have queued on the GPU while\n"
		"                      latency tenants have sessions (default %d)\n"
		"  --handover-wait-ms N  a latency tenant's allocation the device cannot serve waits\n"
		"                      up to N ms for batch tenants' clients to release cached memory,\n"
		"                      then is tried once more (default 2000; 0: no handover)\n"
		"  --batch-alloc-wait-ms N  a batch tenant's allocation the device cannot serve waits\n"
		"                      up to N ms for memory (default 0: fails at once)\n"
		"  --isolation MODE    process (default): each session in a process of its own, so a\n"
		"                      kernel fault cannot reach other clients; thread: all in one\n"
		"                      process (faster session start, no fault isolation; contexts of one\n"
		"                      process can read each other's device memory, so it serves one\n"
		"                      tenant: it takes a single token, all clients share it)\n"
		"  --hello-timeout S   a connection must authenticate within S seconds (default %d; 0: no limit)\n"
		"  --idle-timeout S    end an authenticated session with no call in flight for S seconds\n"
		"                      (default 0: never; a program may rightly pause for long)\n"
		"  --max-connections N connections (process mode: session processes) at once (default %d)\n"
		"  --max-per-source N  connections from one source address at once (default %d)\n"
		"  --drain-seconds S   on SIGTERM, stop accepting and let sessions finish for S seconds\n"
		"                      before ending them (default %d)\n"
		"  --run-dir DIR       where the status of the server and its sessions is kept for\n"
		"                      remote-smi (default $TMPDIR/remote-gpud-<port>)\n"
		"  --metrics-port N    serve Prometheus metrics at http://127.0.0.1:N/metrics\n"
		"                      (0: any free port, printed at start)\n"
		"  --metrics-listen A  the same on HOST:PORT, for a Prometheus on another host (the\n"
		"                      numbers are not secret, but nothing there authenticates)\n"
		"  --tls-cert FILE     TLS: certificate chain (PEM); clients connect with tls://\n"
		"  --tls-key FILE      TLS: its private key (PEM)\n"
		"  --tls-client-ca F   TLS: clients must present a certificate this CA signed\n"
		"  --insecure          listen off loopback without TLS (tcp) or on rdma, in clear\n"
		"  --config FILE       settings from FILE: 'name = value' lines, the names of these\n"
		"                      options (token-file, not token); the command line overrides it\n"
		"  --help, --version   (options take --opt VALUE and --opt=VALUE; usage errors exit 2)\n"
		"Given by remote-gpud to its own session processes, not for use by hand:\n"
		"  --session-fd N      serve the one connection on descriptor N, then exit\n"
		"  --session-listen A  rdma: listen on A for the one client sent here ...\n"
		"  --port-fd N         ... and write the port and cookie to descriptor N\n"
		"  --ledger-fd N       the tenants' ledger (memory in use per tenant) on descriptor N\n"
		"  --mps-client N      an MPS client, started at the hello (batch: N%% of the SMs; 0: all)\n"
		"  --mps-probe         come up as an MPS client on every device, then exit\n"
		"Logging: REMOTE_GPU_LOG=info (or debug, or \"warn,backend=debug\"), REMOTE_GPU_LOG_FILE,\n"
		"REMOTE_GPU_LOG_SYNC=1. Status of the server and its sessions: remote-smi.\n",
		BE_PRIO_DEFAULT_HOLD_MS, BE_PRIO_DEFAULT_RUN_MS, BE_PRIO_DEFAULT_AHEAD,
		BE_DEFAULT_HELLO_TIMEOUT_S, BE_DEFAULT_MAX_CONNECTIONS, BE_DEFAULT_MAX_PER_SOURCE, BE_DEFAULT_DRAIN_S);
}

/* A number option in [lo, hi], in rg_opt.h's wording: 0, or -1 after saying why. */
static int opt_uint(const char *name, const char *v, long hi, unsigned *out)
{
	long n;
	if (rg_opt_long(OPT_PROG, name, v, 0, hi, &n) != 0)
		return -1;
	*out = (unsigned)n;
	return 0;
}

/* --token-file: the first line of a file only this user can read (rg_token.h). */
static const char *opt_read_token_file(const char *path)
{
	static char tok[TOKEN_MAX + 2];
	char err[PATH_MAX + 200];
	if (rg_token_file_read(path, tok, sizeof(tok), err, sizeof(err)) != 0) {
		fprintf(stderr, OPT_PROG ": --token-file %s\n", err);
		return NULL;
	}
	return tok;
}

/* One option with its value (NULL for a flag); "--NAME" as given to the files
 * that take their own options. -1: go on; otherwise the exit status. */
static int opt_one(be_options *o, int c, const char *name, char *v)
{
	static char tok[TOKEN_MAX + 1];
	static transport_addr ma;
	char opt[64];
	unsigned u;
	int r;

	snprintf(opt, sizeof(opt), "--%s", name);
	switch (c) {
	case O_LISTEN: o->listen = v; break;
	case O_PORT_FILE: o->port_file = v; break;
	case O_DEVICE: o->device = v; break; /* checked against the driver's devices (main.c) */
	case O_DRIVER: o->driver = v; break;
	case O_TOKEN:
		/* Scrubbed from our command line (/proc/PID/cmdline reads this
		 * memory): seen only until now. */
		snprintf(tok, sizeof(tok), "%s", v);
		memset(v, 'x', strlen(v));
		o->token = tok;
		break;
	case O_TOKEN_FILE: o->token_file = v; break;
	case O_ISOLATION:
		if (strcmp(v, "process") && strcmp(v, "thread"))
			return rg_opt_error(OPT_PROG, "option '%s' takes process or thread, not '%s'", opt, v);
		o->isolation = v;
		break;
	case O_OWN_CONTEXT: setenv("REMOTE_GPU_OWN_CONTEXT", "1", 1); break; /* session processes inherit it */
	case O_STORE: o->store = v; break;
	case O_STORE_QUOTA: o->store_quota = v; break;
	case O_RUN_DIR: o->run_dir = v; break;
	case O_METRICS_PORT:
		if (opt_uint(opt, v, 65535, &u))
			return RG_EXIT_USAGE;
		o->metrics_port = (int)u;
		break;
	case O_METRICS_LISTEN:
		if (transport_parse_addr(v, &ma) != TRANSPORT_OK || strcmp(ma.scheme, "tcp"))
			return rg_opt_error(OPT_PROG, "option '%s' takes HOST:PORT, not '%s'", opt, v);
		o->metrics_host = ma.host;
		o->metrics_port = ma.port;
		break;
	case O_HELLO: return opt_uint(opt, v, 86400, &o->hello_s) ? RG_EXIT_USAGE : -1;
	case O_IDLE: return opt_uint(opt, v, 86400 * 365, &o->idle_s) ? RG_EXIT_USAGE : -1;
	case O_MAX_CONNS: return opt_uint(opt, v, 1 << 20, &o->max_conns) ? RG_EXIT_USAGE : -1;
	case O_MAX_PER_SOURCE: return opt_uint(opt, v, 1 << 20, &o->max_per_source) ? RG_EXIT_USAGE : -1;
	case O_DRAIN: return opt_uint(opt, v, 86400, &o->drain_s) ? RG_EXIT_USAGE : -1;
	case O_SESSION_FD:
		if (opt_uint(opt, v, INT_MAX, &u))
			return RG_EXIT_USAGE;
		o->session_fd = (int)u;
		break;
	case O_SESSION_LISTEN: o->session_listen = v; break;
	case O_SHM_OFFER: o->shm_offer = v; break;
	case O_STRIPES:
		if (opt_uint(opt, v, 16, &u))
			return RG_EXIT_USAGE;
		setenv("REMOTE_GPUD_STRIPES", v, 1); /* session processes inherit it */
		break;
	case O_PORT_FD:
		if (opt_uint(opt, v, INT_MAX, &u))
			return RG_EXIT_USAGE;
		o->port_fd = (int)u;
		break;
	case O_CUBLAS:
	case O_CUBLASLT:
	case O_NCCL:
		if (be_lib_option(opt, v) != 0)
			return rg_opt_error(OPT_PROG, "unknown option '%s'", opt);
		break;
	case O_TLS_CERT:
	case O_TLS_KEY:
	case O_TLS_CA:
		if (be_tls_option(opt, v) != 0)
			return rg_opt_error(OPT_PROG, "unknown option '%s'", opt);
		break;
	case O_INSECURE: be_tls_flag(opt); break;
	case O_TENANTS:
	case O_LEDGER_FD:
		if ((r = be_tenants_option(opt, v)) != 0)
			return r < 0 ? rg_opt_error(OPT_PROG, "unknown option '%s'", opt) : r;
		break;
	case O_PRIORITY:
	case O_BATCH_HOLD:
	case O_BATCH_RUN:
	case O_BATCH_AHEAD:
		if ((r = be_prio_option(opt, v)) != 0)
			return r < 0 ? rg_opt_error(OPT_PROG, "unknown option '%s'", opt) : r;
		break;
	case O_MPS_CONTROL:
	case O_MPS_PIPE_DIR:
	case O_BATCH_SM:
	case O_MPS_CLIENT:
	case O_MPS_PROBE:
		if ((r = be_mps_option(opt, v)) != 0)
			return r < 0 ? rg_opt_error(OPT_PROG, "unknown option '%s'", opt) : r;
		break;
	case O_HANDOVER_WAIT:
	case O_BATCH_ALLOC_WAIT:
		if ((r = be_handover_option(opt, v)) != 0)
			return r < 0 ? rg_opt_error(OPT_PROG, "unknown option '%s'", opt) : r;
		break;
	}
	return -1;
}

/* The name of the option getopt_long just returned c for. */
static const char *opt_name(int c)
{
	for (const struct option *p = opt_long; p->name; p++)
		if (p->val == c)
			return p->name;
	return "?";
}

int be_options_parse(int *argc, char ***argv, be_options *o)
{
	int r, c;

	*o = (be_options){
		.listen = BE_DEFAULT_LISTEN,
		.device = "0",
		.isolation = "process",
		.store_quota = "1G",
		.metrics_host = "127.0.0.1",
		.metrics_port = -1,
		.hello_s = BE_DEFAULT_HELLO_TIMEOUT_S,
		.max_conns = BE_DEFAULT_MAX_CONNECTIONS,
		.max_per_source = BE_DEFAULT_MAX_PER_SOURCE,
		.drain_s = BE_DEFAULT_DRAIN_S,
		.session_fd = -1,
		.port_fd = -1,
	};
	if (rg_args_split(argc, argv) != 0) { /* "--config=FILE" for config.c */
		fprintf(stderr, OPT_PROG ": out of memory\n");
		return 1;
	}
	if ((r = be_config_expand(argc, argv)) != 0) /* config.c: --config FILE */
		return r;
	while ((c = rg_opt_next(*argc, *argv, ":h", opt_long, OPT_PROG)) != -1) {
		if (c == '?')
			return RG_EXIT_USAGE;
		if (c == 'h') {
			opt_usage(stdout);
			return 0;
		}
		if (c == O_VERSION) {
			rg_version_print(stdout, OPT_PROG);
			return 0;
		}
		if ((r = opt_one(o, c, opt_name(c), optarg)) >= 0)
			return r;
	}
	if (optind < *argc)
		return rg_opt_error(OPT_PROG, "unexpected argument '%s'", (*argv)[optind]);
	if (o->token_file && !(o->token = opt_read_token_file(o->token_file)))
		return RG_EXIT_USAGE;
	if (be_quota_parse(o->store_quota, &be_srv.store_quota) != 0)
		return rg_opt_error(OPT_PROG, "option '--store-quota' takes a size (bytes, or with K, M, G), not '%s'",
				    o->store_quota);
	return -1;
}
