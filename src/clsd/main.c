/* main.c: clsd's entry point and composition root: flags, the event loop, signals, wiring the daemon
 * to its faces. */
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <sys/resource.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api.h"
#include "daemon.h"
#include "fileio.h"
#include "fleet.h"
#include "log.h"
#include "nl.h"

#define OBJECT_DIRS_MAX 16
#define OBJECT_DIR_DEFAULT "/usr/lib/clsd"
#define CONFIG_FILE_DEFAULT "/etc/clsd/clsd.conf"

#define DEFAULT_STATE_DIR "/var/lib/clsd"
#define DEFAULT_SOCKET "/run/clsd/clsd.sock"

static void help(void) {
        printf("NAME\n"
               "       clsd - declarative tc cls_bpf classifiers per interface\n"
               "\n"
               "SYNOPSIS\n"
               "       clsd [OPTIONS...]\n"
               "\n"
               "DESCRIPTION\n"
               "       Keeps a store of desired eBPF classifier programs per interface and makes the\n"
               "       kernel match it over rtnetlink. Serves a REST API on a unix socket (and\n"
               "       optionally TCP). SIGTERM/SIGINT: exit, leaving every program attached; only\n"
               "       a DELETE or clsd --flush removes what clsd attached.\n"
               "       SIGHUP: re-read the token, access and TLS files, the trusted keys (what no\n"
               "       key verifies any more is removed) and the hogs, apply what changed, and\n"
               "       reconcile every interface.\n"
               "\n"
               "       A filter is a cls_bpf classifier (direct action, or classic mode with a\n"
               "       classid), or a tcx link; in classic mode it may have act_bpf actions that\n"
               "       run when it matches, where the kernel has act_bpf. Programs in any ELF\n"
               "       section are loaded by their use (sched_cls or sched_act), as tc does.\n"
               "\n"
               "       Programs are loaded and verified, and uploaded objects parsed, in worker\n"
               "       processes (clsd-worker beside clsd or in its libexec directory, else\n"
               "       clsd --worker; the parser's without privileges\n"
               "       under seccomp): a slow verifier or a crashing parser stops neither the API nor\n"
               "       drift repair. Every reason to touch an interface is a request in one queue;\n"
               "       reasons that arrive while one waits join it.\n"
               "\n"
               "       Hogs are documents declared in configuration: each *.json file of the hogs\n"
               "       directory is a PUT document plus \"ifname\", with objects named by absolute\n"
               "       path. A hog is applied at start and whenever its interface appears; the API\n"
               "       shows it with \"source\":\"hog\" and refuses to change or delete it. On the\n"
               "       hooks a hog declares it wins over an API document, which is kept and\n"
               "       reported \"overridden\".\n"
               "\n"
               "       Restarts and upgrades keep the data plane: every program clsd loads goes to\n"
               "       systemd's fd store (FDSTORE=1, with its maps) and is pinned under\n"
               "       BPFFS_DIR/progs/. A new clsd takes each program back from the fd store, then\n"
               "       from its pin, then by the id the kernel shows attached, and loads only what\n"
               "       none of them has: when the kernel already matches the store nothing is\n"
               "       loaded, attached or detached. A new build of an object takes over the maps\n"
               "       of the program it replaces, by name (see \"maps\" in the documents).\n"
               "       Under systemd (Type=notify) clsd sends READY=1 after the first reconcile,\n"
               "       STATUS= lines, STOPPING=1 and the watchdog's WATCHDOG=1, and serves the API on\n"
               "       the socket clsd.socket passes (FileDescriptorName=api).\n"
               "\n"
               "       Visibility: GET /ifaces/IFNAME/classifier/maps decodes the attached programs'\n"
               "       maps through BTF; GET /metrics is Prometheus' text format (also alone on\n"
               "       --metrics-listen); on the system bus clsd is org.clsd1 (D-Bus; the bus\n"
               "       DBUS_SYSTEM_BUS_ADDRESS names, if set), and runs on without one.\n"
               "\n"
               "OPTIONS\n"
               "       --config FILE          Options, one per line (\"option = value\", full names),\n"
               "                              before the command line's (default " CONFIG_FILE_DEFAULT "\n"
               "                              if it exists; '' for none); root's, not world-writable\n"
               "       --state-dir DIR        Documents and objects (default %s)\n"
               "       --hogs-dir DIR         Hog files (default %s; a missing directory holds none)\n"
               "       --object-dir DIR       Where objects named by path in API requests may be (by\n"
               "                              their real path; repeatable; default " OBJECT_DIR_DEFAULT "\n"
               "                              if it exists; '' for none: digests only). Others are\n"
               "                              refused, 403 object_path_refused, unread; hogs are not\n"
               "                              bound by it\n"
               "       --trusted-keys DIR     Load only objects signed (minisign or signify) by a key\n"
               "                              of DIR/*.pub: uploads (Clsd-Signature), files named\n"
               "                              by path and hogs (FILE.minisig or FILE.sig beside\n"
               "                              them), the fleet's, and the store's at start and on\n"
               "                              SIGHUP (DIR read again: a key removed revokes)\n"
               "       --bpffs-dir DIR        Where programs (progs/) and tcx links (tcx/) are\n"
               "                              pinned, on a bpf filesystem (default %s)\n"
               "       --check[=FILE]         Validate the hog files (JSON, fields, object files), or\n"
               "                              FILE alone, and exit: 0 if all are valid, 1 naming\n"
               "                              each problem (Ansible: validate: clsd --check=%%s)\n"
               "       --flush                Remove what clsd attached (its filters in every\n"
               "                              namespace, tcx links, pins), keep the store, and exit;\n"
               "                              refused while a clsd runs on the state directory\n"
               "       --socket PATH          Unix socket of the API, mode 0660 (default %s);\n"
               "                              --socket '' serves no unix socket; a socket systemd\n"
               "                              passes (clsd.socket) is used instead\n"
               "       --listen ADDR:PORT     Also serve the API on TCP (HTTPS with --tls-cert, which\n"
               "                              a non-loopback address needs); changes need an\n"
               "                              operator (a token, or a client certificate)\n"
               "       --token-file FILE      An operator's bearer token over TCP\n"
               "       --tls-cert FILE, --tls-key FILE\n"
               "                              The certificate (PEM, with its chain) and key of\n"
               "                              --listen: HTTPS; read again on SIGHUP\n"
               "       --client-ca FILE       Verify client certificates against these CAs (mutual\n"
               "                              TLS; read again on SIGHUP)\n"
               "       --access-file FILE     Roles (reader, operator) of unix users and groups,\n"
               "                              named tokens and client certificates (JSON; read\n"
               "                              again on SIGHUP); 403 forbidden names the role needed\n"
               "       --metrics-listen ADDR:PORT\n"
               "                              Serve GET /metrics (Prometheus) on TCP, and nothing\n"
               "                              else there: no token needed (every listener has it)\n"
               "       --bpf-stats            Hold BPF_ENABLE_STATS so that each program's run_count\n"
               "                              and run_time_ns are counted (costs two clock reads\n"
               "                              per run of every BPF program on the host)\n"
               "       --max-object-size N    Largest object upload in bytes (default %u)\n"
               "       --max-json-size N      Largest JSON body in bytes (default %u)\n"
               "       --max-connections N    Concurrent API connections (default %u)\n"
               "       --max-objects N, --max-objects-size BYTES, --max-documents N, --max-policies N\n"
               "                              What the API (and the fleet) may store: objects and\n"
               "                              their bytes together, interface documents, policies\n"
               "                              (defaults %u, %zu, %u, %u); over one, 507\n"
               "                              quota_exceeded; a hog is never refused\n"
               "       --request-timeout SEC  Idle time before a connection is dropped (default %u)\n"
               "       --header-timeout SEC   Time a client has to send a request's headers, from its\n"
               "                              connection or its previous answer (default %u): a\n"
               "                              client dripping bytes does not hold a slot for ever\n"
               "       --max-connections-per-peer N\n"
               "                              Connections one peer (an address over TCP, a uid on\n"
               "                              the unix socket) may hold at once (default %u)\n"
               "       --resync-interval SEC  Full resync of every interface, the backstop for lost\n"
               "                              events (default %u; 0: never)\n"
               "       --fleet URL[,URL…]     Take fleet policies from etcd (its v3 gateway) and write\n"
               "                              this node's record and status there; without it,\n"
               "                              nothing of the fleet runs\n"
               "       --fleet-prefix PATH    The fleet's keys in etcd (default %s)\n"
               "       --node NAME            This node's name in the fleet (default: the host name)\n"
               "       --node-labels K=V,…    Its labels, which fleet policies select nodes by\n"
               "       --fleet-ca FILE, --fleet-cert FILE, --fleet-key FILE\n"
               "                              TLS to etcd (https:// endpoints): the CA to trust, and\n"
               "                              this node's client certificate and key\n"
               "       --fleet-lease-ttl SEC  The lease the node's record and status are bound to: a\n"
               "                              node gone for this long leaves the fleet's view\n"
               "                              (default %u)\n"
               "       --log-level LEVEL      error, warning, notice, info or debug (default info)\n"
               "       -h, --help             Show this help\n"
               "       --version              Show the version\n"
               "\n"
               "EXIT STATUS\n"
               "       0 after a clean stop, 1 when start-up fails (one line on stderr), 2 on a usage "
               "error.\n",
               DEFAULT_STATE_DIR, DAEMON_HOGS_DIR_DEFAULT, DAEMON_BPFFS_DIR_DEFAULT, DEFAULT_SOCKET,
               API_OBJECT_SIZE_MAX_DEFAULT, API_JSON_SIZE_MAX_DEFAULT, API_CONNECTIONS_MAX_DEFAULT,
               DAEMON_OBJECTS_MAX_DEFAULT, DAEMON_OBJECTS_BYTES_MAX_DEFAULT, DAEMON_DOCUMENTS_MAX_DEFAULT,
               DAEMON_POLICIES_MAX_DEFAULT, API_TIMEOUT_SEC_DEFAULT, API_HEADER_TIMEOUT_SEC_DEFAULT,
               API_CONNECTIONS_PER_PEER_DEFAULT, DAEMON_RESYNC_SEC_DEFAULT, ETCD_PREFIX_DEFAULT,
               FLEET_LEASE_TTL_DEFAULT);
}

