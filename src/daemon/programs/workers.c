/* workers.c: jobs run by worker processes (clsd --worker), one process per job: a fork and exec gives
 * each a clean address space and no fd of clsd's but its socket, so a parser that crashes or a verifier
 * that takes seconds costs that process only. The loop learns of the answer (the socket) and of the
 * end (SIGCHLD) through sd-event; a worker that ends without answering died of its input. */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "sha256.h"
#include "daemon.h"
#include "spawner.h"
#include "workers.h"
#include "nl-bpf.h"
#include "nl-map.h"
#include "nl-worker.h"

/* The fd a worker finds its socket on. */
#define WORKER_FD SPAWNER_WORKER_FD

struct WorkerJob {
        Workers *workers;
        NlJobKind kind;
        int sock;
        int child_sock; /* the worker's end, until it is started */
        pid_t pid; /* 0: not started (yet) */
        bool spawning; /* the spawner thread has it: not to be freed until it answers */
        bool orphaned; /* cancelled while spawning: freed (its worker killed) once the answer comes */
        bool slot; /* holds one of the max_running slots */
        sd_event_source *io_source;
        sd_event_source *child_source;
        bool answered, exited;
        char digest[SHA256_DIGEST_STRING_MAX]; /* a load's object: its worker may go on with the next */
        int exit_code; /* once exited: its status, or */
        int signal; /* the signal that killed it (0: none) */
        WorkerResult result;
        WorkerDoneFunc done; /* NULL: cancelled */
        void *userdata;
        WorkerJob *prev, *next;
};

struct Workers {
        sd_event *event;
        WorkerJob *jobs; /* started and waiting */
        size_t n_running, max_running;
        uint64_t n_jobs, n_crashes;
        uint64_t n_killed[WORKER_SIGNALS_MAX]; /* by the signal that ended a worker */
        /* Spawning a process takes milliseconds: a thread of its own does it (spawner.c). */
        Spawner *spawner;
        bool freeing; /* workers_free(): the spawner's last answers only end what they started */
        /* A spare: a worker started while none is needed, waiting to be handed a job's socket
         * (NL_JOB_NEXT), so that the next job does not wait for an exec (3-4 ms here). Started
         * SPARE_DELAY_USEC after the workers fall idle (or after the start), never beside a job. */
        WorkerJob *spare;
        sd_event_source *spare_timer;
        uint64_t n_spares_used;
};

#define SPARE_DELAY_USEC (200 * 1000ULL)
#define SPARE_FIRST_DELAY_USEC (1000 * 1000ULL)

static void start_waiting(Workers *w);
static void spare_later(Workers *w, uint64_t usec);
static void spare_free(Workers *w);
static void spare_spawned(WorkerJob *j, pid_t pid, int error);
static void spare_end(WorkerJob *j);
static int on_answer(sd_event_source *s, int fd, uint32_t revents, void *userdata);
static void on_spawned(void *cookie, pid_t pid, int error, void *userdata);

int workers_new(sd_event *event, const char *exe, Workers **ret) {
        Workers *w = calloc(1, sizeof(*w));

        if (!w)
                return -ENOMEM;
        w->event = sd_event_ref(event);
        /* One fewer at once than there are CPUs (at least one): a CPU stays for the loop (the verifier
         * runs in the workers' system calls, where a niced task still holds its CPU until it yields),
         * and the rest wait their turn. */
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        w->max_running = cpus > 2 ? (size_t) cpus - 1 : 1;
        if (spawner_new(event, exe, on_spawned, w, &w->spawner) < 0) {
                workers_free(w);
                return -ENOMEM;
        }
        spare_later(w, SPARE_FIRST_DELAY_USEC);
        *ret = w;
        return 0;
}

