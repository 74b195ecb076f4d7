/* diff.c: a fleet-wide dry run (clsctl fleet diff). clsctl writes a policy's envelope, as an apply would
 * write it under policies/, at diffs/ID (under a lease of its own: it goes by itself); a node it selects
 * (by name, labels and kernel gates, as an apply's) answers at diff-answers/NODE/ID, under the node's lease,
 * what the policy would do on each interface it matches here: the daemon's dry run of it as a fleet
 * policy, against this node's own kernel and sources (hogs, documents, policies), after the objects it
 * names are fetched from etcd as an apply fetches them (content-addressed: stored, applied by nothing).
 * Nothing of it is applied. One request at a time; a newer one waits, and replaces an older waiting one. */
#include <stdio.h>
#include <string.h>

#include "fleet-internal.h"
#include "log.h"
#include "daemon-objects.h"
#include "daemon-policies.h"
#include "fleet-io.h"

/* An answer is a few hundred bytes an interface: a node matching more than this says so instead (etcd
 * refuses requests over 1.5 MiB). */
#define DIFF_ANSWER_MAX (512 * 1024)

struct DiffJob {
        Fleet *f;
        char id[FLEET_DIFF_ID_MAX + 1];
        json_t *envelope;
        FleetPolicy fp;
        const char **digests; /* the objects it names (pointing into fp) */
        size_t next_digest;
        bool cancelled; /* the connection went, or the fleet: a call's answer that comes drops it */
        bool gone; /* its request was deleted meanwhile: nothing is answered */
};

static void job_free(DiffJob *j) {
        if (!j)
                return;
        free(j->digests);
        fleet_policy_done(&j->fp);
        json_decref(j->envelope);
        free(j);
}

static void job_next(Fleet *f);

/* The request's id, from its key (PREFIX diffs/ID): NULL if it is no request's. */
static const char *id_of(const char *prefix, const EtcdKv *kv) {
        size_t n = strlen(prefix);
        const char *id;

        if (strlen(kv->key) != kv->key_size || !startswith(kv->key, prefix) ||
            !(id = startswith(kv->key + n, "diffs/")))
                return NULL;
        if (!id[0] || strlen(id) > FLEET_DIFF_ID_MAX || strspn(id, "0123456789abcdef-") != strlen(id))
                return NULL;
        return id;
}

/* A diff's write refused (a node user made before diffs existed, an answer etcd will not take): said,
 * and nothing else; the connection is the fleet's, not the diff's. */
static void on_diff_written(EtcdAsync *a, json_t *answer, const Error *e, void *userdata) {
        Fleet *f = userdata;

        (void) a, (void) answer;
        if (!e)
                return;
        if (e->code == ERROR_ETCD_TOKEN_INVALID || e->code == ERROR_ETCD_LEASE_NOT_FOUND)
                fleet_call_failed(f, e);
        else
                log_warning("fleet: a fleet diff's answer was not written: %s", strna(e->message));
}

static void answered_add(Fleet *f, const char *id) {
        memmove(f->diff_answered[1], f->diff_answered[0],
                sizeof(f->diff_answered[0]) * (FLEET_DIFF_ANSWERED_MAX - 1));
        snprintf(f->diff_answered[0], sizeof(f->diff_answered[0]), "%s", id);
}

static bool answered_take(Fleet *f, const char *id) {
        for (size_t i = 0; i < FLEET_DIFF_ANSWERED_MAX; i++)
                if (f->diff_answered[i][0] && streq(f->diff_answered[i], id)) {
                        f->diff_answered[i][0] = 0;
                        return true;
                }
        return false;
}

/* The answer, written under the node's lease only while the request is there (a request clsctl removed
 * meanwhile leaves no answer behind). */
static void answer_put(DiffJob *j, json_t *answer) {
        Fleet *f = j->f;
        _cleanup_free_ char *key = fleet_key(f->prefix, "diff-answers", f->node, j->id),
                            *request = fleet_key(f->prefix, "diffs", j->id, NULL), *text = NULL, *b64 = NULL;

        if (j->gone) {
                json_decref(answer);
                return;
        }
        if (answer && (json_object_set_new(answer, "node", json_string(f->node)) < 0 ||
                       json_object_set_new(answer, "id", json_string(j->id)) < 0))
                answer = (json_decref(answer), NULL);
        text = answer ? json_dumps(answer, JSON_COMPACT) : NULL;
        json_decref(answer);
        if (text && strlen(text) > DIFF_ANSWER_MAX) {
                free(text);
                text = NULL;
                if (asprintf(&text,
                             "{\"node\":\"%s\",\"id\":\"%s\",\"error\":{\"code\":\"payload_too_large\","
                             "\"message\":\"the answer is over %d bytes: too many interfaces\"}}",
                             f->node, j->id, DIFF_ANSWER_MAX) < 0)
                        text = NULL;
        }
        if (!text) {
                log_warning(
                        "fleet: the fleet diff %s could not be answered (out of memory, or a name that is "
                        "not UTF-8)",
                        j->id);
                return;
        }
        if (!key || !request || !f->lease || etcd_b64_encode(request, strlen(request), &b64) < 0)
                return; /* (no lease, no answer: clsctl says the node did not answer) */
        answered_add(f, j->id);
        fleet_call(f, "/v3/kv/txn",
                   json_pack("{s:[{s:s,s:s,s:s,s:s}],s:[{s:o}]}", "compare", "key", b64, "target", "VERSION",
                             "result", "GREATER", "version", "0", "success", "request_put",
                             etcd_put_body(key, text, strlen(text), f->lease)),
                   on_diff_written, NULL, f);
}

