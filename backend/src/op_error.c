/* error_string: the driver's text for a CUresult, so the client's
 * cudaGetErrorString says what the GPU's own runtime would. */
#include "driver.h"
#include "ops.h"

int be_op_error_string(be_session *s, be_req *rq, int32_t code)
{
	const char *text = NULL;
	CUresult st = be_drv.cuGetErrorString((CUresult)code, &text);
	if (st != CUDA_SUCCESS || !text)
		return st != CUDA_SUCCESS ? st : CUDA_ERROR_INVALID_VALUE;
	proto_msg *m = be_reply_begin(s, rq, 1);
	proto_msg_str(m, text);
	return be_reply_end(s, rq, m, NULL, 0);
}
