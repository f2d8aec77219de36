/*
 * Admission of connections (admit.c): connection limits, total and per source
 * address, and the back-off after wrong tokens. Every function is thread-safe.
 * peer is "host:port" (or "[v6]:port"); the source is its host part.
 */
#ifndef BE_ADMIT_H
#define BE_ADMIT_H

#include <stdint.h>

/* Limits, 0 for none. Until this is called there are none (session processes
 * serve the one connection the supervisor admitted). */
void be_admit_init(int max_conns, int max_per_source);
/* A connection from peer: 0 admitted (release it later), or -1 refused (it is
 * logged, at most once a second): close it at once. */
int be_admit_take(const char *peer);
void be_admit_release(const char *peer);
/* peer presented a wrong token: its source is refused for a while, longer after
 * each failure in a row. */
void be_admit_auth_failed(const char *peer);

typedef struct be_admit_counts {
	int connections;          /* admitted and live */
	uint64_t refused_limit;   /* over --max-connections or --max-per-source */
	uint64_t refused_backoff; /* from a source in back-off */
	uint64_t auth_failures;   /* wrong tokens */
} be_admit_counts;
be_admit_counts be_admit_get_counts(void);

#endif
