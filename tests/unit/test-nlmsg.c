/* test-nlmsg.c: tc message building and parsing, against bytes captured from a 6.18 kernel and, for
 * act_bpf, from Debian 12's 6.1 (tests/data/, refreshed with tests/tools/capture-nl.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <linux/tc_act/tc_bpf.h>
#include <stdio.h>

#include "fileio.h"
#include "nl-internal.h"

static char *read_data(const char *name, size_t *ret_size) {
        char path[512], *data = NULL;

        snprintf(path, sizeof(path), "%s/%s", TEST_DATA_DIR, name);
        assert_int_equal(read_full_file(path, 1 << 20, &data, ret_size), 0);
        return data;
}

static void test_filter_dump_parse(void **state) {
        size_t size;
        _cleanup_free_ char *data = read_data("filter-dump-ingress.bin", &size);
        NlFilter got[8];
        int n = (int) size, k = 0;

        (void) state;
        for (const struct nlmsghdr *h = (void *) data; mnl_nlmsg_ok(h, n); h = mnl_nlmsg_next(h, &n)) {
                NlFilter f;
                if (nl_filter_parse(h, &f) < 0 || f.handle == 0)
                        continue;
                assert_true(k < 8);
                got[k++] = f;
        }
        /* tests/data/filter-dump-ingress.txt is tc's view of the same filters. */
        assert_int_equal(k, 2);
        assert_int_equal(got[0].pref, 10);
        assert_int_equal(got[0].handle, 1);
        assert_int_equal(got[0].protocol, ETH_P_ALL);
        assert_string_equal(got[0].kind, "bpf");
        assert_string_equal(got[0].name, "clsd:web");
        assert_true(got[0].clsd_owned);
        assert_true(got[0].direct_action);
        assert_int_equal(got[0].prog_id, 769);
        assert_string_equal(got[0].tag, "ef838661037177a8");
        assert_int_equal(got[0].parent, TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_INGRESS));
        assert_int_equal(got[0].hook, NL_HOOK_INGRESS);

        assert_int_equal(got[1].pref, 20);
        assert_string_equal(got[1].name, "drop-port.bpf.o:[tc]");
        assert_false(got[1].clsd_owned);
        assert_int_equal(got[1].prog_id, 773);
        assert_string_equal(got[1].tag, "55c757340b2ded83");
}

static void test_filter_parse_rejects_other_messages(void **state) {
        size_t size;
        _cleanup_free_ char *data = read_data("link-get.bin", &size);
        NlFilter f;

        (void) state;
        assert_int_equal(nl_filter_parse((const struct nlmsghdr *) data, &f), -ENOMSG);
}

static void test_tc_event_parse(void **state) {
        size_t size, lsize;
        _cleanup_free_ char *data = read_data("filter-dump-ingress.bin", &size);
        _cleanup_free_ char *link = read_data("link-get.bin", &lsize);
        NlLink l;
        int ifindex = 0;

        (void) state;
        assert_int_equal(nl_link_parse((const struct nlmsghdr *) link, &l), 0);
        /* a filter message is a tc event of the interface it names */
        assert_int_equal(nl_tc_event_parse((const struct nlmsghdr *) data, &ifindex), 0);
        assert_int_equal(ifindex, l.ifindex);
        assert_int_equal(nl_tc_event_parse((const struct nlmsghdr *) link, &ifindex), -ENOMSG);
}

static void test_link_parse(void **state) {
        size_t size;
        _cleanup_free_ char *data = read_data("link-get.bin", &size);
        NlLink l;

        (void) state;
        assert_int_equal(nl_link_parse((const struct nlmsghdr *) data, &l), 0);
        assert_string_equal(l.ifname, "ca");
        assert_true(l.ifindex > 0);
}

static void test_extack_parse(void **state) {
        size_t size;
        _cleanup_free_ char *data = read_data("filter-add-error.bin", &size);
        char msg[256];

        (void) state;
        assert_int_equal(nl_ack_parse((const struct nlmsghdr *) data, msg, sizeof(msg)), -EINVAL);
        assert_string_equal(msg, "Parent Qdisc doesn't exists");
}

