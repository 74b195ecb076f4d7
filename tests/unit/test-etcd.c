/* test-etcd.c: etcd's gateway bodies and answers (base64, ranges, watch messages with a compaction), and
 * the fleet's formats: labels, a fleet policy's envelope, node selection, the digests it names. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd.h"

#define DIGEST "sha256:55c5ed830dd7205b646e7555cd04ac05dceecd4f53117c81dfd60f7d266e752c"

static void test_base64(void **state) {
        static const char bytes[] = { 0, 1, 2, (char) 0xff, 'a' };
        _cleanup_free_ char *s = NULL, *back = NULL, *bad = NULL;
        size_t n;

        (void) state;
        assert_int_equal(etcd_b64_encode(bytes, sizeof(bytes), &s), 0);
        assert_string_equal(s, "AAEC/2E=");
        assert_int_equal(etcd_b64_decode(s, &back, &n), 0);
        assert_int_equal(n, sizeof(bytes));
        assert_memory_equal(back, bytes, n);
        assert_int_equal(etcd_b64_decode("a!b=", &bad, &n), -EINVAL);
        free(back);
        back = NULL;
        assert_int_equal(etcd_b64_decode("", &back, &n), 0);
        assert_int_equal(n, 0);
        assert_string_equal(back, "");
}

static void test_prefix_end_and_keys(void **state) {
        _cleanup_free_ char *end = etcd_prefix_end("/clsd/"),
                            *key = fleet_key("/clsd/", "status", "h1", "p");
        _cleanup_free_ char *k2 = fleet_key("/clsd/", "policies", NULL, NULL);

        (void) state;
        assert_string_equal(end, "/clsd0");
        assert_string_equal(key, "/clsd/status/h1/p");
        assert_string_equal(k2, "/clsd/policies/");
        assert_true(fleet_prefix_valid("/clsd/"));
        assert_false(fleet_prefix_valid("clsd/"));
        assert_false(fleet_prefix_valid("/clsd"));
        assert_false(fleet_prefix_valid("/a b/"));
        assert_true(fleet_node_name_valid("edge-1.example"));
        assert_false(fleet_node_name_valid("a/b"));
        assert_false(fleet_node_name_valid(""));
}

static void test_labels(void **state) {
        _cleanup_free_ FleetLabel *v = NULL;
        size_t n;
        Error e = ERROR_NULL;

        (void) state;
        assert_int_equal(fleet_labels_parse("role=edge,zone=", &v, &n, NULL), 0);
        assert_int_equal(n, 2);
        assert_string_equal(v[0].key, "role");
        assert_string_equal(v[1].value, "");
        assert_int_equal(fleet_labels_parse("role", &v, &n, &e), -EINVAL);
        assert_non_null(strstr(e.message, "KEY=VALUE"));
        error_done(&e);
        assert_int_equal(fleet_labels_parse("a=1,a=2", &v, &n, &e), -EINVAL);
        assert_non_null(strstr(e.message, "twice"));
        error_done(&e);
        assert_int_equal(fleet_labels_parse("a b=1", &v, &n, &e), -EINVAL);
        error_done(&e);
        free(v);
        assert_int_equal(fleet_labels_parse("", &v, &n, NULL), 0);
        assert_int_equal(n, 0);
}

static json_t *load(const char *text) {
        json_t *j = json_loads(text, 0, NULL);
        assert_non_null(j);
        return j;
}

static void test_policy_envelope_and_selection(void **state) {
        FleetLabel edge[] = { { "role", "edge" }, { "zone", "a" } }, core[] = { { "role", "core" } };
        FleetPolicy p = { 0 };
        const char **digests = NULL;
        Error e = ERROR_NULL;
        json_t *j;

        (void) state;
        j = load("{\"name\": \"c\", \"nodes\": {\"labels\": {\"role\": \"edge\"}, \"names\": [\"h9\"]}, "
                 "\"match\": "
                 "{\"ifname\": [\"eth*\"]}, \"ingress\": [{\"name\": \"f\", \"object\": \"" DIGEST "\", "
                 "\"actions\": [{\"object\": \"" DIGEST "\"}]}]}");
        assert_int_equal(fleet_policy_parse(j, &p, &e), 0);
        json_decref(j);
        assert_string_equal(p.name, "c");
        assert_null(json_object_get(p.policy, "name"));
        assert_null(json_object_get(p.policy, "nodes"));
        assert_non_null(json_object_get(p.policy, "match"));
        assert_true(fleet_policy_selects(&p, "h1", edge, 2));
        assert_false(fleet_policy_selects(&p, "h1", core, 1));
        assert_true(fleet_policy_selects(&p, "h9", core, 1)); /* named: either matches */
        assert_int_equal(fleet_policy_digests(&p, &digests, NULL), 0);
        assert_string_equal(digests[0], DIGEST);
        assert_null(digests[1]); /* once, though named twice */
        free(digests);
        fleet_policy_done(&p);

        j = load("{\"name\": \"c\", \"match\": {}, \"ingress\": [{\"object\": \"/x.o\"}]}");
        assert_int_equal(fleet_policy_parse(j, &p, NULL), 0);
        json_decref(j);
        assert_true(p.any_node && fleet_policy_selects(&p, "any", NULL, 0));
        assert_int_equal(fleet_policy_digests(&p, &digests, &e), -EINVAL);
        assert_non_null(strstr(e.message, "ingress[0].object"));
        error_done(&e);
        fleet_policy_done(&p);

        static const char *const bad[] = {
                "[]",
                "{\"match\": {}}",
                "{\"name\": \"a/b\"}",
                "{\"name\": \"a\", \"nodes\": {}}",
                "{\"name\": \"a\", \"nodes\": {\"labels\": {\"k\": 1}}}",
                "{\"name\": \"a\", \"nodes\": {\"names\": [\"x y\"]}}",
                "{\"name\": \"a\", \"nodes\": {\"hosts\": []}}",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                j = load(bad[i]);
                assert_int_equal(fleet_policy_parse(j, &p, &e), -EINVAL);
                assert_non_null(e.message);
                error_done(&e);
                json_decref(j);
        }
}

