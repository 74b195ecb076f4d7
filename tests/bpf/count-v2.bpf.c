// SPDX-License-Identifier: GPL-2.0
/* count-v2.bpf.c: a newer build of contrib/bpf/count.bpf.c: the same "counters" map, other
 * instructions (so another tag), and a map of its own that the old build did not have. Replacing the
 * old build by this one must keep the counts. */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

struct counter {
        __u64 packets;
        __u64 bytes;
};

struct {
        __uint(type, BPF_MAP_TYPE_ARRAY);
        __uint(max_entries, 1);
        __type(key, __u32);
        __type(value, struct counter);
} counters SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_ARRAY);
        __uint(max_entries, 1);
        __type(key, __u32);
        __type(value, __u64);
} v2_packets SEC(".maps");

SEC("tc")
int count_pkts(struct __sk_buff *skb) {
        __u32 key = 0;
        struct counter *c = bpf_map_lookup_elem(&counters, &key);
        __u64 *v2 = bpf_map_lookup_elem(&v2_packets, &key);

        if (c) {
                __sync_fetch_and_add(&c->packets, 1);
                __sync_fetch_and_add(&c->bytes, skb->len);
        }
        if (v2)
                __sync_fetch_and_add(v2, 1);
        return TC_ACT_UNSPEC;
}

char LICENSE[] SEC("license") = "GPL";
