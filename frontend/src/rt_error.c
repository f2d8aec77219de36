/*
 * Error strings (the names: rt_error_name.c). They come from the GPU node's
 * driver (cuGetErrorString: the text its own runtime prints), asked once per
 * code and kept; codes the driver does not know (runtime-only ones) fall back
 * to the toolkit header's description.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "rt.h"

#define MAX_CACHED 64

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	int code;
	char *text;
} cache[MAX_CACHED];
static int ncached;

static char *driver_text(int code)
{
	fe_device *d = fe_rt_device(0);
	if (!d)
		return NULL;
	proto_msg m;
	proto_msg_begin(&m, PROTO_OP_ERROR_STRING, fe_conn_next_seq(d->conn), 1);
	proto_msg_i64(&m, code);
	fe_reply r;
	if (fe_conn_call(d->conn, &m, NULL, 0, NULL, 0, &r) != 0)
		return NULL;
	const char *s;
	size_t n;
	char *text = NULL;
	if (proto_arg_str(&r.view, PROTO_REPLY_FIRST, &s, &n) == PROTO_OK && (text = malloc(n + 1))) {
		memcpy(text, s, n);
		text[n] = 0;
	}
	fe_reply_free(&r);
	return text;
}

const char *fe_error_server_text(int code)
{
	pthread_mutex_lock(&lock);
	for (int i = 0; i < ncached; i++)
		if (cache[i].code == code) {
			pthread_mutex_unlock(&lock);
			return cache[i].text;
		}
	pthread_mutex_unlock(&lock);
	char *text = driver_text(code);
	if (!text)
		return NULL;
	pthread_mutex_lock(&lock);
	for (int i = 0; i < ncached; i++)
		if (cache[i].code == code) { /* another thread was first */
			free(text);
			text = cache[i].text;
			pthread_mutex_unlock(&lock);
			return text;
		}
	if (ncached < MAX_CACHED)
		cache[ncached++] = (typeof(cache[0])){code, text};
	pthread_mutex_unlock(&lock);
	return text; /* beyond the cache: kept for the process's life, like the others */
}

const char *cudaGetErrorString(cudaError_t error)
{
	const char *text = fe_error_server_text(error);
	if (!text) {
		const struct fe_error_text *t = fe_error_lookup(fe_error_texts, fe_error_texts_n, error);
		return t ? t->text : "unrecognized error code";
	}
	return text;
}
