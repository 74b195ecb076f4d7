/* policy.c: policies, documents for every interface that matches: "match" (globs over interface names,
 * named namespaces and masters; link kinds), "order" (which policy holds a hook another one wants too),
 * and the usual "ingress" and "egress". Parsed strictly, like documents; kept under policies/. */
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fileio.h"
#include "names.h"
#include "store-internal.h"
#include "store-policy.h"

#define POLICY_FILE_MAX (4u * 1024 * 1024)

int policy_name_valid(const char *s) {
        return name_valid(s, POLICY_NAME_MAX);
}

Policy *policy_ref(Policy *p) {
        if (p)
                p->n_ref++;
        return p;
}

Policy *policy_unref(Policy *p) {
        if (!p || --p->n_ref > 0)
                return NULL;
        free(p->name);
        free(p->hog_path);
        strv_free_n(p->match.ifname, p->match.n_ifname);
        strv_free_n(p->match.netns, p->match.n_netns);
        strv_free_n(p->match.kind, p->match.n_kind);
        strv_free_n(p->match.master, p->match.n_master);
        document_unref(p->doc);
        free(p);
        return NULL;
}

/* A glob over names: printable, no '/', at most max characters; fnmatch(3) syntax (* ? [...]). */
static bool glob_valid(const char *s, size_t max) {
        size_t n = strlen(s);

        if (n == 0 || n > max)
                return false;
        for (const char *p = s; *p; p++)
                if (*p <= ' ' || *p > '~' || *p == '/')
                        return false;
        return true;
}

/* A link kind as the kernel names it (IFLA_INFO_KIND: veth, vlan, bond, bridge, …), or "physical" (a
 * device with no kind), or "loopback". */
static bool kind_valid(const char *s) {
        size_t n = strlen(s);

        if (n == 0 || n > 16)
                return false;
        for (const char *p = s; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '-'))
                        return false;
        return true;
}

static int parse_list(json_t *j, const char *path, bool (*valid)(const char *), const char *what,
                      char ***ret, size_t *ret_n, Error *reterr) {
        size_t i, n;
        json_t *v;
        char **list;

        if (!json_is_array(j))
                return error_set(reterr, EINVAL, ERROR_WRONG_TYPE, "%s: expected an array of strings", path);
        n = json_array_size(j);
        if (n == 0)
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE, "%s: at least one %s", path, what);
        if (n > POLICY_GLOBS_MAX)
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE, "%s: at most %d entries", path,
                                 POLICY_GLOBS_MAX);
        list = calloc(n + 1, sizeof(char *));
        if (!list)
                return error_oom(reterr);
        json_array_foreach (j, i, v) {
                int r = 0;
                if (!json_is_string(v))
                        r = error_set(reterr, EINVAL, ERROR_WRONG_TYPE, "%s[%zu]: expected a string", path,
                                      i);
                else if (!valid(json_string_value(v)))
                        r = error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                      "%s[%zu]: \"%s\" is not a valid %s", path, i, json_string_value(v),
                                      what);
                else if (!(list[i] = strdup(json_string_value(v))))
                        r = error_oom(reterr);
                if (r < 0) {
                        strv_free_n(list, i);
                        return r;
                }
        }
        *ret = list;
        *ret_n = n;
        return 0;
}

static bool ifname_glob_valid(const char *s) {
        return glob_valid(s, 64);
}

static bool netns_glob_valid(const char *s) {
        return glob_valid(s, NETNS_NAME_MAX * 2);
}

