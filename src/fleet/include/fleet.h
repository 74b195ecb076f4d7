/* fleet.h: clsd --fleet: fleet policies from etcd applied as policies on this node, its record and its
 * status of each policy written back under its lease. */
#pragma once

#include <systemd/sd-event.h>

#include "daemon.h"
#include "etcd.h"
#include "signature.h"

typedef struct FleetConfig {
        const char *urls; /* "http://h:2379[,…]"; NULL: no fleet */
        const char *prefix; /* NULL: ETCD_PREFIX_DEFAULT */
        const char *node; /* NULL: the host name */
        const char *labels; /* "k=v,…" */
        EtcdCredentials creds;
        unsigned lease_ttl; /* seconds; 0: sized by the fleet (fleet_lease_ttl()) */
        /* credentials that may write the fleet's policies are refused (the node stops) unless this */
        bool allow_writer;
        /* only policies signed by one of trusted_keys (clsctl fleet apply --sign) are applied */
        bool require_signed;
        const TrustedKeys *trusted_keys;
        /* where this node's API (and its /metrics) is reached, "https://HOST:PORT", in its record for
         * clsctl fleet targets and top; NULL: not said */
        const char *advertise;
} FleetConfig;

typedef struct Fleet Fleet;

/* Checks the configuration (-EINVAL with a message); nothing is contacted before fleet_start(). */
int fleet_new(Manager *m, sd_event *event, const FleetConfig *c, Fleet **ret, Error *reterr);
/* Once the daemon is ready: connects, and keeps reconnecting with backoff whatever happens. */
void fleet_start(Fleet *f);
Fleet *fleet_free(Fleet *f);
DEFINE_TRIVIAL_CLEANUP_FUNC(Fleet *, fleet_free);
