/*
 * The server half of the provider table: transport_listen and transport_adopt
 * by scheme. Kept out of addr.c so that the client library (libremote.so)
 * carries no listener and no libuv: a static library pulls in only the objects
 * something references.
 */
#include <pthread.h>
#include <string.h>

#include "rg_log.h"
#include "transport_int.h"

static void listeners_init(void);
static const transport_provider *listener_find(const char *scheme);

/* The listen halves of providers.h's list, their empty slots filled. */
static struct {
	pthread_once_t once;
	transport_provider tab[8];
	int n;
} L = {PTHREAD_ONCE_INIT};

static void listeners_init(void)
{
#define TP_ADD(name) L.tab[L.n++] = tp_##name##_listen_provider;
	TP_PROVIDERS(TP_ADD)
#undef TP_ADD
	for (int i = 0; i < L.n; i++)
		tp_provider_fill(&L.tab[i]);
}

static const transport_provider *listener_find(const char *scheme)
{
	pthread_once(&L.once, listeners_init);
	for (int i = 0; i < L.n; i++)
		if (strcmp(L.tab[i].scheme, scheme) == 0)
			return &L.tab[i];
	return NULL;
}

transport_err transport_listen(uv_loop_t *loop, const transport_addr *a, const transport_server_cb *cb, void *ctx,
		     transport_listener **out)
{
	const transport_provider *p = listener_find(a->scheme);
	*out = NULL;
	if (p)
		return p->listen(loop, a, cb, ctx, out);
	LOG_WARN("transport", "cannot listen on scheme \"%s\": not supported by this build", a->scheme);
	return TRANSPORT_ENOTSUP;
}

transport_err transport_adopt(uv_loop_t *loop, const char *scheme, int fd, const transport_server_cb *cb, void *ctx,
		    transport_listener **out)
{
	const transport_provider *p = listener_find(scheme);
	*out = NULL;
	return p ? p->adopt(loop, fd, cb, ctx, out) : TRANSPORT_ENOTSUP;
}

void transport_listener_close(transport_listener *l)
{
	if (l)
		l->prov->listener_close(l);
}

int transport_listener_port(const transport_listener *l) { return l->port; }
