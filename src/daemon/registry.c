/* registry.c: loaded programs shared by (object digest, program name): attaching one program to 500
 * interfaces loads and verifies it once. A program found attached after a restart is adopted by id. */
#include <stdio.h>
#include <string.h>

#include "daemon-internal.h"
#include "log.h"

struct Program {
        char *digest;
        char *name;
        NlProgram *prog;
        unsigned n_ref;
};

int program_fd(const Program *p) {
        return nl_program_fd(p->prog);
}

const char *program_tag(const Program *p) {
        return nl_program_tag(p->prog);
}

uint32_t program_id(const Program *p) {
        return nl_program_id(p->prog);
}

Program *registry_find(Daemon *d, const char *digest, const char *program) {
        for (size_t i = 0; i < d->n_programs; i++)
                if (streq(d->programs[i]->digest, digest) && streq(d->programs[i]->name, program))
                        return d->programs[i];
        return NULL;
}

static int load_program(Daemon *d, const char *digest, const char *program, NlProgram **ret, Error *reterr) {
        _cleanup_free_ char *data = NULL;
        size_t size;
        int r;

        r = store_object_read(d->store, digest, d->config.object_size_max, &data, &size);
        if (r < 0)
                return error_set(reterr, r, r == -ENOENT ? "object_not_found" : "store_error",
                                 "cannot read object %s: %s", digest,
                                 r == -EBADMSG ? "its bytes do not match its digest" : strerror(-r));
        /* libbpf names maps after the object: a short digest keeps them recognisable in bpftool. */
        char object_name[20];
        snprintf(object_name, sizeof(object_name), "clsd_%.8s", digest + strlen("sha256:"));
        return nl_program_load(data, size, object_name, program, ret, reterr);
}

int registry_acquire(Daemon *d, const char *digest, const char *program, uint32_t adopt_id,
                     const char *adopt_tag, Program **ret, Error *reterr) {
        _cleanup_(nl_program_freep) NlProgram *np = NULL;
        Program *p = registry_find(d, digest, program), **n;
        int r = -1;

        if (p) {
                p->n_ref++;
                *ret = p;
                return 0;
        }

        if (adopt_id) {
                /* The kernel holds a program with the tag we attached last time: take it, do not reload. */
                r = nl_program_open_id(adopt_id, &np, NULL);
                if (r >= 0 && adopt_tag && !streq(nl_program_tag(np), adopt_tag))
                        np = nl_program_free(np), r = -ESTALE;
                if (r >= 0)
                        log_info("adopted program %s (id %u, tag %s) of %s", program, nl_program_id(np),
                                 nl_program_tag(np), digest);
        }
        if (r < 0) {
                r = load_program(d, digest, program, &np, reterr);
                if (r < 0)
                        return r;
                log_info("loaded program %s (id %u, tag %s) of %s", program, nl_program_id(np),
                         nl_program_tag(np), digest);
        }

        p = calloc(1, sizeof(*p));
        n = realloc(d->programs, (d->n_programs + 1) * sizeof(Program *));
        if (!p || !n || !(p->digest = strdup(digest)) || !(p->name = strdup(program))) {
                if (p) {
                        free(p->digest);
                        free(p);
                }
                if (n)
                        d->programs = n;
                return error_set(reterr, ENOMEM, "internal_error", "out of memory");
        }
        d->programs = n;
        p->prog = TAKE_PTR(np);
        p->n_ref = 1;
        d->programs[d->n_programs++] = p;
        *ret = p;
        return 0;
}

void registry_release(Daemon *d, Program *p) {
        if (!p || --p->n_ref > 0)
                return;
        /* The kernel's filters hold their own reference: closing ours detaches nothing. */
        for (size_t i = 0; i < d->n_programs; i++)
                if (d->programs[i] == p) {
                        d->programs[i] = d->programs[--d->n_programs];
                        break;
                }
        nl_program_free(p->prog);
        free(p->digest);
        free(p->name);
        free(p);
}
