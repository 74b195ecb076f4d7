/* config-file.c: the configuration file (--config FILE, else /etc/clsd/clsd.conf when it exists): one long
 * option per line, "name = value" or "name" alone, '#' comments, made argv strings that go before the
 * command line's own (which win). It says how clsd listens and whom it trusts: a regular file no one but
 * root (or clsd's own user) may change, text only. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config-file.h"
#include "fileio.h"
#include "macros.h"

#define CONFIG_FILE_MAX (1024 * 1024)

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
        r = read_regular_fd(fd, CONFIG_FILE_MAX, ret, ret_size);
        if (r < 0)
                fprintf(stderr, "clsd: --config %s: %s\n", path, strerror(-r));
        return r;
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

static void trim_end(char *s) {
        for (char *e = s + strlen(s); e > s && strchr(" \t\r", e[-1]); e--)
                e[-1] = 0;
}

/* One line: "" (nothing), or "--name[=value]" in *ret; -EINVAL said on stderr. */
static int config_line(const char *path, size_t line, char *l, ConfigMaySet may_set, char **ret) {
        char *eq, *name, *value = NULL;

        *ret = NULL;
        /* '#' starts a comment at the start of a line or after a blank; inside a value it is the value's
         * ("token-file = /etc/clsd/t#1") */
        for (char *h = l; (h = strchr(h, '#')); h++)
                if (h == l || h[-1] == ' ' || h[-1] == '\t') {
                        *h = 0;
                        break;
                }
        name = l + strspn(l, " \t");
        if (!*name)
                return 0;
        if ((eq = strchr(name, '='))) {
                *eq = 0;
                value = eq + 1 + strspn(eq + 1, " \t");
                trim_end(value);
        }
        trim_end(name);
        if (!*name || strspn(name, "abcdefghijklmnopqrstuvwxyz-") != strlen(name)) {
                fprintf(stderr,
                        "clsd: %s:%zu: expected \"option = value\" or \"option\" (a long option without its "
                        "dashes)\n",
                        path, line);
                return -EINVAL;
        }
        switch (may_set(name)) {
        case 1:
                break;
        case -1:
                fprintf(stderr,
                        "clsd: %s:%zu: \"%s\" is not an option of how clsd runs: give --%s on the command "
                        "line\n",
                        path, line, name, name);
                return -EINVAL;
        default:
                fprintf(stderr,
                        "clsd: %s:%zu: unknown option \"%s\" (full names only, as --help lists them without "
                        "their "
                        "dashes)\n",
                        path, line, name);
                return -EINVAL;
        }
        return asprintf(ret, value ? "--%s=%s" : "--%s", name, value) < 0 ? -ENOMEM : 1;
}

/* --config FILE on the command line: getopt takes any unique abbreviation, and "--co" is the shortest
 * (no other option starts with "co"). NULL if not given, "" for none. */
static const char *config_given(int argc, char **argv) {
        const char *path = NULL;

        for (int i = 1; i < argc && !streq(argv[i], "--"); i++) {
                size_t n = strcspn(argv[i], "=");
                if (n < strlen("--co") || strncmp(argv[i], "--config", n) != 0 || n > strlen("--config"))
                        continue;
                if (argv[i][n] == '=')
                        path = argv[i] + n + 1;
                else if (i + 1 < argc)
                        path = argv[++i];
        }
        return path;
}

static int config_strings(const char *path, ConfigMaySet may_set, char ***ret, size_t *ret_n) {
        _cleanup_free_ char *text = NULL;
        char **v, *l, *next;
        size_t size, n = 0, line = 0;
        int r;

        r = config_read(path, &text, &size);
        if (r < 0)
                return r;
        r = config_check_bytes(path, text, size);
        if (r < 0)
                return r;
        v = calloc(size / 2 + 1, sizeof(char *));
        if (!v)
                return -ENOMEM;
        for (l = text; l && *l; l = next) {
                next = strchr(l, '\n');
                if (next)
                        *next++ = 0;
                line++;
                r = config_line(path, line, l, may_set, &v[n]);
                if (r < 0) {
                        strv_free_n(v, n);
                        return r;
                }
                n += r > 0;
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

int config_file_argv(int argc, char **argv, const char *default_path, ConfigMaySet may_set,
                     char ***ret_strings, size_t *ret_n, char ***ret_argv) {
        const char *path = config_given(argc, argv);
        char **strings = NULL, **vector;
        size_t n = 0;
        int r;

        if (!path && access(default_path, F_OK) == 0)
                path = default_path;
        if (path && *path) {
                r = config_strings(path, may_set, &strings, &n);
                if (r < 0)
                        return r;
        }
        /* getopt permutes the vector: the strings are kept apart to be freed */
        vector = calloc(n + (size_t) argc + 1, sizeof(char *));
        if (!vector) {
                strv_free_n(strings, n);
                return -ENOMEM;
        }
        vector[0] = argv[0];
        if (n)
                memcpy(vector + 1, strings, n * sizeof(char *));
        for (int i = 1; i < argc; i++) /* the command line's, after: they win */
                vector[n + (size_t) i] = argv[i];
        *ret_strings = strings;
        *ret_n = n;
        *ret_argv = vector;
        return 0;
}