static void test_answers(void **state) {
        EtcdKv *kvs = NULL;
        size_t n;
        uint64_t revision;
        EtcdWatchMessage m;
        json_t *j;

        (void) state;
        /* /clsd/policies/p = {} at mod_revision 7; the store at 9 */
        j = load("{\"header\": {\"revision\": \"9\"}, \"kvs\": [{\"key\": \"L2Nsc2QvcG9saWNpZXMvcA==\", "
                 "\"create_revision\": \"5\", \"mod_revision\": \"7\", \"value\": \"e30=\", \"lease\": "
                 "\"12\"}], "
                 "\"count\": \"1\"}");
        assert_int_equal(etcd_range_parse(j, &kvs, &n, &revision, NULL), 0);
        json_decref(j);
        assert_int_equal(n, 1);
        assert_int_equal(revision, 9);
        assert_string_equal(kvs[0].key, "/clsd/policies/p");
        assert_string_equal(kvs[0].value, "{}");
        assert_int_equal(kvs[0].mod_revision, 7);
        assert_int_equal(kvs[0].lease, 12);
        etcd_kvs_free(kvs, n);

        j = load("{\"result\": {\"header\": {\"revision\": \"20\"}, \"events\": [{\"type\": \"DELETE\", "
                 "\"kv\": "
                 "{\"key\": \"L2Nsc2QvcG9saWNpZXMvcA==\", \"mod_revision\": \"20\"}}, {\"kv\": {\"key\": "
                 "\"L2Nsc2QvcG9saWNpZXMvcA==\", \"mod_revision\": \"20\", \"value\": \"e30=\"}}]}}");
        assert_int_equal(etcd_watch_parse(j, &m, NULL), 0);
        json_decref(j);
        assert_int_equal(m.n_events, 2);
        assert_true(m.deleted[0]);
        assert_false(m.deleted[1]);
        assert_int_equal(m.events[0].value_size, 0);
        assert_int_equal(m.revision, 20);
        etcd_watch_message_done(&m);

        j = load("{\"result\": {\"header\": {\"revision\": \"30\"}, \"compact_revision\": \"25\", "
                 "\"canceled\": "
                 "true}}");
        assert_int_equal(etcd_watch_parse(j, &m, NULL), 0);
        json_decref(j);
        assert_true(m.canceled);
        assert_int_equal(m.compact_revision, 25);
        etcd_watch_message_done(&m);

        Error e = ERROR_NULL;
        j = load("{\"error\": {\"grpc_code\": 14, \"message\": \"etcdserver: no leader\"}}");
        assert_int_equal(etcd_watch_parse(j, &m, &e), -EPROTO);
        assert_non_null(strstr(e.message, "no leader"));
        error_done(&e);
        json_decref(j);
        /* a key that is not base64 */
        j = load("{\"kvs\": [{\"key\": \"!!\"}]}");
        assert_int_equal(etcd_range_parse(j, &kvs, &n, NULL, &e), -EPROTO);
        error_done(&e);
        json_decref(j);
}

