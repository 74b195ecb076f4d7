// SPDX-License-Identifier: GPL-2.0
/* set-dscp.bpf.c: an act_bpf action that marks IPv4 packets with DSCP EF (46), keeping their ECN bits,
 * and counts what it rewrote. It rewrites the header with bpf_skb_store_bytes() and mends the IPv4
 * header checksum with bpf_l3_csum_replace(): a receiver drops a packet whose checksum is wrong, so a
 * socket that sees the new TOS saw a correct packet. Returns TC_ACT_PIPE: the next action runs. */
#include <stddef.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define DSCP_EF 46

struct {
        __uint(type, BPF_MAP_TYPE_ARRAY);
        __uint(max_entries, 1);
        __type(key, __u32);
        __type(value, __u64);
} rewritten SEC(".maps");

SEC("action")
int set_dscp(struct __sk_buff *skb) {
        void *data = (void *) (long) skb->data, *end = (void *) (long) skb->data_end;
        struct ethhdr *eth = data;
        struct iphdr *ip = (void *) (eth + 1);
        __u16 old_word, new_word;
        __u8 tos;
        __u32 key = 0;
        __u64 *n;

        if ((void *) (ip + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
                return TC_ACT_PIPE;
        tos = (__u8) (DSCP_EF << 2 | (ip->tos & 3));
        if (ip->tos == tos)
                return TC_ACT_PIPE;
        /* The checksum covers 16-bit words: the one that holds the TOS, before and after. */
        old_word = *(__u16 *) ip;
        new_word = old_word;
        ((__u8 *) &new_word)[1] = tos;
        if (bpf_l3_csum_replace(skb, ETH_HLEN + offsetof(struct iphdr, check), old_word, new_word, 2) < 0 ||
            bpf_skb_store_bytes(skb, ETH_HLEN + offsetof(struct iphdr, tos), &tos, 1, 0) < 0)
                return TC_ACT_SHOT; /* never half-rewritten */
        n = bpf_map_lookup_elem(&rewritten, &key);
        if (n)
                __sync_fetch_and_add(n, 1);
        return TC_ACT_PIPE;
}

char LICENSE[] SEC("license") = "GPL";
