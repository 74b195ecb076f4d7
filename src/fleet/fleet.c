/* fleet.c: this node's side of the fleet. It takes a lease, writes its record under it, lists the fleet
 * policies at one revision and watches from the next; the policies that select this node are applied
 * as policies the API cannot change (their objects fetched from etcd and checked against their digest
 * first), the others taken away, what one etcd revision changed as one daemon transaction; its status of
 * each is written under its lease whenever it changes. Losing etcd changes nothing here: the policies stay
 * stored and enforced, and clsd reconnects with backoff, lists again and converges on what changed
 * meanwhile. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "etcd-dl.h"
#include "curl-event.h"
#include "fleet.h"
#include "log.h"
#include "sha256.h"

#define BACKOFF_MIN_USEC (250 * 1000ULL)
#define BACKOFF_MAX_USEC (8 * 1000 * 1000ULL)
#define CALL_TIMEOUT_MS 10000L
#define STATUS_DELAY_USEC (50 * 1000ULL)
#define RETRY_USEC (1000 * 1000ULL)
#define FAILED_RETRY_USEC (5 * 1000 * 1000ULL)
#define FAILED_RETRY_MAX_USEC (300 * 1000 * 1000ULL)
#define ANSWER_MAX (64u * 1024 * 1024)

typedef void (*CallDone)(Fleet *f, json_t *answer, const Error *e, void *userdata);

typedef struct Call {
        Fleet *f;
        CURL *easy;
        struct curl_slist *headers;
        char *body;
        EtcdBuffer answer;
        CallDone done;
        void *userdata;
        struct Call *next;
} Call;

/* A fleet policy as etcd has it. */
typedef struct Wanted {
        char *name;
        uint64_t revision; /* its key's mod_revision */
        FleetPolicy fp;
        bool selected; /* selects this node */
        bool gone; /* deleted in etcd at revision (kept until the daemon has removed it) */
        char *invalid; /* its envelope or JSON is malformed: why */
        char *error; /* applying it at error_revision failed: why */
        uint64_t error_revision;
        uint64_t retry_usec; /* CLOCK_MONOTONIC: when a failed revision is tried again */
        uint64_t retry_delay_usec;
} Wanted;

/* The writes of one of this node's own keys: which revision is its last, so that a later one (its watch
 * says) is another writer's. A put not answered yet has no revision: what the watch says meanwhile is
 * judged when it is answered. */
typedef struct OwnWrite {
        unsigned inflight; /* puts not answered yet */
        uint64_t written; /* the revision of the last put answered */
        uint64_t seen; /* a later revision the watch said while a put was under way */
} OwnWrite;

/* The watch says the key changed at revision: true if another writer did it (after this node's last
 * write, none under way). */
static bool own_write_foreign(OwnWrite *w, uint64_t revision) {
        if (revision <= w->written)
                return false;
        if (w->inflight > 0) {
                w->seen = MAX(w->seen, revision);
                return false;
        }
        return true;
}

/* A put was answered at revision: true if another writer changed the key after it (said meanwhile). */
static bool own_write_answered(OwnWrite *w, uint64_t revision) {
        bool foreign;

        if (w->inflight > 0)
                w->inflight--;
        w->written = MAX(w->written, revision);
        foreign = w->inflight == 0 && w->seen > w->written;
        if (w->inflight == 0)
                w->seen = 0;
        return foreign;
}

typedef enum FleetState {
        FLEET_IDLE,
        FLEET_CONNECTING, /* lease, record, list */
        FLEET_WATCHING,
} FleetState;

struct Fleet {
        Manager *m;
        sd_event *event;
        CurlLoop *loop;
        char **urls;
        size_t n_urls, url;
        char *prefix, *node;
        FleetLabel *labels;
        size_t n_labels;
        EtcdTls tls;
        unsigned ttl;

        FleetState state;
        uint64_t lease;
        uint64_t revision; /* of the last list or watch message */
        bool listed; /* wanted is a snapshot of etcd (not before the first list) */
        Wanted *wanted;
        size_t n_wanted;
        bool busy; /* a change (group) is being applied, or an object of it fetched */
        char **group; /* the names the change puts or removes */
        size_t n_group;
        uint64_t group_revision;
        /* the last change that failed, tried again only after a delay (its puts keep theirs too): a
         * removal the daemon keeps refusing does not hold up the changes after it */
        uint64_t failed_revision, failed_retry_usec, failed_delay_usec;
        Call *calls;
        CURL *watch;
        struct curl_slist *watch_headers;
        char *watch_body;
        EtcdBuffer watch_buf;
        uint64_t backoff_usec;
        sd_event_source *retry, *keepalive, *kick, *status_timer, *watch_lines, *converge_timer;
        char **published_names; /* status keys written, and what */
        char **published_texts;
        OwnWrite *published_writes;
        size_t n_published;
        char *record; /* the node record last written */
        OwnWrite record_write;
        bool own_checked; /* this connection's keys under status/NODE/ were looked at (own_keys_check()) */
};

/* The watches of the one /v3/watch stream: the fleet's policies, and this node's own keys (its record,
 * its status), which another writer may change or delete: they are written again. */
enum {
        WATCH_POLICIES = 1,
        WATCH_RECORD = 2,
        WATCH_STATUS = 3,
};

static void disconnect(Fleet *f, const char *fmt, ...) _printf_(2, 3);
static void converge_later(Fleet *f);
static void converge_after(Fleet *f, uint64_t usec);
static void status_later(Fleet *f);
static void publish_status(Fleet *f);
static void own_keys_check(Fleet *f);

/* ---- calls ---- */

static size_t on_write(char *p, size_t size, size_t n, void *userdata) {
        return etcd_buffer_append(userdata, p, size * n, ANSWER_MAX) ? size * n : 0;
}

static CURL *easy_new(Fleet *f, const char *path, const char *body, struct curl_slist **headers) {
        _cleanup_free_ char *url = NULL;
        CURL *easy;

        if (asprintf(&url, "%s%s", f->urls[f->url], path) < 0 || !(easy = curl_api.easy_init()))
                return NULL;
        daemon_fleet(f->m)->requests++;
        *headers = curl_api.slist_append(NULL, "Content-Type: application/json");
        curl_api.easy_setopt(easy, CURLOPT_URL, url);
        curl_api.easy_setopt(easy, CURLOPT_POSTFIELDS, body);
        curl_api.easy_setopt(easy, CURLOPT_HTTPHEADER, *headers);
        curl_api.easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
        curl_api.easy_setopt(easy, CURLOPT_NOPROXY, "*"); /* etcd directly, never through a web proxy */
        curl_api.easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
        if (f->tls.ca)
                curl_api.easy_setopt(easy, CURLOPT_CAINFO, f->tls.ca);
        if (f->tls.cert)
                curl_api.easy_setopt(easy, CURLOPT_SSLCERT, f->tls.cert);
        if (f->tls.key)
                curl_api.easy_setopt(easy, CURLOPT_SSLKEY, f->tls.key);
        return easy;
}

