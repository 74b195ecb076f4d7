/* store.c: the state directory: documents/<ifname>.json (the API's documents), hogs/<ifname>.json (what
 * each hog attached last), crash leftovers, quarantine of corrupt files. */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fileio.h"
#include "store-internal.h"
#include "store-policy.h"

/* The configuration maps' entries, all of them in one file. */
#define STORE_MAP_ENTRIES_MAX (64u * 1024 * 1024)

Store *store_free(Store *s) {
        if (!s)
                return NULL;
        safe_close(s->dir_fd);
        safe_close(s->documents_fd);
        safe_close(s->hogs_fd);
        safe_close(s->objects_fd);
        safe_close(s->policies_fd);
        safe_close(s->lock_fd);
        free(s->dir);
        free(s);
        return NULL;
}

const char *store_dir(const Store *s) {
        return s->dir;
}

static int open_subdir(int dir_fd, const char *name) {
        if (mkdirat(dir_fd, name, 0750) < 0 && errno != EEXIST)
                return -errno;
        int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

int store_open(const char *dir, Store **ret, Error *reterr) {
        _cleanup_(store_freep) Store *s = calloc(1, sizeof(*s));
        int r;

        if (!s || !(s->dir = strdup(dir)))
                return error_oom(reterr);
        s->dir_fd = s->documents_fd = s->hogs_fd = s->objects_fd = s->policies_fd = s->lock_fd = -1;

        r = mkdir_p(dir, 0750);
        if (r < 0)
                return error_set(reterr, r, ERROR_STORE_ERROR, "cannot create state directory %s: %s", dir,
                                 strerror(-r));
        s->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (s->dir_fd < 0)
                return error_set(reterr, errno, ERROR_STORE_ERROR, "cannot open state directory %s: %m",
                                 dir);
        /* One clsd per state directory: a second would fight the first over the same filters. */
        s->lock_fd = openat(s->dir_fd, "lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (s->lock_fd < 0)
                return error_set(reterr, errno, ERROR_STORE_ERROR, "cannot open %s/lock: %m", dir);
        /* A clsd killed while it spawned a worker leaves the child holding its descriptors until the
         * child's exec closes them: a start right after (a restart) waits that long, up to a second. */
        for (int tries = 0; flock(s->lock_fd, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK && tries < 50;
             tries++)
                (void) usleep(20 * 1000);
        if (flock(s->lock_fd, LOCK_EX | LOCK_NB) < 0)
                return error_set(reterr, errno, errno == EWOULDBLOCK ? ERROR_STORE_BUSY : ERROR_STORE_ERROR,
                                 "%s is in use by a running clsd%s", dir,
                                 errno == EWOULDBLOCK ? " (stop it first: systemctl stop clsd)" : "");
        s->documents_fd = open_subdir(s->dir_fd, "documents");
        if (s->documents_fd < 0)
                return error_set(reterr, s->documents_fd, ERROR_STORE_ERROR, "cannot open %s/documents: %s",
                                 dir, strerror(-s->documents_fd));
        s->hogs_fd = open_subdir(s->dir_fd, "hogs");
        if (s->hogs_fd < 0)
                return error_set(reterr, s->hogs_fd, ERROR_STORE_ERROR, "cannot open %s/hogs: %s", dir,
                                 strerror(-s->hogs_fd));
        s->objects_fd = open_subdir(s->dir_fd, "objects");
        if (s->objects_fd < 0)
                return error_set(reterr, s->objects_fd, ERROR_STORE_ERROR, "cannot open %s/objects: %s", dir,
                                 strerror(-s->objects_fd));
        s->policies_fd = open_subdir(s->dir_fd, "policies");
        if (s->policies_fd < 0)
                return error_set(reterr, s->policies_fd, ERROR_STORE_ERROR, "cannot open %s/policies: %s",
                                 dir, strerror(-s->policies_fd));
        *ret = TAKE_PTR(s);
        return 0;
}

/* Moves a corrupt file aside under quarantine/ with a timestamp, so nothing is silently dropped. */
int store_quarantine(Store *s, int from_fd, const char *name, char **ret_path) {
        _cleanup_close_ int q = open_subdir(s->dir_fd, "quarantine");
        char target[512];

        if (q < 0)
                return q;
        snprintf(target, sizeof(target), "%s.%lld", name, (long long) time(NULL));
        if (renameat(from_fd, name, q, target) < 0)
                return -errno;
        (void) fsync(q);
        (void) fsync(from_fd);
        if (ret_path && asprintf(ret_path, "%s/quarantine/%s", s->dir, target) < 0)
                *ret_path = NULL;
        return 0;
}

/* Lists regular file names in dir_fd ending in suffix; removes crash leftovers of write_file_atomic(). */
int store_list_dir(int dir_fd, const char *suffix, char ***ret, size_t *ret_n) {
        _cleanup_close_ int fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 3);
        char **names = NULL;
        size_t n = 0;
        struct dirent *de;
        DIR *dir;

        if (fd < 0)
                return -errno;
        dir = fdopendir(fd);
        if (!dir)
                return -errno;
        TAKE_FD(fd);
        rewinddir(dir);
        while ((de = readdir(dir))) {
                size_t l = strlen(de->d_name), sl = strlen(suffix);
                if (de->d_name[0] == '.') {
                        if (l > 4 && streq(de->d_name + l - 4, ".tmp"))
                                (void) unlinkat(dir_fd, de->d_name, 0);
                        continue;
                }
                if (l <= sl || !streq(de->d_name + l - sl, suffix))
                        continue;
                char **nn = realloc(names, (n + 1) * sizeof(char *));
                if (!nn || !(nn[n] = strdup(de->d_name))) {
                        closedir(dir);
                        strv_free_n(nn ? nn : names, n);
                        return -ENOMEM;
                }
                names = nn;
                n++;
        }
        closedir(dir);
        if (n > 1)
                qsort(names, n, sizeof(char *), strcmp_ptr);
        *ret = names;
        *ret_n = n;
        return 0;
}

int strcmp_ptr(const void *a, const void *b) {
        return strcmp(*(const char *const *) a, *(const char *const *) b);
}

void log_problem(StoreProblemFunc problem, void *userdata, const char *path, const char *reason,
                 const char *moved_to) {
        char buf[1024];

        if (!problem)
                return;
        if (moved_to)
                snprintf(buf, sizeof(buf), "%s; moved to %s", strna(reason), moved_to);
        else
                snprintf(buf, sizeof(buf), "%s; left in place", strna(reason));
        problem(path, buf, userdata);
}

int store_fleet_revision_save(Store *s, uint64_t revision, Error *reterr) {
        char text[64];
        int r;

        snprintf(text, sizeof(text), "{\"format\": 1, \"revision\": %" PRIu64 "}\n", revision);
        r = write_file_atomic(s->dir_fd, "fleet.json", text, strlen(text));
        if (r < 0)
                return error_set(reterr, r, ERROR_STORE_ERROR, "cannot write %s/fleet.json: %s", s->dir,
                                 strerror(-r));
        return 0;
}

int store_fleet_keep_save(Store *s, json_t *keep, Error *reterr) {
        _cleanup_free_ char *text = NULL;
        _cleanup_(json_decrefp) json_t *j = NULL;
        int r;

        if (!keep || json_object_size(keep) == 0) {
                if (unlinkat(s->dir_fd, "fleet-rollouts.json", 0) < 0 && errno != ENOENT)
                        return error_set(reterr, errno, ERROR_STORE_ERROR,
                                         "cannot remove %s/fleet-rollouts.json: %m", s->dir);
                return 0;
        }
        j = json_pack("{s:i,s:O}", "format", 1, "rollouts", keep);
        if (!j || !(text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS)))
                return error_oom(reterr);
        r = write_file_atomic(s->dir_fd, "fleet-rollouts.json", text, strlen(text));
        if (r < 0)
                return error_set(reterr, r, ERROR_STORE_ERROR, "cannot write %s/fleet-rollouts.json: %s",
                                 s->dir, strerror(-r));
        return 0;
}

int store_fleet_keep_load(Store *s, json_t **ret) {
        _cleanup_free_ char *text = NULL;
        _cleanup_close_ int fd = openat(s->dir_fd, "fleet-rollouts.json", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        json_error_t jerr;
        json_t *j, *v;
        size_t size;
        int r;

        *ret = NULL;
        r = fd < 0 ? -errno : read_full_fd(fd, 16 * 1024 * 1024, &text, &size);
        if (r < 0)
                return r;
        j = json_loadb(text, size, 0, &jerr);
        v = json_object_get(j, "rollouts");
        if (!json_is_object(v)) {
                json_decref(j);
                return -EINVAL;
        }
        *ret = json_incref(v);
        json_decref(j);
        return 0;
}

int store_fleet_revision_load(Store *s, uint64_t *ret) {
        _cleanup_free_ char *text = NULL;
        _cleanup_close_ int fd = openat(s->dir_fd, "fleet.json", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        json_error_t jerr;
        json_t *j, *v;
        size_t size;
        int r;

        *ret = 0;
        r = fd < 0 ? -errno : read_full_fd(fd, 4096, &text, &size);
        if (r < 0)
                return r;
        j = json_loadb(text, size, 0, &jerr);
        v = json_object_get(j, "revision");
        if (json_is_integer(v) && json_integer_value(v) > 0)
                *ret = (uint64_t) json_integer_value(v);
        json_decref(j);
        return *ret ? 0 : -EINVAL;
}

int store_map_entries_save(Store *s, const json_t *entries, Error *reterr) {
        _cleanup_(json_decrefp) json_t *j =
                json_pack("{s:i,s:O}", "format", 1, "owners", (json_t *) entries);
        _cleanup_free_ char *text = j ? json_dumps(j, JSON_INDENT(1) | JSON_SORT_KEYS) : NULL;
        int r;

        if (!text)
                return error_oom(reterr);
        r = write_file_atomic(s->dir_fd, "map-entries.json", text, strlen(text));
        if (r < 0)
                return error_set(reterr, r, ERROR_STORE_ERROR, "cannot write %s/map-entries.json: %s",
                                 s->dir, strerror(-r));
        return 0;
}

int store_map_entries_load(Store *s, json_t **ret, Error *reterr) {
        _cleanup_close_ int fd = openat(s->dir_fd, "map-entries.json", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        _cleanup_free_ char *text = NULL;
        _cleanup_(json_decrefp) json_t *j = NULL;
        json_error_t jerr;
        json_t *owners;
        size_t size;
        int r;

        if (fd < 0 && errno == ENOENT) {
                *ret = json_object();
                return *ret ? 0 : error_oom(reterr);
        }
        r = fd < 0 ? -errno : read_full_fd(fd, STORE_MAP_ENTRIES_MAX, &text, &size);
        if (r < 0) {
                /* too large, a link, a directory: out of the way, and configuration maps start empty */
                _cleanup_free_ char *moved = NULL;
                (void) store_quarantine(s, s->dir_fd, "map-entries.json", &moved);
                *ret = json_object();
                return error_set(
                        reterr, r, ERROR_STORE_ERROR,
                        "cannot read %s/map-entries.json: %s; moved to %s, configuration maps start "
                        "with no stored entries",
                        s->dir, strerror(-r), strna(moved));
        }
        j = json_loadb(text, size, JSON_REJECT_DUPLICATES, &jerr);
        owners = json_object_get(j, "owners");
        if (!json_is_integer(json_object_get(j, "format")) ||
            json_integer_value(json_object_get(j, "format")) != 1 || !json_is_object(owners)) {
                _cleanup_free_ char *moved = NULL;
                (void) store_quarantine(s, s->dir_fd, "map-entries.json", &moved);
                *ret = json_object();
                return error_set(reterr, EINVAL, ERROR_STORE_ERROR,
                                 "%s/map-entries.json: not a map entries file of format 1%s%s; moved to %s, "
                                 "configuration maps start with no stored entries",
                                 s->dir, j ? "" : ": ", j ? "" : jerr.text, strna(moved));
        }
        *ret = json_incref(owners);
        return 0;
}