static void test_bodies(void **state) {
        json_t *j = etcd_put_body("/k", "v", 1, 42);
        _cleanup_free_ char *text = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT);

        (void) state;
        assert_string_equal(text, "{\"key\":\"L2s=\",\"lease\":\"42\",\"value\":\"dg==\"}");
        json_decref(j);
        j = etcd_watch_body("/clsd/", true, 8, 0);
        free(text);
        text = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT);
        assert_string_equal(
                text, "{\"create_request\":{\"key\":\"L2Nsc2Qv\",\"progress_notify\":true,\"range_end\":"
                      "\"L2Nsc2Qw\",\"start_revision\":\"8\",\"watch_id\":\"0\"}}");
        json_decref(j);
        /* a range that only counts, and its answer's count (etcd leaves a count of 0 out) */
        j = etcd_count_body("/clsd/nodes/");
        free(text);
        text = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT);
        assert_string_equal(text, "{\"count_only\":true,\"key\":\"L2Nsc2Qvbm9kZXMv\",\"range_end\":"
                                  "\"L2Nsc2Qvbm9kZXMw\"}");
        json_decref(j);
        j = load("{\"header\":{\"revision\":\"9\"},\"count\":\"901\"}");
        assert_int_equal(etcd_range_count(j), 901);
        json_decref(j);
        j = load("{\"header\":{\"revision\":\"9\"}}");
        assert_int_equal(etcd_range_count(j), 0);
        json_decref(j);
        assert_int_equal(etcd_range_count(NULL), 0);
}

/* etcd's auth errors as its gateway answers them (captured from etcd 3.4), and the signed envelope. */
/* etcd's error answer text, with HTTP status, is the errno and code etcd_answer_error() says. */
static void assert_answer_error(long status, const char *text, int error, ErrorCode code) {
        _cleanup_error_ Error e = ERROR_NULL;
        json_t *j = load(text);

        assert_int_equal(etcd_answer_error(status, j, &e), error);
        assert_int_equal(e.code, code);
        json_decref(j);
}

static void test_auth_and_signed(void **state) {
        Error e = ERROR_NULL;
        json_t *j;
        FleetPolicy p = { 0 };
        size_t size = 0;

        (void) state;
        assert_answer_error(
                403,
                "{\"error\":\"etcdserver: permission denied\",\"code\":7,\"message\":\"etcdserver: "
                "permission denied\"}",
                -EACCES, ERROR_ETCD_PERMISSION_DENIED);
        assert_answer_error(
                401,
                "{\"error\":\"etcdserver: invalid auth token\",\"code\":16,\"message\":\"etcdserver: "
                "invalid auth token\"}",
                -EKEYEXPIRED, ERROR_ETCD_TOKEN_INVALID);
        /* a JWT token older than the users and roles made since: a new login */
        assert_answer_error(
                400,
                "{\"error\":\"etcdserver: revision of auth store is old\",\"code\":3,\"message\":"
                "\"etcdserver: revision of auth store is old\"}",
                -EKEYEXPIRED, ERROR_ETCD_TOKEN_INVALID);
        assert_answer_error(
                400,
                "{\"code\":3,\"message\":\"etcdserver: authentication failed, invalid user ID or "
                "password\"}",
                -EACCES, ERROR_ETCD_AUTH_FAILED);
        /* etcd busy, as its 3.4 gateway answered a mass start's puts: HTTP 500, gRPC's unknown (2) */
        assert_answer_error(
                500,
                "{\"error\":\"etcdserver: too many requests\",\"code\":2,\"message\":\"etcdserver: too "
                "many requests\"}",
                -EAGAIN, ERROR_ETCD_OVERLOADED);
        assert_answer_error(500, "{\"code\":2,\"message\":\"etcdserver: request timed out\"}", -EAGAIN,
                            ERROR_ETCD_OVERLOADED);
        /* another server error is not busy: the connection's to lose */
        assert_answer_error(500, "{\"code\":2,\"message\":\"etcdserver: mvcc: database space exceeded\"}",
                            -EPROTO, ERROR_ETCD_ERROR);
        /* the probe: a never-true compare around a put */
        j = etcd_write_probe_body("/clsd/policies/");
        _cleanup_free_ char *text = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT);
        assert_string_equal(text, "{\"compare\":[{\"key\":\"L2Nsc2QvcG9saWNpZXMv\",\"result\":\"LESS\","
                                  "\"target\":\"VERSION\",\"version\":\"0\"}],\"success\":[{\"request_put\":"
                                  "{\"key\":\"L2Nsc2QvcG9saWNpZXMv\",\"value\":\"\"}}]}");
        json_decref(j);
        /* what a signature signs: the envelope without "signed", canonical, after its name and serial */
        j = load("{\"signed\":{\"serial\":7,\"signature\":\"x\"},\"name\":\"p\",\"match\":{\"ifname\":"
                 "[\"va\"]}}");
        _cleanup_free_ char *m = fleet_signed_message(j, 7, &size);
        assert_string_equal(m,
                            "clsd fleet policy v1\np\n7\n{\"match\":{\"ifname\":[\"va\"]},\"name\":\"p\"}");
        assert_int_equal(size, strlen(m));
        assert_int_equal(fleet_policy_parse(j, &p, NULL), 0);
        assert_int_equal(p.serial, 7);
        assert_string_equal(p.signed_text, m);
        assert_null(json_object_get(p.policy, "signed"));
        fleet_policy_done(&p);
        json_decref(j);
        /* a serial that is not a positive integer, a field it does not know */
        j = load("{\"signed\":{\"serial\":0,\"signature\":\"x\"},\"name\":\"p\"}");
        assert_int_equal(fleet_policy_parse(j, &p, &e), -EINVAL);
        error_done(&e);
        json_decref(j);
        /* a signed removal: its name and signature only */
        j = load("{\"name\":\"p\",\"removed\":true,\"signed\":{\"serial\":9,\"signature\":\"x\"}}");
        assert_int_equal(fleet_policy_parse(j, &p, NULL), 0);
        assert_true(p.removed);
        assert_int_equal(p.serial, 9);
        fleet_policy_done(&p);
        json_decref(j);
        j = load("{\"name\":\"p\",\"removed\":true,\"match\":{}}");
        assert_int_equal(fleet_policy_parse(j, &p, &e), -EINVAL);
        assert_int_equal(e.code, ERROR_UNKNOWN_FIELD);
        error_done(&e);
        json_decref(j);
        j = load("{\"signed\":{\"serial\":1,\"signature\":\"x\",\"by\":1},\"name\":\"p\"}");
        assert_int_equal(fleet_policy_parse(j, &p, &e), -EINVAL);
        assert_int_equal(e.code, ERROR_UNKNOWN_FIELD);
        error_done(&e);
        json_decref(j);
}