typedef struct Context {
        Manager *daemon;
        Api *api;
        Fleet *fleet; /* NULL: no --fleet */
} Context;

static int on_exit_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        (void) userdata;
        log_info("received %s; exiting, programs stay attached", strsignal((int) si->ssi_signo));
        (void) sd_notify(0, "STOPPING=1");
        return sd_event_exit(sd_event_source_get_event(s), 0);
}

static int on_hup(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        Context *c = userdata;
        Error e = ERROR_NULL;

        (void) s, (void) si;
        log_info("received SIGHUP; reloading");
        if (api_reload(c->api, &e) < 0) {
                log_error("cannot reload: %s; the token, access file and TLS files in use stay", e.message);
                error_done(&e);
        } else
                log_info("reloaded the token, access file and TLS files");
        /* the keys before the hogs: a hog's object is verified with the keys read now */
        (void) daemon_trust_reload(c->daemon);
        (void) daemon_hogs_reload(c->daemon);
        (void) daemon_reconcile_all(c->daemon);
        return 0;
}

/* The first reconcile of every document is done: the kernel matches the store as far as it can. The
 * API starts answering (connections made meanwhile waited in the listen backlog), clsd takes its name
 * on the bus, and systemd hears READY=1. */
static void on_ready(Manager *m, void *userdata) {
        Context *c = userdata;

        api_start(c->api);
        (void) api_dbus_start(c->api);
        if (c->fleet)
                fleet_start(c->fleet);
        (void) sd_notify(0, "READY=1");
        daemon_notify_status(m);
}

