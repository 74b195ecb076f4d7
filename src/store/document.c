/* document.c: the desired state of one interface: strict JSON parsing, validation, defaults. */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "oci-ref.h"
#include "store-internal.h"

static const char *const direction_names[_DIRECTION_MAX] = {
        [DIRECTION_INGRESS] = "ingress",
        [DIRECTION_EGRESS] = "egress",
};

const char *direction_to_string(Direction d) {
        return d < _DIRECTION_MAX ? direction_names[d] : NULL;
}

static const char *const attach_names[_ATTACH_MAX] = {
        [ATTACH_CLS_BPF] = "cls_bpf",
        [ATTACH_TCX] = "tcx",
        [ATTACH_AUTO] = "auto",
};

const char *filter_attach_to_string(FilterAttach a) {
        return a < _ATTACH_MAX ? attach_names[a] : NULL;
}

int filter_attach_from_string(const char *s) {
        for (int a = 0; a < _ATTACH_MAX; a++)
                if (streq(s, attach_names[a]))
                        return a;
        return -EINVAL;
}

const char *document_source_to_string(DocumentSource s) {
        return s == SOURCE_HOG ? "hog" : s == SOURCE_POLICY ? "policy" : "api";
}

void filter_spec_done(FilterSpec *f) {
        free(f->name);
        free(f->object);
        free(f->digest);
        free(f->program);
        map_policies_free(f->maps, f->n_maps);
        metric_specs_free(f->metrics, f->n_metrics);
        action_specs_free(f->actions, f->n_actions);
        *f = (FilterSpec){ 0 };
}

Document *document_ref(Document *d) {
        if (d)
                d->n_ref++;
        return d;
}

Document *document_unref(Document *d) {
        if (!d || --d->n_ref > 0)
                return NULL;
        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++) {
                for (size_t i = 0; i < d->n_filters[dir]; i++)
                        filter_spec_done(&d->filters[dir][i]);
                free(d->filters[dir]);
        }
        free(d->ifname);
        free(d->netns);
        free(d);
        return NULL;
}

static int field_error(Error *e, ErrorCode code, const char *path, const char *fmt, const char *what) {
        return error_set(e, EINVAL, code, "%s: %s%s", path, fmt, what ? what : "");
}

/* ---- a filter's fields: one parser each, run in the table's order ---- */

static int parse_name(json_t *v, const char *p, FilterSpec *f, Error *reterr) {
        if (!json_is_string(v))
                return field_error(reterr, ERROR_WRONG_TYPE, p, "expected a string", NULL);
        if (!filter_name_valid(json_string_value(v)))
                return field_error(reterr, ERROR_INVALID_VALUE, p,
                                   "must be 1 to 32 characters of A-Z a-z 0-9 _ . -", NULL);
        f->name = strdup(json_string_value(v));
        return f->name ? 0 : error_oom(reterr);
}

static int parse_object(json_t *v, const char *p, FilterSpec *f, Error *reterr) {
        const char *o;

        if (!json_is_string(v))
                return field_error(reterr, ERROR_WRONG_TYPE, p, "expected a string", NULL);
        o = json_string_value(v);
        if (object_name_check(o, p, reterr) < 0)
                return -EINVAL;
        if (sha256_digest_string_valid(o) && !(f->digest = strdup(o)))
                return error_oom(reterr);
        f->object = strdup(o);
        return f->object ? 0 : error_oom(reterr);
}

/* "digest" pins the content of an object given by path; GET answers carry it, so a GET body can be PUT
 * back as it is. */
static int parse_digest(json_t *v, const char *p, FilterSpec *f, Error *reterr) {
        if (!json_is_string(v))
                return field_error(reterr, ERROR_WRONG_TYPE, p, "expected a string", NULL);
        if (!sha256_digest_string_valid(json_string_value(v)))
                return field_error(reterr, ERROR_INVALID_VALUE, p, "expected \"sha256:<64 lowercase hex>\"",
                                   NULL);
        if (f->digest && !streq(f->digest, json_string_value(v)))
                return field_error(reterr, ERROR_INVALID_VALUE, p, "differs from \"object\"", NULL);
        if (!f->digest && !(f->digest = strdup(json_string_value(v))))
                return error_oom(reterr);
        return 0;
}

static int parse_program(json_t *v, const char *p, FilterSpec *f, Error *reterr) {
        if (!json_is_string(v))
                return field_error(reterr, ERROR_WRONG_TYPE, p, "expected a string", NULL);
        if (strlen(json_string_value(v)) == 0 || strlen(json_string_value(v)) > PROGRAM_NAME_MAX)
                return field_error(reterr, ERROR_INVALID_VALUE, p, "must be 1 to 64 characters", NULL);
        f->program = strdup(json_string_value(v));
        return f->program ? 0 : error_oom(reterr);
}

