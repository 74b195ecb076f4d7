/* bench/tc-floor.c: the floor for attaching one program to N interfaces: one process loads the object
 * once with libbpf and attaches its program to the ingress hook of each interface with libbpf's own tc
 * calls (bpf_tc_hook_create: clsact; bpf_tc_attach: a cls_bpf filter, direct action). Nothing more: no
 * store, no read-back, no API. bench/attach-many runs it in the same run as clsd and tc.
 *
 *   tc-floor OBJECT PROGRAM PREFIX N PREF     attaches to PREFIX0a … PREFIX(N-1)a; prints the µs taken
 *                                             (the load included) on stdout
 */
#include <bpf/libbpf.h>
#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long long now_us(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

int main(int argc, char **argv) {
        struct bpf_object *obj;
        struct bpf_program *prog;
        long long t0;
        int n, pref, fd;

        if (argc != 6) {
                fprintf(stderr, "usage: tc-floor OBJECT PROGRAM PREFIX N PREF\n");
                return 2;
        }
        n = atoi(argv[4]);
        pref = atoi(argv[5]);
        libbpf_set_strict_mode(LIBBPF_STRICT_ALL);
        t0 = now_us();
        obj = bpf_object__open_file(argv[1], NULL);
        if (!obj || bpf_object__load(obj) < 0) {
                fprintf(stderr, "tc-floor: cannot load %s\n", argv[1]);
                return 1;
        }
        prog = bpf_object__find_program_by_name(obj, argv[2]);
        if (!prog) {
                fprintf(stderr, "tc-floor: no program %s\n", argv[2]);
                return 1;
        }
        fd = bpf_program__fd(prog);
        for (int i = 0; i < n; i++) {
                char name[IF_NAMESIZE];
                int ifindex, r;

                snprintf(name, sizeof(name), "%s%da", argv[3], i);
                ifindex = (int) if_nametoindex(name);
                if (ifindex == 0) {
                        fprintf(stderr, "tc-floor: no interface %s\n", name);
                        return 1;
                }
                DECLARE_LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex, .attach_point = BPF_TC_INGRESS);
                DECLARE_LIBBPF_OPTS(bpf_tc_opts, opts, .prog_fd = fd, .priority = pref, .handle = 1);
                r = bpf_tc_hook_create(&hook);
                if (r < 0 && r != -EEXIST) {
                        fprintf(stderr, "tc-floor: %s: clsact: %s\n", name, strerror(-r));
                        return 1;
                }
                r = bpf_tc_attach(&hook, &opts);
                if (r < 0) {
                        fprintf(stderr, "tc-floor: %s: attach: %s\n", name, strerror(-r));
                        return 1;
                }
        }
        printf("%lld\n", now_us() - t0);
        /* The filters hold the program; the object goes with the process. */
        bpf_object__close(obj);
        return 0;
}