static int parse_size(const char *flag, const char *s, size_t *ret) {
        char *end;
        unsigned long long v;

        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno || end == s || *end || v == 0 || s[0] == '-') {
                fprintf(stderr, "clsd: %s: \"%s\" is not a positive integer\n", flag, s);
                return -EINVAL;
        }
        *ret = (size_t) v;
        return 0;
}

enum {
        ARG_STATE_DIR = 0x100,
        ARG_HOGS_DIR,
        ARG_BPFFS_DIR,
        ARG_CHECK,
        ARG_FLUSH,
        ARG_SOCKET,
        ARG_LISTEN,
        ARG_TOKEN_FILE,
        ARG_TLS_CERT,
        ARG_TLS_KEY,
        ARG_CLIENT_CA,
        ARG_ACCESS_FILE,
        ARG_METRICS_LISTEN,
        ARG_BPF_STATS,
        ARG_MAX_OBJECT,
        ARG_MAX_JSON,
        ARG_MAX_CONN,
        ARG_TIMEOUT,
        ARG_RESYNC,
        ARG_LOG_LEVEL,
        ARG_VERSION,
        ARG_FLEET,
        ARG_FLEET_PREFIX,
        ARG_NODE,
        ARG_NODE_LABELS,
        ARG_FLEET_CA,
        ARG_FLEET_CERT,
        ARG_FLEET_KEY,
        ARG_FLEET_TTL,
        ARG_OBJECT_DIR,
        ARG_TRUSTED_KEYS,
        ARG_CONFIG,
        ARG_HEADER_TIMEOUT,
        ARG_PER_PEER,
        ARG_MAX_OBJECTS,
        ARG_MAX_OBJECTS_SIZE,
        ARG_MAX_DOCUMENTS,
        ARG_MAX_POLICIES,
};

/* A log line under journald: an entry with fields of its own (journalctl -u clsd CODE_FILE=…, PRIORITY=3).
 */
static void journal_sink(int level, int error, const char *file, int line, const char *message) {
        char code_file[256], code_line[32], errno_field[32] = "CLSD_LOG=1";

        snprintf(code_file, sizeof(code_file), "CODE_FILE=%s", file);
        snprintf(code_line, sizeof(code_line), "CODE_LINE=%d", line);
        if (error > 0)
                snprintf(errno_field, sizeof(errno_field), "ERRNO=%d", error);
        /* the place in clsd that logged, not this function's (sd_journal_send() would add its own) */
        (void) sd_journal_send_with_location(code_file, code_line, "", "MESSAGE=%s", message, "PRIORITY=%d",
                                             level, "SYSLOG_IDENTIFIER=clsd", errno_field, NULL);
}

/* What clsd does needs CAP_NET_ADMIN (tc) and CAP_BPF or CAP_SYS_ADMIN (bpf(2)), in the effective set. */
static bool privileged(void) {
        _cleanup_free_ char *status = NULL;
        unsigned long long caps = 0;
        const char *line;
        size_t size;

        if (read_full_file("/proc/self/status", 64 * 1024, &status, &size) < 0 ||
            !(line = strstr(status, "\nCapEff:")) || sscanf(line + 8, "%llx", &caps) != 1)
                return geteuid() == 0;
        return (caps & (1ULL << 12)) && (caps & ((1ULL << 39) | (1ULL << 21)));
}

/* --check=FILE: that file alone. */
static const char *check_file;

/* --trusted-keys: the directory of public keys whose signatures make an object loadable. */
static const char *trusted_keys_dir;
static TrustedKeys *trusted_keys_global;
static void trusted_keys_release(void) {
        trusted_keys_global = trusted_keys_free(trusted_keys_global);
}

/* --object-dir as given, then each one's real path (NULL-terminated), for the API and the daemon. */
static const char *object_dirs_given_raw[OBJECT_DIRS_MAX];
static size_t n_object_dirs_raw;
static char *object_dirs_real[OBJECT_DIRS_MAX + 1];

static int object_dirs_resolve(void) {
        for (size_t i = 0; i < n_object_dirs_raw; i++) {
                const char *d = object_dirs_given_raw[i];
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
                object_dirs_real[i] = real;
        }
        return 0;
}