/* A lease long enough that the fleet's keepalives stay under their budget, doubled per lease etcd let
 * expire, bounded; a configured one as configured. */
static void test_a_lease_is_sized_by_the_fleet(void **state) {
        (void) state;
        assert_int_equal(fleet_lease_ttl(0, 0, 0), FLEET_LEASE_TTL_DEFAULT);
        assert_int_equal(fleet_lease_ttl(0, 200, 0), 20); /* a small fleet: the default */
        assert_int_equal(fleet_lease_ttl(0, 666, 0), 20);
        assert_int_equal(fleet_lease_ttl(0, 700, 0), 21); /* 3 x 700 / 100, rounded up */
        assert_int_equal(fleet_lease_ttl(0, 1000, 0), 30);
        assert_int_equal(fleet_lease_ttl(0, 2500, 0), 75);
        assert_int_equal(fleet_lease_ttl(0, 5000, 0), 150);
        assert_int_equal(fleet_lease_ttl(0, 100000, 0), FLEET_LEASE_TTL_SIZED_MAX);
        assert_int_equal(fleet_lease_ttl(0, UINT64_MAX / 4, 0), FLEET_LEASE_TTL_SIZED_MAX);
        /* expiries: each doubles, up to the bound */
        assert_int_equal(fleet_lease_ttl(0, 0, 1), 40);
        assert_int_equal(fleet_lease_ttl(0, 0, 2), 80);
        assert_int_equal(fleet_lease_ttl(0, 2500, 2), FLEET_LEASE_TTL_SIZED_MAX);
        assert_int_equal(fleet_lease_ttl(0, 0, 1000), FLEET_LEASE_TTL_SIZED_MAX);
        /* a fleet's keepalives under the budget at every size */
        for (uint64_t n = 1; n <= 10000; n += 37)
                assert_true(3 * n <= (uint64_t) fleet_lease_ttl(0, n, 0) * FLEET_KEEPALIVES_PER_SECOND ||
                            fleet_lease_ttl(0, n, 0) == FLEET_LEASE_TTL_SIZED_MAX);
        /* --fleet-lease-ttl is the operator's */
        assert_int_equal(fleet_lease_ttl(10, 5000, 3), 10);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_base64),          cmocka_unit_test(test_prefix_end_and_keys),
                cmocka_unit_test(test_labels),          cmocka_unit_test(test_policy_envelope_and_selection),
                cmocka_unit_test(test_answers),         cmocka_unit_test(test_bodies),
                cmocka_unit_test(test_auth_and_signed), cmocka_unit_test(test_a_lease_is_sized_by_the_fleet),
        };
        return cmocka_run_group_tests_name("etcd", tests, NULL, NULL);
}
