/* See lib_handles.h. A hash table of ids, chained in buckets. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "lib_handles.h"
#include "rt.h"

#define NBUCKETS 256 /* PyTorch keeps a few handles and a few descriptors alive */

typedef struct fe_lib_obj {
	uint64_t id;
	int kind;
	int dev;
	uint64_t state[FE_LIB_STATE_WORDS];
	fe_lib_buf hist;  /* fe_lib_record */
	int hist_dropped; /* it grew past FE_LIB_MAX_HISTORY */
	struct fe_lib_obj *next;
} fe_lib_obj;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static fe_lib_obj *buckets[NBUCKETS];

static fe_lib_obj **slot_locked(uint64_t id)
{
	fe_lib_obj **pp = &buckets[(id ^ (id >> 8)) % NBUCKETS];
	while (*pp && (*pp)->id != id)
		pp = &(*pp)->next;
	return pp;
}

uint64_t fe_lib_new(int kind, int dev)
{
	fe_lib_obj *o = calloc(1, sizeof(*o));
	if (!o)
		return 0;
	o->id = fe_rt_new_id();
	o->kind = kind;
	o->dev = dev;
	pthread_mutex_lock(&lock);
	fe_lib_obj **pp = slot_locked(o->id);
	o->next = *pp;
	*pp = o;
	pthread_mutex_unlock(&lock);
	return o->id;
}

void fe_lib_forget(uint64_t id)
{
	pthread_mutex_lock(&lock);
	fe_lib_obj **pp = slot_locked(id), *o = *pp;
	if (o)
		*pp = o->next;
	pthread_mutex_unlock(&lock);
	if (o)
		free(o->hist.p);
	free(o);
}

uint64_t fe_lib_state(uint64_t id, int w)
{
	pthread_mutex_lock(&lock);
	fe_lib_obj *o = *slot_locked(id);
	uint64_t v = o ? o->state[w] : 0;
	pthread_mutex_unlock(&lock);
	return v;
}

void fe_lib_set_state(uint64_t id, int w, uint64_t v)
{
	pthread_mutex_lock(&lock);
	fe_lib_obj *o = *slot_locked(id);
	if (o)
		o->state[w] = v;
	pthread_mutex_unlock(&lock);
}

int fe_lib_buf_put(fe_lib_buf *b, const void *p, size_t n)
{
	if (!n)
		return 0;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 64;
		while (cap < b->len + n)
			cap *= 2;
		uint8_t *q = realloc(b->p, cap);
		if (!q)
			return -1;
		b->p = q;
		b->cap = cap;
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
	return 0;
}

void fe_lib_record(uint64_t id, uint32_t op, const void *args, size_t len)
{
	uint32_t head[2] = {op, (uint32_t)len};
	pthread_mutex_lock(&lock);
	fe_lib_obj *o = *slot_locked(id);
	if (o && !o->hist_dropped) {
		if (o->hist.len + sizeof(head) + len > FE_LIB_MAX_HISTORY || fe_lib_buf_put(&o->hist, head, sizeof(head)) ||
		    fe_lib_buf_put(&o->hist, args, len)) {
			o->hist_dropped = 1;
			free(o->hist.p);
			o->hist = (fe_lib_buf){0};
		}
	}
	pthread_mutex_unlock(&lock);
}

int fe_lib_history(uint64_t id, fe_lib_buf *b)
{
	pthread_mutex_lock(&lock);
	fe_lib_obj *o = *slot_locked(id);
	uint64_t n = o ? o->hist.len : 0;
	int r = !o || o->hist_dropped || fe_lib_buf_put(b, &n, sizeof(n)) || fe_lib_buf_put(b, o->hist.p, o->hist.len)
			? -1
			: 0;
	pthread_mutex_unlock(&lock);
	return r;
}

/* The object's kind and device; -1 and -1 if it is unknown. */
static void kind_dev(uint64_t id, int *kind, int *dev)
{
	pthread_mutex_lock(&lock);
	fe_lib_obj *o = *slot_locked(id);
	*kind = o ? o->kind : -1;
	*dev = o ? o->dev : -1;
	pthread_mutex_unlock(&lock);
}

int fe_lib_kind(uint64_t id)
{
	int k, d;
	kind_dev(id, &k, &d);
	return k;
}

int fe_lib_dev(uint64_t id)
{
	int k, d;
	kind_dev(id, &k, &d);
	return d;
}
