/* action-spec.c: a filter's "actions": the act_bpf programs run after its classifier matches, each
 * {"object", "digest", "program"} like the filter's own, parsed strictly and written back normalised. */
#include <string.h>

#include "store-internal.h"

void action_specs_free(ActionSpec *v, size_t n) {
        for (size_t i = 0; v && i < n; i++) {
                free(v[i].object);
                free(v[i].digest);
                free(v[i].program);
        }
        free(v);
}

static int parse_one(json_t *j, const char *path, ActionSpec *a, Error *reterr) {
        const char *key, *o;
        char p[160];
        json_t *v;

        if (!json_is_object(j))
                return error_set(reterr, EINVAL, ERROR_WRONG_TYPE, "%s: expected an object", path);
        json_object_foreach (j, key, v)
                if (!streq(key, "object") && !streq(key, "program") && !streq(key, "digest"))
                        return error_set(reterr, EINVAL, ERROR_UNKNOWN_FIELD, "%s.%.64s: unknown field",
                                         path, key);
        v = json_object_get(j, "object");
        if (!v)
                return error_set(reterr, EINVAL, ERROR_MISSING_FIELD, "%s.object: required", path);
        if (!json_is_string(v))
                return error_set(reterr, EINVAL, ERROR_WRONG_TYPE, "%s.object: expected a string", path);
        o = json_string_value(v);
        snprintf(p, sizeof(p), "%.150s.object", path);
        if (object_name_check(o, p, reterr) < 0)
                return -EINVAL;
        if (!(a->object = strdup(o)) || (sha256_digest_string_valid(o) && !(a->digest = strdup(o))))
                return error_oom(reterr);

        v = json_object_get(j, "digest");
        if (v && !json_is_null(v)) {
                if (!json_is_string(v) || !sha256_digest_string_valid(json_string_value(v)))
                        return error_set(reterr, EINVAL,
                                         json_is_string(v) ? ERROR_INVALID_VALUE : ERROR_WRONG_TYPE,
                                         "%s.digest: expected \"sha256:<64 lowercase hex>\"", path);
                if (a->digest && !streq(a->digest, json_string_value(v)))
                        return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                         "%s.digest: differs from \"object\"", path);
                if (!a->digest && !(a->digest = strdup(json_string_value(v))))
                        return error_oom(reterr);
        }

        v = json_object_get(j, "program");
        if (v && !json_is_null(v)) {
                if (!json_is_string(v))
                        return error_set(reterr, EINVAL, ERROR_WRONG_TYPE, "%s.program: expected a string",
                                         path);
                if (strlen(json_string_value(v)) == 0 || strlen(json_string_value(v)) > PROGRAM_NAME_MAX)
                        return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                         "%s.program: must be 1 to %d characters", path, PROGRAM_NAME_MAX);
                if (!(a->program = strdup(json_string_value(v))))
                        return error_oom(reterr);
        }
        return 0;
}

int action_specs_parse(json_t *j, const char *path, ActionSpec **ret, size_t *ret_n, Error *reterr) {
        ActionSpec *v;
        json_t *item;
        size_t k;

        if (!json_is_array(j))
                return error_set(reterr, EINVAL, ERROR_WRONG_TYPE, "%s: expected an array", path);
        if (json_array_size(j) > ACTIONS_PER_FILTER_MAX)
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE, "%s: at most %d actions per filter",
                                 path, ACTIONS_PER_FILTER_MAX);
        v = calloc(json_array_size(j) + 1, sizeof(ActionSpec));
        if (!v)
                return error_oom(reterr);
        json_array_foreach (j, k, item) {
                char p[160];
                int r;

                snprintf(p, sizeof(p), "%s[%zu]", path, k);
                r = parse_one(item, p, &v[k], reterr);
                if (r < 0) {
                        action_specs_free(v, k + 1);
                        return r;
                }
        }
        *ret = v;
        *ret_n = json_array_size(j);
        return 0;
}

json_t *action_specs_to_json(const ActionSpec *v, size_t n) {
        json_t *j = json_array();

        for (size_t i = 0; i < n; i++) {
                json_t *a = json_object();
                json_object_set_new(a, "object", json_string(v[i].object));
                if (v[i].digest)
                        json_object_set_new(a, "digest", json_string(v[i].digest));
                if (v[i].program)
                        json_object_set_new(a, "program", json_string(v[i].program));
                json_array_append_new(j, a);
        }
        return j;
}
