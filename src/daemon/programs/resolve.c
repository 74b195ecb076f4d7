/* resolve.c: resolving a document's objects (a digest, or a host path that is read) and programs. A
 * filter's program is a classifier and its actions' programs are actions: a program fits a use when
 * its section says so, or libbpf does not know its section, or it is the other tc kind (as tc loads). */
#include <stdio.h>
#include <string.h>

#include "fileio.h"
#include "oci-ref.h"
#include "registry.h"
#include "resolve.h"
#include "nl-bpf.h"
#include "store-policy.h"

/* "name (type, section S), …": what the object has, for an error that says what to choose from. */
static void program_list(const NlObjectInfo *info, char *buf, size_t size) {
        size_t l = 0;

        buf[0] = 0;
        for (size_t i = 0; i < info->n_programs && l + 1 < size; i++) {
                int n = snprintf(buf + l, size - l, "%s%s (%s, section %s)", i ? ", " : "",
                                 info->programs[i].name, info->programs[i].type, info->programs[i].section);
                if (n < 0)
                        break;
                l += (size_t) n;
        }
        if (info->n_programs == 0)
                snprintf(buf, size, "no programs at all");
}

/* Picks *program when it is left out, or checks that it names a program tc can run as kind. Left out,
 * the object's only program of the kind its section says is taken; without one, its only program in a
 * section libbpf does not know; without one, its only program of the other tc kind. who: for errors. */
static int resolve_program(const NlObjectInfo *info, const char *digest, const char *who, NlProgKind kind,
                           char **program, Error *reterr) {
        char list[512];

        if (!*program) {
                for (int rank = 0; rank <= 2; rank++) {
                        const char *only = NULL;
                        size_t n = 0;
                        for (size_t i = 0; i < info->n_programs; i++)
                                if (nl_program_tc_rank(&info->programs[i], kind) == rank) {
                                        only = info->programs[i].name;
                                        n++;
                                }
                        if (n == 0)
                                continue;
                        if (n > 1) {
                                program_list(info, list, sizeof(list));
                                return error_set(
                                        reterr, EINVAL, ERROR_PROGRAM_AMBIGUOUS,
                                        "%s: object %s has %zu programs that could run as the %s; name "
                                        "one in \"program\": %s",
                                        who, digest, n, nl_prog_kind_to_string(kind), list);
                        }
                        if (!(*program = strdup(only)))
                                return error_oom(reterr);
                        return 0;
                }
                program_list(info, list, sizeof(list));
                return error_set(reterr, EINVAL, ERROR_WRONG_PROGRAM_TYPE,
                                 "%s: object %s has no program tc can run as the %s: %s", who, digest,
                                 nl_prog_kind_to_string(kind), list);
        }
        for (size_t i = 0; i < info->n_programs; i++) {
                const NlProgramInfo *pi = &info->programs[i];
                if (!streq(pi->name, *program))
                        continue;
                if (nl_program_tc_rank(pi, kind) < 0)
                        return error_set(reterr, EINVAL, ERROR_WRONG_PROGRAM_TYPE,
                                         "%s: program \"%s\" is of type %s (section %s): %s", who, *program,
                                         pi->type, pi->section, nl_program_tc_note(pi));
                return 0;
        }
        program_list(info, list, sizeof(list));
        return error_set(reterr, ENOENT, ERROR_PROGRAM_NOT_FOUND,
                         "%s: program \"%s\" is not in object %s, which has %s", who, *program, digest,
                         list);
}

static bool object_has_map(const NlObjectInfo *info, const char *name, bool internal_too) {
        for (size_t k = 0; info && k < info->n_maps; k++)
                if (streq(info->maps[k].name, name) && (internal_too || !info->maps[k].internal))
                        return true;
        return false;
}

