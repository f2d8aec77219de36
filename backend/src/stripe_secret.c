/*
 * The stripe secrets (stripe.h): a process-wide table of single-use secrets,
 * each bound to the session that asked for it (op_stripe.c issues them, a
 * stripe connection's thread spends one, stripe_conn.c) and valid
 * BE_STRIPE_SECRET_MS. Spending one joins the connection to its session's
 * stripes (stripe_xfer.c) under the table's lock, so a session that forgets
 * its secrets first (its close) is never joined after.
 */
#include "stripe.h"

#include <pthread.h>
#include <string.h>
#include <sys/random.h>

typedef struct secret {
	uint8_t t[BE_STRIPE_SECRET_LEN];
	be_session *s;
	uint64_t expires_ns;
} secret;

#define NSECRETS (4 * BE_STRIPE_MAX)

static struct {
	pthread_mutex_t mu;
	secret tab[NSECRETS]; /* s NULL: free */
} L = {.mu = PTHREAD_MUTEX_INITIALIZER};

int be_stripe_secret_out(void)
{
	uint64_t now = rg_clock_ns();
	int out = 0;
	pthread_mutex_lock(&L.mu);
	for (int i = 0; i < NSECRETS && !out; i++)
		out = L.tab[i].s && now <= L.tab[i].expires_ns;
	pthread_mutex_unlock(&L.mu);
	return out;
}

int be_stripe_secret_issue(be_session *s, uint8_t out[BE_STRIPE_SECRET_LEN])
{
	uint64_t now = rg_clock_ns();
	if (getrandom(out, BE_STRIPE_SECRET_LEN, 0) != BE_STRIPE_SECRET_LEN)
		return CUDA_ERROR_OPERATING_SYSTEM;
	pthread_mutex_lock(&L.mu);
	secret *e = NULL;
	for (int i = 0; i < NSECRETS && !e; i++)
		if (!L.tab[i].s || now > L.tab[i].expires_ns)
			e = &L.tab[i];
	if (e) {
		memcpy(e->t, out, BE_STRIPE_SECRET_LEN);
		e->s = s;
		e->expires_ns = now + BE_STRIPE_SECRET_MS * 1000000ull;
	}
	pthread_mutex_unlock(&L.mu);
	return e ? 0 : CUDA_ERROR_OUT_OF_MEMORY;
}

be_session *be_stripe_secret_take(const uint8_t t[BE_STRIPE_SECRET_LEN], transport_conn *c)
{
	uint64_t now = rg_clock_ns();
	be_session *s = NULL;
	pthread_mutex_lock(&L.mu);
	for (int i = 0; i < NSECRETS; i++) {
		secret *e = &L.tab[i];
		uint8_t d = 0;
		for (int k = 0; k < BE_STRIPE_SECRET_LEN; k++)
			d |= e->t[k] ^ t[k];
		if (!e->s || d)
			continue;
		/* Joined under the table's lock: the session's close forgets its
		 * secrets under it first, so s is not freed under a new stripe. */
		if (now <= e->expires_ns && be_stripes_join(e->s, c) == 0)
			s = e->s;
		memset(e, 0, sizeof(*e)); /* spent (or expired): never again */
		break;
	}
	pthread_mutex_unlock(&L.mu);
	return s;
}

/* The session's close: its unspent secrets go. */
void be_stripe_secret_forget(const be_session *s)
{
	pthread_mutex_lock(&L.mu);
	for (int i = 0; i < NSECRETS; i++)
		if (L.tab[i].s == s)
			memset(&L.tab[i], 0, sizeof(L.tab[i]));
	pthread_mutex_unlock(&L.mu);
}