static int parse_priority(json_t *v, const char *p, FilterSpec *f, Error *reterr) {
        if (!json_is_integer(v))
                return field_error(reterr, ERROR_WRONG_TYPE, p, "expected an integer", NULL);
        if (json_integer_value(v) < PRIORITY_MIN || json_integer_value(v) > PRIORITY_MAX)
                return field_error(reterr, ERROR_INVALID_VALUE, p, "must be between 1 and 65535", NULL);
        f->priority = (uint32_t) json_integer_value(v);
        return 0;
}

static int parse_direct_action(json_t *v, const char *p, FilterSpec *f, Error *reterr) {
        if (!json_is_boolean(v))
                return field_error(reterr, ERROR_WRONG_TYPE, p, "expected a boolean", NULL);
        f->direct_action = json_is_true(v);
        return 0;
}

/* act_bpf actions: their shape is checked here; whether the kernel can run them is not the store's
 * business (the daemon answers that). */
static int parse_actions(json_t *v, const char *p, FilterSpec *f, Error *reterr) {
        return action_specs_parse(v, p, &f->actions, &f->n_actions, reterr);
}

static int parse_parent(json_t *v, const char *p, FilterSpec *f, Error *reterr) {
        int r;

        if (!json_is_string(v))
                return field_error(reterr, ERROR_WRONG_TYPE, p, "expected a string like \"1:\"", NULL);
        r = parent_parse(json_string_value(v), &f->parent);
        if (r == -ERANGE)
                return field_error(
                        reterr, ERROR_INVALID_VALUE, p,
                        "must name a classful qdisc or class, not 0: or ffff: (the clsact hooks are "
                        "\"ingress\" and \"egress\")",
                        NULL);
        if (r < 0)
                return field_error(reterr, ERROR_INVALID_VALUE, p, "expected \"MAJ:\" or \"MAJ:MIN\" in hex",
                                   NULL);
        f->has_parent = true;
        return 0;
}

static int parse_classid(json_t *v, const char *p, FilterSpec *f, Error *reterr) {
        if (!json_is_string(v))
                return field_error(reterr, ERROR_WRONG_TYPE, p, "expected a string like \"1:10\"", NULL);
        if (classid_parse(json_string_value(v), &f->classid) < 0)
                return field_error(reterr, ERROR_INVALID_VALUE, p,
                                   "expected \"MAJ:MIN\" in hex, like \"1:10\"", NULL);
        f->has_classid = true;
        return 0;
}

static int parse_attach(json_t *v, const char *p, FilterSpec *f, Error *reterr) {
        int a;

        if (!json_is_string(v))
                return field_error(reterr, ERROR_WRONG_TYPE, p, "expected a string", NULL);
        a = filter_attach_from_string(json_string_value(v));
        if (a < 0)
                return field_error(reterr, ERROR_INVALID_VALUE, p,
                                   "expected \"cls_bpf\", \"tcx\" or \"auto\"", NULL);
        f->attach = (FilterAttach) a;
        return 0;
}

static int parse_maps(json_t *v, const char *p, FilterSpec *f, Error *reterr) {
        return map_policies_parse(v, p, &f->maps, &f->n_maps, reterr);
}

static int parse_metrics(json_t *v, const char *p, FilterSpec *f, Error *reterr) {
        return metric_specs_parse(v, p, &f->metrics, &f->n_metrics, reterr);
}

typedef struct FilterField {
        const char *name;
        int (*parse)(json_t *v, const char *path, FilterSpec *f, Error *reterr);
        bool required;
        bool null_is_absent; /* else null is a value of the wrong type */
} FilterField;

/* In the order they are parsed ("digest" after "object", which it must agree with). */
static const FilterField filter_fields[] = {
        { "name", parse_name, .required = true },
        { "object", parse_object, .required = true },
        { "digest", parse_digest, .null_is_absent = true },
        { "program", parse_program, .null_is_absent = true },
        { "priority", parse_priority, .null_is_absent = true },
        { "direct_action", parse_direct_action },
        { "actions", parse_actions, .null_is_absent = true },
        { "parent", parse_parent, .null_is_absent = true },
        { "classid", parse_classid, .null_is_absent = true },
        { "attach", parse_attach, .null_is_absent = true },
        { "maps", parse_maps, .null_is_absent = true },
        { "metrics", parse_metrics, .null_is_absent = true },
};

