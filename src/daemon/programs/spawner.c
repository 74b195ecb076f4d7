/* spawner.c: a thread of its own starts worker processes: posix_spawn() is a vfork, and the exec that the
 * parent waits for takes milliseconds, which the loop must not spend. It is told of each start through a
 * pipe and answers through another, which the loop watches. */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "macros.h"
#include "spawner.h"

typedef struct SpawnRequest {
        void *cookie; /* NULL: stop */
        int child_sock;
} SpawnRequest;

typedef struct SpawnAnswer {
        void *cookie;
        pid_t pid;
        int error; /* positive errno, or 0 */
} SpawnAnswer;

struct Spawner {
        sd_event *event;
        char *exe;
        char **env; /* the workers' environment, when it differs from clsd's; else NULL */
        pthread_t thread;
        bool running;
        int req[2], res[2];
        sd_event_source *source;
        SpawnedFunc spawned;
        void *userdata;
};

/* In a sanitizer build, a worker killed by its input dies of the signal, as it would otherwise: the
 * sanitizer reports only what it finds itself. */
static int worker_env(char ***ret) {
        const char *asan = getenv("ASAN_OPTIONS");
        size_t n = 0;
        char **env;

        *ret = NULL;
        if (!asan)
                return 0;
        while (environ[n])
                n++;
        env = calloc(n + 1, sizeof(char *));
        if (!env)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                if (startswith(environ[i], "ASAN_OPTIONS=")) {
                        if (asprintf(&env[i],
                                     "%s:handle_segv=0:handle_sigbus=0:handle_abort=0:detect_leaks=0",
                                     environ[i]) < 0)
                                env[i] = NULL;
                } else
                        env[i] = strdup(environ[i]);
                if (!env[i]) {
                        strv_free_n(env, i);
                        return -ENOMEM;
                }
        }
        *ret = env;
        return 0;
}

/* The thread: posix_spawn() (a vfork: no copy of clsd's page tables) of each worker it is asked for. The
 * worker's socket becomes its fd 3, kept across exec (every other fd of clsd's is O_CLOEXEC); its signals
 * are as a new process's. It makes itself niced and dies with clsd (nl_worker_main()). */
static void *spawner_main(void *userdata) {
        Spawner *s = userdata;
        char *argv[] = { (char *) "clsd", (char *) "--worker", NULL };
        SpawnRequest q;
        sigset_t none, all;

        sigemptyset(&none);
        sigfillset(&all);
        while (read(s->req[0], &q, sizeof(q)) == sizeof(q) && q.cookie) {
                SpawnAnswer a = { .cookie = q.cookie };
                posix_spawn_file_actions_t fa;
                posix_spawnattr_t attr;
                int r;

                r = posix_spawn_file_actions_init(&fa);
                if (r == 0) {
                        r = posix_spawnattr_init(&attr);
                        if (r == 0)
                                r = posix_spawn_file_actions_adddup2(&fa, q.child_sock, SPAWNER_WORKER_FD);
                        if (r == 0)
                                r = posix_spawnattr_setflags(&attr,
                                                             POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
                        if (r == 0)
                                r = posix_spawnattr_setsigmask(&attr, &none);
                        if (r == 0)
                                r = posix_spawnattr_setsigdefault(&attr, &all);
                        if (r == 0)
                                r = posix_spawn(&a.pid, s->exe, &fa, &attr, argv, s->env ?: environ);
                        posix_spawnattr_destroy(&attr);
                        posix_spawn_file_actions_destroy(&fa);
                }
                a.error = r;
                if (write(s->res[1], &a, sizeof(a)) != sizeof(a))
                        break; /* the loop is gone */
        }
        return NULL;
}

static int on_spawned(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        Spawner *s = userdata;
        SpawnAnswer a;

        (void) source, (void) revents;
        while (read(fd, &a, sizeof(a)) == sizeof(a))
                s->spawned(a.cookie, a.pid, a.error, s->userdata);
        return 0;
}

int spawner_new(sd_event *event, const char *exe, SpawnedFunc spawned, void *userdata, Spawner **ret) {
        Spawner *s = calloc(1, sizeof(*s));

        if (!s || !(s->exe = strdup(exe)) || worker_env(&s->env) < 0) {
                if (s)
                        free(s->exe);
                free(s);
                return -ENOMEM;
        }
        s->event = sd_event_ref(event);
        s->spawned = spawned;
        s->userdata = userdata;
        s->req[0] = s->req[1] = s->res[0] = s->res[1] = -1;
        if (pipe2(s->req, O_CLOEXEC) < 0 || pipe2(s->res, O_CLOEXEC | O_NONBLOCK) < 0 ||
            sd_event_add_io(event, &s->source, s->res[0], EPOLLIN, on_spawned, s) < 0 ||
            pthread_create(&s->thread, NULL, spawner_main, s) != 0) {
                spawner_free(s);
                return -ENOMEM;
        }
        s->running = true;
        *ret = s;
        return 0;
}

int spawner_submit(Spawner *s, void *cookie, int child_sock) {
        SpawnRequest q = { .cookie = cookie, .child_sock = child_sock };

        return write(s->req[1], &q, sizeof(q)) == sizeof(q) ? 0 : -errno;
}

Spawner *spawner_free(Spawner *s) {
        SpawnAnswer a;

        if (!s)
                return NULL;
        if (s->running) {
                SpawnRequest stop = { 0 };
                (void) !write(s->req[1], &stop, sizeof(stop));
                (void) pthread_join(s->thread, NULL);
        }
        /* What the thread answered and the loop did not read */
        while (s->res[0] >= 0 && read(s->res[0], &a, sizeof(a)) == sizeof(a))
                s->spawned(a.cookie, a.pid, a.error, s->userdata);
        sd_event_source_disable_unref(s->source);
        for (int i = 0; i < 2; i++) {
                safe_close(s->req[i]);
                safe_close(s->res[i]);
        }
        sd_event_unref(s->event);
        if (s->env) {
                size_t n = 0;
                while (s->env[n])
                        n++;
                strv_free_n(s->env, n);
        }
        free(s->exe);
        free(s);
        return NULL;
}
