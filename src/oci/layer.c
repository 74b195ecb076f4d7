/* layer.c: the object in an image's layer. bpfman's bytecode images and plain images carry it as a file
 * in a tar archive (gzipped: application/vnd.oci.image.layer.v1.tar+gzip or Docker's
 * application/vnd.docker.image.rootfs.diff.tar.gzip; or not); an artifact may carry the object as its
 * layer. Read with zlib, a tar's headers by hand (ustar, with pax and GNU long names), every size bounded:
 * a layer that inflates past the object limit is refused, not unpacked. */
#include <string.h>
#include <zlib.h>

#include "oci-internal.h"

#define TAR_BLOCK 512

static bool is_gzip(const char *data, size_t size) {
        return size >= 2 && (unsigned char) data[0] == 0x1f && (unsigned char) data[1] == 0x8b;
}

static int gunzip(const char *data, size_t size, size_t max, char **ret, size_t *ret_size, Error *reterr) {
        z_stream z = { 0 };
        /* gzip's trailer says the size inflated (modulo 4 GiB): one buffer of it, not doublings of a
         * guess (each a new buffer's pages); a wrong one is only a guess, still bounded by max */
        uint32_t isize = size >= 18 ? (uint32_t) (unsigned char) data[size - 4] |
                                              (uint32_t) (unsigned char) data[size - 3] << 8 |
                                              (uint32_t) (unsigned char) data[size - 2] << 16 |
                                              (uint32_t) (unsigned char) data[size - 1] << 24
                                    : 0;
        size_t cap = MIN(max + 1, isize ? (size_t) isize + 1 : MAX(size * 4, (size_t) 65536));
        char *out = malloc(cap);
        int r;

        if (!out || inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
                free(out);
                return error_oom(reterr);
        }
        z.next_in = (Bytef *) data;
        z.avail_in = size;
        for (;;) {
                if (z.total_out == cap) {
                        char *v;
                        if (cap > max)
                                break;
                        cap = MIN(max + 1, cap * 2);
                        if (!(v = realloc(out, cap))) {
                                inflateEnd(&z);
                                free(out);
                                return error_oom(reterr);
                        }
                        out = v;
                }
                z.next_out = (Bytef *) out + z.total_out;
                z.avail_out = cap - z.total_out;
                r = inflate(&z, Z_NO_FLUSH);
                if (r == Z_STREAM_END || (r != Z_OK && r != Z_BUF_ERROR) ||
                    (r == Z_BUF_ERROR && z.avail_in == 0))
                        break;
        }
        inflateEnd(&z);
        if (z.total_out > max) {
                free(out);
                return error_set(reterr, EFBIG, ERROR_PAYLOAD_TOO_LARGE,
                                 "the layer inflates to more than %zu bytes (the object limit)", max);
        }
        if (r != Z_STREAM_END) {
                free(out);
                return error_set(reterr, EINVAL, ERROR_IMAGE_INVALID,
                                 "the layer is not a whole gzip stream: %s", z.msg ?: "truncated");
        }
        *ret = out;
        *ret_size = z.total_out;
        return 0;
}

static bool octal(const char *p, size_t n, uint64_t *ret) {
        uint64_t v = 0;
        size_t i = 0;

        while (i < n && p[i] == ' ')
                i++;
        if (i == n || p[i] < '0' || p[i] > '7')
                return false;
        for (; i < n && p[i] >= '0' && p[i] <= '7'; i++) {
                if (v >> 60)
                        return false;
                v = v * 8 + (p[i] - '0');
        }
        *ret = v;
        return true;
}

/* A pax header's "path" record, if any. */
static char *pax_path(const char *p, size_t n) {
        size_t i = 0;

        while (i < n) {
                size_t len = 0, j = i;
                while (j < n && p[j] >= '0' && p[j] <= '9')
                        len = len * 10 + (p[j++] - '0');
                if (len == 0 || j >= n || p[j] != ' ' || len > n - i)
                        return NULL;
                if (len > 7 + (j - i) && strncmp(p + j + 1, "path=", 5) == 0)
                        return strndup(p + j + 6, len - (j - i) - 7);
                i += len;
        }
        return NULL;
}

/* "./a.o", "a.o" -> "a.o"; a name in a directory keeps its slash */
static const char *entry_name(const char *n) {
        while (startswith(n, "./"))
                n += 2;
        return n;
}

