/*
 * The driver's linker for a client (cuLinkCreate .. cuLinkComplete): the client
 * keeps the inputs until cuLinkComplete, then sends them in one request; the
 * server links them with its driver, for its GPU, and answers the image, which
 * the client then loads like any other (by content hash).
 */
#include <inttypes.h>
#include <string.h>

#include "backend.h"
#include "rg_log.h"

#define LINK_MAX_INPUTS 1024
/* The image travels in the reply's msgpack part (bounded by the frame's header
 * limit); a larger one is refused. */
#define LINK_MAX_IMAGE (PROTO_MAX_HDR - 4096)

typedef struct link_input {
	uint32_t type, zero;
	uint64_t len;
} link_input;

static int known_type(uint32_t t)
{
	switch (t) {
	case CU_JIT_INPUT_CUBIN:
	case CU_JIT_INPUT_PTX:
	case CU_JIT_INPUT_FATBINARY:
	case CU_JIT_INPUT_OBJECT:
	case CU_JIT_INPUT_LIBRARY:
		return 1;
	}
	return 0;
}

int be_op_link(be_session *s, be_req *rq, const void *inputs, size_t inputs_len)
{
	uint64_t plen = be_req_payload_len(rq);
	be_buf *pb = be_req_payload(rq);
	if (!be_drv.cuLinkCreate || !be_drv.cuLinkAddData || !be_drv.cuLinkComplete || !be_drv.cuLinkDestroy)
		return CUDA_ERROR_NOT_SUPPORTED;
	size_t n = inputs_len / sizeof(link_input);
	if (inputs_len % sizeof(link_input) || n == 0 || n > LINK_MAX_INPUTS || (plen && !pb->p)) {
		LOG_INFO(BE_LOG, "session %" PRIu64 ": link: malformed input list", s->id);
		return CUDA_ERROR_INVALID_VALUE;
	}
	/* the lengths must add up to the payload, each type one the linker takes */
	uint64_t sum = 0;
	for (size_t i = 0; i < n; i++) {
		link_input in;
		memcpy(&in, (const uint8_t *)inputs + i * sizeof(in), sizeof(in));
		if (!known_type(in.type) || in.zero || in.len == 0 || in.len > plen - sum) {
			LOG_INFO(BE_LOG, "session %" PRIu64 ": link: input %zu: type %u, %" PRIu64 " bytes", s->id, i,
				 in.type, in.len);
			return in.type == CU_JIT_INPUT_NVVM ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_VALUE;
		}
		sum += in.len;
	}
	if (sum != plen)
		return CUDA_ERROR_INVALID_VALUE;

	CUlinkState st;
	CUresult r = be_drv.cuLinkCreate(0, NULL, NULL, &st);
	if (r != CUDA_SUCCESS)
		return r;
	const uint8_t *data = pb->p;
	for (size_t i = 0; i < n && r == CUDA_SUCCESS; i++) {
		link_input in;
		memcpy(&in, (const uint8_t *)inputs + i * sizeof(in), sizeof(in));
		r = be_drv.cuLinkAddData(st, (CUjitInputType)in.type, (void *)data, (size_t)in.len, "input", 0, NULL,
					 NULL);
		data += in.len;
	}
	void *image = NULL;
	size_t size = 0;
	if (r == CUDA_SUCCESS)
		r = be_drv.cuLinkComplete(st, &image, &size);
	if (r == CUDA_SUCCESS && size > LINK_MAX_IMAGE) {
		LOG_WARN(BE_LOG, "session %" PRIu64 ": link: an image of %zu bytes is too large to send", s->id, size);
		r = CUDA_ERROR_NOT_SUPPORTED;
	}
	if (r != CUDA_SUCCESS) {
		be_drv.cuLinkDestroy(st);
		return r;
	}
	proto_msg *m = be_reply_begin(s, rq, 1);
	proto_msg_bin(m, image, size); /* copied into the reply before the state goes */
	be_drv.cuLinkDestroy(st);
	return be_reply_end(s, rq, m, NULL, 0);
}
