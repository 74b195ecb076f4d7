/* options.c: clsd's options as one table (name, what it sets and how it is read), the defaults around
 * them, and getopt over the configuration file's options followed by the command line's. */
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config-file.h"
#include "help.h"
#include "log.h"
#include "options.h"

/* How an option's argument is read into its field. */
typedef enum OptionKind {
        OPT_STRING, /* const char *: the argument */
        OPT_STRING_OR_NONE, /* const char *: the argument, '' for NULL */
        OPT_FLAG, /* bool: true */
        OPT_SIZE, /* size_t: a positive integer */
        OPT_UINT, /* unsigned: a positive integer */
        OPT_SPECIAL, /* read by option_special() */
} OptionKind;

typedef struct OptionSpec {
        struct option getopt;
        OptionKind kind;
        size_t offset; /* of its field in Options */
} OptionSpec;

#define O(name, arg, kind, field) \
        { { name, arg, NULL, 0 }, kind, offsetof(Options, field) }
#define S(name, arg) \
        { { name, arg, NULL, 0 }, OPT_SPECIAL, 0 }

/* The long options, for getopt and for the configuration file, which takes their full names only. */
static const OptionSpec specs[] = {
        O("state-dir", required_argument, OPT_STRING, daemon.state_dir),
        O("hogs-dir", required_argument, OPT_STRING, daemon.hogs_dir),
        O("bpffs-dir", required_argument, OPT_STRING, daemon.bpffs_dir),
        S("check", optional_argument),
        O("flush", no_argument, OPT_FLAG, flush),
        O("socket", required_argument, OPT_STRING_OR_NONE, api.socket_path),
        S("listen", required_argument),
        O("token-file", required_argument, OPT_STRING, api.token_file),
        O("tls-cert", required_argument, OPT_STRING, api.tls_cert),
        O("tls-key", required_argument, OPT_STRING, api.tls_key),
        O("client-ca", required_argument, OPT_STRING, api.client_ca),
        O("access-file", required_argument, OPT_STRING, api.access_file),
        S("metrics-listen", required_argument),
        O("bpf-stats", no_argument, OPT_FLAG, daemon.bpf_stats),
        S("max-object-size", required_argument),
        O("max-json-size", required_argument, OPT_SIZE, api.json_size_max),
        O("max-connections", required_argument, OPT_UINT, api.connections_max),
        O("request-timeout", required_argument, OPT_UINT, api.timeout_sec),
        O("header-timeout", required_argument, OPT_UINT, api.header_timeout_sec),
        O("max-connections-per-peer", required_argument, OPT_UINT, api.connections_per_peer),
        O("max-objects", required_argument, OPT_SIZE, daemon.objects_max),
        O("max-objects-size", required_argument, OPT_SIZE, daemon.objects_bytes_max),
        O("max-documents", required_argument, OPT_SIZE, daemon.documents_max),
        O("max-policies", required_argument, OPT_SIZE, daemon.policies_max),
        S("resync-interval", required_argument),
        S("log-level", required_argument),
        O("fleet", required_argument, OPT_STRING, fleet.urls),
        O("fleet-prefix", required_argument, OPT_STRING, fleet.prefix),
        O("node", required_argument, OPT_STRING, fleet.node),
        O("node-labels", required_argument, OPT_STRING, fleet.labels),
        O("advertise", required_argument, OPT_STRING, fleet.advertise),
        O("fleet-ca", required_argument, OPT_STRING, fleet.creds.ca),
        O("fleet-cert", required_argument, OPT_STRING, fleet.creds.cert),
        O("fleet-key", required_argument, OPT_STRING, fleet.creds.key),
        O("fleet-user", required_argument, OPT_STRING, fleet.creds.user),
        O("fleet-password-file", required_argument, OPT_STRING, fleet.creds.password_file),
        O("fleet-allow-writer", no_argument, OPT_FLAG, fleet.allow_writer),
        O("fleet-require-signed", no_argument, OPT_FLAG, fleet.require_signed),
        S("fleet-lease-ttl", required_argument),
        S("object-dir", required_argument),
        O("trusted-keys", required_argument, OPT_STRING, trusted_keys_dir),
        O("registries", required_argument, OPT_STRING, registries_file),
        S("config", required_argument), /* read before: config_file_argv() */
        S("help", no_argument),
        S("version", no_argument),
};

