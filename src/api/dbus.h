/* dbus.h: what the files of clsd's D-Bus face share: the bus object, the link objects' paths, who a
 * caller is (dbus-auth.c), the link objects (dbus-link.c) and the announcements of changes
 * (dbus-announce.c); dbus.c puts them on the bus. */
#pragma once

#include <systemd/sd-bus.h>

#include "api-internal.h"

#define DBUS_NAME "org.clsd1"
#define MANAGER_PATH "/org/clsd1"
#define MANAGER_IFACE "org.clsd1.Manager"
#define LINK_PREFIX "/org/clsd1/link"
#define LINK_IFACE "org.clsd1.Link"

/* A link object's changes since the last announcement, gathered as they happen (IfaceChange flags). */
typedef struct LinkPending {
        char *key; /* "eth0", "NETNS/eth0" */
        unsigned changes;
} LinkPending;

struct ApiDbus {
        Api *api;
        sd_bus *bus;
        sd_event_source *flush;
        /* The link objects announced (InterfacesAdded), by key: what InterfacesRemoved may name. */
        char **announced;
        size_t n_announced;
        LinkPending *pending;
        size_t n_pending;
        uint32_t count;
        bool degraded;
        /* dbus-counters.c: the clients that asked for counters (SubscribeCounters), and the tick that
         * tells them of each link whose counters moved, at most once a second */
        sd_bus_track *counter_clients;
        sd_event_source *counter_tick;
        struct CounterSeen *seen;
        size_t n_seen;
        uint64_t fleet_seen; /* a digest of the fleet's status as last told */
};

/* dbus-auth.c */
void bus_who(sd_bus_message *m, char *buf, size_t size);
void bus_audit(ApiDbus *b, sd_bus_message *m, unsigned status, const char *code);
/* 1 if the caller may read (or change), else <0 with error set. */
int require_reader(const Api *a, sd_bus_message *m, sd_bus_error *error);
int require_privilege(const Api *a, sd_bus_message *m, sd_bus_error *error);

/* dbus-link.c */
void link_key(const Iface *it, char *buf, size_t size);
char *key_path(const char *key);
char *link_path(const Iface *it);
Iface *iface_by_key(Manager *d, const char *key);
/* Whether an interface is failed (the manager's Degraded). */
bool daemon_degraded(Manager *d);
int link_find(sd_bus *bus, const char *path, const char *interface, void *userdata, void **found,
              sd_bus_error *error);
int link_enumerate(sd_bus *bus, const char *prefix, void *userdata, char ***nodes, sd_bus_error *error);
extern const sd_bus_vtable link_vtable[];
/* The link's Counters into reply (if not NULL), and a digest of them that changes when they do. */
int link_counters_append(Manager *d, Iface *it, sd_bus_message *reply, uint64_t *ret_digest);

/* dbus-counters.c: Manager.SubscribeCounters(), and the tick while a subscriber is on the bus. */
int method_subscribe_counters(sd_bus_message *m, void *userdata, sd_bus_error *error);
void counters_done(ApiDbus *b);

/* dbus-announce.c: the daemon tells of each change where it happens; gathered and announced once per
 * turn of the loop. */
void on_change(Manager *m, Iface *it, unsigned changes, void *userdata);
/* A link object is known announced (at start: every one there is). */
int announced_add(ApiDbus *b, const char *key);
int on_flush(sd_event_source *s, void *userdata);
