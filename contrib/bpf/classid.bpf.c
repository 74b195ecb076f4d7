// SPDX-License-Identifier: GPL-2.0
/* classid.bpf.c: a classic (non direct-action) classifier: returns a classid for a classful qdisc,
 * 1:10 for UDP and 1:20 for everything else, as in the cls_bpf commit's "(0x800 << 16) | tos". */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define CLASSID(maj, min) (((maj) << 16) | (min))

SEC("classifier")
int classify(struct __sk_buff *skb) {
        void *data = (void *) (long) skb->data, *end = (void *) (long) skb->data_end;
        struct ethhdr *eth = data;
        __u8 proto = 0;

        if ((void *) (eth + 1) > end)
                return CLASSID(1, 0x20);
        if (eth->h_proto == bpf_htons(ETH_P_IP)) {
                struct iphdr *ip = (void *) (eth + 1);
                if ((void *) (ip + 1) <= end)
                        proto = ip->protocol;
        } else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
                struct ipv6hdr *ip6 = (void *) (eth + 1);
                if ((void *) (ip6 + 1) <= end)
                        proto = ip6->nexthdr;
        }
        return proto == IPPROTO_UDP ? CLASSID(1, 0x10) : CLASSID(1, 0x20);
}

char LICENSE[] SEC("license") = "GPL";
