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