static void call_free(Call *c) {
        if (!c)
                return;
        if (c->easy) {
                curl_loop_remove(c->f->loop, c->easy);
                curl_api.easy_cleanup(c->easy);
        }
        curl_api.slist_free_all(c->headers);
        free(c->body);
        free(c->answer.data);
        free(c);
}

static void call_unlink(Fleet *f, Call *c) {
        for (Call **p = &f->calls; *p; p = &(*p)->next)
                if (*p == c) {
                        *p = c->next;
                        return;
                }
}

static void on_call_done(CurlLoop *l, CURL *easy, CURLcode result, void *userdata) {
        Call *c = userdata;
        Fleet *f = c->f;
        Error e = ERROR_NULL;
        json_t *answer = NULL;
        long status = 0;

        (void) l;
        call_unlink(f, c);
        if (result != CURLE_OK) {
                char why[128];
                error_set(&e, EHOSTUNREACH, "etcd_unreachable", "%s: %s", f->urls[f->url],
                          etcd_transfer_error(&c->answer, curl_api.easy_strerror(result), why, sizeof(why)));
        } else {
                json_error_t jerr;
                curl_api.easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
                answer = json_loadb(c->answer.data ?: "", c->answer.size, 0, &jerr);
                if (status != 200)
                        etcd_answer_error(status, answer, &e);
                else if (!answer)
                        error_set(&e, EPROTO, "etcd_error", "etcd's answer is not JSON: %s", jerr.text);
        }
        c->done(f, e.code ? NULL : answer, e.code ? &e : NULL, c->userdata);
        json_decref(answer);
        error_done(&e);
        call_free(c);
}

/* POSTs body (taken) to path; done gets the answer of a 200 or an error. */
static int call(Fleet *f, const char *path, json_t *body, CallDone done, void *userdata) {
        Call *c = calloc(1, sizeof(*c));

        if (!c || !body || !(c->body = json_dumps(body, JSON_COMPACT))) {
                free(c);
                json_decref(body);
                return -ENOMEM;
        }
        json_decref(body);
        c->f = f;
        c->done = done;
        c->userdata = userdata;
        c->easy = easy_new(f, path, c->body, &c->headers);
        if (!c->easy) {
                call_free(c);
                return -ENOMEM;
        }
        curl_api.easy_setopt(c->easy, CURLOPT_WRITEFUNCTION, on_write);
        curl_api.easy_setopt(c->easy, CURLOPT_WRITEDATA, &c->answer);
        curl_api.easy_setopt(c->easy, CURLOPT_TIMEOUT_MS, CALL_TIMEOUT_MS);
        if (curl_loop_add(f->loop, c->easy, on_call_done, c) < 0) {
                call_free(c);
                return -ENOMEM;
        }
        c->next = f->calls;
        f->calls = c;
        return 0;
}

static void call_or_disconnect(Fleet *f, const char *path, json_t *body, CallDone done, void *userdata) {
        if (call(f, path, body, done, userdata) < 0)
                disconnect(f, "out of memory");
}

/* A write that needs no answer beyond success (status, record): a failure is the connection's. */
static void on_written(Fleet *f, json_t *answer, const Error *e, void *userdata) {
        (void) answer, (void) userdata;
        if (e)
                disconnect(f, "%s", e->message);
}

/* ---- what etcd wants of this node ---- */

static void wanted_done(Wanted *w) {
        free(w->name);
        fleet_policy_done(&w->fp);
        free(w->invalid);
        free(w->error);
        *w = (Wanted){ 0 };
}

static void wanted_clear(Fleet *f) {
        for (size_t i = 0; i < f->n_wanted; i++)
                wanted_done(&f->wanted[i]);
        free(f->wanted);
        f->wanted = NULL;
        f->n_wanted = 0;
}

static Wanted *wanted_find(Fleet *f, const char *name) {
        for (size_t i = 0; i < f->n_wanted; i++)
                if (streq(f->wanted[i].name, name))
                        return &f->wanted[i];
        return NULL;
}

/* The policy name of a key under PREFIX policies/, or NULL. A key with a NUL in it is no policy's: as a
 * C string it would be another's ("ok\0x" read as "ok"). */
static const char *policy_name_of(Fleet *f, const EtcdKv *kv) {
        const char *key = kv->key;
        size_t n = strlen(f->prefix);
        if (strlen(key) != kv->key_size || strncmp(key, f->prefix, n) != 0 ||
            strncmp(key + n, "policies/", 9) != 0)
                return NULL;
        key += n + 9;
        return key[0] && !strchr(key, '/') ? key : NULL;
}

static void wanted_gone(Fleet *f, const char *name, uint64_t revision) {
        Wanted *w = wanted_find(f, name);
        if (!w)
                return;
        fleet_policy_done(&w->fp);
        free(w->invalid);
        free(w->error);
        *w = (Wanted){ .name = w->name, .revision = revision, .gone = true };
}

static int wanted_set(Fleet *f, const EtcdKv *kv) {
        const char *name = policy_name_of(f, kv);
        Wanted w = { 0 }, *old;
        Error e = ERROR_NULL;

        if (!name)
                return 0;
        if (!(w.name = strdup(name)))
                return -ENOMEM;
        w.revision = kv->mod_revision;
        if (fleet_policy_read(name, kv->value, kv->value_size, &w.fp, &e) < 0)
                w.invalid = strdup(e.message ?: "invalid");
        else
                w.selected = fleet_policy_selects(&w.fp, f->node, f->labels, f->n_labels);
        error_done(&e);
        if (w.invalid)
                log_warning("fleet: policy %s (revision %" PRIu64 "): %s; not applied", name, w.revision,
                            w.invalid);
        old = wanted_find(f, name);
        if (old) {
                wanted_done(old);
                *old = w;
                return 0;
        }
        Wanted *v = realloc(f->wanted, (f->n_wanted + 1) * sizeof(Wanted));
        if (!v) {
                wanted_done(&w);
                return -ENOMEM;
        }
        f->wanted = v;
        f->wanted[f->n_wanted++] = w;
        return 0;
}

/* ---- applying: what one etcd revision changed, as one ----
 *
 * Each pending change has a revision: a put, its key's mod_revision; a removal, the revision that deleted
 * the key or stopped it selecting this node (after a list, the list's). What one etcd transaction wrote
 * has one revision, so the changes of the lowest pending revision go to the daemon together, as one
 * transaction: all applied, or none. */

typedef struct Pending {
        const char *name;
        uint64_t revision;
        Wanted *put; /* NULL: a removal */
} Pending;

static void converge(Fleet *f);

static void group_clear(Fleet *f) {
        for (size_t i = 0; i < f->n_group; i++)
                free(f->group[i]);
        free(f->group);
        f->group = NULL;
        f->n_group = 0;
        f->busy = false;
}

