/*
 * Tickets for server to server copies: B gives the client one for a range of
 * one of its session's devices; whoever presents it on B's peer listener
 * (server A, sent by the client) may write that range, once, within
 * BE_PEER_TICKET_MS. 128 bits from getrandom, compared in constant time,
 * so a ticket cannot be guessed in its life. Spent and expired tickets stay
 * a while so that a refusal says why (used, expired), then their slot is
 * taken again. One table per process: a session process has one session; a
 * thread-isolation server all of its sessions' tickets.
 */
#include "peer.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

typedef struct slot {
	uint8_t t[BE_PEER_TICKET_LEN];
	be_peer_grant g;
	uint64_t expires_ns;
	int state; /* 0 free, 1 issued, 2 spent */
} slot;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static slot tab[BE_PEER_MAX_TICKETS];

/* BE_PEER_TICKET_MS, or REMOTE_GPUD_PEER_TICKET_MS (tests of expiry). */
static uint64_t life_ns(void)
{
	static uint64_t ns;
	if (!ns) {
		const char *e = getenv("REMOTE_GPUD_PEER_TICKET_MS");
		unsigned long ms = e && *e ? strtoul(e, NULL, 10) : 0;
		ns = (ms ? ms : BE_PEER_TICKET_MS) * 1000000ull;
	}
	return ns;
}

static int same(const uint8_t *a, const uint8_t *b)
{
	uint8_t d = 0;
	for (int i = 0; i < BE_PEER_TICKET_LEN; i++)
		d |= a[i] ^ b[i];
	return d == 0;
}

int be_peer_ticket_issue(const be_peer_grant *g, uint8_t out[BE_PEER_TICKET_LEN])
{
	uint64_t now = rg_clock_ns();
	if (getrandom(out, BE_PEER_TICKET_LEN, 0) != BE_PEER_TICKET_LEN)
		return CUDA_ERROR_OPERATING_SYSTEM;
	pthread_mutex_lock(&mu);
	slot *free_slot = NULL;
	for (int i = 0; i < BE_PEER_MAX_TICKETS && !free_slot; i++)
		if (tab[i].state == 0 || now > tab[i].expires_ns + 2 * life_ns())
			free_slot = &tab[i];
	for (int i = 0; i < BE_PEER_MAX_TICKETS && !free_slot; i++)
		if (tab[i].state == 2 || now > tab[i].expires_ns)
			free_slot = &tab[i]; /* a spent or dead one says less when refused */
	if (free_slot) {
		memcpy(free_slot->t, out, BE_PEER_TICKET_LEN);
		free_slot->g = *g;
		free_slot->expires_ns = now + life_ns();
		free_slot->state = 1;
	}
	pthread_mutex_unlock(&mu);
	return free_slot ? 0 : CUDA_ERROR_OUT_OF_MEMORY;
}

int be_peer_ticket_take(const uint8_t t[BE_PEER_TICKET_LEN], be_peer_grant *g, const char **why)
{
	static const uint8_t zero[BE_PEER_TICKET_LEN];
	uint64_t now = rg_clock_ns();
	int r = CUDA_ERROR_NOT_PERMITTED;
	*why = "unknown ticket";
	if (same(t, zero))
		return r;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < BE_PEER_MAX_TICKETS; i++) {
		slot *e = &tab[i];
		if (e->state == 0 || !same(e->t, t))
			continue;
		if (e->state == 2)
			*why = "ticket already used";
		else if (now > e->expires_ns)
			*why = "ticket expired";
		else {
			*g = e->g;
			r = 0;
		}
		e->state = 2;
		break;
	}
	pthread_mutex_unlock(&mu);
	return r;
}

void be_peer_ticket_forget(const be_session *s)
{
	pthread_mutex_lock(&mu);
	for (int i = 0; i < BE_PEER_MAX_TICKETS; i++)
		if (tab[i].state && tab[i].g.s == s)
			memset(&tab[i], 0, sizeof(tab[i]));
	pthread_mutex_unlock(&mu);
}
