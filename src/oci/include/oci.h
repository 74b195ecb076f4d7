/* oci.h: objects pulled from OCI registries (the distribution spec's HTTP API v2) with libcurl: a
 * manifest (or an index, for this machine's platform) and its one layer, each checked against its
 * digest, the object taken out of the layer (a .o in a tar, gzipped or not, or the layer itself), and a
 * cosign signature's material when it is asked for. Images in bpfman's bytecode image format (both its
 * media types, its io.ebpf.* labels) and plain images whose layer holds one .o. Credentials come from a
 * registries file (oci_registries_load), never from documents. */
#pragma once

#include <jansson.h>
#include <systemd/sd-event.h>

#include "error.h"
#include "oci-ref.h"

/* What a registry needs: its credentials and how to reach it. */
typedef struct OciRegistry {
        char *host; /* as references name it: host[:port] */
        char *username, *password; /* basic auth, and what a token service is asked with */
        char *token; /* a bearer token of its own (instead of username and password) */
        char *ca_file; /* the CA that signs its certificate; NULL: the system's */
        bool plain_http; /* http://, for a registry on loopback only */
        unsigned pulls_per_second; /* what it takes (0: OCI_PULLS_PER_SECOND_DEFAULT) */
} OciRegistry;

/* A registry's pulls a second, unless its entry says ("pulls_per_second"): what a modest registry
 * serves (each pull is a few requests: a challenge, the manifest, the configuration, the layer). */
#define OCI_PULLS_PER_SECOND_DEFAULT 100
/* The share of that a fleet's nodes aim at: their starts are drawn at random, and a second's draws
 * vary; at this share the busiest second stays under the rate. */
#define OCI_PULLS_SHARE_PERCENT 60
/* How long a pull of nodes nodes from registry is spread over, in ms: none while they fit the share of
 * one second (any order of them keeps the rate), else uniform over nodes / (rate x share). */
unsigned oci_pull_spread_msec(const OciRegistry *registry, uint64_t nodes);
/* A 429 or 503 with Retry-After (or none: 1 s doubling) is asked again after it, up to this long. */
#define OCI_RETRY_AFTER_MAX_SEC 60

typedef struct OciRegistries OciRegistries;

/* The registries file: {"registries": {"HOST[:PORT]": {"username", "password" | "password_file",
 * "token", "ca_file", "plain_http", "pulls_per_second"}}}, read strictly. A missing file when !required:
 * none. */
int oci_registries_load(const char *path, bool required, OciRegistries **ret, Error *reterr);
OciRegistries *oci_registries_free(OciRegistries *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(OciRegistries *, oci_registries_free);
const OciRegistry *oci_registries_find(const OciRegistries *r, const char *host);
size_t oci_registries_count(const OciRegistries *r);

typedef struct OciPullOptions {
        const OciRegistry *registry; /* NULL: anonymous, https with the system's CAs */
        size_t size_max; /* of the layer and of the object in it */
        bool signature; /* fetch the cosign signature's material (sha256-DIGEST.sig) */
        long timeout_sec; /* of each request; 0: 30 s */
        unsigned jitter_msec; /* oci_pull_start(): wait a random time up to this first */
} OciPullOptions;

typedef struct OciImage {
        char *pinned; /* the reference with the manifest digest: what was verified */
        char manifest_digest[SHA256_DIGEST_STRING_MAX]; /* the one the reference named or its tag resolved to
                                                         */
        char digest[SHA256_DIGEST_STRING_MAX]; /* the object's */
        char *data; /* the object */
        size_t size;
        /* With .signature: the signature envelope (JSON: the signed payloads, their signatures, the
         * manifest), verified by trusted_keys_verify(); NULL when the image has no signature. */
        char *envelope;
        size_t envelope_size;
        const char *format; /* "bpfman" (io.ebpf.* labels) or "plain" */
        char *programs; /* bpfman's io.ebpf.programs label, else NULL */
        char *labels; /* the configuration's labels (a JSON object), else NULL */
        unsigned requests; /* HTTP requests made */
} OciImage;

/* Pulls ref: 0 with ret filled, or <0 with reterr: "image_not_found", "image_invalid",
 * "image_digest_mismatch", "registry_auth_failed", "registry_unreachable", "registry_error",
 * "payload_too_large", "invalid_value" (the reference). Blocks: the daemon pulls on a thread (below). */
int oci_pull(const char *ref, const OciPullOptions *o, OciImage *ret, Error *reterr);
void oci_image_done(OciImage *i);

/* A pull on a thread of its own, its end handed to done() in the loop. The options are copied. */
typedef struct OciPullJob OciPullJob;
typedef void (*OciPullDoneFunc)(int r, OciImage *image, Error *error, void *userdata);
int oci_pull_start(sd_event *event, const char *ref, const OciPullOptions *o, OciPullDoneFunc done,
                   void *userdata, OciPullJob **ret);
/* done() will not be called; the thread's result is dropped when it ends. */
void oci_pull_cancel(OciPullJob *j);

/* ---- images made here (clsctl image build, push; src/oci/build.c, push.c) ---- */

#define OCI_MT_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define OCI_MT_CONFIG "application/vnd.oci.image.config.v1+json"
#define OCI_MT_LAYER "application/vnd.oci.image.layer.v1.tar+gzip"
#define OCI_MT_COSIGN_PAYLOAD "application/vnd.dev.cosign.simplesigning.v1+json"
#define OCI_COSIGN_ANNOTATION "dev.cosignproject.cosign/signature"

typedef struct OciBlob {
        char *data;
        size_t size;
        char digest[SHA256_DIGEST_STRING_MAX];
        const char *media_type;
} OciBlob;

/* An image: its configuration, its one layer and the manifest naming both. */
typedef struct OciBuilt {
        OciBlob config, layer, manifest;
} OciBuilt;

/* bpfman's bytecode image of an object: the layer a gzipped tar holding it as ./filename, the
 * configuration's labels as given (io.ebpf.programs, io.ebpf.maps), OCI's media types. The same object
 * and labels make the same bytes. */
int oci_build(const void *object, size_t size, const char *filename, json_t *labels, OciBuilt *ret,
              Error *reterr);
/* A cosign signature's image (its tag: sha256-HEX.sig of the image it signs): payload as a layer,
 * signature (base64, DER) in the layer's annotation, after the cosign layers of the tag's manifest as it
 * is (existing: its manifest, or NULL), so that a signature by another key stays. */
int oci_build_signature(const char *payload, const char *signature, json_t *existing, OciBuilt *ret,
                        Error *reterr);
/* The manifest ref names, parsed: NULL in ret (and 0) when the registry has none. */
int oci_manifest_get(const char *ref, const OciPullOptions *o, json_t **ret, Error *reterr);
void oci_built_done(OciBuilt *b);
/* The image written into the OCI image layout at dir (made if missing; other tags of an existing one
 * kept), under tag. */
int oci_layout_write(const char *dir, const char *tag, const OciBuilt *b, Error *reterr);
/* The image pushed to ref (oci://REGISTRY/REPOSITORY:TAG) through the registry's HTTP API v2: each blob
 * the registry lacks uploaded (a POST, then a PUT with its digest), then the manifest under the tag;
 * authenticated as a pull is (o->registry). ret: the requests made, or NULL. */
int oci_push(const char *ref, const OciPullOptions *o, const OciBuilt *b, unsigned *ret_requests,
             Error *reterr);
