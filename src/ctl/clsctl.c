/* clsctl.c: the command line: options, the verb table, --help; each verb's file does the work with what
 * ctl.c shares (the daemon call and its one error line). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* asprintf(), open_memstream() */
#endif
#include <getopt.h>
#include <stdlib.h>
#include <limits.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "ctl.h"
#include "etcd-rollout.h"
#include "etcd.h"
#include "fileio.h"
#include "output.h"
#include "signature.h"

#ifndef PROJECT_VERSION
#define PROJECT_VERSION "0.1.0"
#endif

#define EXIT_USAGE 2

typedef struct Verb {
        const char *name;
        const char *usage; /* shown when the arguments do not fit */
        unsigned min_args, max_args;
        int (*run)(const Ctl *c, char **args);
} Verb;

static const Verb verbs[] = {
        { "ls", "clsctl ls", 0, 0, verb_ifaces_list },
        { "get", "clsctl get IFNAME", 1, 1, verb_iface_get },
        { "apply", "clsctl apply IFNAME FILE", 2, 2, verb_iface_apply },
        { "diff", "clsctl diff IFNAME FILE", 2, 2, verb_iface_diff },
        { "delete", "clsctl delete IFNAME", 1, 1, verb_iface_delete },
        { "netns", "clsctl netns", 0, 0, verb_netns_list },
        { "maps", "clsctl maps IFNAME|policy:NAME [MAP]", 1, 2, verb_maps },
};

static const Verb object_verbs[] = {
        { "ls", "clsctl object ls", 0, 0, verb_object_list },
        { "add", "clsctl object add FILE", 1, 1, verb_object_add },
        { "show", "clsctl object show DIGEST", 1, 1, verb_object_show },
        { "rm", "clsctl object rm DIGEST", 1, 1, verb_object_remove },
};

static const Verb image_verbs[] = {
        { "build", "clsctl image build FILE --out DIR[:TAG]", 1, 1, verb_image_build },
        { "push", "clsctl image push FILE oci://REGISTRY/REPOSITORY:TAG [--sign KEY]", 2, 2,
          verb_image_push },
        { "inspect", "clsctl image inspect oci://REGISTRY/REPOSITORY[:TAG][@DIGEST]", 1, 1,
          verb_image_inspect },
};

static const Verb map_verbs[] = {
        { "set", "clsctl map set IFNAME|policy:NAME MAP KEY VALUE", 4, 4, verb_map_set },
        { "rm", "clsctl map rm IFNAME|policy:NAME MAP KEY", 3, 3, verb_map_remove },
};

static const Verb fleet_verbs[] = {
        { "apply", "clsctl fleet apply FILE...", 1, CTL_ARGS_MAX, verb_fleet_apply },
        { "diff", "clsctl fleet diff FILE [--wait=SECONDS]", 1, 1, verb_fleet_diff },
        { "ls", "clsctl fleet ls", 0, 0, verb_fleet_list },
        { "rm", "clsctl fleet rm NAME [--sign KEY]", 1, 1, verb_fleet_remove },
        { "nodes", "clsctl fleet nodes", 0, 0, verb_fleet_nodes },
        { "status", "clsctl fleet status [POLICY]", 0, 1, verb_fleet_status },
        { "rollout", "clsctl fleet rollout status|pause|resume|abort|promote NAME", 2, 2,
          verb_fleet_rollout },
        { "history", "clsctl fleet history NAME", 1, 1, verb_fleet_history },
        { "rollback", "clsctl fleet rollback NAME [--to REVISION]", 1, 1, verb_fleet_rollback },
        { "rbac", "clsctl fleet rbac NODE... [--apply --out DIR]", 1, CTL_ARGS_MAX, verb_fleet_rbac },
        { "targets", "clsctl fleet targets [--out FILE] [--watch]", 0, 0, verb_fleet_targets },
        { "top", "clsctl fleet top [POLICY] [--watch]", 0, 1, verb_fleet_top },
};

static const Verb policy_verbs[] = {
        { "ls", "clsctl policy ls", 0, 0, verb_policy_list },
        { "get", "clsctl policy get NAME", 1, 1, verb_policy_get },
        { "apply", "clsctl policy apply NAME FILE", 2, 2, verb_policy_apply },
        { "diff", "clsctl policy diff NAME FILE", 2, 2, verb_policy_diff },
        { "rm", "clsctl policy rm NAME", 1, 1, verb_policy_remove },
};

