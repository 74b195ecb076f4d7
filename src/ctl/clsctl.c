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

static const Verb map_verbs[] = {
        { "set", "clsctl map set IFNAME|policy:NAME MAP KEY VALUE", 4, 4, verb_map_set },
        { "rm", "clsctl map rm IFNAME|policy:NAME MAP KEY", 3, 3, verb_map_remove },
};

static const Verb fleet_verbs[] = {
        { "apply", "clsctl fleet apply FILE...", 1, CTL_ARGS_MAX, verb_fleet_apply },
        { "ls", "clsctl fleet ls", 0, 0, verb_fleet_list },
        { "rm", "clsctl fleet rm NAME [--sign KEY]", 1, 1, verb_fleet_remove },
        { "nodes", "clsctl fleet nodes", 0, 0, verb_fleet_nodes },
        { "status", "clsctl fleet status [POLICY]", 0, 1, verb_fleet_status },
        { "rollout", "clsctl fleet rollout status|pause|resume|abort|promote NAME", 2, 2,
          verb_fleet_rollout },
        { "history", "clsctl fleet history NAME", 1, 1, verb_fleet_history },
        { "rollback", "clsctl fleet rollback NAME [--to REVISION]", 1, 1, verb_fleet_rollback },
        { "rbac", "clsctl fleet rbac NODE... [--apply --out DIR]", 1, CTL_ARGS_MAX, verb_fleet_rbac },
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
static const char HELP[] =
        "NAME\n"
        "       clsctl - control clsd, the tc cls_bpf classifier daemon\n"
        "\n"
        "SYNOPSIS\n"
        "       clsctl [OPTIONS...] COMMAND [ARGS...]\n"
        "\n"
        "COMMANDS\n"
        "       ls                     List interfaces with the count of clsd and foreign filters\n"
        "       get IFNAME             Show the classifier document of IFNAME and what is attached\n"
        "       apply IFNAME FILE      Replace the classifier document of IFNAME with FILE (JSON)\n"
        "       diff IFNAME FILE       Show what apply would load and change, and why; change "
        "nothing\n"
        "       delete IFNAME          Remove the document of IFNAME and detach its filters\n"
        "       netns                  List named network namespaces and clsd's documents there\n"
        "       maps IFNAME [MAP]      List the attached programs' maps, or every entry of one MAP\n"
        "                              (its name, or its id), decoded through BTF\n"
        "       map set IFNAME MAP KEY VALUE\n"
        "                              Write one entry of MAP (KEY and VALUE in the JSON\n"
        "                              'maps' shows, checked against the map's BTF)\n"
        "       map rm IFNAME MAP KEY  Delete one entry of MAP\n"
        "                              (IFNAME policy:NAME: policy NAME's maps, on every\n"
        "                              interface it is applied to)\n"
        "       policy ls              List policies, with how many interfaces each matches\n"
        "       policy get NAME        Show the interfaces policy NAME matches and each hook's "
        "state\n"
        "       policy apply NAME FILE Create or replace policy NAME from FILE (JSON: match, order,\n"
        "                              ingress, egress); one row per interface it changed\n"
        "       policy diff NAME FILE  Show what policy apply would change on each interface\n"
        "       policy rm NAME         Remove policy NAME; its interfaces lose its filters\n"
        "       fleet apply FILE...    Write the fleet policy of each FILE (JSON: name, nodes,\n"
        "                              match, order, ingress, egress, rollout, health) to etcd,\n"
        "                              uploading the object files it names first (they become\n"
        "                              digests); several in one transaction, which nodes apply\n"
        "                              as one; a rollout's plan of waves and a history entry\n"
        "                              with each\n"
        "       fleet ls               List the fleet policies, their revisions and node selectors\n"
        "       fleet rm NAME          Remove fleet policy NAME; every node takes it away\n"
        "       fleet nodes            List the nodes: labels, clsd version, kernel, act_bpf, tcx,\n"
        "                              the revision each holds\n"
        "       fleet status [POLICY]  One row per node a policy selects: applied, pending,\n"
        "                              failed, overridden, behind (an older revision) or no\n"
        "                              status; exits 1 when a node failed\n"
        "       fleet rollout status NAME\n"
        "                              Policy NAME's rollout wave by wave: each node's step\n"
        "                              (applied, healthy, failed) and why\n"
        "       fleet rollout pause|resume|abort|promote NAME\n"
        "                              Hold the next waves; go on; halt and take every node\n"
        "                              back to the revision before; every wave now, the\n"
        "                              remaining holds skipped\n"
        "       fleet history NAME     Each revision of NAME: when, by whom, what changed and\n"
        "                              how its rollout ended\n"
        "       fleet rollback NAME    Apply the revision before the current one again (as a\n"
        "                              new revision, with its rollout), or --to REVISION\n"
        "       object ls              List stored BPF objects\n"
        "       object add FILE        Store a BPF object file (ELF) and show its programs\n"
        "       object show DIGEST     Show a stored object\n"
        "       object rm DIGEST       Remove a stored object no document uses\n"
        "       help                   Show this help\n"
        "\n"
        "       FILE may be '-' for stdin. DIGEST is sha256:<64 hex digits> or a unique prefix\n"
        "       of the hex digits, as 'object ls' shows them.\n"
        "\n"
        "OPTIONS\n"
        "       --socket PATH          Connect to PATH ('@NAME': abstract socket)\n"
        "       --host URL             Talk to the clsd at URL (https://HOST:PORT) instead\n"
        "       --hosts FILE           Run the command on every host of FILE (lines \"URL\" or\n"
        "                              \"NAME URL\") at once: each host's output, then a table;\n"
        "                              exits 1 if any host failed\n"
        "       --cacert FILE          The CA that signed the hosts' certificates (PEM)\n"
        "       --cert FILE, --key FILE\n"
        "                              A client certificate and its key (mutual TLS)\n"
        "       --token-file FILE      A bearer token (default: CLSD_TOKEN)\n"
        "       -n, --netns NAME       Interfaces of the network namespace /run/netns/NAME\n"
        "                              (ls, get, apply, diff, delete)\n"
        "       -j, --json             Print the daemon's JSON answer instead of tables, and\n"
        "                              errors as JSON on stderr\n"
        "       --wait[=SECONDS]       apply: wait until the document is applied or failed (exit\n"
        "                              1), at most SECONDS (default 30) for its interface\n"
        "       --if-match GENERATION  apply, policy apply: only if the document or policy is\n"
        "                              still at GENERATION\n"
        "       --fleet URL[,URL…]     etcd's endpoints, for fleet (default: CLSD_FLEET)\n"
        "       --fleet-prefix PATH    The fleet's keys in etcd (default %s)\n"
        "       --fleet-ca FILE, --fleet-cert FILE, --fleet-key FILE\n"
        "                              TLS to etcd: the CA to trust, a client certificate and key\n"
        "       --fleet-user NAME, --fleet-password-file FILE\n"
        "                              etcd's authentication: the user, and a file whose first\n"
        "                              line is its password (default: CLSD_FLEET_USER,\n"
        "                              CLSD_FLEET_PASSWORD_FILE)\n"
        "       --sign KEY             fleet apply, rollback: sign the policy with this secret key\n"
        "                              (minisign -W, or signify -n), for --fleet-require-signed\n"
        "                              nodes\n"
        "       --apply, --out DIR     fleet rbac: make the roles and users in etcd, each\n"
        "                              user's password in DIR/USER.password (0600)\n"
        "       --registries FILE      fleet apply: credentials and CAs of the registries that\n"
        "                              images named oci:// are pulled from, to check them and\n"
        "                              pin a tag to its digest (default /etc/clsd/registries.json,\n"
        "                              if it exists)\n"
        "       --waves LIST           fleet apply: roll out in these waves (\"1,10%%,100%%\"),\n"
        "                              whatever the file's rollout says of them\n"
        "       --to REVISION          fleet rollback: the revision to apply again\n"
        "       -v, --verbose          On failure, also print the daemon's detail (verifier log)\n"
        "       -h, --help             Show this help and exit\n"
        "       --version              Show the version and exit\n"
        "\n"
        "EXIT STATUS\n"
        "       0 on success, 1 on failure (one line on stderr), 2 on a usage error. diff and\n"
        "       policy diff, as diff(1): 0 when applying would change nothing, 1 when it would\n"
        "       change something, 2 when they could not tell (one line on stderr).\n"
        "\n"
        "ENVIRONMENT\n"
        "       CLSD_SOCKET            Socket used without --socket (default %s)\n"
        "       CLSD_HOST              A host used without --host or --socket\n"
        "       CLSD_TOKEN             A bearer token without --token-file\n"
        "       CLSD_FLEET             etcd's endpoints without --fleet\n"
        "       CLSD_FLEET_USER, CLSD_FLEET_PASSWORD_FILE\n"
        "                              etcd's user and its password's file without the options\n";

static void help(void) {
        printf(HELP, ETCD_PREFIX_DEFAULT, CTL_SOCKET_DEFAULT);
}

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
        ARG_SIGN,
        ARG_APPLY,
        ARG_OUT,
        ARG_REGISTRIES,
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
                Error e = ERROR_NULL;
                if (fleet_waves_parse(optarg, &v, &n, &e) < 0) {
                        int r = usage_error("%s", e.message);
                        error_done(&e);
                        return r;
                }
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
                help();
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
        case ARG_SIGN:
        case ARG_APPLY:
        case ARG_OUT:
        case ARG_REGISTRIES:
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
                { "sign", required_argument, NULL, ARG_SIGN },
                { "apply", no_argument, NULL, ARG_APPLY },
                { "out", required_argument, NULL, ARG_OUT },
                { "registries", required_argument, NULL, ARG_REGISTRIES },
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
                help();
                return 0;
        }
        if (streq(argv[0], "object")) {
                argc--, argv++;
                if (argc == 0)
                        return usage_error("missing command after 'object' (add, ls, show, rm)");
                r = find_verb(object_verbs, ELEMENTSOF(object_verbs), "object ", argc, argv, &v);
        } else if (streq(argv[0], "map")) {
                argc--, argv++;
                if (argc == 0)
                        return usage_error("missing command after 'map' (set, rm)");
                r = find_verb(map_verbs, ELEMENTSOF(map_verbs), "map ", argc, argv, &v);
        } else if (streq(argv[0], "fleet")) {
                argc--, argv++;
                if (argc == 0)
                        return usage_error(
                                "missing command after 'fleet' (apply, history, ls, nodes, rm, rollback, "
                                "rollout, status)");
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
        if (c->wait_sec > 0 && v->run != verb_iface_apply)
                return usage_error("--wait is for 'apply' only");
        if (c->waves && v->run != verb_fleet_apply)
                return usage_error("--waves is for 'fleet apply' only");
        if (c->rollback_to && v->run != verb_fleet_rollback)
                return usage_error("--to is for 'fleet rollback' only");
        if (c->sign_key && v->run != verb_fleet_apply && v->run != verb_fleet_rollback &&
            v->run != verb_fleet_remove)
                return usage_error("--sign is for 'fleet apply', 'fleet rm' and 'fleet rollback' only");
        if (c->registries && v->run != verb_fleet_apply)
                return usage_error("--registries is for 'fleet apply' only");
        if ((c->rbac_apply || c->out_dir) && v->run != verb_fleet_rbac)
                return usage_error("--apply and --out are for 'fleet rbac' only");

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
        return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
