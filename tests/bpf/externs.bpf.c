/* externs.bpf.c: what libbpf resolves at load, declared in one object (a kconfig and a ksym extern, a
 * map of maps with its inner map, a per-CPU hash) and programs in several sections: opened by the
 * inspection's sandbox like any other (tests/integration/objects/test_wide_objects.py). */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
extern int LINUX_KERNEL_VERSION __kconfig;
extern _Bool CONFIG_BPF_JIT __kconfig __weak;
extern const void bpf_prog_active __ksym __weak;
struct inner {
        __uint(type, BPF_MAP_TYPE_ARRAY);
        __uint(max_entries, 1);
        __type(key, __u32);
        __type(value, __u64);
} in0 SEC(".maps");
struct {
        __uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
        __uint(max_entries, 4);
        __type(key, __u32);
        __array(values, struct inner);
} outer SEC(".maps") = { .values = { [0] = &in0 } };
struct {
        __uint(type, BPF_MAP_TYPE_PERCPU_HASH);
        __uint(max_entries, 1024);
        __type(key, __u32);
        __type(value, __u64);
} pc SEC(".maps");
SEC("tc") int ext(struct __sk_buff *skb) {
        __u32 k = 0;
        __u64 *v = bpf_map_lookup_elem(&pc, &k);
        if (v)
                *v += LINUX_KERNEL_VERSION + CONFIG_BPF_JIT + (long) &bpf_prog_active;
        return TC_ACT_OK;
}
SEC("classifier") int cls(struct __sk_buff *skb) {
        return 0;
}
SEC("action") int act(struct __sk_buff *skb) {
        return 0;
}
SEC("xdp") int x(struct xdp_md *c) {
        return XDP_PASS;
}
char _license[] SEC("license") = "GPL";
