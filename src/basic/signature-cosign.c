/* signature-cosign.c: cosign's key-based image signatures: a simple-signing payload naming the image's
 * manifest digest, signed with ECDSA P-256 over SHA-256 (ASN.1 DER), verified with the PEM public keys
 * among the trusted keys (cosign.pub), through GnuTLS (opened with dl.h). What is verified is the
 * envelope a pull made (src/oci/pull.c): the payloads and signatures of the image's sha256-DIGEST.sig,
 * the manifest digest they must sign, and the object the manifest's layer held. */
#include <jansson.h>
#include <string.h>

#include "dl.h"
#include "sha256.h"
#include "signature-cosign.h"

#define COSIGN_TYPE "cosign container image signature"

int cosign_key_check(const char *pem, size_t size, Error *reterr) {
        gnutls_pubkey_t key;
        gnutls_datum_t d = { (unsigned char *) pem, size };
        unsigned bits = 0;
        int r = dl_load_curl(reterr);

        if (r < 0)
                return r;
        if (gnutls_api.pubkey_init(&key) < 0)
                return error_oom(reterr);
        r = gnutls_api.pubkey_import(key, &d, GNUTLS_X509_FMT_PEM);
        if (r >= 0 && gnutls_api.pubkey_get_pk_algorithm(key, &bits) != GNUTLS_PK_ECDSA)
                r = -1;
        gnutls_api.pubkey_deinit(key);
        return r < 0 ? -EINVAL : 0;
}

static bool verify_with(const char *pem, size_t pem_size, const gnutls_datum_t *payload,
                        const gnutls_datum_t *sig) {
        gnutls_pubkey_t key;
        gnutls_datum_t d = { (unsigned char *) pem, pem_size };
        bool ok;

        if (gnutls_api.pubkey_init(&key) < 0)
                return false;
        ok = gnutls_api.pubkey_import(key, &d, GNUTLS_X509_FMT_PEM) >= 0 &&
             gnutls_api.pubkey_verify_data2(key, GNUTLS_SIGN_ECDSA_SHA256, 0, payload, sig) >= 0;
        gnutls_api.pubkey_deinit(key);
        return ok;
}

static bool base64_decode(const char *s, gnutls_datum_t *ret) {
        gnutls_datum_t in = { (unsigned char *) s, s ? strlen(s) : 0 };

        *ret = (gnutls_datum_t){ 0 };
        return s && gnutls_api.base64_decode2(&in, ret) >= 0;
}

/* The manifest digest a payload signs, if it is a cosign payload: NULL if not. */
static char *payload_digest(const gnutls_datum_t *p) {
        json_t *j = json_loadb((const char *) p->data, p->size, 0, NULL),
               *crit = json_object_get(j, "critical");
        const char *d =
                json_string_value(json_object_get(json_object_get(crit, "image"), "docker-manifest-digest"));
        char *ret = NULL;

        if (d && streq_ptr(json_string_value(json_object_get(crit, "type")), COSIGN_TYPE))
                ret = strdup(d);
        json_decref(j);
        return ret;
}