static int parse_match(json_t *j, PolicyMatch *m, Error *reterr) {
        const char *key;
        json_t *v;
        int r;

        if (!json_is_object(j))
                return error_set(reterr, EINVAL, ERROR_WRONG_TYPE, "match: expected an object");
        json_object_foreach (j, key, v)
                if (!streq(key, "ifname") && !streq(key, "netns") && !streq(key, "kind") &&
                    !streq(key, "master"))
                        return error_set(reterr, EINVAL, ERROR_UNKNOWN_FIELD, "match.%s: unknown field",
                                         key);
        v = json_object_get(j, "ifname");
        if (!v)
                return error_set(reterr, EINVAL, ERROR_MISSING_FIELD, "match.ifname: required");
        r = parse_list(v, "match.ifname", ifname_glob_valid, "interface name glob", &m->ifname, &m->n_ifname,
                       reterr);
        if (r < 0)
                return r;
        if ((v = json_object_get(j, "netns")) && !json_is_null(v)) {
                r = parse_list(v, "match.netns", netns_glob_valid, "namespace name glob", &m->netns,
                               &m->n_netns, reterr);
                if (r < 0)
                        return r;
        }
        if ((v = json_object_get(j, "kind")) && !json_is_null(v)) {
                r = parse_list(v, "match.kind", kind_valid,
                               "link kind (veth, vlan, bond, bridge, physical, …)", &m->kind, &m->n_kind,
                               reterr);
                if (r < 0)
                        return r;
        }
        if ((v = json_object_get(j, "master")) && !json_is_null(v)) {
                r = parse_list(v, "match.master", ifname_glob_valid, "interface name glob", &m->master,
                               &m->n_master, reterr);
                if (r < 0)
                        return r;
        }
        return 0;
}

int policy_from_json(const char *name, json_t *j, Policy **ret, Error *reterr) {
        _cleanup_(policy_unrefp) Policy *p = NULL;
        const char *key;
        json_t *v, *spec;
        int r;

        if (!policy_name_valid(name))
                return error_set(
                        reterr, EINVAL, ERROR_INVALID_VALUE,
                        "\"%s\" is not a valid policy name (1 to %d characters of A-Z a-z 0-9 _ . -)",
                        strna(name), POLICY_NAME_MAX);
        if (!json_is_object(j))
                return error_set(reterr, EINVAL, ERROR_WRONG_TYPE, "policy: expected a JSON object");
        json_object_foreach (j, key, v)
                if (!streq(key, "match") && !streq(key, "order") && !streq(key, "ingress") &&
                    !streq(key, "egress"))
                        return error_set(reterr, EINVAL, ERROR_UNKNOWN_FIELD, "%s: unknown field", key);
        p = calloc(1, sizeof(*p));
        if (!p || !(p->name = strdup(name)))
                return error_oom(reterr);
        p->n_ref = 1;
        v = json_object_get(j, "match");
        if (!v)
                return error_set(reterr, EINVAL, ERROR_MISSING_FIELD,
                                 "match: required (which interfaces the policy is for)");
        r = parse_match(v, &p->match, reterr);
        if (r < 0)
                return r;
        v = json_object_get(j, "order");
        if (v && !json_is_null(v)) {
                if (!json_is_integer(v))
                        return error_set(reterr, EINVAL, ERROR_WRONG_TYPE, "order: expected an integer");
                if (json_integer_value(v) < POLICY_ORDER_MIN || json_integer_value(v) > POLICY_ORDER_MAX)
                        return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                         "order: must be between %d and %d", POLICY_ORDER_MIN,
                                         POLICY_ORDER_MAX);
                p->order = (int32_t) json_integer_value(v);
        }
        spec = json_object();
        if (!spec)
                return error_oom(reterr);
        if ((v = json_object_get(j, "ingress")))
                json_object_set(spec, "ingress", v);
        if ((v = json_object_get(j, "egress")))
                json_object_set(spec, "egress", v);
        r = document_from_json(name, spec, &p->doc, reterr);
        json_decref(spec);
        if (r < 0)
                return r;
        p->doc->source = SOURCE_POLICY;
        if (p->doc->n_filters[DIRECTION_INGRESS] + p->doc->n_filters[DIRECTION_EGRESS] == 0)
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                 "a policy declares at least one filter, under \"ingress\" or \"egress\"");
        *ret = TAKE_PTR(p);
        return 0;
}

