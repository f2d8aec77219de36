/*
 * The clients' frame reader (tcp_client.c, shm_client.c): one frame through
 * the provider's own "read exactly n bytes" (transport_int.h).
 */
#include "transport_int.h"

#include <stdlib.h>
#include <string.h>

#include "rg_log.h"

int tp_frame_read(transport_read_fn rd, void *rctx, const char *peer, transport_frame *f,
			 transport_payload_dest_fn dest, void *ctx)
{
	uint8_t hb[PROTO_HDR_SIZE];
	int err;

	memset(f, 0, sizeof(*f));
	if ((err = rd(rctx, hb, sizeof(hb))) != TRANSPORT_OK)
		goto fail;
	if ((err = proto_decode_hdr(hb, &f->hdr)) != PROTO_OK) {
		LOG_WARN("transport", "%s: bad frame header: %s", peer, proto_strerror(err));
		goto fail;
	}
	if (f->hdr.hdr_len && !(f->msg = malloc(f->hdr.hdr_len))) {
		err = TRANSPORT_ENOMEM;
		goto fail;
	}
	if ((err = rd(rctx, f->msg, f->hdr.hdr_len)) != TRANSPORT_OK)
		goto fail;
	if (f->hdr.payload_len > 0) {
		f->payload = dest ? dest(ctx, f) : NULL;
		if ((err = rd(rctx, f->payload, f->hdr.payload_len)) != TRANSPORT_OK)
			goto fail;
	}
	return TRANSPORT_OK;

fail:
	free(f->msg);
	f->msg = NULL;
	f->payload = NULL;
	return err;
}
