/* host.c: what clsd takes from the host it runs on: the journal to log to, its privileges, the fds systemd
 * passes (the API's socket, the fd store's programs and maps), the workers' program, the fd limit. */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>
#include <unistd.h>

#include "fileio.h"
#include "host.h"
#include "log.h"

/* A log line under journald: an entry with fields of its own (journalctl -u clsd CODE_FILE=…, PRIORITY=3).
 */
void host_journal_sink(int level, int error, const char *file, int line, const char *message) {
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
bool host_privileged(void) {
        _cleanup_free_ char *status = NULL;
        unsigned long long caps = 0;
        const char *line;
        size_t size;

        if (read_full_file("/proc/self/status", 64 * 1024, &status, &size) < 0 ||
            !(line = strstr(status, "\nCapEff:")) || sscanf(line + 8, "%llx", &caps) != 1)
                return geteuid() == 0;
        return (caps & (1ULL << 12)) && (caps & ((1ULL << 39) | (1ULL << 21)));
}

/* The fds systemd passed: "api" (clsd.socket) is the API's listening socket; "prog.…", "act.…",
 * "map.…" and "actmap.…" come back from the fd store and go to the daemon. */
int host_passed_fds(ApiConfig *ac, DaemonPassedFd **ret, size_t *ret_n) {
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

void host_passed_fds_free(DaemonPassedFd *v, size_t n) {
        for (size_t i = 0; v && i < n; i++)
                free(v[i].name); /* the fds went to the daemon */
        free(v);
}

/* The workers' program: clsd-worker beside clsd (a build tree), else the one installed; NULL: clsd
 * itself (clsd --worker), which starts slower (it links what the API needs too). */
const char *host_worker_exe(char *buf, size_t size) {
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

void host_raise_fd_limit(void) {
        struct rlimit rl;

        /* Each loaded program, each map read for /metrics and each connection holds an fd: the soft limit
         * (1024 under systemd) is raised to the hard one, as select() is not used here. */
        if (getrlimit(RLIMIT_NOFILE, &rl) >= 0 && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                (void) setrlimit(RLIMIT_NOFILE, &rl);
        }
}
