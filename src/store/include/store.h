/* store.h: the model: desired-state documents per interface, content-addressed objects, durable files.
 * Knows nothing of HTTP, D-Bus or the kernel. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "error.h"
#include "macros.h"
#include "sha256.h"

/* Version of the files under the state directory; a newer one is refused, never guessed at. Format 2
 * adds a filter's "maps", format 3 its "metrics", format 4 its "actions"; a document is written in the
 * lowest format that holds it, so that the clsd before reads what it can. */
#define STORE_FORMAT 5

/* Interface names: the kernel's IFNAMSIZ (16) less the NUL. */
#define IFNAME_MAX 15
/* Named network namespaces (/run/netns/NAME): a file name; clsd keeps them short and plain. */
#define NETNS_NAME_MAX 64
#define FILTER_NAME_MAX 32
#define PROGRAM_NAME_MAX 64
/* Filters per hook in one document: a bound on the work one PUT can cause. */
#define FILTERS_PER_HOOK_MAX 64
/* act_bpf actions after one classifier (tc allows 32): the netlink layer's NL_ACTIONS_MAX. */
#define ACTIONS_PER_FILTER_MAX 8
#define PRIORITY_MIN 1
#define PRIORITY_MAX 0xFFFF

typedef enum Direction {
        DIRECTION_INGRESS,
        DIRECTION_EGRESS,
        _DIRECTION_MAX,
} Direction;

const char *direction_to_string(Direction d);

typedef enum DocumentSource {
        SOURCE_API,
        SOURCE_HOG,
        SOURCE_POLICY, /* a policy that matches the interface */
        _SOURCE_MAX,
} DocumentSource;

const char *document_source_to_string(DocumentSource s);

/* How a filter is attached: a cls_bpf filter (the default), a tcx bpf_link, or tcx where the kernel
 * has it. */
typedef enum FilterAttach {
        ATTACH_CLS_BPF,
        ATTACH_TCX,
        ATTACH_AUTO,
        _ATTACH_MAX,
} FilterAttach;

const char *filter_attach_to_string(FilterAttach a);
int filter_attach_from_string(const char *s);

/* One entry of a filter's "maps": whether the map of the program it replaces is taken over, and whether
 * the map is one for every filter of the program (shared) or each filter's own. */
typedef struct MapPolicy {
        char *name;
        bool reuse;
        bool shared;
        bool config; /* entries written through clsd are stored and written into a new load's map */
} MapPolicy;

/* One entry of a filter's "metrics": a Prometheus metric derived from one of its program's maps. */
typedef enum MetricType {
        METRIC_COUNTER,
        METRIC_GAUGE,
        METRIC_HISTOGRAM,
        _METRIC_TYPE_MAX,
} MetricType;

#define METRIC_NAME_MAX 128
#define METRIC_LABELS_MAX 8
#define METRIC_BUCKETS_MAX 64
#define METRICS_PER_FILTER_MAX 16

typedef struct MetricLabel {
        char *name;
        char *from; /* "key", or "key.FIELD[.FIELD]" */
} MetricLabel;

typedef struct MetricSpec {
        char *map; /* the map's name in the object */
        char *name;
        MetricType type;
        char *help; /* NULL: none */
        MetricLabel *labels;
        size_t n_labels;
        char *value; /* a field path inside the value; NULL: the value itself (an integer) */
        double *buckets; /* histograms: the upper bound of bucket i, whose index is the key */
        size_t n_buckets;
        char *bucket; /* histograms: where the bucket index is, "key" (NULL) or "key.FIELD" */
} MetricSpec;

/* One entry of a filter's "actions": an act_bpf program run after the classifier matches. */
typedef struct ActionSpec {
        char *object; /* as given: "sha256:…" or an absolute path */
        char *digest; /* resolved digest; NULL until a path is resolved */
        char *program; /* NULL until resolved: the object's only action */
} ActionSpec;

typedef struct FilterSpec {
        char *name;
        char *object; /* as given: "sha256:…" or an absolute path */
        char *digest; /* resolved digest; NULL until a path is resolved */
        char *program; /* NULL: the object's only tc program */
        uint32_t priority;
        bool direct_action;
        bool has_classid;
        uint32_t classid;
        /* act_bpf actions run in order when the classifier matches (direct_action false). */
        ActionSpec *actions;
        size_t n_actions;
        /* Classic mode under a classful qdisc the operator made ("1:"): the filter goes there
         * instead of the clsact hook. Egress only. */
        bool has_parent;
        uint32_t parent;
        FilterAttach attach;
        /* "maps": by default a new program takes over every map (by name) of the program it replaces. */
        MapPolicy *maps;
        size_t n_maps;
        /* "metrics": what /metrics derives from the program's maps. */
        MetricSpec *metrics;
        size_t n_metrics;
} FilterSpec;

