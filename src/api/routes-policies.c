/* routes-policies.c: /policies and /policies/{name}: one document for every interface that matches. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "api-internal.h"
#include "daemon-changes.h"
#include "daemon-policies.h"
#include "store-policy.h"

static const char *const hook_names[] = { "ingress", "egress" };

/* One interface the policy holds: its state, and what each hook the policy declares is to it. */
static json_t *render_policy_iface(const Iface *it, const Policy *p) {
        json_t *j = json_pack("{s:o,s:s,s:s}", "netns",
                              iface_netns(it) ? json_string(iface_netns(it)) : json_null(), "ifname",
                              iface_ifname(it), "state", iface_state_to_string(iface_state(it)));
        const Error *e = iface_error(it);
        const char *whose = NULL;
        PolicyIfaceState ps = iface_policy_outcome(it, p, &whose);

        json_object_set_new(j, "policy_state", json_string(policy_iface_state_to_string(ps)));
        if (whose)
                json_object_set_new(j, ps == POLICY_IFACE_CONFLICT ? "with" : "by", json_string(whose));
        if (e)
                json_object_set_new(j, "error",
                                    json_pack("{s:s,s:s}", "code", error_code_to_string(e->code), "message",
                                              strna(e->message)));
        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++) {
                const char *by = NULL, *st = iface_policy_state(it, p, dir, &by);
                if (!st)
                        continue;
                json_t *h = json_pack("{s:s}", "state", st);
                if (by)
                        json_object_set_new(h, streq(st, "conflict") ? "with" : "by", json_string(by));
                json_object_set_new(j, hook_names[dir], h);
        }
        return j;
}

json_t *render_policy(Manager *d, const Policy *p) {
        json_t *j = policy_to_json(p), *ifaces = json_array();
        Iface **v = NULL;
        size_t n = daemon_policy_ifaces(d, p, &v);
        size_t counts[_POLICY_IFACE_STATE_MAX] = { 0 };

        /* counted by what the policy is on each: a conflict or an override is not configured */
        for (size_t i = 0; i < n; i++) {
                const char *by;
                json_array_append_new(ifaces, render_policy_iface(v[i], p));
                counts[iface_policy_outcome(v[i], p, &by)]++;
        }
        free(v);
        json_object_set_new(j, "name", json_string(p->name));
        json_object_set_new(j, "hog", p->hog_path ? json_string(p->hog_path) : json_null());
        json_object_set_new(j, "fleet_revision",
                            p->fleet_revision ? json_integer((json_int_t) p->fleet_revision) : json_null());
        json_object_set_new(j, "generation", json_integer((json_int_t) p->generation));
        json_object_set_new(j, "summary",
                            json_pack("{s:I,s:I,s:I,s:I,s:I,s:I}", "matched", (json_int_t) n, "configured",
                                      (json_int_t) counts[POLICY_IFACE_CONFIGURED], "pending",
                                      (json_int_t) counts[POLICY_IFACE_PENDING], "failed",
                                      (json_int_t) counts[POLICY_IFACE_FAILED], "conflict",
                                      (json_int_t) counts[POLICY_IFACE_CONFLICT], "overridden",
                                      (json_int_t) counts[POLICY_IFACE_OVERRIDDEN]));
        json_object_set_new(j, "ifaces", ifaces);
        return j;
}

/* A dry run changes nothing if the policy is stored as it is and no interface would change. */
static bool policy_dry_run_changes(Manager *d, const PolicyOutcome *o, json_t *j) {
        static const char *const fields[] = { "match", "order", "ingress", "egress" };
        Policy *old = o->policy ? daemon_policy_get(d, o->policy->name) : NULL;
        json_t *was = old ? render_policy(d, old) : NULL;
        bool changed = !was;

        for (size_t i = 0; !changed && i < ELEMENTSOF(fields); i++)
                changed = !json_equal(json_object_get(was, fields[i]), json_object_get(j, fields[i]));
        json_decref(was);
        for (size_t i = 0; !changed && i < o->n_results; i++) {
                const PolicyResult *r = &o->results[i];
                changed = !r->matched || r->removed;
                for (size_t k = 0; !changed && r->dry_run.doc && k < r->dry_run.n_steps; k++)
                        changed = !streq(r->dry_run.steps[k].action, "keep");
        }
        return changed;
}

static json_t *render_outcome(Manager *d, const PolicyOutcome *o) {
        json_t *j = o->policy ? render_policy(d, o->policy) : json_object(), *results = json_array();

        for (size_t i = 0; i < o->n_results; i++) {
                const PolicyResult *r = &o->results[i];
                /* what the policy is (or would be) on it: a conflict is not configured */
                json_t *rj = json_pack("{s:o,s:s,s:b,s:s}", "netns",
                                       r->netns ? json_string(r->netns) : json_null(), "ifname", r->ifname,
                                       "matched", r->matched, "state",
                                       r->removed   ? "removed"
                                       : r->matched ? policy_iface_state_to_string(r->policy_state)
                                                    : iface_state_to_string(r->state));
                if (r->by && r->matched)
                        json_object_set_new(rj, r->policy_state == POLICY_IFACE_CONFLICT ? "with" : "by",
                                            json_string(r->by));
                if (r->error.code)
                        json_object_set_new(rj, "error",
                                            json_pack("{s:s,s:s}", "code",
                                                      error_code_to_string(r->error.code), "message",
                                                      strna(r->error.message)));
                if (o->dry_run && r->dry_run.doc) {
                        json_t *plan = render_dry_run(d, &r->dry_run);
                        /* the interface's plan: the policy is shown once, above */
                        json_object_del(plan, "ifname");
                        json_object_del(plan, "dry_run");
                        json_object_del(plan, "generation");
                        json_object_del(plan, "document");
                        json_object_del(plan, "changed");
                        json_object_set_new(rj, "plan", plan);
                }
                json_array_append_new(results, rj);
        }
        if (o->dry_run) {
                json_object_set_new(j, "dry_run", json_true());
                json_object_set_new(j, "changed", json_boolean(policy_dry_run_changes(d, o, j)));
                json_object_del(j, "ifaces");
                json_object_del(j, "summary");
        }
        json_object_set_new(j, "results", results);
        return j;
}