static json_t *error_json(const Error *e) {
        json_t *j = json_pack("{s:s, s:s}", "code", error_code_to_string(e->code) ?: "internal_error",
                              "message", strna(e->message));
        /* (a message with bytes that are not UTF-8, a foreign filter's name say: its code alone) */
        return j
                       ?: json_pack("{s:s, s:s}", "code", error_code_to_string(e->code) ?: "internal_error",
                                    "message", "(a message that is not UTF-8)");
}

static void job_failed(DiffJob *j, const Error *e) {
        answer_put(j, json_pack("{s:o}", "error", error_json(e)));
}

/* What the dry run says of one interface: the policy's state there, and each step of the plan. */
static json_t *interface_json(const PolicyResult *r) {
        json_t *steps = json_array(), *i;
        /* as the API's policy dry run counts it: the kernel's filters, or the interface losing the policy */
        bool changed = !r->matched || r->removed;

        for (size_t k = 0; steps && k < r->dry_run.n_steps; k++) {
                const DryRunStep *s = &r->dry_run.steps[k];
                changed |= !streq(s->action, "keep");
                json_array_append_new(steps, json_pack("{s:s, s:s, s:i, s:s, s:s}", "action", s->action,
                                                       "hook", direction_to_string(s->direction), "priority",
                                                       (int) s->pref, "name", s->name, "reason", s->reason));
        }
        i = json_pack("{s:s?, s:s, s:b, s:s, s:s?, s:b, s:o}", "netns", r->netns, "ifname", r->ifname,
                      "matched", r->matched, "state",
                      r->matched ? policy_iface_state_to_string(r->policy_state) : "unmatched", "by", r->by,
                      "changed", changed, "steps", steps);
        if (i && r->dry_run.refused.code)
                json_object_set_new(i, "refused", error_json(&r->dry_run.refused));
        if (i && r->error.code)
                json_object_set_new(i, "error", error_json(&r->error));
        return i;
}

static void on_dry_run(Manager *m, const PolicyOutcome *o, const Error *e, void *userdata) {
        DiffJob *j = userdata;
        Fleet *f = j->f;
        json_t *ifaces;

        if (j->cancelled) {
                job_free(j); /* the fleet went meanwhile: nothing of it is touched */
                return;
        }
        {
                if (e)
                        job_failed(j, e);
                else if ((ifaces = json_array())) {
                        /* the policy as this node would store it: new here, or other than it holds */
                        Policy *held = daemon_policy_get(m, j->fp.name);
                        json_t *was = held ? policy_to_json(held) : NULL,
                               *now = o->policy ? policy_to_json(o->policy) : NULL;
                        bool policy_changed = !was || !now || !json_equal(was, now);
                        json_decref(was);
                        json_decref(now);
                        for (size_t i = 0; i < o->n_results; i++) {
                                json_t *one = interface_json(&o->results[i]);
                                /* one that cannot be said (a name that is not UTF-8) is a refusal, never
                                 * left out: it may be the conflict */
                                json_array_append_new(
                                        ifaces,
                                        one
                                                ?: json_pack(
                                                           "{s:s, s:b, s:{s:s, s:s}}", "ifname", "?",
                                                           "changed", true, "error", "code", "invalid_value",
                                                           "message",
                                                           "an interface whose name or plan is not UTF-8"));
                        }
                        answer_put(j, json_pack("{s:o, s:b}", "interfaces", ifaces, "policy_changed",
                                                policy_changed));
                }
                log_info("fleet: answered the fleet diff %s of policy %s", j->id, j->fp.name);
        }
        if (f->diff == j)
                f->diff = NULL;
        job_free(j);
        job_next(f);
}

static void dry_run(DiffJob *j) {
        /* its images pulled as an apply pulls them: spread over the nodes that pull them at once (clsctl
         * says how many it asked: "selected") */
        const FleetPolicyChange v = { .name = j->fp.name,
                                      .body = j->fp.policy,
                                      .revision = 1,
                                      .pull_nodes = j->fp.selected ? j->fp.selected : 1 };

        daemon_fleet_policy_dry_run(j->f->m, &v, on_dry_run, j);
}

static void fetch_next(DiffJob *j);

