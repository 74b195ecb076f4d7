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

#include "api-internal.h"
#include "log.h"

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
};

/* "eth0" for clsd's own namespace, "NETNS/eth0" for a named one: the name a link object is encoded from. */
static void link_key(const Iface *it, char *buf, size_t size) {
        if (iface_netns(it))
                snprintf(buf, size, "%s/%s", iface_netns(it), iface_ifname(it));
        else
                snprintf(buf, size, "%s", iface_ifname(it));
}

static char *key_path(const char *key) {
        char *path = NULL;
        return sd_bus_path_encode(LINK_PREFIX, key, &path) < 0 ? NULL : path;
}

static char *link_path(const Iface *it) {
        char key[NETNS_NAME_MAX + IFNAME_MAX + 4];

        link_key(it, key, sizeof(key));
        return key_path(key);
}

static Iface *iface_by_key(Manager *d, const char *key) {
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

static bool daemon_degraded(Manager *d) {
        for (size_t i = 0; i < daemon_iface_count(d); i++)
                if (iface_state(daemon_iface_at(d, i)) == IFACE_FAILED)
                        return true;
        return false;
}

/* The effective uid and capabilities of pid, from one read of /proc/PID/status (so from one moment). */
static int proc_status(pid_t pid, uid_t *ret_euid, uint64_t *ret_caps) {
        char path[64], line[256];
        _cleanup_fclose_ FILE *f = NULL;
        bool have_uid = false, have_caps = false;

        snprintf(path, sizeof(path), "/proc/%d/status", (int) pid);
        f = fopen(path, "re");
        if (!f)
                return -errno;
        while (fgets(line, sizeof(line), f)) {
                unsigned long r, e;
                unsigned long long caps;
                if (sscanf(line, "Uid: %lu %lu", &r, &e) == 2) {
                        *ret_euid = (uid_t) e;
                        have_uid = true;
                } else if (sscanf(line, "CapEff: %llx", &caps) == 1) {
                        *ret_caps = caps;
                        have_caps = true;
                }
        }
        return have_uid && have_caps ? 0 : -EBADMSG;
}

/* Whether pid is in clsd's user namespace. Capabilities are relative to the namespace that holds them:
 * an unprivileged user's "unshare -Ur" shows a full CapEff that is worth nothing to the host. */
static bool same_user_namespace(pid_t pid) {
        struct stat mine, theirs;
        char path[64];

        snprintf(path, sizeof(path), "/proc/%d/ns/user", (int) pid);
        return stat("/proc/self/ns/user", &mine) == 0 && stat(path, &theirs) == 0 &&
               mine.st_dev == theirs.st_dev && mine.st_ino == theirs.st_ino;
}

/* The audit's who of a D-Bus caller. */
static void bus_who(sd_bus_message *m, char *buf, size_t size) {
        _cleanup_(sd_bus_creds_unrefp) sd_bus_creds *creds = NULL;
        uid_t euid = (uid_t) -1;
        pid_t pid = 0;

        if (sd_bus_query_sender_creds(m, SD_BUS_CREDS_EUID | SD_BUS_CREDS_PID, &creds) >= 0) {
                (void) sd_bus_creds_get_euid(creds, &euid);
                (void) sd_bus_creds_get_pid(creds, &pid);
        }
        snprintf(buf, size, "uid %d pid %d (D-Bus %s)", (int) euid, (int) pid,
                 strna(sd_bus_message_get_sender(m)));
}

static void bus_audit(ApiDbus *b, sd_bus_message *m, unsigned status, const char *code) {
        char who[128], path[128];

        bus_who(m, who, sizeof(who));
        snprintf(path, sizeof(path), "org.clsd1.Manager.%s", strna(sd_bus_message_get_member(m)));
        api_audit(b->api,
                  &(AuditRecord){
                          .who = who, .method = "CALL", .path = path, .status = status, .code = code });
}

/* The access file's role for a uid: its grants and those of its groups in the user database (primary and
 * supplementary, as many as it has). */
static Role bus_role(const Api *a, uid_t uid) {
        _cleanup_free_ gid_t *gids = NULL;
        struct passwd *pw = getpwuid(uid);
        int n = 64;

        if (!pw)
                return access_role_of_unix(a->access, uid, NULL, 0);
        for (;;) {
                gid_t *v = realloc(gids, (size_t) n * sizeof(gid_t));
                int want = n;
                if (!v)
                        return access_role_of_unix(a->access, uid, &pw->pw_gid, 1);
                gids = v;
                if (getgrouplist(pw->pw_name, pw->pw_gid, gids, &want) >= 0) {
                        n = want;
                        break;
                }
                if (want <= n) /* no size to grow to: the primary group at least */
                        return access_role_of_unix(a->access, uid, &pw->pw_gid, 1);
                n = want;
        }
        return access_role_of_unix(a->access, uid, gids, (size_t) n);
}

/* With an access file, the methods that return documents and map contents need the reader role (root
 * always has it); the properties and signals are the bus policy's to grant. */
static int require_reader(const Api *a, sd_bus_message *m, sd_bus_error *error) {
        _cleanup_(sd_bus_creds_unrefp) sd_bus_creds *creds = NULL;
        uid_t euid = (uid_t) -1;

        if (!a->access)
                return 0;
        if (sd_bus_query_sender_creds(m, SD_BUS_CREDS_EUID, &creds) >= 0 &&
            sd_bus_creds_get_euid(creds, &euid) >= 0 && (euid == 0 || bus_role(a, euid) >= ROLE_READER))
                return 0;
        log_warning("D-Bus: %s refused to %s (uid %d): needs the reader role (--access-file)",
                    sd_bus_message_get_member(m), strna(sd_bus_message_get_sender(m)), (int) euid);
        return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED,
                                 "%s needs the reader role (--access-file)", sd_bus_message_get_member(m));
}

