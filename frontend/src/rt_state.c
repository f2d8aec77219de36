/*
 * Client state: the devices named by REMOTE_GPU (one connection each), opened on
 * the first CUDA call, a server that cannot be reached or refuses the session
 * skipped (REMOTE_GPU_STRICT=1: failing instead), CUDA_VISIBLE_DEVICES applied
 * on top (rt_visible.c); the error rules of the runtime API; fork safety.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "live.h"
#include "rg_log.h"
#include "managed.h"
#include "rt.h"
#include "drv.h"

/* rt_hello.c: the handshake on devs[0].conn; fills devs[0 .. *n) (at most max). */
/* rt_visible.c: the devices CUDA_VISIBLE_DEVICES leaves visible, in its order. */
int fe_visible_select(const fe_device *devs, int n, int *map);

static struct {
	pthread_mutex_t lock;
	int inited;
	cudaError_t init_err;
	int ndev;                 /* visible devices: the program's ordinals */
	int nslot;                /* devices of the reachable servers, in REMOTE_GPU's order */
	int vis[FE_MAX_DEVICES];  /* ordinal -> slot */
	fe_device dev[FE_MAX_DEVICES]; /* by slot (a channel's callbacks hold &dev[slot]) */
	atomic_int sticky;
	atomic_uint_fast64_t next_id;
} S = {PTHREAD_MUTEX_INITIALIZER};

static _Thread_local int tls_device;
static _Thread_local cudaError_t tls_last_error;
/* Inside a driver entry point: the runtime's last error is not the driver's. */
static _Thread_local int tls_in_driver;
/* The device whose primary context the runtime layer made current on this
 * thread, plus one (0: none), as CUDA's runtime binds it at its first call that
 * needs the device; and the devices it has used (their primary contexts are
 * active). The driver's context stack (drv_ctx.c) reads them. */
static _Thread_local int tls_bound;
static atomic_uint rt_used_devices;

static int is_sticky(int e)
{
	switch (e) {
	case cudaErrorIllegalAddress:
	case cudaErrorLaunchTimeout:
	case cudaErrorHardwareStackError:
	case cudaErrorIllegalInstruction:
	case cudaErrorMisalignedAddress:
	case cudaErrorInvalidAddressSpace:
	case cudaErrorInvalidPc:
	case cudaErrorLaunchFailure:
	case cudaErrorAssert:
	case cudaErrorECCUncorrectable:
		return 1;
	}
	return 0;
}

/* The handler of host function events on every channel (fe_rt_on_hostfn). */
static _Atomic(fe_hostfn_cb) hostfn_cb;

void fe_rt_on_hostfn(fe_hostfn_cb fn) { atomic_store(&hostfn_cb, fn); }

/* The files' forget functions (fe_rt_on_forget), in registration order. */
#define FORGET_MAX 16
static fe_rt_forget_fn forget_fns[FORGET_MAX];
static atomic_int forget_n;

void fe_rt_on_forget(fe_rt_forget_fn fn)
{
	int i = atomic_fetch_add(&forget_n, 1);
	if (i < FORGET_MAX)
		forget_fns[i] = fn;
	else
		LOG_ERROR("frontend", "too many forget functions (FORGET_MAX %d)", FORGET_MAX);
}

static void forget(int dev)
{
	int n = atomic_load(&forget_n);
	for (int i = 0; i < n && i < FORGET_MAX; i++)
		forget_fns[i](dev);
}

static void atfork_child(void)
{
	/* The child must not touch the parent's connections: their sockets are
	 * shared with the parent and their receiver threads do not exist here. It
	 * starts over with sessions of its own on its first CUDA call. */
	for (int i = 0; i < S.nslot; i++)
		S.dev[i].conn = NULL;
	pthread_mutex_init(&S.lock, NULL);
	S.inited = 0;
	S.ndev = 0;
	S.nslot = 0;
	forget(FE_RT_FORK);
}

