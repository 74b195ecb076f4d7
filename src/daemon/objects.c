/* objects.c: the daemon's view of stored objects: what is in each (programs, maps), who uses it, and
 * resolving a document's "object" (a digest or a host path) and "program" to one tc program. */
#include <stdio.h>
#include <string.h>

#include "daemon-internal.h"
#include "fileio.h"
#include "log.h"

static int objects_append(Daemon *d, const char *digest, size_t size, NlObjectInfo *info,
                          const DaemonObject **ret) {
        DaemonObject *n = realloc(d->objects, (d->n_objects + 1) * sizeof(DaemonObject));

        if (!n)
                return -ENOMEM;
        d->objects = n;
        DaemonObject *o = &d->objects[d->n_objects++];
        *o = (DaemonObject){ .size = size, .info = info };
        snprintf(o->digest, sizeof(o->digest), "%s", digest);
        if (ret)
                *ret = o;
        return 0;
}

int daemon_objects_load(Daemon *d) {
        char **digests = NULL;
        size_t n = 0;
        int r;

        r = store_object_list(d->store, &digests, &n);
        if (r < 0)
                return log_error_errno(r, "cannot list objects in %s: %m", store_dir(d->store));
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *data = NULL, *moved = NULL;
                Error e = ERROR_NULL;
                NlObjectInfo *info;
                size_t size;

                r = store_object_read(d->store, digests[i], d->config.object_size_max, &data, &size);
                if (r >= 0)
                        r = nl_object_inspect(data, size, &info, &e);
                if (r < 0) {
                        /* One bad file must not keep clsd from starting: set it aside and go on. */
                        const char *why = r == -EBADMSG ? "its bytes do not match its sha256 name"
                                          : e.message   ? e.message
                                                        : strerror(-r);
                        if (r != -ENOMEM && store_object_quarantine(d->store, digests[i], &moved) >= 0)
                                log_error("object %s set aside: %s; moved to %s", digests[i], why,
                                          strna(moved));
                        else
                                log_error("object %s cannot be used: %s", digests[i], why);
                        error_done(&e);
                        continue;
                }
                r = objects_append(d, digests[i], size, info, NULL);
                if (r < 0) {
                        nl_object_info_free(info);
                        strv_free_n(digests, n);
                        return log_error_errno(r, "out of memory");
                }
        }
        strv_free_n(digests, n);
        return 0;
}

const DaemonObject *daemon_object_get(Daemon *d, const char *digest) {
        for (size_t i = 0; i < d->n_objects; i++)
                if (streq(d->objects[i].digest, digest))
                        return &d->objects[i];
        return NULL;
}

size_t daemon_object_count(Daemon *d) {
        return d->n_objects;
}

const DaemonObject *daemon_object_at(Daemon *d, size_t i) {
        return i < d->n_objects ? &d->objects[i] : NULL;
}

/* "name (type), …": what the object has, for an error that says what to choose from. */
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

int daemon_object_add(Daemon *d, const void *data, size_t size, const DaemonObject **ret, bool *ret_created,
                      Error *reterr) {
        _cleanup_(nl_object_info_freep) NlObjectInfo *info = NULL;
        char digest[SHA256_DIGEST_STRING_MAX];
        const DaemonObject *o;
        bool any_tc = false, created;
        int r;

        if (size == 0)
                return error_set(reterr, EINVAL, "invalid_object",
                                 "the body is empty; send the object's ELF bytes");
        r = nl_object_inspect(data, size, &info, reterr);
        if (r < 0)
                return r;
        for (size_t i = 0; i < info->n_programs; i++)
                any_tc = any_tc || nl_program_tc_rank(&info->programs[i], NL_PROG_CLASSIFIER) >= 0;
        if (!any_tc) {
                char others[256];
                program_list(info, others, sizeof(others));
                return error_set(
                        reterr, EINVAL, "invalid_object",
                        "the object has no program tc can run (sched_cls, sched_act, or in a section "
                        "of its own): %s",
                        others);
        }
        r = store_object_put(d->store, data, size, digest, &created, reterr);
        if (r < 0)
                return r;
        o = daemon_object_get(d, digest);
        if (!o) {
                r = objects_append(d, digest, size, info, &o);
                if (r < 0)
                        return error_set(reterr, r, "internal_error", "out of memory");
                TAKE_PTR(info);
                log_info("stored object %s (%zu bytes)", digest, size);
        }
        *ret = o;
        if (ret_created)
                *ret_created = created;
        return 0;
}