/* The group ended (e: how it failed): its puts remember the failure, and are tried again later. */
static void group_done(Fleet *f, const Error *e) {
        uint64_t now;

        (void) sd_event_now(f->event, CLOCK_MONOTONIC, &now);
        for (size_t i = 0; i < f->n_group; i++) {
                Wanted *w = wanted_find(f, f->group[i]);
                if (!w || w->gone || w->revision != f->group_revision)
                        continue;
                free(w->error);
                w->error = NULL;
                w->error_revision = 0;
                if (!e) {
                        w->retry_delay_usec = 0;
                        continue;
                }
                w->error = strdup(e->message ?: e->code);
                w->error_revision = w->revision;
                /* tried again later (what was in the way, a local policy or an object, may go), less
                 * often each time */
                w->retry_delay_usec = MIN(w->retry_delay_usec ? w->retry_delay_usec * 2 : FAILED_RETRY_USEC,
                                          FAILED_RETRY_MAX_USEC);
                w->retry_usec = now + w->retry_delay_usec;
        }
        if (e) {
                log_warning("fleet: revision %" PRIu64 ": %s", f->group_revision, strna(e->message));
                f->failed_delay_usec = f->failed_revision == f->group_revision
                                               ? MIN(f->failed_delay_usec * 2, FAILED_RETRY_MAX_USEC)
                                               : FAILED_RETRY_USEC;
                f->failed_revision = f->group_revision;
                f->failed_retry_usec = now + f->failed_delay_usec;
        } else if (f->failed_revision == f->group_revision)
                f->failed_revision = 0;
        group_clear(f);
        /* After a failure the next step waits a second: a removal the daemon refuses is tried again
         * without spinning (a put that failed waits for its backoff). */
        if (e)
                converge_after(f, RETRY_USEC);
        else
                converge_later(f);
        status_later(f);
}

static void on_group_done(Manager *m, const PolicyOutcome *o, const Error *e, void *userdata) {
        Fleet *f = userdata;

        (void) o;
        for (size_t i = 0; !e && i < f->n_group; i++) {
                Policy *p = daemon_policy_get(m, f->group[i]);
                daemon_fleet(m)->changes++;
                if (p)
                        log_info("fleet: policy %s: revision %" PRIu64 " applied", f->group[i],
                                 p->fleet_revision);
                else
                        log_info("fleet: policy %s: no longer this node's; removed", f->group[i]);
        }
        group_done(f, e);
}

typedef struct ObjectFetch {
        Fleet *f;
        char digest[SHA256_DIGEST_STRING_MAX];
} ObjectFetch;

static void on_object_added(Manager *m, const DaemonObject *o, bool created, const Error *e,
                            void *userdata) {
        ObjectFetch *x = userdata;
        Fleet *f = x->f;

        (void) m, (void) o;
        if (e)
                group_done(f, e);
        else {
                if (created)
                        log_info("fleet: object %s fetched from etcd", x->digest);
                group_clear(f);
                converge_later(f); /* the next object, or the change */
        }
        free(x);
}

static void on_object_fetched(Fleet *f, json_t *answer, const Error *e, void *userdata) {
        ObjectFetch *x = userdata;
        EtcdKv *kvs = NULL, *obj = NULL, *sig = NULL;
        size_t n = 0;
        Error e2 = ERROR_NULL;
        char digest[SHA256_DIGEST_STRING_MAX];

        if (e) {
                free(x);
                group_clear(f);
                disconnect(f, "%s", e->message);
                return;
        }
        /* the object's key, and its signature's (objects/DIGEST.sig), by one prefix range */
        if (etcd_range_parse(answer, &kvs, &n, NULL, &e2) >= 0)
                for (size_t i = 0; i < n; i++) {
                        size_t l = strlen(kvs[i].key);
                        if (l > 4 && streq(kvs[i].key + l - 4, ".sig"))
                                sig = &kvs[i];
                        else if (l >= strlen(x->digest) &&
                                 streq(kvs[i].key + l - strlen(x->digest), x->digest))
                                obj = &kvs[i];
                }
        if (!e2.code && !obj)
                error_set(&e2, ENOENT, "object_not_found", "object %s is not in etcd (%s)", x->digest,
                          "clsctl fleet apply uploads the objects a policy names");
        else if (!e2.code) {
                sha256_digest_string(obj->value, obj->value_size, digest);
                if (!streq(digest, x->digest))
                        error_set(&e2, EBADMSG, "object_corrupt",
                                  "etcd's object %s has the digest %s: not used", x->digest, digest);
        }
        if (e2.code) {
                group_done(f, &e2);
                error_done(&e2);
                free(x);
        } else
                daemon_object_add(f->m, obj->value, obj->value_size, sig ? sig->value : NULL,
                                  sig ? sig->value_size : 0, on_object_added, x);
        etcd_kvs_free(kvs, n);
}

/* The group, named in f->group, busy. */
static int group_take(Fleet *f, const Pending *v, size_t n, uint64_t revision) {
        if (!(f->group = calloc(n, sizeof(char *))))
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                if (!(f->group[f->n_group++] = strdup(v[i].name))) {
                        group_clear(f);
                        return -ENOMEM;
                }
        f->group_revision = revision;
        f->busy = true;
        return 0;
}

/* A missing object of the group's puts is fetched (1), or every one is here (0). An envelope whose
 * objects cannot be listed fails the group. */
static int fetch_object(Fleet *f, const Pending *v, size_t n) {
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ const char **digests = NULL;
                Error e = ERROR_NULL;
                if (!v[i].put)
                        continue;
                if (fleet_policy_digests(&v[i].put->fp, &digests, &e) < 0) {
                        group_done(f, &e);
                        error_done(&e);
                        return 1;
                }
                for (size_t k = 0; digests[k]; k++) {
                        if (daemon_object_get(f->m, digests[k]))
                                continue;
                        /* fetched only while connected; offline, the change waits for the next list */
                        if (f->state != FLEET_WATCHING) {
                                group_clear(f);
                                return 1;
                        }
                        ObjectFetch *x = calloc(1, sizeof(*x));
                        _cleanup_free_ char *key = fleet_key(f->prefix, "objects", digests[k], NULL);
                        if (!x || !key) {
                                free(x);
                                return -ENOMEM;
                        }
                        x->f = f;
                        snprintf(x->digest, sizeof(x->digest), "%s", digests[k]);
                        if (call(f, "/v3/kv/range", etcd_range_body(key, true), on_object_fetched, x) < 0) {
                                free(x);
                                return -ENOMEM;
                        }
                        return 1;
                }
        }
        return 0;
}

static int pending_compare(const void *a, const void *b) {
        const Pending *x = a, *y = b;
        return x->revision < y->revision ? -1 : x->revision > y->revision;
}

