/* render.c: JSON for each resource, in one place, with a stable key order, so that REST answers (and
 * later D-Bus and clsctl --json) agree. */
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>

#include "api-internal.h"
#include "names.h"
#include "daemon-changes.h"
#include "daemon-objects.h"
#include "daemon-policies.h"
#include "nl-bpf.h"
#include "nl-worker.h"

json_t *json_text(const char *s) {
        json_t *j;

        if (!s)
                return NULL;
        j = json_string(s);
        if (!j) {
                _cleanup_free_ char *escaped = utf8_escape_invalid(s);
                j = escaped ? json_string(escaped) : NULL;
        }
        return j;
}

json_t *render_error(const Error *e) {
        json_t *err = json_object();

        json_object_set_new(err, "code", json_text(error_code_to_string(e->code ?: ERROR_INTERNAL_ERROR)));
        json_object_set_new(err, "message", json_text(e->message ? e->message : "unknown error"));
        if (e->detail)
                json_object_set_new(err, "detail", json_text(e->detail));
        return json_pack("{s:o}", "error", err);
}

json_t *render_version(Manager *d) {
        return json_pack("{s:s,s:s,s:s,s:s,s:s,s:b}", "version", PROJECT_VERSION, "kernel",
                         daemon_kernel_release(d), "libbpf", nl_libbpf_version(), "act_bpf",
                         daemon_has_act_bpf(d) ? "available" : "unavailable", "tcx",
                         daemon_has_tcx(d) ? "available" : "unavailable", "bpf_stats", daemon_bpf_stats(d));
}

json_t *render_object(Manager *d, const DaemonObject *o) {
        json_t *progs = json_array(), *maps = json_array(), *users = json_array();
        _cleanup_free_ const char **names = NULL;

        for (size_t i = 0; i < o->info->n_programs; i++) {
                const NlProgramInfo *p = &o->info->programs[i];
                /* What clsd can attach it as, and how it would load it (or why it cannot). */
                json_array_append_new(progs, json_pack("{s:s,s:s,s:s,s:b,s:b,s:s}", "name", p->name,
                                                       "section", p->section, "type", p->type, "classifier",
                                                       nl_program_tc_rank(p, NL_PROG_CLASSIFIER) >= 0,
                                                       "action", nl_program_tc_rank(p, NL_PROG_ACTION) >= 0,
                                                       "note", nl_program_tc_note(p)));
        }
        for (size_t i = 0; i < o->info->n_maps; i++) {
                const NlMapInfo *m = &o->info->maps[i];
                json_array_append_new(maps, json_pack("{s:s,s:s,s:I,s:I,s:I}", "name", m->name, "type",
                                                      m->type, "key_size", (json_int_t) m->key_size,
                                                      "value_size", (json_int_t) m->value_size,
                                                      "max_entries", (json_int_t) m->max_entries));
        }
        if (daemon_object_users(d, o->digest, &names) >= 0)
                for (size_t i = 0; names[i]; i++)
                        json_array_append_new(users, json_text(names[i]));
        return json_pack("{s:s,s:I,s:o,s:o,s:o}", "digest", o->digest, "size", (json_int_t) o->size,
                         "programs", progs, "maps", maps, "used_by", users);
}

static json_t *render_filter_status(const Filter *flt, const FilterStatus *st) {
        const FilterSpec *f = filter_spec(flt);
        const FilterObserved *s = &st->observed;
        json_t *j = json_object();
        const char *attach = filter_attach(flt);

        json_object_set_new(j, "name", json_text(f->name));
        json_object_set_new(j, "source", json_text(document_source_to_string(filter_source(flt))));
        json_object_set_new(j, "attached", json_boolean(s->attached));
        json_object_set_new(j, "pref", json_integer(f->priority));
        json_object_set_new(j, "handle", s->handle ? json_integer(s->handle) : json_null());
        json_object_set_new(j, "id", s->prog_id ? json_integer(s->prog_id) : json_null());
        json_object_set_new(j, "tag", s->tag[0] ? json_text(s->tag) : json_null());
        json_object_set_new(j, "run_count",
                            st->has_stats ? json_integer((json_int_t) st->run_count) : json_null());
        json_object_set_new(j, "run_time_ns",
                            st->has_stats ? json_integer((json_int_t) st->run_time_ns) : json_null());
        json_object_set_new(j, "program", json_text(f->program));
        json_object_set_new(j, "attach", json_text(attach));
        if (streq(attach, "tcx")) /* a link: its id (a filter's place is its handle) */
                json_object_set_new(j, "link_id", s->link_id ? json_integer(s->link_id) : json_null());
        if (f->n_actions > 0) {
                json_t *acts = json_array();
                for (size_t k = 0; k < f->n_actions; k++) {
                        const ActionObserved *a = &s->actions[k];
                        json_t *aj = json_object();
                        json_object_set_new(aj, "program", json_text(f->actions[k].program));
                        json_object_set_new(aj, "attached", json_boolean(a->attached));
                        json_object_set_new(aj, "index", a->index ? json_integer(a->index) : json_null());
                        json_object_set_new(aj, "id", a->prog_id ? json_integer(a->prog_id) : json_null());
                        json_object_set_new(aj, "tag", a->tag[0] ? json_text(a->tag) : json_null());
                        json_object_set_new(aj, "packets", json_integer((json_int_t) a->packets));
                        json_object_set_new(aj, "bytes", json_integer((json_int_t) a->bytes));
                        json_object_set_new(aj, "drops", json_integer((json_int_t) a->drops));
                        json_array_append_new(acts, aj);
                }
                json_object_set_new(j, "actions", acts);
        }
        return j;
}

