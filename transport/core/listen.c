/*
 * The server half of the provider table: transport_listen by scheme. Kept out of
 * addr.c so that the client library (libremote.so) carries no listener and no
 * libuv: a static library pulls in only the objects something references.
 */
#include <string.h>

#include "rg_log.h"
#include "transport_int.h"

#ifdef RG_TRANSPORT_RDMA
extern const transport_provider transport_rdma_listen_provider; /* rdma_server.c */
#endif

static const transport_provider *const listeners[] = {
	&transport_tcp_listen_provider,
	&transport_tls_listen_provider,
#ifdef RG_TRANSPORT_RDMA
	&transport_rdma_listen_provider,
#endif
#ifdef RG_TRANSPORT_SHM
	&transport_shm_listen_provider,
#endif
};

int transport_listen(uv_loop_t *loop, const transport_addr *a, const transport_server_cb *cb, void *ctx,
		     transport_listener **out)
{
	*out = NULL;
	for (size_t i = 0; i < sizeof(listeners) / sizeof(listeners[0]); i++)
		if (strcmp(listeners[i]->scheme, a->scheme) == 0)
			return listeners[i]->listen(loop, a, cb, ctx, out);
	LOG_WARN("transport", "cannot listen on scheme \"%s\": not supported by this build", a->scheme);
	return TRANSPORT_ENOTSUP;
}

int tcp_adopt(uv_loop_t *loop, int fd, int tls, const transport_server_cb *cb, void *ctx, transport_listener **out);

int transport_adopt(uv_loop_t *loop, const char *scheme, int fd, const transport_server_cb *cb, void *ctx,
		    transport_listener **out)
{
	*out = NULL;
#ifdef RG_TRANSPORT_SHM
	if (strcmp(scheme, "shm") == 0)
		return shm_adopt(loop, fd, cb, ctx, out);
#endif
	int tls = strcmp(scheme, "tls") == 0;
	if (!tls && strcmp(scheme, "tcp") != 0)
		return TRANSPORT_ENOTSUP; /* an RDMA connection cannot change process */
	return tcp_adopt(loop, fd, tls, cb, ctx, out);
}

void transport_listener_close(transport_listener *l)
{
	if (l)
		l->prov->listener_close(l);
}

int transport_listener_port(const transport_listener *l) { return l->port; }