/* What differs between etcd (as last seen) and the daemon, by revision. */
static int pending_list(Fleet *f, Pending **ret, size_t *ret_n) {
        Manager *m = f->m;
        Pending *v = calloc(f->n_wanted + daemon_policy_count(m) + 1, sizeof(Pending));
        size_t n = 0;

        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < f->n_wanted; i++) {
                Wanted *w = &f->wanted[i];
                Policy *p = daemon_policy_get(m, w->name);
                if (w->selected && !w->invalid && !w->gone && !(p && p->fleet_revision == w->revision))
                        v[n++] = (Pending){ .name = w->name, .revision = w->revision, .put = w };
        }
        for (size_t i = 0; i < daemon_policy_count(m); i++) {
                Policy *p = daemon_policy_at(m, i);
                Wanted *w = p->fleet_revision ? wanted_find(f, p->name) : NULL;
                if (!p->fleet_revision || (w && w->selected && !w->invalid && !w->gone))
                        continue;
                v[n++] = (Pending){ .name = p->name, .revision = w ? w->revision : f->revision };
        }
        qsort(v, n, sizeof(Pending), pending_compare);
        *ret = v;
        *ret_n = n;
        return 0;
}

static void publish_record(Fleet *f);

static void converge(Fleet *f) {
        _cleanup_free_ Pending *v = NULL;
        uint64_t now, retry = UINT64_MAX;
        size_t n = 0, i, k;
        int r;

        /* Before the first list, the stored policies are all there is: they stay as they are. */
        if (f->busy || !f->listed)
                return;
        /* a policy deleted in etcd is forgotten once the daemon has none of that name */
        for (i = 0; i < f->n_wanted;)
                if (f->wanted[i].gone && !daemon_policy_get(f->m, f->wanted[i].name)) {
                        wanted_done(&f->wanted[i]);
                        f->wanted[i] = f->wanted[--f->n_wanted];
                } else
                        i++;
        if (pending_list(f, &v, &n) < 0) {
                disconnect(f, "out of memory");
                return;
        }
        (void) sd_event_now(f->event, CLOCK_MONOTONIC, &now);
        for (i = 0; i < n; i = k) {
                bool blocked = false;
                for (k = i; k < n && v[k].revision == v[i].revision; k++)
                        if (v[k].put && v[k].put->error_revision == v[k].put->revision &&
                            now < v[k].put->retry_usec) {
                                blocked = true;
                                retry = MIN(retry, v[k].put->retry_usec);
                        }
                if (v[i].revision == f->failed_revision && now < f->failed_retry_usec) {
                        blocked = true;
                        retry = MIN(retry, f->failed_retry_usec);
                }
                if (blocked)
                        continue;
                if (group_take(f, v + i, k - i, v[i].revision) < 0 ||
                    (r = fetch_object(f, v + i, k - i)) < 0) {
                        group_clear(f);
                        disconnect(f, "out of memory");
                        return;
                }
                if (r > 0)
                        return; /* an object first */
                _cleanup_free_ FleetPolicyChange *changes = calloc(k - i, sizeof(FleetPolicyChange));
                if (!changes) {
                        group_clear(f);
                        disconnect(f, "out of memory");
                        return;
                }
                for (size_t j = i; j < k; j++)
                        changes[j - i] = (FleetPolicyChange){ .name = v[j].name,
                                                              .body = v[j].put ? v[j].put->fp.policy : NULL,
                                                              .revision = v[j].revision };
                daemon_fleet_policies_change(f->m, changes, k - i, on_group_done, f);
                return;
        }
        if (retry != UINT64_MAX)
                converge_after(f, retry - now);
        /* Everything etcd had at this revision is applied (or failed, and said so). */
        Error e = ERROR_NULL;
        if (daemon_fleet_applied(f->m, f->revision, &e) < 0) {
                log_error("fleet: %s", strna(e.message));
                error_done(&e);
        }
        publish_record(f);
        publish_status(f); /* now: what converged is said at once; interface changes are batched */
        own_keys_check(f);
}

static int on_kick(sd_event_source *s, void *userdata) {
        (void) s;
        converge(userdata);
        return 0;
}

/* From the loop, never from inside the daemon's callback that answered. */
static void converge_later(Fleet *f) {
        if (!f->kick && sd_event_add_defer(f->event, &f->kick, on_kick, f) < 0)
                return;
        (void) sd_event_source_set_enabled(f->kick, SD_EVENT_ONESHOT);
}

static int on_converge_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        (void) s, (void) usec;
        converge(userdata);
        return 0;
}

static void converge_after(Fleet *f, uint64_t usec) {
        uint64_t now;

        (void) sd_event_now(f->event, CLOCK_MONOTONIC, &now);
        if (!f->converge_timer) {
                if (sd_event_add_time(f->event, &f->converge_timer, CLOCK_MONOTONIC, now + usec, 1000,
                                      on_converge_timer, f) < 0)
                        return;
        } else
                (void) sd_event_source_set_time(f->converge_timer, now + usec);
        (void) sd_event_source_set_enabled(f->converge_timer, SD_EVENT_ONESHOT);
}

/* ---- status: this node's of each policy that selects it ---- */

static const char *hook_names[] = { "ingress", "egress" };

static json_t *policy_status(Fleet *f, const Wanted *w) {
        Policy *p = daemon_policy_get(f->m, w->name);
        bool applied_here = p && p->fleet_revision == w->revision;
        json_t *j = json_object(), *ifaces = json_array();
        const char *state = "applied";
        bool any_failed = false, any_pending = false, any_applied = false, any_overridden = false;
        Iface **v = NULL;
        size_t n = applied_here ? daemon_policy_ifaces(f->m, p, &v) : 0;

        for (size_t i = 0; i < n; i++) {
                const Iface *it = v[i];
                json_t *ji = json_object();
                IfaceState st = iface_state(it);
                json_object_set_new(ji, "ifname", json_string(iface_ifname(it)));
                if (iface_netns(it))
                        json_object_set_new(ji, "netns", json_string(iface_netns(it)));
                json_object_set_new(ji, "state", json_string(iface_state_to_string(st)));
                if (st == IFACE_FAILED && iface_error(it)->message)
                        json_object_set_new(ji, "error", json_string(iface_error(it)->message));
                any_failed = any_failed || st == IFACE_FAILED;
                any_pending = any_pending || st == IFACE_PENDING;
                for (Direction dir = 0; dir < _DIRECTION_MAX; dir++) {
                        const char *by = NULL, *s = iface_policy_state(it, p, dir, &by);
                        char key[32];
                        if (!s)
                                continue;
                        json_object_set_new(ji, hook_names[dir], json_string(s));
                        if (by) {
                                snprintf(key, sizeof(key), "%s_by", hook_names[dir]);
                                json_object_set_new(ji, key, json_string(by));
                        }
                        any_applied = any_applied || streq(s, "applied");
                        any_overridden = any_overridden || !streq(s, "applied");
                }
                json_array_append_new(ifaces, ji);
        }
        free(v);
        if (w->error && w->error_revision == w->revision)
                state = "failed";
        else if (!applied_here)
                state = "pending";
        else if (any_failed)
                state = "failed";
        else if (any_pending)
                state = "pending";
        else if (any_overridden && !any_applied)
                state = "overridden";
        json_object_set_new(j, "node", json_string(f->node));
        json_object_set_new(j, "policy", json_string(w->name));
        json_object_set_new(j, "revision", json_integer((json_int_t) w->revision));
        json_object_set_new(j, "applied_revision",
                            p && p->fleet_revision ? json_integer((json_int_t) p->fleet_revision)
                                                   : json_null());
        json_object_set_new(j, "state", json_string(state));
        if (w->error && w->error_revision == w->revision)
                json_object_set_new(j, "error", json_string(w->error));
        json_object_set_new(j, "interfaces", ifaces);
        return j;
}

