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
                any_tc = any_tc || info->programs[i].is_tc;
        if (!any_tc)
                return error_set(reterr, EINVAL, "invalid_object",
                                 "the object has no tc program (sched_cls or sched_act), only %zu other(s)",
                                 info->n_programs);
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

/* Picks f->program when it is left out, or checks that it names a tc classifier of the object. */
static int resolve_program(const NlObjectInfo *info, const char *digest, FilterSpec *f, Error *reterr) {
        if (!f->program) {
                const char *only = NULL;
                size_t n = 0;
                for (size_t i = 0; i < info->n_programs; i++)
                        if (info->programs[i].is_classifier) {
                                only = info->programs[i].name;
                                n++;
                        }
                if (n == 0)
                        return error_set(reterr, EINVAL, "wrong_program_type",
                                         "filter \"%s\": object %s has no sched_cls program", f->name,
                                         digest);
                if (n > 1)
                        return error_set(
                                reterr, EINVAL, "program_ambiguous",
                                "filter \"%s\": object %s has %zu tc programs; name one in \"program\"",
                                f->name, digest, n);
                if (!(f->program = strdup(only)))
                        return error_set(reterr, ENOMEM, "internal_error", "out of memory");
                return 0;
        }
        for (size_t i = 0; i < info->n_programs; i++) {
                const NlProgramInfo *pi = &info->programs[i];
                if (!streq(pi->name, f->program))
                        continue;
                if (!pi->is_classifier)
                        return error_set(
                                reterr, EINVAL, "wrong_program_type",
                                "filter \"%s\": program \"%s\" is of type %s; a tc classifier needs "
                                "sched_cls (SEC(\"tc\") or SEC(\"classifier\"))",
                                f->name, f->program, pi->type);
                return 0;
        }
        return error_set(reterr, ENOENT, "program_not_found",
                         "filter \"%s\": program \"%s\" is not in object %s", f->name, f->program, digest);
}

/* Every map "maps" and "metrics" name is a map of the object. */
static int resolve_maps(const NlObjectInfo *info, const FilterSpec *f, Error *reterr) {
        for (size_t i = 0; i < f->n_maps; i++) {
                bool found = false;
                for (size_t k = 0; k < info->n_maps && !found; k++)
                        found = streq(info->maps[k].name, f->maps[i].name);
                if (!found)
                        return error_set(
                                reterr, ENOENT, "map_not_found",
                                "filter \"%s\": \"maps\" names \"%s\", which object %s does not have",
                                f->name, f->maps[i].name, f->digest);
        }
        for (size_t i = 0; i < f->n_metrics; i++) {
                bool found = false;
                for (size_t k = 0; k < info->n_maps && !found; k++)
                        found = streq(info->maps[k].name, f->metrics[i].map) && !info->maps[k].internal;
                if (!found)
                        return error_set(
                                reterr, ENOENT, "map_not_found",
                                "filter \"%s\": metric %s reads map \"%s\", which object %s does not have",
                                f->name, f->metrics[i].name, f->metrics[i].map, f->digest);
        }
        return 0;
}

/* Resolves f->object to an object (a path is read and, with store, stored content-addressed; a dry
 * run only inspects it) and f->program to one of its tc classifier programs. */
int daemon_object_resolve(Daemon *d, FilterSpec *f, bool store, Error *reterr) {
        _cleanup_(nl_object_info_freep) NlObjectInfo *unstored = NULL;
        const NlObjectInfo *info;
        const DaemonObject *o = NULL;
        char digest[SHA256_DIGEST_STRING_MAX];
        int r;

        if (f->n_actions > 0) {
                if (!d->act_bpf)
                        return error_set(
                                reterr, EOPNOTSUPP, "act_bpf_unavailable",
                                "filter \"%s\": this kernel has no act_bpf (CONFIG_NET_ACT_BPF), so "
                                "\"actions\" cannot run; use direct_action (the default): the "
                                "classifier's return code is the verdict",
                                f->name);
                return error_set(
                        reterr, EOPNOTSUPP, "actions_unsupported",
                        "filter \"%s\": clsd does not attach act_bpf actions yet; use direct_action",
                        f->name);
        }

        if (f->attach == ATTACH_TCX) {
                r = daemon_tcx_ready(d, NULL, reterr);
                if (r < 0)
                        return r;
        }

        if (f->object[0] == '/') {
                _cleanup_free_ char *data = NULL;
                size_t size;

                r = read_regular_file(f->object, d->config.object_size_max, &data, &size);
                if (r == -EFBIG)
                        return error_set(reterr, r, "payload_too_large",
                                         "%s: object file larger than %zu bytes", f->object,
                                         d->config.object_size_max);
                if (r < 0)
                        return error_set(reterr, r, r == -ENOENT ? "object_file_not_found" : "invalid_value",
                                         "filter \"%s\": cannot read object file %s: %s", f->name, f->object,
                                         r == -EBADFD ? "not a regular file" : strerror(-r));
                sha256_digest_string(data, size, digest);
                if (f->digest && !streq(f->digest, digest))
                        return error_set(reterr, EINVAL, "invalid_value",
                                         "filter \"%s\": %s has digest %s, the document pins %s", f->name,
                                         f->object, digest, f->digest);
                o = daemon_object_get(d, digest);
                if (!o && store) {
                        r = daemon_object_add(d, data, size, &o, NULL, reterr);
                        if (r < 0)
                                return r;
                } else if (!o) {
                        r = nl_object_inspect(data, size, &unstored, reterr);
                        if (r < 0)
                                return r;
                }
                if (!f->digest && !(f->digest = strdup(digest)))
                        return error_set(reterr, ENOMEM, "internal_error", "out of memory");
        } else {
                o = daemon_object_get(d, f->digest);
                if (!o || !streq(f->object, f->digest))
                        return error_set(reterr, ENOENT, "object_not_found",
                                         "filter \"%s\": no object %s; upload it with POST /objects",
                                         f->name, f->object);
        }
        info = o ? o->info : unstored;
        r = resolve_program(info, f->digest, f, reterr);
        if (r < 0)
                return r;
        return resolve_maps(info, f, reterr);
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