typedef struct Attrs {
        const struct nlattr *tb[TCA_MAX + 1];
        const struct nlattr *bpf[TCA_BPF_MAX + 1];
} Attrs;

static int attr_cb(const struct nlattr *a, void *data) {
        const struct nlattr **tb = data;
        tb[mnl_attr_get_type(a)] = a;
        return MNL_CB_OK;
}

static void parse_built(const struct nlmsghdr *nlh, Attrs *a) {
        *a = (Attrs){ 0 };
        assert_int_equal(mnl_attr_parse(nlh, sizeof(struct tcmsg), attr_cb, a->tb), MNL_CB_OK);
        if (a->tb[TCA_OPTIONS])
                assert_int_equal(mnl_attr_parse_nested(a->tb[TCA_OPTIONS], attr_cb, a->bpf), MNL_CB_OK);
}

static void test_build_bpf_filter(void **state) {
        char buf[NL_MSG_BUFFER_SIZE];
        NlBpfFilterSpec spec = { .ifindex = 7,
                                 .hook = NL_HOOK_EGRESS,
                                 .pref = 42,
                                 .handle = 1,
                                 .prog_fd = 9,
                                 .name = "clsd:web",
                                 .direct_action = true };
        struct nlmsghdr *nlh;
        const struct tcmsg *tcm;
        Attrs a;

        (void) state;
        nlh = nl_msg_bpf_filter(buf, &spec, false, 77);
        assert_int_equal(nlh->nlmsg_type, RTM_NEWTFILTER);
        assert_int_equal(nlh->nlmsg_seq, 77);
        assert_int_equal(nlh->nlmsg_flags, NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL);
        tcm = mnl_nlmsg_get_payload(nlh);
        assert_int_equal(tcm->tcm_ifindex, 7);
        assert_int_equal(tcm->tcm_parent, TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_EGRESS));
        assert_int_equal(tcm->tcm_handle, 1);
        assert_int_equal(TC_H_MAJ(tcm->tcm_info) >> 16, 42);
        assert_int_equal(ntohs((uint16_t) TC_H_MIN(tcm->tcm_info)), ETH_P_ALL);
        parse_built(nlh, &a);
        assert_string_equal(mnl_attr_get_str(a.tb[TCA_KIND]), "bpf");
        assert_int_equal(mnl_attr_get_u32(a.bpf[TCA_BPF_FD]), 9);
        assert_string_equal(mnl_attr_get_str(a.bpf[TCA_BPF_NAME]), "clsd:web");
        assert_int_equal(mnl_attr_get_u32(a.bpf[TCA_BPF_FLAGS]), TCA_BPF_FLAG_ACT_DIRECT);
        assert_null(a.bpf[TCA_BPF_CLASSID]);

        /* Replacing keeps pref and handle and asks for NLM_F_REPLACE; classic mode carries a classid. */
        spec.direct_action = false;
        spec.classid = 0x10010;
        nlh = nl_msg_bpf_filter(buf, &spec, true, 78);
        assert_int_equal(nlh->nlmsg_flags, NLM_F_REQUEST | NLM_F_CREATE | NLM_F_REPLACE);
        parse_built(nlh, &a);
        assert_int_equal(mnl_attr_get_u32(a.bpf[TCA_BPF_FLAGS]), 0);
        assert_int_equal(mnl_attr_get_u32(a.bpf[TCA_BPF_CLASSID]), 0x10010);
}