static ssize_t published_index(Fleet *f, const char *name) {
        for (size_t i = 0; i < f->n_published; i++)
                if (streq(f->published_names[i], name))
                        return (ssize_t) i;
        return -1;
}

static void published_clear(Fleet *f) {
        for (size_t i = 0; i < f->n_published; i++) {
                free(f->published_names[i]);
                free(f->published_texts[i]);
        }
        free(f->published_names);
        free(f->published_texts);
        free(f->published_writes);
        f->published_names = f->published_texts = NULL;
        f->published_writes = NULL;
        f->n_published = 0;
}

static int status_put(Fleet *f, size_t k);

/* A status put answered (userdata: its policy's name): a failure is the connection's. */
static void on_status_written(Fleet *f, json_t *answer, const Error *e, void *userdata) {
        _cleanup_free_ char *name = userdata;
        ssize_t k = published_index(f, name);

        if (e) {
                disconnect(f, "%s", e->message);
                return;
        }
        if (k >= 0 && own_write_answered(&f->published_writes[k], etcd_answer_revision(answer))) {
                log_warning(
                        "fleet: status of %s was changed by another writer while it was written; written "
                        "again",
                        name);
                daemon_fleet(f->m)->foreign_keys++;
                (void) status_put(f, (size_t) k);
        }
}

/* Puts the status text of published entry k under the lease. */
static int status_put(Fleet *f, size_t k) {
        _cleanup_free_ char *key = fleet_key(f->prefix, "status", f->node, f->published_names[k]);
        char *name = strdup(f->published_names[k]);
        const char *text = f->published_texts[k];

        if (!key || !name ||
            call(f, "/v3/kv/put", etcd_put_body(key, text, strlen(text), f->lease), on_status_written,
                 name) < 0) {
                free(name);
                return -ENOMEM;
        }
        f->published_writes[k].inflight++;
        return 0;
}

/* A new entry of the published set (taking text), or -ENOMEM. */
static ssize_t published_add(Fleet *f, const char *name, char *text) {
        char **names = realloc(f->published_names, (f->n_published + 1) * sizeof(char *));
        if (names)
                f->published_names = names;
        char **texts = realloc(f->published_texts, (f->n_published + 1) * sizeof(char *));
        if (texts)
                f->published_texts = texts;
        OwnWrite *writes = realloc(f->published_writes, (f->n_published + 1) * sizeof(OwnWrite));
        if (writes)
                f->published_writes = writes;
        if (!names || !texts || !writes || !(names[f->n_published] = strdup(name)))
                return -ENOMEM;
        texts[f->n_published] = text;
        writes[f->n_published] = (OwnWrite){ 0 };
        return (ssize_t) f->n_published++;
}

static void publish_status(Fleet *f) {
        if (f->state != FLEET_WATCHING || !f->lease)
                return;
        for (size_t i = 0; i < f->n_wanted; i++) {
                const Wanted *w = &f->wanted[i];
                if (!w->selected)
                        continue;
                json_t *j = policy_status(f, w);
                char *text = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
                json_decref(j);
                if (!text)
                        continue;
                ssize_t k = published_index(f, w->name);
                if (k >= 0 && streq(f->published_texts[k], text)) {
                        free(text);
                        continue;
                }
                if (k >= 0) {
                        free(f->published_texts[k]);
                        f->published_texts[k] = text;
                } else if ((k = published_add(f, w->name, text)) < 0) {
                        free(text);
                        continue;
                }
                (void) status_put(f, (size_t) k);
        }
        /* a policy gone, or no longer this node's: its status goes */
        for (size_t i = 0; i < f->n_published;) {
                const Wanted *w = wanted_find(f, f->published_names[i]);
                if (w && w->selected) {
                        i++;
                        continue;
                }
                _cleanup_free_ char *key = fleet_key(f->prefix, "status", f->node, f->published_names[i]);
                if (key)
                        (void) call(f, "/v3/kv/deleterange", etcd_delete_body(key, false), on_written, NULL);
                free(f->published_names[i]);
                free(f->published_texts[i]);
                f->published_names[i] = f->published_names[f->n_published - 1];
                f->published_texts[i] = f->published_texts[f->n_published - 1];
                f->published_writes[i] = f->published_writes[f->n_published - 1];
                f->n_published--;
        }
}

/* ---- this node's own keys, written again when another writer changes or deletes them ---- */

static void publish_record(Fleet *f);

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
                log_warning("fleet: %s is not this node's (no status of a policy it holds); deleted",
                            kv->key);
                daemon_fleet(f->m)->foreign_keys++;
                (void) call(f, "/v3/kv/deleterange", etcd_delete_body(kv->key, false), on_written, NULL);
                return;
        }
        if (!own_write_foreign(&f->published_writes[k], kv->mod_revision))
                return;
        log_warning("fleet: %s was %s by another writer; written again", kv->key,
                    deleted                 ? "deleted"
                    : kv->lease != f->lease ? "put without this node's lease"
                                            : "changed");
        daemon_fleet(f->m)->foreign_keys++;
        (void) status_put(f, (size_t) k);
}

static void own_record_seen(Fleet *f, const EtcdKv *kv, bool deleted) {
        if (!f->record || !own_write_foreign(&f->record_write, kv->mod_revision))
                return;
        log_warning("fleet: %s was %s by another writer; written again", kv->key,
                    deleted                 ? "deleted"
                    : kv->lease != f->lease ? "put without this node's lease"
                                            : "changed");
        daemon_fleet(f->m)->foreign_keys++;
        free(f->record);
        f->record = NULL;
        publish_record(f);
}

