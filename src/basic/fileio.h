/* fileio.h: reading whole files and durable, atomic writes (temp file, fsync, rename, fsync dir). */
#pragma once

#include <dirent.h>
#include <stddef.h>

/* Reads at most max bytes; -EFBIG if the file is larger. */
int read_full_file(const char *path, size_t max, char **ret_data, size_t *ret_size);
int read_full_fd(int fd, size_t max, char **ret_data, size_t *ret_size);
/* Like read_full_file(), for a path from outside: never blocks on a FIFO or a device; -EBADFD when
 * the path is not a regular file. */
int read_regular_file(const char *path, size_t max, char **ret_data, size_t *ret_size);
/* The same of an open fd: a regular file, at most max bytes. */
int read_regular_fd(int fd, size_t max, char **ret_data, size_t *ret_size);
/* Whether path is under one of dirs (NULL-terminated, real paths), by its real path: 0; -ENOENT for a
 * file missing from such a directory; -EACCES otherwise. */
int path_under_dirs(const char *const *dirs, const char *path);
/* read_regular_file() of a path under one of dirs, opened without following any link (its real path,
 * component by component with O_NOFOLLOW): a link put there after the check is refused, -EACCES, as is a
 * path elsewhere. */
int read_file_under_dirs(const char *const *dirs, const char *path, size_t max, char **ret_data,
                         size_t *ret_size);
/* Writes data to dir_fd/name atomically and durably. */
int write_file_atomic(int dir_fd, const char *name, const void *data, size_t size);
int mkdir_p(const char *path, unsigned mode);
/* Writes all of buf, retrying on EINTR and short writes. */
int loop_write(int fd, const void *buf, size_t size);

/* For _cleanup_(closedirp) DIR *d = opendir(…). */
static inline void closedirp(DIR **d) {
        if (*d)
                closedir(*d);
}
