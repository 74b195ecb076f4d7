/* map.c: reading a map's entries from user space, a page at a time: BPF_MAP_LOOKUP_BATCH where the map
 * type has it (one syscall per thousands of entries), else key by key with BPF_MAP_GET_NEXT_KEY. */
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nl-internal.h"
#include "nl-bpf.h"
#include "nl-map.h"

/* Entries asked of one batch call: large enough to make syscalls rare, small enough to bound the
 * buffer a sparse map with a huge max_entries would need. */
#define BATCH_CHUNK 4096u

/* A cursor's first byte says how the read it continues was done. */
#define CURSOR_BATCH 'b' /* then the kernel's batch token (key_size bytes at most) */
#define CURSOR_KEY 'k' /* then the last key returned */

/* The kernel's "not supported" for a map operation, which user space headers do not name. */
#define ENOTSUPP_KERNEL 524

/* Hash maps' batch tokens are a u32 bucket index whatever the key size; arrays' are a key. */
static size_t batch_token_size(const NlMap *m) {
        return MAX(m->key_size, sizeof(uint32_t));
}

bool nl_map_readable(uint32_t type) {
        switch (type) {
        case BPF_MAP_TYPE_PERF_EVENT_ARRAY:
        case BPF_MAP_TYPE_QUEUE:
        case BPF_MAP_TYPE_STACK:
        case BPF_MAP_TYPE_RINGBUF:
        case BPF_MAP_TYPE_BLOOM_FILTER:
        case BPF_MAP_TYPE_USER_RINGBUF:
                return false;
        default:
                return true;
        }
}

bool nl_map_percpu(uint32_t type) {
        return type == BPF_MAP_TYPE_PERCPU_HASH || type == BPF_MAP_TYPE_PERCPU_ARRAY ||
               type == BPF_MAP_TYPE_LRU_PERCPU_HASH || type == BPF_MAP_TYPE_PERCPU_CGROUP_STORAGE;
}

static bool map_batchable(uint32_t type) {
        return type == BPF_MAP_TYPE_HASH || type == BPF_MAP_TYPE_ARRAY || type == BPF_MAP_TYPE_PERCPU_HASH ||
               type == BPF_MAP_TYPE_PERCPU_ARRAY || type == BPF_MAP_TYPE_LRU_HASH ||
               type == BPF_MAP_TYPE_LRU_PERCPU_HASH;
}

static int page_grow(NlMapPage *p, size_t key_size, size_t want, size_t *capacity) {
        uint8_t *k, *v;
        size_t c = *capacity;

        size_t ksize, vsize;

        if (want <= c)
                return 0;
        while (c < want)
                c = c ? c * 2 : 64;
        if (__builtin_mul_overflow(c, key_size, &ksize) ||
            __builtin_mul_overflow(c, p->value_stride, &vsize))
                return -ENOMEM;
        k = realloc(p->keys, ksize);
        if (!k)
                return -ENOMEM;
        p->keys = k;
        v = realloc(p->values, vsize);
        if (!v)
                return -ENOMEM;
        p->values = v;
        *capacity = c;
        return 0;
}

/* A page from the batch token (NULL: the first) less its first skip entries. A hash map's batch returns
 * whole buckets: a page that ends inside one says so in its cursor (the token the call began at, and how
 * many of what it returns were given), so that every page but the last holds limit entries. */
static bool all_ff(const uint8_t *p, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (p[i] != 0xff)
                        return false;
        return true;
}