static json_t *strv_to_json(char **v, size_t n) {
        json_t *a = json_array();

        for (size_t i = 0; i < n; i++)
                json_array_append_new(a, json_string(v[i]));
        return a;
}

json_t *policy_match_to_json(const PolicyMatch *m) {
        json_t *j = json_object();

        json_object_set_new(j, "ifname", strv_to_json(m->ifname, m->n_ifname));
        json_object_set_new(j, "netns", m->n_netns ? strv_to_json(m->netns, m->n_netns) : json_null());
        json_object_set_new(j, "kind", m->n_kind ? strv_to_json(m->kind, m->n_kind) : json_null());
        json_object_set_new(j, "master", m->n_master ? strv_to_json(m->master, m->n_master) : json_null());
        return j;
}

json_t *policy_to_json(const Policy *p) {
        json_t *j = json_object(), *spec = document_spec_to_json(p->doc);

        json_object_set_new(j, "match", policy_match_to_json(&p->match));
        json_object_set_new(j, "order", json_integer(p->order));
        json_object_set(j, "ingress", json_object_get(spec, "ingress"));
        json_object_set(j, "egress", json_object_get(spec, "egress"));
        json_decref(spec);
        return j;
}

static bool any_glob(char *const *globs, size_t n, const char *s) {
        for (size_t i = 0; i < n; i++)
                if (fnmatch(globs[i], s, 0) == 0)
                        return true;
        return false;
}

bool policy_matches_netns(const Policy *p, const char *netns) {
        if (!netns)
                return p->match.n_netns == 0;
        return any_glob(p->match.netns, p->match.n_netns, netns);
}

bool policy_matches(const Policy *p, const char *netns, const char *ifname, const char *kind,
                    const char *master) {
        if (!policy_matches_netns(p, netns) || !any_glob(p->match.ifname, p->match.n_ifname, ifname))
                return false;
        if (p->match.n_kind) {
                bool found = false;
                for (size_t i = 0; i < p->match.n_kind && !found; i++)
                        found = streq(p->match.kind[i], kind);
                if (!found)
                        return false;
        }
        return p->match.n_master == 0 || (master && any_glob(p->match.master, p->match.n_master, master));
}

/* ---- policies/NAME.json: {"format", "name", "generation", "spec"}; the spec's objects resolved ---- */

static int policies_fd(Store *s) {
        return s->policies_fd;
}

static int commit_settle(Store *s, Error *reterr);

static json_t *policy_file_json(const Policy *p) {
        json_t *j = json_pack("{s:i,s:s,s:I,s:o}", "format", 1, "name", p->name, "generation",
                              (json_int_t) p->generation, "spec", policy_to_json(p));
        if (j && p->fleet_revision)
                json_object_set_new(j, "fleet_revision", json_integer((json_int_t) p->fleet_revision));
        return j;
}

static int policy_file_write(Store *s, const char *name, json_t *j, Error *reterr) {
        _cleanup_free_ char *text = j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
        char file[POLICY_NAME_MAX + 8];
        int r;

        if (!text)
                return error_oom(reterr);
        snprintf(file, sizeof(file), "%s.json", name);
        r = write_file_atomic(policies_fd(s), file, text, strlen(text));
        if (r < 0)
                return error_set(reterr, r, ERROR_STORE_ERROR, "cannot write %s/policies/%s: %s", s->dir,
                                 file, strerror(-r));
        return 0;
}

int store_policy_save(Store *s, const Policy *p, Error *reterr) {
        _cleanup_(json_decrefp) json_t *j = NULL;

        if (commit_settle(s, reterr) < 0)
                return -reterr->error;
        j = policy_file_json(p);
        return policy_file_write(s, p->name, j, reterr);
}