static void on_policy_done(Manager *d, const PolicyOutcome *o, const Error *e, void *userdata) {
        Request *req = userdata;

        if (e)
                response_error(&req->deferred, e);
        else if (!o->policy && !o->dry_run) {
                req->deferred.status = 200;
                req->deferred.body = render_outcome(d, o);
        } else {
                req->deferred.status = 200;
                req->deferred.body = render_outcome(d, o);
                if (!o->dry_run)
                        snprintf(req->deferred.etag, sizeof(req->deferred.etag), "\"%" PRIu64 "\"",
                                 o->policy->generation);
        }
        request_answer(req);
}

static void policy_put(Request *req, const char *name, Response *resp) {
        /* as a document's PUT: curl's default for --data too */
        static const char *const types[] = { "application/json", "application/x-www-form-urlencoded", NULL };
        json_t *body;
        bool dry_run;

        if (request_change_body(req, types, &body, &dry_run, resp) < 0)
                return;
        DaemonExpect expect = request_expect(req);
        req->deferring = true;
        daemon_policy_put(req->api->daemon, name, body, &expect, dry_run, on_policy_done, req);
        json_decref(body);
}

static void policies_list(Request *req, Response *resp) {
        Manager *d = req->api->daemon;
        json_t *list = json_array();

        for (size_t i = 0; i < daemon_policy_count(d); i++)
                json_array_append_new(list, render_policy(d, daemon_policy_at(d, i)));
        resp->status = 200;
        resp->body = json_pack("{s:o}", "policies", list);
}

void route_policies(Request *req, const char *rest, Response *resp) {
        Manager *d = req->api->daemon;
        const char *name, *sub;
        Policy *p;

        if (rest[0] == 0 || streq(rest, "/")) {
                if (streq(req->method, "GET") || streq(req->method, "HEAD"))
                        policies_list(req, resp);
                else
                        method_not_allowed(resp, req, "GET, HEAD");
                return;
        }
        name = rest + 1;
        if ((sub = strchr(name, '/'))) {
                /* /policies/{name}/maps[/{map}[/entries]] */
                const char *maps = startswith(sub, "/maps"), *slash;
                char pname[POLICY_NAME_MAX + 1], map[256];
                if (!maps || (size_t) (sub - name) >= sizeof(pname) || (maps[0] && maps[0] != '/')) {
                        response_errorf(resp, ERROR_ROUTE_NOT_FOUND, "no route /policies%s", rest);
                        return;
                }
                memcpy(pname, name, (size_t) (sub - name));
                pname[sub - name] = 0;
                if (maps[0] == 0 || streq(maps, "/")) {
                        route_policy_maps(req, pname, NULL, false, resp);
                        return;
                }
                slash = strchr(maps + 1, '/');
                if ((slash && !streq(slash, "/entries")) || slash == maps + 1 ||
                    (size_t) ((slash ?: maps + strlen(maps)) - maps - 1) >= sizeof(map)) {
                        response_errorf(resp, ERROR_ROUTE_NOT_FOUND, "no route /policies%s", rest);
                        return;
                }
                snprintf(map, sizeof(map), "%.*s", (int) ((slash ?: maps + strlen(maps)) - maps - 1),
                         maps + 1);
                route_policy_maps(req, pname, map, !!slash, resp);
                return;
        }
        if (!policy_name_valid(name)) {
                response_errorf(
                        resp, ERROR_INVALID_VALUE,
                        "\"%s\" is not a valid policy name (1 to %d characters of A-Z a-z 0-9 _ . -)", name,
                        POLICY_NAME_MAX);
                return;
        }
        if (streq(req->method, "PUT")) {
                policy_put(req, name, resp);
                return;
        }
        if (streq(req->method, "DELETE")) {
                DaemonExpect expect = request_expect(req);
                req->deferring = true;
                daemon_policy_delete(d, name, &expect, on_policy_done, req);
                return;
        }
        if (!streq(req->method, "GET") && !streq(req->method, "HEAD")) {
                method_not_allowed(resp, req, "GET, HEAD, PUT, DELETE");
                return;
        }
        p = daemon_policy_get(d, name);
        if (!p) {
                response_errorf(resp, ERROR_POLICY_NOT_FOUND, "no policy %s", name);
                return;
        }
        resp->status = 200;
        resp->body = render_policy(d, p);
        snprintf(resp->etag, sizeof(resp->etag), "\"%" PRIu64 "\"", p->generation);
}
