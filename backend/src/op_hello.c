/*
 * hello: the handshake. Checks the protocol version and the token, creates the
 * session's own context on each of the server's devices (contexts of
 * one process share the GPU's address space, so tenants are kept apart by
 * processes, not by contexts: docs/SECURITY.md), and answers with
 * everything the client caches about the devices, so that property and attribute
 * queries never cross the wire again.
 */
#include "backend.h"
#include "admit.h"
#include "handover.h"
#include "mps.h"
#include "tenants.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ops.h"
#include "rg_args.h"

static void copy_str(char *dst, size_t cap, const char *src, size_t len);

/* Whether the session came over plain tcp from this host (loopback: the
 * same network namespace), to which --shm-offer's path is offered: a socket
 * connection (it could be handed over) neither encrypted (the client asked
 * for tls) nor already local (shm). Whether the client can also reach the
 * socket (same files, same user) it finds out. */
static int offer_shm(const be_session *s)
{
	unsigned caps = transport_caps(s->conn);
	if (!be_srv.shm_offer || !(caps & TRANSPORT_CAP_ADOPT) || (caps & (TRANSPORT_CAP_ENCRYPTED | TRANSPORT_CAP_LOCAL)))
		return 0;
	return strncmp(s->peer, "127.", 4) == 0 || strncmp(s->peer, "[::1]:", 6) == 0 ||
	       strncmp(s->peer, "[::ffff:127.", 12) == 0;
}

/* Compares in time independent of where the strings differ. */
int be_hello_token_ok(const char *token, size_t len)
{
	const char *want = be_srv.token;
	size_t wlen;
	unsigned char diff;

	if (!want)
		return 1;
	wlen = strlen(want);
	diff = (unsigned char)(len != wlen);
	for (size_t i = 0; i < len; i++)
		diff |= (unsigned char)(token[i] ^ want[i % (wlen ? wlen : 1)]);
	return diff == 0 && wlen > 0;
}

/* Copies a client string for logs, replacing control characters. */
static void copy_str(char *dst, size_t cap, const char *src, size_t len)
{
	size_t n = len < cap - 1 ? len : cap - 1;
	for (size_t i = 0; i < n; i++)
		dst[i] = (unsigned char)src[i] < 0x20 || src[i] == 0x7f ? '?' : src[i];
	dst[n] = 0;
}