static int policy_file_unlink(Store *s, const char *name, bool sync, Error *reterr) {
        char file[POLICY_NAME_MAX + 8];

        snprintf(file, sizeof(file), "%s.json", name);
        if (unlinkat(policies_fd(s), file, 0) < 0 && errno != ENOENT)
                return error_set(reterr, errno, ERROR_STORE_ERROR, "cannot remove %s/policies/%s: %m",
                                 s->dir, file);
        if (sync && fsync(policies_fd(s)) < 0)
                return error_set(reterr, errno, ERROR_STORE_ERROR, "cannot sync %s/policies: %m", s->dir);
        return 0;
}

int store_policy_remove(Store *s, const char *name, Error *reterr) {
        if (commit_settle(s, reterr) < 0)
                return -reterr->error;
        return policy_file_unlink(s, name, true, reterr);
}

/* ---- policies.commit: several policies changed as one ----
 *
 * Each policy file is replaced atomically on its own; a change of several is first written whole to
 * policies.commit (atomically), then carried out file by file, then the journal is removed. A start
 * that finds the journal carries it out again (every step can be repeated), so after a crash anywhere
 * the store holds all of the change or none of it. */

#define COMMIT_FILE "policies.commit"

/* The journal: {"format": 1, "put": [policy file, …], "remove": [name, …]}. */
int store_policies_commit_end(Store *s, json_t *j, Error *reterr) {
        json_t *put = json_object_get(j, "put"), *remove = json_object_get(j, "remove"), *v;
        size_t i;
        int r;

        if (!json_is_integer(json_object_get(j, "format")) ||
            json_integer_value(json_object_get(j, "format")) != 1 || !json_is_array(put) ||
            !json_is_array(remove))
                return error_set(reterr, EINVAL, ERROR_STORE_ERROR,
                                 "format: expected 1, with put and remove");
        json_array_foreach (put, i, v) {
                const char *name = json_string_value(json_object_get(v, "name"));
                if (!name || !policy_name_valid(name))
                        return error_set(reterr, EINVAL, ERROR_STORE_ERROR, "put[%zu]: no valid name", i);
        }
        json_array_foreach (remove, i, v)
                if (!json_is_string(v) || !policy_name_valid(json_string_value(v)))
                        return error_set(reterr, EINVAL, ERROR_STORE_ERROR, "remove[%zu]: not a policy name",
                                         i);
        json_array_foreach (put, i, v) {
                r = policy_file_write(s, json_string_value(json_object_get(v, "name")), v, reterr);
                if (r < 0)
                        return r;
        }
        json_array_foreach (remove, i, v) {
                r = policy_file_unlink(s, json_string_value(v), i + 1 == json_array_size(remove), reterr);
                if (r < 0)
                        return r;
        }
        if (unlinkat(s->dir_fd, COMMIT_FILE, 0) < 0 || fsync(s->dir_fd) < 0)
                return error_set(reterr, errno, ERROR_STORE_ERROR, "cannot remove %s/%s: %m", s->dir,
                                 COMMIT_FILE);
        return 0;
}

int store_policies_commit_begin(Store *s, Policy *const *put, size_t n_put, char *const *remove,
                                size_t n_remove, json_t **ret, Error *reterr) {
        _cleanup_(json_decrefp) json_t *j = json_pack("{s:i,s:[],s:[]}", "format", 1, "put", "remove");
        _cleanup_free_ char *text = NULL;
        int r;

        if (!j)
                return error_oom(reterr);
        if (commit_settle(s, reterr) < 0)
                return -reterr->error;
        for (size_t i = 0; i < n_put; i++)
                if (json_array_append_new(json_object_get(j, "put"), policy_file_json(put[i])) < 0)
                        return error_oom(reterr);
        for (size_t i = 0; i < n_remove; i++)
                if (json_array_append_new(json_object_get(j, "remove"), json_string(remove[i])) < 0)
                        return error_oom(reterr);
        if (!(text = json_dumps(j, JSON_COMPACT)))
                return error_oom(reterr);
        r = write_file_atomic(s->dir_fd, COMMIT_FILE, text, strlen(text));
        if (r < 0)
                return error_set(reterr, r, ERROR_STORE_ERROR, "cannot write %s/%s: %s", s->dir, COMMIT_FILE,
                                 strerror(-r));
        *ret = TAKE_PTR(j);
        return 0;
}