static void own_key_seen(Fleet *f, const EtcdKv *kv, bool deleted) {
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

static void on_own_keys(Fleet *f, json_t *answer, const Error *e, void *userdata) {
        EtcdKv *kvs = NULL;
        size_t n = 0;

        (void) userdata;
        if (e) {
                disconnect(f, "%s", e->message);
                return;
        }
        if (etcd_range_parse(answer, &kvs, &n, NULL, NULL) < 0)
                return;
        for (size_t i = 0; i < n; i++)
                own_key_seen(f, &kvs[i], false);
        etcd_kvs_free(kvs, n);
}

/* Once a connection has published: what is under status/NODE/ that this node did not write (a status
 * written while it was away, or by someone else) goes; later changes come by the watch. */
static void own_keys_check(Fleet *f) {
        _cleanup_free_ char *status = fleet_key(f->prefix, "status", f->node, "");

        if (f->own_checked || f->state != FLEET_WATCHING || !f->lease || !status)
                return;
        f->own_checked = true;
        call_or_disconnect(f, "/v3/kv/range", etcd_range_body(status, true), on_own_keys, NULL);
}

static int on_status_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        (void) s, (void) usec;
        publish_status(userdata);
        return 0;
}

static void status_later(Fleet *f) {
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

static void on_daemon_change(Manager *m, Iface *it, unsigned changes, void *userdata) {
        Fleet *f = userdata;

        (void) m, (void) it, (void) changes;
        if (f->state == FLEET_WATCHING)
                status_later(f);
}

/* ---- the node's record ---- */

static void publish_record(Fleet *f);

static void on_record_written(Fleet *f, json_t *answer, const Error *e, void *userdata) {
        (void) userdata;
        if (e) {
                disconnect(f, "%s", e->message);
                return;
        }
        if (own_write_answered(&f->record_write, etcd_answer_revision(answer))) {
                log_warning("fleet: the node's record was changed by another writer while it was written; "
                            "written again");
                daemon_fleet(f->m)->foreign_keys++;
                free(f->record);
                f->record = NULL;
                publish_record(f);
        }
}

static void publish_record(Fleet *f) {
        DaemonFleet *df = daemon_fleet(f->m);
        json_t *j;
        char *text;

        if (f->state == FLEET_IDLE || !f->lease)
                return;
        j = json_pack("{s:s,s:o,s:s,s:s,s:b,s:b,s:I}", "node", f->node, "labels",
                      fleet_labels_to_json(f->labels, f->n_labels), "version", PROJECT_VERSION, "kernel",
                      daemon_kernel_release(f->m), "act_bpf", daemon_has_act_bpf(f->m), "tcx",
                      daemon_has_tcx(f->m), "revision", (json_int_t) df->revision);
        text = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        json_decref(j);
        if (!text || (f->record && streq(f->record, text))) {
                free(text);
                return;
        }
        _cleanup_free_ char *key = fleet_key(f->prefix, "nodes", f->node, NULL);
        if (!key || call(f, "/v3/kv/put", etcd_put_body(key, text, strlen(text), f->lease),
                         on_record_written, NULL) < 0) {
                free(text);
                return;
        }
        f->record_write.inflight++;
        free(f->record);
        f->record = text;
}

/* ---- the connection: lease, record, list, watch; keepalive; reconnect ---- */

static void stop_watch(Fleet *f) {
        if (f->watch) {
                curl_loop_remove(f->loop, f->watch);
                curl_api.easy_cleanup(f->watch);
                f->watch = NULL;
        }
        curl_api.slist_free_all(f->watch_headers);
        f->watch_headers = NULL;
        free(f->watch_body);
        f->watch_body = NULL;
        free(f->watch_buf.data);
        f->watch_buf = (EtcdBuffer){ 0 };
}

static void connect_etcd(Fleet *f);
static void list(Fleet *f);

static int on_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        (void) s, (void) usec;
        connect_etcd(userdata);
        return 0;
}

static void disconnect(Fleet *f, const char *fmt, ...) {
        DaemonFleet *df = daemon_fleet(f->m);
        va_list ap;
        uint64_t now;

        va_start(ap, fmt);
        vsnprintf(df->last_error, sizeof(df->last_error), fmt, ap);
        va_end(ap);
        f->backoff_usec = f->backoff_usec ? MIN(f->backoff_usec * 2, BACKOFF_MAX_USEC) : BACKOFF_MIN_USEC;
        /* from half to all of the backoff: after an outage, a fleet's nodes do not come back at once */
        uint64_t delay = f->backoff_usec / 2 + (uint64_t) random() % (f->backoff_usec / 2 + 1);
        if (f->state != FLEET_IDLE)
                log_warning("fleet: %s; the policies applied stay, reconnecting in %" PRIu64 " ms",
                            df->last_error, delay / 1000);
        f->state = FLEET_IDLE;
        df->connected = false;
        f->lease = 0;
        free(f->record);
        f->record = NULL;
        f->record_write = (OwnWrite){ 0 };
        f->own_checked = false;
        published_clear(f);
        stop_watch(f);
        while (f->calls) {
                Call *c = f->calls;
                f->calls = c->next;
                if (c->done == on_object_fetched) {
                        free(c->userdata);
                        group_clear(f);
                }
                if (c->done == on_status_written)
                        free(c->userdata);
                call_free(c);
        }
        (void) sd_event_source_set_enabled(f->keepalive, SD_EVENT_OFF);
        f->url = (f->url + 1) % f->n_urls;
        (void) sd_event_now(f->event, CLOCK_MONOTONIC, &now);
        if (!f->retry)
                (void) sd_event_add_time(f->event, &f->retry, CLOCK_MONOTONIC, now + delay, 1000, on_retry,
                                         f);
        else {
                (void) sd_event_source_set_time(f->retry, now + delay);
                (void) sd_event_source_set_enabled(f->retry, SD_EVENT_ONESHOT);
        }
}

static void on_keepalive_answer(Fleet *f, json_t *answer, const Error *e, void *userdata) {
        json_t *result = json_object_get(answer, "result");
        json_t *ttl = json_object_get(result ?: answer, "TTL");

        (void) userdata;
        if (e)
                disconnect(f, "%s", e->message);
        else if (!ttl || (json_is_string(ttl) && atoll(json_string_value(ttl)) <= 0))
                disconnect(f, "the lease %" PRIu64 " expired", f->lease);
}

static int on_keepalive(sd_event_source *s, uint64_t usec, void *userdata) {
        Fleet *f = userdata;
        char id[32];

        snprintf(id, sizeof(id), "%" PRIu64, f->lease);
        call_or_disconnect(f, "/v3/lease/keepalive", json_pack("{s:s}", "ID", id), on_keepalive_answer,
                           NULL);
        (void) sd_event_source_set_time(s, usec + f->ttl * 1000000ULL / 3);
        (void) sd_event_source_set_enabled(s, SD_EVENT_ON);
        return 0;
}