/* Opens d's channel and says hello: a new session on that server, whose
 * devices fill d[0 .. *n) (at most max). *reached: the connection was made
 * (a failure after it is the server's answer, logged by fe_hello); then: the
 * end of the log line when it was not. */
static cudaError_t device_connect(fe_device *d, int max, int *n, const char *spec, int *reached, const char *then)
{
	*reached = 0;
	int err = fe_conn_open(&d->addr, atomic_load(&hostfn_cb), d, &d->conn);
	if (err == TRANSPORT_ETIMEDOUT && fe_live_timeout() > 0) {
		/* as a server lost later is: REMOTE_GPU_TIMEOUT bounds both */
		LOG_ERROR("frontend", "cannot reach remote GPU at %s: no connection within %g s (REMOTE_GPU_TIMEOUT)%s",
			  spec, fe_live_timeout(), then);
		d->conn = NULL;
		return cudaErrorDevicesUnavailable;
	}
	if (err) {
		LOG_ERROR("frontend", "cannot reach remote GPU at %s: %s%s", spec, transport_strerror(err), then);
		d->conn = NULL;
		return cudaErrorDevicesUnavailable;
	}
	*reached = 1;
	fe_hello_offer offer;
	cudaError_t e = (cudaError_t)fe_hello(d, max, n, &offer);
	if (e != cudaSuccess) {
		fe_conn_close(d->conn);
		d->conn = NULL;
		return e;
	}
	/* "host:port" on this host: shm if the server offers it; "tcp://" stays */
	if (offer.shm_path[0] && !d->addr.scheme_given)
		fe_upgrade_shm(d, max, n, &offer, atomic_load(&hostfn_cb));
	return e;
}

static int strict(void)
{
	const char *v = getenv("REMOTE_GPU_STRICT");
	return v && *v && strcmp(v, "0") != 0;
}

/* Closes the sessions of the servers none of whose devices is visible. */
static void close_hidden(void)
{
	for (int p = 0; p < S.nslot; p += S.dev[p].nremote) {
		int used = 0;
		for (int k = 0; k < S.dev[p].nremote; k++)
			used |= S.dev[p + k].ordinal >= 0;
		if (used)
			continue;
		for (int k = S.dev[p].nremote - 1; k >= 0; k--) { /* views first, the channel last */
			fe_conn_close(S.dev[p + k].conn);
			S.dev[p + k].conn = NULL;
		}
	}
}

/* Each REMOTE_GPU entry in turn: its server's devices are the next slots. An
 * entry whose server cannot be reached or refuses the session is skipped
 * (logged); with none left the first entry's error is the result, as with
 * REMOTE_GPU_STRICT=1 at the first such entry. More devices than
 * FE_MAX_DEVICES: an error, never a silent cut. */
static cudaError_t connect_all(char *list)
{
	cudaError_t first_err = cudaSuccess;
	char *save = NULL;
	for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (S.nslot == FE_MAX_DEVICES) {
			LOG_ERROR("frontend", "REMOTE_GPU: the servers before entry '%s' already serve %d devices, "
					      "this client's most (FE_MAX_DEVICES): shorten the list",
				  tok, FE_MAX_DEVICES);
			return cudaErrorInvalidValue;
		}
		fe_device *d = &S.dev[S.nslot];
		memset(d, 0, sizeof(*d));
		if (transport_parse_addr(tok, &d->addr)) {
			LOG_ERROR("frontend", "REMOTE_GPU entry '%s' is not [scheme://]host:port", tok);
			return cudaErrorInvalidValue;
		}
		int n = 0, reached;
		int fail = strict();
		cudaError_t e = device_connect(d, FE_MAX_DEVICES - S.nslot, &n, tok, &reached,
					       fail ? " (REMOTE_GPU_STRICT=1: no device)"
						    : ": entry skipped (REMOTE_GPU_STRICT=1 fails instead)");
		if (e == cudaErrorInvalidValue) /* the server has more devices than the slots left */
			return e;
		if (e != cudaSuccess) {
			if (reached) /* its reason is logged by fe_hello, under the server's address */
				LOG_WARN("frontend", "REMOTE_GPU entry '%s' %s: its server refused the session (above)", tok,
					 fail ? "fails (REMOTE_GPU_STRICT=1: no device)" : "skipped (REMOTE_GPU_STRICT=1 fails instead)");
			if (fail)
				return e;
			if (first_err == cudaSuccess)
				first_err = e;
			continue;
		}
		for (int i = 0; i < n; i++)
			S.dev[S.nslot + i].first = S.nslot;
		S.nslot += n;
	}
	return S.nslot > 0 ? cudaSuccess : first_err;
}

