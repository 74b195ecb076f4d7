// SPDX-License-Identifier: GPL-2.0
/* match-udp.bpf.c: a classifier in classic mode ("direct_action": false), to put act_bpf actions behind:
 * it matches IPv4 and IPv6 UDP (-1: a match, with the filter's classid), so that the filter's actions
 * run for those, and nothing else (0: no match, the next filter is tried). */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

SEC("classifier")
int match_udp(struct __sk_buff *skb) {
        void *data = (void *) (long) skb->data, *end = (void *) (long) skb->data_end;
        struct ethhdr *eth = data;

        if ((void *) (eth + 1) > end)
                return 0;
        if (eth->h_proto == bpf_htons(ETH_P_IP)) {
                struct iphdr *ip = (void *) (eth + 1);
                return (void *) (ip + 1) <= end && ip->protocol == IPPROTO_UDP ? -1 : 0;
        }
        if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
                struct ipv6hdr *ip6 = (void *) (eth + 1);
                return (void *) (ip6 + 1) <= end && ip6->nexthdr == IPPROTO_UDP ? -1 : 0;
        }
        return 0;
}

char LICENSE[] SEC("license") = "GPL";
