/* dbus.c: clsd on the system bus (sd-bus) as org.clsd1, for desktop and local tools: the manager object
 * /org/clsd1 and one object per document's interface under /org/clsd1/link/, with PropertiesChanged
 * when a state changes. Reads are open to everyone; what changes state asks for root or CAP_NET_ADMIN. */
#include <linux/capability.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>

#include "dbus.h"
#include "log.h"
#include "daemon-changes.h"
#include "daemon-fleet.h"
#include "daemon-maps.h"
#include "daemon-objects.h"

static int reply_json(sd_bus_message *m, json_t *j, sd_bus_error *error) {
        _cleanup_free_ char *text = NULL;

        if (!j)
                return sd_bus_error_set(error, SD_BUS_ERROR_NO_MEMORY, "out of memory");
        text = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        json_decref(j);
        if (!text)
                return sd_bus_error_set(error, SD_BUS_ERROR_NO_MEMORY, "out of memory");
        return sd_bus_reply_method_return(m, "s", text);
}

/* A clsd error as a D-Bus error: org.clsd1.Error.<code>, the same code and message as REST's. */
static int reply_error(sd_bus_error *error, const Error *e) {
        char name[96];

        snprintf(name, sizeof(name), "org.clsd1.Error.%s",
                 error_code_to_string(e->code ?: ERROR_INTERNAL_ERROR));
        return sd_bus_error_setf(error, name, "%s", e->message ? e->message : "failed");
}

/* The (netns, ifname) arguments of a call and the document they name. */
static int read_iface(sd_bus_message *m, Manager *d, Iface **ret, sd_bus_error *error) {
        const char *netns, *ifname;
        int r = sd_bus_message_read(m, "ss", &netns, &ifname);

        if (r < 0)
                return r;
        *ret = daemon_iface_get(d, netns[0] ? netns : NULL, ifname);
        if (!*ret)
                return sd_bus_error_setf(error, "org.clsd1.Error.document_not_found",
                                         "no classifier document for %s%s%s", netns, netns[0] ? "/" : "",
                                         ifname);
        return 0;
}

