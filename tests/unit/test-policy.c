/* test-policy.c: policies as a set (which match a link: name, namespace, kind, master; whether any may
 * match in a namespace; the hogs' merged in) and their precedence when an interface's filters are
 * composed (a hog, a hog's policy, the interface's document, the API's policies by order, a conflict of
 * one order), with what the faces read of it. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "iface.h"
#include "policy-set.h"
#include "daemon-changes.h"
#include "daemon-policies.h"
#include "store-policy.h"

#define D1 "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

/* A policy of match (JSON) and order, with one filter named filter on hook (NULL: none). */
static Policy *policy_make(const char *name, const char *match, int order, const char *hook,
                           const char *filter) {
        char text[512];
        Policy *p = NULL;
        Error e = ERROR_NULL;
        json_t *j;

        if (hook)
                snprintf(text, sizeof(text),
                         "{\"match\":%s,\"order\":%d,\"%s\":[{\"name\":\"%s\",\"object\":\"" D1
                         "\",\"program\":\"p\",\"priority\":10}]}",
                         match, order, hook, filter);
        else
                snprintf(text, sizeof(text), "{\"match\":%s,\"order\":%d}", match, order);
        j = json_loads(text, 0, NULL);
        assert_non_null(j);
        assert_int_equal(policy_from_json(name, j, &p, &e), 0);
        json_decref(j);
        return p;
}

static Document *doc_make(const char *hook, const char *filter) {
        char text[256];
        Document *d = NULL;
        Error e = ERROR_NULL;

        snprintf(text, sizeof(text),
                 "{\"%s\":[{\"name\":\"%s\",\"object\":\"" D1 "\",\"program\":\"p\",\"priority\":20}]}",
                 hook, filter);
        assert_int_equal(document_from_string("eth0", text, strlen(text), &d, &e), 0);
        return d;
}

static void set_free(PolicySet *s) {
        policy_set_clear(s);
}

static void test_a_link_matches_by_name_namespace_kind_and_master(void **state) {
        PolicySet s = { .v = calloc(4, sizeof(Policy *)) };
        Policy *v[4];

        (void) state;
        s.v[s.n++] = policy_make("eth", "{\"ifname\":[\"eth*\"]}", 0, "ingress", "a");
        s.v[s.n++] =
                policy_make("veth-in-red", "{\"ifname\":[\"*\"],\"netns\":[\"red*\"],\"kind\":[\"veth\"]}",
                            0, "ingress", "b");
        s.v[s.n++] = policy_make("ports", "{\"ifname\":[\"*\"],\"master\":[\"br-*\"]}", 0, "ingress", "c");
        /* clsd's own namespace: only policies without "netns" */
        assert_int_equal(policy_set_match(&s, NULL, "eth0", "veth", NULL, v), 1);
        assert_string_equal(v[0]->name, "eth");
        assert_int_equal(policy_set_match(&s, NULL, "lo", NULL, NULL, v), 0);
        /* a named namespace: "netns" and the kind */
        assert_int_equal(policy_set_match(&s, "red1", "eth0", "veth", NULL, v), 1);
        assert_string_equal(v[0]->name, "veth-in-red");
        assert_int_equal(policy_set_match(&s, "red1", "eth0", "bridge", NULL, v), 0);
        /* a bridge port: by its master's name */
        assert_int_equal(policy_set_match(&s, NULL, "tap3", "tun", "br-lan", v), 1);
        assert_string_equal(v[0]->name, "ports");
        assert_int_equal(policy_set_match(&s, NULL, "eth1", "veth", "br-wan", v), 2);
        /* followed namespaces */
        assert_true(policy_set_wants_netns(&s, NULL));
        assert_true(policy_set_wants_netns(&s, "red7"));
        assert_false(policy_set_wants_netns(&s, "blue"));
        assert_ptr_equal(policy_set_get(&s, "ports"), s.v[2]);
        assert_null(policy_set_get(&s, "port"));
        set_free(&s);
}

