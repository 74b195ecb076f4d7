/* oci-ref.h: an object named by OCI reference, "oci://REGISTRY/REPOSITORY[:TAG][@sha256:DIGEST]", parsed
 * strictly (the distribution spec's grammar for names and tags). Pure: the store checks documents with it,
 * the puller (src/oci/) reads registries with it. */
#pragma once

#include "error.h"
#include "sha256.h"

#define OCI_REF_PREFIX "oci://"
#define OCI_REF_MAX 512

typedef struct OciRef {
        char registry[256]; /* host[:port] or [v6]:port */
        char repository[256]; /* path components: [a-z0-9]+([._-]+[a-z0-9]+)*, '/' apart */
        char tag[129]; /* "": none */
        char digest[SHA256_DIGEST_STRING_MAX]; /* "": none; else the manifest's, what is pulled */
} OciRef;

static inline bool oci_ref_is(const char *s) {
        return s && startswith(s, OCI_REF_PREFIX);
}
/* 0, or -EINVAL with reterr (code "invalid_value") saying which part is wrong. */
int oci_ref_parse(const char *s, OciRef *ret, Error *reterr);
/* The reference pinned to the manifest digest: "oci://REGISTRY/REPOSITORY[:TAG]@DIGEST" (the tag kept,
 * for a reader; the digest is what is pulled). */
int oci_ref_pinned(const OciRef *r, const char *digest, char **ret);
