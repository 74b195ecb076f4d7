/* test-document.c: the PUT document parser and validator: defaults, normalisation, and one precise
 * error (code and field) per kind of bad input. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "store.h"

#define D1 "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static void expect_error(const char *text, ErrorCode code, const char *in_message) {
        Document *d = NULL;
        Error e = ERROR_NULL;

        assert_true(document_from_string("eth0", text, strlen(text), &d, &e) < 0);
        assert_null(d);
        assert_true(error_is_set(&e));
        if (e.code != code)
                fail_msg("for %s: expected %s, got %s (%s)", text, error_code_to_string(code),
                         error_code_to_string(e.code), e.message);
        if (in_message && !strstr(e.message, in_message))
                fail_msg("for %s: message \"%s\" does not name \"%s\"", text, e.message, in_message);
        error_done(&e);
}

static void test_defaults(void **state) {
        const char *text =
                "{\"ingress\":[{\"name\":\"a\",\"object\":\"" D1 "\"},"
                "{\"name\":\"b\",\"object\":\"/x.o\",\"program\":\"p\",\"priority\":10},"
                "{\"name\":\"c\",\"object\":\"" D1 "\",\"direct_action\":false,\"classid\":\"1:10\"}]}";
        _cleanup_(document_freep) Document *d = NULL;
        Error e = ERROR_NULL;

        (void) state;
        assert_int_equal(document_from_string("eth0", text, strlen(text), &d, &e), 0);
        assert_string_equal(d->ifname, "eth0");
        assert_int_equal(d->n_filters[DIRECTION_INGRESS], 3);
        assert_int_equal(d->n_filters[DIRECTION_EGRESS], 0);
        /* priorities in list order: first 1, then previous + 1 */
        assert_int_equal(d->filters[DIRECTION_INGRESS][0].priority, 1);
        assert_int_equal(d->filters[DIRECTION_INGRESS][1].priority, 10);
        assert_int_equal(d->filters[DIRECTION_INGRESS][2].priority, 11);
        assert_true(d->filters[DIRECTION_INGRESS][0].direct_action);
        assert_false(d->filters[DIRECTION_INGRESS][2].direct_action);
        assert_true(d->filters[DIRECTION_INGRESS][2].has_classid);
        assert_int_equal(d->filters[DIRECTION_INGRESS][2].classid, 0x10010);
        assert_string_equal(d->filters[DIRECTION_INGRESS][0].digest, D1);
        assert_null(d->filters[DIRECTION_INGRESS][1].digest);
        assert_null(d->filters[DIRECTION_INGRESS][0].program);
        assert_string_equal(d->filters[DIRECTION_INGRESS][1].program, "p");
}

static void test_roundtrip(void **state) {
        const char *text =
                "{\"egress\":[{\"name\":\"a\",\"object\":\"/o.o\",\"digest\":\"" D1 "\","
                "\"program\":\"p\",\"priority\":5,\"direct_action\":false,\"classid\":\"1:20\"}]}";
        _cleanup_(document_freep) Document *d = NULL, *d2 = NULL;
        _cleanup_free_ char *a = NULL, *b = NULL;
        Error e = ERROR_NULL;
        json_t *j;

        (void) state;
        assert_int_equal(document_from_string("eth0", text, strlen(text), &d, &e), 0);
        j = document_spec_to_json(d);
        a = json_dumps(j, JSON_PRESERVE_ORDER);
        assert_int_equal(document_from_json("eth0", j, &d2, &e), 0);
        json_decref(j);
        j = document_spec_to_json(d2);
        b = json_dumps(j, JSON_PRESERVE_ORDER);
        json_decref(j);
        assert_string_equal(a, b);
        assert_string_equal(
                a, "{\"ingress\": [], \"egress\": [{\"name\": \"a\", \"object\": \"/o.o\", \"digest\": \"" D1
                   "\", \"program\": \"p\", \"priority\": 5, \"direct_action\": false, \"classid\": "
                   "\"1:20\"}]}");
}

