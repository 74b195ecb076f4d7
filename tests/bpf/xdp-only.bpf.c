// SPDX-License-Identifier: GPL-2.0
/* xdp-only.bpf.c: an object with no tc program at all. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int xdp_only(struct xdp_md *ctx) {
        return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
