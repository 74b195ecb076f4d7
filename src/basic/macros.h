/* macros.h: cleanup attributes, ownership transfer and small helpers every module may use. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _noreturn_ __attribute__((noreturn))

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define CLAMP(x, lo, hi) MIN(MAX((x), (lo)), (hi))

#define TAKE_PTR(p) \
        ({ \
                __typeof__(p) _p_ = (p); \
                (p) = NULL; \
                _p_; \
        })

#define TAKE_FD(fd) \
        ({ \
                int _fd_ = (fd); \
                (fd) = -1; \
                _fd_; \
        })

/* Defines foo_freep(Foo **p) calling foo_free(*p), for _cleanup_(foo_freep). */
#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func) \
        static inline void func##p(type *p) { \
                if (*p) \
                        func(*p); \
        }

static inline void freep(void *p) {
        free(*(void **) p);
}
#define _cleanup_free_ _cleanup_(freep)

static inline int safe_close(int fd) {
        if (fd >= 0) {
                int saved = errno;
                (void) close(fd);
                errno = saved;
        }
        return -1;
}

static inline void closep(int *fd) {
        safe_close(*fd);
}
#define _cleanup_close_ _cleanup_(closep)

static inline void fclosep(FILE **f) {
        if (*f)
                fclose(*f);
}
#define _cleanup_fclose_ _cleanup_(fclosep)

/* Frees an array of n strings (NULL: nothing). */
static inline void strv_free_n(char **v, size_t n) {
        for (size_t i = 0; v && i < n; i++)
                free(v[i]);
        free(v);
}

/* Makes room for need elements of size bytes in *p, which has room for *allocated: doubling, so that
 * appending n elements one at a time copies O(n) bytes, not O(n²). -ENOMEM leaves *p as it was. */
static inline int greedy_realloc(void **p, size_t *allocated, size_t need, size_t size) {
        size_t n;
        void *q;

        if (need <= *allocated)
                return 0;
        n = need < 8 ? 8 : need * 2;
        if (n > SIZE_MAX / size)
                return -ENOMEM;
        q = realloc(*p, n * size);
        if (!q)
                return -ENOMEM;
        *p = q;
        *allocated = n;
        return 0;
}

static inline const char *strempty(const char *s) {
        return s ? s : "";
}

static inline const char *strna(const char *s) {
        return s ? s : "n/a";
}

static inline int streq_ptr(const char *a, const char *b) {
        if (!a || !b)
                return a == b;
        return strcmp(a, b) == 0;
}

#define streq(a, b) (strcmp((a), (b)) == 0)

static inline const char *startswith(const char *s, const char *prefix) {
        size_t l = strlen(prefix);
        return strncmp(s, prefix, l) == 0 ? s + l : NULL;
}

static inline bool endswith(const char *s, const char *suffix) {
        size_t a = strlen(s), b = strlen(suffix);
        return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* The time of clock (CLOCK_MONOTONIC, CLOCK_BOOTTIME, ...) now, in microseconds. */
static inline uint64_t clock_usec(clockid_t clock) {
        struct timespec ts;

        clock_gettime(clock, &ts);
        return (uint64_t) ts.tv_sec * 1000000 + (uint64_t) ts.tv_nsec / 1000;
}
