/* dbus-link.c: one object per document's interface under /org/clsd1/link/ (its name, namespace, state,
 * counts and document), found and listed from the daemon's view. */
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
#include "hashmap.h"
#include "daemon-policies.h"

Iface *iface_by_key(Manager *d, const char *key) {
        const char *slash = strchr(key, '/');
        char netns[NETNS_NAME_MAX + 2];

        if (!slash)
                return daemon_iface_get(d, NULL, key);
        if ((size_t) (slash - key) >= sizeof(netns))
                return NULL;
        memcpy(netns, key, (size_t) (slash - key));
        netns[slash - key] = 0;
        return daemon_iface_get(d, netns, slash + 1);
}

char *link_path(const Iface *it) {
        char key[NETNS_NAME_MAX + IFNAME_MAX + 4];

        link_key(it, key, sizeof(key));
        return key_path(key);
}

char *key_path(const char *key) {
        char *path = NULL;
        return sd_bus_path_encode(LINK_PREFIX, key, &path) < 0 ? NULL : path;
}

/* "eth0" for clsd's own namespace, "NETNS/eth0" for a named one: the name a link object is encoded from. */
void link_key(const Iface *it, char *buf, size_t size) {
        if (iface_netns(it))
                snprintf(buf, size, "%s/%s", iface_netns(it), iface_ifname(it));
        else
                snprintf(buf, size, "%s", iface_ifname(it));
}

/* ---- link objects ---- */

static ApiDbus *current(sd_bus *bus) {
        return sd_bus_slot_get_userdata(sd_bus_get_current_slot(bus));
}

int link_find(sd_bus *bus, const char *path, const char *interface, void *userdata, void **found,
              sd_bus_error *error) {
        ApiDbus *b = userdata;
        _cleanup_free_ char *key = NULL;
        Iface *it;

        (void) bus, (void) interface, (void) error;
        if (sd_bus_path_decode(path, LINK_PREFIX, &key) <= 0)
                return 0;
        it = iface_by_key(b->api->daemon, key);
        if (!it)
                return 0;
        *found = it;
        return 1;
}

int link_enumerate(sd_bus *bus, const char *prefix, void *userdata, char ***nodes, sd_bus_error *error) {
        ApiDbus *b = userdata;
        Manager *d = b->api->daemon;
        size_t n = daemon_iface_count(d);
        char **v = calloc(n + 1, sizeof(char *));

        (void) bus, (void) prefix, (void) error;
        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                if (!(v[i] = link_path(daemon_iface_at(d, i)))) {
                        for (size_t k = 0; k < i; k++)
                                free(v[k]);
                        free(v);
                        return -ENOMEM;
                }
        *nodes = v;
        return 0;
}

#define LINK_PROP(fn) \
        static int fn(sd_bus *bus, const char *path, const char *interface, const char *property, \
                      sd_bus_message *reply, void *userdata, sd_bus_error *error)

LINK_PROP(link_name) {
        Iface *it = userdata;
        (void) bus, (void) path, (void) interface, (void) property, (void) error;
        return sd_bus_message_append(reply, "s", iface_ifname(it));
}

LINK_PROP(link_netns) {
        Iface *it = userdata;
        (void) bus, (void) path, (void) interface, (void) property, (void) error;
        return sd_bus_message_append(reply, "s", strempty(iface_netns(it)));
}

LINK_PROP(link_state) {
        Iface *it = userdata;
        (void) bus, (void) path, (void) interface, (void) property, (void) error;
        return sd_bus_message_append(reply, "s", iface_state_to_string(iface_state(it)));
}

LINK_PROP(link_source) {
        Iface *it = userdata;
        (void) bus, (void) path, (void) interface, (void) property, (void) error;
        return sd_bus_message_append(reply, "s", document_source_to_string(iface_source(it)));
}

LINK_PROP(link_ifindex) {
        Iface *it = userdata;
        (void) bus, (void) path, (void) interface, (void) property, (void) error;
        return sd_bus_message_append(reply, "i", (int32_t) iface_ifindex(it));
}

LINK_PROP(link_repairs) {
        Iface *it = userdata;
        (void) bus, (void) path, (void) interface, (void) property, (void) error;
        return sd_bus_message_append(reply, "u", (uint32_t) iface_repairs(it));
}

LINK_PROP(link_last_repair) {
        Iface *it = userdata;
        (void) bus, (void) path, (void) interface, (void) property, (void) error;
        return sd_bus_message_append(reply, "(ts)", iface_last_repair_usec(it), iface_last_repair_what(it));
}

LINK_PROP(link_error) {
        Iface *it = userdata;
        const Error *e = iface_error(it);
        (void) bus, (void) path, (void) interface, (void) property, (void) error;
        return sd_bus_message_append(reply, "(ss)", e ? strempty(error_code_to_string(e->code)) : "",
                                     e ? strempty(e->message) : "");
}

