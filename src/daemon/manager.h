/* manager.h: the Manager owns the daemon's parts, each with its own header and small struct (the
 * interface table, the followed namespaces and their links, the program registry and its loads, the
 * object cache, the request queue and the workers, the policy set, the configuration maps' entries,
 * the keys, the faces' views), and offers the few services every part needs (manager.c): telling the
 * listeners of a change, the interface's namespace and link, forgetting an interface, saving what was
 * attached, counting an error. It is made and started by daemon.c, which alone sees every part. */
#pragma once

#include "daemon.h"
#include "iface-table.h"
#include "links.h"
#include "namespaces.h"
#include "object-cache.h"
#include "policy-set.h"
#include "queue.h"
#include "registry.h"
#include "workers.h"
#include "daemon-fleet.h"
#include "daemon-metrics.h"
#include "store-policy.h"

typedef struct Loads Loads;
typedef struct MapConfig MapConfig;
typedef struct Views Views;

typedef struct ChangeListener {
        DaemonChangeFunc f;
        void *userdata;
} ChangeListener;

/* What the kernel has, probed once at start. */
typedef struct KernelFeatures {
        char kernel_release[65];
        bool act_bpf;
        bool tcx;
        int bpf_stats_fd; /* BPF_ENABLE_STATS held, or -1 */
} KernelFeatures;

/* Start-up: READY=1 once the first reconcile of every document is done. */
typedef struct Startup {
        DaemonReadyFunc ready;
        void *userdata;
        sd_event_source *post; /* watches the queue until then */
        bool done;
} Startup;

struct Manager {
        DaemonConfig config;
        sd_event *event;
        Store *store;
        IfaceTable *ifaces;
        NetnsSet *netns;
        Links *links;
        Registry *registry;
        Loads *loads; /* loads.c */
        ObjectCache *objects;
        RequestQueue *queue;
        Workers *workers;
        PolicySet policies; /* policy-set.c */
        MapConfig *map_config; /* map-config.c */
        struct {
                const TrustedKeys *keys; /* in use: config.trusted_keys, or read again */
                TrustedKeys *owned;
                /* daemon.c: a revoked object an upload signed; its filters come back */
                void (*on_trusted_again)(Manager *m);
        } trust; /* trust.c */
        Views *views; /* views.c */
        KernelFeatures kernel;
        DaemonCounters counters;
        struct {
                ChangeListener *v;
                size_t n;
                char status[128]; /* the last STATUS= sent to systemd */
                sd_event_source *status_source; /* STATUS= once per turn of the loop */
        } listeners;
        Startup start; /* daemon.c */
        sd_event_source *resync_source; /* events.c */
        struct {
                const DaemonFleet *status; /* the fleet's (src/fleet), or NULL */
                DaemonFleet none; /* without a fleet */
                uint64_t revision; /* of the fleet snapshot applied, as stored */
        } fleet; /* daemon.c */
};

/* Tells every listener of the change (where it happens: networkd's link_send_changed()). */
void manager_changed(Manager *m, Iface *it, unsigned changes);
/* The interface's namespace's request socket, following it if needed: -ENODEV when the namespace or
 * the interface is absent (with ret_link). */
int manager_link(Manager *m, const char *netns, const char *ifname, NlSocket **ret_rtnl, NlLink *ret_link,
                 Error *reterr);
/* Stops following a named namespace no interface names and no policy may match any more. */
void manager_release_netns(Manager *m, const char *netns);
/* Removes the interface from the table (its removal told, if it was visible) and frees it (its
 * programs released, its queued work dropped). */
void manager_forget(Manager *m, Iface *it);
/* A change over: an interface nothing declares any more (no document, no policy) is forgotten, unless
 * another change waits for it (then it is only no longer visible). Whether it was forgotten. */
bool manager_forget_unused(Manager *m, Iface *it);
/* Saves the documents' facts if they changed. */
void manager_save_facts(Manager *m, Iface *it);
/* The store's words on a file it set aside, logged. */
void manager_store_problem(const char *path, const char *reason, void *userdata);