static const OptionSpec *spec_find(const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(specs); i++)
                if (streq(specs[i].getopt.name, name))
                        return &specs[i];
        return NULL;
}

bool options_file_may_set(const char *name) {
        static const char *const commands[] = { "check", "flush", "worker", "help", "version", "config" };

        for (size_t i = 0; i < ELEMENTSOF(commands); i++)
                if (streq(name, commands[i]))
                        return false;
        return spec_find(name) != NULL;
}

/* For the configuration file: 1 an option it may set, -1 one of the command's own, 0 none. */
static int file_may_set(const char *name) {
        if (options_file_may_set(name))
                return 1;
        return streq(name, "worker") || spec_find(name) ? -1 : 0;
}

static int parse_size(const char *flag, const char *s, size_t *ret) {
        char *end;
        unsigned long long v;

        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno || end == s || *end || v == 0 || s[0] == '-') {
                fprintf(stderr, "clsd: --%s: \"%s\" is not a positive integer\n", flag, s);
                return -EINVAL;
        }
        *ret = (size_t) v;
        return 0;
}

static int listen_address(const char *flag, const char *arg, const char **ret) {
        if (!api_listen_address_valid(arg)) {
                fprintf(stderr,
                        "clsd: --%s %s: expected ADDR:PORT or [ADDR6]:PORT with a numeric address and a "
                        "port "
                        "from 1 to 65535\n",
                        flag, arg);
                return -EINVAL;
        }
        *ret = arg;
        return 0;
}

/* The options that are more than a field: 1 to go on, 0 to exit 0, -EINVAL. */
static int option_special(Options *o, const char *name, const char *arg) {
        size_t v;
        int r;

        if (streq(name, "check")) {
                o->check = true;
                o->check_file = arg;
        } else if (streq(name, "listen"))
                return listen_address(name, arg, &o->api.listen) < 0 ? -EINVAL : 1;
        else if (streq(name, "metrics-listen"))
                return listen_address(name, arg, &o->api.metrics_listen) < 0 ? -EINVAL : 1;
        else if (streq(name, "max-object-size")) {
                if (parse_size(name, arg, &o->api.object_size_max) < 0)
                        return -EINVAL;
                o->daemon.object_size_max = o->api.object_size_max;
        } else if (streq(name, "resync-interval")) {
                if (streq(arg, "0"))
                        o->daemon.resync_usec = 0;
                else if (parse_size(name, arg, &v) < 0)
                        return -EINVAL;
                else
                        o->daemon.resync_usec = (uint64_t) v * 1000000;
        } else if (streq(name, "log-level")) {
                r = log_level_from_string(arg);
                if (r < 0) {
                        fprintf(stderr, "clsd: --log-level: unknown level \"%s\"\n", arg);
                        return -EINVAL;
                }
                log_set_max_level(r);
        } else if (streq(name, "fleet-lease-ttl")) {
                if (parse_size(name, arg, &v) < 0)
                        return -EINVAL;
                if (v < 2 || v > 3600) {
                        fprintf(stderr, "clsd: --fleet-lease-ttl: from 2 to 3600 seconds, not %zu\n", v);
                        return -EINVAL;
                }
                o->fleet.lease_ttl = (unsigned) v;
        } else if (streq(name, "object-dir")) {
                if (arg[0] && o->n_object_dirs == OBJECT_DIRS_MAX) {
                        fprintf(stderr, "clsd: --object-dir: at most %d\n", OBJECT_DIRS_MAX);
                        return -EINVAL;
                }
                if (arg[0]) /* '': none */
                        o->object_dirs_given[o->n_object_dirs++] = arg;
        } else if (streq(name, "help")) {
                options_help();
                return 0;
        } else if (streq(name, "version")) {
                printf("clsd %s\n", PROJECT_VERSION);
                return 0;
        }
        return 1;
}