static int method_list(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        ApiDbus *b = userdata;
        Manager *d = b->api->daemon;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r;

        (void) error;
        r = sd_bus_message_new_method_return(m, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(reply, 'a', "(ssso)");
        if (r < 0)
                return r;
        for (size_t i = 0; i < daemon_iface_count(d); i++) {
                Iface *it = daemon_iface_at(d, i);
                _cleanup_free_ char *path = link_path(it);
                if (!path)
                        return -ENOMEM;
                r = sd_bus_message_append(reply, "(ssso)", strempty(iface_netns(it)), iface_ifname(it),
                                          iface_state_to_string(iface_state(it)), path);
                if (r < 0)
                        return r;
        }
        r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

static int method_get_interface(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        ApiDbus *b = userdata;
        Manager *d = b->api->daemon;
        IfaceStatus st = { 0 };
        _cleanup_error_ Error e = ERROR_NULL;
        json_t *j;
        Iface *it;
        int r;

        r = require_reader(b->api, m, error);
        if (r < 0)
                return r;
        r = read_iface(m, d, &it, error);
        if (r < 0)
                return r;
        if (daemon_iface_status(d, it, &st, &e) < 0)
                return reply_error(error, &e);
        j = render_iface(d, it, &st);
        iface_status_done(&st);
        return reply_json(m, j, error);
}

static int method_get_maps(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        ApiDbus *b = userdata;
        Manager *d = b->api->daemon;
        DaemonMaps maps = { 0 };
        _cleanup_error_ Error e = ERROR_NULL;
        json_t *list;
        Iface *it;
        int r;

        r = require_reader(b->api, m, error);
        if (r < 0)
                return r;
        r = read_iface(m, d, &it, error);
        if (r < 0)
                return r;
        if (daemon_iface_maps(d, it, &maps, &e) < 0)
                return reply_error(error, &e);
        list = render_maps_list(d, it, &maps, MAPS_LIMIT_DEFAULT);
        daemon_maps_done(&maps);
        return reply_json(m, list, error);
}

/* The namespace's links with every tc filter on them, clsd's and foreign ones (GET /ifaces's JSON). */
static int method_get_links(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        ApiDbus *b = userdata;
        Manager *d = b->api->daemon;
        LinkView *links = NULL;
        _cleanup_error_ Error e = ERROR_NULL;
        const char *netns;
        char *text = NULL;
        size_t n = 0, size = 0;
        JsonWriter w = { 0 };
        int r;

        r = require_reader(b->api, m, error);
        if (r < 0)
                return r;
        r = sd_bus_message_read(m, "s", &netns);
        if (r < 0)
                return r;
        if (daemon_links(d, *netns ? netns : NULL, &links, &n, &e) < 0)
                return reply_error(error, &e);
        w.f = open_memstream(&text, &size);
        if (w.f) {
                jw_begin_object(&w);
                jw_key(&w, "ifaces");
                jw_begin_array(&w);
                for (size_t i = 0; i < n; i++)
                        write_link(&w, d, *netns ? netns : NULL, &links[i]);
                jw_end_array(&w);
                jw_end_object(&w);
                fclose(w.f);
        }
        daemon_links_done(d, *netns ? netns : NULL, links);
        if (!text)
                return -ENOMEM;
        r = sd_bus_reply_method_return(m, "s", text);
        free(text);
        return r;
}

static int method_reconcile(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        ApiDbus *b = userdata;
        Manager *d = b->api->daemon;
        int r = require_privilege(b->api, m, error);

        bus_audit(b, m, r < 0 ? 403 : 200, r < 0 ? "access_denied" : NULL);
        if (r < 0)
                return r;
        log_info("D-Bus: Reconcile asked by %s", strna(sd_bus_message_get_sender(m)));
        (void) daemon_reconcile_all(d);
        return sd_bus_reply_method_return(m, "u", (uint32_t) daemon_iface_count(d));
}

static int prop_version(sd_bus *bus, const char *path, const char *interface, const char *property,
                        sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        (void) bus, (void) path, (void) interface, (void) property, (void) userdata, (void) error;
        return sd_bus_message_append(reply, "s", PROJECT_VERSION);
}

static int prop_count(sd_bus *bus, const char *path, const char *interface, const char *property,
                      sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        ApiDbus *b = userdata;
        (void) bus, (void) path, (void) interface, (void) property, (void) error;
        return sd_bus_message_append(reply, "u", (uint32_t) daemon_iface_count(b->api->daemon));
}

static int prop_degraded(sd_bus *bus, const char *path, const char *interface, const char *property,
                         sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        ApiDbus *b = userdata;
        (void) bus, (void) path, (void) interface, (void) property, (void) error;
        return sd_bus_message_append(reply, "b", daemon_degraded(b->api->daemon));
}

static int prop_fleet(sd_bus *bus, const char *path, const char *interface, const char *property,
                      sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        ApiDbus *b = userdata;
        const DaemonFleet *f = daemon_fleet(b->api->daemon);
        (void) bus, (void) path, (void) interface, (void) property, (void) error;
        /* (enabled, connected, node, revision applied, last error) */
        return sd_bus_message_append(reply, "(bbsts)", f->enabled, f->connected, f->node, f->revision,
                                     f->last_error);
}

static int prop_rollouts(sd_bus *bus, const char *path, const char *interface, const char *property,
                         sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        ApiDbus *b = userdata;
        const DaemonFleet *f = daemon_fleet(b->api->daemon);
        int r;

        (void) bus, (void) path, (void) interface, (void) property, (void) error;
        /* each rollout this node takes part in: (policy, rollout id, state, this node's step, this node's
         * wave (0: not in the plan), the current wave, the waves, why) */
        r = sd_bus_message_open_container(reply, 'a', "(ssssuuus)");
        if (r < 0)
                return r;
        for (size_t i = 0; i < f->n_rollouts; i++) {
                const DaemonFleetRollout *x = &f->rollouts[i];
                r = sd_bus_message_append(reply, "(ssssuuus)", x->policy, x->id, x->phase, x->step,
                                          (uint32_t) (x->wave + 1), x->n_waves ? x->current_wave + 1 : 0,
                                          x->n_waves, x->why);
                if (r < 0)
                        return r;
        }
        return sd_bus_message_close_container(reply);
}

static int prop_fleet_policies(sd_bus *bus, const char *path, const char *interface, const char *property,
                               sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        ApiDbus *b = userdata;
        const DaemonFleet *f = daemon_fleet(b->api->daemon);
        int r;

        (void) bus, (void) path, (void) interface, (void) property, (void) error;
        /* each fleet policy that selects this node: (policy, state, the revision etcd asks for, the one
         * held, the one committed (0: none), its interfaces configured, pending, failed, in conflict and
         * overridden, why) */
        r = sd_bus_message_open_container(reply, 'a', "(sstttuuuuus)");
        if (r < 0)
                return r;
        for (size_t i = 0; i < f->n_policies; i++) {
                const DaemonFleetPolicy *x = &f->policies[i];
                r = sd_bus_message_append(
                        reply, "(sstttuuuuus)", x->policy, x->state, x->revision, x->held, x->committed,
                        x->interfaces[POLICY_IFACE_CONFIGURED], x->interfaces[POLICY_IFACE_PENDING],
                        x->interfaces[POLICY_IFACE_FAILED], x->interfaces[POLICY_IFACE_CONFLICT],
                        x->interfaces[POLICY_IFACE_OVERRIDDEN], x->why);
                if (r < 0)
                        return r;
        }
        return sd_bus_message_close_container(reply);
}

static const sd_bus_vtable manager_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_PROPERTY("Version", "s", prop_version, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("InterfaceCount", "u", prop_count, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Degraded", "b", prop_degraded, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        /* sent along once a second, when they changed, while a client subscribed (dbus-counters.c) */
        SD_BUS_PROPERTY("Fleet", "(bbsts)", prop_fleet, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("FleetRollouts", "a(ssssuuus)", prop_rollouts, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("FleetPolicies", "a(sstttuuuuus)", prop_fleet_policies, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_METHOD_WITH_ARGS("ListInterfaces", SD_BUS_NO_ARGS, SD_BUS_RESULT("a(ssso)", interfaces),
                                method_list, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetInterface", SD_BUS_ARGS("s", netns, "s", ifname),
                                SD_BUS_RESULT("s", json), method_get_interface, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetMaps", SD_BUS_ARGS("s", netns, "s", ifname), SD_BUS_RESULT("s", json),
                                method_get_maps, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Reconcile", SD_BUS_NO_ARGS, SD_BUS_RESULT("u", interfaces),
                                method_reconcile, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("SubscribeCounters", NULL, NULL, method_subscribe_counters,
                      SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetLinks", SD_BUS_ARGS("s", netns), SD_BUS_RESULT("s", json),
                                method_get_links, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_VTABLE_END,
};

/* The manager, the links below it (found and listed on demand) and the object manager, on the loop. */
static int dbus_add_objects(ApiDbus *b, sd_event *event) {
        int r;

        r = sd_bus_add_object_vtable(b->bus, NULL, MANAGER_PATH, MANAGER_IFACE, manager_vtable, b);
        if (r < 0)
                return r;
        r = sd_bus_add_fallback_vtable(b->bus, NULL, LINK_PREFIX, LINK_IFACE, link_vtable, link_find, b);
        if (r < 0)
                return r;
        r = sd_bus_add_node_enumerator(b->bus, NULL, LINK_PREFIX, link_enumerate, b);
        if (r < 0)
                return r;
        r = sd_bus_add_object_manager(b->bus, NULL, MANAGER_PATH);
        if (r < 0)
                return r;
        return sd_bus_attach_event(b->bus, event, SD_EVENT_PRIORITY_NORMAL);
}

/* A defer source, armed by each change, fires once after the loop's other sources of the turn. */
static int dbus_follow_changes(ApiDbus *b, sd_event *event) {
        int r;

        r = sd_event_add_defer(event, &b->flush, on_flush, b);
        if (r < 0)
                return r;
        r = sd_event_source_set_priority(b->flush, SD_EVENT_PRIORITY_IDLE);
        if (r < 0)
                return r;
        r = sd_event_source_set_enabled(b->flush, SD_EVENT_OFF);
        if (r < 0)
                return r;
        return daemon_add_change_listener(b->api->daemon, on_change, b);
}

int api_dbus_start(Api *a) {
        _cleanup_free_ ApiDbus *b = calloc(1, sizeof(*b));
        int r;

        if (!b)
                return -ENOMEM;
        b->api = a;
        r = sd_bus_open_system_with_description(&b->bus, "clsd");
        if (r < 0) {
                log_info("D-Bus: no system bus (%s); clsd is not on D-Bus", strerror(-r));
                return 0;
        }
        r = dbus_add_objects(b, a->event);
        if (r < 0) {
                log_warning("D-Bus: cannot set up the objects: %s", strerror(-r));
                sd_bus_flush_close_unref(b->bus);
                return 0;
        }
        r = sd_bus_request_name(b->bus, DBUS_NAME, 0);
        if (r < 0) {
                /* another clsd has it, or the bus policy (systemd/org.clsd1.conf) is not installed */
                log_warning("D-Bus: cannot own %s: %s; clsd is not on D-Bus", DBUS_NAME, strerror(-r));
                sd_bus_flush_close_unref(b->bus);
                return 0;
        }
        b->count = (uint32_t) daemon_iface_count(a->daemon);
        b->degraded = daemon_degraded(a->daemon);
        for (size_t i = 0; i < daemon_iface_count(a->daemon); i++) {
                char key[NETNS_NAME_MAX + IFNAME_MAX + 4];
                link_key(daemon_iface_at(a->daemon, i), key, sizeof(key));
                if (announced_add(b, key) < 0)
                        break;
        }
        r = dbus_follow_changes(b, a->event);
        if (r < 0)
                log_warning("D-Bus: changes will not be announced: %s", strerror(-r));
        log_info("D-Bus: %s on the system bus", DBUS_NAME);
        a->dbus = TAKE_PTR(b);
        return 0;
}

void api_dbus_free(ApiDbus *b) {
        if (!b)
                return;
        sd_event_source_disable_unref(b->flush);
        counters_done(b);
        sd_bus_flush_close_unref(b->bus);
        for (size_t i = 0; i < b->n_announced; i++)
                free(b->announced[i]);
        free(b->announced);
        for (size_t i = 0; i < b->n_pending; i++)
                free(b->pending[i].key);
        free(b->pending);
        free(b);
}
