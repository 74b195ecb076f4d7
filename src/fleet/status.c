/* status.c: what this node says in etcd, under its lease: its record (nodes/NODE: labels, kernel, the
 * revision applied) and its status of each fleet policy that selects it (status/NODE/POLICY: applied,
 * pending, failed or overridden, interface by interface), written when they change; and its own keys
 * kept: one another writer changed or deleted is written again, one under status/NODE/ it never wrote
 * is deleted. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet-internal.h"
#include "log.h"
#include "daemon-changes.h"
#include "daemon-fleet.h"
#include "daemon-policies.h"
#include "store-policy.h"
#include "fleet-io.h"
#include "fleet-rollouts.h"

#define STATUS_DELAY_USEC (50 * 1000ULL)

static int status_put(Fleet *f, size_t k);
static char *record_text(Fleet *f);
static void record_again(Fleet *f);

static ssize_t published_index(Fleet *f, const char *name) {
        for (size_t i = 0; i < f->published.n; i++)
                if (streq(f->published.names[i], name))
                        return (ssize_t) i;
        return -1;
}

static void published_clear(Fleet *f) {
        for (size_t i = 0; i < f->published.n; i++) {
                free(f->published.names[i]);
                free(f->published.texts[i]);
        }
        free(f->published.names);
        free(f->published.texts);
        free(f->published.writes);
        f->published.names = f->published.texts = NULL;
        f->published.writes = NULL;
        f->published.n = 0;
}

/* A status put under way: whose. */
typedef struct StatusPut {
        Fleet *f;
        char name[];
} StatusPut;

/* The write of name's status was answered at revision: written again if another writer changed it
 * meanwhile. */
static void status_answered(Fleet *f, const char *name, uint64_t revision) {
        ssize_t k = published_index(f, name);

        if (k < 0 || !own_write_answered(&f->published.writes[k], revision))
                return;
        log_warning("fleet: status of %s was changed by another writer while it was written; written again",
                    name);
        f->status.foreign_keys++;
        (void) status_put(f, (size_t) k);
}

/* A status etcd did not take (busy): written again at the next publish. */
static void status_unwritten(Fleet *f, const char *name) {
        ssize_t k = published_index(f, name);

        if (k < 0)
                return;
        if (f->published.writes[k].inflight > 0)
                f->published.writes[k].inflight--;
        free(f->published.texts[k]);
        f->published.texts[k] = NULL;
}

static void record_unwritten(Fleet *f) {
        if (f->record_write.inflight > 0)
                f->record_write.inflight--;
        free(f->record);
        f->record = NULL;
}

static void on_status_written(EtcdAsync *a, json_t *answer, const Error *e, void *userdata) {
        _cleanup_free_ StatusPut *put = userdata;

        (void) a;
        if (e) {
                status_unwritten(put->f, put->name);
                fleet_call_failed(put->f, e);
        } else
                status_answered(put->f, put->name, etcd_answer_revision(answer));
}

/* Puts the status text of published entry k under the lease. An entry whose last write etcd did not take
 * (status_unwritten(): its text forgotten) is written by the next publish, as is every entry while no
 * lease is held (a grant under way). */
static int status_put(Fleet *f, size_t k) {
        const char *text = f->published.texts[k];

        if (!text || !f->lease) {
                status_later(f);
                return 0;
        }
        _cleanup_free_ char *key = fleet_key(f->prefix, "status", f->node, f->published.names[k]);
        StatusPut *put = calloc(1, sizeof(StatusPut) + strlen(f->published.names[k]) + 1);

        if (!key || !put) {
                free(put);
                return -ENOMEM;
        }
        put->f = f;
        strcpy(put->name, f->published.names[k]);
        f->published.writes[k].inflight++;
        f->status.status_writes++;
        fleet_call(f, "/v3/kv/put", etcd_put_body(key, text, strlen(text), f->lease), on_status_written,
                   free, put);
        return 0;
}