static void job_free(WorkerJob *j) {
        Workers *w = j->workers;

        if (j->spawning) {
                j->done = NULL;
                j->orphaned = true;
                return;
        }
        if (j->prev)
                j->prev->next = j->next;
        else
                w->jobs = j->next;
        if (j->next)
                j->next->prev = j->prev;
        if (j->slot)
                w->n_running--;
        sd_event_source_disable_unref(j->io_source);
        sd_event_source_disable_unref(j->child_source);
        safe_close(j->sock);
        safe_close(j->child_sock);
        if (!j->exited && j->pid > 0) {
                (void) kill(j->pid, SIGKILL);
                (void) waitpid(j->pid, NULL, 0);
        }
        error_done(&j->result.error);
        nl_object_info_free(j->result.info);
        nl_program_free(j->result.program);
        free(j);
}

/* A job leaves: the next waiting one may start (not from workers_free(), which stops them all). */
static void job_leave(WorkerJob *j) {
        Workers *w = j->workers;

        job_free(j);
        start_waiting(w);
}

Workers *workers_free(Workers *w) {
        if (!w)
                return NULL;
        /* What the spawner answered and the loop did not read: those workers are killed below. */
        w->freeing = true;
        w->spawner = spawner_free(w->spawner);
        for (WorkerJob *j = w->jobs; j; j = j->next)
                j->spawning = false; /* asked for, never spawned */
        while (w->jobs)
                job_free(w->jobs);
        if (w->spare)
                w->spare->spawning = false;
        spare_free(w);
        sd_event_source_disable_unref(w->spare_timer);
        sd_event_unref(w->event);
        free(w);
        return NULL;
}

size_t workers_running(const Workers *w) {
        return w ? w->n_running : 0;
}

uint64_t workers_jobs(const Workers *w) {
        return w ? w->n_jobs : 0;
}

uint64_t workers_crashes(const Workers *w) {
        return w ? w->n_crashes : 0;
}

uint64_t workers_killed(const Workers *w, int signal) {
        return w && signal > 0 && signal < WORKER_SIGNALS_MAX ? w->n_killed[signal] : 0;
}

bool workers_spare_ready(const Workers *w) {
        return w && w->spare && !w->spare->spawning && w->spare->pid > 0 && !w->spare->exited;
}

uint64_t workers_spares_used(const Workers *w) {
        return w ? w->n_spares_used : 0;
}

void worker_job_cancel(WorkerJob *j) {
        if (j)
                job_leave(j);
}

/* Both the answer and the end are in: the caller learns the result. */
static void job_finish(WorkerJob *j) {
        WorkerDoneFunc done = j->done;
        void *userdata = j->userdata;
        WorkerResult result;

        if (!j->exited)
                return;
        if (j->answered && j->signal && j->result.r < 0)
                /* it said why before it died: the inspection's sandbox refused a system call */
                log_error("worker %d: killed by signal %d (%s): %s", (int) j->pid, j->signal,
                          strsignal(j->signal), j->result.error.message);
        if (!j->answered) {
                /* It ended without answering: its input killed it (or a limit did). */
                if (j->signal) {
                        j->workers->n_crashes++;
                        error_set(&j->result.error, EINVAL, ERROR_INVALID_OBJECT,
                                  "the %s died of signal %d (%s) on this object: not an object clsd can use",
                                  j->kind == NL_JOB_INSPECT ? "object's parser" : "program's loader",
                                  j->signal, strsignal(j->signal));
                        log_warning("worker %d: killed by signal %d while %s an object", (int) j->pid,
                                    j->signal, j->kind == NL_JOB_INSPECT ? "inspecting" : "loading");
                } else
                        error_set(&j->result.error, EIO, ERROR_INTERNAL_ERROR,
                                  "the worker exited %d without answering", j->exit_code);
                j->result.r = -j->result.error.error;
        }
        result = j->result;
        j->result = (WorkerResult){ 0 };
        job_leave(j);
        if (done)
                done(&result, userdata);
        error_done(&result.error);
        nl_object_info_free(result.info);
        nl_program_free(result.program);
}

/* The oldest load waiting for a worker that is of j's object. */
static WorkerJob *next_of_same_object(Workers *w, const WorkerJob *j) {
        WorkerJob *oldest = NULL;

        for (WorkerJob *k = w->jobs; k; k = k->next)
                if (!k->slot && k->kind == NL_JOB_LOAD && k->done && streq(k->digest, j->digest))
                        oldest = k;
        return oldest;
}

