// SPDX-License-Identifier: GPL-2.0
/* proto-stats.bpf.c: statistics for clsd's map views and metrics. It keeps packets and bytes per IP
 * family and protocol (a hash map with struct keys and values), a packet-size histogram (a per-CPU
 * array of log2 buckets) and packets per UDP/TCP destination port (a hash map), and lets everything
 * through (TC_ACT_UNSPEC, so that later filters still run). */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

enum ip_family {
        FAMILY_OTHER = 0,
        FAMILY_IPV4 = 4,
        FAMILY_IPV6 = 6,
};

struct flow_key {
        enum ip_family family;
        __u8 proto; /* IPPROTO_*; 0 for a non-IP packet */
        __u8 pad[3];
};

struct flow_stats {
        __u64 packets;
        __u64 bytes;
};

#define SIZE_BUCKETS 16 /* bucket i counts packets of 2^(i-1) < len <= 2^i bytes; the last, larger */

struct {
        __uint(type, BPF_MAP_TYPE_HASH);
        __uint(max_entries, 64);
        __type(key, struct flow_key);
        __type(value, struct flow_stats);
} bytes_by_proto SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
        __uint(max_entries, SIZE_BUCKETS);
        __type(key, __u32);
        __type(value, __u64);
} size_hist SEC(".maps");

#ifndef PORTS_MAX_ENTRIES
#define PORTS_MAX_ENTRIES 1024
#endif

struct {
        __uint(type, BPF_MAP_TYPE_HASH);
        __uint(max_entries, PORTS_MAX_ENTRIES);
        __type(key, __u16);
        __type(value, __u64);
} pkts_by_port SEC(".maps");

#ifdef BENCH_SALT
/* bench/metrics builds many copies that differ only here: one object, and so one set of maps, each */
__u32 bench_salt SEC(".data") = BENCH_SALT;
#endif

static __always_inline __u32 size_bucket(__u32 len) {
        __u32 b = 0;

#pragma unroll
        for (int i = 0; i < SIZE_BUCKETS - 1; i++)
                if (len > (1u << i))
                        b = i + 1;
        return b;
}

static __always_inline void count_port(struct __sk_buff *skb, __u32 l4_off) {
        __u16 port, dport;
        __u64 one = 1, *v;

        if (bpf_skb_load_bytes(skb, l4_off + 2, &port, sizeof(port)) < 0)
                return;
        dport = bpf_ntohs(port);
        v = bpf_map_lookup_elem(&pkts_by_port, &dport);
        if (!v && bpf_map_update_elem(&pkts_by_port, &dport, &one, BPF_NOEXIST) < 0)
                v = bpf_map_lookup_elem(&pkts_by_port, &dport);
        if (v)
                __sync_fetch_and_add(v, 1);
}

SEC("tc")
int proto_stats(struct __sk_buff *skb) {
        struct flow_key key = {};
        struct flow_stats *s, init = { 1, skb->len };
        __u32 bucket = size_bucket(skb->len), l4_off = 0;
        __u64 *h;
        __u8 proto;

        if (skb->protocol == bpf_htons(ETH_P_IP)) {
                __u8 vihl;

                key.family = FAMILY_IPV4;
                if (bpf_skb_load_bytes(skb, ETH_HLEN + 9, &proto, 1) < 0 ||
                    bpf_skb_load_bytes(skb, ETH_HLEN, &vihl, 1) < 0)
                        return TC_ACT_UNSPEC;
                key.proto = proto;
                l4_off = ETH_HLEN + (vihl & 0xf) * 4;
        } else if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
                key.family = FAMILY_IPV6;
                if (bpf_skb_load_bytes(skb, ETH_HLEN + 6, &proto, 1) < 0)
                        return TC_ACT_UNSPEC;
                key.proto = proto;
                l4_off = ETH_HLEN + 40;
        }
        s = bpf_map_lookup_elem(&bytes_by_proto, &key);
        if (!s && bpf_map_update_elem(&bytes_by_proto, &key, &init, BPF_NOEXIST) < 0)
                s = bpf_map_lookup_elem(&bytes_by_proto, &key); /* another CPU added it first */
        if (s) {
                __sync_fetch_and_add(&s->packets, 1);
                __sync_fetch_and_add(&s->bytes, skb->len);
        }
        h = bpf_map_lookup_elem(&size_hist, &bucket);
        if (h)
                *h += 1; /* per CPU: no other CPU writes this slot */
        if (l4_off && (key.proto == IPPROTO_UDP || key.proto == IPPROTO_TCP))
                count_port(skb, l4_off);
        return TC_ACT_UNSPEC;
}

char LICENSE[] SEC("license") = "GPL";