static void test_hogs_replace_hogs_and_leave_the_apis_policies(void **state) {
        PolicySet s = { .v = calloc(4, sizeof(Policy *)) }, merged = { 0 }, again = { 0 };
        Policy *h1 = policy_make("h1", "{\"ifname\":[\"eth*\"]}", 0, "egress", "x"),
               *h1b = policy_make("h1", "{\"ifname\":[\"eth*\"]}", 0, "egress", "x"),
               *clash = policy_make("api", "{\"ifname\":[\"*\"]}", 0, "egress", "y");
        Policy *hogs[] = { h1, clash };
        size_t changed;

        (void) state;
        h1->hog_path = strdup("/etc/clsd/hogs/h1.json");
        h1b->hog_path = strdup("/etc/clsd/hogs/h1.json");
        clash->hog_path = strdup("/etc/clsd/hogs/api.json");
        s.v[s.n++] = policy_make("api", "{\"ifname\":[\"*\"]}", 0, "ingress", "a");
        s.v[s.n++] = policy_make("fleet", "{\"ifname\":[\"*\"]}", 0, "ingress", "f");
        s.v[1]->fleet_revision = 12;
        assert_int_equal(policy_set_count_local(&s), 1);
        /* a hog of a name the API holds is left out; a new one is a change */
        assert_int_equal(policy_set_with_hogs(&s, hogs, 2, &merged, &changed), 0);
        assert_int_equal(merged.n, 3);
        assert_int_equal(changed, 1);
        assert_ptr_equal(policy_set_get(&merged, "h1"), h1);
        assert_ptr_equal(policy_set_get(&merged, "api"), s.v[0]);
        /* the same hog read again keeps the policy it was (its interfaces untouched) */
        Policy *hogs2[] = { h1b };
        assert_int_equal(policy_set_with_hogs(&merged, hogs2, 1, &again, &changed), 0);
        assert_int_equal(changed, 0);
        assert_ptr_equal(policy_set_get(&again, "h1"), h1);
        set_free(&again);
        /* none: it goes */
        assert_int_equal(policy_set_with_hogs(&merged, NULL, 0, &again, &changed), 0);
        assert_int_equal(changed, 1);
        assert_null(policy_set_get(&again, "h1"));
        assert_int_equal(again.n, 2);
        set_free(&again);
        set_free(&merged);
        set_free(&s);
        policy_unref(h1);
        policy_unref(h1b);
        policy_unref(clash);
}

/* The interface's composition with api (may be NULL), hog (may be NULL) and policies v. */
static Iface *compose(Document *api, Document *hog, Policy **v, size_t n) {
        Iface *it = NULL;

        assert_int_equal(iface_new(NULL, "eth0", &it), 0);
        assert_int_equal(iface_set_policies(it, v, n), 0);
        assert_int_equal(iface_set_documents(it, api, NULL, hog, hog ? "/etc/clsd/hogs/eth0.json" : NULL,
                                             NULL, false, NULL),
                         0);
        iface_set_state(it, IFACE_CONFIGURED, NULL); /* as a reconcile that matched the kernel leaves it */
        return it;
}

static const char *filter_on(const Iface *it, Direction dir) {
        for (size_t i = 0; i < iface_filter_count(it); i++)
                if (filter_direction(iface_filter_at(it, i)) == dir)
                        return filter_spec(iface_filter_at(it, i))->name;
        return NULL;
}