int store_policies_commit(Store *s, Policy *const *put, size_t n_put, char *const *remove, size_t n_remove,
                          Error *reterr) {
        _cleanup_(json_decrefp) json_t *j = NULL;

        if (n_put + n_remove == 1)
                return n_put ? store_policy_save(s, put[0], reterr)
                             : store_policy_remove(s, remove[0], reterr);
        if (n_put + n_remove == 0)
                return 0;
        if (store_policies_commit_begin(s, put, n_put, remove, n_remove, &j, reterr) < 0)
                return -reterr->error;
        return store_policies_commit_end(s, j, reterr);
}

/* A journal left behind (a crash, or a write that failed) is carried out before anything else is
 * written, so that it never lands later on top of a newer change: 0 (none, done, or a corrupt one set
 * aside: 1 in *ret_what, or 2), or the error that left it in place (carried out again next time). */
static int commit_pending(Store *s, int *ret_what, char **ret_moved, Error *reterr) {
        _cleanup_free_ char *text = NULL;
        _cleanup_close_ int fd = openat(s->dir_fd, COMMIT_FILE, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        _cleanup_(json_decrefp) json_t *j = NULL;
        json_error_t jerr;
        size_t size;
        int r;

        *ret_what = 0;
        if (fd < 0)
                return 0;
        if (read_full_fd(fd, 64u * POLICY_FILE_MAX, &text, &size) < 0)
                return error_set(reterr, EIO, ERROR_STORE_ERROR, "%s/%s cannot be read", s->dir,
                                 COMMIT_FILE);
        j = json_loadb(text, size, JSON_REJECT_DUPLICATES, &jerr);
        r = j ? store_policies_commit_end(s, j, reterr)
              : error_set(reterr, EINVAL, ERROR_STORE_ERROR, "malformed JSON: %s", jerr.text);
        if (r >= 0) {
                *ret_what = 1;
                return 0;
        }
        if (reterr->error != EINVAL)
                return r; /* an I/O error: left in place */
        /* corrupt (found before anything was written): set aside, the store as before the change */
        (void) store_quarantine(s, s->dir_fd, COMMIT_FILE, ret_moved);
        *ret_what = 2;
        return 0;
}

static void commit_recover(Store *s, StoreProblemFunc problem, void *userdata) {
        _cleanup_free_ char *moved = NULL;
        char path[512];
        _cleanup_error_ Error e = ERROR_NULL;
        int what;

        snprintf(path, sizeof(path), "%s/%s", s->dir, COMMIT_FILE);
        if (commit_pending(s, &what, &moved, &e) < 0)
                log_problem(problem, userdata, path, e.message, NULL); /* "left in place" */
        else if (what == 1 && problem) /* not log_problem(): it would add "left in place" */
                problem(path, "a change of several policies interrupted; completed", userdata);
        else if (what == 2)
                log_problem(problem, userdata, path, e.message, moved);
}

static int commit_settle(Store *s, Error *reterr) {
        _cleanup_free_ char *moved = NULL;
        _cleanup_error_ Error e = ERROR_NULL;
        int what, r = commit_pending(s, &what, &moved, &e);

        if (r < 0) {
                error_set(reterr, e.error, ERROR_STORE_ERROR,
                          "an earlier change of several policies is not complete (%s): nothing else is "
                          "written "
                          "until it is",
                          strna(e.message));
                return r;
        }
        return 0;
}

int policy_file_parse(const char *text, size_t size, Policy **ret, Error *reterr) {
        json_error_t jerr;
        _cleanup_(json_decrefp) json_t *j = json_loadb(text, size, JSON_REJECT_DUPLICATES, &jerr);
        json_t *format, *name, *generation;
        Policy *p = NULL;
        int r;

        if (!j)
                return error_set(reterr, EINVAL, ERROR_STORE_ERROR, "malformed JSON at line %d: %s",
                                 jerr.line, jerr.text);
        format = json_object_get(j, "format");
        name = json_object_get(j, "name");
        generation = json_object_get(j, "generation");
        if (!json_is_integer(format) || json_integer_value(format) != 1)
                return error_set(reterr, EINVAL, ERROR_STORE_ERROR, "format: expected 1");
        if (!json_is_string(name) || !json_is_integer(generation) || json_integer_value(generation) < 1)
                return error_set(reterr, EINVAL, ERROR_STORE_ERROR, "name or generation missing");
        r = policy_from_json(json_string_value(name), json_object_get(j, "spec"), &p, reterr);
        if (r < 0)
                return r;
        p->generation = (uint64_t) json_integer_value(generation);
        json_t *fleet = json_object_get(j, "fleet_revision");
        if (fleet && (!json_is_integer(fleet) || json_integer_value(fleet) < 1)) {
                policy_unref(p);
                return error_set(reterr, EINVAL, ERROR_STORE_ERROR,
                                 "fleet_revision: expected a positive integer");
        }
        p->fleet_revision = fleet ? (uint64_t) json_integer_value(fleet) : 0;
        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++)
                for (size_t i = 0; i < p->doc->n_filters[dir]; i++) {
                        const FilterSpec *f = &p->doc->filters[dir][i];
                        bool unresolved = !f->digest || !f->program;
                        for (size_t k = 0; k < f->n_actions; k++)
                                unresolved = unresolved || !f->actions[k].digest || !f->actions[k].program;
                        if (unresolved) {
                                policy_unref(p);
                                return error_set(reterr, EINVAL, ERROR_STORE_ERROR,
                                                 "%s[%zu]: a stored filter names its object by digest and "
                                                 "its program",
                                                 direction_to_string(dir), i);
                        }
                }
        *ret = p;
        return 0;
}