static void apply_watch_message(Fleet *f, json_t *j) {
        EtcdWatchMessage msg = { 0 };
        Error e = ERROR_NULL;

        if (etcd_watch_parse(j, &msg, &e) < 0) {
                disconnect(f, "%s", e.message);
                error_done(&e);
                return;
        }
        if (msg.compact_revision > 0 || msg.canceled) {
                log_warning("fleet: the watch from revision %" PRIu64
                            " fell behind a compaction (revision %" PRIu64 "); listing again",
                            f->revision + 1, msg.compact_revision);
                etcd_watch_message_done(&msg);
                stop_watch(f);
                list(f);
                return;
        }
        if (msg.created) {
                daemon_fleet(f->m)->connected = true;
                daemon_fleet(f->m)->last_error[0] = 0;
                f->backoff_usec = 0;
        }
        if (msg.watch_id == WATCH_RECORD || msg.watch_id == WATCH_STATUS) {
                /* this node's own keys: they do not move the policies' revision on */
                for (size_t i = 0; i < msg.n_events; i++)
                        own_key_seen(f, &msg.events[i], msg.deleted[i]);
                etcd_watch_message_done(&msg);
                return;
        }
        /* The events of one message are one etcd revision (a transaction's): taken together. */
        for (size_t i = 0; i < msg.n_events; i++) {
                const char *name = policy_name_of(f, &msg.events[i]);
                if (!name)
                        continue;
                if (msg.deleted[i])
                        wanted_gone(f, name, msg.events[i].mod_revision);
                else if (wanted_set(f, &msg.events[i]) < 0) {
                        etcd_watch_message_done(&msg);
                        disconnect(f, "out of memory");
                        return;
                }
        }
        /* What this node has seen all of: an event's revision, or a progress notification's (sent to a
         * watch that has caught up). A created answer's header is etcd's revision, not the watch's. */
        uint64_t seen = 0;
        for (size_t i = 0; i < msg.n_events; i++)
                seen = MAX(seen, msg.events[i].mod_revision);
        if (msg.n_events == 0 && !msg.created)
                seen = msg.revision;
        if (seen > f->revision)
                f->revision = seen;
        daemon_fleet(f->m)->seen_revision = f->revision;
        etcd_watch_message_done(&msg);
        converge_later(f);
        status_later(f);
}

/* The stream's complete lines, one JSON message each, taken from the loop (a message may stop the watch,
 * which libcurl does not allow from inside its own callback). */
static int on_watch_lines(sd_event_source *s, void *userdata) {
        Fleet *f = userdata;
        char *nl;

        (void) s;
        while (f->watch && f->watch_buf.data && (nl = memchr(f->watch_buf.data, '\n', f->watch_buf.size))) {
                size_t line = (size_t) (nl - f->watch_buf.data);
                json_error_t jerr;
                json_t *j = json_loadb(f->watch_buf.data, line, 0, &jerr);
                memmove(f->watch_buf.data, nl + 1, f->watch_buf.size - line - 1);
                f->watch_buf.size -= line + 1;
                f->watch_buf.data[f->watch_buf.size] = 0;
                if (!j)
                        continue;
                apply_watch_message(f, j);
                json_decref(j);
        }
        return 0;
}

static size_t on_watch_data(char *p, size_t size, size_t n, void *userdata) {
        Fleet *f = userdata;
        size_t add = size * n;

        if (on_write(p, size, n, &f->watch_buf) != add)
                return 0;
        if (memchr(p, '\n', add)) {
                if (!f->watch_lines && sd_event_add_defer(f->event, &f->watch_lines, on_watch_lines, f) < 0)
                        return 0;
                (void) sd_event_source_set_enabled(f->watch_lines, SD_EVENT_ONESHOT);
        }
        return add;
}

static void on_watch_end(CurlLoop *l, CURL *easy, CURLcode result, void *userdata) {
        Fleet *f = userdata;

        (void) l, (void) easy;
        char why[128];
        disconnect(f, "the watch ended: %s",
                   result == CURLE_OK ? "etcd closed it"
                                      : etcd_transfer_error(&f->watch_buf, curl_api.easy_strerror(result),
                                                            why, sizeof(why)));
}

/* One stream, three watches (one JSON text each): the policies, this node's record, its status keys. */
static char *watch_body(Fleet *f) {
        _cleanup_free_ char *policies = fleet_key(f->prefix, "policies", NULL, NULL),
                            *record = fleet_key(f->prefix, "nodes", f->node, NULL),
                            *status = fleet_key(f->prefix, "status", f->node, "");
        json_t *v[3] = { policies ? etcd_watch_body(policies, true, f->revision + 1, WATCH_POLICIES) : NULL,
                         record ? etcd_watch_body(record, false, f->revision + 1, WATCH_RECORD) : NULL,
                         status ? etcd_watch_body(status, true, f->revision + 1, WATCH_STATUS) : NULL };
        char *t[3] = { NULL }, *out = NULL;

        for (size_t i = 0; i < 3; i++)
                t[i] = v[i] ? json_dumps(v[i], JSON_COMPACT) : NULL;
        if (t[0] && t[1] && t[2] && asprintf(&out, "%s\n%s\n%s\n", t[0], t[1], t[2]) < 0)
                out = NULL;
        for (size_t i = 0; i < 3; i++) {
                json_decref(v[i]);
                free(t[i]);
        }
        return out;
}

static void start_watch(Fleet *f) {
        stop_watch(f);
        f->watch_body = watch_body(f);
        if (!f->watch_body || !(f->watch = easy_new(f, "/v3/watch", f->watch_body, &f->watch_headers))) {
                disconnect(f, "out of memory");
                return;
        }
        curl_api.easy_setopt(f->watch, CURLOPT_WRITEFUNCTION, on_watch_data);
        curl_api.easy_setopt(f->watch, CURLOPT_WRITEDATA, f);
        /* A stream: no overall timeout; TCP keepalive finds a dead peer. */
        curl_api.easy_setopt(f->watch, CURLOPT_TCP_KEEPALIVE, 1L);
        curl_api.easy_setopt(f->watch, CURLOPT_TCP_KEEPIDLE, 5L);
        curl_api.easy_setopt(f->watch, CURLOPT_TCP_KEEPINTVL, 2L);
        if (curl_loop_add(f->loop, f->watch, on_watch_end, f) < 0)
                disconnect(f, "out of memory");
}

static void on_listed(Fleet *f, json_t *answer, const Error *e, void *userdata) {
        EtcdKv *kvs = NULL;
        size_t n = 0;
        uint64_t revision = 0;
        Error e2 = ERROR_NULL;

        (void) userdata;
        if (e) {
                disconnect(f, "%s", e->message);
                return;
        }
        if (etcd_range_parse(answer, &kvs, &n, &revision, &e2) < 0) {
                disconnect(f, "%s", e2.message);
                error_done(&e2);
                return;
        }
        /* What failed before is tried again against this snapshot. */
        wanted_clear(f);
        for (size_t i = 0; i < n; i++)
                if (wanted_set(f, &kvs[i]) < 0) {
                        etcd_kvs_free(kvs, n);
                        disconnect(f, "out of memory");
                        return;
                }
        etcd_kvs_free(kvs, n);
        f->revision = revision;
        f->listed = true;
        f->state = FLEET_WATCHING;
        daemon_fleet(f->m)->seen_revision = revision;
        log_info("fleet: %zu fleet policies at revision %" PRIu64 " (%s)", f->n_wanted, revision,
                 f->urls[f->url]);
        start_watch(f);
        converge_later(f);
        status_later(f);
}

