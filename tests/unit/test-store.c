/* test-store.c: the state directory: durable documents, crash leftovers, quarantine of corrupt files,
 * refusal of a newer format, content-addressed objects, and SHA-256 itself. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "fileio.h"
#include "store.h"
#include "store-policy.h"

#define D1 "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static char dir[256];

static int setup(void **state) {
        (void) state;
        snprintf(dir, sizeof(dir), "/tmp/clsd-test-store-XXXXXX");
        assert_non_null(mkdtemp(dir));
        return 0;
}

static int teardown(void **state) {
        char cmd[300];
        (void) state;
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        return system(cmd);
}

static Document *make_doc(const char *ifname, uint64_t gen, uint32_t priority) {
        char text[256];
        Document *d = NULL;
        Error e = ERROR_NULL;

        snprintf(text, sizeof(text),
                 "{\"ingress\":[{\"name\":\"web\",\"object\":\"" D1
                 "\",\"program\":\"p\",\"priority\":%u}]}",
                 priority);
        assert_int_equal(document_from_string(ifname, text, strlen(text), &d, &e), 0);
        d->generation = gen;
        return d;
}

static void write_file(const char *rel, const char *text) {
        char path[512];
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", dir, rel);
        f = fopen(path, "we");
        assert_non_null(f);
        fputs(text, f);
        fclose(f);
}

static bool exists(const char *rel) {
        char path[512];
        struct stat st;
        snprintf(path, sizeof(path), "%s/%s", dir, rel);
        return stat(path, &st) == 0;
}

static int n_problems;
static void count_problem(const char *path, const char *reason, void *userdata) {
        (void) path, (void) reason, (void) userdata;
        n_problems++;
}

static void load(Store *s, StoredDocument **docs, size_t *n) {
        Error e = ERROR_NULL;
        n_problems = 0;
        assert_int_equal(store_documents_load(s, SOURCE_API, docs, n, count_problem, NULL, &e), 0);
}

static void free_docs(StoredDocument *docs, size_t n) {
        stored_documents_free(docs, n);
}

/* What clsd attached for one filter: its program, and its actions'. */
static FilterFact fact(const char *name, const char *tag, uint32_t prog_id) {
        FilterFact f = { 0 };

        snprintf(f.name, sizeof(f.name), "%s", name);
        snprintf(f.program.tag, sizeof(f.program.tag), "%s", tag);
        f.program.prog_id = prog_id;
        return f;
}

static void test_save_load(void **state) {
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_(document_freep) Document *d = make_doc("eth0", 3, 10);
        DocumentFacts facts = { .clsact_created = true };
        FilterFact web = fact("web", "0123456789abcdef", 42);
        StoredDocument *docs;
        size_t n;
        Error e = ERROR_NULL;

        (void) state;
        assert_int_equal(store_open(dir, &s, &e), 0);
        assert_int_equal(document_facts_set(&facts, &web), 0);
        assert_int_equal(store_document_save(s, d, &facts, &e), 0);
        document_facts_done(&facts);
        load(s, &docs, &n);
        assert_int_equal(n, 1);
        assert_int_equal(n_problems, 0);
        assert_string_equal(docs[0].doc->ifname, "eth0");
        assert_int_equal(docs[0].doc->generation, 3);
        assert_true(docs[0].facts.clsact_created);
        assert_int_equal(docs[0].doc->filters[DIRECTION_INGRESS][0].priority, 10);
        const FilterFact *back = document_facts_find(&docs[0].facts, "web");
        assert_non_null(back);
        assert_string_equal(back->program.tag, "0123456789abcdef");
        assert_int_equal(back->program.prog_id, 42);
        assert_null(document_facts_find(&docs[0].facts, "other"));
        free_docs(docs, n);

        assert_int_equal(store_document_remove(s, SOURCE_API, NULL, "eth0", &e), 0);
        load(s, &docs, &n);
        assert_int_equal(n, 0);
        free_docs(docs, n);
}