static int option_set(Options *o, const OptionSpec *s, const char *arg) {
        void *field = (char *) o + s->offset;
        size_t v;

        switch (s->kind) {
        case OPT_STRING:
                *(const char **) field = arg;
                return 1;
        case OPT_STRING_OR_NONE:
                *(const char **) field = arg[0] ? arg : NULL;
                return 1;
        case OPT_FLAG:
                *(bool *) field = true;
                return 1;
        case OPT_SIZE:
                return parse_size(s->getopt.name, arg, (size_t *) field) < 0 ? -EINVAL : 1;
        case OPT_UINT:
                if (parse_size(s->getopt.name, arg, &v) < 0)
                        return -EINVAL;
                *(unsigned *) field = (unsigned) v;
                return 1;
        case OPT_SPECIAL:
                break;
        }
        return option_special(o, s->getopt.name, arg);
}

static void options_defaults(Options *o) {
        *o = (Options){
                .daemon = { .state_dir = DEFAULT_STATE_DIR,
                            .hogs_dir = DAEMON_HOGS_DIR_DEFAULT,
                            .bpffs_dir = DAEMON_BPFFS_DIR_DEFAULT,
                            .netns_dir = DAEMON_NETNS_DIR_DEFAULT,
                            .object_size_max = API_OBJECT_SIZE_MAX_DEFAULT,
                            .objects_max = DAEMON_OBJECTS_MAX_DEFAULT,
                            .objects_bytes_max = DAEMON_OBJECTS_BYTES_MAX_DEFAULT,
                            .documents_max = DAEMON_DOCUMENTS_MAX_DEFAULT,
                            .policies_max = DAEMON_POLICIES_MAX_DEFAULT,
                            .resync_usec = DAEMON_RESYNC_SEC_DEFAULT * 1000000ULL },
                .api = { .socket_path = DEFAULT_SOCKET,
                         .socket_fd = -1,
                         .json_size_max = API_JSON_SIZE_MAX_DEFAULT,
                         .object_size_max = API_OBJECT_SIZE_MAX_DEFAULT,
                         .connections_max = API_CONNECTIONS_MAX_DEFAULT,
                         .timeout_sec = API_TIMEOUT_SEC_DEFAULT,
                         .header_timeout_sec = API_HEADER_TIMEOUT_SEC_DEFAULT,
                         .connections_per_peer = API_CONNECTIONS_PER_PEER_DEFAULT },
        };
        /* By default the directory the package installs objects in, when there is one. */
        if (access(OBJECT_DIR_DEFAULT, F_OK) == 0)
                o->object_dirs_given[o->n_object_dirs++] = OBJECT_DIR_DEFAULT;
}

static int getopt_all(Options *o, int argc, char **argv) {
        struct option longs[ELEMENTSOF(specs) + 1] = { 0 };
        bool object_dirs_given = false;
        int c, index, r;

        for (size_t i = 0; i < ELEMENTSOF(specs); i++) {
                longs[i] = specs[i].getopt;
                longs[i].val = (int) i + 0x100;
        }
        while ((c = getopt_long(argc, argv, "h", longs, &index)) >= 0) {
                const OptionSpec *s = c == 'h' ? spec_find("help") : c >= 0x100 ? &specs[c - 0x100] : NULL;
                if (!s) {
                        fprintf(stderr, "Try 'clsd --help'.\n");
                        return -EINVAL;
                }
                if (streq(s->getopt.name, "object-dir") && !object_dirs_given) {
                        /* given: the default is not one of them */
                        object_dirs_given = true;
                        o->n_object_dirs = 0;
                }
                r = option_set(o, s, optarg);
                if (r <= 0)
                        return r;
        }
        if (optind < argc) {
                fprintf(stderr, "clsd: unexpected argument \"%s\"\nTry 'clsd --help'.\n", argv[optind]);
                return -EINVAL;
        }
        return 1;
}

