/*
 * Frames whose payload is sent in parts as it becomes ready
 * (transport_sendv_parts): the helper a provider with
 * TRANSPORT_CAP_SEND_PARTS runs under its send lock, and the fallback of the
 * others, which wait for the whole payload and send it as one frame.
 */
#include "transport_int.h"

#include <string.h>

/* ready's answer checked: more than sent, at most len. */
static int ready_next(transport_ready_fn ready, void *ctx, size_t sent, size_t len, size_t *out)
{
	int64_t r = ready(ctx, sent);
	if (r < 0 || (uint64_t)r <= sent || (uint64_t)r > len)
		return TRANSPORT_EIO;
	*out = (size_t)r;
	return TRANSPORT_OK;
}

int tp_send_parts(tp_write_fn w, void *wctx, const struct iovec *iov, int iovcnt, const void *payload, size_t len,
		  size_t ready0, transport_ready_fn ready, void *ctx)
{
	struct iovec v[TRANSPORT_PARTS_IOV + 1];
	const char *p = payload;
	size_t sent = ready0 < len ? ready0 : len;
	int err;

	if (iovcnt < 0 || iovcnt > TRANSPORT_PARTS_IOV)
		return TRANSPORT_ENOTSUP;
	memcpy(v, iov, (size_t)iovcnt * sizeof(*v));
	v[iovcnt] = (struct iovec){(void *)p, sent};
	if ((err = w(wctx, v, iovcnt + 1)))
		return err;
	while (sent < len) {
		size_t next;
		if ((err = ready_next(ready, ctx, sent, len, &next)))
			return err;
		struct iovec part = {(void *)(p + sent), next - sent};
		if ((err = w(wctx, &part, 1)))
			return err;
		sent = next;
	}
	return TRANSPORT_OK;
}

transport_err transport_sendv_parts(transport_conn *c, const struct iovec *iov, int n, const void *payload, size_t len,
				    size_t ready0, transport_ready_fn ready, void *ctx)
{
	if (c->ops->sendv_parts)
		return c->ops->sendv_parts(c, iov, n, payload, len, ready0, ready, ctx);
	if (n < 0 || n > TRANSPORT_PARTS_IOV)
		return TRANSPORT_ENOTSUP;
	size_t have = ready0 < len ? ready0 : len;
	while (have < len) {
		if (ready_next(ready, ctx, have, len, &have)) {
			c->ops->shutdown(c);
			return TRANSPORT_EIO;
		}
	}
	struct iovec v[TRANSPORT_PARTS_IOV + 1];
	memcpy(v, iov, (size_t)n * sizeof(*v));
	v[n] = (struct iovec){(void *)payload, len};
	return c->ops->sendv(c, v, n + 1);
}