/* A new entry of the published set (taking text), or -ENOMEM. */
static ssize_t published_add(Fleet *f, const char *name, char *text) {
        char **names = realloc(f->published.names, (f->published.n + 1) * sizeof(char *));
        if (names)
                f->published.names = names;
        char **texts = realloc(f->published.texts, (f->published.n + 1) * sizeof(char *));
        if (texts)
                f->published.texts = texts;
        OwnWrite *writes = realloc(f->published.writes, (f->published.n + 1) * sizeof(OwnWrite));
        if (writes)
                f->published.writes = writes;
        if (!names || !texts || !writes || !(names[f->published.n] = strdup(name)))
                return -ENOMEM;
        texts[f->published.n] = text;
        writes[f->published.n] = (OwnWrite){ 0 };
        return (ssize_t) f->published.n++;
}

/* One publish's transaction (the record if it changed, the statuses that did, the ones that go): its
 * writes, judged together at its answer's revision. */
typedef struct StatusTxn {
        Fleet *f;
        uint64_t lease; /* written under */
        bool record;
        size_t n;
        char *names[];
} StatusTxn;

static void status_txn_free(void *userdata) {
        StatusTxn *t = userdata;

        for (size_t i = 0; i < t->n; i++)
                free(t->names[i]);
        free(t);
}

static void on_status_txn(EtcdAsync *a, json_t *answer, const Error *e, void *userdata) {
        StatusTxn *t = userdata;
        Fleet *f = t->f;
        uint64_t revision = etcd_answer_revision(answer);

        (void) a;
        if (e) {
                /* etcd took none of it: each is written again at the next publish */
                for (size_t i = 0; i < t->n; i++)
                        status_unwritten(f, t->names[i]);
                if (t->record)
                        record_unwritten(f);
                fleet_call_failed(f, e);
        } else if (t->record && own_write_answered(&f->record_write, revision))
                record_again(f);
        for (size_t i = 0; !e && i < t->n; i++)
                status_answered(f, t->names[i], revision);
        if (t->lease == f->publishing_lease)
                f->publishing = false;
        /* the first publish under a lease (a new one too: what another writer did while the old one went
         * was not looked at) looks at what is there, and the watch is heeded from then on */
        if (!e && t->lease == f->lease)
                status_own_keys_check(f);
        status_txn_free(t);
        if (f->publish_again && !e && !f->publishing) {
                f->publish_again = false;
                status_publish(f);
        }
}

static void on_status_txn_dropped(void *userdata) {
        StatusTxn *t = userdata;

        /* (the connection went: what it wrote is written again, status_unsent()) */
        if (t->lease == t->f->publishing_lease)
                t->f->publishing = false;
        status_txn_free(t);
}

/* A put of key (text, under the lease) or its deletion (text NULL) appended to ops. */
static int txn_op(json_t *ops, Fleet *f, const char *key, const char *text) {
        json_t *op =
                text ? json_pack("{s:o}", "request_put", etcd_put_body(key, text, strlen(text), f->lease))
                     : json_pack("{s:o}", "request_delete_range", etcd_delete_body(key, false));
        return op ? json_array_append_new(ops, op) : -ENOMEM;
}

static uint64_t revision_of(json_t *j, const char *key) {
        return (uint64_t) json_integer_value(json_object_get(j, key));
}

/* What the faces show of the node's status of each policy (/metrics, D-Bus): the status as written. */
static void export_policy(Fleet *f, json_t *j) {
        DaemonFleetPolicy *d;
        json_t *i;
        size_t k;

        if (f->status.n_policies >= DAEMON_FLEET_POLICIES_MAX)
                return;
        d = &f->status.policies[f->status.n_policies++];
        *d = (DaemonFleetPolicy){ .revision = revision_of(j, "revision"),
                                  .held = revision_of(j, "held_revision"),
                                  .committed = revision_of(j, "committed_revision") };
        snprintf(d->policy, sizeof(d->policy), "%s",
                 strempty(json_string_value(json_object_get(j, "policy"))));
        snprintf(d->state, sizeof(d->state), "%s", strempty(json_string_value(json_object_get(j, "state"))));
        snprintf(d->why, sizeof(d->why), "%s", strempty(json_string_value(json_object_get(j, "error"))));
        json_array_foreach (json_object_get(j, "interfaces"), k, i) {
                const char *st = json_string_value(json_object_get(i, "state"));
                for (PolicyIfaceState x = 0; st && x < _POLICY_IFACE_STATE_MAX; x++)
                        if (streq(st, policy_iface_state_to_string(x)))
                                d->interfaces[x]++;
        }
}

