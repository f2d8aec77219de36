/*
 * Tenants (remote-gpud --tenants FILE): who may connect, under which name, with
 * how much device memory and how many sessions at once.
 *
 *   tenants_file.c    parses and checks the file (be_tenants_parse)
 *   tenant_ledger.c   the ledger shared by the supervisor and its session
 *                     processes: the tenants in force, per-tenant memory in use
 *                     and at its peak, and one slot per live session
 *   tenants.c         the options, SIGHUP reload, handing the ledger to session
 *                     processes, and the per-session calls (login at hello,
 *                     charge before each allocation, release at the end)
 *
 * Without --tenants none of this is active and the server takes one token, as
 * before: be_tenants_active() is 0 and every charge succeeds.
 */
#ifndef BE_TENANTS_H
#define BE_TENANTS_H

#include <stddef.h>
#include <stdint.h>

#define BE_TENANT_NAME_MAX 64  /* bytes with the NUL: [a-z0-9][a-z0-9_-]{0,62} */
#define BE_TENANT_TOKEN_MAX 4096
#define BE_TENANTS_MAX 256     /* in force at once, tenants removed but with live sessions included */
#define BE_TENANT_UNLIMITED UINT64_MAX

enum be_tenant_class {
	BE_TENANT_LATENCY = 1,
	BE_TENANT_BATCH = 2,
};

/* One line of the file. */
typedef struct be_tenant_def {
	char name[BE_TENANT_NAME_MAX];
	char token_sha[65];    /* SHA-256 of the token, hex: the token itself is kept nowhere */
	uint64_t quota;        /* bytes of device memory; BE_TENANT_UNLIMITED */
	uint32_t max_sessions; /* 0: unlimited */
	uint32_t klass;        /* enum be_tenant_class */
} be_tenant_def;

typedef struct be_tenant_table {
	be_tenant_def t[BE_TENANTS_MAX];
	size_t n;
} be_tenant_table;

/* tenants_file.c: reads path into *out. 0, or -1 with a message naming the file
 * and line in err. The file must be a regular file not readable by group or
 * others. */
int be_tenants_parse(const char *path, be_tenant_table *out, char *err, size_t errcap);
const char *be_tenant_class_name(uint32_t klass);

/* ---- tenants.c: the server's side ---- */

/* main.c's option loop: --tenants FILE, --ledger-fd N (session processes).
 * 0 if taken, -1 if not ours, 2 after a bad value (said on stderr). */
int be_tenants_option(const char *opt, const char *value);
/* After the options: reads the file (supervisor), or maps the ledger (session
 * process). thread_mode: more than one tenant is refused (docs/SECURITY.md).
 * 0, or 2 after saying why. */
int be_tenants_setup(int session_process, int thread_mode);
/* Supervisor, once the run directory is known ("" for none): creates the
 * ledger there (remote-smi reads it) and starts the SIGHUP handler. 0 or -1. */
int be_tenants_start(void *uv_loop, const char *run_dir);
/* Supervisor, at exit: removes the ledger's file. */
void be_tenants_stop(void);
int be_tenants_active(void);
/* Session processes' command line: appends --ledger-fd 4; returns the new n. */
int be_tenants_child_args(char **argv, int n);
/* The descriptor a session process gets as its fd 4, or -1. */
int be_tenants_ledger_fd(void);
/* Supervisor: a session process ended (any way): its sessions' charges and
 * session counts are released. */
void be_tenants_reap(int pid);
/* The tenant name of this session process (for the store quota), or NULL. */
const char *be_tenants_store_id(void);

/* ---- per session (executor thread) ---- */

struct be_session;
/* hello: finds the tenant of token (compared in constant time) and takes a
 * session slot. 0; CUDA_ERROR_NOT_PERMITTED for an unknown token;
 * CUDA_ERROR_TOO_MANY_PEERS when the tenant has its maximum of sessions (why in
 * the log). */
int be_tenant_login(struct be_session *s, const char *token, size_t len);
/* Before an allocation of size bytes: 0, or CUDA_ERROR_OUT_OF_MEMORY when the
 * tenant's quota would be passed (nothing charged). */
int be_tenant_charge(struct be_session *s, uint64_t size);
void be_tenant_uncharge(struct be_session *s, uint64_t size);
/* The session's tenant's class (enum be_tenant_class), 0 without one. */
uint32_t be_tenant_class(const struct be_session *s);
/* Teardown: gives back the session's slot and whatever it still holds. */
void be_tenant_logout(struct be_session *s);

#endif