/* The document the interface applies: on each hook, the hog's filters or the API's. */
json_t *render_iface_document(const Iface *it) {
        json_t *j = json_object();

        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++) {
                json_t *list = json_array();
                for (size_t i = 0; i < iface_filter_count(it); i++) {
                        const Filter *f = iface_filter_at(it, i);
                        if (filter_direction(f) == dir)
                                json_array_append_new(list, filter_spec_to_json(filter_spec(f)));
                }
                json_object_set_new(j, direction_to_string(dir), list);
        }
        return j;
}

json_t *render_iface(Manager *d, const Iface *it, const IfaceStatus *status) {
        json_t *j = json_object(), *st = json_object(), *overridden = json_array();
        const Document *api = iface_api_document(it);
        const Error *err = iface_error(it);

        (void) d;
        json_object_set_new(j, "ifname", json_text(iface_ifname(it)));
        json_object_set_new(j, "netns", iface_netns(it) ? json_text(iface_netns(it)) : json_null());
        json_object_set_new(j, "ifindex",
                            iface_ifindex(it) > 0 ? json_integer(iface_ifindex(it)) : json_null());
        json_object_set_new(j, "state", json_text(iface_state_to_string(iface_state(it))));
        json_object_set_new(j, "source", json_text(document_source_to_string(iface_source(it))));
        json_object_set_new(j, "hog", iface_hog_path(it) ? json_text(iface_hog_path(it)) : json_null());
        /* The hooks where the hog wins and the API's filters wait for it to go. */
        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++)
                if (iface_overridden(it, dir))
                        json_array_append_new(overridden, json_text(direction_to_string(dir)));
        json_object_set_new(j, "overridden", overridden);
        json_t *policies = json_array();
        for (size_t i = 0; i < iface_policy_count(it); i++)
                json_array_append_new(policies, json_text(iface_policy_at(it, i)->name));
        json_object_set_new(j, "policies", policies);
        json_object_set_new(j, "generation", api ? json_integer((json_int_t) api->generation) : json_null());
        json_object_set_new(j, "document", render_iface_document(it));
        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++) {
                json_t *list = json_array();
                for (size_t i = 0; i < iface_filter_count(it); i++) {
                        const Filter *f = iface_filter_at(it, i);
                        if (filter_direction(f) == dir && i < status->n_filters)
                                json_array_append_new(list, render_filter_status(f, &status->filters[i]));
                }
                json_object_set_new(st, direction_to_string(dir), list);
        }
        json_object_set_new(j, "status", st);
        json_object_set_new(j, "repairs", json_integer(iface_repairs(it)));
        if (iface_last_repair_usec(it) > 0) {
                char when[64];
                time_t t = (time_t) (iface_last_repair_usec(it) / 1000000);
                struct tm tm;
                strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
                json_object_set_new(
                        j, "last_repair",
                        json_pack("{s:s,s:s}", "time", when, "what", iface_last_repair_what(it)));
        } else
                json_object_set_new(j, "last_repair", json_null());
        if (err)
                json_object_set_new(j, "error",
                                    json_pack("{s:s,s:s}", "code", error_code_to_string(err->code),
                                              "message", strna(err->message)));
        return j;
}

