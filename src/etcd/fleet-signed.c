/* fleet-signed.c: a fleet policy signed (clsctl fleet apply --sign) and the signature read back by a node
 * (clsd --fleet-require-signed). The envelope carries "signed": {"serial": N, "signature": TEXT}, TEXT a
 * minisign or signify signature over
 *     "clsd fleet policy v1\n" NAME "\n" SERIAL "\n" CANONICAL
 * where CANONICAL is the envelope without "signed", as compact JSON with sorted keys (jansson's
 * JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII). The name and the serial are signed with it: a policy
 * signed under another name, or an older one replayed (its serial lower than one the node accepted), is
 * told apart by the node. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd.h"

#define SIGNATURE_TEXT_MAX 1024

char *fleet_signed_message(json_t *envelope, uint64_t serial, size_t *ret_size) {
        _cleanup_(json_decrefp) json_t *copy = json_copy(envelope);
        _cleanup_free_ char *canonical = NULL;
        const char *name = json_string_value(json_object_get(envelope, "name"));
        char *out = NULL;
        int n;

        if (!copy || !name)
                return NULL;
        (void) json_object_del(copy, "signed");
        canonical = json_dumps(copy, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII);
        if (!canonical)
                return NULL;
        n = asprintf(&out, "clsd fleet policy v1\n%s\n%" PRIu64 "\n%s", name, serial, canonical);
        if (n < 0)
                return NULL;
        *ret_size = (size_t) n;
        return out;
}

int fleet_signed_parse(json_t *envelope, FleetPolicy *p, Error *reterr) {
        json_t *s = json_object_get(envelope, "signed"), *serial, *sig;
        const char *key;
        json_t *v;

        if (!s)
                return 0;
        serial = json_object_get(s, "serial");
        sig = json_object_get(s, "signature");
        if (!json_is_object(s) || !json_is_integer(serial) || json_integer_value(serial) <= 0 ||
            !json_is_string(sig) || json_string_length(sig) > SIGNATURE_TEXT_MAX)
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                 "signed: {\"serial\": a positive integer, \"signature\": a minisign or "
                                 "signify signature (clsctl fleet apply --sign)}");
        json_object_foreach (s, key, v)
                if (!streq(key, "serial") && !streq(key, "signature"))
                        return error_set(reterr, EINVAL, ERROR_UNKNOWN_FIELD, "signed.%s: unknown field",
                                         key);
        p->serial = (uint64_t) json_integer_value(serial);
        if (!(p->signature = strdup(json_string_value(sig))) ||
            !(p->signed_text = fleet_signed_message(envelope, p->serial, &p->signed_size)))
                return error_oom(reterr);
        return 0;
}

int fleet_policy_sign(json_t *envelope, const SecretKey *k, uint64_t serial, Error *reterr) {
        _cleanup_free_ char *text = NULL, *sig = NULL, *comment = NULL;
        const char *name = json_string_value(json_object_get(envelope, "name"));
        size_t size = 0;

        if (!name)
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                 "a fleet policy needs its name to be signed");
        if (!(text = fleet_signed_message(envelope, serial, &size)) ||
            asprintf(&comment, "clsd fleet policy %s serial %" PRIu64, name, serial) < 0 ||
            !(sig = secret_key_sign(k, text, size, comment)) ||
            json_object_set_new(envelope, "signed",
                                json_pack("{s:I,s:s}", "serial", (json_int_t) serial, "signature", sig)) < 0)
                return error_oom(reterr);
        return 0;
}