/* j's worker answered a load: it goes on with k (its request waits in k's socket, which the worker is
 * handed), in j's slot, with j's end watched for k. j is over as if its worker had exited. */
static int hand_over(WorkerJob *j, WorkerJob *k) {
        Workers *w = j->workers;
        int r;

        r = nl_job_send_next(j->sock, k->child_sock);
        if (r < 0)
                return r;
        r = sd_event_add_io(w->event, &k->io_source, k->sock, EPOLLIN, on_answer, k);
        if (r < 0) {
                (void) kill(j->pid, SIGKILL); /* it waits in a socket nobody will answer */
                return r;
        }
        k->child_sock = safe_close(k->child_sock);
        k->slot = true, j->slot = false;
        k->pid = j->pid, j->pid = 0;
        k->child_source = TAKE_PTR(j->child_source);
        (void) sd_event_source_set_userdata(k->child_source, k);
        j->exited = true;
        log_debug("worker %d goes on with the next load of %s", (int) k->pid, k->digest);
        return 0;
}

static int on_answer(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        WorkerJob *j = userdata;
        NlJobReply reply = { 0 };
        int r;

        (void) s, (void) revents;
        r = nl_job_read_reply(fd, j->kind, &reply);
        if (r == -EAGAIN || r == -EINTR)
                return 0;
        j->io_source = sd_event_source_disable_unref(j->io_source);
        if (r >= 0) {
                j->answered = true;
                j->result = (WorkerResult){
                        .r = reply.r, .error = reply.error, .info = reply.info, .program = reply.program
                };
        } else if (r != -ECONNRESET) {
                j->answered = true;
                j->result.r = r;
                error_set(&j->result.error, -r, ERROR_INTERNAL_ERROR, "the worker answered nonsense: %s",
                          strerror(-r));
        }
        if (r >= 0 && j->kind == NL_JOB_LOAD && !j->exited) {
                /* A load's worker waits for the next load of its object, or for the end of its socket. */
                WorkerJob *k = next_of_same_object(j->workers, j);
                if (!k || hand_over(j, k) < 0)
                        (void) shutdown(j->sock, SHUT_WR);
        }
        job_finish(j);
        return 0;
}

static int on_exit_(sd_event_source *s, const siginfo_t *si, void *userdata) {
        WorkerJob *j = userdata;

        (void) s;
        if (j == j->workers->spare) {
                /* it waited for a job and died (killed by someone): another is started later */
                Workers *w = j->workers;
                j->exited = true;
                spare_free(w);
                spare_later(w, SPARE_DELAY_USEC);
                return 0;
        }
        j->exited = true;
        if (si->si_code == CLD_EXITED)
                j->exit_code = si->si_status;
        else {
                j->signal = si->si_status;
                if (j->signal > 0 && j->signal < WORKER_SIGNALS_MAX)
                        j->workers->n_killed[j->signal]++;
        }
        j->child_source = sd_event_source_disable_unref(j->child_source);
        /* The answer, if any, was sent before it exited: read it now if the socket still holds it. */
        if (!j->answered && j->io_source)
                (void) on_answer(j->io_source, j->sock, EPOLLIN, j);
        else
                job_finish(j);
        return 0;
}

/* Forks and execs the job's worker; its request already waits in the socket. */
static void job_spawned(WorkerJob *j, pid_t pid, int error);

static void on_spawned(void *cookie, pid_t pid, int error, void *userdata) {
        (void) userdata;
        job_spawned(cookie, pid, error);
}

static void spare_spawned(WorkerJob *j, pid_t pid, int error) {
        Workers *w = j->workers;
        int r = -error;

        j->spawning = false;
        if (r >= 0) {
                j->pid = pid;
                j->child_sock = safe_close(j->child_sock);
        }
        if (j->orphaned || r < 0 ||
            (r = sd_event_add_child(w->event, &j->child_source, pid, WEXITED, on_exit_, j)) < 0) {
                if (r < 0)
                        log_debug_errno(r, "cannot start a spare worker: %m");
                if (j->orphaned)
                        spare_end(j); /* no longer the spare: only its process is left to end */
                else
                        spare_free(w);
        }
}

