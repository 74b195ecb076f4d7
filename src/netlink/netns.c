/* netns.c: named network namespaces (/run/netns/NAME, as ip-netns makes them): opening one, and
 * entering it for the calls that act on the caller's namespace (socket(), tcx's bpf(2) commands).
 * clsd is single-threaded, so a short enter/leave around a call changes nothing else. */
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "nl.h"

#define NSFS_MAGIC_VALUE 0x6e736673

int nl_netns_open(const char *dir, const char *name, int *ret_fd, Error *reterr) {
        char path[PATH_MAX];
        struct statfs sfs;
        int fd;

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT
                               ? -ENOENT
                               : error_set(reterr, errno, ERROR_KERNEL_ERROR, "cannot open %s: %m", path);
        /* Until ip-netns has bind-mounted the namespace there, the file is an empty placeholder. */
        if (fstatfs(fd, &sfs) < 0 || (uint32_t) sfs.f_type != NSFS_MAGIC_VALUE) {
                close(fd);
                return -EAGAIN;
        }
        *ret_fd = fd;
        return 0;
}

int nl_netns_enter(int netns_fd, int *ret_saved_fd) {
        int saved = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);

        if (saved < 0)
                return -errno;
        if (setns(netns_fd, CLONE_NEWNET) < 0) {
                int r = -errno;
                close(saved);
                return r;
        }
        *ret_saved_fd = saved;
        return 0;
}

void nl_netns_leave(int saved_fd) {
        if (saved_fd < 0)
                return;
        /* Going back to where we came from cannot fail but by a kernel bug: stop rather than carry on
         * in the wrong namespace. */
        if (setns(saved_fd, CLONE_NEWNET) < 0)
                abort();
        close(saved_fd);
}

int nl_socket_open_in(int netns_fd, unsigned groups, NlSocket **ret, Error *reterr) {
        int saved = -1, r;

        if (netns_fd >= 0) {
                r = nl_netns_enter(netns_fd, &saved);
                if (r < 0)
                        return error_set(reterr, -r, ERROR_KERNEL_ERROR,
                                         "cannot enter the network namespace: %s", strerror(-r));
        }
        r = nl_socket_open(groups, ret, reterr);
        nl_netns_leave(saved);
        return r;
}
