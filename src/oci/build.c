/* build.c: images made here (clsctl image build, push): bpfman's bytecode image format, an OCI manifest
 * whose one layer is a gzipped tar holding the object and whose configuration's labels (io.ebpf.*) say
 * its programs and maps; a cosign signature's image; and an OCI image layout on disk (what skopeo copies).
 * Every byte is a function of the object and the labels (tar times 0, keys sorted): the same object
 * built twice is the same image. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "fileio.h"
#include "oci-internal.h"

#define TAR_BLOCK 512

static int blob_set(OciBlob *b, char *data, size_t size, const char *media_type) {
        if (!data)
                return -ENOMEM;
        b->data = data;
        b->size = size;
        b->media_type = media_type;
        sha256_digest_string(data, size, b->digest);
        return 0;
}

static void octal(char *field, size_t width, uint64_t v) {
        snprintf(field, width, "%0*llo", (int) width - 1, (unsigned long long) v);
}

/* One file in a ustar archive, then the archive's end: its bytes. */
static char *tar_one(const char *name, const void *data, size_t size, size_t *ret_size) {
        size_t padded = (size + TAR_BLOCK - 1) / TAR_BLOCK * TAR_BLOCK,
               n = TAR_BLOCK + padded + 2 * TAR_BLOCK;
        unsigned char *t = calloc(1, n);
        unsigned sum = 0;

        if (!t)
                return NULL;
        snprintf((char *) t, 100, "%s", name);
        octal((char *) t + 100, 8, 0644);
        octal((char *) t + 108, 8, 0);
        octal((char *) t + 116, 8, 0);
        octal((char *) t + 124, 12, size);
        octal((char *) t + 136, 12, 0);
        memset(t + 148, ' ', 8);
        t[156] = '0';
        memcpy(t + 257, "ustar", 6);
        memcpy(t + 263, "00", 2);
        for (size_t i = 0; i < TAR_BLOCK; i++)
                sum += t[i];
        snprintf((char *) t + 148, 8, "%06o", sum);
        t[155] = ' ';
        memcpy(t + TAR_BLOCK, data, size);
        *ret_size = n;
        return (char *) t;
}