static bool document_uses(const Document *doc, const char *digest) {
        for (Direction dir = 0; doc && dir < _DIRECTION_MAX; dir++)
                for (size_t k = 0; k < doc->n_filters[dir]; k++)
                        if (streq_ptr(doc->filters[dir][k].digest, digest))
                                return true;
        return false;
}

int daemon_object_users(Daemon *d, const char *digest, const char ***ret) {
        const char **v = calloc(d->n_ifaces + 1, sizeof(char *));
        size_t n = 0;

        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < d->n_ifaces; i++) {
                const Iface *it = d->ifaces[i];
                /* An API document a hog overrides still names its objects: it applies again once the
                 * hog goes. */
                bool uses = document_uses(it->api, digest) || document_uses(it->hog, digest);
                if (uses)
                        v[n++] = it->doc->ifname;
        }
        *ret = v;
        return 0;
}

int daemon_object_remove(Daemon *d, const char *digest, Error *reterr) {
        _cleanup_free_ const char **users = NULL;
        int r;

        if (!daemon_object_get(d, digest))
                return error_set(reterr, ENOENT, "object_not_found", "no object %s", digest);
        r = daemon_object_users(d, digest, &users);
        if (r < 0)
                return error_set(reterr, r, "internal_error", "out of memory");
        if (users[0])
                return error_set(reterr, EBUSY, "object_in_use", "object %s is used by the document of %s%s",
                                 digest, users[0], users[1] ? " and others" : "");
        r = store_object_remove(d->store, digest, reterr);
        if (r < 0)
                return r;
        for (size_t i = 0; i < d->n_objects; i++)
                if (streq(d->objects[i].digest, digest)) {
                        nl_object_info_free(d->objects[i].info);
                        d->objects[i] = d->objects[--d->n_objects];
                        break;
                }
        log_info("removed object %s", digest);
        return 0;
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
                                        reterr, EINVAL, "program_ambiguous",
                                        "%s: object %s has %zu programs that could run as the %s; name "
                                        "one in \"program\": %s",
                                        who, digest, n, nl_prog_kind_to_string(kind), list);
                        }
                        if (!(*program = strdup(only)))
                                return error_set(reterr, ENOMEM, "internal_error", "out of memory");
                        return 0;
                }
                program_list(info, list, sizeof(list));
                return error_set(reterr, EINVAL, "wrong_program_type",
                                 "%s: object %s has no program tc can run as the %s: %s", who, digest,
                                 nl_prog_kind_to_string(kind), list);
        }
        for (size_t i = 0; i < info->n_programs; i++) {
                const NlProgramInfo *pi = &info->programs[i];
                if (!streq(pi->name, *program))
                        continue;
                if (nl_program_tc_rank(pi, kind) < 0)
                        return error_set(reterr, EINVAL, "wrong_program_type",
                                         "%s: program \"%s\" is of type %s (section %s): %s", who, *program,
                                         pi->type, pi->section, nl_program_tc_note(pi));
                return 0;
        }
        program_list(info, list, sizeof(list));
        return error_set(reterr, ENOENT, "program_not_found",
                         "%s: program \"%s\" is not in object %s, which has %s", who, *program, digest,
                         list);
}

static bool object_has_map(const NlObjectInfo *info, const char *name, bool internal_too) {
        for (size_t k = 0; info && k < info->n_maps; k++)
                if (streq(info->maps[k].name, name) && (internal_too || !info->maps[k].internal))
                        return true;
        return false;
}

/* Every map "maps" and "metrics" name is a map of the object, or of an action's (actions: their
 * objects' descriptions, parallel to f->actions). */
static int resolve_maps(const NlObjectInfo *info, const NlObjectInfo *const *actions, const FilterSpec *f,
                        Error *reterr) {
        for (size_t i = 0; i < f->n_maps; i++) {
                bool found = object_has_map(info, f->maps[i].name, true);
                for (size_t a = 0; a < f->n_actions && !found; a++)
                        found = object_has_map(actions[a], f->maps[i].name, true);
                if (!found)
                        return error_set(
                                reterr, ENOENT, "map_not_found",
                                "filter \"%s\": \"maps\" names \"%s\", which object %s does not have",
                                f->name, f->maps[i].name, f->digest);
        }
        for (size_t i = 0; i < f->n_metrics; i++) {
                bool found = object_has_map(info, f->metrics[i].map, false);
                for (size_t a = 0; a < f->n_actions && !found; a++)
                        found = object_has_map(actions[a], f->metrics[i].map, false);
                if (!found)
                        return error_set(
                                reterr, ENOENT, "map_not_found",
                                "filter \"%s\": metric %s reads map \"%s\", which object %s does not have",
                                f->name, f->metrics[i].name, f->metrics[i].map, f->digest);
        }
        return 0;
}

