/*
 * Internals of the tcp provider (tcp and tls), shared by its client
 * (tcp_client.c), server (tcp_server.c), socket helpers (tcp_io.c) and TLS
 * layer (tls.c).
 */
#ifndef TP_TCP_INT_H
#define TP_TCP_INT_H

#include "transport_int.h"

/* The most bytes the read that takes a frame's header asks for right after a
 * frame whose payload was read in place (both sides): the next frame is
 * likely another such (copies come back to back), and a full read into the
 * receive buffer would take part of its payload, to be copied out again. */
#define TCP_HDR_WINDOW 256

/* ---- shared by tcp_client.c and tcp_server.c (tcp_io.c) ---- */

/*
 * Writes every byte of iov[0..iovcnt) to fd with sendmsg(MSG_NOSIGNAL): as one
 * system call whenever the kernel takes it all (the common case), looping on
 * partial writes and EINTR. On EAGAIN (non-blocking fd: the server's sockets,
 * which libuv owns) waits in poll() for POLLOUT. *stop is checked before each
 * wait: once set (by a shutdown from another thread, which also wakes the
 * poll by shutting the socket down) the write gives up.
 * Returns TRANSPORT_OK, TRANSPORT_ECLOSED (stop set, or EPIPE: the peer is
 * gone), or TRANSPORT_EIO. A failure after a partial write leaves the stream
 * mid-frame: the caller must not write on it again.
 */
int tp_tcp_write_all(int fd, const struct iovec *iov, int iovcnt, atomic_int *stop);
/* The same, writing at most TCP_PROGRESS_STEP bytes per system call (64 KiB
 * more where that takes the rest of the frame: tcp_io.c) and
 * counting in *progress (the client's transport_progress) each one after the
 * first that wrote something: a large frame then shows the peer taking it
 * while it goes out, a small one (a ping into a stopped peer) shows nothing. */
#define TCP_PROGRESS_STEP (1u << 20)
int tp_tcp_write_all_counted(int fd, const struct iovec *iov, int iovcnt, atomic_int *stop, atomic_uint_fast64_t *progress);

/* Socket buffers of a connection (client sockets and transport_wrap_fd's):
 * SO_SNDBUF and SO_RCVBUF of REMOTE_GPU_TCP_BUF_KB KiB when that is set (read
 * once), for a bandwidth-delay product beyond what the kernel's autotuning
 * reaches (net.ipv4.tcp_rmem/tcp_wmem's maximum); unset, the kernel tunes
 * them (transport/README.md, "Bulk copies"). */
void tp_tcp_set_bufs(int fd);

/* Formats the address of the other end of fd as "host:port" ("[v6]:port"). */
void tp_tcp_peer_name(int fd, char *buf, size_t len);

/* ---- tls.c: TCP inside TLS, for tcp_client.c and tcp_server.c ---- */

typedef struct tls_session tls_session;

/* Besides TRANSPORT_E* codes: call again once the socket is readable/writable. */
#define TLS_WANT_READ 1
#define TLS_WANT_WRITE 2

/* Client: a connected blocking fd; shakes hands verifying host (a name or an
 * IP address) within timeout_ms (> 0), then makes fd non-blocking. Logs why
 * it failed; TRANSPORT_ETIMEDOUT when the server did not answer in time. */
int tp_tls_client_handshake(int fd, const char *host, unsigned timeout_ms, tls_session **out);
/* Server: a session for an accepted non-blocking fd with the context of
 * transport_tls_server_setup; tp_tls_session_handshake drives the handshake. */
int tp_tls_server_session(int fd, tls_session **out);
int tp_tls_session_handshake(tls_session *t, const char *peer);
/* Non-blocking read of up to n plaintext bytes (see tls.c). */
int tp_tls_session_read(tls_session *t, void *buf, size_t n, size_t *got);
/* tp_tcp_write_all's contract, through TLS (the caller holds its send lock). */
int tp_tls_session_write_all(tls_session *t, const struct iovec *iov, int iovcnt, atomic_int *stop,
			  atomic_uint_fast64_t *progress);
/* Whether the kernel encrypts what is sent (kTLS). */
int tp_tls_session_ktls_send(const tls_session *t);
/* Whether SSL holds bytes already read from the socket (a poll cannot see them). */
int tp_tls_session_pending(tls_session *t);
void tp_tls_session_free(tls_session *t);

#endif