/* The long options, for getopt and for the configuration file, which takes their full names only. */
static const struct option options[] = {
        { "state-dir", required_argument, NULL, ARG_STATE_DIR },
        { "hogs-dir", required_argument, NULL, ARG_HOGS_DIR },
        { "bpffs-dir", required_argument, NULL, ARG_BPFFS_DIR },
        { "check", optional_argument, NULL, ARG_CHECK },
        { "flush", no_argument, NULL, ARG_FLUSH },
        { "socket", required_argument, NULL, ARG_SOCKET },
        { "listen", required_argument, NULL, ARG_LISTEN },
        { "token-file", required_argument, NULL, ARG_TOKEN_FILE },
        { "tls-cert", required_argument, NULL, ARG_TLS_CERT },
        { "tls-key", required_argument, NULL, ARG_TLS_KEY },
        { "client-ca", required_argument, NULL, ARG_CLIENT_CA },
        { "access-file", required_argument, NULL, ARG_ACCESS_FILE },
        { "metrics-listen", required_argument, NULL, ARG_METRICS_LISTEN },
        { "bpf-stats", no_argument, NULL, ARG_BPF_STATS },
        { "max-object-size", required_argument, NULL, ARG_MAX_OBJECT },
        { "max-json-size", required_argument, NULL, ARG_MAX_JSON },
        { "max-connections", required_argument, NULL, ARG_MAX_CONN },
        { "request-timeout", required_argument, NULL, ARG_TIMEOUT },
        { "header-timeout", required_argument, NULL, ARG_HEADER_TIMEOUT },
        { "max-connections-per-peer", required_argument, NULL, ARG_PER_PEER },
        { "max-objects", required_argument, NULL, ARG_MAX_OBJECTS },
        { "max-objects-size", required_argument, NULL, ARG_MAX_OBJECTS_SIZE },
        { "max-documents", required_argument, NULL, ARG_MAX_DOCUMENTS },
        { "max-policies", required_argument, NULL, ARG_MAX_POLICIES },
        { "resync-interval", required_argument, NULL, ARG_RESYNC },
        { "log-level", required_argument, NULL, ARG_LOG_LEVEL },
        { "fleet", required_argument, NULL, ARG_FLEET },
        { "fleet-prefix", required_argument, NULL, ARG_FLEET_PREFIX },
        { "node", required_argument, NULL, ARG_NODE },
        { "node-labels", required_argument, NULL, ARG_NODE_LABELS },
        { "fleet-ca", required_argument, NULL, ARG_FLEET_CA },
        { "fleet-cert", required_argument, NULL, ARG_FLEET_CERT },
        { "fleet-key", required_argument, NULL, ARG_FLEET_KEY },
        { "fleet-lease-ttl", required_argument, NULL, ARG_FLEET_TTL },
        { "object-dir", required_argument, NULL, ARG_OBJECT_DIR },
        { "trusted-keys", required_argument, NULL, ARG_TRUSTED_KEYS },
        { "config", required_argument, NULL, ARG_CONFIG },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, ARG_VERSION },
        {},
};

