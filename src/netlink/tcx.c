/* tcx.c: tc programs attached through bpf_link (BPF_TCX_INGRESS/EGRESS, Linux 6.6+): attach at a
 * position relative to another link, update in place, detach, query the order, and pin links in bpffs
 * so that they outlive clsd. libbpf 1.1.2 and Debian's 6.1 headers predate tcx, so the attributes
 * are laid out here, as the kernel's uapi defines them. */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <bpf/bpf.h>

#include "fileio.h"
#include "nl.h"
#include "nl-tcx.h"

#define TCX_ATTACH_INGRESS 46 /* enum bpf_attach_type: BPF_TCX_INGRESS */
#define TCX_ATTACH_EGRESS 47
#define TCX_F_BEFORE (1U << 3)
#define TCX_F_AFTER (1U << 4)
#define TCX_F_LINK (1U << 13) /* the relative fd is a link's, not a program's */
#define BPF_FS_MAGIC_VALUE 0xcafe4a11

/* union bpf_attr, link_create with its tcx part */
struct tcx_link_create_attr {
        uint32_t prog_fd;
        uint32_t target_ifindex;
        uint32_t attach_type;
        uint32_t flags;
        uint32_t relative_fd;
        uint32_t pad;
        uint64_t expected_revision;
        uint8_t rest[96];
};

/* union bpf_attr, query (BPF_PROG_QUERY) with link ids and the revision */
struct tcx_query_attr {
        uint32_t target_ifindex;
        uint32_t attach_type;
        uint32_t query_flags;
        uint32_t attach_flags;
        uint64_t prog_ids;
        uint32_t count;
        uint32_t pad;
        uint64_t prog_attach_flags;
        uint64_t link_ids;
        uint64_t link_attach_flags;
        uint64_t revision;
        uint8_t rest[64];
};

/* struct bpf_link_info with its tcx part */
struct tcx_link_info {
        uint32_t type;
        uint32_t id;
        uint32_t prog_id;
        uint32_t pad;
        uint32_t ifindex;
        uint32_t attach_type;
        uint8_t rest[64];
} __attribute__((aligned(8)));

#define BPF_LINK_TYPE_TCX_VALUE 11

static uint32_t attach_type_of(NlHook h) {
        return h == NL_HOOK_INGRESS ? TCX_ATTACH_INGRESS : TCX_ATTACH_EGRESS;
}

static int sys_bpf(int cmd, void *attr, size_t size) {
        long r = syscall(__NR_bpf, cmd, attr, size);
        return r < 0 ? -errno : (int) r;
}

int nl_tcx_query(int ifindex, NlHook hook, NlTcxEntry **ret, size_t *ret_n, Error *reterr) {
        uint32_t prog_ids[NL_TCX_MAX], link_ids[NL_TCX_MAX];
        struct tcx_query_attr a = { 0 };
        NlTcxEntry *v;
        int r;

        a.target_ifindex = (uint32_t) ifindex;
        a.attach_type = attach_type_of(hook);
        a.prog_ids = (uint64_t) (uintptr_t) prog_ids;
        a.link_ids = (uint64_t) (uintptr_t) link_ids;
        a.count = NL_TCX_MAX;
        r = sys_bpf(BPF_PROG_QUERY, &a, sizeof(a));
        if (r < 0)
                return error_set(reterr, -r, ERROR_KERNEL_ERROR, "ifindex %d: cannot query tcx %s: %s",
                                 ifindex, hook == NL_HOOK_INGRESS ? "ingress" : "egress", strerror(-r));
        v = calloc(a.count + 1, sizeof(NlTcxEntry));
        if (!v)
                return error_oom(reterr);
        for (uint32_t i = 0; i < a.count && i < NL_TCX_MAX; i++)
                v[i] = (NlTcxEntry){ .prog_id = prog_ids[i], .link_id = link_ids[i] };
        *ret = v;
        *ret_n = MIN(a.count, (uint32_t) NL_TCX_MAX);
        return 0;
}

int nl_tcx_probe(bool *ret_available) {
        _cleanup_free_ NlTcxEntry *v = NULL;
        size_t n;
        int r;

        /* lo is ifindex 1 in every namespace; a kernel without tcx refuses the attach type (EINVAL).
         * An empty hook may answer ENOENT, a device without a tcx entry ENODEV: tcx is there then. */
        r = nl_tcx_query(1, NL_HOOK_INGRESS, &v, &n, NULL);
        *ret_available = r >= 0 || r == -ENOENT || r == -ENODEV;
        return 0;
}

