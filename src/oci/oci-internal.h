/* oci-internal.h: what the OCI module's files share: a session with one registry (http.c), the
 * requests made through it, and a layer's object taken out (layer.c). */
#pragma once

#include "dl.h"
#include "oci.h"

typedef struct OciBuffer {
        char *data;
        size_t size, max;
        bool over; /* more came than max */
} OciBuffer;

typedef struct OciAnswer {
        long status;
        OciBuffer body;
        char content_type[128];
        char docker_digest[SHA256_DIGEST_STRING_MAX + 8];
        char *challenge; /* WWW-Authenticate's value */
        char *location; /* Location's URL, made whole against the URL that answered (an upload's) */
        long retry_after; /* Retry-After, in seconds (0: none) */
} OciAnswer;

typedef struct OciSession {
        OciRef ref;
        const OciPullOptions *o;
        CURL *easy;
        char *bearer; /* a token the registry's token service gave (or the registries file's) */
        bool basic; /* the registry asked for basic auth */
        unsigned requests;
        unsigned busy; /* 429s and 503s waited out */
        char errbuf[CURL_ERROR_SIZE];
} OciSession;

/* registries.c: one registry's entry freed (its secrets wiped), or copied whole. */
void oci_registry_done(OciRegistry *r);
int oci_registry_copy(const OciRegistry *from, OciRegistry *to);

int oci_session_open(OciSession *s, const char *ref, const OciPullOptions *o, Error *reterr);
void oci_session_close(OciSession *s);
/* GET /v2/REPOSITORY/WHAT (e.g. "manifests/TAG", "blobs/DIGEST"), authenticating as the registry asks:
 * 0 with the answer (any status but 401), or <0 with reterr (unreachable, credentials refused, more
 * than max bytes). */
int oci_get(OciSession *s, const char *what, const char *accept, size_t max, OciAnswer *a, Error *reterr);
void oci_answer_done(OciAnswer *a);
/* What a request sends (push.c): its method ("HEAD", "POST", "PUT") and body, if any. */
typedef struct OciSend {
        const char *method;
        const char *content_type;
        const void *body;
        size_t size;
        bool anonymous; /* no credentials with it (a URL on another host than the registry's) */
} OciSend;
/* As oci_get(), with a method and a body: what is the path under /v2/REPOSITORY/, or a URL the registry
 * gave (an upload's Location, absolute or from the root). */
int oci_send(OciSession *s, const char *what, const OciSend *send, size_t max, OciAnswer *a, Error *reterr);
/* A manifest or blob's answer checked: 200 and bytes whose sha256 is digest (if not NULL). */
int oci_answer_check(OciSession *s, const OciAnswer *a, const char *what, const char *digest, Error *reterr);

/* The object in a layer of media type: a tar (gzipped or not) is searched for filename (NULL: its one
 * file ending in ".o"), anything else is taken as the object; it must be ELF. */
int oci_layer_object(const char *media_type, const char *data, size_t size, const char *filename, size_t max,
                     char **ret, size_t *ret_size, Error *reterr);