static int usage_error(const char *fmt, ...) _printf_(1, 2);
static int usage_error(const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        (void) ctl_verror(-EINVAL, fmt, ap);
        va_end(ap);
        fputs("Try 'clsctl --help'.\n", stderr);
        return -EINVAL;
}

/* clsctl --help: one text, its defaults filled in by help(). */

enum {
        ARG_VERSION = 0x100,
        ARG_SOCKET,
        ARG_IF_MATCH,
        ARG_FLEET,
        ARG_FLEET_PREFIX,
        ARG_FLEET_CA,
        ARG_FLEET_CERT,
        ARG_FLEET_KEY,
        ARG_HOST,
        ARG_HOSTS,
        ARG_CACERT,
        ARG_CERT,
        ARG_KEY,
        ARG_TOKEN_FILE,
        ARG_WAIT,
        ARG_WAVES,
        ARG_TO,
        ARG_FLEET_USER,
        ARG_FLEET_PASSWORD_FILE,
        ARG_FLEET_TIMEOUT,
        ARG_SIGN,
        ARG_APPLY,
        ARG_OUT,
        ARG_REGISTRIES,
        ARG_WATCH,
};

/* One option of the command line: 1 to go on, 0 to exit 0 (help, version), < 0 on a usage error. */
/* The options of clsctl fleet: etcd, and what fleet apply and rollback take. */
static int fleet_option_apply(Ctl *c, int opt) {
        switch (opt) {
        case ARG_FLEET:
                if (!*optarg)
                        return usage_error("--fleet needs URL[,URL…]");
                c->fleet_urls = optarg;
                break;
        case ARG_FLEET_PREFIX:
                if (!fleet_prefix_valid(optarg))
                        return usage_error(
                                "--fleet-prefix %s: expected a path that starts and ends with '/'", optarg);
                c->fleet_prefix = optarg;
                break;
        case ARG_FLEET_CA:
                c->fleet_ca = optarg;
                break;
        case ARG_FLEET_CERT:
                c->fleet_cert = optarg;
                break;
        case ARG_FLEET_KEY:
                c->fleet_key = optarg;
                break;
        case ARG_WAVES: {
                FleetWave *v = NULL;
                size_t n = 0;
                _cleanup_error_ Error e = ERROR_NULL;
                if (fleet_waves_parse(optarg, &v, &n, &e) < 0)
                        return usage_error("%s", e.message);
                free(v); /* checked here, made the envelope's by fleet apply */
                c->waves = optarg;
                break;
        }
        case ARG_FLEET_USER:
                if (!*optarg)
                        return usage_error("--fleet-user needs an etcd user's name");
                c->fleet_user = optarg;
                break;
        case ARG_FLEET_PASSWORD_FILE:
                c->fleet_password_file = optarg;
                break;
        case ARG_FLEET_TIMEOUT: {
                char *end = NULL;
                c->fleet_timeout_sec = strtod(optarg, &end);
                if (end == optarg || *end || !(c->fleet_timeout_sec >= 1) || c->fleet_timeout_sec > 3600)
                        return usage_error("--fleet-timeout %s: expected seconds, 1 to 3600 (default 60)",
                                           optarg);
                break;
        }
        case ARG_SIGN:
                c->sign_key = optarg;
                break;
        case ARG_APPLY:
                c->rbac_apply = true;
                break;
        case ARG_OUT:
                c->out_dir = optarg;
                break;
        case ARG_REGISTRIES:
                c->registries = optarg;
                break;
        case ARG_WATCH:
                c->watch = true;
                break;
        case ARG_TO: {
                char *end = NULL;
                unsigned long long v = strtoull(optarg, &end, 10);
                if (!*optarg || *end || v == 0 || optarg[0] == '-')
                        return usage_error("--to %s: expected a revision (fleet history shows them)",
                                           optarg);
                c->rollback_to = v;
                break;
        }
        default:
                return -EINVAL;
        }
        return 1;
}

