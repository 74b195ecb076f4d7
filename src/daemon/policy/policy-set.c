/* policy-set.c: the set of policies (policy-set.h), and what the faces read of the manager's. */
#include <string.h>

#include "log.h"
#include "manager.h"
#include "policy-set.h"
#include "daemon-policies.h"
#include "store-policy.h"

Policy *policy_set_get(const PolicySet *s, const char *name) {
        for (size_t i = 0; i < s->n; i++)
                if (streq(s->v[i]->name, name))
                        return s->v[i];
        return NULL;
}

bool policy_set_wants_netns(const PolicySet *s, const char *netns) {
        for (size_t i = 0; i < s->n; i++)
                if (policy_matches_netns(s->v[i], netns))
                        return true;
        return false;
}

bool policy_set_wants_named_netns(const PolicySet *s) {
        for (size_t i = 0; i < s->n; i++)
                if (s->v[i]->match.n_netns > 0)
                        return true;
        return false;
}

size_t policy_set_match(const PolicySet *s, const char *netns, const char *ifname, const char *kind,
                        const char *master, Policy **v) {
        size_t k = 0;

        for (size_t i = 0; i < s->n; i++)
                if (policy_matches(s->v[i], netns, ifname, kind, master))
                        v[k++] = s->v[i];
        return k;
}

void policy_set_clear(PolicySet *s) {
        for (size_t i = 0; i < s->n; i++)
                policy_unref(s->v[i]);
        free(s->v);
        *s = (PolicySet){ 0 };
}

void policy_set_replace(PolicySet *s, Policy **v, size_t n) {
        policy_set_clear(s);
        s->v = v;
        s->n = n;
}

size_t policy_set_count_local(const PolicySet *s) {
        size_t n = 0;
        for (size_t i = 0; i < s->n; i++)
                n += !s->v[i]->hog_path && !s->v[i]->fleet_revision;
        return n;
}

static bool policy_same(const Policy *a, const Policy *b) {
        json_t *x, *y;
        bool eq;

        if (!streq(a->name, b->name) || !streq_ptr(a->hog_path, b->hog_path))
                return false;
        x = policy_to_json(a);
        y = policy_to_json(b);
        eq = json_equal(x, y);
        json_decref(x);
        json_decref(y);
        return eq;
}

int policy_set_with_hogs(const PolicySet *s, Policy *const *v, size_t n, PolicySet *ret,
                         size_t *ret_changed) {
        PolicySet set = { .v = calloc(s->n + n + 1, sizeof(Policy *)) };
        size_t changed = 0;

        if (!set.v)
                return -ENOMEM;
        for (size_t i = 0; i < s->n; i++)
                if (!s->v[i]->hog_path)
                        set.v[set.n++] = policy_ref(s->v[i]);
        for (size_t i = 0; i < n; i++) {
                Policy *old = policy_set_get(s, v[i]->name), *use = v[i];
                if (policy_set_get(&set, v[i]->name)) {
                        log_error("%s: the API has a policy named %s; this hog is not applied",
                                  v[i]->hog_path, v[i]->name);
                        continue;
                }
                if (old && old->hog_path && policy_same(old, v[i]))
                        use = old; /* unchanged: its interfaces stay as they are */
                else {
                        changed++;
                        log_info("policy %s: %s hog %s", v[i]->name, old ? "changed" : "new",
                                 v[i]->hog_path);
                }
                set.v[set.n++] = policy_ref(use);
        }
        /* a hog policy the new set has none of that name of: removed (kept or changed ones are there) */
        for (size_t i = 0; i < s->n; i++)
                if (s->v[i]->hog_path && !policy_set_get(&set, s->v[i]->name)) {
                        changed++;
                        log_info("policy %s: hog %s removed", s->v[i]->name, s->v[i]->hog_path);
                }
        *ret = set;
        *ret_changed = changed;
        return 0;
}

/* ---- the manager's, as the faces read it ---- */

size_t daemon_policy_count(Manager *m) {
        return m->policies.n;
}

Policy *daemon_policy_at(Manager *m, size_t i) {
        return i < m->policies.n ? m->policies.v[i] : NULL;
}

Policy *daemon_policy_get(Manager *m, const char *name) {
        return policy_set_get(&m->policies, name);
}

size_t daemon_policy_ifaces(Manager *m, const Policy *p, Iface ***ret) {
        Iface **v = calloc(iface_table_size(m->ifaces) + 1, sizeof(Iface *));
        size_t n = 0;

        for (size_t i = 0; v && i < iface_table_size(m->ifaces); i++) {
                Iface *it = iface_table_at(m->ifaces, i);
                if (it->visible && iface_has_policy(it, p))
                        v[n++] = it;
        }
        *ret = v;
        return n;
}
