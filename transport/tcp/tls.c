/*
 * tls: TCP inside TLS (OpenSSL 3), the one job of this file. The tcp client
 * (tcp_client.c) and server (tcp_server.c) keep their sockets, framing and
 * threading; where a connection is tls they read and write through here.
 *
 * Where the handshake happens. The client shakes hands from its own thread on
 * its blocking socket, before the first frame (so the token in the hello
 * travels encrypted). The server shakes hands in the process that serves the
 * connection: with process isolation the supervisor hands the raw socket to
 * the session process, which does the handshake on its loop (non-blocking),
 * because user-space TLS state cannot move between processes.
 *
 * Kernel TLS. SSL_OP_ENABLE_KTLS asks OpenSSL to hand the keys to the kernel
 * after the handshake where the kernel has the tls ULP. With kTLS on the send
 * side, frames go out exactly as on plain tcp (tp_tcp_write_all: one sendmsg of
 * the caller's iovecs, no copy of ours), the kernel encrypting as it copies.
 * Without it, OpenSSL encrypts in user space into its record buffer and
 * writes that to the socket (a socket BIO, not a memory BIO, so no copy of
 * ours; OpenSSL 3.0's record layer still copies on each side: memmove was
 * 18-24% of a copy's profile, and a copy costs about twice tcp's CPU per
 * byte), in full 16 KiB records; small iovecs (a frame's header and msgpack
 * part) are gathered first so that a small frame is still one record and one
 * write.
 *
 * Threads. One connection is read by one thread and written by others at the
 * same time, but an SSL object is not thread-safe. So every SSL call on a
 * connection holds t->lock, the socket is non-blocking (an SSL call never
 * sleeps with the lock held), and waiting for the socket (poll) happens with
 * the lock released. TLS 1.3 only, and the server sends no session tickets:
 * nothing is exchanged after the handshake that either side did not ask for
 * (no renegotiation), which is also what kTLS receive wants.
 *
 * Configuration. Server: transport_tls_server_setup (remote-gpud's
 * --tls-cert/--tls-key/--tls-client-ca). Client: the environment, read at the
 * first tls connection: REMOTE_GPU_TLS_CA (trust anchor file or directory;
 * default the system store), REMOTE_GPU_TLS_CERT and REMOTE_GPU_TLS_KEY (a
 * client certificate). The client verifies the server's name (or IP address)
 * against the host in REMOTE_GPU.
 */
#include "tcp_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "rg_log.h"

/* Gather iovecs shorter than this into one record with their neighbours. */
#define GATHER_MIN 4096
#define GATHER_BUF (16 * 1024)
/* Plaintext per SSL_write call: bounds how long the reader waits for the lock. */
#define WRITE_CHUNK (64 * 1024)
/* Ciphertext OpenSSL reads per recv() once read-ahead is on. */
#define READ_BUF (128 * 1024)

struct tls_session {
	SSL *ssl;
	int fd;
	pthread_mutex_t lock; /* every SSL_* call on ssl */
	int ktls_tx, ktls_rx;
	int client; /* in the user's program: a write must not raise SIGPIPE */
	uint8_t gather[GATHER_BUF]; /* writers only (the caller's send lock) */
};

static struct {
	pthread_mutex_t lock;
	SSL_CTX *server, *client;
	int client_tried;
} G = {.lock = PTHREAD_MUTEX_INITIALIZER};

static const char *ssl_errstr(char *buf, size_t len);
static SSL_CTX *ctx_new(int server);
static int session_new(SSL_CTX *ctx, int fd, tls_session **out);
static void session_after_handshake(tls_session *t, const char *peer);
static int wait_fd(int fd, short events, atomic_int *stop);

