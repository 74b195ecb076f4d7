/* manager.h: the Manager owns the daemon's parts, each with its own header and small struct: the
 * interface table, the followed namespaces, the program registry, the object cache, the request queue
 * and the workers. The files that orchestrate them include this; a part's own file sees only its part. */
#pragma once

#include "daemon.h"
#include "iface-table.h"
#include "links.h"
#include "netns.h"
#include "object-cache.h"
#include "queue.h"
#include "registry.h"
#include "worker.h"

typedef struct ChangeListener {
        DaemonChangeFunc f;
        void *userdata;
} ChangeListener;

typedef struct Loads Loads;

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
        Registry *registry;
        ObjectCache *objects;
        RequestQueue *queue;
        Workers *workers;
        Loads *loads;
        Links *links;
        struct {
                Iface **list;
                size_t n, capacity;
                uint64_t version; /* the table's version + 1 it was made at */
        } visible; /* the interfaces the faces see, in order */
        struct {
                uint32_t prog_id;
                uint64_t usec; /* the loop's now it was read at */
                NlProgramStats stats;
        } stats_memo; /* the last program's run counts, for the filters that share it */
        struct {
                uint64_t usec; /* the turn of the loop it was read in */
                bool on;
        } counting; /* whether the kernel counts programs' runs (BPF_ENABLE_STATS held by anyone) */
        Policy **policies; /* by name */
        size_t n_policies;
        KernelFeatures kernel;
        DaemonCounters counters;
        char status[128]; /* the last STATUS= sent to systemd */
        sd_event_source *resync_source;
        sd_event_source *status_source; /* STATUS= once per turn of the loop */
        ChangeListener *listeners;
        size_t n_listeners;
        Startup start;
        DaemonFleet fleet;
        json_t *map_entries; /* configuration maps' entries, as stored (map-config.c) */
        const TrustedKeys *trusted; /* the keys in use: config.trusted_keys, or read again (trust.c) */
        TrustedKeys *trusted_owned;
};

/* trust.c: whether a trusted key verifies the stored object; if not it is revoked in the registry. */
int manager_object_trusted(Manager *m, const char *digest, const void *data, size_t size);
/* policies.c: the interface's filters composed again (its documents and policies as they are) and
 * reconciled, queued behind its other changes. */
void manager_iface_recompose(Manager *m, Iface *it);

/* Tells every listener of the change (where it happens: networkd's link_send_changed()). */
void manager_changed(Manager *m, Iface *it, unsigned changes);
/* The interface's namespace's request socket, following it if needed: -ENODEV when the namespace or
 * the interface is absent (with ret_link). */
int manager_link(Manager *m, const char *netns, const char *ifname, NlSocket **ret_rtnl, NlLink *ret_link,
                 Error *reterr);
/* Stops following a named namespace no interface names any more. */
void manager_release_netns(Manager *m, const char *netns);
/* Removes the interface from the table and frees it (its programs released). */
void manager_forget(Manager *m, Iface *it);
/* Saves the documents' facts if they changed. */
void manager_save_facts(Manager *m, Iface *it);
void manager_check_started(Manager *m);

/* map-config.c: configuration maps ("config": true) */
/* The entry just written to (value) or deleted from (NULL) map dm is stored for every filter whose "maps"
 * declares dm configuration and whose programs use it. */
int map_config_record(Manager *m, const DaemonMap *dm, const json_t *key, const json_t *value,
                      Error *reterr);
/* The same for the policy's own set of a map each interface has its own of (written through the policy):
 * 1 when it changed. */
int map_config_record_policy(Manager *m, const Policy *p, const DaemonMap *dm, const json_t *key,
                             const json_t *value, Error *reterr);
/* Writes the stored entries into the configuration maps of the programs new loads gave the interface's
 * filters. */
void map_config_apply(Manager *m, Iface *it);
/* Forgets the entries of documents, filters and maps that no longer declare them configuration. */
void map_config_prune(Manager *m);