static void on_object_added(Manager *m, const DaemonObject *o, bool created, const Error *e,
                            void *userdata) {
        DiffJob *j = userdata;

        (void) m, (void) o, (void) created;
        if (j->cancelled) {
                job_free(j);
                return;
        }
        if (e) {
                Fleet *f = j->f;
                job_failed(j, e);
                f->diff = NULL;
                job_free(j);
                job_next(f);
                return;
        }
        fetch_next(j);
}

static void on_object_fetched(EtcdAsync *a, json_t *answer, const Error *e, void *userdata) {
        DiffJob *j = userdata;
        Fleet *f = j->f;
        _cleanup_error_ Error e2 = ERROR_NULL;

        (void) a;
        if (e || j->cancelled) {
                bool next = e && !j->cancelled;
                if (e && !j->cancelled)
                        job_failed(j,
                                   e); /* (etcd busy: the answer says so; the request may be asked again) */
                if (f->diff == j)
                        f->diff = NULL;
                job_free(j);
                if (next)
                        job_next(f); /* a request waiting behind it is answered all the same */
                return;
        }
        if (fleet_object_store(f, j->digests[j->next_digest - 1], answer, on_object_added, j, &e2) < 0) {
                job_failed(j, &e2);
                f->diff = NULL;
                job_free(j);
                job_next(f);
        }
}

static void fetch_cancel(void *userdata) {
        DiffJob *j = userdata;

        if (j->f->diff == j)
                j->f->diff = NULL;
        job_free(j);
}

/* The next object the daemon lacks is fetched; once it has them all, the dry run. */
static void fetch_next(DiffJob *j) {
        Fleet *f = j->f;

        while (j->digests[j->next_digest] && daemon_object_get(f->m, j->digests[j->next_digest]))
                j->next_digest++;
        if (!j->digests[j->next_digest]) {
                dry_run(j);
                return;
        }
        _cleanup_free_ char *key = fleet_key(f->prefix, "objects", j->digests[j->next_digest++], NULL);
        fleet_call(f, "/v3/kv/range", fleet_object_range(key), on_object_fetched, fetch_cancel, j);
}

static void job_start(Fleet *f, DiffJob *j) {
        _cleanup_error_ Error e = ERROR_NULL;

        f->diff = j;
        if (fleet_policy_digests(&j->fp, &j->digests, &e) < 0) {
                job_failed(j, &e);
                f->diff = NULL;
                job_free(j);
                return;
        }
        fetch_next(j);
}

static void job_next(Fleet *f) {
        DiffJob *j = f->diff_next;

        if (f->diff || !j)
                return;
        f->diff_next = NULL;
        job_start(f, j);
}

void diff_seen(Fleet *f, const EtcdKv *kv, bool deleted) {
        const char *id = id_of(f->prefix, kv);
        _cleanup_error_ Error e = ERROR_NULL;
        json_error_t jerr;
        DiffJob *j;

        if (!id)
                return;
        if (deleted) {
                /* the request went (clsctl is done, or its lease lapsed): not answered now, and this node's
                 * answer goes too, if it made one (clsctl deletes those it read: most are gone already) */
                if (f->diff_next && streq(f->diff_next->id, id)) {
                        job_free(f->diff_next);
                        f->diff_next = NULL;
                }
                if (f->diff && streq(f->diff->id, id))
                        f->diff->gone = true;
                if (answered_take(f, id)) {
                        _cleanup_free_ char *key = fleet_key(f->prefix, "diff-answers", f->node, id);
                        if (key)
                                fleet_call(f, "/v3/kv/deleterange", etcd_delete_body(key, false),
                                           on_diff_written, NULL, f);
                }
                return;
        }
        if (!(j = calloc(1, sizeof(*j))))
                goto oom;
        j->f = f;
        snprintf(j->id, sizeof(j->id), "%s", id);
        j->envelope = json_loadb(kv->value, kv->value_size, JSON_REJECT_DUPLICATES, &jerr);
        if (!j->envelope || fleet_policy_parse(j->envelope, &j->fp, &e) < 0) {
                if (!e.code)
                        error_set(&e, EINVAL, ERROR_MALFORMED_JSON, "the request is not JSON: %s",
                                  jerr.text);
                job_failed(j, &e);
                job_free(j);
                return;
        }
        char why[128];
        if (j->fp.removed || !fleet_policy_selects(&j->fp, f->node, f->labels, f->n_labels) ||
            !fleet_policy_qualifies(&j->fp, &f->facts, why, sizeof(why))) {
                job_free(j); /* not this node's: clsctl says why from the node's record */
                return;
        }
        /* one at a time: a newer request waits (in place of an older waiting one) */
        job_free(f->diff_next);
        f->diff_next = j;
        job_next(f);
        return;
oom:
        fleet_lost(f, "out of memory");
}

void diff_free(Fleet *f) {
        if (f->diff)
                f->diff->cancelled = true; /* (freed when its call or dry run ends) */
        f->diff = NULL;
        job_free(f->diff_next);
        f->diff_next = NULL;
}