/* Resolves an "object" (a digest, or a path that is read and, with store, stored content-addressed; a
 * dry run only inspects it) to its description: *digest is filled (or checked, when the document pins
 * it). An object not stored is described in *unstored, which the caller frees. */
static int resolve_object(Daemon *d, const char *object, char **digest, bool store, const char *who,
                          const NlObjectInfo **ret_info, NlObjectInfo **unstored, Error *reterr) {
        const DaemonObject *o = NULL;
        char got[SHA256_DIGEST_STRING_MAX];
        int r;

        if (object[0] != '/') {
                o = daemon_object_get(d, *digest);
                if (!o || !streq(object, *digest))
                        return error_set(reterr, ENOENT, "object_not_found",
                                         "%s: no object %s; upload it with POST /objects", who, object);
                *ret_info = o->info;
                return 0;
        }

        _cleanup_free_ char *data = NULL;
        size_t size;

        r = read_regular_file(object, d->config.object_size_max, &data, &size);
        if (r == -EFBIG)
                return error_set(reterr, r, "payload_too_large", "%s: object file larger than %zu bytes",
                                 object, d->config.object_size_max);
        if (r < 0)
                return error_set(reterr, r, r == -ENOENT ? "object_file_not_found" : "invalid_value",
                                 "%s: cannot read object file %s: %s", who, object,
                                 r == -EBADFD ? "not a regular file" : strerror(-r));
        sha256_digest_string(data, size, got);
        if (*digest && !streq(*digest, got))
                return error_set(reterr, EINVAL, "invalid_value",
                                 "%s: %s has digest %s, the document pins %s", who, object, got, *digest);
        o = daemon_object_get(d, got);
        if (!o && store) {
                r = daemon_object_add(d, data, size, &o, NULL, reterr);
                if (r < 0)
                        return r;
        } else if (!o) {
                r = nl_object_inspect(data, size, unstored, reterr);
                if (r < 0)
                        return r;
        }
        if (!*digest && !(*digest = strdup(got)))
                return error_set(reterr, ENOMEM, "internal_error", "out of memory");
        *ret_info = o ? o->info : *unstored;
        return 0;
}

/* Resolves f's object and program (a tc classifier), and each action's (an act_bpf action). */
int daemon_object_resolve(Daemon *d, FilterSpec *f, bool store, Error *reterr) {
        NlObjectInfo *unstored[1 + ACTIONS_PER_FILTER_MAX] = { 0 };
        const NlObjectInfo *info = NULL, *actions[ACTIONS_PER_FILTER_MAX] = { 0 };
        char who[64];
        int r;

        if (f->n_actions > 0 && !d->act_bpf)
                return error_set(
                        reterr, EOPNOTSUPP, "act_bpf_unavailable",
                        "filter \"%s\": this kernel has no act_bpf (CONFIG_NET_ACT_BPF), so \"actions\" "
                        "cannot run; use direct_action (the default): the classifier's return code "
                        "is the verdict",
                        f->name);
        if (f->attach == ATTACH_TCX) {
                r = daemon_tcx_ready(d, NULL, reterr);
                if (r < 0)
                        return r;
        }

        snprintf(who, sizeof(who), "filter \"%s\"", f->name);
        r = resolve_object(d, f->object, &f->digest, store, who, &info, &unstored[0], reterr);
        if (r >= 0)
                r = resolve_program(info, f->digest, who, NL_PROG_CLASSIFIER, &f->program, reterr);
        for (size_t k = 0; r >= 0 && k < f->n_actions; k++) {
                ActionSpec *a = &f->actions[k];
                snprintf(who, sizeof(who), "filter \"%s\" action %zu", f->name, k + 1);
                r = resolve_object(d, a->object, &a->digest, store, who, &actions[k], &unstored[k + 1],
                                   reterr);
                if (r >= 0)
                        r = resolve_program(actions[k], a->digest, who, NL_PROG_ACTION, &a->program, reterr);
        }
        if (r >= 0)
                r = resolve_maps(info, actions, f, reterr);
        for (size_t k = 0; k < ELEMENTSOF(unstored); k++)
                nl_object_info_free(unstored[k]);
        return r;
}

int daemon_document_resolve(Daemon *d, Document *doc, bool store, Error *reterr) {
        int r;

        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++)
                for (size_t i = 0; i < doc->n_filters[dir]; i++) {
                        r = daemon_object_resolve(d, &doc->filters[dir][i], store, reterr);
                        if (r < 0)
                                return r;
                }
        return document_check_tcx(d, doc, reterr);
}