/* The desired state of one interface. Built (parsed, resolved) by one owner, then immutable and
 * shared: whoever keeps it takes a reference. What the kernel did with it is never written back into
 * it (see DocumentFacts). */
typedef struct Document {
        unsigned n_ref;
        char *netns; /* the named network namespace of the interface; NULL: clsd's own */
        char *ifname;
        uint64_t generation;
        DocumentSource source;
        FilterSpec *filters[_DIRECTION_MAX];
        size_t n_filters[_DIRECTION_MAX];
} Document;

Document *document_ref(Document *d);
/* Drops a reference; the last one frees. */
Document *document_unref(Document *d);
DEFINE_TRIVIAL_CLEANUP_FUNC(Document *, document_unref);
#define document_free document_unref
#define document_freep document_unrefp

/* What clsd attached last for a document, kept beside it in the store so that a restart adopts exactly
 * those programs (a program and a look-alike share a tag: the id tells them apart). */
typedef struct AttachedFact {
        char tag[17]; /* "" when nothing is known */
        uint32_t prog_id;
} AttachedFact;

typedef struct FilterFact {
        char name[FILTER_NAME_MAX + 1];
        char instance[17]; /* the program instance's name when the filter had maps of its own, else "" */
        AttachedFact program;
        AttachedFact actions[ACTIONS_PER_FILTER_MAX];
        size_t n_actions;
} FilterFact;

typedef struct DocumentFacts {
        bool clsact_created; /* clsd created the clsact qdisc and may remove it when done */
        FilterFact *filters;
        size_t n_filters;
} DocumentFacts;

void document_facts_done(DocumentFacts *f);
int document_facts_copy(const DocumentFacts *f, DocumentFacts *ret);
/* The fact of the filter named name, or NULL. */
const FilterFact *document_facts_find(const DocumentFacts *f, const char *name);
/* Sets (adding) the filter's fact; -ENOMEM. */
int document_facts_set(DocumentFacts *f, const FilterFact *fact);
void filter_spec_done(FilterSpec *f);

/* metric-spec.c */
int metric_specs_parse(json_t *j, const char *path, MetricSpec **ret, size_t *ret_n, Error *reterr);
json_t *metric_specs_to_json(const MetricSpec *v, size_t n);
void metric_specs_free(MetricSpec *v, size_t n);
const char *metric_type_to_string(MetricType t);
bool metric_name_valid(const char *s);

/* action-spec.c */
int action_specs_parse(json_t *j, const char *path, ActionSpec **ret, size_t *ret_n, Error *reterr);
json_t *action_specs_to_json(const ActionSpec *v, size_t n);
void action_specs_free(ActionSpec *v, size_t n);

/* map-policy.c */
int map_policies_parse(json_t *j, const char *path, MapPolicy **ret, size_t *ret_n, Error *reterr);
json_t *map_policies_to_json(const MapPolicy *v, size_t n);
void map_policies_free(MapPolicy *v, size_t n);
/* Whether the filter's new program takes over the map of this (kernel) name: true unless "maps" says
 * "reuse": false. */
bool filter_map_reused(const FilterSpec *f, const char *map);
/* Whether every filter of the program shares the map of this (kernel) name: true unless "maps" says
 * "shared": false, which gives each filter (interface and hook) a program instance with its own. */
bool filter_map_shared(const FilterSpec *f, const char *map);
/* Whether "maps" gives the filter a map of its own (then its program is its own load). */
bool filter_has_own_maps(const FilterSpec *f);
/* Whether "maps" declares the map of this (kernel) name configuration: "config": true. */
bool filter_map_config(const FilterSpec *f, const char *map);
bool filter_has_config_maps(const FilterSpec *f);

int ifname_valid(const char *s);
/* 1 to 64 characters of A-Z a-z 0-9 _ . -, not "." or "..". */
int netns_name_valid(const char *s);
int filter_name_valid(const char *s);
int classid_parse(const char *s, uint32_t *ret);
/* "MAJ:" or "MAJ:MIN", as tc writes a parent. */
int parent_parse(const char *s, uint32_t *ret);
void parent_format(uint32_t parent, char buf[16]);
void classid_format(uint32_t classid, char buf[16]);

/* Parses a PUT body strictly (unknown fields, wrong types and bad values are errors naming the
 * field) and applies defaults. */
int document_from_json(const char *ifname, json_t *spec, Document **ret, Error *reterr);
int document_from_string(const char *ifname, const char *text, size_t size, Document **ret, Error *reterr);
/* The normalized spec: {"ingress":[…],"egress":[…]} */
json_t *document_spec_to_json(const Document *d);
/* The same filters (as document_spec_to_json() renders them), whatever the generation. */
bool document_spec_equal(const Document *a, const Document *b);
json_t *filter_spec_to_json(const FilterSpec *f);
/* A hog file: a PUT document plus "ifname" (and optionally "netns"), its objects given by absolute
 * path. */