static int option_apply(Ctl *c, int opt, char *argv[]) {
        switch (opt) {
        case 'h':
                ctl_help();
                return 0;
        case ARG_VERSION:
                printf("clsctl %s\n", PROJECT_VERSION);
                return 0;
        case ARG_SOCKET:
                if (!*optarg)
                        return usage_error("--socket needs a path");
                c->socket_path = optarg;
                c->host = NULL; /* CLSD_HOST's */
                break;
        case 'j':
                c->json = true;
                ctl_errors_as_json(true);
                break;
        case 'n':
                if (!*optarg)
                        return usage_error("--netns needs a name");
                c->netns = optarg;
                break;
        case 'v':
                c->verbose = true;
                break;
        case ARG_IF_MATCH:
                if (!*optarg || strspn(optarg, "0123456789") != strlen(optarg) || strlen(optarg) > 19)
                        return usage_error("--if-match needs a generation number, not '%s'", optarg);
                c->if_match = optarg;
                break;
        case ARG_FLEET:
        case ARG_FLEET_PREFIX:
        case ARG_FLEET_CA:
        case ARG_FLEET_CERT:
        case ARG_FLEET_KEY:
        case ARG_WAVES:
        case ARG_TO:
        case ARG_FLEET_USER:
        case ARG_FLEET_PASSWORD_FILE:
        case ARG_FLEET_TIMEOUT:
        case ARG_SIGN:
        case ARG_APPLY:
        case ARG_OUT:
        case ARG_REGISTRIES:
        case ARG_WATCH:
                return fleet_option_apply(c, opt);
        case ARG_HOST:
                if (!startswith(optarg, "https://") && !startswith(optarg, "http://"))
                        return usage_error("--host %s: expected https://HOST:PORT", optarg);
                c->host = optarg;
                break;
        case ARG_HOSTS:
                if (!*optarg)
                        return usage_error("--hosts needs a file");
                c->hosts_file = optarg;
                break;
        case ARG_CACERT:
                c->cacert = optarg;
                break;
        case ARG_CERT:
                c->cert = optarg;
                break;
        case ARG_KEY:
                c->key = optarg;
                break;
        case ARG_TOKEN_FILE:
                c->token_file = optarg;
                break;
        case ARG_WAIT: {
                char *end = NULL;
                c->wait_sec = optarg ? strtod(optarg, &end) : 30;
                if (optarg && (end == optarg || *end || !(c->wait_sec > 0) || c->wait_sec > 86400))
                        return usage_error("--wait=%s: expected seconds (default 30)", optarg);
                break;
        }
        case ':':
                return usage_error("option '%s' needs an argument", argv[optind - 1]);
        case '?':
                /* glibc: optopt is 0 for an unknown long option, and the option's value for a
                 * long option given an argument it does not take ("--json=x"). */
                if (optopt == 0)
                        return usage_error("unknown option '%s'", argv[optind - 1]);
                if (optopt >= 0x100 || strchr("hjv", optopt))
                        return usage_error("option '%s' takes no argument", argv[optind - 1]);
                return usage_error("unknown option '-%c'", optopt);
        default:
                return -EINVAL;
        }
        return 1;
}

/* Returns 1 to go on, 0 to exit successfully (help, version), < 0 on a usage error (reported). */
static int parse_argv(int argc, char *argv[], Ctl *c) {
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                { "socket", required_argument, NULL, ARG_SOCKET },
                { "json", no_argument, NULL, 'j' },
                { "netns", required_argument, NULL, 'n' },
                { "verbose", no_argument, NULL, 'v' },
                { "if-match", required_argument, NULL, ARG_IF_MATCH },
                { "fleet", required_argument, NULL, ARG_FLEET },
                { "fleet-prefix", required_argument, NULL, ARG_FLEET_PREFIX },
                { "fleet-ca", required_argument, NULL, ARG_FLEET_CA },
                { "fleet-cert", required_argument, NULL, ARG_FLEET_CERT },
                { "fleet-key", required_argument, NULL, ARG_FLEET_KEY },
                { "host", required_argument, NULL, ARG_HOST },
                { "hosts", required_argument, NULL, ARG_HOSTS },
                { "cacert", required_argument, NULL, ARG_CACERT },
                { "cert", required_argument, NULL, ARG_CERT },
                { "key", required_argument, NULL, ARG_KEY },
                { "token-file", required_argument, NULL, ARG_TOKEN_FILE },
                { "wait", optional_argument, NULL, ARG_WAIT },
                { "waves", required_argument, NULL, ARG_WAVES },
                { "to", required_argument, NULL, ARG_TO },
                { "fleet-user", required_argument, NULL, ARG_FLEET_USER },
                { "fleet-password-file", required_argument, NULL, ARG_FLEET_PASSWORD_FILE },
                { "fleet-timeout", required_argument, NULL, ARG_FLEET_TIMEOUT },
                { "sign", required_argument, NULL, ARG_SIGN },
                { "apply", no_argument, NULL, ARG_APPLY },
                { "out", required_argument, NULL, ARG_OUT },
                { "registries", required_argument, NULL, ARG_REGISTRIES },
                { "watch", no_argument, NULL, ARG_WATCH },
                {},
        };
        int opt;

        opterr = 0; /* our own messages, in our one-line format */
        while ((opt = getopt_long(argc, argv, ":hjvn:", options, NULL)) >= 0) {
                int r = option_apply(c, opt, argv);
                if (r <= 0)
                        return r;
        }
        return 1;
}

