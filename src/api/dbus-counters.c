/* dbus-counters.c: live counters (and the node's fleet state) over D-Bus without polling by clients. A
 * client calls Manager.SubscribeCounters() (as systemd's Subscribe()); while one that did is on the bus
 * (sd_bus_track follows it), clsd reads each link's counters once a second and sends PropertiesChanged for
 * Counters of the links whose counters moved: the kernel raises no event when a program runs, so clsd reads,
 * once, for every client. Nobody subscribed: no tick, no read. */
#include <stdlib.h>
#include <string.h>

#include "dbus.h"
#include "hashmap.h"
#include "log.h"
#include "daemon-fleet.h"

#define COUNTER_TICK_USEC (1000 * 1000ULL)

typedef struct CounterSeen {
        char key[NETNS_NAME_MAX + IFNAME_MAX + 4];
        uint64_t digest;
} CounterSeen;

static CounterSeen *seen_find(ApiDbus *b, const char *key) {
        for (size_t i = 0; i < b->n_seen; i++)
                if (streq(b->seen[i].key, key))
                        return &b->seen[i];
        return NULL;
}

/* The node's fleet state (Fleet, FleetRollouts, FleetPolicies) told when it changed. */
static void fleet_tick(ApiDbus *b) {
        const DaemonFleet *f = daemon_fleet(b->api->daemon);
        uint64_t h = 0;

        h = hash_bytes(&f->enabled, sizeof(f->enabled), h);
        h = hash_bytes(&f->connected, sizeof(f->connected), h);
        h = hash_bytes(&f->revision, sizeof(f->revision), h);
        h = hash_bytes(f->node, strlen(f->node), h);
        h = hash_bytes(f->last_error, strlen(f->last_error), h);
        for (size_t i = 0; i < f->n_rollouts; i++)
                h = hash_bytes(&f->rollouts[i], sizeof(f->rollouts[i]), h);
        for (size_t i = 0; i < f->n_policies; i++)
                h = hash_bytes(&f->policies[i], sizeof(f->policies[i]), h);
        if (h == b->fleet_seen)
                return;
        b->fleet_seen = h;
        (void) sd_bus_emit_properties_changed(b->bus, MANAGER_PATH, MANAGER_IFACE, "Fleet", "FleetRollouts",
                                              "FleetPolicies", NULL);
}

/* The body of a link's PropertiesChanged for Counters: the counters appended by one read of the kernel,
 * which also gives the digest. */
static int counters_body(ApiDbus *b, Iface *it, sd_bus_message *m, uint64_t *digest) {
        int r;

        r = sd_bus_message_append(m, "s", LINK_IFACE);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(m, 'a', "{sv}");
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(m, 'e', "sv");
        if (r < 0)
                return r;
        r = sd_bus_message_append(m, "s", "Counters");
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(m, 'v', "a(ssbttt)");
        if (r < 0)
                return r;
        r = link_counters_append(b->api->daemon, it, m, digest);
        if (r < 0)
                return r;
        for (int k = 0; k < 3; k++) { /* the variant, the entry, the array */
                r = sd_bus_message_close_container(m);
                if (r < 0)
                        return r;
        }
        return sd_bus_message_append(m, "as", 0); /* nothing invalidated */
}

/* The link's PropertiesChanged for Counters, made from one read of the kernel that also gives the
 * digest (so that the counters are read once a tick, not again by a getter); NULL in *ret on failure. */
static void counters_signal(ApiDbus *b, Iface *it, const char *path, uint64_t *digest,
                            sd_bus_message **ret) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;

        *ret = NULL;
        if (sd_bus_message_new_signal(b->bus, &m, path, "org.freedesktop.DBus.Properties",
                                      "PropertiesChanged") < 0 ||
            counters_body(b, it, m, digest) < 0) {
                (void) link_counters_append(b->api->daemon, it, NULL, digest);
                return;
        }
        *ret = TAKE_PTR(m);
}

static int on_tick(sd_event_source *s, uint64_t usec, void *userdata) {
        ApiDbus *b = userdata;
        Manager *d = b->api->daemon;
        size_t n = daemon_iface_count(d);
        CounterSeen *v;

        if (!b->counter_clients || sd_bus_track_count(b->counter_clients) == 0) {
                (void) sd_event_source_set_enabled(s, SD_EVENT_OFF);
                return 0;
        }
        fleet_tick(b);
        v = calloc(n + 1, sizeof(CounterSeen));
        for (size_t i = 0; v && i < n; i++) {
                Iface *it = daemon_iface_at(d, i);
                _cleanup_free_ char *path = link_path(it);
                sd_bus_message *m = NULL;
                CounterSeen *old;
                link_key(it, v[i].key, sizeof(v[i].key));
                if (!path)
                        continue;
                counters_signal(b, it, path, &v[i].digest, &m);
                old = seen_find(b, v[i].key);
                if (m && !(old && old->digest == v[i].digest))
                        (void) sd_bus_send(b->bus, m, NULL);
                sd_bus_message_unref(m);
        }
        if (v) {
                free(b->seen);
                b->seen = v;
                b->n_seen = n;
        }
        (void) sd_event_source_set_time(s, usec + COUNTER_TICK_USEC);
        return 0;
}

static int on_clients_gone(sd_bus_track *t, void *userdata) {
        ApiDbus *b = userdata;

        (void) t;
        log_debug("D-Bus: no counter subscriber left");
        if (b->counter_tick)
                (void) sd_event_source_set_enabled(b->counter_tick, SD_EVENT_OFF);
        return 0;
}

int method_subscribe_counters(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        ApiDbus *b = userdata;
        uint64_t now;
        int r;

        (void) error;
        if (!b->counter_clients) {
                r = sd_bus_track_new(b->bus, &b->counter_clients, on_clients_gone, b);
                if (r < 0)
                        return r;
        }
        r = sd_bus_track_add_sender(b->counter_clients, m);
        if (r < 0)
                return r;
        if (!b->counter_tick) {
                r = sd_event_now(b->api->event, CLOCK_MONOTONIC, &now);
                if (r < 0)
                        return r;
                r = sd_event_add_time(b->api->event, &b->counter_tick, CLOCK_MONOTONIC,
                                      now + COUNTER_TICK_USEC, 0, on_tick, b);
                if (r < 0)
                        return r;
        }
        r = sd_event_source_set_enabled(b->counter_tick, SD_EVENT_ON);
        if (r < 0)
                return r;
        bus_audit(b, m, 200, NULL);
        return sd_bus_reply_method_return(m, NULL);
}

void counters_done(ApiDbus *b) {
        sd_event_source_disable_unref(b->counter_tick);
        sd_bus_track_unref(b->counter_clients);
        free(b->seen);
        b->counter_tick = NULL;
        b->counter_clients = NULL;
        b->seen = NULL;
}
