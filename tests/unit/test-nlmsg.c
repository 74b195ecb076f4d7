/* test-nlmsg.c: tc message building and parsing, against bytes captured from a 6.18 kernel
 * (tests/data/, refreshed with tests/tools/capture-nl.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
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
        };
        return cmocka_run_group_tests_name("nlmsg", tests, NULL, NULL);
}