static void list(Fleet *f) {
        _cleanup_free_ char *prefix = fleet_key(f->prefix, "policies", NULL, NULL);

        if (!prefix) {
                disconnect(f, "out of memory");
                return;
        }
        call_or_disconnect(f, "/v3/kv/range", etcd_range_body(prefix, true), on_listed, NULL);
}

static void on_granted(Fleet *f, json_t *answer, const Error *e, void *userdata) {
        json_t *id = json_object_get(answer, "ID");
        uint64_t now;

        (void) userdata;
        if (e) {
                disconnect(f, "%s", e->message);
                return;
        }
        f->lease = json_is_string(id) ? strtoull(json_string_value(id), NULL, 10) : 0;
        if (!f->lease) {
                disconnect(f, "etcd granted no lease");
                return;
        }
        publish_record(f);
        status_later(f);
        (void) sd_event_now(f->event, CLOCK_MONOTONIC, &now);
        if (!f->keepalive)
                (void) sd_event_add_time(f->event, &f->keepalive, CLOCK_MONOTONIC,
                                         now + f->ttl * 1000000ULL / 3, 0, on_keepalive, f);
        else {
                (void) sd_event_source_set_time(f->keepalive, now + f->ttl * 1000000ULL / 3);
                (void) sd_event_source_set_enabled(f->keepalive, SD_EVENT_ON);
        }
        /* After a lost connection the watch resumes where it was (a compaction since: listed again). */
        if (f->listed) {
                f->state = FLEET_WATCHING;
                start_watch(f);
        } else
                list(f);
}

static void connect_etcd(Fleet *f) {
        DaemonFleet *df = daemon_fleet(f->m);

        if (f->state != FLEET_IDLE)
                return;
        f->state = FLEET_CONNECTING;
        df->reconnects += f->listed || df->last_error[0];
        snprintf(df->endpoint, sizeof(df->endpoint), "%s", f->urls[f->url]);
        call_or_disconnect(f, "/v3/lease/grant", json_pack("{s:I}", "TTL", (json_int_t) f->ttl), on_granted,
                           NULL);
}

/* ---- set-up ---- */

int fleet_new(Manager *m, sd_event *event, const FleetConfig *c, Fleet **ret, Error *reterr) {
        _cleanup_(fleet_freep) Fleet *f = calloc(1, sizeof(*f));
        char host[256];

        if (!f)
                return error_set(reterr, ENOMEM, "internal_error", "out of memory");
        f->m = m;
        f->event = sd_event_ref(event);
        f->n_urls = etcd_urls_split(c->urls, &f->urls);
        if (f->n_urls == 0)
                return error_set(reterr, EINVAL, "invalid_value", "--fleet: expected URL[,URL…]");
        for (size_t i = 0; i < f->n_urls; i++)
                if (strncmp(f->urls[i], "http://", 7) != 0 && strncmp(f->urls[i], "https://", 8) != 0)
                        return error_set(reterr, EINVAL, "invalid_value",
                                         "--fleet %s: expected http://HOST:PORT or https://HOST:PORT",
                                         f->urls[i]);
        if (c->prefix && !fleet_prefix_valid(c->prefix))
                return error_set(reterr, EINVAL, "invalid_value",
                                 "--fleet-prefix %s: expected a path that starts and ends with \"/\"",
                                 c->prefix);
        if (!c->node && gethostname(host, sizeof(host)) < 0)
                return error_set(reterr, errno, "internal_error", "cannot read the host name: %m");
        host[sizeof(host) - 1] = 0;
        if (!c->node) {
                char *dot = strchr(host, '.');
                if (dot)
                        *dot = 0;
        }
        if (!fleet_node_name_valid(c->node ?: host))
                return error_set(reterr, EINVAL, "invalid_value",
                                 "--node %s: 1 to %d characters of A-Z a-z 0-9 - _ . (give --node)",
                                 c->node ?: host, FLEET_NODE_NAME_MAX);
        if (fleet_labels_parse(c->labels, &f->labels, &f->n_labels, reterr) < 0)
                return -EINVAL;
        if (!(f->prefix = strdup(c->prefix ?: ETCD_PREFIX_DEFAULT)) ||
            !(f->node = strdup(c->node ?: host)) || (c->tls.ca && !(f->tls.ca = strdup(c->tls.ca))) ||
            (c->tls.cert && !(f->tls.cert = strdup(c->tls.cert))) ||
            (c->tls.key && !(f->tls.key = strdup(c->tls.key))))
                return error_set(reterr, ENOMEM, "internal_error", "out of memory");
        f->ttl = c->lease_ttl ?: FLEET_LEASE_TTL_DEFAULT;
        srandom((unsigned) (getpid() ^ (uintptr_t) f ^ (uint64_t) time(NULL)));
        if (etcd_dl_load(reterr) < 0)
                return -ENOENT;
        if (curl_loop_new(event, &f->loop) < 0 || daemon_add_change_listener(m, on_daemon_change, f) < 0)
                return error_set(reterr, ENOMEM, "internal_error", "cannot set up libcurl");
        DaemonFleet *df = daemon_fleet(m);
        df->enabled = true;
        snprintf(df->node, sizeof(df->node), "%s", f->node);
        *ret = TAKE_PTR(f);
        return 0;
}

void fleet_start(Fleet *f) {
        log_info("fleet: node %s, %zu label(s), etcd %s, prefix %s", f->node, f->n_labels, f->urls[0],
                 f->prefix);
        connect_etcd(f);
}

Fleet *fleet_free(Fleet *f) {
        if (!f)
                return NULL;
        daemon_remove_change_listener(f->m, on_daemon_change, f);
        stop_watch(f);
        while (f->calls) {
                Call *c = f->calls;
                f->calls = c->next;
                if (c->done == on_object_fetched || c->done == on_status_written)
                        free(c->userdata);
                call_free(c);
        }
        curl_loop_free(f->loop);
        sd_event_source_disable_unref(f->retry);
        sd_event_source_disable_unref(f->keepalive);
        sd_event_source_disable_unref(f->kick);
        sd_event_source_disable_unref(f->status_timer);
        sd_event_source_disable_unref(f->watch_lines);
        sd_event_source_disable_unref(f->converge_timer);
        wanted_clear(f);
        published_clear(f);
        for (size_t i = 0; i < f->n_urls; i++)
                free(f->urls[i]);
        free(f->urls);
        free(f->prefix);
        free(f->node);
        free(f->labels);
        free((char *) f->tls.ca);
        free((char *) f->tls.cert);
        free((char *) f->tls.key);
        group_clear(f);
        free(f->record);
        sd_event_unref(f->event);
        free(f);
        return NULL;
}