/* The faces' view of each policy's status, also while etcd is out of reach. */
static void export_all(Fleet *f) {
        f->status.n_policies = 0;
        for (size_t i = 0; i < f->wanted.n; i++) {
                const Wanted *w = &f->wanted.v[i];
                if (!w->selected && !w->ineligible)
                        continue;
                _cleanup_(json_decrefp) json_t *j = policy_status(f, w);
                if (j)
                        export_policy(f, j);
        }
}

/* The status of every policy that selects this node, and its record: what changed since the last
 * publish, written in one transaction (one request however many policies changed). */
void status_publish(Fleet *f) {
        if (f->state != FLEET_WATCHING || !f->lease) {
                export_all(f);
                return;
        }
        /* one publish under way at a time: what changes meanwhile goes in the next, after its answer
         * (a busy etcd gets one transaction of a node's statuses, not one per change) */
        if (f->publishing && f->publishing_lease == f->lease) {
                f->publish_again = true;
                export_all(f);
                return;
        }
        f->status.n_policies = 0;
        json_t *ops = json_array();
        StatusTxn *t = calloc(1, sizeof(StatusTxn) + (f->wanted.n + 1) * sizeof(char *));
        _cleanup_free_ char *record = record_text(f);
        _cleanup_free_ char *record_key = fleet_key(f->prefix, "nodes", f->node, NULL);

        if (!ops || !t || !record_key) {
                json_decref(ops);
                free(t);
                return;
        }
        t->f = f;
        t->lease = f->lease;
        if (record && txn_op(ops, f, record_key, record) >= 0) {
                t->record = true;
                f->record_write.inflight++;
                free(f->record);
                f->record = TAKE_PTR(record);
        }
        for (size_t i = 0; i < f->wanted.n; i++) {
                const Wanted *w = &f->wanted.v[i];
                if (!w->selected && !w->ineligible)
                        continue;
                json_t *j = policy_status(f, w);
                char *text = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
                if (j)
                        export_policy(f, j);
                json_decref(j);
                if (!text)
                        continue;
                ssize_t k = published_index(f, w->name);
                if (k >= 0 && streq_ptr(f->published.texts[k], text)) {
                        free(text);
                        continue;
                }
                if (k >= 0) {
                        free(f->published.texts[k]);
                        f->published.texts[k] = text;
                } else if ((k = published_add(f, w->name, text)) < 0) {
                        free(text);
                        continue;
                }
                _cleanup_free_ char *key = fleet_key(f->prefix, "status", f->node, w->name);
                if (!key || !(t->names[t->n] = strdup(w->name)) || txn_op(ops, f, key, text) < 0) {
                        /* out of memory: written alone (or at the next publish) */
                        free(t->names[t->n]);
                        t->names[t->n] = NULL;
                        (void) status_put(f, (size_t) k);
                        continue;
                }
                t->n++;
                f->published.writes[k].inflight++;
        }
        /* a policy gone, or no longer this node's: its status goes */
        for (size_t i = 0; i < f->published.n;) {
                const Wanted *w = wanted_find(&f->wanted, f->published.names[i]);
                if (w && (w->selected || w->ineligible)) {
                        i++;
                        continue;
                }
                _cleanup_free_ char *key = fleet_key(f->prefix, "status", f->node, f->published.names[i]);
                if (key)
                        (void) txn_op(ops, f, key, NULL);
                free(f->published.names[i]);
                free(f->published.texts[i]);
                f->published.names[i] = f->published.names[f->published.n - 1];
                f->published.texts[i] = f->published.texts[f->published.n - 1];
                f->published.writes[i] = f->published.writes[f->published.n - 1];
                f->published.n--;
        }
        if (json_array_size(ops) == 0) {
                json_decref(ops);
                status_txn_free(t);
                return;
        }
        f->status.status_writes++;
        f->publishing = true;
        f->publishing_lease = f->lease; /* (one under a lease since gone does not hold the next back) */
        fleet_call(f, "/v3/kv/txn", json_pack("{s:o}", "success", ops), on_status_txn, on_status_txn_dropped,
                   t);
}