/* jansson's reason without the text it quotes ("near 'root'"): a file read as root is not told. */
const char *json_error_reason(const json_error_t *e, char *buf, size_t size);
int document_hog_from_string(const char *text, size_t size, Document **ret, Error *reterr);
/* Whether the filter is attached through tcx on a kernel that has tcx (or not): "tcx", or "auto" for a
 * direct-action filter on a clsact hook. */
bool filter_spec_uses_tcx(const FilterSpec *f, bool kernel_has_tcx);
const FilterSpec *document_find_filter(const Document *d, const char *name, Direction *ret_dir);
/* "Alike", the one definition, part by part: the same program (object digest and program name) serves
 * both filters' classifier; the same serves their action k (both have one). A filter is alike another
 * when its hook, name and every part are (filter_alike(), compose.c); what is kept or shared goes by
 * part (a program a changed filter still names is not loaded again). */
bool filter_spec_program_alike(const FilterSpec *a, const FilterSpec *b);
bool filter_spec_action_alike(const FilterSpec *a, const FilterSpec *b, size_t k);

/* ---- policies (policy.c): one document for every interface that matches ---- */
#define POLICY_NAME_MAX 64
#define POLICY_GLOBS_MAX 64
#define POLICY_ORDER_MIN (-1000000)
#define POLICY_ORDER_MAX 1000000

/* Which interfaces a policy is for: every list but ifname may be empty. */
typedef struct PolicyMatch {
        char **ifname; /* fnmatch(3) globs over interface names; at least one */
        size_t n_ifname;
        char **netns; /* globs over named namespaces (/run/netns/NAME); none: clsd's own namespace only */
        size_t n_netns;
        char **kind; /* link kinds (veth, vlan, bond, bridge, …; "physical", "loopback"); none: any */
        size_t n_kind;
        char **master; /* globs over the master's name (a bridge, a bond); none: any, with or without one */
        size_t n_master;
} PolicyMatch;

/* Immutable once parsed and shared, like a Document. */
typedef struct Policy {
        unsigned n_ref;
        char *name;
        uint64_t generation;
        int32_t order; /* on a hook two policies want, the lower order holds it; equal: a conflict */
        PolicyMatch match;
        Document *doc; /* the filters; doc->ifname is the policy's name, doc->source SOURCE_POLICY */
        char *hog_path; /* declared by this hog file (hogs.d, with "match"): read-only to the API, and
                         * on its hooks it wins over interfaces' own documents; NULL: the API's */
        /* From the fleet (etcd): the revision of its key there; read-only to the API, kept in the
         * store so that a start without etcd still has it. 0: not the fleet's. */
        uint64_t fleet_revision;
} Policy;

