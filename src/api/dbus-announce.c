/* dbus-announce.c: the daemon tells of each change where it happens (a change listener); the changes of a
 * turn of the loop are gathered per link object and announced once: InterfacesAdded and InterfacesRemoved
 * of link objects, PropertiesChanged with the properties that changed. */
#include <linux/capability.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>

#include "api-internal.h"
#include "log.h"

#include "log.h"
#include "dbus.h"

/* ---- change announcements: the daemon tells of each change where it happens (on_change); what
 * gathered during a turn of the loop goes out once, at its end (on_flush). ---- */

static ssize_t announced_find(ApiDbus *b, const char *key) {
        for (size_t i = 0; i < b->n_announced; i++)
                if (streq(b->announced[i], key))
                        return (ssize_t) i;
        return -1;
}

int announced_add(ApiDbus *b, const char *key) {
        char **v = realloc(b->announced, (b->n_announced + 1) * sizeof(*v));

        if (!v)
                return -ENOMEM;
        b->announced = v;
        if (!(v[b->n_announced] = strdup(key)))
                return -ENOMEM;
        b->n_announced++;
        return 0;
}

void on_change(Manager *m, Iface *it, unsigned changes, void *userdata) {
        ApiDbus *b = userdata;
        char key[NETNS_NAME_MAX + IFNAME_MAX + 4];
        LinkPending *v;

        (void) m;
        link_key(it, key, sizeof(key));
        for (size_t i = 0; i < b->n_pending; i++)
                if (streq(b->pending[i].key, key)) {
                        b->pending[i].changes |= changes;
                        goto armed;
                }
        v = realloc(b->pending, (b->n_pending + 1) * sizeof(*v));
        if (!v)
                return;
        b->pending = v;
        v[b->n_pending] = (LinkPending){ .key = strdup(key), .changes = changes };
        if (!v[b->n_pending].key)
                return;
        b->n_pending++;
armed:
        (void) sd_event_source_set_enabled(b->flush, SD_EVENT_ONESHOT);
}

/* The properties a change touches; Filters is read from the kernel at each Get, so it is only
 * invalidated (the vtable says so), never sent along. */
static void changed_properties(unsigned changes, const char **v) {
        size_t n = 0;

        if (changes & IFACE_CHANGED_STATE) {
                v[n++] = "State";
                v[n++] = "Ifindex";
                v[n++] = "Error";
        }
        if (changes & IFACE_CHANGED_DOCUMENT) {
                v[n++] = "Source";
                v[n++] = "Policies";
        }
        if (changes & IFACE_CHANGED_REPAIRS) {
                v[n++] = "Repairs";
                v[n++] = "LastRepair";
        }
        if (changes & (IFACE_CHANGED_DOCUMENT | IFACE_CHANGED_FILTERS | IFACE_CHANGED_STATE))
                v[n++] = "Filters";
        v[n] = NULL;
}

static void announce(ApiDbus *b, const LinkPending *p) {
        Iface *it = iface_by_key(b->api->daemon, p->key);
        ssize_t k = announced_find(b, p->key);
        _cleanup_free_ char *path = key_path(p->key);

        if (!path)
                return;
        if (k >= 0 && (!it || (p->changes & IFACE_REMOVED))) {
                /* gone (or gone and back: announced as such) */
                (void) sd_bus_emit_interfaces_removed(b->bus, path, LINK_IFACE, NULL);
                free(b->announced[k]);
                b->announced[k] = b->announced[--b->n_announced];
                k = -1;
        }
        if (!it)
                return;
        if (k < 0) {
                if (announced_add(b, p->key) >= 0)
                        (void) sd_bus_emit_interfaces_added(b->bus, path, LINK_IFACE, NULL);
                return;
        }
        const char *props[12];
        changed_properties(p->changes, props);
        if (props[0])
                (void) sd_bus_emit_properties_changed_strv(b->bus, path, LINK_IFACE, (char **) props);
}

int on_flush(sd_event_source *s, void *userdata) {
        ApiDbus *b = userdata;
        Manager *d = b->api->daemon;
        uint32_t count = (uint32_t) daemon_iface_count(d);
        bool degraded = daemon_degraded(d);

        (void) s;
        for (size_t i = 0; i < b->n_pending; i++) {
                announce(b, &b->pending[i]);
                free(b->pending[i].key);
        }
        b->n_pending = 0;
        if (count != b->count || degraded != b->degraded) {
                b->count = count;
                b->degraded = degraded;
                (void) sd_bus_emit_properties_changed(b->bus, MANAGER_PATH, MANAGER_IFACE, "InterfaceCount",
                                                      "Degraded", NULL);
        }
        return 0;
}
