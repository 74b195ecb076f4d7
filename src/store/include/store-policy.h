/* store-policy.h: policies, one document for every interface that matches: parsed, checked, stored */
#pragma once

#include "store.h"

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