/* A document with actions is format 4, with what each action attached; one without any stays in the
 * format before, so that an older clsd reads it. An action not resolved is a corrupt file. */
static void test_actions_format(void **state) {
        _cleanup_(store_freep) Store *s = NULL;
        const char *text = "{\"ingress\":[{\"name\":\"web\",\"object\":\"" D1
                           "\",\"program\":\"p\",\"actions\":[{\"object\":\"" D1 "\",\"program\":\"a\"}]}]}";
        _cleanup_(document_freep) Document *d = NULL;
        _cleanup_free_ char *file = NULL;
        DocumentFacts facts = { 0 };
        FilterFact web = fact("web", "0123456789abcdef", 42);
        StoredDocument *docs;
        size_t n, size;
        char path[512];
        Error e = ERROR_NULL;

        (void) state;
        assert_int_equal(store_open(dir, &s, &e), 0);
        assert_int_equal(document_from_string("eth0", text, strlen(text), &d, &e), 0);
        web.n_actions = 1;
        snprintf(web.actions[0].tag, sizeof(web.actions[0].tag), "fedcba9876543210");
        web.actions[0].prog_id = 43;
        assert_int_equal(document_facts_set(&facts, &web), 0);
        assert_int_equal(store_document_save(s, d, &facts, &e), 0);
        document_facts_done(&facts);
        snprintf(path, sizeof(path), "%s/documents/eth0.json", dir);
        assert_int_equal(read_full_file(path, 1 << 20, &file, &size), 0);
        assert_non_null(strstr(file, "\"format\": 4"));
        load(s, &docs, &n);
        assert_int_equal(n, 1);
        assert_int_equal(n_problems, 0);
        const FilterSpec *g = &docs[0].doc->filters[DIRECTION_INGRESS][0];
        const FilterFact *back = document_facts_find(&docs[0].facts, "web");
        assert_int_equal(g->n_actions, 1);
        assert_false(g->direct_action);
        assert_string_equal(g->actions[0].program, "a");
        assert_non_null(back);
        assert_int_equal(back->n_actions, 1);
        assert_string_equal(back->actions[0].tag, "fedcba9876543210");
        assert_int_equal(back->actions[0].prog_id, 43);
        assert_int_equal(back->program.prog_id, 42);
        free_docs(docs, n);

        write_file("documents/eth1.json",
                   "{\"format\":4,\"ifname\":\"eth1\",\"generation\":1,\"spec\":{\"ingress\":"
                   "[{\"name\":\"a\",\"object\":\"" D1 "\",\"program\":\"p\",\"actions\":[{"
                   "\"object\":\"/x.o\"}]}]}}");
        load(s, &docs, &n);
        assert_int_equal(n, 1);
        assert_int_equal(n_problems, 1);
        assert_false(exists("documents/eth1.json")); /* set aside under quarantine/, with a timestamp */
        free_docs(docs, n);
}

/* The same interface name in clsd's own namespace and in a named one: two files, two documents. */
static void test_netns_documents(void **state) {
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_(document_freep) Document *own = make_doc("eth0", 1, 10), *other = make_doc("eth0", 7, 20);
        StoredDocument back = { 0 }, *docs;
        size_t n;
        Error e = ERROR_NULL;

        (void) state;
        assert_int_equal(store_open(dir, &s, &e), 0);
        other->netns = strdup("ns-1");
        assert_int_equal(store_document_save(s, own, NULL, &e), 0);
        assert_int_equal(store_document_save(s, other, NULL, &e), 0);
        assert_true(exists("documents/eth0.json"));
        assert_true(exists("documents/ns-1@eth0.json"));
        load(s, &docs, &n);
        assert_int_equal(n, 2);
        free_docs(docs, n);
        assert_int_equal(store_document_load(s, SOURCE_API, "ns-1", "eth0", &back, &e), 0);
        assert_string_equal(back.doc->netns, "ns-1");
        assert_int_equal(back.doc->generation, 7);
        document_unref(back.doc);
        document_facts_done(&back.facts);
        assert_int_equal(store_document_remove(s, SOURCE_API, "ns-1", "eth0", &e), 0);
        assert_true(exists("documents/eth0.json"));
        assert_false(exists("documents/ns-1@eth0.json"));
}

