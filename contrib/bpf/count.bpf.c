// SPDX-License-Identifier: GPL-2.0
/* count.bpf.c: counts packets and bytes seen at the hook and lets everything through. It returns
 * TC_ACT_UNSPEC, not TC_ACT_OK, so that the filters after it on the hook still run. */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

struct counter {
        __u64 packets;
        __u64 bytes;
};

#ifndef COUNTERS_MAX_ENTRIES
#define COUNTERS_MAX_ENTRIES 1
#endif

struct {
        __uint(type, BPF_MAP_TYPE_ARRAY);
        __uint(max_entries, COUNTERS_MAX_ENTRIES);
        __type(key, __u32);
        __type(value, struct counter);
} counters SEC(".maps");

SEC("tc")
int count_pkts(struct __sk_buff *skb) {
        __u32 key = 0;
        struct counter *c = bpf_map_lookup_elem(&counters, &key);

        if (c) {
                __sync_fetch_and_add(&c->packets, 1);
                __sync_fetch_and_add(&c->bytes, skb->len);
        }
        return TC_ACT_UNSPEC;
}

char LICENSE[] SEC("license") = "GPL";
