/* main.c: clsd's entry point and composition root: the options (options.c) wired to the daemon, its faces
 * (the API, D-Bus, /metrics) and the fleet, on one event loop, with the signals. */
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "api.h"
#include "daemon.h"
#include "fleet.h"
#include "host.h"
#include "log.h"
#include "nl.h"
#include "options.h"
#include "nl-worker.h"

typedef struct Context {
        Manager *daemon;
        Api *api;
        Fleet *fleet; /* NULL: no --fleet */
        Options *options;
} Context;

/* The registries file read again: the new credentials for the pulls that start from now on (a pull in
 * flight has its own copy). */
static void registries_reload(Context *c) {
        Options *o = c->options;
        OciRegistries *regs = NULL;
        _cleanup_error_ Error e = ERROR_NULL;

        if (options_registries_load(o, &regs, &e) < 0) {
                log_error("--registries: %s; the registries in use stay", e.message);
                return;
        }
        daemon_set_registries(c->daemon, regs);
        oci_registries_free(o->registries);
        o->registries = regs;
        log_info("reloaded the registries file (%zu registries)", oci_registries_count(regs));
}

static int on_exit_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        (void) userdata;
        log_info("received %s; exiting, programs stay attached", strsignal((int) si->ssi_signo));
        (void) sd_notify(0, "STOPPING=1");
        return sd_event_exit(sd_event_source_get_event(s), 0);
}

static int on_hup(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        Context *c = userdata;
        _cleanup_error_ Error e = ERROR_NULL;

        (void) s, (void) si;
        log_info("received SIGHUP; reloading");
        if (api_reload(c->api, &e) < 0)
                log_error("cannot reload: %s; the token, access file and TLS files in use stay", e.message);
        else
                log_info("reloaded the token, access file and TLS files");
        registries_reload(c);
        daemon_reload(c->daemon);
        return 0;
}

/* The first reconcile of every document is done: the kernel matches the store as far as it can. The API
 * starts answering (connections made meanwhile waited in the listen backlog), clsd takes its name on the
 * bus, the fleet connects, and systemd hears READY=1. */
static void on_ready(Manager *m, void *userdata) {
        Context *c = userdata;

        api_start(c->api);
        (void) api_dbus_start(c->api);
        if (c->fleet)
                fleet_start(c->fleet);
        (void) sd_notify(0, "READY=1");
        daemon_notify_status(m);
}

/* What a run needs of the process before the loop: signals through the loop, memory kept, fds. */
static void process_setup(void) {
        sigset_t mask;

        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        sigaddset(&mask, SIGCHLD); /* the workers' ends, through sd_event_add_child() */
        sigprocmask(SIG_BLOCK, &mask, NULL);
        signal(SIGPIPE, SIG_IGN);
        /* A read builds and frees a few hundred KiB of JSON each time: kept in the heap rather than given
         * back to the kernel and faulted in again page by page on the next (a third of a GET /ifaces at
         * 100 interfaces was page faults). A few MiB at most, as the RSS figures show. */
        (void) mallopt(M_TRIM_THRESHOLD, 8 * 1024 * 1024);
        (void) mallopt(M_MMAP_THRESHOLD, 4 * 1024 * 1024);
        host_raise_fd_limit();
}

/* The daemon, the API and (with --fleet) the fleet, made into ctx, each once those before it are, and the
 * daemon started. */
static int start_parts(Context *ctx, sd_event *event, Error *reterr) {
        Options *o = ctx->options;
        int r;

        r = daemon_new(&o->daemon, event, &ctx->daemon, reterr);
        if (r < 0)
                return r;
        r = api_new(ctx->daemon, event, &o->api, &ctx->api, reterr);
        if (r < 0)
                return r;
        if (o->fleet.urls && (r = fleet_new(ctx->daemon, event, &o->fleet, &ctx->fleet, reterr)) < 0)
                return r;
        return daemon_start(ctx->daemon, on_ready, ctx, reterr);
}

/* The daemon, the API (flags checked, sockets bound before the first reconcile, so that a start refused
 * for a flag has not touched the kernel) and the fleet, started; the loop runs until a signal ends it. */
static int run(Options *o) {
        _cleanup_(daemon_freep) Manager *d = NULL;
        _cleanup_(api_freep) Api *api = NULL;
        DaemonPassedFd *passed = NULL;
        size_t n_passed = 0;
        char worker_path[PATH_MAX];
        Fleet *fleet = NULL;
        sd_event *event = NULL;
        _cleanup_error_ Error e = ERROR_NULL;
        Context ctx = { 0 };
        int r;

        (void) host_passed_fds(&o->api, &passed, &n_passed);
        o->daemon.passed = passed;
        o->daemon.n_passed = n_passed;
        o->daemon.worker_exe = host_worker_exe(worker_path, sizeof(worker_path));
        log_debug("workers: %s", o->daemon.worker_exe ?: "clsd --worker");
        process_setup();
        r = sd_event_default(&event);
        if (r < 0) {
                fprintf(stderr, "clsd: cannot create the event loop: %s\n", strerror(-r));
                host_passed_fds_free(passed, n_passed);
                return 1;
        }
        /* WATCHDOG=1 from the loop itself: a clsd stuck anywhere stops sending it. */
        (void) sd_event_set_watchdog(event, true);
        ctx.options = o;
        r = start_parts(&ctx, event, &e);
        d = ctx.daemon, api = ctx.api, fleet = ctx.fleet;
        host_passed_fds_free(passed, n_passed);
        if (r >= 0) {
                (void) sd_event_add_signal(event, NULL, SIGTERM, on_exit_signal, &ctx);
                (void) sd_event_add_signal(event, NULL, SIGINT, on_exit_signal, &ctx);
                (void) sd_event_add_signal(event, NULL, SIGHUP, on_hup, &ctx);
                r = sd_event_loop(event);
        } else
                fprintf(stderr, "clsd: %s\n", strna(e.message));
        /* The fleet first: what it waits for of the daemon is dropped with it. */
        fleet_free(fleet);
        api = api_free(api);
        d = daemon_free(d);
        sd_event_unref(event);
        return r < 0 ? 1 : 0;
}

int main(int argc, char *argv[]) {
        Options o;
        int r;

        log_open();
        log_set_journal_sink(host_journal_sink);
        /* A worker (see src/daemon/worker.c) when clsd-worker is not installed: one job on fd 3. */
        if (argc == 2 && streq(argv[1], "--worker"))
                nl_worker_main(3);
        r = options_parse(&o, argc, argv);
        if (r <= 0) {
                options_done(&o);
                return r == 0 ? 0 : r == -ENOMEM ? 1 : 2;
        }
        if (sodium_init() < 0) {
                fprintf(stderr, "clsd: libsodium cannot start\n");
                r = 1;
        } else if (options_resolve(&o) < 0)
                r = 1;
        else if (o.check) {
                nl_bpf_setup_logging();
                r = daemon_hogs_check(o.daemon.hogs_dir, o.check_file, o.daemon.object_size_max,
                                      o.daemon.trusted_keys) == 0
                            ? 0
                            : 1;
        } else if (!host_privileged()) {
                fprintf(stderr,
                        "clsd: needs root (or CAP_NET_ADMIN, CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN): it "
                        "changes tc "
                        "filters and loads BPF programs; as uid %u it would only fail\n",
                        (unsigned) geteuid());
                r = 1;
        } else if (options_resolve_object_dirs(&o) < 0)
                r = 1;
        else {
                nl_bpf_setup_logging();
                r = o.flush ? (daemon_flush(&o.daemon) == 0 ? 0 : 1) : run(&o);
        }
        options_done(&o);
        return r;
}