/* A crash while writing leaves a truncated temporary file: it is ignored and removed, and the last
 * good version stays. */
static void test_crash_leftover(void **state) {
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_(document_freep) Document *d = make_doc("eth1", 1, 10);
        StoredDocument *docs;
        size_t n;
        Error e = ERROR_NULL;

        (void) state;
        assert_int_equal(store_open(dir, &s, &e), 0);
        assert_int_equal(store_document_save(s, d, NULL, &e), 0);
        write_file("documents/.eth1.json.4242.tmp", "{\"format\":1,\"ifname\":\"eth1\",\"gener");
        load(s, &docs, &n);
        assert_int_equal(n, 1);
        assert_int_equal(n_problems, 0);
        assert_int_equal(docs[0].doc->generation, 1);
        assert_false(exists("documents/.eth1.json.4242.tmp"));
        free_docs(docs, n);
}

static void test_corrupt_is_quarantined(void **state) {
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_(document_freep) Document *d = make_doc("eth2", 1, 10);
        StoredDocument *docs;
        size_t n;
        Error e = ERROR_NULL;

        (void) state;
        assert_int_equal(store_open(dir, &s, &e), 0);
        assert_int_equal(store_document_save(s, d, NULL, &e), 0);
        write_file("documents/bad.json",
                   "{\"format\":1,\"ifname\":\"bad\",\"generation\":1,\"spec\":{\"ingress\":[{]}}");
        write_file("documents/bad2.json",
                   "{\"format\":1,\"ifname\":\"bad2\",\"generation\":1,\"spec\":{\"x\":1}}");
        /* valid as a PUT body, but a stored filter must be resolved (digest and program) */
        write_file("documents/bad3.json", "{\"format\":1,\"ifname\":\"bad3\",\"generation\":1,\"spec\":"
                                          "{\"ingress\":[{\"name\":\"a\",\"object\":\"/x.o\"}]}}");
        load(s, &docs, &n);
        assert_int_equal(n, 1);
        assert_int_equal(n_problems, 3);
        assert_false(exists("documents/bad.json"));
        assert_false(exists("documents/bad2.json"));
        assert_false(exists("documents/bad3.json"));
        assert_true(exists("quarantine"));
        free_docs(docs, n);
        /* and the quarantine holds them, not lost */
        assert_int_equal(system("test $(ls /tmp/clsd-test-store-*/quarantine | grep -c '^bad') -ge 3"), 0);
}

static void test_newer_format_refused_left_in_place(void **state) {
        _cleanup_(store_freep) Store *s = NULL;
        StoredDocument *docs;
        size_t n;
        Error e = ERROR_NULL;

        (void) state;
        assert_int_equal(store_open(dir, &s, &e), 0);
        write_file("documents/new.json", "{\"format\":99,\"ifname\":\"new\",\"generation\":1,\"spec\":{}}");
        load(s, &docs, &n);
        assert_int_equal(n, 0);
        assert_int_equal(n_problems, 1);
        assert_true(exists("documents/new.json"));
        free_docs(docs, n);
}