int options_parse(Options *o, int argc, char **argv) {
        int r;

        options_defaults(o);
        r = config_file_argv(argc, argv, CONFIG_FILE_DEFAULT, file_may_set, &o->config_strings,
                             &o->n_config_strings, &o->argv);
        if (r < 0)
                return r;
        r = getopt_all(o, (int) o->n_config_strings + argc, o->argv);
        if (r <= 0)
                return r;
        const FleetConfig *fc = &o->fleet;
        if (!fc->urls && (fc->prefix || fc->node || fc->labels || fc->creds.ca || fc->creds.cert ||
                          fc->creds.key || fc->lease_ttl || fc->creds.user || fc->creds.password_file ||
                          fc->allow_writer || fc->require_signed)) {
                fprintf(stderr, "clsd: --fleet-prefix, --node, --node-labels, --fleet-ca, --fleet-cert, "
                                "--fleet-key, --fleet-user, --fleet-password-file, --fleet-lease-ttl, "
                                "--fleet-allow-writer and --fleet-require-signed need --fleet\n");
                return -EINVAL;
        }
        if (fc->require_signed && !o->trusted_keys_dir) {
                fprintf(stderr, "clsd: --fleet-require-signed needs --trusted-keys DIR (the keys that sign "
                                "fleet policies)\n");
                return -EINVAL;
        }
        return 1;
}

static int object_dirs_resolve(Options *o) {
        for (size_t i = 0; i < o->n_object_dirs; i++) {
                const char *d = o->object_dirs_given[i];
                struct stat st;
                char *real = realpath(d, NULL);
                if (!real || stat(real, &st) < 0 || !S_ISDIR(st.st_mode)) {
                        fprintf(stderr, "clsd: --object-dir %s: %s\n", d,
                                real ? "not a directory" : strerror(errno));
                        free(real);
                        return -EINVAL;
                }
                if (streq(real, "/")) {
                        fprintf(stderr,
                                "clsd: --object-dir %s: the whole file system is not an object directory\n",
                                d);
                        free(real);
                        return -EINVAL;
                }
                o->object_dirs_real[i] = real;
        }
        o->api.object_dirs = o->daemon.object_dirs = (const char *const *) o->object_dirs_real;
        return 0;
}

int options_registries_load(const Options *o, OciRegistries **ret, Error *reterr) {
        /* the default file may be missing (no registry needs credentials); one given must be there */
        return oci_registries_load(o->registries_file ?: REGISTRIES_FILE_DEFAULT, o->registries_file != NULL,
                                   ret, reterr);
}

int options_resolve(Options *o) {
        _cleanup_error_ Error e = ERROR_NULL;

        if (o->trusted_keys_dir) {
                if (trusted_keys_load(o->trusted_keys_dir, &o->trusted_keys, &e) < 0) {
                        fprintf(stderr, "clsd: %s\n", e.message);
                        return -EINVAL;
                }
                if (trusted_keys_count(o->trusted_keys) == 0)
                        log_warning("--trusted-keys %s holds no *.pub key: no object can be loaded",
                                    o->trusted_keys_dir);
                o->daemon.trusted_keys = o->trusted_keys;
                o->fleet.trusted_keys = o->trusted_keys;
                o->daemon.trusted_keys_dir = o->trusted_keys_dir;
        }
        if (options_registries_load(o, &o->registries, &e) < 0) {
                fprintf(stderr, "clsd: --registries: %s\n", e.message);
                return -EINVAL;
        }
        o->daemon.registries = o->registries;
        return 0;
}

int options_resolve_object_dirs(Options *o) {
        return object_dirs_resolve(o);
}

void options_done(Options *o) {
        for (size_t i = 0; i < o->n_config_strings; i++)
                free(o->config_strings[i]);
        free(o->config_strings);
        free(o->argv);
        for (size_t i = 0; i < OBJECT_DIRS_MAX && o->object_dirs_real[i]; i++)
                free(o->object_dirs_real[i]);
        trusted_keys_free(o->trusted_keys);
        oci_registries_free(o->registries);
        *o = (Options){ 0 };
}
