/* ctl.h: what clsctl's verbs share: the parsed command line, calls to the daemon, error reporting. */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "http-client.h"
#include "output.h"
#include "macros.h"

#define CTL_SOCKET_DEFAULT "/run/clsd/clsd.sock"
/* Well above any object or document clsd accepts; the daemon gives the real limit (413). */
#define CTL_INPUT_MAX (64u * 1024 * 1024)
/* The most files one command takes (clsctl fleet apply FILE…). */
#define CTL_ARGS_MAX 64

typedef struct Ctl {
        const char *socket_path;
        /* Another host's clsd (--host URL), with TLS files and a bearer token (--token-file,
         * CLSD_TOKEN); NULL: the unix socket. */
        const char *host;
        const char *cacert, *cert, *key;
        char *token;
        const char *token_file;
        /* --hosts FILE: the command runs on each of its hosts (ctl_run_on_hosts()). */
        const char *hosts_file;
        bool json;
        bool verbose;
        bool quiet; /* ctl_call() says nothing of a failure (a lookup that only adds to a message) */
        const char *if_match; /* apply: the generation the document must be at, decimal */
        double wait_sec; /* apply --wait: how long to wait for the document to leave "pending"; 0: no wait */
        const char *netns; /* a named network namespace: its interfaces instead of clsd's own */
        const char *fleet_urls; /* etcd's endpoints (--fleet, CLSD_FLEET), for "fleet" */
        const char *fleet_prefix;
        const char *fleet_ca, *fleet_cert, *fleet_key;
        const char *fleet_user, *fleet_password_file; /* an etcd user (its authentication), who "by" is */
        double fleet_timeout_sec; /* --fleet-timeout: how long a busy etcd is asked again (0: the default) */
        const char *waves; /* fleet apply --waves: the waves of this apply's rollout ("1,10%,100%") */
        uint64_t rollback_to; /* fleet rollback --to REV (0: the revision before the current one) */
        const char *sign_key; /* fleet apply, rollback --sign: the secret key signing the policy; image push:
                               * the ECDSA key of the image's cosign signature */
        bool rbac_apply; /* fleet rbac --apply: make the roles and users */
        const char
                *out_dir; /* fleet rbac --out: where the users' password files go; image build: DIR[:TAG] */
        const char *registries; /* fleet apply, image --registries: credentials for images named oci:// */
        bool watch; /* fleet targets, top --watch: again every second until stopped */
} Ctl;

/* jansson.h provides json_decrefp() for _cleanup_(json_decrefp). */

/* Prints "clsctl: <message>" as one line on stderr and returns r (negative). */
int ctl_error(int r, const char *fmt, ...) _printf_(2, 3);
int ctl_verror(int r, const char *fmt, va_list ap);
/* --json: errors too are JSON, one object on one line of stderr. */
void ctl_errors_as_json(bool on);
static inline int ctl_oom(void) {
        return ctl_error(-ENOMEM, "out of memory");
}
/* Prints t on stdout: 0, or one line on stderr saying why not (out of memory while it was filled, or
 * stdout failing) and < 0. */
int ctl_table_print(const Table *t);

/* Sends req to the daemon. On a 2xx answer returns the parsed body (NULL when empty); anything
 * else is reported as one line prefixed by context (may be NULL). */
int ctl_call(const Ctl *c, const HttpRequest *req, const char *context, json_t **ret_json);

/* Pretty-prints v on stdout (for --json). */
int ctl_print_json(const json_t *v);

/* PUTs the JSON of FILE ("-": stdin) to path, with If-Match when --if-match was given; a file that
 * is not JSON is reported here, pointing at its line and column. context as for ctl_call(). */
int ctl_put_file(const Ctl *c, const char *path, const char *file, const char *context, json_t **ret_json);

/* Reads a whole file, or stdin for "-"; reports failures itself. */
int ctl_read_input(const char *path, char **ret_data, size_t *ret_size);

/* A digest, or a unique prefix of its hex digits (with or without "sha256:"), as the full digest of a
 * stored object; reports failures itself. */
int ctl_object_resolve_digest(const Ctl *c, const char *arg, char **ret);

/* The signature file beside an object file (FILE.minisig, else FILE.sig; --trusted-keys): NULL in *ret
 * when there is none; reports failures itself. */
int ctl_read_signature(const char *file, char **ret, size_t *ret_size);

/* Reports a state "failed" carried in an answer's "error" member, as ctl_call() reports errors. */
int ctl_report_error_object(const Ctl *c, const json_t *error, const char *context);

/* "/ifaces", or "/netns/NAME/ifaces" with --netns. */
int ctl_ifaces_path(const Ctl *c, char **ret);
/* "/ifaces/IFNAME/classifier", or under "/netns/NAME" with --netns. */
int ctl_iface_path(const Ctl *c, const char *ifname, char **ret);

/* Runs run(args) on every host of c->hosts_file at once (a child each, --host set), shows each host's
 * output and then a table of results; fails when a host did. */
int ctl_run_on_hosts(const Ctl *c, const char *verb, int (*run)(const Ctl *c, char **args), char **args);

int verb_ifaces_list(const Ctl *c, char **args);
int verb_maps(const Ctl *c, char **args);
int verb_map_set(const Ctl *c, char **args);
int verb_map_remove(const Ctl *c, char **args);
int verb_iface_get(const Ctl *c, char **args);
int verb_iface_apply(const Ctl *c, char **args);
int verb_iface_diff(const Ctl *c, char **args);
int verb_iface_delete(const Ctl *c, char **args);
int verb_netns_list(const Ctl *c, char **args);

int verb_policy_list(const Ctl *c, char **args);
int verb_policy_get(const Ctl *c, char **args);
int verb_policy_apply(const Ctl *c, char **args);
int verb_policy_diff(const Ctl *c, char **args);
int verb_policy_remove(const Ctl *c, char **args);

int verb_fleet_apply(const Ctl *c, char **args);
int verb_fleet_list(const Ctl *c, char **args);
int verb_fleet_remove(const Ctl *c, char **args);
int verb_fleet_nodes(const Ctl *c, char **args);
int verb_fleet_status(const Ctl *c, char **args);
int verb_fleet_rollout(const Ctl *c, char **args);
int verb_fleet_history(const Ctl *c, char **args);
int verb_fleet_rollback(const Ctl *c, char **args);
int verb_fleet_rbac(const Ctl *c, char **args);
int verb_fleet_targets(const Ctl *c, char **args);
/* clsctl --help (help.c). */
void ctl_help(void);
int verb_fleet_top(const Ctl *c, char **args);

int verb_object_list(const Ctl *c, char **args);
int verb_object_add(const Ctl *c, char **args);
int verb_image_build(const Ctl *c, char **args);
int verb_fleet_diff(const Ctl *c, char **args);
int verb_image_push(const Ctl *c, char **args);
int verb_image_inspect(const Ctl *c, char **args);
int verb_object_show(const Ctl *c, char **args);
int verb_object_remove(const Ctl *c, char **args);