/* The policies that match the interface, by order then name. */
LINK_PROP(link_policies) {
        Iface *it = userdata;
        int r;

        (void) bus, (void) path, (void) interface, (void) property, (void) error;
        r = sd_bus_message_open_container(reply, 'a', "s");
        for (size_t i = 0; r >= 0 && i < iface_policy_count(it); i++)
                r = sd_bus_message_append(reply, "s", iface_policy_at(it, i)->name);
        return r < 0 ? r : sd_bus_message_close_container(reply);
}

/* Each filter as the kernel has it now: (direction, name, pref, attach, attached, prog id, tag). */
LINK_PROP(link_filters) {
        Iface *it = userdata;
        ApiDbus *b = current(bus);
        _cleanup_(iface_status_done) IfaceStatus st = { 0 };
        _cleanup_error_ Error e = ERROR_NULL;
        int r;

        (void) path, (void) interface, (void) property, (void) error;
        if (daemon_iface_status(b->api->daemon, it, &st, &e) < 0) {
                /* empty rather than an error: a failed getter would also drop InterfacesAdded */
                log_debug("%s: D-Bus Filters: %s", iface_ifname(it), strna(e.message));
                return sd_bus_message_append(reply, "a(ssqsbus)", 0);
        }
        r = sd_bus_message_open_container(reply, 'a', "(ssqsbus)");
        if (r < 0)
                return r;
        for (size_t i = 0; i < iface_filter_count(it); i++) {
                const Filter *f = iface_filter_at(it, i);
                const FilterObserved *o = &st.filters[i].observed;
                r = sd_bus_message_append(reply, "(ssqsbus)", direction_to_string(filter_direction(f)),
                                          filter_spec(f)->name, (uint16_t) filter_spec(f)->priority,
                                          filter_attach(f), o->attached, o->prog_id, o->tag);
                if (r < 0)
                        return r;
        }
        return sd_bus_message_close_container(reply);
}

/* The bytes a filter's act_bpf actions counted (a classifier alone counts runs, not bytes). */
static uint64_t filter_bytes(const Filter *f, const FilterStatus *fs) {
        uint64_t n = 0;

        for (size_t a = 0; a < filter_spec(f)->n_actions && a < NL_ACTIONS_MAX; a++)
                n = MAX(n, fs->observed.actions[a].bytes);
        return n;
}

int link_counters_append(Manager *d, Iface *it, sd_bus_message *reply, uint64_t *ret_digest) {
        IfaceStatus st = { 0 };
        _cleanup_error_ Error e = ERROR_NULL;
        uint64_t digest = 0;
        int r = 0;

        if (daemon_iface_status(d, it, &st, &e) < 0)
                log_debug("%s: D-Bus Counters: %s", iface_ifname(it), strna(e.message));
        if (reply)
                r = sd_bus_message_open_container(reply, 'a', "(ssbttt)");
        for (size_t i = 0; r >= 0 && i < iface_filter_count(it) && i < st.n_filters; i++) {
                const Filter *f = iface_filter_at(it, i);
                const FilterStatus *fs = &st.filters[i];
                uint64_t bytes = filter_bytes(f, fs);
                const uint64_t moved[] = { fs->run_count, bytes, fs->run_time_ns };
                digest = hash_bytes(moved, sizeof(moved), digest);
                if (reply)
                        r = sd_bus_message_append(
                                reply, "(ssbttt)", direction_to_string(filter_direction(f)),
                                filter_spec(f)->name, fs->has_stats, fs->run_count, bytes, fs->run_time_ns);
        }
        if (r >= 0 && reply)
                r = sd_bus_message_close_container(reply);
        iface_status_done(&st);
        if (ret_digest)
                *ret_digest = digest;
        return r;
}

/* Each filter's counters, read from the kernel: (direction, name, counted: run counts are kept (clsd
 * --bpf-stats), packets: its runs, bytes: its act_bpf actions', run time in ns). Sent along in
 * PropertiesChanged at most once a second while a client subscribes (SubscribeCounters). */
LINK_PROP(link_counters) {
        (void) path, (void) interface, (void) property, (void) error;
        return link_counters_append(current(bus)->api->daemon, userdata, reply, NULL);
}

const sd_bus_vtable link_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_PROPERTY("Name", "s", link_name, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Netns", "s", link_netns, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("State", "s", link_state, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Source", "s", link_source, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Ifindex", "i", link_ifindex, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Repairs", "u", link_repairs, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("LastRepair", "(ts)", link_last_repair, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Error", "(ss)", link_error, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Policies", "as", link_policies, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        /* read from the kernel at each Get: announced as invalidated, not sent along */
        SD_BUS_PROPERTY("Filters", "a(ssqsbus)", link_filters, 0, SD_BUS_VTABLE_PROPERTY_EMITS_INVALIDATION),
        SD_BUS_PROPERTY("Counters", "a(ssbttt)", link_counters, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_VTABLE_END,
};

bool daemon_degraded(Manager *d) {
        for (size_t i = 0; i < daemon_iface_count(d); i++)
                if (iface_state(daemon_iface_at(d, i)) == IFACE_FAILED)
                        return true;
        return false;
}
