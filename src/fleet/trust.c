/* trust.c: with --fleet-require-signed, which fleet policies this node may apply: one signed by a trusted
 * key (its envelope's "signed", fleet-signed.c), at a serial no lower than the last one it accepted of
 * that name, and at that same serial only with the same text; the highest accepted kept on disk with the
 * node's rollouts (node-rollouts.c), so that a restart does not forget what a replay would undo. A policy
 * refused is said failed, with why, and nothing of it is applied: the node keeps what it holds. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet-internal.h"
#include "log.h"
#include "sha256.h"
#include <stdarg.h>

static char *refusal(const Wanted *w, const char *fmt, ...) _printf_(2, 3);
static char *refusal(const Wanted *w, const char *fmt, ...) {
        char *s = NULL, *out = NULL;
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(&s, fmt, ap) < 0)
                s = NULL;
        va_end(ap);
        if (!s)
                return NULL;
        log_warning("fleet: policy %s (revision %" PRIu64 "): %s; not applied", w->name, w->revision, s);
        if (asprintf(&out, "refused: %s", s) < 0)
                out = NULL;
        free(s);
        return out;
}

static char *why_not(Fleet *f, const Wanted *w) {
        const FleetPolicy *p = &w->fp;
        char what[128], digest[SHA256_DIGEST_STRING_MAX];
        Error e = ERROR_NULL;

        if (!p->signature)
                return refusal(w, "it is not signed, and this node applies only signed fleet policies "
                                  "(--fleet-require-signed; clsctl fleet apply --sign KEY)");
        snprintf(what, sizeof(what), "fleet policy %s (serial %" PRIu64 ")", w->name, p->serial);
        if (trusted_keys_verify(f->trusted_keys, p->signed_text, p->signed_size, p->signature,
                                strlen(p->signature), what, &e) < 0) {
                char *r = refusal(w, "%s", strna(e.message));
                error_done(&e);
                return r;
        }
        sha256_digest_string(p->signed_text, p->signed_size, digest);
        json_t *had = json_object_get(f->accepted, w->name);
        uint64_t serial = (uint64_t) json_integer_value(json_object_get(had, "serial"));
        const char *had_digest = json_string_value(json_object_get(had, "sha256"));
        if (p->serial < serial)
                return refusal(w,
                               "serial %" PRIu64 " is older than serial %" PRIu64
                               " this node accepted: an older policy written again (a replay)",
                               p->serial, serial);
        if (p->serial == serial && had_digest && !streq(had_digest, digest))
                return refusal(w, "serial %" PRIu64 " was accepted here with other content", p->serial);
        if (p->serial > serial) {
                json_t *v = json_pack("{s:I,s:s}", "serial", (json_int_t) p->serial, "sha256", digest);
                if (!v || json_object_set_new(f->accepted, w->name, v) < 0)
                        return refusal(w, "out of memory");
                node_rollouts_save(f);
        }
        return NULL;
}

void trust_judge(Fleet *f, const char *name) {
        Wanted *w = wanted_find(&f->wanted, name);

        if (!f->require_signed || !w || w->invalid || w->gone || (!w->selected && !w->ineligible))
                return;
        free(w->refused);
        w->refused = why_not(f, w);
}