/* OpenSSL's socket BIO writes with write(), not send(MSG_NOSIGNAL): to a peer
 * that is gone that raises SIGPIPE, whose default kills the user's program.
 * In the client, SIGPIPE is blocked in the writing thread around SSL calls
 * that write, and one the call raised is taken back (libpq does the same).
 * A SIGPIPE already pending in that thread may be taken with it. The server
 * ignores SIGPIPE altogether. */
typedef struct pipe_guard {
	sigset_t old;
	int on;
} pipe_guard;

static void pipe_guard_begin(pipe_guard *g, int client)
{
	sigset_t s;
	g->on = client;
	if (!client)
		return;
	sigemptyset(&s);
	sigaddset(&s, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &s, &g->old);
}

static void pipe_guard_end(pipe_guard *g, int sys_errno)
{
	if (!g->on)
		return;
	if (sys_errno == EPIPE) {
		sigset_t s;
		struct timespec zero = {0, 0};
		sigemptyset(&s);
		sigaddset(&s, SIGPIPE);
		while (sigtimedwait(&s, NULL, &zero) < 0 && errno == EINTR)
			;
	}
	pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

/* ---- contexts ---- */

/* The oldest queued OpenSSL error as text (and clears the queue). */
static const char *ssl_errstr(char *buf, size_t len)
{
	unsigned long e = ERR_get_error();
	if (!e)
		snprintf(buf, len, "%s", errno ? strerror(errno) : "unknown error");
	else
		ERR_error_string_n(e, buf, len);
	ERR_clear_error();
	return buf;
}

static SSL_CTX *ctx_new(int server)
{
	SSL_CTX *ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
	if (!ctx)
		return NULL;
	SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
	/* Zero-copy sends where the kernel can encrypt (see the top). */
	/* IGNORE_UNEXPECTED_EOF: an end of stream without close_notify is a
	 * clean close here; frames are length-prefixed, so a truncated one is
	 * still an error (the framing sees EOF inside a frame). */
	SSL_CTX_set_options(ctx, SSL_OP_ENABLE_KTLS | SSL_OP_NO_RENEGOTIATION | SSL_OP_IGNORE_UNEXPECTED_EOF);
	/* Writes may return after each record (the lock is released between
	 * chunks), and a retried write may come from the same bytes at
	 * another address (a gather buffer refilled). */
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	SSL_CTX_set_default_read_buffer_len(ctx, READ_BUF);
	if (server) {
		/* No tickets: nothing follows the handshake unasked (and sessions
		 * are long-lived; resumption saves nothing worth the state). */
		SSL_CTX_set_num_tickets(ctx, 0);
		SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	}
	return ctx;
}

transport_err transport_tls_server_setup(const char *cert, const char *key, const char *client_ca)
{
	char eb[256];
	SSL_CTX *ctx = ctx_new(1);

	if (!ctx) {
		LOG_ERROR("transport", "tls: cannot make a context: %s", ssl_errstr(eb, sizeof(eb)));
		return TRANSPORT_ENOMEM;
	}
	if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
		LOG_ERROR("transport", "tls: certificate %s: %s", cert, ssl_errstr(eb, sizeof(eb)));
		goto fail;
	}
	if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
		LOG_ERROR("transport", "tls: private key %s: %s", key, ssl_errstr(eb, sizeof(eb)));
		goto fail;
	}
	if (SSL_CTX_check_private_key(ctx) != 1) {
		LOG_ERROR("transport", "tls: the key %s does not match the certificate %s", key, cert);
		goto fail;
	}
	if (client_ca) {
		STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(client_ca);
		if (!names || SSL_CTX_load_verify_locations(ctx, client_ca, NULL) != 1) {
			LOG_ERROR("transport", "tls: client CA %s: %s", client_ca, ssl_errstr(eb, sizeof(eb)));
			sk_X509_NAME_pop_free(names, X509_NAME_free);
			goto fail;
		}
		SSL_CTX_set_client_CA_list(ctx, names);
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
	}
	pthread_mutex_lock(&G.lock);
	SSL_CTX_free(G.server);
	G.server = ctx;
	pthread_mutex_unlock(&G.lock);
	return TRANSPORT_OK;