static void test_build_delete_and_clsact(void **state) {
        char buf[NL_MSG_BUFFER_SIZE];
        struct nlmsghdr *nlh;
        const struct tcmsg *tcm;
        Attrs a;

        (void) state;
        /* One exact filter: pref, protocol and handle, so that foreign filters at the pref stay. */
        nlh = nl_msg_filter_del(buf, 3, nl_hook_parent(NL_HOOK_INGRESS), 10, ETH_P_ALL, 1, 5);
        assert_int_equal(nlh->nlmsg_type, RTM_DELTFILTER);
        tcm = mnl_nlmsg_get_payload(nlh);
        assert_int_equal(tcm->tcm_parent, TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_INGRESS));
        assert_int_equal(TC_H_MAJ(tcm->tcm_info) >> 16, 10);
        assert_int_equal(ntohs((uint16_t) TC_H_MIN(tcm->tcm_info)), ETH_P_ALL);
        assert_int_equal(tcm->tcm_handle, 1);
        parse_built(nlh, &a);
        assert_string_equal(mnl_attr_get_str(a.tb[TCA_KIND]), "bpf");

        nlh = nl_msg_clsact(buf, 3, true, 6);
        assert_int_equal(nlh->nlmsg_type, RTM_NEWQDISC);
        assert_int_equal(nlh->nlmsg_flags, NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL);
        tcm = mnl_nlmsg_get_payload(nlh);
        assert_int_equal(tcm->tcm_parent, TC_H_CLSACT);
        assert_int_equal(tcm->tcm_handle, TC_H_MAKE(TC_H_CLSACT, 0));
        parse_built(nlh, &a);
        assert_string_equal(mnl_attr_get_str(a.tb[TCA_KIND]), "clsact");
}

static void test_build_then_parse_roundtrip(void **state) {
        char buf[NL_MSG_BUFFER_SIZE];
        NlBpfFilterSpec spec = { .ifindex = 2,
                                 .hook = NL_HOOK_INGRESS,
                                 .pref = 7,
                                 .handle = 1,
                                 .prog_fd = 4,
                                 .name = "clsd:x",
                                 .direct_action = true };
        NlFilter f;

        (void) state;
        assert_int_equal(nl_filter_parse(nl_msg_bpf_filter(buf, &spec, false, 1), &f), 0);
        assert_int_equal(f.pref, 7);
        assert_string_equal(f.name, "clsd:x");
        assert_true(f.clsd_owned);
        assert_true(f.direct_action);
}

/* Captured on Debian 12's 6.1 (tests/vm/run, tests/data/filter-dump-actions.txt is tc's view): clsd's
 * classic-mode filter with two act_bpf actions after four UDP datagrams, three of them to port 9, and a
 * foreign filter with a gact action. */
static void test_filter_dump_with_actions_parse(void **state) {
        size_t size;
        _cleanup_free_ char *data = read_data("filter-dump-actions.bin", &size);
        NlFilter got[4];
        int n = (int) size, k = 0;

        (void) state;
        for (const struct nlmsghdr *h = (void *) data; mnl_nlmsg_ok(h, n); h = mnl_nlmsg_next(h, &n)) {
                NlFilter f;
                if (nl_filter_parse(h, &f) < 0 || f.handle == 0)
                        continue;
                assert_true(k < 4);
                got[k++] = f;
        }
        assert_int_equal(k, 2);
        assert_string_equal(got[0].name, "clsd:web");
        assert_false(got[0].direct_action);
        assert_int_equal(got[0].prog_id, 4);
        assert_int_equal(got[0].n_actions, 2);
        assert_false(got[0].actions_truncated);
        assert_string_equal(got[0].actions[0].kind, "bpf");
        assert_string_equal(got[0].actions[0].name, "clsd:web/1");
        assert_true(got[0].actions[0].clsd_owned);
        assert_int_equal(got[0].actions[0].index, 1);
        assert_int_equal(got[0].actions[0].control, TC_ACT_PIPE);
        assert_int_equal(got[0].actions[0].prog_id, 6);
        assert_string_equal(got[0].actions[0].tag, "efe6f81d192b4965");
        assert_int_equal(got[0].actions[0].packets, 4);
        assert_int_equal(got[0].actions[0].bytes, 120);
        assert_int_equal(got[0].actions[0].drops, 0);
        assert_string_equal(got[0].actions[1].name, "clsd:web/2");
        assert_int_equal(got[0].actions[1].prog_id, 8);
        assert_int_equal(got[0].actions[1].index, 2);
        assert_int_equal(got[0].actions[1].packets, 4);
        assert_int_equal(got[0].actions[1].drops, 3);

        assert_string_equal(got[1].name, "custom-sec.bpf.o:[my_classifier]");
        assert_false(got[1].clsd_owned);
        assert_int_equal(got[1].n_actions, 1);
        assert_string_equal(got[1].actions[0].kind, "gact");
        assert_false(got[1].actions[0].clsd_owned);
        assert_int_equal(got[1].actions[0].prog_id, 0);
}