/* maps.c */
/* The maps of the programs the filter holds, each once in m, with the filter as one more user. */
int daemon_maps_add_filter(DaemonMaps *m, const Iface *it, const Filter *f, Error *reterr);
/* The maps of the programs held by every filter, on any interface, that want() picks. */
int maps_of_filters(Manager *m, bool (*want)(const Iface *it, const Filter *f, const void *userdata),
                    const void *userdata, DaemonMaps *ret, Error *reterr);

/* policies.c */
int manager_policies_load(Manager *m, Error *reterr);
/* Matches every link at start. */
void manager_policies_start(Manager *m);
void manager_policies_free(Manager *m);
/* A link came or changed: the policies that match it now. */
void manager_policies_link(Manager *m, const char *netns, const NlLink *l);
/* A namespace appeared: every link in it, if a policy may match there. */
void manager_policies_netns(Manager *m, const char *netns);
/* Whether a policy may match links of the namespace (clsd follows it then). */
bool manager_policies_want_netns(Manager *m, const char *netns);
/* The hogs with "match" become the configuration's policies (references taken; one unchanged keeps
 * the policy it was, so that its interfaces are not touched); with apply, every interface whose
 * policies changed is changed. */
int manager_policies_set_hogs(Manager *m, Policy *const *v, size_t n, bool apply);

/* reconcile.c */
/* One reconcile of the interface (any reason): observe, acquire programs (adopting), plan, apply,
 * verify. -EAGAIN when programs are being loaded (the request runs again when they are in). */
int iface_reconcile(Manager *m, Iface *it, Error *reterr);
/* The queue's process function. */
int manager_process_request(Manager *m, Request *r);
/* One reconcile, its outcome made the interface's state (logged, counted, told to listeners): 0,
 * -EAGAIN (programs are being loaded), or <0 (failed: the caller retries after a backoff). */
int iface_reconcile_and_report(Manager *m, Iface *it);
/* Acquires every program of target's filters: 0, -EAGAIN (loads started; resume's work goes on when they
 * are in), or a load's failure. The filters' observed facts say what may be adopted. */
int iface_acquire_programs(Manager *m, Iface *target, Iface *resume, Error *reterr);
/* Observes with every kind; the caller frees with attach_observed_free(). */
typedef struct AttachObserved {
        void *cls, *tcx;
} AttachObserved;
struct AttachContext;
void attach_context_init(Manager *m, Iface *it, NlSocket *rtnl, struct AttachContext *ret);
int attach_observe(struct AttachContext *c, AttachObserved *ret, Error *reterr);
void attach_observed_free(AttachObserved *o);
/* Plans and applies with every kind, then verifies: the number of changes. */
int attach_apply_all(struct AttachContext *c, AttachObserved *o, Error *reterr);
/* Everything of clsd's goes from the interface (its filters, its tcx links, the clsact it created). */
int iface_remove_all(Manager *m, Iface *it, NlSocket *rtnl, Error *reterr);

/* loads.c: one load per program at a time, whoever waits for it. */
int loads_new(Loads **ret);
Loads *loads_free(Loads *l);
/* Starts (or joins) the load of ref for waiter's filters: -EAGAIN (the program goes to waiter's filters
 * that want it, and resume's work goes on, when the load is done), or the failure of a load it waited
 * for. */
int loads_request(Manager *m, const ProgramRef *ref, uint32_t reuse_id, Iface *waiter, Iface *resume,
                  Error *reterr);
/* The interface goes: it waits for nothing (as a target or to be resumed). */
void loads_forget(Manager *m, Iface *waiter);

/* events.c */
void manager_on_netns_event(const char *netns, const struct nlmsghdr *nlh, bool lost, void *userdata);
void manager_on_netns_change(const char *netns, bool present, void *userdata);
int manager_resync_start(Manager *m, Error *reterr);

/* put.c */
/* Queues a change of the interface's hog (NULL: it goes), applied like a PUT, rolled back on failure;
 * done (may be NULL) is told when it is applied or failed. */
void manager_hog_change_done(Manager *m, const char *netns, const char *ifname, Document *hog,
                             const char *hog_path, DaemonDoneFunc done, void *userdata);

/* hogs.c */
int manager_hogs_load(Manager *m);

/* objects.c */
int manager_objects_load(Manager *m);
