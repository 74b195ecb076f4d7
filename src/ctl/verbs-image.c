/* verbs-image.c: clsctl image build, push, inspect: an object as bpfman's bytecode image (its labels from
 * the object's own inspection, in the same sandboxed parser clsd inspects uploads with), written as an OCI
 * image layout or pushed to a registry with a cosign signature; and what an image in a registry holds. */
#include <stdio.h>
#include <string.h>

#include "ctl.h"
#include "fileio.h"
#include "nl-worker.h"
#include "oci.h"
#include "signature-cosign.h"

/* The largest object an image holds: what clsd takes (--max-object-size's default). */
#define IMAGE_OBJECT_MAX (16u * 1024 * 1024)
#define SIGNING_KEY_MAX (64u * 1024)

/* bpfman's names for a program's kind (its builder's, from the ELF section: "classifier" is "tc") and a
 * map's type (aya's: libbpf's "percpu_array" is "per_cpu_array"). */
static const char *bpfman_program_type(const char *libbpf) {
        static const char *const map[][2] = {
                { "sched_cls", "tc" },    { "sched_act", "tc" },          { "xdp", "xdp" },
                { "kprobe", "probe" },    { "tracepoint", "tracepoint" }, { "raw_tracepoint", "tracepoint" },
                { "tracing", "tracing" },
        };
        for (size_t i = 0; i < ELEMENTSOF(map); i++)
                if (streq(libbpf, map[i][0]))
                        return map[i][1];
        return libbpf;
}

static int bpfman_map_type(const char *libbpf, char *buf, size_t n) {
        /* "percpu" is "per_cpu" in aya's names, wherever it stands ("lru_percpu_hash") */
        const char *p = strstr(libbpf, "percpu");

        if (!p)
                return snprintf(buf, n, "%s", libbpf) < (int) n ? 0 : -ENAMETOOLONG;
        return snprintf(buf, n, "%.*sper_cpu%s", (int) (p - libbpf), libbpf, p + 6) < (int) n
                       ? 0
                       : -ENAMETOOLONG;
}

/* The object of path, read and inspected; its labels (io.ebpf.programs, io.ebpf.maps, JSON in strings). */
static int object_labels(const char *path, char **ret_data, size_t *ret_size, json_t **ret_labels) {
        _cleanup_(nl_object_info_freep) NlObjectInfo *info = NULL;
        _cleanup_error_ Error e = ERROR_NULL;
        _cleanup_free_ char *data = NULL, *programs = NULL, *maps = NULL;
        _cleanup_(json_decrefp) json_t *p = json_object(), *m = json_object();
        size_t size = 0;
        int r;

        r = ctl_read_input(path, &data, &size);
        if (r < 0)
                return r;
        if (size > IMAGE_OBJECT_MAX)
                return ctl_error(-EFBIG, "%s: %zu bytes; an image's object is at most %u", path, size,
                                 IMAGE_OBJECT_MAX);
        r = nl_object_inspect_forked(data, size, &info, &e);
        if (r < 0)
                return ctl_error(r, "%s: %s", path, e.message);
        if (!p || !m)
                return ctl_oom();
        for (size_t i = 0; i < info->n_programs; i++)
                if (json_object_set_new(p, info->programs[i].name,
                                        json_string(bpfman_program_type(info->programs[i].type))) < 0)
                        return ctl_oom();
        for (size_t i = 0; i < info->n_maps; i++) {
                char type[64];
                if (info->maps[i].internal)
                        continue; /* .data, .bss, .rodata: a build's own, as bpfman's builder leaves them */
                if (bpfman_map_type(info->maps[i].type, type, sizeof(type)) < 0 ||
                    json_object_set_new(m, info->maps[i].name, json_string(type)) < 0)
                        return ctl_oom();
        }
        if (info->n_programs == 0)
                return ctl_error(-EINVAL, "%s: the object has no program", path);
        programs = json_dumps(p, JSON_COMPACT | JSON_SORT_KEYS);
        maps = json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS);
        *ret_labels = programs && maps
                              ? json_pack("{s:s, s:s}", "io.ebpf.programs", programs, "io.ebpf.maps", maps)
                              : NULL;
        if (!*ret_labels)
                return ctl_oom();
        *ret_data = TAKE_PTR(data);
        *ret_size = size;
        return 0;
}

static int image_of(const char *path, OciBuilt *ret) {
        _cleanup_error_ Error e = ERROR_NULL;
        _cleanup_(json_decrefp) json_t *labels = NULL;
        _cleanup_free_ char *data = NULL;
        const char *base = strrchr(path, '/');
        size_t size = 0;
        int r;

        r = object_labels(path, &data, &size, &labels);
        if (r < 0)
                return r;
        r = oci_build(data, size, streq(path, "-") ? "bpf.o" : base ? base + 1 : path, labels, ret, &e);
        return r < 0 ? ctl_error(r, "%s: %s", path, e.message) : 0;
}

