/* signature-cosign.h: cosign's key-based image signatures verified (signature-cosign.c). */
#pragma once

#include "error.h"

/* A trusted key in cosign's form: an ECDSA public key in PEM. */
typedef struct CosignKey {
        char *pem;
        size_t size;
        char *file;
} CosignKey;

/* 0 if pem is an ECDSA public key GnuTLS reads, else -EINVAL. */
int cosign_key_check(const char *pem, size_t size, Error *reterr);
/* 0 if the envelope (a pull's, src/oci/pull.c) holds a payload signing its manifest digest, signed by
 * one of keys, and names object_digest as the object its layer held; else -EPERM with reterr
 * ("object_signature_invalid") saying why. */
int cosign_verify(const CosignKey *keys, size_t n_keys, const char *object_digest, const char *envelope,
                  size_t size, const char *what, Error *reterr);

/* cosign's simple-signing payload (JSON) naming manifest_digest as the image of docker_reference
 * (REGISTRY/REPOSITORY); NULL when out of memory. */
char *cosign_payload(const char *docker_reference, const char *manifest_digest);
/* payload signed with key_pem (an ECDSA P-256 private key in PEM, unencrypted: what openssl genpkey makes),
 * as cosign signs: ECDSA over SHA-256, ASN.1 DER, in base64 (the layer's annotation). */
int cosign_sign(const char *key_pem, size_t key_size, const char *payload, size_t size, char **ret,
                Error *reterr);