static int find_verb(const Verb *table, size_t n, const char *prefix, int argc, char **argv,
                     const Verb **ret) {
        for (size_t i = 0; i < n; i++) {
                const Verb *v = &table[i];

                if (!streq(v->name, argv[0]))
                        continue;
                if ((unsigned) argc - 1 < v->min_args)
                        return usage_error("missing argument, usage: %s", v->usage);
                if ((unsigned) argc - 1 > v->max_args)
                        return usage_error("too many arguments, usage: %s", v->usage);
                for (int j = 1; j < argc; j++)
                        if (!*argv[j])
                                return usage_error("empty argument, usage: %s", v->usage);
                *ret = v;
                return 0;
        }
        return usage_error("unknown command '%s%s'", prefix, argv[0]);
}

/* Returns 1 with the verb to run, 0 for "help", < 0 on a usage error (reported). */
static int dispatch(int argc, char **argv, const Ctl *c, const Verb **ret_verb, char ***ret_args) {
        const Verb *v;
        int r;

        if (argc == 0)
                return usage_error("missing command");
        if (streq(argv[0], "help")) {
                if (argc > 1)
                        return usage_error("too many arguments, usage: clsctl help");
                ctl_help();
                return 0;
        }
        if (streq(argv[0], "object")) {
                argc--, argv++;
                if (argc == 0)
                        return usage_error("missing command after 'object' (add, ls, show, rm)");
                r = find_verb(object_verbs, ELEMENTSOF(object_verbs), "object ", argc, argv, &v);
        } else if (streq(argv[0], "image")) {
                argc--, argv++;
                if (argc == 0)
                        return usage_error("missing command after 'image' (build, inspect, push)");
                r = find_verb(image_verbs, ELEMENTSOF(image_verbs), "image ", argc, argv, &v);
        } else if (streq(argv[0], "map")) {
                argc--, argv++;
                if (argc == 0)
                        return usage_error("missing command after 'map' (set, rm)");
                r = find_verb(map_verbs, ELEMENTSOF(map_verbs), "map ", argc, argv, &v);
        } else if (streq(argv[0], "fleet")) {
                argc--, argv++;
                if (argc == 0)
                        return usage_error(
                                "missing command after 'fleet' (apply, diff, history, ls, nodes, rbac, rm, "
                                "rollback, rollout, status, targets, top)");
                r = find_verb(fleet_verbs, ELEMENTSOF(fleet_verbs), "fleet ", argc, argv, &v);
        } else if (streq(argv[0], "policy")) {
                argc--, argv++;
                if (argc == 0)
                        return usage_error("missing command after 'policy' (apply, diff, get, ls, rm)");
                r = find_verb(policy_verbs, ELEMENTSOF(policy_verbs), "policy ", argc, argv, &v);
        } else
                r = find_verb(verbs, ELEMENTSOF(verbs), "", argc, argv, &v);
        if (r < 0)
                return r;
        if (c->if_match && v->run != verb_iface_apply && v->run != verb_policy_apply)
                return usage_error("--if-match is for 'apply' and 'policy apply' only");
        if (c->wait_sec > 0 && v->run != verb_iface_apply && v->run != verb_fleet_diff)
                return usage_error("--wait is for 'apply' and 'fleet diff' only");
        if (c->waves && v->run != verb_fleet_apply)
                return usage_error("--waves is for 'fleet apply' only");
        if (c->rollback_to && v->run != verb_fleet_rollback)
                return usage_error("--to is for 'fleet rollback' only");
        if (c->sign_key && v->run != verb_fleet_apply && v->run != verb_fleet_rollback &&
            v->run != verb_fleet_remove && v->run != verb_image_push)
                return usage_error(
                        "--sign is for 'fleet apply', 'fleet rm', 'fleet rollback' and 'image push' only");
        if (c->registries && v->run != verb_fleet_apply && v->run != verb_fleet_diff &&
            v->run != verb_image_push && v->run != verb_image_inspect)
                return usage_error(
                        "--registries is for 'fleet apply', 'fleet diff', 'image push' and 'image "
                        "inspect' only");
        if (c->rbac_apply && v->run != verb_fleet_rbac)
                return usage_error("--apply is for 'fleet rbac' only");
        if (c->out_dir && v->run != verb_fleet_rbac && v->run != verb_fleet_targets &&
            v->run != verb_image_build)
                return usage_error("--out is for 'fleet rbac', 'fleet targets' and 'image build' only");
        if (c->watch && v->run != verb_fleet_targets && v->run != verb_fleet_top)
                return usage_error("--watch is for 'fleet targets' and 'fleet top' only");

        *ret_verb = v;
        *ret_args = argv + 1;
        return 1;
}