/* Root, an operator of the access file, or CAP_NET_ADMIN in the caller's effective set, in clsd's user
 * namespace. The euid and pid are
 * the ones dbus-daemon vouches for (the euid as the bus's namespace sees it: a user namespace's root
 * is its owner there). dbus-daemon 1.14 passes no pidfd, so the capabilities come from the caller's
 * /proc/PID/status; that read must show the euid the bus does, so that a caller which execs a setuid
 * program after sending cannot lend it its PID (what it would find there is the new euid). */
static int require_privilege(const Api *a, sd_bus_message *m, sd_bus_error *error) {
        _cleanup_(sd_bus_creds_unrefp) sd_bus_creds *creds = NULL;
        uid_t euid = (uid_t) -1, proc_euid = (uid_t) -1;
        uint64_t caps = 0;
        pid_t pid = 0;

        if (sd_bus_query_sender_creds(m, SD_BUS_CREDS_EUID | SD_BUS_CREDS_PID, &creds) >= 0 &&
            sd_bus_creds_get_euid(creds, &euid) >= 0) {
                if (euid == 0)
                        return 0;
                /* An operator of the access file: the uid the bus vouches for, and its groups in the
                 * user database (as dbus-daemon's own group policies take them). */
                if (a->access && bus_role(a, euid) == ROLE_OPERATOR)
                        return 0;
                if (sd_bus_creds_get_pid(creds, &pid) >= 0 && pid > 0 &&
                    proc_status(pid, &proc_euid, &caps) >= 0 && proc_euid == euid &&
                    (caps & (UINT64_C(1) << CAP_NET_ADMIN)) && same_user_namespace(pid))
                        return 0;
        }
        log_warning("D-Bus: %s refused to %s (uid %d): needs root, CAP_NET_ADMIN (in the host's user "
                    "namespace) or the operator role (--access-file)",
                    sd_bus_message_get_member(m), strna(sd_bus_message_get_sender(m)), (int) euid);
        return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED,
                                 "%s needs root, CAP_NET_ADMIN or the operator role",
                                 sd_bus_message_get_member(m));
}

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

        snprintf(name, sizeof(name), "org.clsd1.Error.%s", e->code ? e->code : "internal_error");
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
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', "(ssso)");
        for (size_t i = 0; r >= 0 && i < daemon_iface_count(d); i++) {
                Iface *it = daemon_iface_at(d, i);
                _cleanup_free_ char *path = link_path(it);
                if (!path)
                        return -ENOMEM;
                r = sd_bus_message_append(reply, "(ssso)", strempty(iface_netns(it)), iface_ifname(it),
                                          iface_state_to_string(iface_state(it)), path);
        }
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        return r < 0 ? r : sd_bus_send(NULL, reply, NULL);
}

static int method_get_interface(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        ApiDbus *b = userdata;
        Manager *d = b->api->daemon;
        IfaceStatus st = { 0 };
        Error e = ERROR_NULL;
        json_t *j;
        Iface *it;
        int r;

        r = require_reader(b->api, m, error);
        if (r < 0)
                return r;
        r = read_iface(m, d, &it, error);
        if (r < 0)
                return r;
        if (daemon_iface_status(d, it, &st, &e) < 0) {
                r = reply_error(error, &e);
                error_done(&e);
                return r;
        }
        j = render_iface(d, it, &st);
        iface_status_done(&st);
        return reply_json(m, j, error);
}