static void test_errors(void **state) {
        (void) state;
        expect_error("{\"ingress\":[", ERROR_MALFORMED_JSON, "line 1");
        expect_error("[]", ERROR_WRONG_TYPE, "document");
        expect_error("{\"ingres\":[]}", ERROR_UNKNOWN_FIELD, "ingres");
        expect_error("{\"ingress\":{}}", ERROR_WRONG_TYPE, "ingress");
        expect_error("{\"ingress\":[1]}", ERROR_WRONG_TYPE, "ingress[0]");
        expect_error("{\"ingress\":[{\"object\":\"" D1 "\"}]}", ERROR_MISSING_FIELD, "ingress[0].name");
        expect_error("{\"ingress\":[{\"name\":\"a\"}]}", ERROR_MISSING_FIELD, "ingress[0].object");
        expect_error("{\"ingress\":[{\"name\":\"a\",\"object\":\"" D1 "\",\"x\":1}]}", ERROR_UNKNOWN_FIELD,
                     "ingress[0].x");
        expect_error("{\"ingress\":[{\"name\":\"a\",\"object\":\"" D1 "\",\"priority\":\"1\"}]}",
                     ERROR_WRONG_TYPE, "ingress[0].priority");
        expect_error("{\"ingress\":[{\"name\":\"a\",\"object\":\"" D1 "\",\"priority\":0}]}",
                     ERROR_INVALID_VALUE, "priority");
        expect_error("{\"ingress\":[{\"name\":\"a\",\"object\":\"" D1 "\",\"priority\":65536}]}",
                     ERROR_INVALID_VALUE, "priority");
        expect_error("{\"ingress\":[{\"name\":\"a\",\"object\":\"" D1 "\",\"direct_action\":1}]}",
                     ERROR_WRONG_TYPE, "direct_action");
        expect_error("{\"ingress\":[{\"name\":\"a b\",\"object\":\"" D1 "\"}]}", ERROR_INVALID_VALUE,
                     "name");
        expect_error("{\"ingress\":[{\"name\":\"a\",\"object\":\"relative.o\"}]}", ERROR_INVALID_VALUE,
                     "object");
        expect_error("{\"ingress\":[{\"name\":\"a\",\"object\":\"sha256:XYZ\"}]}", ERROR_INVALID_VALUE,
                     "object");
        expect_error("{\"ingress\":[{\"name\":\"a\",\"object\":\"" D1 "\",\"classid\":\"1\"}]}",
                     ERROR_INVALID_VALUE, "classid");
        expect_error("{\"ingress\":[{\"name\":\"a\",\"object\":\"" D1 "\"},{\"name\":\"a\",\"object\":\"" D1
                     "\"}]}",
                     ERROR_DUPLICATE_NAME, "ingress[1].name");
        expect_error("{\"ingress\":[{\"name\":\"a\",\"object\":\"" D1
                     "\"}],\"egress\":[{\"name\":\"a\",\"object\":\"" D1 "\"}]}",
                     ERROR_DUPLICATE_NAME, "egress[0].name");
        expect_error("{\"ingress\":[{\"name\":\"a\",\"object\":\"" D1
                     "\",\"priority\":3},{\"name\":\"b\",\"object\":\"" D1 "\",\"priority\":3}]}",
                     ERROR_DUPLICATE_PRIORITY, "ingress[1].priority");
        expect_error("{\"ingress\":[{\"name\":\"a\",\"object\":\"" D1 "\",\"digest\":\"sha256:"
                     "1123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\"}]}",
                     ERROR_INVALID_VALUE, "digest");
        expect_error("{\"ingress\":[{\"name\":\"a\",\"object\":\"" D1
                     "\",\"priority\":65535},{\"name\":\"b\","
                     "\"object\":\"" D1 "\"}]}",
                     ERROR_INVALID_VALUE, "ingress[1].priority");
}

