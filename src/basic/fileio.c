/* fileio.c: whole-file reads and atomic, durable writes. */
#include <fcntl.h>
#include <stdbool.h>
#include <libgen.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "macros.h"

int loop_write(int fd, const void *buf, size_t size) {
        const char *p = buf;

        while (size > 0) {
                ssize_t n = write(fd, p, size);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                p += n;
                size -= (size_t) n;
        }
        return 0;
}

int read_full_fd(int fd, size_t max, char **ret_data, size_t *ret_size) {
        _cleanup_free_ char *buf = NULL;
        size_t size = 0, alloc = 0;

        for (;;) {
                if (size == alloc) {
                        size_t n = alloc ? alloc * 2 : 4096;
                        char *b;
                        if (alloc > max)
                                return -EFBIG;
                        b = realloc(buf, n + 1);
                        if (!b)
                                return -ENOMEM;
                        buf = b;
                        alloc = n;
                }
                ssize_t k = read(fd, buf + size, alloc - size);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (k == 0)
                        break;
                size += (size_t) k;
                if (size > max)
                        return -EFBIG;
        }
        if (!buf) {
                buf = malloc(1);
                if (!buf)
                        return -ENOMEM;
        }
        buf[size] = 0;
        *ret_data = TAKE_PTR(buf);
        if (ret_size)
                *ret_size = size;
        return 0;
}

int read_full_file(const char *path, size_t max, char **ret_data, size_t *ret_size) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        return read_full_fd(fd, max, ret_data, ret_size);
}

static bool under_dir(const char *const *dirs, const char *real, bool or_equal) {
        for (size_t i = 0; real && dirs[i]; i++) {
                size_t n = strlen(dirs[i]);
                if (strncmp(real, dirs[i], n) == 0 && (real[n] == '/' || (or_equal && !real[n])))
                        return true;
        }
        return false;
}

/* path's real path in *ret_real when it is under one of dirs: 0; else as path_under_dirs(). */
static int real_under_dirs(const char *const *dirs, const char *path, char **ret_real) {
        _cleanup_free_ char *real = realpath(path, NULL), *copy = NULL, *parent = NULL;

        if (real) {
                if (!under_dir(dirs, real, false))
                        return -EACCES;
                if (ret_real)
                        *ret_real = TAKE_PTR(real);
                return 0;
        }
        if (errno != ENOENT || !(copy = strdup(path)))
                return -EACCES;
        parent = realpath(dirname(copy), NULL);
        return under_dir(dirs, parent, true) ? -ENOENT : -EACCES;
}

int path_under_dirs(const char *const *dirs, const char *path) {
        return real_under_dirs(dirs, path, NULL);
}

int read_regular_fd(int fd, size_t max, char **ret_data, size_t *ret_size) {
        struct stat st;

        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EBADFD;
        if ((uint64_t) st.st_size > max)
                return -EFBIG;
        return read_full_fd(fd, max, ret_data, ret_size);
}

/* Opens the absolute path real component by component, following no link: a component that is a link
 * (put there since the real path was taken) fails. openat2()'s RESOLVE_NO_SYMLINKS would do it in one
 * call, but systemd's RestrictSUIDSGID= blocks openat2() (ENOSYS: seccomp cannot see its flags). */
static int open_no_links(const char *real) {
        _cleanup_free_ char *copy = strdup(real);
        _cleanup_close_ int dir = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        char *save = NULL, *next;

        if (!copy)
                return -ENOMEM;
        if (dir < 0)
                return -errno;
        for (char *c = strtok_r(copy, "/", &save); c; c = next) {
                next = strtok_r(NULL, "/", &save);
                int fd = openat(dir, c,
                                next ? O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC
                                     : O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
                if (fd < 0)
                        return -errno;
                safe_close(dir);
                dir = fd;
        }
        return TAKE_FD(dir);
}

int read_file_under_dirs(const char *const *dirs, const char *path, size_t max, char **ret_data,
                         size_t *ret_size) {
        _cleanup_free_ char *real = NULL;
        int r = real_under_dirs(dirs, path, &real);

        if (r < 0)
                return r;
        /* The real path has no link in it: one that appears now was put there since. */
        _cleanup_close_ int fd = open_no_links(real);
        if (fd < 0)
                return fd == -ENOENT ? -ENOENT : fd == -ENOMEM ? -ENOMEM : -EACCES;
        return read_regular_fd(fd, max, ret_data, ret_size);
}

int read_regular_file(const char *path, size_t max, char **ret_data, size_t *ret_size) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);

        if (fd < 0)
                return -errno;
        return read_regular_fd(fd, max, ret_data, ret_size);
}

int write_file_atomic(int dir_fd, const char *name, const void *data, size_t size) {
        char tmp[512];
        int r;

        /* The ".tmp" suffix marks leftovers of a crash mid-write: the store ignores and removes them. */
        if ((size_t) snprintf(tmp, sizeof(tmp), ".%s.%d.tmp", name, (int) getpid()) >= sizeof(tmp))
                return -ENAMETOOLONG;

        _cleanup_close_ int fd =
                openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0640);
        if (fd < 0)
                return -errno;
        r = loop_write(fd, data, size);
        if (r >= 0 && fsync(fd) < 0)
                r = -errno;
        if (r >= 0 && renameat(dir_fd, tmp, dir_fd, name) < 0)
                r = -errno;
        if (r < 0) {
                (void) unlinkat(dir_fd, tmp, 0);
                return r;
        }
        if (fsync(dir_fd) < 0)
                return -errno;
        return 0;
}

int mkdir_p(const char *path, unsigned mode) {
        _cleanup_free_ char *p = strdup(path);
        if (!p)
                return -ENOMEM;
        for (char *s = p + 1; *s; s++) {
                if (*s != '/')
                        continue;
                *s = 0;
                if (mkdir(p, mode) < 0 && errno != EEXIST)
                        return -errno;
                *s = '/';
        }
        if (mkdir(p, mode) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}