int be_op_hello(be_session *s, be_req *rq, uint32_t version, const char *token, size_t token_len, uint64_t pid,
		const char *host, size_t host_len, const char *program, size_t program_len)
{
	CUresult r;
	int lo[BE_MAX_GPUS] = {0}, hi[BE_MAX_GPUS] = {0};

	if (atomic_load(&s->hello_ok)) {
		LOG_WARN(BE_LOG, "session %" PRIu64 ": second hello ignored", s->id);
		return CUDA_ERROR_INVALID_VALUE;
	}
	s->pid = pid;
	copy_str(s->client_host, sizeof(s->client_host), host, host_len);
	copy_str(s->program, sizeof(s->program), program, program_len);
	if (version != PROTO_VERSION) {
		LOG_WARN(BE_LOG, "session %" PRIu64 " (%s): client speaks protocol version %" PRIu32 ", we speak %d",
			 s->id, s->peer, version, PROTO_VERSION);
		be_reply_status(s, rq, CUDA_ERROR_NOT_SUPPORTED);
		be_session_reject(s, "protocol version mismatch");
		return BE_REPLIED;
	}
	/* cookie_auth: the token was checked inside TLS before this client was
	 * given the cookie that alone let it connect here (ticket.c). */
	int denied = be_srv.cookie_auth        ? 0
		     : be_tenants_active() ? be_tenant_login(s, token, token_len)
					   : !be_hello_token_ok(token, token_len);
	if (denied == CUDA_ERROR_TOO_MANY_PEERS) { /* the tenant's --tenants sessions= (logged) */
		be_reply_status(s, rq, denied);
		be_session_reject(s, "the tenant has its maximum of sessions");
		return BE_REPLIED;
	}
	if (denied) {
		LOG_WARN(BE_LOG, "session %" PRIu64 " (%s, pid %" PRIu64 " %s): wrong token", s->id, s->client_host, pid,
			 s->program);
		/* The source waits before it may try again (admit.c; in a session
		 * process the supervisor learns it from the exit status). */
		atomic_store(&be_srv.auth_failed, 1);
		be_admit_auth_failed(s->peer);
		be_reply_status(s, rq, CUDA_ERROR_NOT_PERMITTED);
		be_session_reject(s, "authentication failed");
		return BE_REPLIED;
	}

	/* Under MPS the driver starts only now, with the tenant's class as the
	 * client's priority (mps.c). */
	if ((r = be_mps_session_start(be_tenant_class(s))) != CUDA_SUCCESS) {
		be_reply_status(s, rq, r);
		be_session_reject(s, "not an MPS client");
		return BE_REPLIED;
	}

	/* CUDA 13: cuCtxCreate(pctx, params, flags, dev): a context of the
	 * session's own on every served device, all in this process, so that
	 * their device addresses are unique (one address space) and peer access
	 * and peer copies between them are the driver's own. A session process
	 * may take the devices' primary contexts instead (be_server.primary_ctx),
	 * which libraries that call cudaSetDevice (NCCL) bind too. */
	for (int i = 0; i < be_srv.ngpu; i++) {
		if (be_srv.primary_ctx) {
			r = be_drv.cuDevicePrimaryCtxRetain(&s->ctxs[i], be_srv.gpu[i].dev);
			/* current, as cuCtxCreate leaves its context, for the queries below */
			if (r == CUDA_SUCCESS && (r = be_drv.cuCtxSetCurrent(s->ctxs[i])) != CUDA_SUCCESS)
				be_drv.cuDevicePrimaryCtxRelease(be_srv.gpu[i].dev);
		} else
			r = be_drv.cuCtxCreate(&s->ctxs[i], NULL, 0, be_srv.gpu[i].dev);
		if (r != CUDA_SUCCESS) {
			s->ctxs[i] = NULL;
			LOG_ERROR(BE_LOG, "session %" PRIu64 ": cuCtxCreate on device %d: %s", s->id,
				  be_srv.gpu[i].ordinal, be_errname(r));
			for (int j = 0; j < i; j++) {
				if (be_srv.primary_ctx)
					be_drv.cuDevicePrimaryCtxRelease(be_srv.gpu[j].dev);
				else
					be_drv.cuCtxDestroy(s->ctxs[j]);
				s->ctxs[j] = NULL;
			}
			be_session_select_forget();
			be_reply_status(s, rq, r);
			be_session_reject(s, "no context");
			return BE_REPLIED;
		}
		if (be_drv.cuCtxGetStreamPriorityRange(&lo[i], &hi[i]) != CUDA_SUCCESS)
			lo[i] = hi[i] = 0;
		if (be_drv.cuDeviceGetDefaultMemPool(&s->mempools[i], be_srv.gpu[i].dev) != CUDA_SUCCESS)
			s->mempools[i] = NULL;
	}
	/* Device 0's context current on this thread, as every frame expects. */
	be_session_select_forget();
	if ((r = be_session_select(s, 0)) != CUDA_SUCCESS) {
		be_reply_status(s, rq, r);
		be_session_reject(s, "no context");
		return BE_REPLIED;
	}
	be_staging_grow(&s->staging, BE_INITIAL_CHUNKS);
	atomic_store(&s->hello_ok, 1);
	be_status_session_hello(s);

	LOG_INFO(BE_LOG, "session %" PRIu64 " started: %s, pid %" PRIu64 ", %s (from %s)", s->id, s->client_host, pid,
		 s->program, s->peer);

	/* [version, driver version, n, then per device: ordinal, name, uuid,
	 * total memory, attributes (little-endian int32s), PCI bus id, stream
	 * priorities least and greatest, peers (bit j: can access device j)],
	 * then the server's software version, for remote-gpu info (libremote.so
	 * does not read it), the shm:// path offered to this client ("" for
	 * none) and the server's instance id (the client that moves to the
	 * offered socket checks that the same server answers there), and 1 if
	 * the client should listen for release events (handover.c), else 0. */
	proto_msg *m = be_reply_begin(s, rq, 3 + 9 * (uint32_t)be_srv.ngpu + 4);
	proto_msg_u64(m, PROTO_VERSION);
	proto_msg_i64(m, be_srv.driver_version);
	proto_msg_u64(m, (uint64_t)be_srv.ngpu);
	for (int g = 0; g < be_srv.ngpu; g++) {
		const be_gpu *d = &be_srv.gpu[g];
		uint8_t attrs[sizeof(d->attrs)];
		for (size_t i = 0; i < CU_DEVICE_ATTRIBUTE_MAX; i++) {
			uint32_t v = (uint32_t)d->attrs[i];
			attrs[4 * i] = (uint8_t)v;
			attrs[4 * i + 1] = (uint8_t)(v >> 8);
			attrs[4 * i + 2] = (uint8_t)(v >> 16);
			attrs[4 * i + 3] = (uint8_t)(v >> 24);
		}
		proto_msg_u64(m, (uint64_t)d->ordinal);
		proto_msg_str(m, d->name);
		proto_msg_bin(m, d->uuid.bytes, sizeof(d->uuid.bytes));
		proto_msg_u64(m, d->total_mem);
		proto_msg_bin(m, attrs, sizeof(attrs));
		proto_msg_str(m, d->pci_bus_id);
		proto_msg_i64(m, lo[g]);
		proto_msg_i64(m, hi[g]);
		proto_msg_u64(m, d->peers);
	}
	proto_msg_str(m, rg_version());
	proto_msg_str(m, offer_shm(s) ? be_srv.shm_offer : "");
	proto_msg_bin(m, be_srv.instance, sizeof(be_srv.instance));
	proto_msg_u64(m, (uint64_t)be_handover_listens(s));
	return be_reply_end(s, rq, m, NULL, 0);
}
