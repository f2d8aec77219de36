/*
 * The providers compiled in: the one list. TP_PROVIDERS(X) expands X(name)
 * once per provider, in lookup order; each provider defines
 * tp_<name>_provider (its client half, in rg_transport_client) and
 * tp_<name>_listen_provider (its server half, in rg_transport).
 * core/addr.c builds the connect table from it, core/listen.c the listen
 * table. A provider's cmake fragment defines RG_TRANSPORT_<NAME> for both
 * libraries (see rdma/rdma.cmake).
 *
 * Compiled in rather than registered from constructors: a static library
 * pulls in only the object files something references, so a provider that
 * registered itself would silently vanish from programs linked against it.
 */
#ifndef TP_PROVIDERS_H
#define TP_PROVIDERS_H

#ifdef RG_TRANSPORT_RDMA
#define TP_PROVIDER_RDMA(X) X(rdma)
#else
#define TP_PROVIDER_RDMA(X)
#endif
#ifdef RG_TRANSPORT_SHM
#define TP_PROVIDER_SHM(X) X(shm)
#else
#define TP_PROVIDER_SHM(X)
#endif

#define TP_PROVIDERS(X) X(tcp) X(tls) TP_PROVIDER_RDMA(X) TP_PROVIDER_SHM(X)

#endif
