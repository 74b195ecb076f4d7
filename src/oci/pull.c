/* pull.c: an image's object pulled: its manifest (an index's for this machine's platform), its
 * configuration's labels (bpfman's io.ebpf.*), its one layer, each read up to a limit and checked
 * against its digest before it is used; and, when asked, the cosign signature's material (the
 * sha256-DIGEST.sig tag's simple-signing payloads and their signatures), verified later by the trusted
 * keys (trusted_keys_verify()). */
#include <jansson.h>
#include <string.h>
#include <sys/utsname.h>

#include "oci-internal.h"

#define MANIFEST_MAX (4 * 1024 * 1024)
#define CONFIG_MAX (1024 * 1024)
#define SIGNATURE_LAYERS_MAX 8
#define PAYLOAD_MAX (64 * 1024)

#define MT_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MT_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define MT_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"
#define MT_COSIGN_PAYLOAD "application/vnd.dev.cosign.simplesigning.v1+json"
#define COSIGN_ANNOTATION "dev.cosignproject.cosign/signature"

static const char ACCEPT_MANIFESTS[] =
        MT_OCI_MANIFEST ", " MT_DOCKER_MANIFEST ", " MT_OCI_INDEX ", " MT_DOCKER_LIST;

void oci_image_done(OciImage *i) {
        free(i->pinned);
        free(i->data);
        free(i->envelope);
        free(i->programs);
        free(i->labels);
        *i = (OciImage){ 0 };
}

/* A descriptor's digest and size, checked. */
static int descriptor(json_t *d, const char *what, const char **digest, uint64_t *size, Error *reterr) {
        json_t *s = json_object_get(d, "size");

        *digest = json_string_value(json_object_get(d, "digest"));
        if (!*digest || !sha256_digest_string_valid(*digest) || !json_is_integer(s) ||
            json_integer_value(s) < 0)
                return error_set(reterr, EINVAL, ERROR_IMAGE_INVALID,
                                 "the manifest's %s has no sha256 digest and size (clsd takes sha256 only)",
                                 what);
        *size = json_integer_value(s);
        return 0;
}

static const char *machine_architecture(void) {
        struct utsname u;
        static const char *const map[][2] = { { "x86_64", "amd64" }, { "aarch64", "arm64" },
                                              { "armv7l", "arm" },   { "ppc64le", "ppc64le" },
                                              { "s390x", "s390x" },  { "riscv64", "riscv64" } };

        if (uname(&u) == 0)
                for (size_t i = 0; i < ELEMENTSOF(map); i++)
                        if (streq(u.machine, map[i][0]))
                                return map[i][1];
        return "amd64";
}

/* The manifest the reference names, checked against the digest it names (or the registry's
 * Docker-Content-Digest for a tag); an index gives way to its manifest for linux and this machine's
 * architecture (or its only one). ret_digest: the digest of what the reference named. */
static int manifest_get(OciSession *s, json_t **ret, char ret_digest[SHA256_DIGEST_STRING_MAX],
                        Error *reterr) {
        _cleanup_(oci_answer_done) OciAnswer a = { 0 };
        _cleanup_free_ char *what = NULL;
        const char *want = s->ref.digest[0] ? s->ref.digest : NULL;
        json_t *m;
        int r;

        if (asprintf(&what, "manifests/%s", want ?: s->ref.tag) < 0)
                return error_oom(reterr);
        r = oci_get(s, what, ACCEPT_MANIFESTS, MANIFEST_MAX, &a, reterr);
        if (r == -EFBIG)
                return error_set(reterr, EFBIG, ERROR_IMAGE_INVALID, "the manifest is larger than 4 MiB");
        if (r < 0)
                return r;
        if (a.status == 404)
                return error_set(reterr, ENOENT, ERROR_IMAGE_NOT_FOUND, "registry %s has no %s%s in %s",
                                 s->ref.registry, want ? "manifest " : "tag ", want ?: s->ref.tag,
                                 s->ref.repository);
        if (!want && a.docker_digest[0] && sha256_digest_string_valid(a.docker_digest))
                want = a.docker_digest;
        r = oci_answer_check(s, &a, "the manifest", want, reterr);
        if (r < 0)
                return r;
        sha256_digest_string(a.body.data ?: "", a.body.size, ret_digest);
        m = json_loadb(a.body.data ?: "", a.body.size, 0, NULL);
        if (!json_is_object(m)) {
                json_decref(m);
                return error_set(reterr, EINVAL, ERROR_IMAGE_INVALID,
                                 "registry %s: the manifest of %s is not JSON", s->ref.registry,
                                 s->ref.repository);
        }
        *ret = m;
        return 0;
}