/* What one field cannot say alone. */
static int check_filter(json_t *j, const char *path, FilterSpec *f, Error *reterr) {
        char p[128];

        /* Actions run only after a classifier in classic mode: in direct-action mode the kernel would take
         * them and never run them. */
        if (f->n_actions > 0) {
                if (json_is_true(json_object_get(j, "direct_action"))) {
                        snprintf(p, sizeof(p), "%s.direct_action", path);
                        return field_error(reterr, ERROR_INVALID_VALUE, p,
                                           "actions run only after a classifier in classic mode: leave "
                                           "\"direct_action\" out, or false, with \"actions\"",
                                           NULL);
                }
                f->direct_action = false;
        }
        /* tcx runs direct-action programs on the clsact hooks only. */
        if (f->attach == ATTACH_TCX &&
            (!f->direct_action || f->has_classid || f->has_parent || f->n_actions)) {
                snprintf(p, sizeof(p), "%s.attach", path);
                return field_error(
                        reterr, ERROR_INVALID_VALUE, p,
                        "tcx runs direct-action programs on the ingress and egress hooks: no "
                        "\"direct_action\": false, \"classid\", \"parent\" or \"actions\" with it",
                        NULL);
        }
        return 0;
}

static int parse_filter(json_t *j, const char *path, FilterSpec *f, Error *reterr) {
        const char *key;
        json_t *v;
        char p[128];
        int r;

        if (!json_is_object(j))
                return field_error(reterr, ERROR_WRONG_TYPE, path, "expected an object", NULL);
        json_object_foreach (j, key, v) {
                bool known = false;
                for (size_t i = 0; i < ELEMENTSOF(filter_fields) && !known; i++)
                        known = streq(key, filter_fields[i].name);
                if (!known) {
                        snprintf(p, sizeof(p), "%s.%s", path, key);
                        return field_error(reterr, ERROR_UNKNOWN_FIELD, p, "unknown field", NULL);
                }
        }
        f->direct_action = true;
        for (size_t i = 0; i < ELEMENTSOF(filter_fields); i++) {
                const FilterField *ff = &filter_fields[i];
                v = json_object_get(j, ff->name);
                snprintf(p, sizeof(p), "%s.%s", path, ff->name);
                if (!v || (ff->null_is_absent && json_is_null(v))) {
                        if (ff->required)
                                return field_error(reterr, ERROR_MISSING_FIELD, p, "required", NULL);
                        continue;
                }
                r = ff->parse(v, p, f, reterr);
                if (r < 0)
                        return r;
        }
        return check_filter(j, path, f, reterr);
}

/* Fills absent priorities in list order (previous + 1, first 1), then refuses duplicates. */
static int assign_priorities(Document *d, Error *reterr) {
        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++) {
                uint32_t prev = 0;
                for (size_t i = 0; i < d->n_filters[dir]; i++) {
                        FilterSpec *f = &d->filters[dir][i];
                        if (f->priority == 0) {
                                if (prev >= PRIORITY_MAX)
                                        return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                                         "%s[%zu].priority: no priority left after %" PRIu32,
                                                         direction_to_string(dir), i, prev);
                                f->priority = prev + 1;
                        }
                        prev = f->priority;
                        for (size_t k = 0; k < i; k++)
                                if (d->filters[dir][k].priority == f->priority)
                                        return error_set(reterr, EINVAL, ERROR_DUPLICATE_PRIORITY,
                                                         "%s[%zu].priority: %" PRIu32 " is already used by "
                                                         "filter \"%s\"",
                                                         direction_to_string(dir), i, f->priority,
                                                         d->filters[dir][k].name);
                }
        }
        return 0;
}

static int check_names(const Document *d, Error *reterr) {
        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++)
                for (size_t i = 0; i < d->n_filters[dir]; i++)
                        for (Direction dir2 = 0; dir2 <= dir; dir2++)
                                for (size_t k = 0; k < (dir2 == dir ? i : d->n_filters[dir2]); k++)
                                        if (streq(d->filters[dir][i].name, d->filters[dir2][k].name))
                                                return error_set(
                                                        reterr, EINVAL, ERROR_DUPLICATE_NAME,
                                                        "%s[%zu].name: \"%s\" is already used in %s",
                                                        direction_to_string(dir), i, d->filters[dir][i].name,
                                                        direction_to_string(dir2));
        return 0;
}