fail:
	SSL_CTX_free(ctx);
	return TRANSPORT_EADDR;
}

/* The client's context, from the environment, made once. */
static SSL_CTX *client_ctx(void)
{
	char eb[256];

	pthread_mutex_lock(&G.lock);
	if (G.client_tried) {
		SSL_CTX *c = G.client;
		pthread_mutex_unlock(&G.lock);
		return c;
	}
	G.client_tried = 1;
	const char *ca = getenv("REMOTE_GPU_TLS_CA");
	const char *cert = getenv("REMOTE_GPU_TLS_CERT");
	const char *key = getenv("REMOTE_GPU_TLS_KEY");
	SSL_CTX *ctx = ctx_new(0);
	if (!ctx) {
		LOG_ERROR("transport", "tls: cannot make a context: %s", ssl_errstr(eb, sizeof(eb)));
		goto out;
	}
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	int ok;
	if (ca && *ca) {
		struct stat st;
		int dir = stat(ca, &st) == 0 && S_ISDIR(st.st_mode);
		ok = SSL_CTX_load_verify_locations(ctx, dir ? NULL : ca, dir ? ca : NULL) == 1;
	} else {
		ok = SSL_CTX_set_default_verify_paths(ctx) == 1;
	}
	if (!ok) {
		LOG_ERROR("transport", "tls: REMOTE_GPU_TLS_CA %s: %s", ca && *ca ? ca : "(system store)",
			  ssl_errstr(eb, sizeof(eb)));
		goto bad;
	}
	if ((cert && *cert) != (key && *key)) {
		LOG_ERROR("transport", "tls: set both REMOTE_GPU_TLS_CERT and REMOTE_GPU_TLS_KEY, or neither");
		goto bad;
	}
	if (cert && *cert) {
		if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
			LOG_ERROR("transport", "tls: REMOTE_GPU_TLS_CERT %s: %s", cert, ssl_errstr(eb, sizeof(eb)));
			goto bad;
		}
		if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
			LOG_ERROR("transport", "tls: REMOTE_GPU_TLS_KEY %s: %s", key, ssl_errstr(eb, sizeof(eb)));
			goto bad;
		}
	}
	G.client = ctx;
	goto out;
bad:
	SSL_CTX_free(ctx);
out:
	pthread_mutex_unlock(&G.lock);
	return G.client;
}

int transport_tls_server_ready(void)
{
	pthread_mutex_lock(&G.lock);
	int r = G.server != NULL;
	pthread_mutex_unlock(&G.lock);
	return r;
}

/* ---- sessions ---- */

static int session_new(SSL_CTX *ctx, int fd, tls_session **out)
{
	*out = NULL;
	tls_session *t = calloc(1, sizeof(*t));
	if (!t)
		return TRANSPORT_ENOMEM;
	if (!(t->ssl = SSL_new(ctx)) || SSL_set_fd(t->ssl, fd) != 1) {
		SSL_free(t->ssl);
		free(t);
		return TRANSPORT_ENOMEM;
	}
	t->fd = fd;
	pthread_mutex_init(&t->lock, NULL);
	*out = t;
	return TRANSPORT_OK;
}

static void session_after_handshake(tls_session *t, const char *peer)
{
	t->ktls_tx = BIO_get_ktls_send(SSL_get_wbio(t->ssl)) > 0;
	t->ktls_rx = BIO_get_ktls_recv(SSL_get_rbio(t->ssl)) > 0;
	/* Read-ahead takes many records per recv(); kernel TLS receive (which
	 * wants the socket untouched) is decided by now. */
	if (!t->ktls_rx)
		SSL_set_read_ahead(t->ssl, 1);
	LOG_INFO("transport", "%s: %s %s, kernel TLS send %s, receive %s", peer, SSL_get_version(t->ssl),
		 SSL_get_cipher_name(t->ssl), t->ktls_tx ? "on" : "off", t->ktls_rx ? "on" : "off");
}