static void job_spawned(WorkerJob *j, pid_t pid, int error) {
        Workers *w = j->workers;
        int r = -error;

        if (w->freeing) {
                /* workers_free(): what was spawned is killed with its job; an orphaned spare ends */
                j->spawning = false;
                j->pid = error ? 0 : pid;
                if (j->kind == NL_JOB_NEXT && j != w->spare)
                        spare_spawned(j, pid, error);
                return;
        }

        if (j->kind == NL_JOB_NEXT) {
                spare_spawned(j, pid, error);
                return;
        }
        j->spawning = false;
        if (r >= 0) {
                j->pid = pid;
                j->child_sock = safe_close(j->child_sock);
        }
        if (j->orphaned) {
                job_free(j);
                start_waiting(w);
                return;
        }
        if (r < 0 || (r = sd_event_add_io(w->event, &j->io_source, j->sock, EPOLLIN, on_answer, j)) < 0 ||
            (r = sd_event_add_child(w->event, &j->child_source, pid, WEXITED, on_exit_, j)) < 0) {
                /* the caller learns of it as of a worker that failed */
                log_error_errno(r, "cannot start a worker: %m");
                if (j->pid > 0) {
                        (void) kill(j->pid, SIGKILL);
                        (void) waitpid(j->pid, NULL, 0);
                }
                j->exited = true;
                j->exit_code = 127;
                job_finish(j);
        }
}

/* ---- the spare ---- */

/* A spare's process (killed, unless it exited) and the rest of it. */
static void spare_end(WorkerJob *j) {
        sd_event_source_disable_unref(j->child_source);
        if (!j->exited && j->pid > 0) {
                (void) kill(j->pid, SIGKILL);
                (void) waitpid(j->pid, NULL, 0);
        }
        safe_close(j->sock);
        safe_close(j->child_sock);
        free(j);
}

static void spare_free(Workers *w) {
        WorkerJob *j = w->spare;

        if (!j)
                return;
        w->spare = NULL;
        if (j->spawning) {
                j->orphaned = true; /* the spawner's answer ends it */
                return;
        }
        spare_end(j);
}

static WorkerJob *job_alloc(Workers *w, NlJobKind kind);

static int on_spare_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        Workers *w = userdata;
        WorkerJob *j;

        (void) s, (void) usec;
        if (w->spare || w->jobs || !(j = job_alloc(w, NL_JOB_NEXT)))
                return 0;
        w->spare = j;
        j->spawning = true;
        if (spawner_submit(w->spawner, j, j->child_sock) < 0) {
                j->spawning = false;
                spare_free(w);
        }
        return 0;
}

static void spare_later(Workers *w, uint64_t usec) {
        uint64_t now;

        if (w->spare)
                return;
        (void) sd_event_now(w->event, CLOCK_MONOTONIC, &now);
        if (!w->spare_timer) {
                if (sd_event_add_time(w->event, &w->spare_timer, CLOCK_MONOTONIC, now + usec, 10 * 1000,
                                      on_spare_timer, w) < 0)
                        return;
        } else
                (void) sd_event_source_set_time(w->spare_timer, now + usec);
        (void) sd_event_source_set_enabled(w->spare_timer, SD_EVENT_ONESHOT);
}

/* j (its request waiting in its socket) goes to the spare, if one waits: it is sent j's socket, and
 * becomes j's worker. */
static int spare_take(Workers *w, WorkerJob *j) {
        WorkerJob *spare = w->spare;
        int r;

        if (!spare || spare->spawning || spare->pid <= 0 || spare->exited)
                return -ENOENT;
        r = nl_job_send_next(spare->sock, j->child_sock);
        if (r < 0 || (r = sd_event_add_io(w->event, &j->io_source, j->sock, EPOLLIN, on_answer, j)) < 0) {
                spare_free(w); /* it is killed; j is spawned as usual */
                return r;
        }
        j->child_sock = safe_close(j->child_sock);
        j->pid = spare->pid, spare->pid = 0;
        j->child_source = TAKE_PTR(spare->child_source);
        (void) sd_event_source_set_userdata(j->child_source, j);
        spare_free(w);
        w->n_spares_used++;
        log_debug("worker %d (the spare) takes a %s", (int) j->pid,
                  j->kind == NL_JOB_INSPECT ? "inspection" : "load");
        return 0;
}

