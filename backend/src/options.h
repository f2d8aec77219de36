/*
 * remote-gpud's command line: getopt_long through rg_opt.h (one wording for
 * usage errors, exit status 2), after --config FILE (config.c) put the file's
 * settings in front of it, so the command line overrides them. Options that
 * belong to another file go there as they come: the libraries' paths
 * (lib.c), TLS (listen_tls.c), --tenants and --ledger-fd (tenants.c).
 */
#ifndef BE_OPTIONS_H
#define BE_OPTIONS_H

#define BE_DEFAULT_LISTEN "127.0.0.1:7420"
#define BE_DEFAULT_HELLO_TIMEOUT_S 10
#define BE_DEFAULT_MAX_CONNECTIONS 256
#define BE_DEFAULT_MAX_PER_SOURCE 64
#define BE_DEFAULT_DRAIN_S 30

typedef struct be_options {
	const char *listen, *port_file, *driver, *device, *isolation;
	const char *token;      /* --token, --token-file's first line, or NULL */
	const char *token_file; /* given: --token-file */
	const char *store, *store_quota, *run_dir;
	const char *shm_offer; /* --shm-offer: also listen on shm://PATH, offered to loopback tcp clients */
	const char *metrics_host; /* --metrics-listen's host, or 127.0.0.1 */
	int metrics_port;         /* -1: no metrics */
	unsigned hello_s, idle_s, max_conns, max_per_source, drain_s;
	/* given by the supervisor to its session processes (isolate.c) */
	int session_fd;             /* >= 0: serve this one connection */
	const char *session_listen; /* rdma: listen here for the one client ... */
	int port_fd;                /* ... and write the port there */
} be_options;

/* Fills *o from the command line (defaults for what it leaves out). -1: go on
 * and serve; otherwise exit with that status (0 after --help or --version; 2,
 * RG_EXIT_USAGE, after a usage error, said in rg_opt.h's wording; 1 when out
 * of memory). May rewrite argc/argv (--opt=VALUE, --config). */
int be_options_parse(int *argc, char ***argv, be_options *o);

#endif