void tp_tls_session_free(tls_session *t)
{
	if (!t)
		return;
	/* No close_notify: frames are length-prefixed, so a cut stream is
	 * already an error, and the peer may be gone. */
	SSL_free(t->ssl);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

int tp_tls_session_ktls_send(const tls_session *t) { return t->ktls_tx; }

int tp_tls_session_pending(tls_session *t)
{
	pthread_mutex_lock(&t->lock);
	int r = SSL_has_pending(t->ssl);
	pthread_mutex_unlock(&t->lock);
	return r;
}

/* Polls fd for events without any lock held; gives up once *stop is set. */
static int wait_fd(int fd, short events, atomic_int *stop)
{
	struct pollfd pfd = {.fd = fd, .events = events};
	for (;;) {
		if (stop && atomic_load(stop))
			return TRANSPORT_ECLOSED;
		/* A bounded wait: the reader of this connection may consume what
		 * woke us, and a shutdown from another thread is noticed soon. */
		int r = poll(&pfd, 1, 100);
		if (r > 0)
			return TRANSPORT_OK;
		if (r < 0 && errno != EINTR)
			return TRANSPORT_EIO;
		if (r == 0 && events == POLLIN)
			return TRANSPORT_OK; /* let the caller try SSL again */
	}
}

/* The client: connect() succeeded on fd (blocking); shake hands within
 * timeout_ms, verifying that the server's certificate names host. */
int tp_tls_client_handshake(int fd, const char *host, unsigned timeout_ms, tls_session **out)
{
	char eb[256];
	SSL_CTX *ctx = client_ctx();
	tls_session *t;
	unsigned char ip[16];

	*out = NULL;
	if (!ctx)
		return TRANSPORT_ECONNECT;
	int err = session_new(ctx, fd, &t);
	if (err)
		return err;
	int is_ip = inet_pton(AF_INET, host, ip) == 1 || inet_pton(AF_INET6, host, ip) == 1;
	X509_VERIFY_PARAM *vp = SSL_get0_param(t->ssl);
	X509_VERIFY_PARAM_set_hostflags(vp, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	if (is_ip ? X509_VERIFY_PARAM_set1_ip_asc(vp, host) != 1
		  : (SSL_set1_host(t->ssl, host) != 1 || SSL_set_tlsext_host_name(t->ssl, host) != 1)) {
		LOG_ERROR("transport", "tls: cannot verify against host %s", host);
		tp_tls_session_free(t);
		return TRANSPORT_EADDR;
	}
	t->client = 1;
	/* Bounded: connect() returned, so a server that never answers would
	 * otherwise hold the program in SSL_connect for good. */
	struct timeval tv = {(time_t)(timeout_ms / 1000), (suseconds_t)(timeout_ms % 1000) * 1000}, none = {0, 0};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	pipe_guard g;
	pipe_guard_begin(&g, 1);
	errno = 0;
	int r = SSL_connect(t->ssl);
	int sys = errno;
	pipe_guard_end(&g, sys);
	if (r != 1) {
		int e = SSL_get_error(t->ssl, r), ret = TRANSPORT_ECONNECT;
		long v = SSL_get_verify_result(t->ssl);
		if (v != X509_V_OK)
			LOG_ERROR("transport", "tls: %s: the server's certificate is not trusted: %s", host,
				  X509_verify_cert_error_string(v));
		else if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE || sys == EAGAIN) {
			LOG_ERROR("transport", "tls: %s did not complete the TLS handshake within %.3g s", host,
				  timeout_ms / 1000.0);
			ret = TRANSPORT_ETIMEDOUT;
		}
		else if (e != SSL_ERROR_SSL && ERR_peek_error() == 0)
			/* IGNORE_UNEXPECTED_EOF makes an end of stream ZERO_RETURN */
			LOG_ERROR("transport", "tls: %s closed the connection during the TLS handshake "
					       "(a plain tcp:// server, or it refused us: see its log)", host);
		else
			LOG_ERROR("transport", "tls: handshake with %s failed: %s", host, ssl_errstr(eb, sizeof(eb)));
		ERR_clear_error();
		tp_tls_session_free(t);
		return ret;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof(none));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &none, sizeof(none));
	/* From here on the socket is shared by a reader and writers that must
	 * never sleep inside SSL with the lock held. */
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		tp_tls_session_free(t);
		return TRANSPORT_EIO;
	}
	session_after_handshake(t, host);
	*out = t;
	return TRANSPORT_OK;
}