static void write_kernel_filter(JsonWriter *w, const NlFilter *f) {
        char buf[16];

        jw_begin_object(w);
        jw_key(w, "direction");
        jw_string(w, f->hook == NL_HOOK_INGRESS ? "ingress" : "egress");
        jw_key(w, "pref");
        jw_int(w, f->pref);
        jw_key(w, "handle");
        jw_int(w, f->handle);
        jw_key(w, "kind");
        jw_string(w, f->kind);
        if (streq(f->kind, "bpf")) {
                jw_key(w, "name");
                jw_string(w, f->name);
                jw_key(w, "id");
                jw_int(w, f->prog_id);
                jw_key(w, "tag");
                jw_string(w, f->tag);
                jw_key(w, "direct_action");
                jw_bool(w, f->direct_action);
                if (f->classid) {
                        classid_format(f->classid, buf);
                        jw_key(w, "classid");
                        jw_string(w, buf);
                }
                if (f->n_actions > 0) {
                        jw_key(w, "actions");
                        jw_begin_array(w);
                        for (size_t k = 0; k < f->n_actions; k++) {
                                const NlAction *a = &f->actions[k];
                                jw_begin_object(w);
                                jw_key(w, "kind");
                                jw_string(w, a->kind);
                                jw_key(w, "index");
                                jw_int(w, a->index);
                                if (streq(a->kind, "bpf")) {
                                        jw_key(w, "name");
                                        jw_string(w, a->name);
                                        jw_key(w, "id");
                                        jw_int(w, a->prog_id);
                                        jw_key(w, "tag");
                                        jw_string(w, a->tag);
                                }
                                jw_end_object(w);
                        }
                        jw_end_array(w);
                }
        }
        jw_key(w, "owner");
        jw_string(w, f->clsd_owned ? "clsd" : "foreign");
        jw_end_object(w);
}

void write_link(JsonWriter *w, Manager *d, const char *netns, const LinkView *v) {
        const Iface *it = daemon_iface_get(d, netns, v->link.ifname);

        jw_begin_object(w);
        jw_key(w, "ifname");
        jw_string(w, v->link.ifname);
        jw_key(w, "ifindex");
        if (v->link.ifindex > 0)
                jw_int(w, v->link.ifindex);
        else
                jw_null(w);
        jw_key(w, "state");
        jw_string(w, it ? iface_state_to_string(iface_state(it)) : "unmanaged");
        if (it) {
                jw_key(w, "source");
                jw_string(w, document_source_to_string(iface_source(it)));
        }
        if (it && iface_api_document(it)) {
                jw_key(w, "generation");
                jw_int(w, (int64_t) iface_api_document(it)->generation);
        }
        jw_key(w, "filters");
        jw_begin_array(w);
        for (size_t i = 0; i < v->n_filters; i++)
                write_kernel_filter(w, &v->filters[i]);
        jw_end_array(w);
        jw_end_object(w);
}

json_t *render_dry_run(Manager *d, const DryRun *dr) {
        static const char *const loads[] = {
                [DRY_RUN_SHARED] = "shared",
                [DRY_RUN_ADOPT] = "adopt",
                [DRY_RUN_LOAD] = "load",
        };
        json_t *programs = json_array(), *steps = json_array();
        bool changed = dr->document_changed;

        (void) d;
        for (size_t i = 0; i < dr->n_programs; i++) {
                const DryRunProgram *p = &dr->programs[i];
                const ActionSpec *a = p->action >= 0 ? &p->filter->actions[p->action] : NULL;
                json_t *pj = json_pack("{s:s,s:s,s:s,s:s,s:s}", "filter", p->filter->name, "direction",
                                       direction_to_string(p->direction), "digest",
                                       a ? a->digest : p->filter->digest, "program",
                                       a ? a->program : p->filter->program, "load", loads[p->load]);
                if (a)
                        json_object_set_new(pj, "action", json_integer(p->action + 1));
                json_array_append_new(programs, pj);
        }
        for (size_t i = 0; i < dr->n_steps; i++) {
                const DryRunStep *s = &dr->steps[i];
                changed = changed || !streq(s->action, "keep");
                json_array_append_new(steps,
                                      json_pack("{s:s,s:s,s:i,s:s,s:s}", "action", s->action, "direction",
                                                direction_to_string(s->direction), "pref", (int) s->pref,
                                                "name", s->name, "reason", s->reason));
        }
        return json_pack("{s:s,s:b,s:s,s:b,s:I,s:o,s:o,s:o}", "ifname", dr->doc->ifname, "dry_run", 1,
                         "state", dr->pending ? "pending" : "present", "changed", changed, "generation",
                         (json_int_t) dr->doc->generation, "document", document_spec_to_json(dr->doc),
                         "programs", programs, "filters", steps);
}

json_t *render_netns_list(const NetnsView *v, size_t n) {
        json_t *list = json_array();

        for (size_t i = 0; i < n; i++)
                json_array_append_new(list, json_pack("{s:s,s:b,s:b,s:I}", "name", v[i].name, "present",
                                                      v[i].present, "followed", v[i].followed, "documents",
                                                      (json_int_t) v[i].documents));
        return json_pack("{s:o}", "netns", list);
}