static int read_batched(const NlMap *m, const uint8_t *token, uint32_t skip, size_t limit, NlMapPage *p,
                        size_t *capacity) {
        /* zeroed: a hash map's kernel writes 4 bytes of the token, the cursor carries all of it */
        uint8_t in[NL_MAP_CURSOR_MAX - 1] = { 0 }, out[NL_MAP_CURSOR_MAX - 1] = { 0 };
        size_t token_size = batch_token_size(m);
        bool first = !token;
        int r;

        if (token)
                memcpy(in, token, token_size);
        for (;;) {
                DECLARE_LIBBPF_OPTS(bpf_map_batch_opts, opts);
                size_t room = limit - p->n, base = p->n;
                uint32_t asked = (uint32_t) MIN(MIN(room + skip, BATCH_CHUNK), MAX(m->max_entries, 1u)),
                         count;
                bool end = false;

                if (room == 0) {
                        p->more = true;
                        break;
                }
        again:
                count = asked;
                r = page_grow(p, m->key_size, base + count, capacity);
                if (r < 0)
                        return r;
                r = bpf_map_lookup_batch(m->fd, first ? NULL : in, out, p->keys + base * m->key_size,
                                         p->values + base * p->value_stride, &count, &opts);
                if (r < 0 && errno == ENOSPC && count == 0) {
                        /* the next hash bucket holds more entries than were asked: ask for twice as many */
                        if (asked >= BATCH_CHUNK)
                                return -ENOSPC; /* a bucket of more than BATCH_CHUNK entries */
                        asked = MIN(asked * 2, BATCH_CHUNK);
                        goto again;
                }
                if (r < 0 && errno != ENOENT)
                        return -errno;
                end = r < 0; /* ENOENT: that was the last of them */
                if (count == 0 && !end)
                        break; /* nothing, and no end: not asked again */
                /* the first skip of them were given by the page before */
                uint32_t skipped = MIN(skip, count), take = (uint32_t) MIN(count - skipped, room);
                if (skipped > 0) {
                        memmove(p->keys + base * m->key_size, p->keys + (base + skipped) * m->key_size,
                                (size_t) take * m->key_size);
                        memmove(p->values + base * p->value_stride,
                                p->values + (base + skipped) * p->value_stride,
                                (size_t) take * p->value_stride);
                }
                p->n = base + take;
                if (skipped + take < count) {
                        /* the page ends inside what this call returned: the next starts at the same token */
                        skip = skipped + take;
                        p->more = true;
                        break;
                }
                skip = 0;
                if (end)
                        break;
                memcpy(in, out, token_size);
                first = false;
        }
        if (p->more) {
                p->cursor[0] = CURSOR_BATCH;
                if (first) /* a page that ends inside the map's first call: from the start again */
                        memset(in, 0xff, token_size);
                memcpy(p->cursor + 1, in, token_size);
                memcpy(p->cursor + 1 + token_size, &skip, sizeof(skip));
                p->cursor_size = 1 + token_size + sizeof(skip);
        }
        return 0;
}

static int read_by_key(const NlMap *m, const uint8_t *after, size_t limit, NlMapPage *p, size_t *capacity) {
        _cleanup_free_ uint8_t *prev = malloc(m->key_size), *first = malloc(m->key_size);
        bool have_prev = after, have_first = false;
        int r;

        if (!prev || !first)
                return -ENOMEM;
        if (after)
                memcpy(prev, after, m->key_size);
        for (;;) {
                uint8_t *key, *value;

                if (p->n == limit) {
                        p->more = true;
                        break;
                }
                r = page_grow(p, m->key_size, p->n + 1, capacity);
                if (r < 0)
                        return r;
                key = p->keys + p->n * m->key_size;
                value = p->values + p->n * p->value_stride;
                if (bpf_map_get_next_key(m->fd, have_prev ? prev : NULL, key) < 0) {
                        if (errno == ENOENT)
                                break;
                        return -errno;
                }
                /* Some map types (tries, hash of maps) start over from their first key when the key
                 * asked after was deleted meanwhile: seeing this read's first key again ends it. */
                if (have_first && memcmp(first, key, m->key_size) == 0)
                        break;
                if (!have_first) {
                        memcpy(first, key, m->key_size);
                        have_first = true;
                }
                memcpy(prev, key, m->key_size);
                have_prev = true;
                if (bpf_map_lookup_elem(m->fd, key, value) < 0) {
                        if (errno == ENOENT)
                                continue; /* deleted between the two calls */
                        return -errno;
                }
                p->n++;
        }
        if (p->more) {
                p->cursor[0] = CURSOR_KEY;
                memcpy(p->cursor + 1, prev, m->key_size);
                p->cursor_size = 1 + m->key_size;
        }
        return 0;
}