int document_from_json(const char *ifname, json_t *spec, Document **ret, Error *reterr) {
        _cleanup_(document_freep) Document *d = NULL;
        const char *key;
        json_t *v;
        int r;

        if (!json_is_object(spec))
                return error_set(reterr, EINVAL, ERROR_WRONG_TYPE, "document: expected a JSON object");
        json_object_foreach (spec, key, v)
                if (!streq(key, "ingress") && !streq(key, "egress"))
                        return error_set(reterr, EINVAL, ERROR_UNKNOWN_FIELD, "%s: unknown field", key);

        d = calloc(1, sizeof(*d));
        if (!d)
                return error_oom(reterr);
        d->n_ref = 1;
        if (!(d->ifname = strdup(ifname)))
                return error_oom(reterr);

        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++) {
                json_t *list = json_object_get(spec, direction_to_string(dir)), *item;
                size_t i;

                if (!list || json_is_null(list))
                        continue;
                if (!json_is_array(list))
                        return error_set(reterr, EINVAL, ERROR_WRONG_TYPE, "%s: expected an array",
                                         direction_to_string(dir));
                if (json_array_size(list) > FILTERS_PER_HOOK_MAX)
                        return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                         "%s: at most %d filters per hook", direction_to_string(dir),
                                         FILTERS_PER_HOOK_MAX);
                d->filters[dir] = calloc(json_array_size(list) + 1, sizeof(FilterSpec));
                if (!d->filters[dir])
                        return error_oom(reterr);
                json_array_foreach (list, i, item) {
                        char path[64];
                        snprintf(path, sizeof(path), "%s[%zu]", direction_to_string(dir), i);
                        d->n_filters[dir]++;
                        r = parse_filter(item, path, &d->filters[dir][i], reterr);
                        if (r < 0)
                                return r;
                }
        }

        for (size_t i = 0; i < d->n_filters[DIRECTION_INGRESS]; i++)
                if (d->filters[DIRECTION_INGRESS][i].has_parent)
                        return error_set(
                                reterr, EINVAL, ERROR_INVALID_VALUE,
                                "ingress[%zu].parent: classful qdiscs classify on egress; put the filter "
                                "under \"egress\"",
                                i);
        r = assign_priorities(d, reterr);
        if (r < 0)
                return r;
        r = check_names(d, reterr);
        if (r < 0)
                return r;

        *ret = TAKE_PTR(d);
        return 0;
}

int document_from_string(const char *ifname, const char *text, size_t size, Document **ret, Error *reterr) {
        json_error_t jerr;
        json_t *j = json_loadb(text, size, JSON_REJECT_DUPLICATES, &jerr);
        int r;

        if (!j)
                return error_set(reterr, EINVAL, ERROR_MALFORMED_JSON,
                                 "malformed JSON at line %d, column %d: %s", jerr.line, jerr.column,
                                 jerr.text);
        r = document_from_json(ifname, j, ret, reterr);
        json_decref(j);
        return r;
}

const char *json_error_reason(const json_error_t *e, char *buf, size_t size) {
        const char *near = strstr(e->text, " near ");

        snprintf(buf, size, "%.*s", near ? (int) (near - e->text) : (int) strlen(e->text), e->text);
        return buf;
}

int document_hog_from_string(const char *text, size_t size, Document **ret, Error *reterr) {
        _cleanup_(document_freep) Document *d = NULL;
        json_error_t jerr;
        json_t *j = json_loadb(text, size, JSON_REJECT_DUPLICATES, &jerr), *spec, *netns;
        const char *ifname;
        char why[JSON_ERROR_TEXT_LENGTH];
        int r;

        /* what jansson quotes of the text is not said: a hog is read as root, whatever file it is */
        if (!j)
                return error_set(reterr, EINVAL, ERROR_MALFORMED_JSON,
                                 "malformed JSON at line %d, column %d: %s", jerr.line, jerr.column,
                                 json_error_reason(&jerr, why, sizeof(why)));
        ifname = json_string_value(json_object_get(j, "ifname"));
        if (!json_is_object(j) || !ifname) {
                json_decref(j);
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                 "ifname: a hog names its interface with \"ifname\"");
        }
        if (!ifname_valid(ifname)) {
                r = error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                              "ifname: \"%s\" is not a valid interface name (1 to 15 characters, no '/', "
                              "':' or space)",
                              ifname);
                json_decref(j);
                return r;
        }
        netns = json_object_get(j, "netns");
        if (netns && !json_is_null(netns) &&
            (!json_is_string(netns) || !netns_name_valid(json_string_value(netns)))) {
                json_decref(j);
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                 "netns: expected the name of a network namespace in /run/netns (1 to %d "
                                 "characters of A-Z a-z 0-9 _ . -)",
                                 NETNS_NAME_MAX);
        }
        spec = json_deep_copy(j);
        if (!spec) {
                json_decref(j);
                return error_oom(reterr);
        }
        (void) json_object_del(spec, "ifname");
        (void) json_object_del(spec, "netns");
        r = document_from_json(ifname, spec, &d, reterr);
        json_decref(spec);
        if (r >= 0 && json_is_string(netns) && !(d->netns = strdup(json_string_value(netns))))
                r = error_oom(reterr);
        json_decref(j);
        if (r < 0)
                return r;
        /* A hog is configuration: it names its object file, not an upload in clsd's store. */
        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++)
                for (size_t i = 0; i < d->n_filters[dir]; i++) {
                        const FilterSpec *f = &d->filters[dir][i];
                        if (f->object[0] != '/' && !oci_ref_is(f->object))
                                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                                 "%s[%zu].object: a hog names its object by absolute path "
                                                 "or by image (oci://)",
                                                 direction_to_string(dir), i);
                        for (size_t k = 0; k < f->n_actions; k++)
                                if (f->actions[k].object[0] != '/' && !oci_ref_is(f->actions[k].object))
                                        return error_set(
                                                reterr, EINVAL, ERROR_INVALID_VALUE,
                                                "%s[%zu].actions[%zu].object: a hog names its object by "
                                                "absolute path or by image (oci://)",
                                                direction_to_string(dir), i, k);
                }
        d->source = SOURCE_HOG;
        *ret = TAKE_PTR(d);
        return 0;
}

