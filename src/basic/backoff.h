/* backoff.h: the one backoff of clsd and clsctl. After each failure a delay twice the last (the first
 * is min), at most max; a success resets it, or eases it (halved) where the failures came from a load
 * that passes. Drawn from its upper half when the callers are many (a fleet's nodes that failed together
 * do not come back together), exact where one caller waits alone (an interface's reconcile). The queue's
 * retries, the fleet's comebacks and failed groups, and both etcd clients' spacing use it. A zeroed
 * Backoff is one with no failure yet; min and max are the caller's (a fleet's size may move max). */
#pragma once

#include <stdint.h>

typedef struct Backoff {
        uint64_t usec; /* the last delay (0: none since the last success) */
} Backoff;

/* The next delay: doubled, between min and max. */
uint64_t backoff_next(Backoff *b, uint64_t min, uint64_t max);
/* The next delay drawn from [d/2, d] of backoff_next()'s d. */
uint64_t backoff_next_jittered(Backoff *b, uint64_t min, uint64_t max);
/* A success: the next failure starts again from min. */
void backoff_reset(Backoff *b);
/* An answer under load: half the delay (under min: none). */
void backoff_ease(Backoff *b, uint64_t min);
