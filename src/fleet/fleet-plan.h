/* fleet-plan.h: what one etcd revision changed, grouped as the daemon applies it (plan.c, pure) */
#pragma once

#include "fleet-internal.h"

/* ---- plan.c: pure ---- */
/* A fleet policy the daemon holds: its name and the etcd revision it was applied at. */
typedef struct FleetHeld {
        const char *name;
        uint64_t revision;
} FleetHeld;

/* One change to apply: a put (of body) or a removal of name, at revision. */
typedef struct Pending {
        const char *name;
        uint64_t revision;
        json_t *body; /* NULL: a removal */
        const Wanted *put; /* the wanted policy whose etcd revision is put (NULL: a removal, or a revision
                            * it held before) */
} Pending;

/* What converging does next. */
typedef struct FleetStep {
        Pending *changes; /* the next group: every pending change of its revision (n_changes 0: none) */
        size_t n_changes;
        uint64_t retry_usec; /* a blocked group's (UINT64_MAX: none blocked) */
} FleetStep;

/* What differs between etcd (wanted, as last seen at revision) and the daemon (held), by revision: the
 * first group not held back by a retry delay (a failed put's, or failed: the last failed revision's until
 * failed_retry_usec), at now. */
int fleet_plan(const WantedSet *wanted, const FleetHeld *held, size_t n_held, uint64_t revision,
               uint64_t failed_revision, uint64_t failed_retry_usec, uint64_t now, FleetStep *ret);
void fleet_step_done(FleetStep *s);