int cosign_verify(const CosignKey *keys, size_t n_keys, const char *object_digest, const char *envelope,
                  size_t size, const char *what, Error *reterr) {
        json_t *env = json_loadb(envelope, size, 0, NULL), *sigs = json_object_get(env, "signatures"), *s;
        const char *m = json_string_value(json_object_get(env, "manifest_digest"));
        const char *object = json_string_value(json_object_get(env, "object"));
        char other[SHA256_DIGEST_STRING_MAX] = "", manifest[SHA256_DIGEST_STRING_MAX] = "";
        bool right_digest = false;
        size_t i;
        int r;

        if (m) /* kept past the envelope's json_decref(), for the messages */
                snprintf(manifest, sizeof(manifest), "%s", m);
        if (!m || !object || !json_is_array(sigs)) {
                json_decref(env);
                return error_set(reterr, EPERM, ERROR_OBJECT_SIGNATURE_INVALID,
                                 "%s: its cosign signature envelope is damaged", what);
        }
        if (!streq(object, object_digest)) {
                error_set(reterr, EPERM, ERROR_OBJECT_SIGNATURE_INVALID,
                          "%s: its cosign signature is for object %s", what, object);
                json_decref(env);
                return -EPERM;
        }
        r = dl_load_curl(reterr);
        if (r < 0) {
                json_decref(env);
                return r;
        }
        json_array_foreach (sigs, i, s) {
                gnutls_datum_t payload, sig;
                _cleanup_free_ char *d = NULL;
                bool ok = false;
                if (!base64_decode(json_string_value(json_object_get(s, "payload")), &payload))
                        continue;
                d = payload_digest(&payload);
                if (d && !streq(d, manifest))
                        snprintf(other, sizeof(other), "%s", d);
                if (d && streq(d, manifest) &&
                    base64_decode(json_string_value(json_object_get(s, "signature")), &sig)) {
                        right_digest = true;
                        for (size_t k = 0; k < n_keys && !ok; k++)
                                ok = verify_with(keys[k].pem, keys[k].size, &payload, &sig);
                        (*gnutls_api.free)(sig.data);
                }
                (*gnutls_api.free)(payload.data);
                if (ok) {
                        json_decref(env);
                        return 0;
                }
        }
        json_decref(env);
        if (!right_digest && other[0])
                return error_set(
                        reterr, EPERM, ERROR_OBJECT_SIGNATURE_INVALID,
                        "%s: its cosign signature signs image %s, not %s: a signature of another image",
                        what, other, manifest);
        if (!right_digest)
                return error_set(reterr, EPERM, ERROR_OBJECT_SIGNATURE_INVALID,
                                 "%s: its signature tag holds no cosign payload for image %s", what,
                                 manifest);
        return error_set(
                reterr, EPERM, ERROR_OBJECT_SIGNATURE_INVALID,
                "%s: its cosign signature of image %s is by no trusted key (%zu cosign key%s tried)", what,
                manifest, n_keys, n_keys == 1 ? "" : "s");
}

/* ---- signing (clsctl image push --sign) ---- */

char *cosign_payload(const char *docker_reference, const char *manifest_digest) {
        json_t *j = json_pack("{s:{s:{s:s}, s:{s:s}, s:s}, s:n}", "critical", "identity", "docker-reference",
                              docker_reference, "image", "docker-manifest-digest", manifest_digest, "type",
                              COSIGN_TYPE, "optional");
        char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;

        json_decref(j);
        return s;
}

int cosign_sign(const char *key_pem, size_t key_size, const char *payload, size_t size, char **ret,
                Error *reterr) {
        gnutls_privkey_t key;
        gnutls_datum_t k = { (unsigned char *) key_pem, key_size },
                       data = { (unsigned char *) payload, size }, sig = { 0 }, b64 = { 0 };
        unsigned bits = 0;
        int r = dl_load_curl(reterr);

        if (r < 0)
                return r;
        if (gnutls_api.privkey_init(&key) < 0)
                return error_oom(reterr);
        r = gnutls_api.privkey_import_x509_raw(key, &k, GNUTLS_X509_FMT_PEM, NULL, 0);
        if (r < 0) {
                gnutls_api.privkey_deinit(key);
                return error_set(
                        reterr, EINVAL, ERROR_INVALID_VALUE,
                        "not a private key in PEM that GnuTLS reads (an encrypted one is not taken)");
        }
        if (gnutls_api.privkey_get_pk_algorithm(key, &bits) != GNUTLS_PK_ECDSA || bits != 256) {
                gnutls_api.privkey_deinit(key);
                return error_set(
                        reterr, EINVAL, ERROR_INVALID_VALUE,
                        "cosign's key-based signatures are ECDSA P-256: this key is another kind "
                        "(openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 makes one)");
        }
        r = gnutls_api.privkey_sign_data2(key, GNUTLS_SIGN_ECDSA_SHA256, 0, &data, &sig);
        gnutls_api.privkey_deinit(key);
        if (r < 0)
                return error_set(reterr, EIO, ERROR_INTERNAL_ERROR, "the signature could not be made");
        r = gnutls_api.base64_encode2(&sig, &b64);
        (*gnutls_api.free)(sig.data);
        if (r < 0)
                return error_oom(reterr);
        *ret = strndup((const char *) b64.data, b64.size);
        (*gnutls_api.free)(b64.data);
        return *ret ? 0 : error_oom(reterr);
}