/* Every map "maps" and "metrics" name is a map of the object, or of an action's. */
static int resolve_maps(const Resolver *rs, const FilterSpec *f, Error *reterr) {
        for (size_t i = 0; i < f->n_maps; i++) {
                bool found = object_has_map(resolver_info(rs, f->digest), f->maps[i].name, true);
                for (size_t a = 0; a < f->n_actions && !found; a++)
                        found = object_has_map(resolver_info(rs, f->actions[a].digest), f->maps[i].name,
                                               true);
                if (!found)
                        return error_set(
                                reterr, ENOENT, ERROR_MAP_NOT_FOUND,
                                "filter \"%s\": \"maps\" names \"%s\", which object %s does not have",
                                f->name, f->maps[i].name, f->digest);
        }
        for (size_t i = 0; i < f->n_metrics; i++) {
                bool found = object_has_map(resolver_info(rs, f->digest), f->metrics[i].map, false);
                for (size_t a = 0; a < f->n_actions && !found; a++)
                        found = object_has_map(resolver_info(rs, f->actions[a].digest), f->metrics[i].map,
                                               false);
                if (!found)
                        return error_set(
                                reterr, ENOENT, ERROR_MAP_NOT_FOUND,
                                "filter \"%s\": metric %s reads map \"%s\", which object %s does not have",
                                f->name, f->metrics[i].name, f->metrics[i].map, f->digest);
        }
        return 0;
}

/* The signature file beside the object file path, read as the object was (under the object directories
 * if they bind it): NULL in *ret when there is none. */
static int read_signature(const Resolver *rs, const char *path, char **ret, size_t *ret_size) {
        for (const char *const *suffix = SIGNATURE_SUFFIXES; *suffix; suffix++) {
                _cleanup_free_ char *p = NULL;
                int r;
                if (asprintf(&p, "%s%s", path, *suffix) < 0)
                        return -ENOMEM;
                r = rs->object_dirs
                            ? read_file_under_dirs(rs->object_dirs, p, STORE_SIGNATURE_MAX, ret, ret_size)
                            : read_regular_file(p, STORE_SIGNATURE_MAX, ret, ret_size);
                if (r != -ENOENT)
                        return r;
        }
        *ret = NULL;
        *ret_size = 0;
        return 0;
}

/* An "object": a digest clsd has, an image (resolve-image.c), or a path that is read (its digest filled, or
 * checked when the document pins it). An object clsd has not seen is added to rs->pending: 1 then. */
static int resolve_object(Resolver *rs, char **object_field, char **digest, const char *who, Error *reterr) {
        char got[SHA256_DIGEST_STRING_MAX];
        _cleanup_free_ char *data = NULL, *sig = NULL;
        const char *object = *object_field;
        size_t size, sig_size = 0;
        int r;

        if (oci_ref_is(object))
                return resolve_image(rs, object_field, digest, who, reterr);
        if (object[0] != '/') {
                const char *why = registry_revoked(rs->registry, object);
                if (why)
                        return error_set(reterr, EPERM, ERROR_OBJECT_UNTRUSTED, "%s: object %s: %s", who,
                                         object, why);
                if (!resolver_info(rs, *digest) || !streq(object, *digest))
                        return error_set(reterr, ENOENT, ERROR_OBJECT_NOT_FOUND,
                                         "%s: no object %s; upload it with POST /objects", who, object);
                return 0;
        }
        /* Known already (a stored document, a policy's interface): its bytes are not read again. */
        if (!rs->fresh && *digest && resolver_info(rs, *digest))
                return 0;
        r = rs->object_dirs
                    ? read_file_under_dirs(rs->object_dirs, object, rs->object_size_max, &data, &size)
                    : read_regular_file(object, rs->object_size_max, &data, &size);
        if (r == -EACCES && rs->object_dirs)
                /* one answer whatever the file is: nothing of it is told */
                return error_set(
                        reterr, EACCES, ERROR_OBJECT_PATH_REFUSED,
                        "%s.object %s: over the API an object is named by digest (POST /objects) or by a "
                        "path under an object directory (--object-dir)",
                        who, object);
        if (r == -EFBIG)
                return error_set(reterr, r, ERROR_PAYLOAD_TOO_LARGE, "%s: object file larger than %zu bytes",
                                 object, rs->object_size_max);
        if (r < 0)
                return error_set(reterr, r, r == -ENOENT ? ERROR_OBJECT_FILE_NOT_FOUND : ERROR_INVALID_VALUE,
                                 "%s: cannot read object file %s: %s", who, object,
                                 r == -EBADFD ? "not a regular file" : strerror(-r));
        sha256_digest_string(data, size, got);
        if (*digest && !streq(*digest, got))
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                 "%s: %s has digest %s, the document pins %s", who, object, got, *digest);
        if (!*digest && !(*digest = strdup(got)))
                return error_oom(reterr);
        if (resolver_info(rs, got) || resolver_pending_has(rs, got))
                return resolver_info(rs, got) ? 0 : 1;
        if (rs->trusted) {
                r = read_signature(rs, object, &sig, &sig_size);
                if (r < 0)
                        return error_set(reterr, EPERM, ERROR_OBJECT_SIGNATURE_INVALID,
                                         "%s: cannot read the signature of %s: %s", who, object,
                                         r == -EFBIG ? "too large" : strerror(-r));
                r = trusted_keys_verify(rs->trusted, data, size, sig, sig_size, object, reterr);
                if (r < 0)
                        return r;
        }
        if (resolver_pending_add(rs, got, &data, size, &sig, sig_size) < 0)
                return error_oom(reterr);
        return 1;
}

