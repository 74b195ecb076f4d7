// SPDX-License-Identifier: GPL-2.0
/* drop-all.bpf.c: drops every packet (a program that passes the verifier and is wrong: on a node's
 * uplink it cuts the node off, etcd and all). */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

SEC("tc")
int drop_all(struct __sk_buff *skb) {
        (void) skb;
        return TC_ACT_SHOT;
}

char LICENSE[] SEC("license") = "GPL";