static void test_objects(void **state) {
        _cleanup_(store_freep) Store *s = NULL;
        char digest[SHA256_DIGEST_STRING_MAX], digest2[SHA256_DIGEST_STRING_MAX];
        _cleanup_free_ char *data = NULL;
        char **list;
        size_t n, size;
        bool created;
        Error e = ERROR_NULL;

        (void) state;
        assert_int_equal(store_open(dir, &s, &e), 0);
        assert_int_equal(store_object_put(s, "abc", 3, digest, &created, &e), 0);
        assert_true(created);
        assert_string_equal(digest,
                            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_int_equal(store_object_put(s, "abc", 3, digest2, &created, &e), 0);
        assert_false(created);
        assert_string_equal(digest, digest2);
        assert_int_equal(store_object_exists(s, digest), 1);
        assert_int_equal(store_object_read(s, digest, 100, &data, &size), 0);
        assert_int_equal(size, 3);
        assert_memory_equal(data, "abc", 3);
        write_file("objects/not-ours.o", "x");
        assert_int_equal(store_object_list(s, &list, &n), 0);
        assert_int_equal(n, 1);
        assert_string_equal(list[0], digest);
        strv_free_n(list, n);
        assert_int_equal(store_object_remove(s, digest, &e), 0);
        assert_int_equal(store_object_exists(s, digest), 0);
        assert_true(store_object_remove(s, digest, &e) < 0);
        assert_int_equal(e.code, ERROR_OBJECT_NOT_FOUND);
        error_done(&e);
}

static void test_sha256(void **state) {
        char out[SHA256_DIGEST_STRING_MAX];
        char *million = malloc(1000000);

        (void) state;
        sha256_digest_string("", 0, out);
        assert_string_equal(out, "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        sha256_digest_string("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56, out);
        assert_string_equal(out, "sha256:248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
        memset(million, 'a', 1000000);
        sha256_digest_string(million, 1000000, out);
        assert_string_equal(out, "sha256:cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
        free(million);
        assert_true(sha256_digest_string_valid(out));
        assert_false(sha256_digest_string_valid(
                "sha256:CDC76E5C9914FB9281A1C7E284D73E67F1809A48A497200E046D39CCC7112CD0"));
        assert_false(sha256_digest_string_valid("sha256:abc"));
}

static Policy *make_policy(const char *name, uint64_t gen, uint64_t fleet_revision) {
        const char *text =
                "{\"match\":{\"ifname\":[\"eth*\"]},\"ingress\":[{\"name\":\"web\",\"object\":\"" D1
                "\",\"program\":\"p\",\"priority\":10}]}";
        json_t *j = json_loads(text, 0, NULL);
        Policy *p = NULL;
        Error e = ERROR_NULL;

        assert_non_null(j);
        assert_int_equal(policy_from_json(name, j, &p, &e), 0);
        json_decref(j);
        p->generation = gen;
        p->fleet_revision = fleet_revision;
        return p;
}

/* "name:generation:fleet_revision,…" of the stored policies, in the directory's order. */
static void load_policies(Store *s, char *buf, size_t size) {
        Policy **v = NULL;
        size_t n = 0, off = 0;
        Error e = ERROR_NULL;

        n_problems = 0;
        assert_int_equal(store_policies_load(s, &v, &n, count_problem, NULL, &e), 0);
        buf[0] = 0;
        for (size_t i = 0; i < n; i++) {
                off += (size_t) snprintf(buf + off, size - off, "%s%s:%" PRIu64 ":%" PRIu64, i ? "," : "",
                                         v[i]->name, v[i]->generation, v[i]->fleet_revision);
                policy_unref(v[i]);
        }
        free(v);
}

/* Several policies changed as one: a crash after the journal is written (and anywhere after) leaves a
 * store that the next load completes; a corrupt journal is set aside and the store is as before. */
static void test_policies_commit(void **state) {
        _cleanup_(store_freep) Store *s = NULL;
        Policy *a1 = make_policy("a", 1, 5), *b1 = make_policy("b", 1, 5), *c1 = make_policy("c", 1, 5);
        Policy *a2 = make_policy("a", 2, 9), *d1 = make_policy("d", 1, 9);
        Policy *put[] = { a2, d1 };
        char *removed[] = { (char *) "c" };
        json_t *journal = NULL;
        char buf[256];
        Error e = ERROR_NULL;

        (void) state;
        assert_int_equal(store_open(dir, &s, &e), 0);
        assert_int_equal(store_policy_save(s, a1, &e), 0);
        assert_int_equal(store_policy_save(s, b1, &e), 0);
        assert_int_equal(store_policy_save(s, c1, &e), 0);

        /* the journal written, nothing carried out: the load carries it out */
        assert_int_equal(store_policies_commit_begin(s, put, 2, removed, 1, &journal, &e), 0);
        json_decref(journal);
        assert_true(exists("policies.commit"));
        load_policies(s, buf, sizeof(buf));
        assert_string_equal(buf, "a:2:9,b:1:5,d:1:9");
        assert_int_equal(n_problems, 1);
        assert_false(exists("policies.commit"));

        /* half carried out (a written, c still there): the same */
        assert_int_equal(store_policy_save(s, a1, &e), 0);
        assert_int_equal(store_policy_save(s, c1, &e), 0);
        assert_int_equal(store_policy_remove(s, "d", &e), 0);
        assert_int_equal(store_policies_commit_begin(s, put, 2, removed, 1, &journal, &e), 0);
        json_decref(journal);
        assert_int_equal(store_policy_save(s, a2, &e), 0);
        load_policies(s, buf, sizeof(buf));
        assert_string_equal(buf, "a:2:9,b:1:5,d:1:9");

        /* a corrupt journal: set aside, the store as it was */
        write_file("policies.commit", "{\"format\":1,\"put\":[{\"name\":\"../x\"}],\"remove\":[]}");
        load_policies(s, buf, sizeof(buf));
        assert_string_equal(buf, "a:2:9,b:1:5,d:1:9");
        assert_int_equal(n_problems, 1);
        assert_false(exists("policies.commit"));
        assert_int_equal(
                system("test $(ls /tmp/clsd-test-store-*/quarantine | grep -c '^policies.commit') -ge 1"),
                0);

        /* the whole commit: no journal left, nothing to report */
        assert_int_equal(
                store_policies_commit(s, (Policy *[]){ a1, c1 }, 2, (char *[]){ (char *) "d" }, 1, &e), 0);
        assert_false(exists("policies.commit"));
        load_policies(s, buf, sizeof(buf));
        assert_string_equal(buf, "a:1:5,b:1:5,c:1:5");
        assert_int_equal(n_problems, 0);
        /* a journal left behind (a write that failed) is carried out before a later write, never after
         * it: the later write wins */
        Policy *a3 = make_policy("a", 3, 12);
        assert_int_equal(store_policies_commit_begin(s, put, 2, removed, 1, &journal, &e), 0);
        json_decref(journal);
        assert_int_equal(store_policy_save(s, a3, &e), 0);
        assert_false(exists("policies.commit"));
        load_policies(s, buf, sizeof(buf));
        assert_string_equal(buf, "a:3:12,b:1:5,d:1:9");
        assert_int_equal(n_problems, 0);
        policy_unref(a3);
        policy_unref(a1), policy_unref(b1), policy_unref(c1), policy_unref(a2), policy_unref(d1);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_save_load, setup, teardown),
                cmocka_unit_test_setup_teardown(test_crash_leftover, setup, teardown),
                cmocka_unit_test_setup_teardown(test_corrupt_is_quarantined, setup, teardown),
                cmocka_unit_test_setup_teardown(test_newer_format_refused_left_in_place, setup, teardown),
                cmocka_unit_test_setup_teardown(test_actions_format, setup, teardown),
                cmocka_unit_test_setup_teardown(test_objects, setup, teardown),
                cmocka_unit_test_setup_teardown(test_netns_documents, setup, teardown),
                cmocka_unit_test_setup_teardown(test_policies_commit, setup, teardown),
                cmocka_unit_test(test_sha256),
        };
        return cmocka_run_group_tests_name("store", tests, NULL, NULL);
}