int policy_name_valid(const char *s);
Policy *policy_ref(Policy *p);
Policy *policy_unref(Policy *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(Policy *, policy_unref);
/* Parses a PUT body strictly: "match", "order", "ingress", "egress". */
int policy_from_json(const char *name, json_t *j, Policy **ret, Error *reterr);
/* {"match", "order", "ingress", "egress"}, normalized. */
json_t *policy_to_json(const Policy *p);
json_t *policy_match_to_json(const PolicyMatch *m);
/* Whether the policy is for the link; netns NULL: clsd's own; kind as policy_link_kind() says;
 * master NULL: none. */
bool policy_matches(const Policy *p, const char *netns, const char *ifname, const char *kind,
                    const char *master);
/* Whether interfaces of the namespace (NULL: clsd's own) may match. */
bool policy_matches_netns(const Policy *p, const char *netns);

typedef struct Store Store;

/* Opens (creating) the state directory and its documents/ and objects/ subdirectories. */
int store_open(const char *dir, Store **ret, Error *reterr);
Store *store_free(Store *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(Store *, store_free);
const char *store_dir(const Store *s);

/* A document as the store keeps it: the document and what clsd attached for it. */
typedef struct StoredDocument {
        Document *doc;
        DocumentFacts facts;
} StoredDocument;

void stored_documents_free(StoredDocument *v, size_t n);

/* Loads every document; corrupt files are moved to quarantine/ and reported through the callback.
 * Crash leftovers (".*.tmp") are removed. */
typedef void (*StoreProblemFunc)(const char *path, const char *reason, void *userdata);
int store_documents_load(Store *s, DocumentSource source, StoredDocument **ret, size_t *ret_n,
                         StoreProblemFunc problem, void *userdata, Error *reterr);
/* The same in two steps, for a start: _begin() lists the files and has a thread read and parse them
 * while the caller does other work (nothing of the store's); _end() parses what is left on the caller's
 * thread too, waits for the thread, then moves and reports the corrupt files and returns the documents in
 * the directory's order. _end() frees the StoreLoad whatever it returns. */
typedef struct StoreLoad StoreLoad;
int store_documents_load_begin(Store *s, DocumentSource source, StoreLoad **ret, Error *reterr);
int store_documents_load_end(StoreLoad *l, StoredDocument **ret, size_t *ret_n, StoreProblemFunc problem,
                             void *userdata, Error *reterr);
/* An API document is kept under documents/; for a hog (whose document is configuration), what it
 * attached last is kept under hogs/, so that a restart adopts it too. facts may be NULL (none). */
int store_document_save(Store *s, const Document *d, const DocumentFacts *facts, Error *reterr);
int store_document_remove(Store *s, DocumentSource source, const char *netns, const char *ifname,
                          Error *reterr);
/* -ENOENT, without touching reterr, when there is none. */
int store_document_load(Store *s, DocumentSource source, const char *netns, const char *ifname,
                        StoredDocument *ret, Error *reterr);

/* The revision of the fleet snapshot last applied (fleet.json); 0 when there is none. */
int store_fleet_revision_save(Store *s, uint64_t revision, Error *reterr);
int store_fleet_revision_load(Store *s, uint64_t *ret);
/* The fleet's rollouts in flight on this node (fleet-rollouts.json: a JSON object, written whole;
 * NULL or empty: the file goes). */
int store_fleet_keep_save(Store *s, json_t *keep, Error *reterr);
int store_fleet_keep_load(Store *s, json_t **ret);
/* The entries of configuration maps ("config": true) written through clsd: one JSON object, kept in
 * map-entries.json. Load gives an empty object when there is none. */
int store_map_entries_save(Store *s, const json_t *entries, Error *reterr);
int store_map_entries_load(Store *s, json_t **ret, Error *reterr);

/* Policies, each under policies/NAME.json, its objects resolved (by digest, with their program). */
int store_policy_save(Store *s, const Policy *p, Error *reterr);
int store_policy_remove(Store *s, const char *name, Error *reterr);
/* Several policies put and removed as one: after a crash anywhere the store holds all of the change or
 * none of it. _begin() writes the whole change to a journal (policies.commit) and returns it; _end()
 * carries it out file by file and removes it; a load finds a journal left by a crash and carries it out.
 * store_policies_commit() is both (one file changes atomically by itself: no journal). */
int store_policies_commit(Store *s, Policy *const *put, size_t n_put, char *const *remove, size_t n_remove,
                          Error *reterr);
int store_policies_commit_begin(Store *s, Policy *const *put, size_t n_put, char *const *remove,
                                size_t n_remove, json_t **ret, Error *reterr);
int store_policies_commit_end(Store *s, json_t *journal, Error *reterr);
/* Every policy; corrupt files are moved to quarantine/ and reported through the callback. */
int store_policies_load(Store *s, Policy ***ret, size_t *ret_n, StoreProblemFunc problem, void *userdata,
                        Error *reterr);

/* Objects: ELF bytes stored once under their sha256 digest. */
int store_object_put(Store *s, const void *data, size_t size, char ret_digest[SHA256_DIGEST_STRING_MAX],
                     bool *ret_created, Error *reterr);
/* The same where the caller hashed the bytes already (an upload: 16 MiB is not hashed twice). */
int store_object_put_hashed(Store *s, const void *data, size_t size, const char *digest, bool *ret_created,
                            Error *reterr);
/* An object's signature (a minisign or signify file, --trusted-keys), kept beside it as <hex>.o.sig,
 * replaced by a later one; read back at start to verify the object again. -ENOENT: none. */
#define STORE_SIGNATURE_MAX 4096
int store_object_signature_put(Store *s, const char *digest, const char *sig, size_t size, Error *reterr);
int store_object_signature_read(const Store *s, const char *digest, char **ret_sig, size_t *ret_size);
int store_object_path(const Store *s, const char *digest, char **ret_path);
int store_object_exists(const Store *s, const char *digest);
/* -EBADMSG when the bytes do not hash to their name. */
int store_object_read(const Store *s, const char *digest, size_t max, char **ret_data, size_t *ret_size);
/* Moves an object file that cannot be used to quarantine/, so it is neither served nor lost. */
int store_object_quarantine(Store *s, const char *digest, char **ret_path);
int store_object_remove(Store *s, const char *digest, Error *reterr);
/* Lists digests of stored objects, sorted. */
int store_object_list(const Store *s, char ***ret_digests, size_t *ret_n);