int store_policies_load(Store *s, Policy ***ret, size_t *ret_n, StoreProblemFunc problem, void *userdata,
                        Error *reterr) {
        char **names = NULL;
        Policy **v = NULL;
        size_t n_names = 0, n = 0;
        int r;

        commit_recover(s, problem, userdata);
        r = store_list_dir(policies_fd(s), ".json", &names, &n_names);
        if (r < 0)
                return error_set(reterr, r, ERROR_STORE_ERROR, "cannot list %s/policies: %s", s->dir,
                                 strerror(-r));
        v = calloc(n_names + 1, sizeof(Policy *));
        if (!v) {
                strv_free_n(names, n_names);
                return error_oom(reterr);
        }
        for (size_t i = 0; i < n_names; i++) {
                _cleanup_free_ char *text = NULL, *moved = NULL;
                _cleanup_close_ int fd = openat(policies_fd(s), names[i], O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
                char path[512];
                _cleanup_error_ Error e = ERROR_NULL;
                size_t size;
                Policy *p = NULL;

                snprintf(path, sizeof(path), "%s/policies/%s", s->dir, names[i]);
                if (fd < 0 || read_full_fd(fd, POLICY_FILE_MAX, &text, &size) < 0) {
                        log_problem(problem, userdata, path, "cannot be read", NULL);
                        continue;
                }
                r = policy_file_parse(text, size, &p, &e);
                if (r >= 0 && (strlen(names[i]) != strlen(p->name) + 5 ||
                               strncmp(names[i], p->name, strlen(p->name)))) {
                        policy_unref(p);
                        p = NULL;
                        r = error_set(&e, EINVAL, ERROR_STORE_ERROR, "the file's name is not the policy's");
                }
                if (r < 0) {
                        (void) store_quarantine(s, policies_fd(s), names[i], &moved);
                        log_problem(problem, userdata, path, e.message, moved);
                        continue;
                }
                v[n++] = p;
        }
        strv_free_n(names, n_names);
        *ret = v;
        *ret_n = n;
        return 0;
}