static int resolve_filter(Resolver *rs, FilterSpec *f, Error *reterr) {
        char who[64];
        bool waiting = false;
        int r;

        if (f->n_actions > 0 && !rs->act_bpf)
                return error_set(
                        reterr, EOPNOTSUPP, ERROR_ACT_BPF_UNAVAILABLE,
                        "filter \"%s\": this kernel has no act_bpf (CONFIG_NET_ACT_BPF), so \"actions\" "
                        "cannot run; use direct_action (the default): the classifier's return code "
                        "is the verdict",
                        f->name);
        snprintf(who, sizeof(who), "filter \"%s\"", f->name);
        r = resolve_object(rs, &f->object, &f->digest, who, reterr);
        if (r < 0)
                return r;
        waiting = r > 0;
        for (size_t k = 0; k < f->n_actions; k++) {
                ActionSpec *a = &f->actions[k];
                snprintf(who, sizeof(who), "filter \"%s\" action %zu", f->name, k + 1);
                r = resolve_object(rs, &a->object, &a->digest, who, reterr);
                if (r < 0)
                        return r;
                waiting = waiting || r > 0;
        }
        if (waiting)
                return 1;
        snprintf(who, sizeof(who), "filter \"%s\"", f->name);
        r = resolve_program(resolver_info(rs, f->digest), f->digest, who, NL_PROG_CLASSIFIER, &f->program,
                            reterr);
        if (r < 0)
                return r;
        for (size_t k = 0; k < f->n_actions; k++) {
                ActionSpec *a = &f->actions[k];
                snprintf(who, sizeof(who), "filter \"%s\" action %zu", f->name, k + 1);
                r = resolve_program(resolver_info(rs, a->digest), a->digest, who, NL_PROG_ACTION,
                                    &a->program, reterr);
                if (r < 0)
                        return r;
        }
        r = resolve_maps(rs, f, reterr);
        return r < 0 ? r : 0;
}

/* The kernel runs a program at most once per tcx hook. */
static int check_tcx(const Resolver *rs, const Document *doc, Error *reterr) {
        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++)
                for (size_t i = 0; i < doc->n_filters[dir]; i++) {
                        const FilterSpec *b = &doc->filters[dir][i];
                        if (b->attach == ATTACH_TCX && !rs->tcx)
                                return error_set(reterr, EOPNOTSUPP, ERROR_TCX_UNAVAILABLE,
                                                 "this kernel has no tcx (Linux 6.6+); use \"attach\": "
                                                 "\"cls_bpf\" or \"auto\"");
                        for (size_t k = 0; k < i; k++) {
                                const FilterSpec *a = &doc->filters[dir][k];
                                if (filter_spec_uses_tcx(a, rs->tcx) && filter_spec_uses_tcx(b, rs->tcx) &&
                                    streq_ptr(a->digest, b->digest) && streq_ptr(a->program, b->program) &&
                                    !filter_has_own_maps(a) && !filter_has_own_maps(b))
                                        return error_set(
                                                reterr, EEXIST, ERROR_DUPLICATE_PROGRAM,
                                                "%s[%zu]: tcx runs a program at most once per hook, and "
                                                "\"%s\" runs %s of %s already; attach one of them as "
                                                "cls_bpf, or give one maps of its own (\"shared\": false)",
                                                direction_to_string(dir), i, a->name, strna(a->program),
                                                strna(a->digest));
                        }
                }
        return 0;
}

int resolver_document(Resolver *rs, Document *doc, Error *reterr) {
        bool waiting = false;
        int r;

        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++)
                for (size_t i = 0; i < doc->n_filters[dir]; i++) {
                        r = resolve_filter(rs, &doc->filters[dir][i], reterr);
                        if (r < 0)
                                return r;
                        waiting = waiting || r > 0;
                }
        if (waiting)
                return -EAGAIN;
        return check_tcx(rs, doc, reterr);
}