/* Starts waiting jobs while there is room, oldest first (the list is newest first); with none left, a
 * spare later. */
static void start_waiting(Workers *w) {
        for (;;) {
                WorkerJob *oldest = NULL;
                int r;

                if (!w->jobs)
                        spare_later(w, SPARE_DELAY_USEC);
                if (w->n_running >= w->max_running)
                        return;
                for (WorkerJob *j = w->jobs; j; j = j->next)
                        if (!j->slot)
                                oldest = j;
                if (!oldest)
                        return;
                oldest->slot = true;
                w->n_running++;
                if (spare_take(w, oldest) >= 0)
                        continue;
                oldest->spawning = true;
                r = spawner_submit(w->spawner, oldest, oldest->child_sock);
                if (r < 0) {
                        oldest->spawning = false;
                        log_error_errno(r, "cannot start a worker: %m");
                        oldest->exited = true;
                        oldest->exit_code = 127;
                        job_finish(oldest);
                }
        }
}

/* A job of kind with its socket pair (not yet anyone's), or NULL. */
static WorkerJob *job_alloc(Workers *w, NlJobKind kind) {
        WorkerJob *j = calloc(1, sizeof(*j));
        int sv[2];

        if (!j)
                return NULL;
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) < 0) {
                free(j);
                return NULL;
        }
        /* The worker's end blocks (the flag is the file's, which only the worker uses), and is not fd 3
         * itself, where dup2() would leave it O_CLOEXEC. */
        (void) fcntl(sv[1], F_SETFL, fcntl(sv[1], F_GETFL) & ~O_NONBLOCK);
        if (sv[1] == WORKER_FD) {
                int fd = fcntl(sv[1], F_DUPFD_CLOEXEC, WORKER_FD + 1);
                close(sv[1]);
                if (fd < 0) {
                        close(sv[0]);
                        free(j);
                        return NULL;
                }
                sv[1] = fd;
        }
        *j = (WorkerJob){ .workers = w, .kind = kind, .sock = sv[0], .child_sock = sv[1] };
        return j;
}

static int job_start(Workers *w, NlJobKind kind, WorkerDoneFunc done, void *userdata, WorkerJob **ret) {
        WorkerJob *j = job_alloc(w, kind);

        if (!j)
                return -ENOMEM;
        j->done = done;
        j->userdata = userdata;
        j->next = w->jobs;
        if (w->jobs)
                w->jobs->prev = j;
        w->jobs = j;
        w->n_jobs++;
        *ret = j;
        return 0;
}

int worker_inspect(Workers *w, const void *data, size_t size, WorkerDoneFunc done, void *userdata,
                   WorkerJob **ret) {
        WorkerJob *j;
        int r;

        r = job_start(w, NL_JOB_INSPECT, done, userdata, &j);
        if (r < 0)
                return r;
        r = nl_job_send_inspect(j->sock, data, size);
        if (r < 0) {
                j->done = NULL;
                job_free(j);
                return r;
        }
        if (ret)
                *ret = j;
        start_waiting(w);
        return 0;
}

int worker_load(Workers *w, const char *digest, const NlLoadSpec *spec, WorkerDoneFunc done, void *userdata,
                WorkerJob **ret) {
        NlLoadSpec cut = *spec;
        WorkerJob *j;
        int r;

        r = job_start(w, NL_JOB_LOAD, done, userdata, &j);
        if (r < 0)
                return r;
        snprintf(j->digest, sizeof(j->digest), "%s", digest);
        cut.n_reuse = MIN(cut.n_reuse, (size_t) NL_JOB_REUSE_MAX);
        r = nl_job_send_load(j->sock, &cut);
        if (r < 0) {
                j->done = NULL;
                job_free(j);
                return r;
        }
        if (ret)
                *ret = j;
        start_waiting(w);
        return 0;
}
