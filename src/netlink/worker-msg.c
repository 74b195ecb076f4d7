/* worker-msg.c: a worker's messages on the wire: a header with fds beside it, bulk bytes in a sealed memfd.
 */
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/bpf.h>
#include <linux/capability.h>
#include <poll.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "nl-internal.h"

#include "worker-msg.h"
#include "nl-worker.h"

/* ---- sending and receiving a message with fds ---- */

int send_msg(int sock, const void *buf, size_t size, const int *fds, size_t n_fds) {
        char control[CMSG_SPACE(sizeof(int) * (NL_JOB_REUSE_MAX + 2))] = { 0 };
        struct iovec iov = { .iov_base = (void *) buf, .iov_len = size };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

        if (n_fds > NL_JOB_REUSE_MAX + 2)
                return -E2BIG;
        if (n_fds > 0) {
                struct cmsghdr *c;
                mh.msg_control = control;
                mh.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
                c = CMSG_FIRSTHDR(&mh);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
                memcpy(CMSG_DATA(c), fds, sizeof(int) * n_fds);
        }
        if (sendmsg(sock, &mh, MSG_NOSIGNAL) != (ssize_t) size)
                return -errno ?: -EIO;
        return 0;
}

/* One message of exactly size bytes, and the fds beside it (at most max_fds; the rest closed). */
int recv_msg(int sock, void *buf, size_t size, int *fds, size_t max_fds, size_t *ret_n_fds) {
        char control[CMSG_SPACE(sizeof(int) * (NL_JOB_REUSE_MAX + 2))];
        struct iovec iov = { .iov_base = buf, .iov_len = size };
        struct msghdr mh = {
                .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof(control)
        };
        size_t n = 0;
        ssize_t k;

        k = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
        if (k < 0)
                return -errno;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                        continue;
                size_t m = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                int got[NL_JOB_REUSE_MAX + 2];
                memcpy(got, CMSG_DATA(c), sizeof(int) * MIN(m, ELEMENTSOF(got)));
                for (size_t i = 0; i < MIN(m, ELEMENTSOF(got)); i++) {
                        if (n < max_fds)
                                fds[n++] = got[i];
                        else
                                close(got[i]);
                }
        }
        *ret_n_fds = n;
        if (k == 0)
                return -ECONNRESET;
        if ((size_t) k != size || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
                for (size_t i = 0; i < n; i++)
                        close(fds[i]);
                *ret_n_fds = 0;
                return -EBADMSG;
        }
        return 0;
}

int memfd_with(const char *name, const void *data, size_t size) {
        int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
        const char *p = data;

        if (fd < 0)
                return -errno;
        for (size_t done = 0; done < size;) {
                ssize_t k = write(fd, p + done, size - done);
                if (k < 0) {
                        int e = -errno;
                        close(fd);
                        return e;
                }
                done += (size_t) k;
        }
        /* What was handed over stays as it was sent. */
        (void) fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
        return fd;
}

/* Reads what fd holds, up to max bytes (more: -EFBIG). */
int read_fd_all(int fd, size_t max, char **ret, size_t *ret_size) {
        struct stat st;
        char *buf;
        size_t done = 0;

        if (fstat(fd, &st) < 0)
                return -errno;
        if (st.st_size < 0 || (uint64_t) st.st_size > max)
                return -EFBIG;
        buf = malloc((size_t) st.st_size + 1);
        if (!buf)
                return -ENOMEM;
        while (done < (size_t) st.st_size) {
                ssize_t k = pread(fd, buf + done, (size_t) st.st_size - done, (off_t) done);
                if (k <= 0) {
                        free(buf);
                        return k < 0 ? -errno : -EIO;
                }
                done += (size_t) k;
        }
        buf[done] = 0;
        *ret = buf;
        *ret_size = done;
        return 0;
}

int map_fd_all(int fd, size_t max, FdMapping *ret) {
        struct stat st;
        void *p;

        if (fstat(fd, &st) < 0)
                return -errno;
        if (st.st_size < 0 || (uint64_t) st.st_size > max)
                return -EFBIG;
        if (st.st_size == 0) {
                *ret = (FdMapping){ .mapped = false };
                return read_fd_all(fd, max, &ret->data, &ret->size);
        }
        p = mmap(NULL, (size_t) st.st_size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED)
                return -errno;
        *ret = (FdMapping){ .data = p, .size = (size_t) st.st_size, .mapped = true };
        return 0;
}

void fd_mapping_done(FdMapping *m) {
        if (m->mapped)
                (void) munmap(m->data, m->size);
        else
                free(m->data);
        *m = (FdMapping){ 0 };
}