static cudaError_t init_locked(void)
{
	rg_log_init("libremote");
	const char *spec = getenv("REMOTE_GPU");
	if (!spec || !*spec) {
		LOG_ERROR("frontend", "REMOTE_GPU is not set: no remote GPU to use "
				      "(set REMOTE_GPU=host:port[,host:port...])");
		return cudaErrorNoDevice;
	}
	char *list = strdup(spec);
	if (!list)
		return cudaErrorMemoryAllocation;
	cudaError_t e = connect_all(list);
	free(list);
	for (int i = 0; i < S.nslot; i++)
		S.dev[i].ordinal = -1;
	if (e != cudaSuccess) { /* the sessions opened before the failing entry end */
		close_hidden();
		S.nslot = 0;
		return e;
	}
	S.ndev = fe_visible_select(S.dev, S.nslot, S.vis);
	for (int i = 0; i < S.ndev; i++)
		S.dev[S.vis[i]].ordinal = i;
	close_hidden();
	if (S.ndev == 0) {
		LOG_ERROR("frontend", "CUDA_VISIBLE_DEVICES leaves none of the %d remote devices visible", S.nslot);
		return cudaErrorNoDevice;
	}
	return cudaSuccess;
}

static void register_atfork(void) { pthread_atfork(NULL, NULL, atfork_child); }

