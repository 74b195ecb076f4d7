/* hosts.c: clsctl --hosts FILE: one command on many hosts at once. Each host's run is a child process
 * (the command as it runs on one host, with --host set to it), its output captured; the outputs are
 * shown host by host in the file's order, then a table of who succeeded. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ctl.h"
#include "fileio.h"
#include "output.h"

#define HOSTS_MAX 256
#define HOST_OUTPUT_MAX (16u * 1024 * 1024)

typedef struct Host {
        char *name, *url;
        pid_t pid;
        int fd[2]; /* its stdout, its stderr */
        char *out[2];
        size_t size[2];
        int status;
} Host;

static void hosts_free(Host *v, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(v[i].name);
                free(v[i].url);
                free(v[i].out[0]);
                free(v[i].out[1]);
                for (int k = 0; k < 2; k++)
                        if (v[i].fd[k] >= 0)
                                close(v[i].fd[k]);
        }
        free(v);
}

/* "URL" or "NAME URL" per line; '#' starts a comment. */
static int hosts_read(const char *file, Host **ret, size_t *ret_n) {
        _cleanup_free_ char *text = NULL;
        Host *v = calloc(HOSTS_MAX, sizeof(Host));
        size_t size, n = 0, line = 0;
        char *save = NULL;
        int r;

        if (!v)
                return ctl_oom();
        r = ctl_read_input(file, &text, &size);
        if (r < 0) {
                free(v);
                return r;
        }
        for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
                char *hash = strchr(l, '#'), *a, *b, *extra, *f = NULL;
                line++;
                if (hash)
                        *hash = 0;
                a = strtok_r(l, " \t\r", &f);
                if (!a)
                        continue;
                b = strtok_r(NULL, " \t\r", &f);
                extra = strtok_r(NULL, " \t\r", &f);
                const char *url = b ?: a;
                if (extra || (!startswith(url, "https://") && !startswith(url, "http://")) ||
                    n == HOSTS_MAX) {
                        hosts_free(v, n);
                        return ctl_error(-EINVAL, "%s:%zu: %s", file, line,
                                         n == HOSTS_MAX
                                                 ? "too many hosts"
                                                 : "expected \"URL\" or \"NAME URL\" (https://host:port)");
                }
                v[n] = (Host){ .name = strdup(b ? a : url + strcspn(url, ":") + 3),
                               .url = strdup(url),
                               .fd = { -1, -1 } };
                if (!v[n].name || !v[n].url) {
                        hosts_free(v, n + 1);
                        return ctl_oom();
                }
                n++;
        }
        if (n == 0) {
                hosts_free(v, n);
                return ctl_error(-EINVAL, "%s: no hosts in it", file);
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

/* "-" among the arguments reads stdin: read once here into a memory file that every host's child opens
 * anew (its own offset), or the first child would take it all. -1 when no argument is "-". */
static int stdin_copy(char **args) {
        _cleanup_free_ char *data = NULL;
        bool wanted = false;
        size_t size;
        int fd, r;

        for (char **a = args; a && *a; a++)
                wanted = wanted || streq(*a, "-");
        if (!wanted)
                return -1;
        r = ctl_read_input("-", &data, &size);
        if (r < 0)
                return r;
        fd = memfd_create("clsctl-stdin", MFD_CLOEXEC);
        if (fd < 0)
                return ctl_error(-errno, "cannot keep stdin for every host: %s", strerror(errno));
        for (size_t o = 0; o < size;) {
                ssize_t w = write(fd, data + o, size - o);
                if (w <= 0) {
                        close(fd);
                        return ctl_error(-EIO, "cannot keep stdin for every host: %s",
                                         strerror(errno ?: EIO));
                }
                o += (size_t) w;
        }
        return fd;
}

static int host_start(const Ctl *c, Host *h, int (*run)(const Ctl *c, char **args), char **args,
                      int stdin_fd) {
        int out[2], err[2];

        if (pipe2(out, O_CLOEXEC) < 0)
                return -errno;
        if (pipe2(err, O_CLOEXEC) < 0) {
                close(out[0]);
                close(out[1]);
                return -errno;
        }
        fflush(stdout);
        fflush(stderr);
        h->pid = fork();
        if (h->pid < 0) {
                close(out[0]), close(out[1]), close(err[0]), close(err[1]);
                return -errno;
        }
        if (h->pid == 0) {
                Ctl one = *c;
                one.host = h->url;
                one.hosts_file = NULL;
                if (dup2(out[1], STDOUT_FILENO) < 0 || dup2(err[1], STDERR_FILENO) < 0)
                        _exit(1);
                if (stdin_fd >= 0) {
                        char path[64];
                        int fd;
                        snprintf(path, sizeof(path), "/proc/self/fd/%d", stdin_fd);
                        fd = open(path, O_RDONLY | O_CLOEXEC);
                        if (fd < 0 || dup2(fd, STDIN_FILENO) < 0)
                                _exit(2);
                }
                int r = run(&one, args);
                /* 0 ok, 1 ok and something would change (a diff), 2 failed */
                _exit(fflush(stdout) != 0 || r < 0 ? 2 : r > 0 ? 1 : 0);
        }
        close(out[1]);
        close(err[1]);
        h->fd[0] = out[0];
        h->fd[1] = err[0];
        return 0;
}

/* Reads every child's output until each closes both pipes. */
static void collect(Host *v, size_t n) {
        struct pollfd p[2 * HOSTS_MAX];
        size_t open;

        for (;;) {
                open = 0;
                for (size_t i = 0; i < n; i++)
                        for (int k = 0; k < 2; k++)
                                if (v[i].fd[k] >= 0)
                                        p[open++] = (struct pollfd){ .fd = v[i].fd[k], .events = POLLIN };
                if (open == 0)
                        return;
                if (poll(p, open, -1) < 0 && errno != EINTR)
                        return;
                for (size_t i = 0; i < n; i++)
                        for (int k = 0; k < 2; k++) {
                                char buf[65536];
                                ssize_t got;
                                bool ready = false;
                                for (size_t j = 0; j < open; j++)
                                        ready = ready || (p[j].fd == v[i].fd[k] && p[j].revents);
                                if (v[i].fd[k] < 0 || !ready)
                                        continue;
                                got = read(v[i].fd[k], buf, sizeof(buf));
                                if (got <= 0) {
                                        close(v[i].fd[k]);
                                        v[i].fd[k] = -1;
                                        continue;
                                }
                                if (v[i].size[k] + (size_t) got > HOST_OUTPUT_MAX)
                                        continue; /* kept to the limit, the rest dropped */
                                char *b = realloc(v[i].out[k], v[i].size[k] + (size_t) got + 1);
                                if (!b)
                                        continue;
                                memcpy(b + v[i].size[k], buf, (size_t) got);
                                v[i].size[k] += (size_t) got;
                                b[v[i].size[k]] = 0;
                                v[i].out[k] = b;
                        }
        }
}

int ctl_run_on_hosts(const Ctl *c, const char *verb, int (*run)(const Ctl *c, char **args), char **args) {
        _cleanup_(table_freep) Table *t = NULL;
        Host *v = NULL;
        size_t n = 0, failed = 0, differ = 0;
        int r, stdin_fd;

        r = hosts_read(c->hosts_file, &v, &n);
        if (r < 0)
                return r;
        stdin_fd = stdin_copy(args);
        if (stdin_fd < -1) {
                hosts_free(v, n);
                return stdin_fd;
        }
        for (size_t i = 0; i < n; i++) {
                r = host_start(c, &v[i], run, args, stdin_fd);
                if (r < 0) {
                        v[i].status = -1;
                        if (asprintf(&v[i].out[1], "clsctl: cannot start: %s\n", strerror(-r)) < 0)
                                v[i].out[1] = NULL;
                }
        }
        safe_close(stdin_fd);
        collect(v, n);
        for (size_t i = 0; i < n; i++)
                if (v[i].pid > 0 && waitpid(v[i].pid, &v[i].status, 0) < 0)
                        v[i].status = -1;
        t = table_new("HOST", "URL", "RESULT", NULL);
        if (!t) {
                hosts_free(v, n);
                return ctl_oom();
        }
        for (size_t i = 0; i < n; i++) {
                int code = v[i].status != -1 && WIFEXITED(v[i].status) ? WEXITSTATUS(v[i].status) : -1;
                bool ok = code == 0 || code == 1;
                char *err = v[i].out[1], *nl;
                failed += !ok;
                differ += code == 1;
                if (v[i].out[0] && v[i].size[0]) {
                        printf("── %s (%s) ──\n", v[i].name, verb);
                        fwrite(v[i].out[0], 1, v[i].size[0], stdout);
                        if (v[i].out[0][v[i].size[0] - 1] != '\n')
                                putchar('\n');
                }
                if (err && (nl = strchr(err, '\n')))
                        *nl = 0;
                if (err && startswith(err, "clsctl: "))
                        err += 8;
                table_add(t, v[i].name);
                table_add(t, v[i].url);
                if (ok)
                        table_add(t, code == 1 ? "ok, would change" : "ok");
                else
                        table_addf(t, "failed: %s", err && *err ? err : "no reason given");
        }
        if (n)
                putchar('\n');
        (void) ctl_table_print(t); /* (said on stderr if not; the count below still is) */
        printf("%zu of %zu host(s) ok\n", n - failed, n);
        hosts_free(v, n);
        if (failed)
                return ctl_error(-EREMOTEIO, "%zu of %zu host(s) failed", failed, n);
        return differ > 0;
}