static int count_nested(const struct nlattr *nest) {
        const struct nlattr *a;
        int n = 0;
        mnl_attr_for_each_nested (a, nest)
                n++;
        return n;
}

/* Actions go nested under their place in the list, each act_bpf with its fd, its name and "pipe". */
static void test_build_bpf_filter_with_actions(void **state) {
        char buf[NL_MSG_BUFFER_SIZE];
        NlActionSpec acts[] = { { .prog_fd = 11, .name = "clsd:web/1" },
                                { .prog_fd = 12, .name = "clsd:web/2" } };
        NlBpfFilterSpec spec = { .ifindex = 7,
                                 .hook = NL_HOOK_INGRESS,
                                 .pref = 10,
                                 .handle = 1,
                                 .prog_fd = 9,
                                 .name = "clsd:web",
                                 .actions = acts,
                                 .n_actions = 2 };
        const struct nlattr *a, *x;
        struct nlmsghdr *nlh;
        Attrs attrs;
        int order = 0;

        (void) state;
        nlh = nl_msg_bpf_filter(buf, &spec, true, 5);
        parse_built(nlh, &attrs);
        assert_int_equal(mnl_attr_get_u32(attrs.bpf[TCA_BPF_FLAGS]), 0);
        assert_non_null(attrs.bpf[TCA_BPF_ACT]);
        assert_int_equal(count_nested(attrs.bpf[TCA_BPF_ACT]), 2);
        mnl_attr_for_each_nested (a, attrs.bpf[TCA_BPF_ACT]) {
                const struct nlattr *opts = NULL, *kind = NULL;
                assert_int_equal(mnl_attr_get_type(a), ++order);
                mnl_attr_for_each_nested (x, a) {
                        if (mnl_attr_get_type(x) == TCA_ACT_KIND)
                                kind = x;
                        if (mnl_attr_get_type(x) == TCA_ACT_OPTIONS)
                                opts = x;
                }
                assert_non_null(kind);
                assert_string_equal(mnl_attr_get_str(kind), "bpf");
                assert_non_null(opts);
                mnl_attr_for_each_nested (x, opts) {
                        switch (mnl_attr_get_type(x)) {
                        case TCA_ACT_BPF_PARMS: {
                                struct tc_act_bpf parms;
                                assert_int_equal(mnl_attr_get_payload_len(x), sizeof(parms));
                                memcpy(&parms, mnl_attr_get_payload(x), sizeof(parms));
                                assert_int_equal(parms.action, TC_ACT_PIPE);
                                assert_int_equal(parms.index, 0);
                                break;
                        }
                        case TCA_ACT_BPF_FD:
                                assert_int_equal(mnl_attr_get_u32(x), 10 + order);
                                break;
                        case TCA_ACT_BPF_NAME:
                                assert_string_equal(mnl_attr_get_str(x), acts[order - 1].name);
                                break;
                        default:
                                fail_msg("unexpected act_bpf attribute %d", mnl_attr_get_type(x));
                        }
                }
        }
        /* Read back as the kernel's dump would be: the actions by name, in order. */
        NlFilter f;
        assert_int_equal(nl_filter_parse(nlh, &f), 0);
        assert_int_equal(f.n_actions, 2);
        assert_string_equal(f.actions[1].name, "clsd:web/2");
        assert_int_equal(f.actions[1].control, TC_ACT_PIPE);
}