json_t *filter_spec_to_json(const FilterSpec *f) {
        json_t *j = json_object();
        char buf[16];

        json_object_set_new(j, "name", json_string(f->name));
        json_object_set_new(j, "object", json_string(f->object));
        if (f->digest)
                json_object_set_new(j, "digest", json_string(f->digest));
        if (f->program)
                json_object_set_new(j, "program", json_string(f->program));
        json_object_set_new(j, "priority", json_integer(f->priority));
        json_object_set_new(j, "direct_action", json_boolean(f->direct_action));
        if (f->has_classid) {
                classid_format(f->classid, buf);
                json_object_set_new(j, "classid", json_string(buf));
        }
        if (f->has_parent) {
                parent_format(f->parent, buf);
                json_object_set_new(j, "parent", json_string(buf));
        }
        if (f->attach != ATTACH_CLS_BPF)
                json_object_set_new(j, "attach", json_string(filter_attach_to_string(f->attach)));
        if (f->n_actions)
                json_object_set_new(j, "actions", action_specs_to_json(f->actions, f->n_actions));
        if (f->n_maps)
                json_object_set_new(j, "maps", map_policies_to_json(f->maps, f->n_maps));
        if (f->n_metrics)
                json_object_set_new(j, "metrics", metric_specs_to_json(f->metrics, f->n_metrics));
        return j;
}

bool document_spec_equal(const Document *a, const Document *b) {
        json_t *x = document_spec_to_json(a), *y = document_spec_to_json(b);
        bool eq = x && y && json_equal(x, y);

        json_decref(x);
        json_decref(y);
        return eq;
}

json_t *document_spec_to_json(const Document *d) {
        json_t *j = json_object();

        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++) {
                json_t *list = json_array();
                for (size_t i = 0; i < d->n_filters[dir]; i++)
                        json_array_append_new(list, filter_spec_to_json(&d->filters[dir][i]));
                json_object_set_new(j, direction_to_string(dir), list);
        }
        return j;
}

bool filter_spec_uses_tcx(const FilterSpec *f, bool kernel_has_tcx) {
        if (f->attach == ATTACH_TCX)
                return true;
        return f->attach == ATTACH_AUTO && kernel_has_tcx && f->direct_action && !f->has_classid &&
               !f->has_parent && f->n_actions == 0;
}

bool filter_spec_program_alike(const FilterSpec *a, const FilterSpec *b) {
        return streq_ptr(a->digest, b->digest) && streq_ptr(a->program, b->program);
}

bool filter_spec_action_alike(const FilterSpec *a, const FilterSpec *b, size_t k) {
        return k < a->n_actions && k < b->n_actions &&
               streq_ptr(a->actions[k].digest, b->actions[k].digest) &&
               streq_ptr(a->actions[k].program, b->actions[k].program);
}

const FilterSpec *document_find_filter(const Document *d, const char *name, Direction *ret_dir) {
        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++)
                for (size_t i = 0; i < d->n_filters[dir]; i++)
                        if (streq(d->filters[dir][i].name, name)) {
                                if (ret_dir)
                                        *ret_dir = dir;
                                return &d->filters[dir][i];
                        }
        return NULL;
}
