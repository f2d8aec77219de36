/*
 * CUDA MPS for tenants' session processes (mps.c; --priority mps, mps+admit):
 * the supervisor starts and watches an MPS control daemon of its own (or uses
 * an operator's, --mps-pipe-dir), and every session process becomes an MPS
 * client with its tenant's class as its client priority, so kernels of
 * different tenants run side by side on the GPU instead of in time slices.
 */
#ifndef BE_MPS_H
#define BE_MPS_H

struct uv_loop_s;

/* options.c: --mps-control, --mps-pipe-dir, --batch-sm-percent and the
 * internal --mps-client. 0 if taken, -1 if not ours, 2 after a bad value. */
int be_mps_option(const char *opt, const char *value);
/* After the options: checks them against --priority and the isolation, and
 * finds the control program (supervisor). 0, or the exit status after saying
 * why (stderr). */
int be_mps_setup(int session_process, int thread_mode);

/* ---- supervisor ---- */

/* Around the supervisor's own cuInit: it must not become an MPS client (it
 * makes no context; a client that never ends would keep the daemon's quit
 * and the MPS server's recovery after a fault waiting). */
void be_mps_init_begin(void);
void be_mps_init_end(void);
/* Once the run directory is known: starts the daemon (pipe and log folders in
 * run_dir/mps), or checks the operator's, then runs probe_argv (a process of
 * ours that must come up as an MPS client on every device). 0, or -1 after
 * saying why; the server must not start then. */
int be_mps_start(struct uv_loop_s *loop, const char *run_dir, char *const *probe_argv);
/* Session processes' command line: appends --mps-client N; returns the new n. */
int be_mps_child_args(char **argv, int n);
/* At exit, the sessions gone: `quit` to our daemon, and waits for it. */
void be_mps_stop(struct uv_loop_s *loop);

/* ---- session processes, the --mps-probe process ---- */

/* A session process under MPS: the driver is initialised at the hello, once
 * the tenant's class is known (the MPS client's settings are read from the
 * environment when CUDA starts). */
int be_mps_client(void);
/* main.c hands over what initialises the devices (cuInit, the device facts). */
void be_mps_defer(int (*init)(const char *device), const char *device);
/* hello, after the login: the client priority (klass: enum be_tenant_class,
 * 0 without tenants) and a batch tenant's SM share into the environment, the
 * deferred initialisation, and the check that every device is reached
 * through MPS. CUDA_SUCCESS, or the error the hello answers. */
int be_mps_session_start(unsigned klass);
/* This process was started with --mps-probe. */
int be_mps_probing(void);
/* --mps-probe: after the devices' initialisation, whether each is reached
 * through MPS and takes a context. The process's exit status. */
int be_mps_probe(void);

#endif
