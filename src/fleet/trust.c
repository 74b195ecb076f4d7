/* trust.c: with --fleet-require-signed, which fleet policies this node may apply: one signed by a trusted
 * key (its envelope's "signed", fleet-signed.c), at a serial no lower than the last one it accepted of
 * that name, and at that same serial only with the same text; the highest accepted kept on disk with the
 * node's rollouts (node-rollouts.c), so that a restart does not forget what a replay would undo. A policy
 * refused is said failed, with why, and nothing of it is applied: the node keeps what it holds. A
 * removal too must be signed (a removal envelope, clsctl fleet rm --sign): a policy the node applied
 * whose key is deleted, or missing from a list, stays, and is said refused. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet-internal.h"
#include "log.h"
#include "sha256.h"
#include "daemon-policies.h"
#include "store-policy.h"
#include "fleet-rollouts.h"
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
        _cleanup_error_ Error e = ERROR_NULL;

        if (!p->signature)
                return refusal(w, "it is not signed, and this node applies only signed fleet policies "
                                  "(--fleet-require-signed; clsctl fleet apply --sign KEY)");
        snprintf(what, sizeof(what), "fleet policy %s (serial %" PRIu64 ")", w->name, p->serial);
        if (trusted_keys_verify(f->trusted_keys, p->signed_text, p->signed_size, p->signature,
                                strlen(p->signature), what, &e) < 0)
                return refusal(w, "%s", strna(e.message));
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

/* Whether the daemon holds fleet policy name (applied from etcd). */
static bool held(Fleet *f, const char *name) {
        Policy *p = daemon_policy_get(f->m, name);
        return p && p->fleet_revision;
}

void trust_judge(Fleet *f, const char *name) {
        Wanted *w = wanted_find(&f->wanted, name);

        if (!f->require_signed || !w || w->invalid || w->gone)
                return;
        /* a signed removal ("removed": true) is judged as a policy is; refused, what it would remove stays
         */
        if (w->fp.removed && held(f, name)) {
                free(w->refused);
                w->refused = why_not(f, w);
                w->selected = !!w->refused;
                return;
        }
        if (!w->selected && !w->ineligible)
                return;
        free(w->refused);
        w->refused = why_not(f, w);
}

/* A removal without a signature (the key deleted, or gone from a list): a policy this node applied
 * stays; anyone who may write could have made it. */
static void keep(Fleet *f, const char *name, uint64_t revision) {
        Wanted *w = wanted_find(&f->wanted, name);
        char *why = strdup("refused: removed without a signature (clsctl fleet rm --sign KEY); kept");

        if (!why)
                return;
        log_warning("fleet: policy %s: removed without a signature at revision %" PRIu64 "; kept", name,
                    revision);
        if (!w && wanted_add_kept(&f->wanted, name, daemon_policy_get(f->m, name)->fleet_revision) < 0) {
                free(why);
                return;
        }
        w = wanted_find(&f->wanted, name);
        free(w->refused);
        w->refused = why;
        w->selected = true;
}

bool trust_keeps_deleted(Fleet *f, const char *name, uint64_t revision) {
        if (!f->require_signed || !held(f, name))
                return false;
        keep(f, name, revision);
        return true;
}

void trust_keep_unlisted(Fleet *f, uint64_t revision) {
        if (!f->require_signed)
                return;
        for (size_t i = 0; i < daemon_policy_count(f->m); i++) {
                Policy *p = daemon_policy_at(f->m, i);
                if (p->fleet_revision && !wanted_find(&f->wanted, p->name))
                        keep(f, p->name, revision);
        }
}