static int method_get_maps(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        ApiDbus *b = userdata;
        Manager *d = b->api->daemon;
        DaemonMaps maps = { 0 };
        Error e = ERROR_NULL;
        json_t *list;
        Iface *it;
        int r;

        r = require_reader(b->api, m, error);
        if (r < 0)
                return r;
        r = read_iface(m, d, &it, error);
        if (r < 0)
                return r;
        if (daemon_iface_maps(d, it, &maps, &e) < 0) {
                r = reply_error(error, &e);
                error_done(&e);
                return r;
        }
        list = render_maps_list(d, it, &maps, MAPS_LIMIT_DEFAULT);
        daemon_maps_done(&maps);
        return reply_json(m, list, error);
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

static const sd_bus_vtable manager_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_PROPERTY("Version", "s", prop_version, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("InterfaceCount", "u", prop_count, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Degraded", "b", prop_degraded, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Fleet", "(bbsts)", prop_fleet, 0, 0),
        SD_BUS_METHOD_WITH_ARGS("ListInterfaces", SD_BUS_NO_ARGS, SD_BUS_RESULT("a(ssso)", interfaces),
                                method_list, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetInterface", SD_BUS_ARGS("s", netns, "s", ifname),
                                SD_BUS_RESULT("s", json), method_get_interface, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetMaps", SD_BUS_ARGS("s", netns, "s", ifname), SD_BUS_RESULT("s", json),
                                method_get_maps, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Reconcile", SD_BUS_NO_ARGS, SD_BUS_RESULT("u", interfaces),
                                method_reconcile, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_VTABLE_END,
};

/* ---- link objects ---- */

static ApiDbus *current(sd_bus *bus) {
        return sd_bus_slot_get_userdata(sd_bus_get_current_slot(bus));
}

static int link_find(sd_bus *bus, const char *path, const char *interface, void *userdata, void **found,
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

static int link_enumerate(sd_bus *bus, const char *prefix, void *userdata, char ***nodes,
                          sd_bus_error *error) {
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
        return sd_bus_message_append(reply, "(ss)", e ? strempty(e->code) : "",
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
        IfaceStatus st = { 0 };
        Error e = ERROR_NULL;
        int r;

        (void) path, (void) interface, (void) property, (void) error;
        if (daemon_iface_status(b->api->daemon, it, &st, &e) < 0) {
                /* empty rather than an error: a failed getter would also drop InterfacesAdded */
                log_debug("%s: D-Bus Filters: %s", iface_ifname(it), strna(e.message));
                error_done(&e);
                return sd_bus_message_append(reply, "a(ssqsbus)", 0);
        }
        r = sd_bus_message_open_container(reply, 'a', "(ssqsbus)");
        for (size_t i = 0; r >= 0 && i < iface_filter_count(it); i++) {
                const Filter *f = iface_filter_at(it, i);
                const FilterObserved *o = &st.filters[i].observed;
                r = sd_bus_message_append(reply, "(ssqsbus)", direction_to_string(filter_direction(f)),
                                          filter_spec(f)->name, (uint16_t) filter_spec(f)->priority,
                                          filter_is_tcx(f) ? "tcx" : "cls_bpf", o->attached, o->prog_id,
                                          o->tag);
        }
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        iface_status_done(&st);
        return r;
}

static const sd_bus_vtable link_vtable[] = {
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
        SD_BUS_VTABLE_END,
};

/* ---- change announcements: the daemon tells of each change where it happens (on_change); what
 * gathered during a turn of the loop goes out once, at its end (on_flush). ---- */

static ssize_t announced_find(ApiDbus *b, const char *key) {
        for (size_t i = 0; i < b->n_announced; i++)
                if (streq(b->announced[i], key))
                        return (ssize_t) i;
        return -1;
}

static int announced_add(ApiDbus *b, const char *key) {
        char **v = realloc(b->announced, (b->n_announced + 1) * sizeof(*v));

        if (!v)
                return -ENOMEM;
        b->announced = v;
        if (!(v[b->n_announced] = strdup(key)))
                return -ENOMEM;
        b->n_announced++;
        return 0;
}

static void on_change(Manager *m, Iface *it, unsigned changes, void *userdata) {
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

static int on_flush(sd_event_source *s, void *userdata) {
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
        r = sd_bus_add_object_vtable(b->bus, NULL, MANAGER_PATH, MANAGER_IFACE, manager_vtable, b);
        if (r >= 0)
                r = sd_bus_add_fallback_vtable(b->bus, NULL, LINK_PREFIX, LINK_IFACE, link_vtable, link_find,
                                               b);
        if (r >= 0)
                r = sd_bus_add_node_enumerator(b->bus, NULL, LINK_PREFIX, link_enumerate, b);
        if (r >= 0)
                r = sd_bus_add_object_manager(b->bus, NULL, MANAGER_PATH);
        if (r >= 0)
                r = sd_bus_attach_event(b->bus, a->event, SD_EVENT_PRIORITY_NORMAL);
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
        /* a defer source, armed by each change, fires once after the loop's other sources of the turn */
        r = sd_event_add_defer(a->event, &b->flush, on_flush, b);
        if (r >= 0)
                r = sd_event_source_set_priority(b->flush, SD_EVENT_PRIORITY_IDLE);
        if (r >= 0)
                r = sd_event_source_set_enabled(b->flush, SD_EVENT_OFF);
        if (r >= 0)
                r = daemon_add_change_listener(a->daemon, on_change, b);
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
        sd_bus_flush_close_unref(b->bus);
        for (size_t i = 0; i < b->n_announced; i++)
                free(b->announced[i]);
        free(b->announced);
        for (size_t i = 0; i < b->n_pending; i++)
                free(b->pending[i].key);
        free(b->pending);
        free(b);
}
