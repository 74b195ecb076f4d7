// SPDX-License-Identifier: GPL-2.0
/* xdp.bpf.c: an XDP program, the wrong type for a tc hook; plus a tc one so the object uploads. */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int xdp_pass(struct xdp_md *ctx) {
        return XDP_PASS;
}

SEC("tc")
int tc_pass(struct __sk_buff *skb) {
        return TC_ACT_OK;
}

SEC("tc")
int tc_pass_too(struct __sk_buff *skb) {
        return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