static int index_pick(OciSession *s, json_t *index, json_t **ret, Error *reterr) {
        json_t *list = json_object_get(index, "manifests"), *pick = NULL, *d;
        _cleanup_(oci_answer_done) OciAnswer a = { 0 };
        _cleanup_free_ char *what = NULL;
        const char *arch = machine_architecture(), *digest;
        uint64_t size;
        size_t i;
        int r;

        json_array_foreach (list, i, d) {
                json_t *p = json_object_get(d, "platform");
                if (streq_ptr(json_string_value(json_object_get(p, "os")), "linux") &&
                    streq_ptr(json_string_value(json_object_get(p, "architecture")), arch)) {
                        pick = d;
                        break;
                }
        }
        if (!pick && json_array_size(list) == 1)
                pick = json_array_get(list, 0);
        if (!pick)
                return error_set(reterr, ENOENT, ERROR_IMAGE_NOT_FOUND,
                                 "registry %s: the index of %s has no manifest for linux/%s",
                                 s->ref.registry, s->ref.repository, arch);
        r = descriptor(pick, "index entry", &digest, &size, reterr);
        if (r < 0)
                return r;
        if (asprintf(&what, "manifests/%s", digest) < 0)
                return error_oom(reterr);
        r = oci_get(s, what, ACCEPT_MANIFESTS, MANIFEST_MAX, &a, reterr);
        if (r < 0)
                return r;
        r = oci_answer_check(s, &a, "the platform's manifest", digest, reterr);
        if (r < 0)
                return r;
        *ret = json_loadb(a.body.data ?: "", a.body.size, 0, NULL);
        if (!json_is_object(*ret) || json_object_get(*ret, "manifests"))
                return error_set(reterr, EINVAL, ERROR_IMAGE_INVALID,
                                 "registry %s: the platform's manifest is not one", s->ref.registry);
        return 0;
}

static int blob_get(OciSession *s, const char *digest, uint64_t size, size_t max, const char *what,
                    OciAnswer *a, Error *reterr) {
        _cleanup_free_ char *path = NULL;
        int r;

        if (size > max)
                return error_set(reterr, EFBIG, ERROR_PAYLOAD_TOO_LARGE,
                                 "registry %s: %s of %s is %llu bytes, over the limit of %zu",
                                 s->ref.registry, what, s->ref.repository, (unsigned long long) size, max);
        if (asprintf(&path, "blobs/%s", digest) < 0)
                return error_oom(reterr);
        r = oci_get(s, path, NULL, size, a, reterr);
        if (r == -EFBIG)
                return error_set(reterr, EBADMSG, ERROR_IMAGE_DIGEST_MISMATCH,
                                 "registry %s: %s of %s is longer than the %llu bytes its manifest says",
                                 s->ref.registry, what, s->ref.repository, (unsigned long long) size);
        if (r < 0)
                return r;
        return oci_answer_check(s, a, what, digest, reterr);
}