cudaError_t fe_rt_init(void)
{
	static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
	if (__atomic_load_n(&S.inited, __ATOMIC_ACQUIRE))
		return S.init_err;
	pthread_once(&atfork_once, register_atfork);
	pthread_mutex_lock(&S.lock);
	if (!S.inited) {
		S.init_err = init_locked();
		__atomic_store_n(&S.inited, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&S.lock);
	return S.init_err;
}

/* cudaDeviceReset: the session on the server ends (it frees everything the
 * process had on that device), a new one starts, and what the client knew of
 * the old one (allocations, loaded modules, registrations, managed memory,
 * the sticky error) is forgotten. As in CUDA, no other thread may use the
 * device meanwhile. */
cudaError_t fe_rt_reset_device(int ordinal)
{
	fe_device *d = fe_rt_device(ordinal);
	if (!d)
		return cudaErrorInvalidDevice;
	if (d->nremote > 1) {
		/* A reset is a fresh session, which would take the server's other
		 * devices' state with it: not done (a per-device reset on the
		 * server would be needed). */
		rg_log_once("frontend", "not supported (a device of a server that serves several)",
			    "cudaDeviceReset / cuDevicePrimaryCtxReset");
		return cudaErrorNotSupported;
	}
	pthread_mutex_lock(&S.lock);
	forget(ordinal);
	atomic_fetch_and(&rt_used_devices, ~(1u << ordinal));
	if (d->conn)
		fe_conn_close(d->conn);
	d->conn = NULL;
	char spec[300];
	snprintf(spec, sizeof(spec), "%s:%d (after cudaDeviceReset)", d->addr.host, d->addr.port);
	int n = 0, reached;
	cudaError_t e = device_connect(d, 1, &n, spec, &reached, "");
	d->first = (int)(d - S.dev);
	d->ordinal = ordinal;
	atomic_store(&S.sticky, 0);
	pthread_mutex_unlock(&S.lock);
	if (!tls_in_driver) /* a driver call's reset leaves the runtime's error alone */
		tls_last_error = cudaSuccess;
	return e;
}

int fe_rt_device_count(void) { return fe_rt_init() == cudaSuccess ? S.ndev : 0; }

int fe_rt_same_server(int a, int b)
{
	fe_device *da = fe_rt_device(a), *db = fe_rt_device(b);
	return da && db && da->first == db->first;
}

fe_device *fe_rt_device(int ordinal)
{
	if (fe_rt_init() != cudaSuccess || ordinal < 0 || ordinal >= S.ndev)
		return NULL;
	return &S.dev[S.vis[ordinal]];
}

int fe_rt_current_device(void) { return tls_device; }
void fe_rt_set_current_device(int ordinal) { tls_device = ordinal; }

cudaError_t(fe_rt_enter)(fe_conn **c)
{
	cudaError_t e = fe_rt_init();
	if (e != cudaSuccess)
		return fe_rt_fail(e);
	int sticky = atomic_load(&S.sticky);
	if (sticky)
		return fe_rt_fail((cudaError_t)sticky);
	if (tls_device >= S.ndev)
		return fe_rt_fail(cudaErrorInvalidDevice);
	if (!tls_in_driver) {
		tls_bound = tls_device + 1;
		/* (again after a reset, which clears it) */
		if (!(atomic_load_explicit(&rt_used_devices, memory_order_relaxed) >> tls_device & 1))
			atomic_fetch_or(&rt_used_devices, 1u << tls_device);
	}
	*c = S.dev[S.vis[tls_device]].conn;
	return cudaSuccess;
}

int fe_rt_thread_bound(void) { return tls_bound - 1; }
void fe_rt_thread_unbind(void) { tls_bound = 0; }
int fe_rt_device_used(int ordinal)
{
	return ordinal >= 0 && ordinal < FE_MAX_DEVICES && (atomic_load(&rt_used_devices) >> ordinal & 1);
}

cudaError_t fe_rt_fail(cudaError_t e)
{
	if (e != cudaSuccess) {
		if (!tls_in_driver)
			tls_last_error = e;
		if (is_sticky(e)) {
			int zero = 0;
			atomic_compare_exchange_strong(&S.sticky, &zero, (int)e);
		}
	}
	return e;
}

cudaError_t(fe_rt_leave)(int status)
{
	cudaError_t e;
	if (status < 0)
		e = cudaErrorDevicesUnavailable; /* channel broken: logged by conn.c */
	else
		e = (cudaError_t)status; /* CUresult and cudaError_t share their numbers */
	if (e == cudaSuccess && tls_device < S.ndev) {
		/* CUDA reports an earlier asynchronous failure at the next call that
		 * synchronises: that is this one. */
		int latched = fe_conn_take_latched(S.dev[S.vis[tls_device]].conn);
		if (latched)
			e = (cudaError_t)latched;
	}
	return fe_rt_fail(e);
}

void fe_drv_begin(void) { tls_in_driver++; }

void fe_drv_done(void) { tls_in_driver--; }

/* As the CUDA runtime does: a sticky error is reported once here like any other
 * (and reset), while every call that needs the device keeps failing with it. */
cudaError_t cudaGetLastError(void)
{
	cudaError_t e = tls_last_error;
	tls_last_error = cudaSuccess;
	return e;
}

cudaError_t cudaPeekAtLastError(void) { return tls_last_error; }

uint64_t fe_rt_new_id(void)
{
	/* Ids stay clear of the special stream values 0, 1 (legacy), 2 (per-thread). */
	return atomic_fetch_add(&S.next_id, 1) + 0x100;
}

uint64_t fe_rt_stream(cudaStream_t s)
{
	uintptr_t v = (uintptr_t)s;
	return v <= 2 ? 0 : (uint64_t)v;
}

uint64_t fe_rt_event(cudaEvent_t e) { return (uint64_t)(uintptr_t)e; }
uint64_t fe_rt_gexec(cudaGraphExec_t x) { return (uint64_t)(uintptr_t)x; }
