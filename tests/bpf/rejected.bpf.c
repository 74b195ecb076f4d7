// SPDX-License-Identifier: GPL-2.0
/* rejected.bpf.c: reads the packet without a bounds check, so the verifier must refuse it. */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

SEC("tc")
int unchecked_read(struct __sk_buff *skb) {
        unsigned char *data = (void *) (long) skb->data;
        return data[20] == 17 ? TC_ACT_SHOT : TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
