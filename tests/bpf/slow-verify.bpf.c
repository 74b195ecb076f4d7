/* slow-verify.bpf.c: programs the verifier takes long over (a loop it walks 70,000 times, about a
 * tenth of a second each here), for the tests and the bench of a PUT that verifies for seconds while
 * clsd goes on serving. Each program is loaded on its own: a document naming all of them verifies
 * for as long as their sum. */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

#define WALKS 70000

// clang-format off
/* 32 programs alike, in rows */
#define SLOW(n)                                                                 \
        SEC("tc") int slow_##n(struct __sk_buff *skb) {                        \
                __u32 acc = skb->len + n;                                       \
                _Pragma("clang loop unroll(disable)")                           \
                for (__u32 i = 0; i < WALKS; i++)                               \
                        acc += i ^ (acc >> 3);                                  \
                skb->mark = acc;                                                \
                return TC_ACT_UNSPEC;                                           \
        }

SLOW(0) SLOW(1) SLOW(2) SLOW(3) SLOW(4) SLOW(5) SLOW(6) SLOW(7)
SLOW(8) SLOW(9) SLOW(10) SLOW(11) SLOW(12) SLOW(13) SLOW(14) SLOW(15)
SLOW(16) SLOW(17) SLOW(18) SLOW(19) SLOW(20) SLOW(21) SLOW(22) SLOW(23)
SLOW(24) SLOW(25) SLOW(26) SLOW(27) SLOW(28) SLOW(29) SLOW(30) SLOW(31)

char LICENSE[] SEC("license") = "GPL";
// clang-format on