int verb_image_build(const Ctl *c, char **args) {
        _cleanup_(oci_built_done) OciBuilt img = { 0 };
        _cleanup_error_ Error e = ERROR_NULL;
        _cleanup_free_ char *dir = NULL;
        const char *tag = "latest", *colon;
        int r;

        if (!c->out_dir)
                return ctl_error(-EINVAL, "image build: --out DIR[:TAG] says where the OCI layout goes");
        /* DIR:TAG as skopeo's oci: transport names a layout's image */
        colon = strrchr(c->out_dir, ':');
        dir = colon ? strndup(c->out_dir, colon - c->out_dir) : strdup(c->out_dir);
        if (!dir)
                return ctl_oom();
        if (colon)
                tag = colon + 1;
        if (!dir[0] || !tag[0])
                return ctl_error(-EINVAL, "--out %s: DIR[:TAG], neither empty", c->out_dir);
        r = image_of(args[0], &img);
        if (r < 0)
                return r;
        r = oci_layout_write(dir, tag, &img, &e);
        if (r < 0)
                return ctl_error(r, "%s", e.message);
        if (c->json) {
                _cleanup_(json_decrefp) json_t *j =
                        json_pack("{s:s, s:s, s:s, s:s}", "layout", dir, "tag", tag, "manifest_digest",
                                  img.manifest.digest, "config", img.config.data);
                return j ? ctl_print_json(j) : ctl_oom();
        }
        printf("oci:%s:%s %s\n", dir, tag, img.manifest.digest);
        return 0;
}

/* The reference parsed, and its registry's entry in the registries file (NULL: none). */
static int registry_of(const Ctl *c, const char *ref, OciRef *parsed, OciRegistries **regs,
                       const OciRegistry **ret) {
        _cleanup_error_ Error e = ERROR_NULL;
        int r;

        r = oci_ref_parse(ref, parsed, &e);
        if (r < 0)
                return ctl_error(r, "%s", e.message);
        r = oci_registries_load(c->registries ?: "/etc/clsd/registries.json", c->registries != NULL, regs,
                                &e);
        if (r < 0)
                return ctl_error(r, "%s", e.message);
        *ret = oci_registries_find(*regs, parsed->registry);
        return 0;
}

/* The cosign signature of the image ref names (manifest digest digest): the simple-signing payload,
 * signed with the key, as an image for the tag sha256-HEX.sig beside it. Made before anything is pushed: a
 * key that cannot sign leaves the registry as it was. */
static int signature_image(const Ctl *c, const OciRef *ref, const char *digest, const OciPullOptions *o,
                           OciBuilt *ret, char **ret_ref) {
        _cleanup_error_ Error e = ERROR_NULL;
        _cleanup_free_ char *key = NULL, *payload = NULL, *signature = NULL, *docker_ref = NULL,
                            *sig_ref = NULL;
        size_t key_size = 0;
        int r;

        r = read_regular_file(c->sign_key, SIGNING_KEY_MAX, &key, &key_size);
        if (r < 0)
                return ctl_error(r, "--sign %s: %s", c->sign_key, strerror(-r));
        if (asprintf(&docker_ref, "%s/%s", ref->registry, ref->repository) < 0 ||
            asprintf(&sig_ref, "%s%s/%s:sha256-%s.sig", OCI_REF_PREFIX, ref->registry, ref->repository,
                     digest + 7) < 0 ||
            !(payload = cosign_payload(docker_ref, digest)))
                return ctl_oom();
        r = cosign_sign(key, key_size, payload, strlen(payload), &signature, &e);
        explicit_bzero(key, key_size);
        if (r < 0)
                return ctl_error(r, "--sign %s: %s", c->sign_key, e.message);
        /* the tag's signatures by other keys stay beside this one, as cosign keeps them */
        _cleanup_(json_decrefp) json_t *existing = NULL;
        r = oci_manifest_get(sig_ref, o, &existing, &e);
        if (r < 0)
                return ctl_error(r, "the signatures there: %s", e.message);
        r = oci_build_signature(payload, signature, existing, ret, &e);
        if (r < 0)
                return ctl_error(r, "the signature: %s", e.message);
        *ret_ref = TAKE_PTR(sig_ref);
        return 0;
}

