// SPDX-License-Identifier: GPL-2.0
/* custom-sec.bpf.c: tc programs in sections of their own names, as older tc programs were written
 * (`tc filter add … bpf obj X sec my_classifier`): libbpf knows neither section, so only their use
 * says what they are. match_udp is a classic-mode classifier: it matches IPv4 UDP (-1: the filter's
 * classid) and hands the destination port to the actions in skb->cb[0]; anything else does not match
 * (0), so the actions do not run. count_by_cb is an action: it counts packets per cb[0]. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/pkt_cls.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

struct {
        __uint(type, BPF_MAP_TYPE_HASH);
        __uint(max_entries, 64);
        __type(key, __u32); /* the port the classifier handed over */
        __type(value, __u64);
} per_port SEC(".maps");

SEC("my_classifier")
int match_udp(struct __sk_buff *skb) {
        void *data = (void *) (long) skb->data, *end = (void *) (long) skb->data_end;
        struct ethhdr *eth = data;
        struct iphdr *ip = (void *) (eth + 1);
        struct udphdr *udp;

        if ((void *) (ip + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP) || ip->protocol != IPPROTO_UDP ||
            ip->ihl != 5)
                return 0;
        udp = (void *) (ip + 1);
        if ((void *) (udp + 1) > end)
                return 0;
        skb->cb[0] = bpf_ntohs(udp->dest);
        return -1;
}

SEC("my_action")
int count_by_cb(struct __sk_buff *skb) {
        __u32 key = skb->cb[0];
        __u64 one = 1, *n = bpf_map_lookup_elem(&per_port, &key);

        if (n)
                __sync_fetch_and_add(n, 1);
        else
                bpf_map_update_elem(&per_port, &key, &one, BPF_NOEXIST);
        return TC_ACT_PIPE;
}

struct {
        __uint(type, BPF_MAP_TYPE_ARRAY);
        __uint(max_entries, 1);
        __type(key, __u32);
        __type(value, __u64);
} seen SEC(".maps");

SEC("my_counter")
int count_all(struct __sk_buff *skb) {
        __u32 key = 0;
        __u64 *n = bpf_map_lookup_elem(&seen, &key);

        (void) skb;
        if (n)
                __sync_fetch_and_add(n, 1);
        return TC_ACT_UNSPEC;
}

char LICENSE[] SEC("license") = "GPL";