int nl_map_read(const NlMap *m, const uint8_t *cursor, size_t cursor_size, size_t limit, NlMapPage *ret,
                Error *reterr) {
        NlMapPage p = { .n_cpus = 1 };
        size_t capacity = 0;
        bool batch = map_batchable(m->type);
        int r;

        if (!nl_map_readable(m->type))
                return error_set(reterr, EOPNOTSUPP, ERROR_MAP_UNREADABLE,
                                 "map %s is a %s map: the kernel does not let user space read its entries",
                                 m->name, nl_map_type_name(m->type));
        if (m->key_size == 0 || m->key_size > NL_MAP_CURSOR_MAX - 1)
                return error_set(reterr, EOPNOTSUPP, ERROR_MAP_UNREADABLE,
                                 "map %s has %u-byte keys; clsd reads maps with keys of 1 to %u bytes",
                                 m->name, m->key_size, NL_MAP_CURSOR_MAX - 1);
        if (cursor && (cursor_size != 1 + (batch ? batch_token_size(m) + sizeof(uint32_t) : m->key_size) ||
                       cursor[0] != (batch ? CURSOR_BATCH : CURSOR_KEY)))
                return error_set(reterr, EINVAL, ERROR_BAD_CURSOR, "the cursor is not one of map %s's",
                                 m->name);
        if (limit == 0 || limit > NL_MAP_PAGE_MAX)
                limit = NL_MAP_PAGE_MAX;
        p.value_stride = m->value_size;
        if (nl_map_percpu(m->type)) {
                r = libbpf_num_possible_cpus();
                if (r < 0)
                        return error_set(reterr, -r, ERROR_INTERNAL_ERROR, "cannot count the possible CPUs");
                p.n_cpus = (unsigned) r;
                p.value_stride = ((m->value_size + 7) / 8) * 8 * p.n_cpus;
        }
        p.batched = batch;
        uint32_t skip = 0;
        if (batch && cursor)
                memcpy(&skip, cursor + 1 + batch_token_size(m), sizeof(skip));
        /* a cursor of all 0xff bytes: the first call again (the page before ended inside it) */
        bool from_start = batch && cursor && all_ff(cursor + 1, batch_token_size(m));
        r = batch ? read_batched(m, cursor && !from_start ? cursor + 1 : NULL, skip, limit, &p, &capacity)
                  : read_by_key(m, cursor ? cursor + 1 : NULL, limit, &p, &capacity);
        if (r == -EOPNOTSUPP || r == -ENOTSUPP_KERNEL) {
                nl_map_page_done(&p);
                return error_set(reterr, EOPNOTSUPP, ERROR_MAP_UNREADABLE,
                                 "map %s (%s): the kernel does not let user space read its entries", m->name,
                                 nl_map_type_name(m->type));
        }
        if (r < 0) {
                nl_map_page_done(&p);
                return error_set(reterr, -r, ERROR_KERNEL_ERROR, "cannot read map %s (id %u): %s", m->name,
                                 m->id, strerror(-r));
        }
        *ret = p;
        return 0;
}

void nl_map_page_done(NlMapPage *p) {
        free(p->keys);
        free(p->values);
        *p = (NlMapPage){ 0 };
}

int nl_program_stats_fd(int fd, NlProgramStats *ret, Error *reterr) {
        struct bpf_prog_info info = { 0 };
        uint32_t len = sizeof(info);

        if (bpf_obj_get_info_by_fd(fd, &info, &len) < 0)
                return error_set(reterr, errno, ERROR_KERNEL_ERROR, "cannot read a program's info: %m");
        *ret = (NlProgramStats){ .id = info.id,
                                 .run_count = info.run_cnt,
                                 .run_time_ns = info.run_time_ns,
                                 .recursion_misses = info.recursion_misses };
        return 0;
}

int nl_program_stats(uint32_t prog_id, NlProgramStats *ret, Error *reterr) {
        _cleanup_close_ int fd = bpf_prog_get_fd_by_id(prog_id);

        if (fd < 0)
                return error_set(reterr, errno, ERROR_KERNEL_ERROR, "cannot open program %u: %m", prog_id);
        return nl_program_stats_fd(fd, ret, reterr);
}

