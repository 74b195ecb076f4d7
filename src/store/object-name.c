/* object-name.c: what an "object" may be in a document, a filter's or an action's: a digest, an
 * absolute path, or an OCI reference (oci-ref.h). */
#include "oci-ref.h"
#include "store-internal.h"

int object_name_check(const char *o, const char *path, Error *reterr) {
        OciRef ref;

        if (oci_ref_is(o)) {
                _cleanup_error_ Error e = ERROR_NULL;
                if (oci_ref_parse(o, &ref, &e) < 0) {
                        error_set(reterr, EINVAL, ERROR_INVALID_VALUE, "%s: %s", path, e.message);
                        return -EINVAL;
                }
                return 0;
        }
        if (!sha256_digest_string_valid(o) && o[0] != '/')
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                 "%s: expected \"sha256:<64 lowercase hex>\", an absolute path or "
                                 "\"oci://REGISTRY/REPOSITORY[:TAG][@sha256:DIGEST]\"",
                                 path);
        if (strlen(o) > 4096)
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE, "%s: path too long", path);
        return 0;
}