static int parse_argv(int argc, char *argv[], DaemonConfig *dc, ApiConfig *ac, FleetConfig *fc, bool *check,
                      bool *flush) {
        bool object_dirs_given = false;
        size_t v;
        int c, r;

        /* By default the directory the package installs objects in, when there is one. */
        if (access(OBJECT_DIR_DEFAULT, F_OK) == 0)
                object_dirs_given_raw[n_object_dirs_raw++] = OBJECT_DIR_DEFAULT;
        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0) {
                switch (c) {
                case ARG_STATE_DIR:
                        dc->state_dir = optarg;
                        break;
                case ARG_HOGS_DIR:
                        dc->hogs_dir = optarg;
                        break;
                case ARG_CONFIG: /* read before: config_argv() */
                        break;
                case ARG_TRUSTED_KEYS:
                        trusted_keys_dir = optarg;
                        break;
                case ARG_OBJECT_DIR:
                        if (!object_dirs_given) /* the first replaces the default */
                                n_object_dirs_raw = 0;
                        object_dirs_given = true;
                        if (!optarg[0])
                                break; /* '': none */
                        if (n_object_dirs_raw == OBJECT_DIRS_MAX) {
                                fprintf(stderr, "clsd: --object-dir: at most %d\n", OBJECT_DIRS_MAX);
                                return -EINVAL;
                        }
                        object_dirs_given_raw[n_object_dirs_raw++] = optarg;
                        break;
                case ARG_BPFFS_DIR:
                        dc->bpffs_dir = optarg;
                        break;
                case ARG_CHECK:
                        *check = true;
                        check_file = optarg;
                        break;
                case ARG_FLUSH:
                        *flush = true;
                        break;
                case ARG_SOCKET:
                        ac->socket_path = optarg[0] ? optarg : NULL;
                        break;
                case ARG_LISTEN:
                        if (!api_listen_address_valid(optarg)) {
                                fprintf(stderr,
                                        "clsd: --listen %s: expected ADDR:PORT or [ADDR6]:PORT with a "
                                        "numeric address and a port from 1 to 65535\n",
                                        optarg);
                                return -EINVAL;
                        }
                        ac->listen = optarg;
                        break;
                case ARG_METRICS_LISTEN:
                        if (!api_listen_address_valid(optarg)) {
                                fprintf(stderr,
                                        "clsd: --metrics-listen %s: expected ADDR:PORT or [ADDR6]:PORT with "
                                        "a "
                                        "numeric address\n",
                                        optarg);
                                return -EINVAL;
                        }
                        ac->metrics_listen = optarg;
                        break;
                case ARG_BPF_STATS:
                        dc->bpf_stats = true;
                        break;
                case ARG_TOKEN_FILE:
                        ac->token_file = optarg;
                        break;
                case ARG_TLS_CERT:
                        ac->tls_cert = optarg;
                        break;
                case ARG_TLS_KEY:
                        ac->tls_key = optarg;
                        break;
                case ARG_CLIENT_CA:
                        ac->client_ca = optarg;
                        break;
                case ARG_ACCESS_FILE:
                        ac->access_file = optarg;
                        break;
                case ARG_MAX_OBJECT:
                        if (parse_size("--max-object-size", optarg, &ac->object_size_max) < 0)
                                return -EINVAL;
                        dc->object_size_max = ac->object_size_max;
                        break;
                case ARG_MAX_JSON:
                        if (parse_size("--max-json-size", optarg, &ac->json_size_max) < 0)
                                return -EINVAL;
                        break;
                case ARG_MAX_CONN:
                        if (parse_size("--max-connections", optarg, &v) < 0)
                                return -EINVAL;
                        ac->connections_max = (unsigned) v;
                        break;
                case ARG_TIMEOUT:
                        if (parse_size("--request-timeout", optarg, &v) < 0)
                                return -EINVAL;
                        ac->timeout_sec = (unsigned) v;
                        break;
                case ARG_HEADER_TIMEOUT:
                        if (parse_size("--header-timeout", optarg, &v) < 0)
                                return -EINVAL;
                        ac->header_timeout_sec = (unsigned) v;
                        break;
                case ARG_MAX_OBJECTS:
                        if (parse_size("--max-objects", optarg, &dc->objects_max) < 0)
                                return -EINVAL;
                        break;
                case ARG_MAX_OBJECTS_SIZE:
                        if (parse_size("--max-objects-size", optarg, &dc->objects_bytes_max) < 0)
                                return -EINVAL;
                        break;
                case ARG_MAX_DOCUMENTS:
                        if (parse_size("--max-documents", optarg, &dc->documents_max) < 0)
                                return -EINVAL;
                        break;
                case ARG_MAX_POLICIES:
                        if (parse_size("--max-policies", optarg, &dc->policies_max) < 0)
                                return -EINVAL;
                        break;
                case ARG_PER_PEER:
                        if (parse_size("--max-connections-per-peer", optarg, &v) < 0)
                                return -EINVAL;
                        ac->connections_per_peer = (unsigned) v;
                        break;
                case ARG_RESYNC:
                        if (streq(optarg, "0"))
                                dc->resync_usec = 0;
                        else if (parse_size("--resync-interval", optarg, &v) < 0)
                                return -EINVAL;
                        else
                                dc->resync_usec = (uint64_t) v * 1000000;
                        break;
                case ARG_LOG_LEVEL:
                        r = log_level_from_string(optarg);
                        if (r < 0) {
                                fprintf(stderr, "clsd: --log-level: unknown level \"%s\"\n", optarg);
                                return -EINVAL;
                        }
                        log_set_max_level(r);
                        break;
                case ARG_FLEET:
                        fc->urls = optarg;
                        break;
                case ARG_FLEET_PREFIX:
                        fc->prefix = optarg;
                        break;
                case ARG_NODE:
                        fc->node = optarg;
                        break;
                case ARG_NODE_LABELS:
                        fc->labels = optarg;
                        break;
                case ARG_FLEET_CA:
                        fc->tls.ca = optarg;
                        break;
                case ARG_FLEET_CERT:
                        fc->tls.cert = optarg;
                        break;
                case ARG_FLEET_KEY:
                        fc->tls.key = optarg;
                        break;
                case ARG_FLEET_TTL:
                        if (parse_size("--fleet-lease-ttl", optarg, &v) < 0)
                                return -EINVAL;
                        if (v < 2 || v > 3600) {
                                fprintf(stderr, "clsd: --fleet-lease-ttl: from 2 to 3600 seconds, not %zu\n",
                                        v);
                                return -EINVAL;
                        }
                        fc->lease_ttl = (unsigned) v;
                        break;
                case 'h':
                        help();
                        return 0;
                case ARG_VERSION:
                        printf("clsd %s\n", PROJECT_VERSION);
                        return 0;
                default:
                        fprintf(stderr, "Try 'clsd --help'.\n");
                        return -EINVAL;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "clsd: unexpected argument \"%s\"\nTry 'clsd --help'.\n", argv[optind]);
                return -EINVAL;
        }
        if (!fc->urls && (fc->prefix || fc->node || fc->labels || fc->tls.ca || fc->tls.cert ||
                          fc->tls.key || fc->lease_ttl)) {
                fprintf(stderr, "clsd: --fleet-prefix, --node, --node-labels, --fleet-ca, --fleet-cert, "
                                "--fleet-key and --fleet-lease-ttl need --fleet\n");
                return -EINVAL;
        }
        return 1;
}

/* The fds systemd passed: "api" (clsd.socket) is the API's listening socket; "prog.…", "act.…",
 * "map.…" and "actmap.…" come back from the fd store and go to the daemon. */