/* The server: an accepted, non-blocking fd. The handshake is driven by
 * tp_tls_session_handshake from the loop. */
int tp_tls_server_session(int fd, tls_session **out)
{
	pthread_mutex_lock(&G.lock);
	SSL_CTX *ctx = G.server;
	if (ctx)
		SSL_CTX_up_ref(ctx);
	pthread_mutex_unlock(&G.lock);
	*out = NULL;
	if (!ctx) {
		LOG_ERROR("transport", "tls: no server certificate configured");
		return TRANSPORT_ENOTSUP;
	}
	int err = session_new(ctx, fd, out);
	SSL_CTX_free(ctx); /* the SSL holds its own reference */
	if (!err)
		SSL_set_accept_state((*out)->ssl);
	return err;
}

/* One step of a non-blocking handshake: TRANSPORT_OK when done, TLS_WANT_READ
 * or TLS_WANT_WRITE to be called again when the socket is ready, or an error
 * (logged, with what the peer did wrong). */
int tp_tls_session_handshake(tls_session *t, const char *peer)
{
	char eb[256];

	pthread_mutex_lock(&t->lock);
	errno = 0;
	int r = SSL_do_handshake(t->ssl);
	int e = r == 1 ? SSL_ERROR_NONE : SSL_get_error(t->ssl, r);
	if (e == SSL_ERROR_NONE) {
		session_after_handshake(t, peer);
		pthread_mutex_unlock(&t->lock);
		return TRANSPORT_OK;
	}
	pthread_mutex_unlock(&t->lock);
	if (e == SSL_ERROR_WANT_READ)
		return TLS_WANT_READ;
	if (e == SSL_ERROR_WANT_WRITE)
		return TLS_WANT_WRITE;
	if (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0)
		LOG_WARN("transport", "%s: closed during the TLS handshake", peer);
	else
		LOG_WARN("transport", "%s: TLS handshake failed: %s", peer, ssl_errstr(eb, sizeof(eb)));
	ERR_clear_error();
	return TRANSPORT_EIO;
}

/* Reads up to n plaintext bytes without blocking: TRANSPORT_OK with *got > 0,
 * TLS_WANT_READ (nothing there yet), TLS_WANT_WRITE, TRANSPORT_ECLOSED (the
 * peer closed) or TRANSPORT_EIO. */
int tp_tls_session_read(tls_session *t, void *buf, size_t n, size_t *got)
{
	char eb[256];

	*got = 0;
	pthread_mutex_lock(&t->lock);
	errno = 0;
	int r = SSL_read_ex(t->ssl, buf, n, got);
	int e = r == 1 ? SSL_ERROR_NONE : SSL_get_error(t->ssl, r);
	int sys = errno;
	if (e == SSL_ERROR_SSL || (e == SSL_ERROR_SYSCALL && ERR_peek_error()))
		LOG_WARN("transport", "tls: read: %s", ssl_errstr(eb, sizeof(eb)));
	ERR_clear_error();
	pthread_mutex_unlock(&t->lock);
	switch (e) {
	case SSL_ERROR_NONE: return TRANSPORT_OK;
	case SSL_ERROR_WANT_READ: return TLS_WANT_READ;
	case SSL_ERROR_WANT_WRITE: return TLS_WANT_WRITE;
	case SSL_ERROR_ZERO_RETURN: return TRANSPORT_ECLOSED;
	case SSL_ERROR_SYSCALL: return sys == 0 ? TRANSPORT_ECLOSED : TRANSPORT_EIO; /* 0: EOF */
	default: return TRANSPORT_EIO;
	}
}

