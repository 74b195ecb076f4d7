/* workers.h: slow and untrusted work off the loop, in processes of their own (OpenBSD's privilege
 * separation): an object's bytes are parsed by a worker without privileges under a tight seccomp
 * filter, and programs are loaded (and verified) by a worker, so that a parser that crashes costs one
 * answer and a verifier that takes seconds stops nothing. Results come back to the loop. */
#pragma once

#include <systemd/sd-event.h>

#include "nl.h"
#include "nl-bpf.h"
#include "nl-worker.h"

typedef struct Workers Workers;
typedef struct WorkerJob WorkerJob;

typedef struct WorkerResult {
        int r; /* 0, or the failure's -errno (the error says why) */
        Error error;
        NlObjectInfo *info; /* an inspection's: the caller's to free */
        NlProgram *program; /* a load's: the caller's to free */
} WorkerResult;

typedef void (*WorkerDoneFunc)(WorkerResult *result, void *userdata);

/* exe: the program a worker runs (clsd, with --worker). */
int workers_new(sd_event *event, const char *exe, Workers **ret);
/* Kills what still runs; their callbacks are not called. */
Workers *workers_free(Workers *w);
/* Parses data (size bytes) in a worker; done() gets the description or the reason. */
int worker_inspect(Workers *w, const void *data, size_t size, WorkerDoneFunc done, void *userdata,
                   WorkerJob **ret);
/* Loads what spec says (nl.h) from the object of this digest. Loads of the same object waiting their turn
 * go on in the process of the one before: a worker started for an object may load from it several
 * times, never from another. Reuse past NL_JOB_REUSE_MAX maps is cut there. */
int worker_load(Workers *w, const char *digest, const NlLoadSpec *spec, WorkerDoneFunc done, void *userdata,
                WorkerJob **ret);
/* Forgets the job: done() will not be called. */
void worker_job_cancel(WorkerJob *j);
size_t workers_running(const Workers *w);
/* Jobs run, and those whose worker died of a signal. */
uint64_t workers_jobs(const Workers *w);
uint64_t workers_crashes(const Workers *w);
/* Workers ended by signal (of 1 to WORKER_SIGNALS_MAX - 1), whether or not they answered first: an
 * inspection that made a system call its sandbox refuses says which, then dies of SIGSYS. */
#define WORKER_SIGNALS_MAX 65
uint64_t workers_killed(const Workers *w, int signal);
/* Jobs a spare worker took (started before the job, so that it did not wait for an exec). */
uint64_t workers_spares_used(const Workers *w);
/* Whether a spare waits, ready to take the next job. */
bool workers_spare_ready(const Workers *w);
