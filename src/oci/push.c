/* push.c: an image pushed through the distribution spec's HTTP API v2: each blob the registry does not
 * have yet (HEAD) uploaded whole (POST an upload, PUT its bytes with their digest), then the manifest under
 * its tag. The session, its authentication (basic, or a bearer token whose scope the registry's challenge
 * names: push and pull) and its pacing are a pull's (http.c). */
#include <stdio.h>
#include <string.h>

#include "oci-internal.h"

#define ANSWER_MAX (64 * 1024)

static int refused(OciSession *s, const OciAnswer *a, const char *what, Error *reterr) {
        if (a->status == 401 || a->status == 403)
                return error_set(reterr, EACCES, ERROR_REGISTRY_AUTH_FAILED,
                                 "registry %s refused to take %s in %s (%ld): the credentials may pull but "
                                 "not push",
                                 s->ref.registry, what, s->ref.repository, a->status);
        return error_set(reterr, EPROTO, ERROR_REGISTRY_ERROR,
                         "registry %s answered %ld to %s in %s%s%.200s", s->ref.registry, a->status, what,
                         s->ref.repository, a->body.size ? ": " : "", a->body.data ?: "");
}

static int blob_push(OciSession *s, const OciBlob *b, const char *what, Error *reterr) {
        _cleanup_(oci_answer_done) OciAnswer a = { 0 };
        _cleanup_free_ char *path = NULL, *put = NULL;
        int r;

        if (asprintf(&path, "blobs/%s", b->digest) < 0)
                return error_oom(reterr);
        r = oci_send(s, path, &(OciSend){ .method = "HEAD" }, ANSWER_MAX, &a, reterr);
        if (r < 0)
                return r;
        if (a.status == 200)
                return 0; /* it has it: a layer pushed again, or shared with another image */
        r = oci_send(s, "blobs/uploads/", &(OciSend){ .method = "POST" }, ANSWER_MAX, &a, reterr);
        if (r < 0)
                return r;
        if (a.status != 202 || !a.location)
                return refused(s, &a, what, reterr);
        if (asprintf(&put, "%s%cdigest=%s", a.location, strchr(a.location, '?') ? '&' : '?', b->digest) < 0)
                return error_oom(reterr);
        r = oci_send(s, put,
                     &(OciSend){ .method = "PUT",
                                 .content_type = "application/octet-stream",
                                 .body = b->data,
                                 .size = b->size },
                     ANSWER_MAX, &a, reterr);
        if (r < 0)
                return r;
        return a.status == 201 ? 0 : refused(s, &a, what, reterr);
}

int oci_push(const char *ref, const OciPullOptions *o, const OciBuilt *b, unsigned *ret_requests,
             Error *reterr) {
        _cleanup_(oci_session_close) OciSession s = { 0 };
        _cleanup_(oci_answer_done) OciAnswer a = { 0 };
        _cleanup_free_ char *path = NULL;
        int r;

        r = oci_session_open(&s, ref, o, reterr);
        if (r < 0)
                return r;
        if (!s.ref.tag[0] || s.ref.digest[0])
                return error_set(
                        reterr, EINVAL, ERROR_INVALID_VALUE,
                        "%s: a push names the tag to put the image under (oci://REGISTRY/REPOSITORY:TAG), "
                        "and no digest",
                        ref);
        r = blob_push(&s, &b->config, "the configuration", reterr);
        if (r >= 0)
                r = blob_push(&s, &b->layer, "the layer", reterr);
        if (r < 0)
                return r;
        if (asprintf(&path, "manifests/%s", s.ref.tag) < 0)
                return error_oom(reterr);
        r = oci_send(&s, path,
                     &(OciSend){ .method = "PUT",
                                 .content_type = b->manifest.media_type,
                                 .body = b->manifest.data,
                                 .size = b->manifest.size },
                     ANSWER_MAX, &a, reterr);
        if (r < 0)
                return r;
        if (a.status != 201)
                return refused(&s, &a, "the manifest", reterr);
        if (a.docker_digest[0] && !streq(a.docker_digest, b->manifest.digest))
                return error_set(reterr, EBADMSG, ERROR_IMAGE_DIGEST_MISMATCH,
                                 "registry %s stored the manifest as %s, not %s: it changed its bytes",
                                 s.ref.registry, a.docker_digest, b->manifest.digest);
        if (ret_requests)
                *ret_requests = s.requests;
        return 0;
}