/* A key under PREFIX status/NODE/ (kv) as etcd has it now (deleted: gone): one this node publishes is
 * written again when another writer changed it after this node's last write (or did while one was under
 * way: judged at its answer); one it does not publish is deleted. */
static void own_status_seen(Fleet *f, const EtcdKv *kv, bool deleted, const char *name) {
        ssize_t k = name && strlen(kv->key) == kv->key_size ? published_index(f, name) : -1;

        if (k < 0) {
                /* a key with a NUL in it is nobody's status (clsctl counts none): as a C string it would
                 * name another key */
                if (deleted || strlen(kv->key) != kv->key_size)
                        return;
                /* the status of a policy this node holds, not published yet (a new lease cleared what was:
                 * the next publish writes it): not another's to delete, but put right by that publish (a
                 * deletion sent now could land after it, unseen) */
                const Wanted *w = name ? wanted_find(&f->wanted, name) : NULL;
                if (w && (w->selected || w->ineligible)) {
                        status_later(f);
                        return;
                }
                log_warning("fleet: %s is not this node's (no status of a policy it holds); deleted",
                            kv->key);
                f->status.foreign_keys++;
                fleet_call(f, "/v3/kv/deleterange", etcd_delete_body(kv->key, false), fleet_on_written, NULL,
                           f);
                return;
        }
        if (!own_write_foreign(&f->published.writes[k], kv->mod_revision))
                return;
        log_warning("fleet: %s was %s by another writer; written again", kv->key,
                    deleted                 ? "deleted"
                    : kv->lease != f->lease ? "put without this node's lease"
                                            : "changed");
        f->status.foreign_keys++;
        (void) status_put(f, (size_t) k);
}

static void own_record_seen(Fleet *f, const EtcdKv *kv, bool deleted) {
        if (!f->record || !own_write_foreign(&f->record_write, kv->mod_revision))
                return;
        log_warning("fleet: %s was %s by another writer; written again", kv->key,
                    deleted                 ? "deleted"
                    : kv->lease != f->lease ? "put without this node's lease"
                                            : "changed");
        f->status.foreign_keys++;
        free(f->record);
        f->record = NULL;
        status_publish_record(f);
}

void status_own_key_seen(Fleet *f, const EtcdKv *kv, bool deleted) {
        _cleanup_free_ char *record = fleet_key(f->prefix, "nodes", f->node, NULL);
        _cleanup_free_ char *status = fleet_key(f->prefix, "status", f->node, "");

        /* Before this connection published (and looked at what is there: own_keys_check()), what the watch
         * replays is this node's own earlier writes. */
        if (!f->own_checked)
                return;
        if (record && streq(kv->key, record) && strlen(kv->key) == kv->key_size)
                own_record_seen(f, kv, deleted);
        else if (status && startswith(kv->key, status)) {
                const char *name = kv->key + strlen(status);
                own_status_seen(f, kv, deleted, name[0] && !strchr(name, '/') ? name : NULL);
        }
}

static void on_own_keys(EtcdAsync *a, json_t *answer, const Error *e, void *userdata) {
        Fleet *f = userdata;
        EtcdKv *kvs = NULL;
        size_t n = 0;

        (void) a;
        if (fleet_range_answer(f, answer, e, &kvs, &n) < 0) {
                f->own_checked = false; /* looked at again at the next publish */
                return;
        }
        for (size_t i = 0; i < n; i++)
                status_own_key_seen(f, &kvs[i], false);
        etcd_kvs_free(kvs, n);
}

/* Once a connection has published: what is under status/NODE/ that this node did not write (a status
 * written while it was away, or by someone else) goes; later changes come by the watch. */
void status_own_keys_check(Fleet *f) {
        _cleanup_free_ char *status = fleet_key(f->prefix, "status", f->node, "");

        if (f->own_checked || f->state != FLEET_WATCHING || !f->lease || !status)
                return;
        f->own_checked = true;
        fleet_call(f, "/v3/kv/range", etcd_range_body(status, true), on_own_keys, NULL, f);
}

static int on_status_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        (void) s, (void) usec;
        status_publish(userdata);
        return 0;
}

