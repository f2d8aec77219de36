/*
 * Device output: what kernels print with printf. The driver keeps it in a
 * buffer on the GPU and writes it to the process's stdout at synchronisation
 * points (a context, stream or event synchronize, a blocking copy, a module
 * unload). A local program sees it on its own stdout; here the driver runs in the
 * server, so a session process points its fd 1 at a memory file, and before each
 * reply (the answer to the call that synchronised) sends what the driver wrote
 * there as a devout event; the client writes it to its stdout before the call
 * returns, in the order a local run prints it.
 *
 * Only session processes (process isolation) do this: their stdout carries
 * nothing else (logging goes to stderr) and belongs to one client. In thread
 * isolation sessions share the process's stdout and its text cannot be told
 * apart, so device output stays on the server's stdout there.
 */

#include "backend.h"

#include <fcntl.h> /* fallocate */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "proto.h"

#define CHUNK (1u << 20) /* the driver's default printf buffer; more goes in several events */

static int enabled;
static off_t sent; /* the file's bytes before this offset went to the client */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

int be_devout_init(void)
{
	int fd = memfd_create("remote-gpud-devout", MFD_CLOEXEC);
	if (fd < 0) {
		LOG_WARN(BE_LOG, "device printf output stays on the server (memfd_create: %m)");
		return -1;
	}
	fflush(stdout);
	if (dup2(fd, STDOUT_FILENO) < 0) {
		LOG_WARN(BE_LOG, "device printf output stays on the server (dup2: %m)");
		close(fd);
		return -1;
	}
	close(fd);
	enabled = 1;
	be_reply_set_before(be_devout_flush); /* before each reply, what the driver wrote */
	return 0;
}

/* One devout event with n bytes of text. */
static int send_text(be_session *s, const void *text, size_t n)
{
	proto_msg m;
	proto_msg_begin(&m, PROTO_OP_DEVOUT, 0, 1);
	proto_msg_bin(&m, text, n);
	return be_event_send(s, &m);
}

void be_devout_flush(be_session *s)
{
	if (!enabled)
		return;
	pthread_mutex_lock(&lock);
	fflush(stdout); /* the driver may write through stdio */
	/* The driver may be writing from another thread (a synchronize on the
	 * waiter) while this one reads: the file is never truncated under it.
	 * Text goes out from where the last flush stopped to the offset now, and
	 * what was sent is punched out of the file (its memory freed, the offsets
	 * kept), so a write landing meanwhile is read by the next flush. */
	off_t end = lseek(STDOUT_FILENO, 0, SEEK_CUR);
	if (end > sent) {
		char *buf = malloc(CHUNK);
		for (off_t at = sent; buf && at < end;) {
			size_t want = end - at < CHUNK ? (size_t)(end - at) : CHUNK;
			ssize_t got = pread(STDOUT_FILENO, buf, want, at);
			if (got <= 0 || send_text(s, buf, (size_t)got) != 0)
				break; /* a lost connection: the text goes with it */
			at += got;
		}
		if (!buf)
			LOG_WARN(BE_LOG, "session %" PRIu64 ": out of memory: %lld bytes of device output dropped", s->id,
				 (long long)(end - sent));
		free(buf);
		if (fallocate(STDOUT_FILENO, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, end) != 0)
			LOG_DEBUG(BE_LOG, "session %" PRIu64 ": device output file: fallocate: %m", s->id);
		sent = end;
	}
	pthread_mutex_unlock(&lock);
}

int be_op_devout(be_session *s, be_req *rq, const void *text, size_t text_len)
{
	LOG_INFO(BE_LOG, "session %" PRIu64 ": devout is an event of the server's, not a request", s->id);
	return CUDA_ERROR_NOT_SUPPORTED;
}