/* The bearer token of --token-file (one line), else of CLSD_TOKEN. */
static int token_read(Ctl *c) {
        const char *env = getenv("CLSD_TOKEN");
        _cleanup_free_ char *data = NULL;
        size_t size;
        int r;

        if (!c->token_file) {
                if (env && *env && !(c->token = strdup(env)))
                        return ctl_oom();
                return 0;
        }
        r = ctl_read_input(c->token_file, &data, &size);
        if (r < 0)
                return r;
        while (size > 0 && (data[size - 1] == '\n' || data[size - 1] == '\r'))
                data[--size] = 0;
        if (size == 0 || strlen(data) != size || strchr(data, '\n'))
                return ctl_error(-EINVAL, "--token-file %s: expected one line, the token", c->token_file);
        c->token = TAKE_PTR(data);
        return 0;
}

/* A full disk or a closed pipe must not pass for success. */
static int flush_stdout(void) {
        if (fflush(stdout) != 0 || ferror(stdout))
                return ctl_error(-EIO, "cannot write to stdout: %s", strerror(errno ?: EIO));
        return 0;
}

int main(int argc, char *argv[]) {
        const char *env = getenv("CLSD_SOCKET"), *fleet = getenv("CLSD_FLEET"), *host = getenv("CLSD_HOST");
        Ctl c = {
                .socket_path = env && *env ? env : CTL_SOCKET_DEFAULT,
                .fleet_urls = fleet && *fleet ? fleet : NULL,
                .host = host && *host ? host : NULL,
                .fleet_user = getenv("CLSD_FLEET_USER"),
                .fleet_password_file = getenv("CLSD_FLEET_PASSWORD_FILE"),
        };
        const Verb *verb = NULL;
        char **args = NULL;
        int r;

        r = parse_argv(argc, argv, &c);
        if (r <= 0)
                return r < 0 ? EXIT_USAGE : (flush_stdout() < 0 ? EXIT_FAILURE : EXIT_SUCCESS);

        r = dispatch(argc - optind, argv + optind, &c, &verb, &args);
        if (r <= 0)
                return r < 0 ? EXIT_USAGE : (flush_stdout() < 0 ? EXIT_FAILURE : EXIT_SUCCESS);

        r = token_read(&c);
        if (r < 0)
                return EXIT_FAILURE;
        if (c.hosts_file && startswith(verb->usage, "clsctl fleet ")) {
                (void) usage_error("--hosts is for commands clsd answers, not 'fleet' (etcd)");
                return EXIT_USAGE;
        }
        r = c.hosts_file ? ctl_run_on_hosts(&c, verb->usage + strlen("clsctl "), verb->run, args)
                         : verb->run(&c, args);
        free(c.token);
        if (flush_stdout() < 0)
                return EXIT_FAILURE;
        /* diff and policy diff as diff(1) and kubectl diff: 0 no change, 1 changes, 2 trouble */
        if (verb->run == verb_iface_diff || verb->run == verb_policy_diff)
                return r < 0 ? EXIT_USAGE : r > 0 ? EXIT_FAILURE : EXIT_SUCCESS;
        /* fleet diff: 2 also for a conflict, a refusal or a node that did not answer */
        if (verb->run == verb_fleet_diff)
                return r < 0 || r >= 2 ? EXIT_USAGE : r == 1 ? EXIT_FAILURE : EXIT_SUCCESS;
        return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