static char *gzip_bytes(const char *data, size_t size, size_t *ret_size) {
        z_stream z = { 0 };
        size_t cap = deflateBound(&z, size) + 64;
        char *out;

        if (deflateInit2(&z, Z_BEST_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
                return NULL;
        cap = deflateBound(&z, size) + 64;
        out = malloc(cap);
        if (!out) {
                deflateEnd(&z);
                return NULL;
        }
        z.next_in = (Bytef *) data;
        z.avail_in = size;
        z.next_out = (Bytef *) out;
        z.avail_out = cap;
        if (deflate(&z, Z_FINISH) != Z_STREAM_END) {
                deflateEnd(&z);
                free(out);
                return NULL;
        }
        *ret_size = z.total_out;
        deflateEnd(&z);
        return out;
}

static char *json_bytes(json_t *j, size_t *ret_size) {
        char *s = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;

        json_decref(j);
        if (s)
                *ret_size = strlen(s);
        return s;
}

/* The layer's descriptor, with its annotations (taken) if any. */
static json_t *layer_descriptor(const OciBlob *l, json_t *annotations) {
        json_t *d = json_pack("{s:s, s:s, s:I}", "mediaType", l->media_type, "digest", l->digest, "size",
                              (json_int_t) l->size);

        if (!d || (annotations && json_object_set_new(d, "annotations", annotations) < 0)) {
                if (!d)
                        json_decref(annotations);
                json_decref(d);
                return NULL;
        }
        return d;
}

/* The manifest of the configuration and layers (taken: the descriptors, in order). */
static int manifest_make(OciBuilt *b, json_t *layers) {
        size_t n = 0;
        char *m;

        if (!layers)
                return -ENOMEM;
        m = json_bytes(json_pack("{s:i, s:s, s:{s:s, s:s, s:I}, s:o}", "schemaVersion", 2, "mediaType",
                                 OCI_MT_MANIFEST, "config", "mediaType", OCI_MT_CONFIG, "digest",
                                 b->config.digest, "size", (json_int_t) b->config.size, "layers", layers),
                       &n);
        return blob_set(&b->manifest, m, n, OCI_MT_MANIFEST);
}

int oci_build(const void *object, size_t size, const char *filename, json_t *labels, OciBuilt *ret,
              Error *reterr) {
        _cleanup_free_ char *tar = NULL;
        char diff_id[SHA256_DIGEST_STRING_MAX];
        size_t tar_size = 0, n = 0;
        char *gz, *config;

        *ret = (OciBuilt){ 0 };
        if (strlen(filename) >= 100 || !filename[0] || strchr(filename, '/'))
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                 "%s: the object's name in the image is one file name under 100 bytes",
                                 filename);
        tar = tar_one(filename, object, size, &tar_size);
        if (!tar)
                return error_oom(reterr);
        sha256_digest_string(tar, tar_size, diff_id);
        gz = gzip_bytes(tar, tar_size, &n);
        if (blob_set(&ret->layer, gz, n, OCI_MT_LAYER) < 0)
                return error_oom(reterr);
        /* eBPF bytecode runs on any architecture's kernel; the configuration says linux/amd64 as bpfman's
         * builder does, so that a runtime's platform pick finds it */
        config = json_bytes(json_pack("{s:s, s:s, s:{s:O}, s:{s:s, s:[s]}}", "architecture", "amd64", "os",
                                      "linux", "config", "Labels", labels, "rootfs", "type", "layers",
                                      "diff_ids", diff_id),
                            &n);
        if (blob_set(&ret->config, config, n, OCI_MT_CONFIG) < 0 ||
            manifest_make(ret, json_pack("[o]", layer_descriptor(&ret->layer, NULL))) < 0) {
                oci_built_done(ret);
                return error_oom(reterr);
        }
        return 0;
}

int oci_build_signature(const char *payload, const char *signature, json_t *existing, OciBuilt *ret,
                        Error *reterr) {
        char *config = strdup("{}"), *p = strdup(payload);
        json_t *layers = json_array(), *l;
        size_t i;

        *ret = (OciBuilt){ 0 };
        if (!layers || blob_set(&ret->config, config, 2, OCI_MT_CONFIG) < 0 ||
            blob_set(&ret->layer, p, strlen(payload), OCI_MT_COSIGN_PAYLOAD) < 0) {
                if (!ret->config.data)
                        free(p);
                json_decref(layers);
                oci_built_done(ret);
                return error_oom(reterr);
        }
        /* the signatures there already (by other keys, as cosign keeps them), then this one */
        json_array_foreach (json_object_get(existing, "layers"), i, l)
                if (streq_ptr(json_string_value(json_object_get(l, "mediaType")), OCI_MT_COSIGN_PAYLOAD) &&
                    json_object_get(json_object_get(l, "annotations"), OCI_COSIGN_ANNOTATION))
                        json_array_append(layers, l);
        json_array_append_new(
                layers, layer_descriptor(&ret->layer, json_pack("{s:s}", OCI_COSIGN_ANNOTATION, signature)));
        if (manifest_make(ret, layers) < 0) {
                oci_built_done(ret);
                return error_oom(reterr);
        }
        return 0;
}

void oci_built_done(OciBuilt *b) {
        free(b->layer.data);
        free(b->config.data);
        free(b->manifest.data);
        *b = (OciBuilt){ 0 };
}

/* ---- an OCI image layout ---- */

/* One file of the layout, written atomically in the directory at dir/sub. */
static int layout_file(const char *dir, const char *sub, const char *name, const void *data, size_t size,
                       Error *reterr) {
        _cleanup_free_ char *path = NULL;
        int fd, r;

        if (asprintf(&path, "%s%s%s", dir, sub[0] ? "/" : "", sub) < 0)
                return error_oom(reterr);
        r = mkdir_p(path, 0755);
        if (r < 0)
                return error_set(reterr, -r, ERROR_INVALID_VALUE, "%s: %s", path, strerror(-r));
        fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return error_set(reterr, errno, ERROR_INVALID_VALUE, "%s: %m", path);
        r = write_file_atomic(fd, name, data, size);
        close(fd);
        if (r < 0)
                return error_set(reterr, -r, ERROR_INVALID_VALUE, "%s/%s: %s", path, name, strerror(-r));
        return 0;
}

int oci_layout_write(const char *dir, const char *tag, const OciBuilt *b, Error *reterr) {
        _cleanup_free_ char *index_path = NULL, *text = NULL;
        json_t *index, *manifests, *m;
        const OciBlob *all[] = { &b->config, &b->layer, &b->manifest };
        static const char layout[] = "{\"imageLayoutVersion\":\"1.0.0\"}";
        size_t i, n = 0;
        int r;

        for (size_t k = 0; k < ELEMENTSOF(all); k++) {
                r = layout_file(dir, "blobs/sha256", all[k]->digest + 7, all[k]->data, all[k]->size, reterr);
                if (r < 0)
                        return r;
        }
        /* the index: this tag's entry in place of any earlier one, the others kept */
        if (asprintf(&index_path, "%s/index.json", dir) < 0)
                return error_oom(reterr);
        index = json_load_file(index_path, 0, NULL);
        if (!json_is_object(index) || !json_is_array(json_object_get(index, "manifests"))) {
                json_decref(index);
                index = json_pack("{s:i, s:[]}", "schemaVersion", 2, "manifests");
        }
        manifests = json_object_get(index, "manifests");
        json_array_foreach (manifests, i, m) {
                const char *name = json_string_value(json_object_get(json_object_get(m, "annotations"),
                                                                     "org.opencontainers.image.ref.name"));
                if (streq_ptr(name, tag)) {
                        json_array_remove(manifests, i);
                        break;
                }
        }
        if (!manifests ||
            json_array_append_new(manifests, json_pack("{s:s, s:s, s:I, s:{s:s}}", "mediaType",
                                                       OCI_MT_MANIFEST, "digest", b->manifest.digest, "size",
                                                       (json_int_t) b->manifest.size, "annotations",
                                                       "org.opencontainers.image.ref.name", tag)) < 0) {
                json_decref(index);
                return error_oom(reterr);
        }
        text = json_bytes(index, &n);
        if (!text)
                return error_oom(reterr);
        r = layout_file(dir, "", "index.json", text, n, reterr);
        if (r < 0)
                return r;
        return layout_file(dir, "", "oci-layout", layout, sizeof(layout) - 1, reterr);
}