int nl_bpf_stats_enable(int *ret_fd, Error *reterr) {
        int fd = bpf_enable_stats(BPF_STATS_RUN_TIME);

        if (fd < 0)
                return error_set(reterr, errno, ERROR_KERNEL_ERROR,
                                 "cannot enable BPF run-time statistics: %m");
        *ret_fd = fd;
        return 0;
}

int nl_program_maps_by_id(uint32_t prog_id, NlMap **ret, size_t *ret_n, Error *reterr) {
        _cleanup_close_ int fd = bpf_prog_get_fd_by_id(prog_id);

        if (fd < 0)
                return error_set(reterr, errno, ERROR_KERNEL_ERROR, "cannot open program %u: %m", prog_id);
        return nl_program_maps(fd, ret, ret_n, reterr);
}

struct btf *nl_btf_load(uint32_t btf_id) {
        return btf_id ? btf__load_from_kernel_by_id(btf_id) : NULL;
}

void nl_btf_free(struct btf *b) {
        btf__free(b);
}

bool nl_map_writable(uint32_t type) {
        switch (type) {
        case BPF_MAP_TYPE_HASH:
        case BPF_MAP_TYPE_ARRAY:
        case BPF_MAP_TYPE_PERCPU_HASH:
        case BPF_MAP_TYPE_PERCPU_ARRAY:
        case BPF_MAP_TYPE_LRU_HASH:
        case BPF_MAP_TYPE_LRU_PERCPU_HASH:
        case BPF_MAP_TYPE_LPM_TRIE:
                return true;
        default:
                return false; /* program and map arrays hold fds; rings and stacks are no key-value stores */
        }
}

int nl_map_update(const NlMap *m, const void *key, const void *value, Error *reterr) {
        _cleanup_free_ uint8_t *all = NULL;
        const void *v = value;

        if (!nl_map_writable(m->type))
                return error_set(reterr, EOPNOTSUPP, ERROR_MAP_UNWRITABLE,
                                 "map %s (%s): its entries are not written", m->name,
                                 nl_map_type_name(m->type));
        if (nl_map_percpu(m->type)) {
                int ncpus = libbpf_num_possible_cpus();
                size_t stride = (m->value_size + 7) / 8 * 8;
                if (ncpus <= 0 || !(all = calloc((size_t) ncpus, stride)))
                        return error_oom(reterr);
                for (int i = 0; i < ncpus; i++)
                        memcpy(all + (size_t) i * stride, value, m->value_size);
                v = all;
        }
        if (bpf_map_update_elem(m->fd, key, v, BPF_ANY) < 0) {
                int e = errno;
                bool array = m->type == BPF_MAP_TYPE_ARRAY || m->type == BPF_MAP_TYPE_PERCPU_ARRAY;
                if (array && (e == E2BIG || e == EINVAL))
                        return error_set(reterr, e, ERROR_INVALID_VALUE,
                                         "key: map %s is an array of keys 0 to %u", m->name,
                                         m->max_entries - 1);
                if (e == E2BIG || e == ENOSPC)
                        return error_set(reterr, e, ERROR_MAP_FULL, "map %s is full (%u entries)", m->name,
                                         m->max_entries);
                return error_set(reterr, e, ERROR_KERNEL_ERROR, "map %s: cannot write the entry: %s",
                                 m->name, strerror(e));
        }
        return 0;
}

int nl_map_delete(const NlMap *m, const void *key, Error *reterr) {
        if (!nl_map_writable(m->type) || m->type == BPF_MAP_TYPE_ARRAY ||
            m->type == BPF_MAP_TYPE_PERCPU_ARRAY)
                return error_set(
                        reterr, EOPNOTSUPP, ERROR_MAP_UNWRITABLE,
                        "map %s (%s): its entries cannot be deleted (an array's are written instead)",
                        m->name, nl_map_type_name(m->type));
        if (bpf_map_delete_elem(m->fd, key) < 0) {
                int e = errno;
                return error_set(reterr, e, e == ENOENT ? ERROR_ENTRY_NOT_FOUND : ERROR_KERNEL_ERROR,
                                 "map %s: %s", m->name,
                                 e == ENOENT ? "no entry with that key" : strerror(e));
        }
        return 0;
}