static void test_precedence_hog_then_document_then_lowest_order(void **state) {
        Policy *p5 = policy_make("p5", "{\"ifname\":[\"*\"]}", 5, "ingress", "from-p5");
        Policy *p1 = policy_make("p1", "{\"ifname\":[\"*\"]}", 1, "ingress", "from-p1");
        Policy *e9 = policy_make("e9", "{\"ifname\":[\"*\"]}", 9, "egress", "from-e9");
        Document *doc = doc_make("ingress", "from-doc"), *hog = doc_make("egress", "from-hog");
        Policy *v[] = { p5, p1, e9 };
        const char *by;
        Iface *it;

        (void) state;
        /* policies alone: on each hook, the lowest order that declares filters there */
        it = compose(NULL, NULL, v, 3);
        assert_string_equal(filter_on(it, DIRECTION_INGRESS), "from-p1");
        assert_string_equal(filter_on(it, DIRECTION_EGRESS), "from-e9");
        assert_string_equal(iface_policy_state(it, p1, DIRECTION_INGRESS, &by), "applied");
        assert_string_equal(iface_policy_state(it, p5, DIRECTION_INGRESS, &by), "overridden");
        assert_string_equal(by, "p1");
        assert_int_equal(iface_policy_outcome(it, p1, &by), POLICY_IFACE_CONFIGURED);
        assert_int_equal(iface_policy_outcome(it, p5, &by), POLICY_IFACE_OVERRIDDEN);
        assert_string_equal(by, "p1");
        /* the hook p1 holds is what the interface is: a failed interface (a priority a foreign filter
         * holds) is a failed hook, not an applied one */
        Error e = ERROR_NULL;
        error_set(&e, EBUSY, ERROR_PRIORITY_TAKEN, "priority 10 is taken");
        iface_set_state(it, IFACE_FAILED, &e);
        error_done(&e);
        assert_string_equal(iface_policy_state(it, p1, DIRECTION_INGRESS, &by), "failed");
        assert_int_equal(iface_policy_outcome(it, p1, &by), POLICY_IFACE_FAILED);
        assert_int_equal(iface_policy_composed(it, p1, &by), POLICY_IFACE_CONFIGURED);
        iface_set_state(it, IFACE_PENDING, NULL);
        assert_string_equal(iface_policy_state(it, p1, DIRECTION_INGRESS, &by), "pending");
        assert_null(iface_policy_state(it, p5, DIRECTION_EGRESS, &by)); /* declares nothing there */
        assert_int_equal(iface_policy_count(it), 3);
        assert_string_equal(iface_policy_at(it, 0)->name, "p1"); /* by order, then name */
        iface_free(it, NULL);
        /* the interface's own document holds its hook; the policies keep the other */
        it = compose(doc, NULL, v, 3);
        assert_string_equal(filter_on(it, DIRECTION_INGRESS), "from-doc");
        assert_string_equal(filter_on(it, DIRECTION_EGRESS), "from-e9");
        assert_string_equal(iface_policy_state(it, p1, DIRECTION_INGRESS, &by), "overridden");
        assert_string_equal(by, "document");
        iface_free(it, NULL);
        /* a hog holds its hook over everything */
        it = compose(doc, hog, v, 3);
        assert_string_equal(filter_on(it, DIRECTION_EGRESS), "from-hog");
        assert_string_equal(iface_policy_state(it, e9, DIRECTION_EGRESS, &by), "overridden");
        assert_string_equal(by, "hog");
        assert_true(iface_overridden(it, DIRECTION_INGRESS) == false);
        iface_free(it, NULL);
        policy_unref(p5);
        policy_unref(p1);
        policy_unref(e9);
        document_unref(doc);
        document_unref(hog);
}

static void test_two_policies_of_one_order_are_a_conflict(void **state) {
        Policy *a = policy_make("a", "{\"ifname\":[\"*\"]}", 3, "ingress", "from-a");
        Policy *b = policy_make("b", "{\"ifname\":[\"*\"]}", 3, "ingress", "from-b");
        Policy *c = policy_make("c", "{\"ifname\":[\"*\"]}", 4, "ingress", "from-c");
        Policy *hogp = policy_make("hogp", "{\"ifname\":[\"*\"]}", 8, "ingress", "from-hogp");
        Policy *v[] = { c, b, a }, *w[] = { c, b, a, hogp };
        const char *by;
        Iface *it;

        (void) state;
        /* neither is applied there, nor one of a higher order */
        it = compose(NULL, NULL, v, 3);
        assert_null(filter_on(it, DIRECTION_INGRESS));
        assert_string_equal(iface_policy_state(it, a, DIRECTION_INGRESS, &by), "conflict");
        assert_non_null(strstr(by, "a and b"));
        assert_string_equal(iface_policy_state(it, c, DIRECTION_INGRESS, &by), "conflict");
        /* taken together: a conflict, never configured, whatever the interface's own state */
        assert_int_equal(iface_policy_outcome(it, a, &by), POLICY_IFACE_CONFLICT);
        assert_non_null(strstr(by, "a and b"));
        iface_free(it, NULL);
        /* a hog's policy (configuration) comes before the API's, whatever its order */
        hogp->hog_path = strdup("/etc/clsd/hogs/hogp.json");
        it = compose(NULL, NULL, w, 4);
        assert_string_equal(filter_on(it, DIRECTION_INGRESS), "from-hogp");
        assert_string_equal(iface_policy_state(it, hogp, DIRECTION_INGRESS, &by), "applied");
        iface_free(it, NULL);
        policy_unref(a);
        policy_unref(b);
        policy_unref(c);
        policy_unref(hogp);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_a_link_matches_by_name_namespace_kind_and_master),
                cmocka_unit_test(test_hogs_replace_hogs_and_leave_the_apis_policies),
                cmocka_unit_test(test_precedence_hog_then_document_then_lowest_order),
                cmocka_unit_test(test_two_policies_of_one_order_are_a_conflict),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