int nl_tcx_attach(int prog_fd, int ifindex, NlHook hook, int relative_link_fd, bool before, int *ret_link_fd,
                  Error *reterr) {
        struct tcx_link_create_attr a = { 0 };
        int fd;

        a.prog_fd = (uint32_t) prog_fd;
        a.target_ifindex = (uint32_t) ifindex;
        a.attach_type = attach_type_of(hook);
        if (relative_link_fd >= 0) {
                a.flags = (before ? TCX_F_BEFORE : TCX_F_AFTER) | TCX_F_LINK;
                a.relative_fd = (uint32_t) relative_link_fd;
        }
        fd = sys_bpf(BPF_LINK_CREATE, &a, sizeof(a));
        if (fd < 0)
                return error_set(reterr, -fd, ERROR_KERNEL_ERROR,
                                 "ifindex %d: cannot attach a tcx %s link: %s", ifindex,
                                 hook == NL_HOOK_INGRESS ? "ingress" : "egress", strerror(-fd));
        *ret_link_fd = fd;
        return 0;
}

int nl_tcx_update(int link_fd, int prog_fd, Error *reterr) {
        int r = bpf_link_update(link_fd, prog_fd, NULL);
        if (r < 0)
                return error_set(reterr, -r, ERROR_KERNEL_ERROR,
                                 "cannot replace the program of a tcx link: %s", strerror(-r));
        return 0;
}

int nl_tcx_detach(int link_fd, Error *reterr) {
        int r = bpf_link_detach(link_fd);
        if (r < 0 && r != -ENOLINK && r != -EINVAL)
                return error_set(reterr, -r, ERROR_KERNEL_ERROR, "cannot detach a tcx link: %s",
                                 strerror(-r));
        return 0;
}

int nl_tcx_link_info(int link_fd, NlTcxLink *ret) {
        struct tcx_link_info info = { 0 };
        uint32_t len = sizeof(info);
        int r;

        r = bpf_obj_get_info_by_fd(link_fd, &info, &len);
        if (r < 0)
                return r;
        if (info.type != BPF_LINK_TYPE_TCX_VALUE)
                return -EMEDIUMTYPE;
        /* A detached link (by someone, or its device gone) reports no ifindex. */
        *ret = (NlTcxLink){ .link_id = info.id,
                            .prog_id = info.prog_id,
                            .ifindex = (int) info.ifindex,
                            .hook = info.attach_type == TCX_ATTACH_EGRESS ? NL_HOOK_EGRESS
                                                                          : NL_HOOK_INGRESS };
        return 0;
}

int nl_bpffs_check(const char *dir, Error *reterr) {
        struct statfs sfs;

        if (statfs(dir, &sfs) < 0)
                return error_set(reterr, errno, ERROR_TCX_UNAVAILABLE, "%s: %m (tcx links are pinned there)",
                                 dir);
        if ((uint32_t) sfs.f_type != BPF_FS_MAGIC_VALUE)
                return error_set(
                        reterr, ENOTSUP, ERROR_TCX_UNAVAILABLE,
                        "%s is not on a bpf filesystem (mount -t bpf bpf /sys/fs/bpf); tcx links are "
                        "pinned there so that they outlive clsd",
                        dir);
        return 0;
}

int nl_pin(int fd, const char *dir, const char *name, Error *reterr) {
        char path[PATH_MAX];
        int r;

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        if (unlink(path) < 0 && errno != ENOENT)
                return error_set(reterr, errno, ERROR_KERNEL_ERROR, "cannot replace the pin %s: %m", path);
        r = bpf_obj_pin(fd, path);
        if (r < 0)
                return error_set(reterr, -r, ERROR_KERNEL_ERROR, "cannot pin %s: %s", path, strerror(-r));
        return 0;
}

int nl_pin_open(const char *dir, const char *name) {
        char path[PATH_MAX];
        int fd;

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        fd = bpf_obj_get(path);
        return fd < 0 ? -errno : fd;
}

int nl_unpin(const char *dir, const char *name) {
        char path[PATH_MAX];

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        return unlink(path) < 0 && errno != ENOENT ? -errno : 0;
}

int nl_pins_list(const char *dir, char ***ret, size_t *ret_n) {
        _cleanup_(closedirp) DIR *d = opendir(dir);
        char **v = NULL;
        size_t n = 0;
        struct dirent *de;

        if (!d) {
                if (errno != ENOENT)
                        return -errno;
                *ret = NULL;
                *ret_n = 0;
                return 0;
        }
        while ((de = readdir(d))) {
                char **nv;
                if (de->d_name[0] == '.')
                        continue;
                nv = realloc(v, (n + 2) * sizeof(char *));
                if (!nv) {
                        strv_free_n(v, n);
                        return -ENOMEM;
                }
                v = nv;
                v[n] = strdup(de->d_name);
                if (!v[n]) {
                        strv_free_n(v, n);
                        return -ENOMEM;
                }
                v[++n] = NULL;
        }
        *ret = v;
        *ret_n = n;
        return 0;
}