/* More actions than NL_ACTIONS_MAX: the first are kept, and the filter says it was cut. */
static void test_too_many_actions_are_marked(void **state) {
        char buf[NL_MSG_BUFFER_SIZE];
        NlActionSpec acts[NL_ACTIONS_MAX + 2];
        NlBpfFilterSpec spec = { .ifindex = 7,
                                 .hook = NL_HOOK_INGRESS,
                                 .pref = 1,
                                 .handle = 1,
                                 .prog_fd = 3,
                                 .name = "x",
                                 .actions = acts,
                                 .n_actions = NL_ACTIONS_MAX + 2 };
        NlFilter f;

        (void) state;
        for (size_t i = 0; i < ELEMENTSOF(acts); i++)
                acts[i] = (NlActionSpec){ .prog_fd = 4, .name = "clsd:x/n" };
        assert_int_equal(nl_filter_parse(nl_msg_bpf_filter(buf, &spec, false, 1), &f), 0);
        assert_int_equal(f.n_actions, NL_ACTIONS_MAX);
        assert_true(f.actions_truncated);
}

/* An action event belongs to the namespace: interface 0. */
static void test_action_event_parse(void **state) {
        char buf[NL_MSG_BUFFER_SIZE];
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
        int ifindex = -1;

        (void) state;
        nlh->nlmsg_type = RTM_NEWACTION;
        mnl_nlmsg_put_extra_header(nlh, sizeof(struct tcamsg));
        assert_int_equal(nl_tc_event_parse(nlh, &ifindex), 0);
        assert_int_equal(ifindex, 0);
        nlh->nlmsg_type = RTM_DELACTION;
        assert_int_equal(nl_tc_event_parse(nlh, NULL), 0);
}

static void test_act_bpf_probe(void **state) {
        char buf[NL_MSG_BUFFER_SIZE], msg[256];
        size_t size;
        _cleanup_free_ char *reply = read_data("act-bpf-probe-reply.bin", &size);
        const struct nlattr *tab[TCA_ROOT_MAX + 1] = { 0 }, *act[8] = { 0 }, *opts[TCA_ACT_MAX + 1] = { 0 };
        struct nlmsghdr *nlh;

        (void) state;
        nlh = nl_msg_act_bpf_probe(buf, 9);
        assert_int_equal(nlh->nlmsg_type, RTM_NEWACTION);
        assert_int_equal(nlh->nlmsg_flags, NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL);
        assert_int_equal(mnl_attr_parse(nlh, sizeof(struct tcamsg), attr_cb, tab), MNL_CB_OK);
        assert_non_null(tab[TCA_ACT_TAB]);
        assert_int_equal(mnl_attr_parse_nested(tab[TCA_ACT_TAB], attr_cb, act), MNL_CB_OK);
        assert_non_null(act[1]);
        assert_int_equal(mnl_attr_parse_nested(act[1], attr_cb, opts), MNL_CB_OK);
        assert_string_equal(mnl_attr_get_str(opts[TCA_ACT_KIND]), "bpf");
        assert_non_null(opts[TCA_ACT_OPTIONS]);
        assert_int_equal(mnl_attr_get_payload_len(opts[TCA_ACT_OPTIONS]), 0);

        /* What a kernel without act_bpf (this one, 6.18) answers the same request. */
        assert_int_equal(nl_ack_parse((const struct nlmsghdr *) reply, msg, sizeof(msg)), -ENOENT);
        assert_string_equal(msg, "Failed to load TC action module");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_filter_dump_parse),
                cmocka_unit_test(test_filter_parse_rejects_other_messages),
                cmocka_unit_test(test_link_parse),
                cmocka_unit_test(test_tc_event_parse),
                cmocka_unit_test(test_act_bpf_probe),
                cmocka_unit_test(test_extack_parse),
                cmocka_unit_test(test_build_bpf_filter),
                cmocka_unit_test(test_build_delete_and_clsact),
                cmocka_unit_test(test_build_then_parse_roundtrip),
                cmocka_unit_test(test_filter_dump_with_actions_parse),
                cmocka_unit_test(test_build_bpf_filter_with_actions),
                cmocka_unit_test(test_too_many_actions_are_marked),
                cmocka_unit_test(test_action_event_parse),
        };
        return cmocka_run_group_tests_name("nlmsg", tests, NULL, NULL);
}