/* Writes n bytes through SSL, waiting for the socket with the lock released.
 * Progress (transport_progress): each write of a frame after its first (*calls
 * counts them), as tp_tcp_write_all_counted counts its sends. */
static int write_ssl(tls_session *t, const uint8_t *p, size_t n, atomic_int *stop, int *calls,
		     atomic_uint_fast64_t *progress)
{
	char eb[256];

	while (n > 0) {
		size_t k = n < WRITE_CHUNK ? n : WRITE_CHUNK, w = 0;
		pipe_guard g;
		pthread_mutex_lock(&t->lock);
		pipe_guard_begin(&g, t->client);
		errno = 0;
		int r = SSL_write_ex(t->ssl, p, k, &w);
		int sys = errno;
		pipe_guard_end(&g, sys);
		int e = r == 1 ? SSL_ERROR_NONE : SSL_get_error(t->ssl, r);
		if (e == SSL_ERROR_SSL)
			LOG_WARN("transport", "tls: write: %s", ssl_errstr(eb, sizeof(eb)));
		ERR_clear_error();
		pthread_mutex_unlock(&t->lock);
		if (e == SSL_ERROR_NONE) {
			p += w;
			n -= w;
			if (progress && (*calls)++ > 0)
				atomic_fetch_add(progress, 1);
			continue;
		}
		int err;
		if (e == SSL_ERROR_WANT_WRITE)
			err = wait_fd(t->fd, POLLOUT, stop);
		else if (e == SSL_ERROR_WANT_READ)
			err = wait_fd(t->fd, POLLIN, stop);
		else
			return stop && atomic_load(stop) ? TRANSPORT_ECLOSED
			       : sys == EPIPE || sys == ECONNRESET ? TRANSPORT_ECLOSED : TRANSPORT_EIO;
		if (err)
			return err;
	}
	return TRANSPORT_OK;
}

int tp_tls_session_write_all(tls_session *t, const struct iovec *iov, int iovcnt, atomic_int *stop,
			  atomic_uint_fast64_t *progress)
{
	if (t->ktls_tx) /* the kernel encrypts: the plain path, iovecs and all */
		return tp_tcp_write_all_counted(t->fd, iov, iovcnt, stop, progress);

	size_t fill = 0;
	int err, calls = 0;
	for (int i = 0; i < iovcnt; i++) {
		const uint8_t *p = iov[i].iov_base;
		size_t n = iov[i].iov_len;
		if (n == 0)
			continue;
		if (n < GATHER_MIN && fill + n <= GATHER_BUF) {
			memcpy(t->gather + fill, p, n);
			fill += n;
			continue;
		}
		if (fill) {
			/* Fill the record up with the start of this buffer: a frame's
			 * header then travels in the payload's first record. */
			size_t k = GATHER_BUF - fill < n ? GATHER_BUF - fill : n;
			memcpy(t->gather + fill, p, k);
			if ((err = write_ssl(t, t->gather, fill + k, stop, &calls, progress)) != TRANSPORT_OK)
				return err;
			fill = 0;
			p += k;
			n -= k;
		}
		if (n >= GATHER_MIN || i + 1 == iovcnt) {
			if ((err = write_ssl(t, p, n, stop, &calls, progress)) != TRANSPORT_OK)
				return err;
		} else {
			memcpy(t->gather, p, n);
			fill = n;
		}
	}
	return fill ? write_ssl(t, t->gather, fill, stop, &calls, progress) : TRANSPORT_OK;
}