static bool all_zero(const char *p, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (p[i])
                        return false;
        return true;
}

static int tar_find(const char *tar, size_t size, const char *filename, const char **ret, size_t *ret_size,
                    Error *reterr) {
        _cleanup_free_ char *long_name = NULL;
        const char *found = NULL;
        size_t found_size = 0, n_objects = 0;
        char names[256] = "";

        for (size_t off = 0; off + TAR_BLOCK <= size;) {
                const char *h = tar + off;
                char name[257];
                uint64_t len;
                char type = h[156];

                if (all_zero(h, TAR_BLOCK))
                        break;
                if (!octal(h + 124, 12, &len) || len > size - off - TAR_BLOCK)
                        return error_set(reterr, EINVAL, ERROR_IMAGE_INVALID,
                                         "the layer's tar archive is damaged");
                if (memcmp(h + 257, "ustar", 5) == 0 && h[345])
                        snprintf(name, sizeof(name), "%.155s/%.100s", h + 345, h);
                else
                        snprintf(name, sizeof(name), "%.100s", h);
                if (type == 'x' || type == 'L') {
                        free(long_name);
                        long_name = type == 'x' ? pax_path(h + TAR_BLOCK, len) : strndup(h + TAR_BLOCK, len);
                } else {
                        const char *n = entry_name(long_name ?: name);
                        if ((type == '0' || type == 0) &&
                            (filename ? streq(n, entry_name(filename))
                                      : endswith(n, ".o") && !strchr(n, '/'))) {
                                if (n_objects++ < 4)
                                        snprintf(names + strlen(names), sizeof(names) - strlen(names),
                                                 "%s%s", n_objects > 1 ? ", " : "", n);
                                found = h + TAR_BLOCK;
                                found_size = len;
                        }
                        free(long_name);
                        long_name = NULL;
                }
                off += TAR_BLOCK + (len + TAR_BLOCK - 1) / TAR_BLOCK * TAR_BLOCK;
        }
        if (n_objects == 0)
                return error_set(reterr, ENOENT, ERROR_IMAGE_INVALID,
                                 filename ? "the image's layer has no file %s (its io.ebpf.filename label)"
                                          : "the image's layer has no .o file at its root%s",
                                 filename ?: "");
        if (n_objects > 1)
                return error_set(
                        reterr, EINVAL, ERROR_IMAGE_INVALID,
                        "the image's layer has %zu .o files (%s): name one with the io.ebpf.filename "
                        "label",
                        n_objects, names);
        *ret = found;
        *ret_size = found_size;
        return 0;
}

int oci_layer_object(const char *media_type, const char *data, size_t size, const char *filename, size_t max,
                     char **ret, size_t *ret_size, Error *reterr) {
        _cleanup_free_ char *tar = NULL;
        const char *obj = data;
        size_t obj_size = size, tar_size = size;
        bool tarred = strstr(media_type, ".tar") || strstr(media_type, "rootfs.diff");
        int r;

        if (is_gzip(data, size)) {
                r = gunzip(data, size, max + 64 * 1024, &tar, &tar_size, reterr);
                if (r < 0)
                        return r;
                tarred = true;
        }
        if (tarred) {
                r = tar_find(tar ?: data, tar_size, filename, &obj, &obj_size, reterr);
                if (r < 0)
                        return r;
        }
        if (obj_size > max)
                return error_set(reterr, EFBIG, ERROR_PAYLOAD_TOO_LARGE,
                                 "the image's object is %zu bytes, over %zu", obj_size, max);
        if (obj_size < 4 || memcmp(obj, "\177ELF", 4) != 0)
                return error_set(reterr, EINVAL, ERROR_IMAGE_INVALID,
                                 "the image's object is not an ELF file");
        if (tar) {
                /* the object moved to the start of the inflated buffer, which becomes it: no second
                 * buffer of its size */
                memmove(tar, obj, obj_size);
                char *v = realloc(tar, obj_size + 1); /* (a shrink that fails leaves it as it was) */
                *ret = v ?: tar;
                tar = NULL;
        } else if ((*ret = malloc(obj_size + 1)))
                memcpy(*ret, obj, obj_size);
        if (!*ret)
                return error_oom(reterr);
        *ret_size = obj_size;
        return 0;
}