/* The configuration's labels (bpfman's io.ebpf.*): the object's file name, its programs. */
static int config_labels(OciSession *s, json_t *manifest, OciImage *img, char **filename, Error *reterr) {
        _cleanup_(oci_answer_done) OciAnswer a = { 0 };
        json_t *c = json_object_get(manifest, "config"), *j, *labels;
        const char *digest, *mt = json_string_value(json_object_get(c, "mediaType"));
        uint64_t size;
        int r;

        img->format = "plain";
        if (!c || !mt || !strstr(mt, "json"))
                return 0;
        r = descriptor(c, "config", &digest, &size, reterr);
        if (r < 0)
                return r;
        r = blob_get(s, digest, size, CONFIG_MAX, "the image's configuration", &a, reterr);
        if (r < 0)
                return r;
        j = json_loadb(a.body.data ?: "", a.body.size, 0, NULL);
        labels = json_object_get(json_object_get(j, "config"), "Labels");
        if (json_is_object(labels)) {
                const char *programs = json_string_value(json_object_get(labels, "io.ebpf.programs"));
                const char *fname = json_string_value(json_object_get(labels, "io.ebpf.filename"));
                if (programs || fname || json_object_get(labels, "io.ebpf.program_name"))
                        img->format = "bpfman";
                if (programs && !(img->programs = strdup(programs)))
                        r = -ENOMEM;
                if (fname && !(*filename = strdup(fname)))
                        r = -ENOMEM;
                if (!(img->labels = json_dumps(labels, JSON_COMPACT | JSON_SORT_KEYS)))
                        r = -ENOMEM;
        }
        json_decref(j);
        return r < 0 ? error_oom(reterr) : 0;
}

static int layer_get(OciSession *s, json_t *manifest, const char *filename, OciImage *img, Error *reterr) {
        _cleanup_(oci_answer_done) OciAnswer a = { 0 };
        json_t *layers = json_object_get(manifest, "layers"), *l;
        const char *digest, *mt;
        uint64_t size;
        int r;

        if (json_array_size(layers) != 1)
                return error_set(reterr, EINVAL, ERROR_IMAGE_INVALID,
                                 "registry %s: the image %s has %zu layers; an eBPF image has exactly one",
                                 s->ref.registry, s->ref.repository, json_array_size(layers));
        l = json_array_get(layers, 0);
        mt = json_string_value(json_object_get(l, "mediaType")) ?: "";
        r = descriptor(l, "layer", &digest, &size, reterr);
        if (r < 0)
                return r;
        r = blob_get(s, digest, size, s->o->size_max, "the layer", &a, reterr);
        if (r < 0)
                return r;
        r = oci_layer_object(mt, a.body.data ?: "", a.body.size, filename, s->o->size_max, &img->data,
                             &img->size, reterr);
        if (r < 0)
                return r;
        sha256_digest_string(img->data, img->size, img->digest);
        return 0;
}

/* The cosign signature's material as an envelope: {"manifest_digest", "object", "signatures":
 * [{"payload", "signature"}]} (payloads and signatures in base64). NULL: the image has no signature. */
