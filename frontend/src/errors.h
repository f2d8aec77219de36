#ifndef FE_ERRORS_H
#define FE_ERRORS_H
#include <stddef.h>
struct fe_error_text {
	int code;
	const char *name, *text;
};
/* gen/error_names.c: the runtime's codes (cudaError_t) and the driver's (CUresult). */
extern const struct fe_error_text fe_error_texts[];
extern const size_t fe_error_texts_n;
extern const struct fe_error_text fe_drv_error_texts[];
extern const size_t fe_drv_error_texts_n;

/* rt_error_name.c: the entry for code, NULL if none. */
const struct fe_error_text *fe_error_lookup(const struct fe_error_text *table, size_t n, int code);
/* rt_error.c: the GPU node driver's cuGetErrorString text for a code, asked once and kept;
 * NULL when the node cannot be asked. */
const char *fe_error_server_text(int code);
/* The name of a status as the call channel returns it (fe_conn_call), which
 * carries several spaces in one int: a CUresult from the server (> 0),
 * FE_EDEAD, or a transport or protocol error (transport_err_name). For logs. */
const char *fe_status_name(int status);
#endif