static int take_passed_fds(ApiConfig *ac, DaemonPassedFd **ret, size_t *ret_n) {
        char **names = NULL;
        DaemonPassedFd *v;
        size_t k = 0;
        int n;

        n = sd_listen_fds_with_names(1, &names);
        if (n <= 0) {
                *ret = NULL;
                *ret_n = 0;
                return n;
        }
        v = calloc((size_t) n + 1, sizeof(DaemonPassedFd));
        for (int i = 0; i < n; i++) {
                int fd = SD_LISTEN_FDS_START + i;
                const char *name = names && names[i] ? names[i] : "unknown";

                (void) fcntl(fd, F_SETFD, FD_CLOEXEC);
                if ((streq(name, "api") || streq(name, "clsd.socket")) && ac->socket_fd < 0 &&
                    sd_is_socket_unix(fd, SOCK_STREAM, 1, NULL, 0) > 0) {
                        (void) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
                        ac->socket_fd = fd;
                } else if (v && (startswith(name, "prog.") || startswith(name, "map.") ||
                                 startswith(name, "act.") || startswith(name, "actmap."))) {
                        v[k].fd = fd;
                        v[k++].name = names[i];
                        names[i] = NULL;
                } else {
                        log_warning("systemd passed an fd named \"%s\" that clsd does not know; closed",
                                    name);
                        close(fd);
                }
        }
        for (int i = 0; names && i < n; i++)
                free(names[i]);
        free(names);
        *ret = v;
        *ret_n = k;
        return 0;
}

/* The workers' program: clsd-worker beside clsd (a build tree), else the one installed; NULL: clsd
 * itself (clsd --worker), which starts slower (it links what the API needs too). */
static const char *worker_exe(char *buf, size_t size) {
        char self[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        char *slash;

        if (n > 0) {
                self[n] = 0;
                slash = strrchr(self, '/');
                if (slash &&
                    snprintf(buf, size, "%.*s/clsd-worker", (int) (slash - self), self) < (int) size &&
                    access(buf, X_OK) == 0)
                        return buf;
        }
        return access(CLSD_WORKER_PATH, X_OK) == 0 ? CLSD_WORKER_PATH : NULL;
}

static void passed_fds_free(DaemonPassedFd *v, size_t n) {
        for (size_t i = 0; v && i < n; i++)
                free(v[i].name); /* the fds went to the daemon */
        free(v);
}

/* What config_argv() made (the strings of the file's options, and the vector), freed at exit: getopt
 * permutes the vector, so the strings are kept apart. */
static char **config_strings, **config_vector;
static size_t n_config_strings;
static void config_free(void) {
        for (size_t i = 0; i < n_config_strings; i++)
                free(config_strings[i]);
        free(config_strings);
        free(config_vector);
        config_strings = config_vector = NULL;
        n_config_strings = 0;
}

/* Whether the configuration file may set the option: how the daemon runs, not what the command does
 * (--check, --flush, --worker, --help and --version are the command line's; a "flush" line would flush
 * clsd's filters at every start). */
static bool option_known(const char *name) {
        static const char *const actions[] = { "check", "flush", "worker", "help", "version", "config" };

        for (size_t i = 0; i < ELEMENTSOF(actions); i++)
                if (streq(name, actions[i]))
                        return false;
        for (const struct option *o = options; o->name; o++)
                if (streq(o->name, name))
                        return true;
        return false;
}

/* A NUL would end the text early (every line after it dropped, a "trusted-keys" line among them) and
 * other control bytes are no option's: the file is refused whole, naming the line. */
static int config_check_bytes(const char *path, const char *text, size_t size) {
        size_t line = 1;

        for (size_t i = 0; i < size; i++) {
                unsigned char c = (unsigned char) text[i];
                if (c == '\n') {
                        line++;
                        continue;
                }
                if ((c < 0x20 && c != '\t' && c != '\r') || c == 0x7f) {
                        fprintf(stderr,
                                "clsd: %s:%zu: a control byte (0x%02x): the file is text, one option per "
                                "line\n",
                                path, line, c);
                        return -EINVAL;
                }
        }
        return 0;
}

/* The configuration file, which says how clsd listens and whom it trusts: a regular file that no one but
 * root (or clsd's own user) may change. */
static int config_read(const char *path, char **ret, size_t *ret_size) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        struct stat st;
        int r;

        if (fd < 0 || fstat(fd, &st) < 0) {
                r = -errno;
                fprintf(stderr, "clsd: --config %s: %s\n", path, strerror(-r));
                return r;
        }
        if (st.st_mode & S_IWOTH || (st.st_uid != 0 && st.st_uid != geteuid())) {
                fprintf(stderr,
                        "clsd: --config %s: %s (owner uid %u, mode %04o); it sets whom clsd trusts\n", path,
                        st.st_mode & S_IWOTH ? "every user may write it" : "owned by another user",
                        (unsigned) st.st_uid, (unsigned) st.st_mode & 07777);
                return -EPERM;
        }
        r = read_regular_fd(fd, 1024 * 1024, ret, ret_size);
        if (r < 0)
                fprintf(stderr, "clsd: --config %s: %s\n", path, strerror(-r));
        return r;
}

/* The configuration file (--config FILE, else /etc/clsd/clsd.conf when it exists): one long option per
 * line, "name = value" or "name" alone, '#' comments, as if given before the command line's own
 * flags (which win). */