static int signature_get(OciSession *s, OciImage *img, Error *reterr) {
        _cleanup_(oci_answer_done) OciAnswer a = { 0 };
        _cleanup_free_ char *what = NULL;
        json_t *m = NULL, *layers, *l, *env = NULL, *sigs;
        size_t i;
        int r;

        if (asprintf(&what, "manifests/sha256-%s.sig", img->manifest_digest + 7) < 0)
                return error_oom(reterr);
        r = oci_get(s, what, MT_OCI_MANIFEST ", " MT_DOCKER_MANIFEST, MANIFEST_MAX, &a, reterr);
        if (r < 0)
                return r;
        if (a.status == 404)
                return 0; /* unsigned: the trusted keys say what that means */
        r = oci_answer_check(s, &a, "the signature's manifest", NULL, reterr);
        if (r < 0)
                return r;
        m = json_loadb(a.body.data ?: "", a.body.size, 0, NULL);
        layers = json_object_get(m, "layers");
        env = json_pack("{s:s, s:s, s:s, s:[]}", "format", "cosign", "manifest_digest", img->manifest_digest,
                        "object", img->digest, "signatures");
        sigs = json_object_get(env, "signatures");
        if (!env) {
                json_decref(m);
                return error_oom(reterr);
        }
        json_array_foreach (layers, i, l) {
                _cleanup_(oci_answer_done) OciAnswer p = { 0 };
                const char *sig = json_string_value(
                        json_object_get(json_object_get(l, "annotations"), COSIGN_ANNOTATION));
                const char *digest;
                uint64_t size;
                gnutls_datum_t in, out = { 0 };
                if (i >= SIGNATURE_LAYERS_MAX || !sig ||
                    !streq_ptr(json_string_value(json_object_get(l, "mediaType")), MT_COSIGN_PAYLOAD))
                        continue;
                r = descriptor(l, "signature layer", &digest, &size, reterr);
                if (r < 0 ||
                    (r = blob_get(s, digest, size, PAYLOAD_MAX, "a signature's payload", &p, reterr)) < 0)
                        break;
                in = (gnutls_datum_t){ (unsigned char *) p.body.data, p.body.size };
                if (gnutls_api.base64_encode2(&in, &out) < 0) {
                        r = error_oom(reterr);
                        break;
                }
                json_array_append_new(sigs, json_pack("{s:s%, s:s}", "payload", (char *) out.data,
                                                      (size_t) out.size, "signature", sig));
                (*gnutls_api.free)(out.data);
        }
        json_decref(m);
        if (r >= 0 && json_array_size(sigs) > 0) {
                img->envelope = json_dumps(env, JSON_COMPACT | JSON_SORT_KEYS);
                if (!img->envelope)
                        r = error_oom(reterr);
                else
                        img->envelope_size = strlen(img->envelope);
        }
        json_decref(env);
        return r < 0 ? r : 0;
}

/* The image of the open session: its manifest (the platform's, from an index), its labels, its one layer's
 * object, its signatures if asked, pinned. */
static int pull_image(OciSession *s, OciImage *img, Error *reterr) {
        _cleanup_(json_decrefp) json_t *m = NULL;
        _cleanup_free_ char *filename = NULL;
        int r;

        r = manifest_get(s, &m, img->manifest_digest, reterr);
        if (r < 0)
                return r;
        if (json_object_get(m, "manifests")) {
                _cleanup_(json_decrefp) json_t *platform = NULL;
                r = index_pick(s, m, &platform, reterr);
                if (r < 0)
                        return r;
                json_decref(m);
                m = TAKE_PTR(platform);
        }
        r = config_labels(s, m, img, &filename, reterr);
        if (r < 0)
                return r;
        r = layer_get(s, m, filename, img, reterr);
        if (r < 0)
                return r;
        if (s->o->signature && (r = signature_get(s, img, reterr)) < 0)
                return r;
        if (oci_ref_pinned(&s->ref, img->manifest_digest, &img->pinned) < 0)
                return error_oom(reterr);
        return 0;
}

int oci_pull(const char *ref, const OciPullOptions *o, OciImage *ret, Error *reterr) {
        _cleanup_(oci_session_close) OciSession s = { 0 };
        _cleanup_(oci_image_done) OciImage img = { 0 };
        int r;

        r = oci_session_open(&s, ref, o, reterr);
        if (r < 0)
                return r;
        r = pull_image(&s, &img, reterr);
        img.requests = s.requests;
        if (r < 0)
                return r;
        *ret = img;
        img = (OciImage){ 0 };
        return 0;
}

int oci_manifest_get(const char *ref, const OciPullOptions *o, json_t **ret, Error *reterr) {
        _cleanup_(oci_session_close) OciSession s = { 0 };
        _cleanup_error_ Error e = ERROR_NULL;
        char digest[SHA256_DIGEST_STRING_MAX];
        int r;

        *ret = NULL;
        r = oci_session_open(&s, ref, o, reterr);
        if (r < 0)
                return r;
        r = manifest_get(&s, ret, digest, &e);
        if (r == -ENOENT && e.code == ERROR_IMAGE_NOT_FOUND)
                return 0; /* (none yet) */
        if (r < 0 && reterr) {
                *reterr = e;
                e = (Error) ERROR_NULL;
        }
        return r;
}
