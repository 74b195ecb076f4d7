/* fleet.c: clsd --fleet made, started and freed: the node's name and labels checked, the etcd client
 * made (nothing contacted before the start), the daemon told where the fleet's status is, and its
 * interface changes followed into the node's status. The parts are named in fleet-internal.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fleet-internal.h"
#include "log.h"
#include "daemon-fleet.h"
#include "fleet-io.h"
#include "fleet-rollouts.h"
#include "fleet-session.h"

static void on_daemon_change(Manager *m, Iface *it, unsigned changes, void *userdata) {
        Fleet *f = userdata;

        (void) m, (void) it, (void) changes;
        if (f->state == FLEET_WATCHING)
                status_later(f);
}

/* The node's name: --node, or the host name up to its first dot. */
static int node_name(const FleetConfig *c, char **ret, Error *reterr) {
        char host[256];

        if (!c->node) {
                if (gethostname(host, sizeof(host)) < 0)
                        return error_set(reterr, errno, ERROR_INTERNAL_ERROR,
                                         "cannot read the host name: %m");
                host[sizeof(host) - 1] = 0;
                char *dot = strchr(host, '.');
                if (dot)
                        *dot = 0;
        }
        if (!fleet_node_name_valid(c->node ?: host))
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                 "--node %s: 1 to %d characters of A-Z a-z 0-9 - _ . (give --node)",
                                 c->node ?: host, FLEET_NODE_NAME_MAX);
        if (!(*ret = strdup(c->node ?: host)))
                return error_oom(reterr);
        return 0;
}

int fleet_new(Manager *m, sd_event *event, const FleetConfig *c, Fleet **ret, Error *reterr) {
        _cleanup_(fleet_freep) Fleet *f = calloc(1, sizeof(*f));
        _cleanup_error_ Error e = ERROR_NULL;
        int r;

        if (!f)
                return error_oom(reterr);
        f->m = m;
        f->event = sd_event_ref(event);
        if (c->prefix && !fleet_prefix_valid(c->prefix))
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                 "--fleet-prefix %s: expected a path that starts and ends with \"/\"",
                                 c->prefix);
        r = node_name(c, &f->node, reterr);
        if (r < 0)
                return r;
        if (fleet_labels_parse(c->labels, &f->labels, &f->n_labels, reterr) < 0)
                return -EINVAL;
        if (c->advertise) {
                const char *rest =
                        startswith(c->advertise, "https://") ?: startswith(c->advertise, "http://");
                if (!rest || !*rest || strlen(c->advertise) > 256 || strpbrk(c->advertise, " \"\\?#"))
                        return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                         "--advertise %s: expected the URL this node's API is reached at, "
                                         "https://HOST:PORT",
                                         c->advertise);
                if (!(f->advertise = strdup(c->advertise)))
                        return error_oom(reterr);
        }
        if (!(f->prefix = strdup(c->prefix ?: ETCD_PREFIX_DEFAULT)))
                return error_oom(reterr);
        f->ttl_configured = c->lease_ttl;
        f->ttl = fleet_lease_ttl(c->lease_ttl, 0, 0);
        f->allow_writer = c->allow_writer;
        f->require_signed = c->require_signed;
        f->trusted_keys = c->trusted_keys;
        if (!(f->accepted = json_object()))
                return error_oom(reterr);
        r = etcd_async_new(event, c->urls, &c->creds, &f->etcd, &e);
        if (r < 0)
                return r == -EINVAL ? error_set(reterr, EINVAL, e.code, "--fleet: %s", strna(e.message))
                                    : error_set(reterr, e.error, e.code, "%s", strna(e.message));
        srandom((unsigned) (getpid() ^ (uintptr_t) f ^ (uint64_t) time(NULL)));
        if (daemon_add_change_listener(m, on_daemon_change, f) < 0)
                return error_oom(reterr);
        f->status.enabled = true;
        f->status.revision = daemon_fleet_revision(m);
        snprintf(f->status.node, sizeof(f->status.node), "%s", f->node);
        daemon_set_fleet(m, &f->status);
        *ret = TAKE_PTR(f);
        return 0;
}

void fleet_start(Fleet *f) {
        log_info("fleet: node %s, %zu label(s), etcd %s, prefix %s", f->node, f->n_labels,
                 etcd_async_endpoint(f->etcd), f->prefix);
        /* what the daemon probed of the kernel at its start: the selectors' gates read it */
        snprintf(f->kernel, sizeof(f->kernel), "%s", daemon_kernel_release(f->m));
        f->facts = (FleetNodeFacts){ .kernel = f->kernel,
                                     .tcx = daemon_has_tcx(f->m),
                                     .act_bpf = daemon_has_act_bpf(f->m) };
        if (status_start(f) < 0 || apply_start(f) < 0 || rollout_start(f) < 0 || session_start(f) < 0)
                log_error("fleet: cannot start: out of memory");
}

Fleet *fleet_free(Fleet *f) {
        if (!f)
                return NULL;
        if (f->m) {
                daemon_remove_change_listener(f->m, on_daemon_change, f);
                if (f->status.enabled)
                        daemon_set_fleet(f->m, NULL);
        }
        etcd_async_free(f->etcd);
        rollout_free(f);
        session_free(f);
        apply_free(f);
        status_free(f);
        wanted_clear(&f->wanted);
        free(f->prefix);
        free(f->node);
        free(f->labels);
        free(f->advertise);
        json_decref(f->accepted);
        sd_event_unref(f->event);
        free(f);
        return NULL;
}