static int config_argv(int argc, char *argv[], int *ret_argc, char ***ret_argv) {
        const char *path = NULL;
        bool given = false;
        _cleanup_free_ char *text = NULL;
        char *save = NULL;
        size_t size, line = 0;
        int r;

        for (int i = 1; i < argc && !streq(argv[i], "--"); i++) {
                /* getopt takes any unique abbreviation: "--co" is the shortest (no other option starts
                 * with "co") */
                size_t n = strcspn(argv[i], "=");
                if (n < strlen("--co") || strncmp(argv[i], "--config", n) != 0 || n > strlen("--config"))
                        continue;
                if (argv[i][n] == '=')
                        path = argv[i] + n + 1, given = true;
                else if (i + 1 < argc)
                        path = argv[++i], given = true;
        }
        if (!path && access(CONFIG_FILE_DEFAULT, F_OK) == 0)
                path = CONFIG_FILE_DEFAULT;
        *ret_argc = argc;
        *ret_argv = argv;
        if (!path || (given && !*path))
                return 0;
        r = config_read(path, &text, &size);
        if (r < 0)
                return r;
        r = config_check_bytes(path, text, size);
        if (r < 0)
                return r;
        atexit(config_free);
        config_strings = calloc(size / 2 + 1, sizeof(char *));
        if (!config_strings)
                return -ENOMEM;
        for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
                char *eq, *name, *value = NULL;
                line++;
                /* '#' starts a comment at the start of a line or after a blank; inside a value it is
                 * the value's ("token-file = /etc/clsd/t#1") */
                for (char *h = l; (h = strchr(h, '#')); h++)
                        if (h == l || h[-1] == ' ' || h[-1] == '\t') {
                                *h = 0;
                                break;
                        }
                name = l + strspn(l, " \t");
                if (!*name)
                        continue;
                if ((eq = strchr(name, '='))) {
                        *eq = 0;
                        value = eq + 1 + strspn(eq + 1, " \t");
                        for (char *e = value + strlen(value); e > value && strchr(" \t\r", e[-1]); e--)
                                e[-1] = 0;
                }
                for (char *e = name + strlen(name); e > name && strchr(" \t\r", e[-1]); e--)
                        e[-1] = 0;
                if (!*name || strspn(name, "abcdefghijklmnopqrstuvwxyz-") != strlen(name)) {
                        fprintf(stderr,
                                "clsd: %s:%zu: expected \"option = value\" or \"option\" (a long option "
                                "without "
                                "its dashes)\n",
                                path, line);
                        return -EINVAL;
                }
                if (!option_known(name)) {
                        bool command = false;
                        for (const struct option *o = options; o->name; o++)
                                command = command || streq(o->name, name);
                        if (command || streq(name, "worker"))
                                fprintf(stderr,
                                        "clsd: %s:%zu: \"%s\" is not an option of how clsd runs: give --%s "
                                        "on the command line\n",
                                        path, line, name, name);
                        else
                                fprintf(stderr,
                                        "clsd: %s:%zu: unknown option \"%s\" (full names only, as --help "
                                        "lists "
                                        "them without their dashes)\n",
                                        path, line, name);
                        return -EINVAL;
                }
                if (asprintf(&config_strings[n_config_strings], value ? "--%s=%s" : "--%s", name, value) < 0)
                        return -ENOMEM;
                n_config_strings++;
        }
        config_vector = calloc(n_config_strings + (size_t) argc + 1, sizeof(char *));
        if (!config_vector)
                return -ENOMEM;
        config_vector[0] = argv[0];
        memcpy(config_vector + 1, config_strings, n_config_strings * sizeof(char *));
        for (int i = 1; i < argc; i++) /* the command line's, after: they win */
                config_vector[n_config_strings + (size_t) i] = argv[i];
        *ret_argc = (int) n_config_strings + argc;
        *ret_argv = config_vector;
        return 0;
}

