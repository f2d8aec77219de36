/*
 * remote-gpu: the launcher. Runs a program with libremote.so preloaded and the
 * environment it needs (run.c), lists the devices a client would see (info.c),
 * and says why a setup does not work (doctor.c). Shared here: the options all
 * three take (main.c), where libremote.so is (locate.c), a probe that speaks
 * the protocol to one server (probe.c) and what a program's ELF file says about
 * how it reaches CUDA (elfcheck.c).
 */
#ifndef RG_LAUNCHER_H
#define RG_LAUNCHER_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#define LN_PROG "remote-gpu"
#define LN_MAX_DEV 16 /* devices of one server that the probe lists */

/* The options every subcommand takes. servers: the comma-joined --server
 * values, NULL when none was given (REMOTE_GPU of the environment then). */
typedef struct ln_opts {
	char *servers;
	const char *token_file;
	const char *tls_ca;
	int argc; /* what follows the options (run: the command) */
	char **argv;
} ln_opts;

/* ---- locate.c ---- */
typedef struct ln_paths {
	char lib[PATH_MAX];    /* libremote.so */
	char driver[PATH_MAX]; /* the folder presenting it as libcuda.so.1 etc.; "" if none */
	const char *how;       /* "REMOTE_GPU_LIB", "install tree", "build tree" */
} ln_paths;
/* 0, or -1 with what was tried in why (cap bytes). */
int ln_locate(ln_paths *p, char *why, size_t cap);

/* ---- run.c ---- */
/* Sets the environment of a client (preload, servers, driver folder, token,
 * CA) in this process. 0, or an exit status after printing why. */
int ln_env_setup(const ln_opts *o, const ln_paths *p);
/* Only the token (REMOTE_GPU_TOKEN) and the CA (REMOTE_GPU_TLS_CA). */
int ln_env_secrets(const ln_opts *o);
/* The servers (*servers) and the secrets; 0, or an exit status after saying
 * what is missing. */
int ln_env_client(const ln_opts *o, const char **servers);
/* Reads the first line of a token file that only its owner may read.
 * 0, or -1 after printing why. */
int ln_token_read(const char *file, char *out, size_t cap);
int ln_run(const ln_opts *o);

/* ---- probe.c ---- */
enum ln_probe_state {
	LN_OK,
	LN_BAD_ADDR,    /* not [scheme://]host:port */
	LN_UNREACHABLE, /* no TCP connection */
	LN_TRANSPORT,   /* TCP connects, the transport (TLS, rdma) does not */
	LN_NEEDS_TLS,   /* the server takes only tls:// */
	LN_TOKEN,       /* the token was refused */
	LN_BUSY,        /* the tenant has its maximum of sessions */
	LN_VERSION,     /* another protocol version */
	LN_FAILED,      /* any other handshake failure */
	LN_NOT_PROBED,  /* a scheme the probe does not speak (rdma+tls) */
};
typedef struct ln_probe {
	char entry[300];
	int state;
	int err;            /* the transport or status code behind state */
	char detail[160];   /* connect error text, ... */
	uint32_t proto;     /* the server's protocol version */
	char version[96];   /* the server's software version, "" if it did not say */
	int driver_version;
	int ndev;           /* the devices it serves, in the order the client numbers them */
	struct ln_probe_dev {
		uint32_t ordinal;   /* on the server */
		char name[256];
		uint64_t total_mem; /* bytes */
	} dev[LN_MAX_DEV];
	double rtt_min_us, rtt_median_us; /* of LN_PINGS null calls */
} ln_probe;
#define LN_PINGS 20
/* Probes one REMOTE_GPU entry with the token of the environment. */
void ln_probe_run(const char *entry, unsigned timeout_ms, ln_probe *p);
/* One plain sentence for a state that is not LN_OK. */
const char *ln_probe_explain(const ln_probe *p);

/* ---- info.c, doctor.c ---- */
int ln_info(const ln_opts *o);
int ln_doctor(const ln_opts *o);
unsigned ln_timeout_ms(void);
void ln_probe_print(int ordinal, const ln_probe *p);
/* The child's half of doctor's preload check (run as remote-gpu __preload-check). */
int ln_preload_check(void);
/* The servers to use: o->servers, else REMOTE_GPU; NULL when neither. */
const char *ln_servers(const ln_opts *o);

/* ---- elfcheck.c ---- */
enum ln_elf_kind {
	LN_ELF_NOT_FOUND,
	LN_ELF_NOT_ELF,      /* a script or data; interp holds a #! interpreter if any */
	LN_ELF_STATIC,       /* no dynamic linker: LD_PRELOAD does nothing */
	LN_ELF_SETID,        /* set-user/group-ID: the dynamic linker ignores LD_PRELOAD */
	LN_ELF_CUDART_SHARED,/* needs libcudart.so: the preload answers it */
	LN_ELF_CUDA_DRIVER,  /* needs libcuda.so: the driver folder answers it */
	LN_ELF_CUDART_STATIC,/* carries a static CUDA runtime: reaches the driver by dlopen */
	LN_ELF_NO_CUDA,      /* none of these: may load CUDA later (python, torch) */
};
typedef struct ln_elf {
	int kind;
	char path[PATH_MAX];
	char interp[PATH_MAX]; /* the #! interpreter of a script */
} ln_elf;
/* Finds cmd on PATH as execvp would and says how it reaches CUDA. */
void ln_elf_check(const char *cmd, ln_elf *e);

#endif