#define F_MAPS(m) "{\"ingress\":[{\"name\":\"a\",\"object\":\"" D1 "\",\"maps\":" m "}]}"

static void test_maps(void **state) {
        const char *text = F_MAPS("{\"counters\":{\"reuse\":false},\"seen_by_port\":{\"reuse\":true}}");
        _cleanup_(document_freep) Document *d = NULL, *d2 = NULL;
        _cleanup_free_ char *a = NULL;
        Error e = ERROR_NULL;
        json_t *j;

        (void) state;
        assert_int_equal(document_from_string("eth0", text, strlen(text), &d, &e), 0);
        assert_int_equal(d->filters[DIRECTION_INGRESS][0].n_maps, 2);
        assert_false(filter_map_reused(&d->filters[DIRECTION_INGRESS][0], "counters"));
        /* The kernel cuts map names to 15 characters. */
        assert_true(filter_map_reused(&d->filters[DIRECTION_INGRESS][0], "seen_by_port"));
        assert_true(filter_map_reused(&d->filters[DIRECTION_INGRESS][0], "other"));
        j = filter_spec_to_json(&d->filters[DIRECTION_INGRESS][0]);
        a = json_dumps(json_object_get(j, "maps"), JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(j);
        assert_string_equal(a, "{\"counters\":{\"reuse\":false},\"seen_by_port\":{\"reuse\":true}}");
        /* Absent and null are the same: every map is taken over. */
        text = F_MAPS("null");
        assert_int_equal(document_from_string("eth0", text, strlen(text), &d2, &e), 0);
        assert_int_equal(d2->filters[DIRECTION_INGRESS][0].n_maps, 0);
        assert_true(filter_map_reused(&d2->filters[DIRECTION_INGRESS][0], "counters"));
        assert_true(filter_map_shared(&d2->filters[DIRECTION_INGRESS][0], "counters"));
        assert_false(filter_has_own_maps(&d2->filters[DIRECTION_INGRESS][0]));
        assert_false(filter_has_own_maps(&d->filters[DIRECTION_INGRESS][0]));
}

static void test_maps_shared(void **state) {
        const char *text = F_MAPS("{\"counters\":{\"shared\":false},\"seen_by_port\":{\"shared\":true,"
                                  "\"config\":true}}");
        _cleanup_(document_freep) Document *d = NULL;
        _cleanup_free_ char *a = NULL;
        Error e = ERROR_NULL;
        json_t *j;

        (void) state;
        assert_int_equal(document_from_string("eth0", text, strlen(text), &d, &e), 0);
        /* "shared" alone: the map is still taken over from the program replaced */
        assert_true(filter_map_reused(&d->filters[DIRECTION_INGRESS][0], "counters"));
        assert_false(filter_map_shared(&d->filters[DIRECTION_INGRESS][0], "counters"));
        assert_true(filter_map_shared(&d->filters[DIRECTION_INGRESS][0], "seen_by_port"));
        assert_true(filter_map_shared(&d->filters[DIRECTION_INGRESS][0], "other"));
        assert_true(filter_has_own_maps(&d->filters[DIRECTION_INGRESS][0]));
        assert_true(filter_map_config(&d->filters[DIRECTION_INGRESS][0], "seen_by_port"));
        assert_false(filter_map_config(&d->filters[DIRECTION_INGRESS][0], "counters"));
        assert_true(filter_has_config_maps(&d->filters[DIRECTION_INGRESS][0]));
        /* written back normalised: "reuse" always, "shared" only when false, "config" only when true */
        j = filter_spec_to_json(&d->filters[DIRECTION_INGRESS][0]);
        a = json_dumps(json_object_get(j, "maps"), JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(j);
        assert_string_equal(
                a, "{\"counters\":{\"reuse\":true,\"shared\":false},\"seen_by_port\":{\"config\":true,"
                   "\"reuse\":true}}");

        expect_error(F_MAPS("[]"), ERROR_WRONG_TYPE, "ingress[0].maps");
        expect_error(F_MAPS("{\"c\":true}"), ERROR_WRONG_TYPE, "ingress[0].maps.c");
        expect_error(F_MAPS("{\"c\":{}}"), ERROR_MISSING_FIELD,
                     "ingress[0].maps.c: expected \"reuse\", \"shared\" or \"config\"");
        expect_error(F_MAPS("{\"c\":{\"config\":\"yes\"}}"), ERROR_WRONG_TYPE, "ingress[0].maps.c.config");
        expect_error(F_MAPS("{\"c\":{\"shared\":1}}"), ERROR_WRONG_TYPE, "ingress[0].maps.c.shared");
        expect_error(F_MAPS("{\"c\":{\"reuse\":0}}"), ERROR_WRONG_TYPE, "ingress[0].maps.c.reuse");
        expect_error(F_MAPS("{\"c\":{\"reuse\":true,\"x\":1}}"), ERROR_UNKNOWN_FIELD, "ingress[0].maps.c");
        expect_error(F_MAPS("{\"a b\":{\"reuse\":true}}"), ERROR_INVALID_VALUE, "ingress[0].maps");
        expect_error(F_MAPS("{\"\":{\"reuse\":true}}"), ERROR_INVALID_VALUE, "ingress[0].maps");
}

#define F_METRICS(m) "{\"ingress\":[{\"name\":\"a\",\"object\":\"" D1 "\",\"metrics\":" m "}]}"

static void test_metrics(void **state) {
        const char *text =
                F_METRICS("[{\"map\":\"bytes_by_proto\",\"name\":\"proto_bytes_total\",\"type\":\"counter\","
                          "\"value\":\"bytes\",\"labels\":[{\"name\":\"proto\",\"from\":\"key.proto\"}]},"
                          "{\"map\":\"h\",\"name\":\"size\",\"type\":\"histogram\",\"buckets\":[1,2.5]}]");
        _cleanup_(document_freep) Document *d = NULL;
        _cleanup_free_ char *a = NULL;
        Error e = ERROR_NULL;
        const MetricSpec *m;
        json_t *j;

        (void) state;
        assert_int_equal(document_from_string("eth0", text, strlen(text), &d, &e), 0);
        assert_int_equal(d->filters[DIRECTION_INGRESS][0].n_metrics, 2);
        m = &d->filters[DIRECTION_INGRESS][0].metrics[0];
        assert_string_equal(m->map, "bytes_by_proto");
        assert_int_equal(m->type, METRIC_COUNTER);
        assert_string_equal(m->labels[0].from, "key.proto");
        assert_string_equal(m->value, "bytes");
        m = &d->filters[DIRECTION_INGRESS][0].metrics[1];
        assert_int_equal(m->type, METRIC_HISTOGRAM);
        assert_int_equal(m->n_buckets, 2);
        assert_true(m->buckets[1] == 2.5);
        /* Written back as it came. */
        j = filter_spec_to_json(&d->filters[DIRECTION_INGRESS][0]);
        a = json_dumps(json_object_get(j, "metrics"), JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(j);
        assert_string_equal(a, "[{\"labels\":[{\"from\":\"key.proto\",\"name\":\"proto\"}],\"map\":"
                               "\"bytes_by_proto\",\"name\":\"proto_bytes_total\",\"type\":\"counter\","
                               "\"value\":\"bytes\"},{\"buckets\":[1.0,2.5],\"map\":\"h\",\"name\":\"size\","
                               "\"type\":\"histogram\"}]");

        expect_error(F_METRICS("{}"), ERROR_WRONG_TYPE, "ingress[0].metrics");
        expect_error(F_METRICS("[{\"map\":\"m\",\"type\":\"gauge\"}]"), ERROR_MISSING_FIELD,
                     "ingress[0].metrics[0].name");
        expect_error(F_METRICS("[{\"map\":\"m\",\"name\":\"a-b\",\"type\":\"gauge\"}]"), ERROR_INVALID_VALUE,
                     "ingress[0].metrics[0].name");
        expect_error(F_METRICS("[{\"map\":\"m\",\"name\":\"a\",\"type\":\"gauge\",\"value\":\"a..b\"}]"),
                     ERROR_INVALID_VALUE, "ingress[0].metrics[0].value");
        expect_error(F_METRICS("[{\"map\":\"m\",\"name\":\"a\",\"type\":\"gauge\",\"labels\":"
                               "[{\"name\":\"__x\",\"from\":\"key\"}]}]"),
                     ERROR_INVALID_VALUE, "ingress[0].metrics[0].labels[0].name");
        expect_error(F_METRICS("[{\"map\":\"m\",\"name\":\"a\",\"type\":\"gauge\",\"labels\":"
                               "[{\"name\":\"x\",\"from\":\"keys\"}]}]"),
                     ERROR_INVALID_VALUE, "ingress[0].metrics[0].labels[0].from");
        expect_error(F_METRICS("[{\"map\":\"m\",\"name\":\"a\",\"type\":\"histogram\",\"buckets\":[]}]"),
                     ERROR_WRONG_TYPE, "ingress[0].metrics[0].buckets");
}

static void test_actions_shape(void **state) {
        const char *text =
                "{\"ingress\":[{\"name\":\"a\",\"object\":\"" D1 "\",\"actions\":[{\"object\":\"/a.o\","
                "\"program\":\"p\"},{\"object\":\"" D1 "\"}]}]}";
        _cleanup_(document_freep) Document *d = NULL;
        Error e = ERROR_NULL;

        (void) state;
        assert_int_equal(document_from_string("eth0", text, strlen(text), &d, &e), 0);
        const FilterSpec *f = &d->filters[DIRECTION_INGRESS][0];
        assert_int_equal(f->n_actions, 2);
        /* Actions run only in classic mode: that is the default with them. */
        assert_false(f->direct_action);
        assert_string_equal(f->actions[0].object, "/a.o");
        assert_null(f->actions[0].digest);
        assert_string_equal(f->actions[0].program, "p");
        assert_string_equal(f->actions[1].digest, D1);
        assert_null(f->actions[1].program);
        /* Written back normalised, and read again the same. */
        {
                json_t *j = document_spec_to_json(d);
                _cleanup_free_ char *out = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
                _cleanup_(document_freep) Document *again = NULL;
                json_decref(j);
                assert_non_null(strstr(out, "\"direct_action\":false"));
                assert_non_null(
                        strstr(out, "\"actions\":[{\"object\":\"/a.o\",\"program\":\"p\"},{\"object\":\"" D1
                                    "\",\"digest\":\"" D1 "\"}]"));
                assert_int_equal(document_from_string("eth0", out, strlen(out), &again, &e), 0);
                assert_int_equal(again->filters[DIRECTION_INGRESS][0].n_actions, 2);
        }
        expect_error("{\"ingress\":[{\"name\":\"a\",\"object\":\"" D1
                     "\",\"direct_action\":true,\"actions\":[{\"object\":\"" D1 "\"}]}]}",
                     ERROR_INVALID_VALUE,
                     "ingress[0].direct_action: actions run only after a classifier in classic mode");
        expect_error("{\"ingress\":[{\"name\":\"a\",\"object\":\"" D1
                     "\",\"actions\":[{\"object\":\"a.o\"}]}]}",
                     ERROR_INVALID_VALUE, "ingress[0].actions[0].object");
        expect_error("{\"ingress\":[{\"name\":\"a\",\"object\":\"" D1 "\",\"actions\":[{\"object\":\"" D1
                     "\",\"digest\":\"sha256:"
                     "1123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\"}]}]}",
                     ERROR_INVALID_VALUE, "ingress[0].actions[0].digest: differs");
        expect_error("{\"ingress\":[{\"name\":\"a\",\"object\":\"" D1 "\",\"actions\":[{\"object\":\"" D1
                     "\",\"program\":7}]}]}",
                     ERROR_WRONG_TYPE, "ingress[0].actions[0].program");
        expect_error("{\"ingress\":[{\"name\":\"a\",\"object\":\"" D1 "\",\"actions\":[{\"object\":\"" D1
                     "\"},{\"object\":\"" D1 "\"},{\"object\":\"" D1 "\"},{\"object\":\"" D1
                     "\"},{\"object\":\"" D1 "\"},{\"object\":\"" D1 "\"},{\"object\":\"" D1
                     "\"},{\"object\":\"" D1 "\"},{\"object\":\"" D1 "\"}]}]}",
                     ERROR_INVALID_VALUE, "at most 8 actions");
        expect_error("{\"ingress\":[{\"name\":\"a\",\"object\":\"" D1 "\",\"actions\":{}}]}",
                     ERROR_WRONG_TYPE, "ingress[0].actions");
        expect_error("{\"ingress\":[{\"name\":\"a\",\"object\":\"" D1 "\",\"actions\":[{\"x\":1}]}]}",
                     ERROR_UNKNOWN_FIELD, "ingress[0].actions[0].x");
        expect_error("{\"ingress\":[{\"name\":\"a\",\"object\":\"" D1 "\",\"actions\":[{}]}]}",
                     ERROR_MISSING_FIELD, "ingress[0].actions[0]");
}

static void test_ifname_valid(void **state) {
        (void) state;
        assert_true(ifname_valid("eth0"));
        assert_true(ifname_valid("veth-a.100"));
        assert_true(ifname_valid("123456789012345"));
        assert_false(ifname_valid("1234567890123456"));
        assert_false(ifname_valid(""));
        assert_false(ifname_valid("."));
        assert_false(ifname_valid(".."));
        assert_false(ifname_valid("a/b"));
        assert_false(ifname_valid("a b"));
        assert_false(ifname_valid("a:b"));
}

static void test_classid(void **state) {
        uint32_t c;
        char buf[16];

        (void) state;
        assert_int_equal(classid_parse("1:10", &c), 0);
        assert_int_equal(c, 0x10010);
        assert_int_equal(classid_parse("ffff:ffff", &c), 0);
        assert_int_equal(c, 0xffffffff);
        assert_true(classid_parse("10000:1", &c) < 0);
        assert_true(classid_parse(":1", &c) < 0);
        assert_true(classid_parse("1:", &c) < 0);
        assert_true(classid_parse("1:2:3", &c) < 0);
        classid_format(0x10020, buf);
        assert_string_equal(buf, "1:20");
}

static void test_parent(void **state) {
        uint32_t p;
        char buf[16];

        (void) state;
        assert_int_equal(parent_parse("1:", &p), 0);
        assert_int_equal(p, 0x10000);
        assert_int_equal(parent_parse("1:10", &p), 0);
        assert_int_equal(p, 0x10010);
        assert_true(parent_parse("ffff:", &p) < 0);
        assert_true(parent_parse("0:", &p) < 0);
        assert_true(parent_parse("1", &p) < 0);
        assert_true(parent_parse("0x1:", &p) < 0);
        parent_format(0x10000, buf);
        assert_string_equal(buf, "1:");
        parent_format(0x10020, buf);
        assert_string_equal(buf, "1:20");
        expect_error("{\"ingress\":[{\"name\":\"a\",\"object\":\"" D1 "\",\"parent\":\"1:\"}]}",
                     ERROR_INVALID_VALUE, "ingress[0].parent");
        expect_error("{\"egress\":[{\"name\":\"a\",\"object\":\"" D1 "\",\"parent\":\"ffff:\"}]}",
                     ERROR_INVALID_VALUE, "egress[0].parent");
}

static void test_too_many_filters(void **state) {
        char text[16384], *p = text;

        (void) state;
        p += sprintf(p, "{\"ingress\":[");
        for (int i = 0; i <= FILTERS_PER_HOOK_MAX; i++)
                p += sprintf(p, "%s{\"name\":\"f%d\",\"object\":\"" D1 "\"}", i ? "," : "", i);
        sprintf(p, "]}");
        expect_error(text, ERROR_INVALID_VALUE, "at most");
}

static void expect_hog_error(const char *text, const char *in_message) {
        Document *d = NULL;
        Error e = ERROR_NULL;

        assert_true(document_hog_from_string(text, strlen(text), &d, &e) < 0);
        assert_null(d);
        if (!e.message || !strstr(e.message, in_message))
                fail_msg("for %s: message \"%s\" does not name \"%s\"", text, e.message, in_message);
        error_done(&e);
}

static void test_hog(void **state) {
        const char *text = "{\"ifname\":\"eth0\",\"egress\":[{\"name\":\"a\",\"object\":\"/x/a.o\"}]}";
        Document *d = NULL;
        Error e = ERROR_NULL;

        (void) state;
        assert_int_equal(document_hog_from_string(text, strlen(text), &d, &e), 0);
        assert_string_equal(d->ifname, "eth0");
        assert_int_equal(d->source, SOURCE_HOG);
        assert_int_equal(d->n_filters[DIRECTION_EGRESS], 1);
        assert_int_equal(d->n_filters[DIRECTION_INGRESS], 0);
        document_free(d);

        expect_hog_error("{\"ingress\":[]}", "ifname");
        expect_hog_error("[1]", "ifname");
        expect_hog_error("{\"ifname\":\"a/b\"}", "a/b");
        expect_hog_error("{\"ifname\":\"eth0\",\"ingress\":[{\"name\":\"a\",\"object\":\"" D1 "\"}]}",
                         "ingress[0].object: a hog names its object by absolute path");
        expect_hog_error(
                "{\"ifname\":\"eth0\",\"egress\":[{\"name\":\"a\",\"object\":\"/x/a.o\",\"actions\":[{"
                "\"object\":\"" D1 "\"}]}]}",
                "egress[0].actions[0].object: a hog names its object by absolute path");
        expect_hog_error("{\"ifname\":\"eth0\",\"colour\":1}", "colour");
        expect_hog_error("{\"ifname\":", "malformed JSON");
        expect_hog_error("{\"ifname\":\"eth0\",\"netns\":\"a/b\"}", "netns");
        expect_hog_error("{\"ifname\":\"eth0\",\"netns\":7}", "netns");

        text = "{\"ifname\":\"eth0\",\"netns\":\"ns-1\"}";
        assert_int_equal(document_hog_from_string(text, strlen(text), &d, &e), 0);
        assert_string_equal(d->netns, "ns-1");
        document_free(d);

        assert_true(netns_name_valid("a.b_c-1"));
        assert_false(netns_name_valid(""));
        assert_false(netns_name_valid(".."));
        assert_false(netns_name_valid("a b"));
        assert_false(netns_name_valid("a/b"));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_defaults),     cmocka_unit_test(test_roundtrip),
                cmocka_unit_test(test_errors),       cmocka_unit_test(test_actions_shape),
                cmocka_unit_test(test_ifname_valid), cmocka_unit_test(test_classid),
                cmocka_unit_test(test_parent),       cmocka_unit_test(test_too_many_filters),
                cmocka_unit_test(test_hog),          cmocka_unit_test(test_maps),
                cmocka_unit_test(test_maps_shared),  cmocka_unit_test(test_metrics),
        };
        return cmocka_run_group_tests_name("document", tests, NULL, NULL);
}
