// SPDX-License-Identifier: GPL-2.0
/* drop-port.bpf.c: drops IPv4/IPv6 UDP and TCP packets to port 9 (discard) or to any port in
 * the blocked_ports map, and counts what it dropped. Everything else goes on to the next filter
 * (TC_ACT_UNSPEC). */
#include <stddef.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define DEFAULT_DROP_PORT 9

struct {
        __uint(type, BPF_MAP_TYPE_HASH);
        __uint(max_entries, 64);
        __type(key, __u16); /* host byte order */
        __type(value, __u8);
} blocked_ports SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_ARRAY);
        __uint(max_entries, 1);
        __type(key, __u32);
        __type(value, __u64);
} dropped SEC(".maps");

static __always_inline int dport_of(void *data, void *end, __u8 proto, void *l4, __u16 *ret) {
        if (proto == IPPROTO_UDP) {
                struct udphdr *udp = l4;
                if ((void *) (udp + 1) > end)
                        return -1;
                *ret = bpf_ntohs(udp->dest);
                return 0;
        }
        if (proto == IPPROTO_TCP) {
                struct tcphdr *tcp = l4;
                if ((void *) (tcp + 1) > end)
                        return -1;
                *ret = bpf_ntohs(tcp->dest);
                return 0;
        }
        return -1;
}

SEC("tc")
int drop_port(struct __sk_buff *skb) {
        void *data = (void *) (long) skb->data, *end = (void *) (long) skb->data_end;
        struct ethhdr *eth = data;
        __u16 port;
        __u32 key = 0;
        __u64 *n;

        if ((void *) (eth + 1) > end)
                return TC_ACT_UNSPEC;
        if (eth->h_proto == bpf_htons(ETH_P_IP)) {
                struct iphdr *ip = (void *) (eth + 1);
                if ((void *) (ip + 1) > end || ip->ihl < 5)
                        return TC_ACT_UNSPEC;
                if (dport_of(data, end, ip->protocol, (void *) ip + ip->ihl * 4, &port) < 0)
                        return TC_ACT_UNSPEC;
        } else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
                struct ipv6hdr *ip6 = (void *) (eth + 1);
                if ((void *) (ip6 + 1) > end)
                        return TC_ACT_UNSPEC;
                if (dport_of(data, end, ip6->nexthdr, ip6 + 1, &port) < 0)
                        return TC_ACT_UNSPEC;
        } else
                return TC_ACT_UNSPEC;

        if (port != DEFAULT_DROP_PORT && !bpf_map_lookup_elem(&blocked_ports, &port))
                return TC_ACT_UNSPEC;
        n = bpf_map_lookup_elem(&dropped, &key);
        if (n)
                __sync_fetch_and_add(n, 1);
        return TC_ACT_SHOT;
}

char LICENSE[] SEC("license") = "GPL";