int main(int argc, char *argv[]) {
        DaemonConfig dc = { .state_dir = DEFAULT_STATE_DIR,
                            .hogs_dir = DAEMON_HOGS_DIR_DEFAULT,
                            .bpffs_dir = DAEMON_BPFFS_DIR_DEFAULT,
                            .netns_dir = DAEMON_NETNS_DIR_DEFAULT,
                            .object_size_max = API_OBJECT_SIZE_MAX_DEFAULT,
                            .objects_max = DAEMON_OBJECTS_MAX_DEFAULT,
                            .objects_bytes_max = DAEMON_OBJECTS_BYTES_MAX_DEFAULT,
                            .documents_max = DAEMON_DOCUMENTS_MAX_DEFAULT,
                            .policies_max = DAEMON_POLICIES_MAX_DEFAULT,
                            .resync_usec = DAEMON_RESYNC_SEC_DEFAULT * 1000000ULL };
        ApiConfig ac = { .socket_path = DEFAULT_SOCKET,
                         .socket_fd = -1,
                         .json_size_max = API_JSON_SIZE_MAX_DEFAULT,
                         .object_size_max = API_OBJECT_SIZE_MAX_DEFAULT,
                         .connections_max = API_CONNECTIONS_MAX_DEFAULT,
                         .timeout_sec = API_TIMEOUT_SEC_DEFAULT,
                         .header_timeout_sec = API_HEADER_TIMEOUT_SEC_DEFAULT,
                         .connections_per_peer = API_CONNECTIONS_PER_PEER_DEFAULT };
        _cleanup_(daemon_freep) Manager *d = NULL;
        _cleanup_(api_freep) Api *api = NULL;
        FleetConfig fc = { 0 };
        Fleet *fleet = NULL;
        sd_event *event = NULL;
        Error e = ERROR_NULL;
        Context ctx = { 0 };
        DaemonPassedFd *passed = NULL;
        size_t n_passed = 0;
        bool check = false, flush = false;
        char worker_path[PATH_MAX];
        char **conf_argv = NULL;
        int conf_argc = 0;
        sigset_t mask;
        int r;

        log_open();
        log_set_journal_sink(journal_sink);
        /* A worker (see src/daemon/worker.c) when clsd-worker is not installed: one job on fd 3. */
        if (argc == 2 && streq(argv[1], "--worker"))
                nl_worker_main(3);
        r = config_argv(argc, argv, &conf_argc, &conf_argv);
        if (r < 0)
                return r == -ENOMEM ? 1 : 2;
        r = parse_argv(conf_argc, conf_argv, &dc, &ac, &fc, &check, &flush);
        if (r <= 0)
                return r < 0 ? 2 : 0;
        if (sodium_init() < 0) {
                fprintf(stderr, "clsd: libsodium cannot start\n");
                return 1;
        }
        if (trusted_keys_dir) {
                TrustedKeys *keys = NULL;
                if (trusted_keys_load(trusted_keys_dir, &keys, &e) < 0) {
                        fprintf(stderr, "clsd: %s\n", e.message);
                        error_done(&e);
                        return 1;
                }
                if (trusted_keys_count(keys) == 0)
                        log_warning("--trusted-keys %s holds no *.pub key: no object can be loaded",
                                    trusted_keys_dir);
                dc.trusted_keys = trusted_keys_global = keys;
                dc.trusted_keys_dir = trusted_keys_dir;
                atexit(trusted_keys_release);
        }
        if (check) {
                nl_bpf_setup_logging();
                return daemon_hogs_check(dc.hogs_dir, check_file, dc.object_size_max, dc.trusted_keys) == 0
                               ? 0
                               : 1;
        }
        if (!privileged()) {
                fprintf(stderr,
                        "clsd: needs root (or CAP_NET_ADMIN, CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN): it "
                        "changes tc filters and loads BPF programs; as uid %u it would only fail\n",
                        (unsigned) geteuid());
                return 1;
        }
        if (object_dirs_resolve() < 0)
                return 1;
        ac.object_dirs = dc.object_dirs = (const char *const *) object_dirs_real;
        nl_bpf_setup_logging();
        if (flush)
                return daemon_flush(&dc) == 0 ? 0 : 1;
        /* A read builds and frees a few hundred KiB of JSON each time: kept in the heap rather than
         * given back to the kernel and faulted in again page by page on the next (a third of a GET
         * /ifaces at 100 interfaces was page faults). A few MiB at most, as the RSS figures show. */
        (void) mallopt(M_TRIM_THRESHOLD, 8 * 1024 * 1024);
        (void) mallopt(M_MMAP_THRESHOLD, 4 * 1024 * 1024);
        (void) take_passed_fds(&ac, &passed, &n_passed);
        dc.passed = passed;
        dc.n_passed = n_passed;
        dc.worker_exe = worker_exe(worker_path, sizeof(worker_path));
        log_debug("workers: %s", dc.worker_exe ?: "clsd --worker");

        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        sigaddset(&mask, SIGCHLD); /* the workers' ends, through sd_event_add_child() */
        sigprocmask(SIG_BLOCK, &mask, NULL);
        signal(SIGPIPE, SIG_IGN);

        /* Each loaded program, each map read for /metrics and each connection holds an fd: the soft
         * limit (1024 under systemd) is raised to the hard one, as select() is not used here. */
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) >= 0 && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                (void) setrlimit(RLIMIT_NOFILE, &rl);
        }
        r = sd_event_default(&event);
        if (r < 0) {
                fprintf(stderr, "clsd: cannot create the event loop: %s\n", strerror(-r));
                return 1;
        }
        /* The API is set up (flags checked, sockets bound) before the first reconcile, so that a start
         * refused for a flag has not touched the kernel; requests are served once the loop runs. */
        /* WATCHDOG=1 from the loop itself: a clsd stuck anywhere stops sending it. */
        (void) sd_event_set_watchdog(event, true);
        r = daemon_new(&dc, event, &d, &e);
        if (r >= 0)
                r = api_new(d, event, &ac, &api, &e);
        if (r >= 0 && fc.urls)
                r = fleet_new(d, event, &fc, &fleet, &e);
        ctx = (Context){ .daemon = d, .api = api, .fleet = fleet };
        if (r >= 0)
                r = daemon_start(d, on_ready, &ctx, &e);
        passed_fds_free(passed, n_passed);
        if (r < 0) {
                fprintf(stderr, "clsd: %s\n", strna(e.message));
                error_done(&e);
                fleet = fleet_free(fleet);
                api = api_free(api);
                d = daemon_free(d);
                sd_event_unref(event);
                return 1;
        }
        (void) sd_event_add_signal(event, NULL, SIGTERM, on_exit_signal, &ctx);
        (void) sd_event_add_signal(event, NULL, SIGINT, on_exit_signal, &ctx);
        (void) sd_event_add_signal(event, NULL, SIGHUP, on_hup, &ctx);

        r = sd_event_loop(event);
        /* The fleet first: what it waits for of the daemon is dropped with it. */
        fleet = fleet_free(fleet);
        api = api_free(api);
        d = daemon_free(d);
        sd_event_unref(event);
        return r < 0 ? 1 : 0;
}