int verb_image_push(const Ctl *c, char **args) {
        _cleanup_(oci_registries_freep) OciRegistries *regs = NULL;
        _cleanup_(oci_built_done) OciBuilt img = { 0 }, sig = { 0 };
        _cleanup_error_ Error e = ERROR_NULL;
        _cleanup_free_ char *pinned = NULL, *sig_ref = NULL;
        const OciRegistry *reg = NULL;
        OciRef parsed;
        int r;

        r = registry_of(c, args[1], &parsed, &regs, &reg);
        if (r < 0)
                return r;
        if (!parsed.tag[0] || parsed.digest[0])
                return ctl_error(-EINVAL,
                                 "%s: a push names the tag to put the image under "
                                 "(oci://REGISTRY/REPOSITORY:TAG), and no digest",
                                 args[1]);
        r = image_of(args[0], &img);
        if (r < 0)
                return r;
        const OciPullOptions o = { .registry = reg };
        if (c->sign_key) {
                r = signature_image(c, &parsed, img.manifest.digest, &o, &sig, &sig_ref);
                if (r < 0)
                        return r;
        }
        r = oci_push(args[1], &o, &img, NULL, &e);
        if (r >= 0 && sig_ref)
                r = oci_push(sig_ref, &o, &sig, NULL, &e);
        if (r < 0)
                return ctl_error(r, "%s", e.message);
        r = oci_ref_pinned(&parsed, img.manifest.digest, &pinned);
        if (r < 0)
                return ctl_oom();
        if (c->json) {
                _cleanup_(json_decrefp) json_t *j =
                        json_pack("{s:s, s:s, s:b}", "reference", pinned, "manifest_digest",
                                  img.manifest.digest, "signed", c->sign_key != NULL);
                return j ? ctl_print_json(j) : ctl_oom();
        }
        printf("%s\n", pinned);
        return 0;
}

/* What an image in a registry holds: pulled as a node pulls it (the manifest, the configuration, the
 * layer, the signature tag), its object inspected here. */
int verb_image_inspect(const Ctl *c, char **args) {
        _cleanup_(oci_registries_freep) OciRegistries *regs = NULL;
        _cleanup_(nl_object_info_freep) NlObjectInfo *info = NULL;
        _cleanup_(json_decrefp) json_t *out = NULL, *labels = NULL, *env = NULL;
        _cleanup_error_ Error e = ERROR_NULL;
        const OciRegistry *reg = NULL;
        OciImage img = { 0 };
        json_t *programs, *maps;
        size_t n_sigs;
        OciRef parsed;
        int r;

        r = registry_of(c, args[0], &parsed, &regs, &reg);
        if (r < 0)
                return r;
        r = oci_pull(args[0],
                     &(OciPullOptions){ .registry = reg, .size_max = IMAGE_OBJECT_MAX, .signature = true },
                     &img, &e);
        if (r < 0)
                return ctl_error(r, "%s", e.message);
        r = nl_object_inspect_forked(img.data, img.size, &info, &e);
        if (r < 0) {
                oci_image_done(&img);
                return ctl_error(r, "%s: its object: %s", args[0], e.message);
        }
        labels = img.labels ? json_loads(img.labels, 0, NULL) : json_object();
        env = img.envelope ? json_loadb(img.envelope, img.envelope_size, 0, NULL) : NULL;
        n_sigs = json_array_size(json_object_get(env, "signatures"));
        out = json_pack("{s:s, s:s, s:s, s:I, s:O, s:[], s:[], s:I}", "reference", img.pinned, "format",
                        img.format, "object_digest", img.digest, "size", (json_int_t) img.size, "labels",
                        labels ?: json_null(), "programs", "maps", "cosign_signatures", (json_int_t) n_sigs);
        oci_image_done(&img);
        if (!out)
                return ctl_oom();
        programs = json_object_get(out, "programs");
        maps = json_object_get(out, "maps");
        for (size_t i = 0; i < info->n_programs; i++)
                json_array_append_new(programs,
                                      json_pack("{s:s, s:s, s:s}", "name", info->programs[i].name, "section",
                                                info->programs[i].section, "type", info->programs[i].type));
        for (size_t i = 0; i < info->n_maps; i++)
                if (!info->maps[i].internal)
                        json_array_append_new(maps, json_pack("{s:s, s:s, s:i}", "name", info->maps[i].name,
                                                              "type", info->maps[i].type, "max_entries",
                                                              (int) info->maps[i].max_entries));
        if (c->json)
                return ctl_print_json(out);
        printf("image:   %s (%s)\nobject:  %s, %zu bytes\nsigned:  %zu cosign signature(s)\n",
               json_string_value(json_object_get(out, "reference")),
               json_string_value(json_object_get(out, "format")),
               json_string_value(json_object_get(out, "object_digest")),
               (size_t) json_integer_value(json_object_get(out, "size")), n_sigs);
        const char *k;
        json_t *v;
        json_object_foreach (labels, k, v) {
                /* a registry's bytes: made safe for the terminal */
                _cleanup_free_ char *ek = text_escape(k, false),
                                    *ev = text_escape(json_string_value(v) ?: "", false);
                printf("label:   %s=%s\n", strna(ek), strna(ev));
        }
        _cleanup_(table_freep) Table *t = table_new("KIND", "NAME", "TYPE", "SECTION/ENTRIES", NULL);
        if (!t)
                return ctl_oom();
        for (size_t i = 0; i < info->n_programs; i++) {
                table_add(t, "program");
                table_add(t, info->programs[i].name);
                table_add(t, info->programs[i].type);
                table_add(t, info->programs[i].section);
        }
        for (size_t i = 0; i < info->n_maps; i++) {
                if (info->maps[i].internal)
                        continue;
                table_add(t, "map");
                table_add(t, info->maps[i].name);
                table_add(t, info->maps[i].type);
                table_addf(t, "%u", info->maps[i].max_entries);
        }
        return ctl_table_print(t);
}