void status_later(Fleet *f) {
        uint64_t now;

        (void) sd_event_now(f->event, CLOCK_MONOTONIC, &now);
        if (!f->status_timer) {
                if (sd_event_add_time(f->event, &f->status_timer, CLOCK_MONOTONIC, now + STATUS_DELAY_USEC,
                                      1, on_status_timer, f) < 0)
                        return;
        } else if (sd_event_source_get_enabled(f->status_timer, NULL) > 0)
                return; /* already due */
        else
                (void) sd_event_source_set_time(f->status_timer, now + STATUS_DELAY_USEC);
        (void) sd_event_source_set_enabled(f->status_timer, SD_EVENT_ONESHOT);
}

/* Another writer changed the record while this node's write was under way: written again. */
static void record_again(Fleet *f) {
        log_warning("fleet: the node's record was changed by another writer while it was written; written "
                    "again");
        f->status.foreign_keys++;
        free(f->record);
        f->record = NULL;
        status_publish_record(f);
}

static void on_record_written(EtcdAsync *a, json_t *answer, const Error *e, void *userdata) {
        Fleet *f = userdata;

        (void) a;
        if (e) {
                record_unwritten(f);
                fleet_call_failed(f, e);
                return;
        }
        if (own_write_answered(&f->record_write, etcd_answer_revision(answer)))
                record_again(f);
}

/* The node's record as it is now, if it differs from the one last written (NULL: the same, or out of
 * memory). */
static char *record_text(Fleet *f) {
        json_t *j = json_pack("{s:s,s:o,s:s,s:s,s:b,s:b,s:I}", "node", f->node, "labels",
                              fleet_labels_to_json(f->labels, f->n_labels), "version", PROJECT_VERSION,
                              "kernel", daemon_kernel_release(f->m), "act_bpf", daemon_has_act_bpf(f->m),
                              "tcx", daemon_has_tcx(f->m), "revision", (json_int_t) f->status.revision);
        char *text;

        if (j && f->advertise && json_object_set_new(j, "advertise", json_string(f->advertise)) < 0) {
                json_decref(j);
                j = NULL;
        }
        text = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        json_decref(j);
        if (text && f->record && streq(f->record, text)) {
                free(text);
                return NULL;
        }
        return text;
}

void status_publish_record(Fleet *f) {
        char *text;

        if (f->state == FLEET_IDLE || !f->lease || !(text = record_text(f)))
                return;
        _cleanup_free_ char *key = fleet_key(f->prefix, "nodes", f->node, NULL);
        if (!key) {
                free(text);
                return;
        }
        f->record_write.inflight++;
        f->status.status_writes++;
        fleet_call(f, "/v3/kv/put", etcd_put_body(key, text, strlen(text), f->lease), on_record_written,
                   NULL, f);
        free(f->record);
        f->record = text;
}

void status_reset(Fleet *f) {
        free(f->record);
        f->record = NULL;
        f->record_write = (OwnWrite){ 0 };
        f->own_checked = false;
        published_clear(f);
}

void status_unsent(Fleet *f) {
        /* (their calls were dropped with the connection: neither answered nor failed) */
        if (f->record_write.inflight > 0) {
                free(f->record);
                f->record = NULL;
        }
        f->record_write.inflight = 0;
        for (size_t k = 0; k < f->published.n; k++)
                if (f->published.writes[k].inflight > 0) {
                        free(f->published.texts[k]);
                        f->published.texts[k] = NULL;
                        f->published.writes[k].inflight = 0;
                }
        f->own_checked = false; /* what another writer did meanwhile is looked at again */
}

static int on_status_kick(sd_event_source *s, void *userdata) {
        (void) s;
        status_later(userdata);
        return 0;
}

int status_start(Fleet *f) {
        int r = sd_event_add_defer(f->event, &f->status_kick, on_status_kick, f);
        if (r < 0)
                return r;
        return sd_event_source_set_enabled(f->status_kick, SD_EVENT_OFF);
}

void status_free(Fleet *f) {
        status_reset(f);
        sd_event_source_disable_unref(f->status_timer);
        sd_event_source_disable_unref(f->status_kick);
}
