/* objects.c: content-addressed object files: objects/<64 hex>.o, written once, named by their sha256. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "fileio.h"
#include "store-internal.h"
#include "store-policy.h"

static const char *digest_hex(const char *digest) {
        return digest + strlen("sha256:");
}

static void object_file_name(const char *digest, char buf[80]) {
        snprintf(buf, 80, "%s.o", digest_hex(digest));
}

int store_object_put(Store *s, const void *data, size_t size, char ret_digest[SHA256_DIGEST_STRING_MAX],
                     bool *ret_created, Error *reterr) {
        char digest[SHA256_DIGEST_STRING_MAX];
        int r;

        sha256_digest_string(data, size, digest);
        r = store_object_put_hashed(s, data, size, digest, ret_created, reterr);
        if (r >= 0)
                memcpy(ret_digest, digest, SHA256_DIGEST_STRING_MAX);
        return r;
}

int store_object_put_hashed(Store *s, const void *data, size_t size, const char *digest, bool *ret_created,
                            Error *reterr) {
        char name[80];
        int r;

        if (!sha256_digest_string_valid(digest))
                return error_set(reterr, EINVAL, ERROR_INTERNAL_ERROR, "not a digest: %s", digest);
        object_file_name(digest, name);
        r = store_object_exists(s, digest);
        if (r < 0)
                return error_set(reterr, r, ERROR_STORE_ERROR, "cannot check %s/objects/%s: %s", s->dir,
                                 name, strerror(-r));
        if (r == 0) {
                r = write_file_atomic(s->objects_fd, name, data, size);
                if (r < 0)
                        return error_set(reterr, r, ERROR_STORE_ERROR, "cannot write %s/objects/%s: %s",
                                         s->dir, name, strerror(-r));
        }
        if (ret_created)
                *ret_created = r == 0;
        return 0;
}

int store_object_signature_put(Store *s, const char *digest, const char *sig, size_t size, Error *reterr) {
        char name[80];
        int r;

        if (!sha256_digest_string_valid(digest))
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE, "%s: not a sha256 digest", digest);
        snprintf(name, sizeof(name), "%s.o.sig", digest_hex(digest));
        r = write_file_atomic(s->objects_fd, name, sig, size);
        if (r < 0)
                return error_set(reterr, r, ERROR_STORE_ERROR, "cannot write %s/objects/%s: %s", s->dir,
                                 name, strerror(-r));
        return 0;
}

int store_object_signature_read(const Store *s, const char *digest, char **ret_sig, size_t *ret_size) {
        char name[80];

        if (!sha256_digest_string_valid(digest))
                return -EINVAL;
        snprintf(name, sizeof(name), "%s.o.sig", digest_hex(digest));
        _cleanup_close_ int fd = openat(s->objects_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        return read_full_fd(fd, STORE_SIGNATURE_MAX, ret_sig, ret_size);
}

int store_object_exists(const Store *s, const char *digest) {
        char name[80];
        struct stat st;

        if (!sha256_digest_string_valid(digest))
                return 0;
        object_file_name(digest, name);
        if (fstatat(s->objects_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : -errno;
        return S_ISREG(st.st_mode);
}

int store_object_path(const Store *s, const char *digest, char **ret_path) {
        if (!sha256_digest_string_valid(digest))
                return -EINVAL;
        if (asprintf(ret_path, "%s/objects/%s.o", s->dir, digest_hex(digest)) < 0)
                return -ENOMEM;
        return 0;
}

int store_object_read(const Store *s, const char *digest, size_t max, char **ret_data, size_t *ret_size) {
        char name[80];

        if (!sha256_digest_string_valid(digest))
                return -EINVAL;
        object_file_name(digest, name);
        _cleanup_close_ int fd = openat(s->objects_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        _cleanup_free_ char *data = NULL;
        char actual[SHA256_DIGEST_STRING_MAX];
        size_t size;
        int r;

        if (fd < 0)
                return -errno;
        r = read_full_fd(fd, max, &data, &size);
        if (r < 0)
                return r;
        /* Content-addressed means the name is a promise: bytes that do not keep it are never served. */
        sha256_digest_string(data, size, actual);
        if (!streq(actual, digest))
                return -EBADMSG;
        *ret_data = TAKE_PTR(data);
        *ret_size = size;
        return 0;
}

int store_object_quarantine(Store *s, const char *digest, char **ret_path) {
        char name[80];

        if (!sha256_digest_string_valid(digest))
                return -EINVAL;
        object_file_name(digest, name);
        return store_quarantine(s, s->objects_fd, name, ret_path);
}

int store_object_remove(Store *s, const char *digest, Error *reterr) {
        char name[80];

        if (!sha256_digest_string_valid(digest))
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE, "%s: not a sha256 digest", digest);
        object_file_name(digest, name);
        if (unlinkat(s->objects_fd, name, 0) < 0)
                return error_set(reterr, errno, errno == ENOENT ? ERROR_OBJECT_NOT_FOUND : ERROR_STORE_ERROR,
                                 "cannot remove object %s: %m", digest);
        snprintf(name, sizeof(name), "%s.o.sig", digest_hex(digest));
        if (unlinkat(s->objects_fd, name, 0) < 0 && errno != ENOENT)
                return error_set(reterr, errno, ERROR_STORE_ERROR,
                                 "cannot remove the signature of object %s: %m", digest);
        if (fsync(s->objects_fd) < 0)
                return error_set(reterr, errno, ERROR_STORE_ERROR, "cannot sync %s/objects: %m", s->dir);
        return 0;
}

int store_object_list(const Store *s, char ***ret_digests, size_t *ret_n) {
        char **names;
        size_t n, k = 0;
        int r;

        r = store_list_dir(s->objects_fd, ".o", &names, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                char *d;
                names[i][strlen(names[i]) - 2] = 0;
                if (asprintf(&d, "sha256:%s", names[i]) < 0) {
                        strv_free_n(names, n);
                        return -ENOMEM;
                }
                free(names[i]);
                if (!sha256_digest_string_valid(d)) {
                        free(d);
                        continue; /* not one of ours: leave it alone */
                }
                names[k++] = d;
        }
        *ret_digests = names;
        *ret_n = k;
        return 0;
}
