/* backoff.c: a doubling delay with jitter (backoff.h). */
#include <stdlib.h>

#include "backoff.h"
#include "macros.h"

uint64_t backoff_next(Backoff *b, uint64_t min, uint64_t max) {
        max = MAX(max, min);
        b->usec = b->usec ? MIN(b->usec * 2, max) : min;
        return b->usec;
}

uint64_t backoff_next_jittered(Backoff *b, uint64_t min, uint64_t max) {
        uint64_t d = backoff_next(b, min, max);

        return d / 2 + (uint64_t) random() % (d / 2 + 1);
}

void backoff_reset(Backoff *b) {
        b->usec = 0;
}

void backoff_ease(Backoff *b, uint64_t min) {
        b->usec /= 2;
        if (b->usec < min)
                b->usec = 0;
}
