/* nl-worker.h: workers: parsing objects and loading programs in a process of their own */
#pragma once

#include "nl.h"
#include "nl-bpf.h"
#include "nl-map.h"

/* ---- workers (worker.c): parsing objects and loading programs in a process of their own ---- */
/* Maps a load may take over (more: the rest start empty); objects' programs and maps a description
 * may hold; an inspection's answer; an object a worker reads. */
#define NL_JOB_REUSE_MAX 64
#define NL_OBJECT_PROGRAMS_MAX 4096
#define NL_OBJECT_MAPS_MAX 4096
#define NL_INSPECT_REPLY_MAX (8u * 1024 * 1024)
#define NL_OBJECT_SIZE_MAX (256u * 1024 * 1024)
/* What a worker answers when the inspection's seccomp filter trapped a system call (its number as the
 * message); nl_job_read_reply() makes it an internal_error that names the call. */
#define NL_SANDBOX_REFUSED "sandbox_refused"

typedef enum NlJobKind {
        NL_JOB_INSPECT = 1, /* describe an object: no privileges, a tight seccomp filter */
        NL_JOB_LOAD = 2, /* load one program of it */
        NL_JOB_NEXT = 3, /* the socket of the worker's next job (one fd): a spare's first, or after a load
                          * the next load of the same object */
} NlJobKind;

typedef struct NlJobReply {
        int r; /* 0, or -errno with error */
        Error error;
        NlObjectInfo *info; /* an inspection's */
        NlProgram *program; /* a load's */
} NlJobReply;

int nl_job_send_inspect(int sock, const void *data, size_t size);
/* What a worker loads: program of the object in object_fd as kind, the object named object_name (libbpf
 * names its maps after it), taking over the maps of reuse by name (at most NL_JOB_REUSE_MAX). */
typedef struct NlLoadSpec {
        int object_fd;
        const char *object_name;
        const char *program;
        NlProgKind kind;
        const NlMap *reuse;
        size_t n_reuse;
} NlLoadSpec;
int nl_job_send_load(int sock, const NlLoadSpec *spec);
/* Hands a worker that answered a load the socket of the next load job of the same object, in which its
 * request already waits: one process for several loads. */
int nl_job_send_next(int sock, int next_sock);
/* The worker's answer (one message): -EBADMSG when it is not one. */
int nl_job_read_reply(int sock, NlJobKind kind, NlJobReply *ret);
void nl_job_reply_done(NlJobReply *r);
/* The worker's side: reads one job from sock, does it, answers; the exit status. */
int nl_worker_serve(int sock);
/* Workers yield to clsd's loop (and to everything else on the host). */
#define NL_WORKER_NICE 10
/* A worker process's whole life (clsd-worker, or clsd --worker): dies with its parent, niced, serves
 * the job on fd and exits; never returns. */
_noreturn_ int nl_worker_main(int fd);
/* An object's description as an inspection sends it back; parse checks every field (names printable). */
int nl_object_info_serialize(const NlObjectInfo *info, char **ret, size_t *ret_size);
int nl_object_info_parse(const void *buf, size_t size, NlObjectInfo **ret, Error *reterr);
/* An inspection in a forked worker, waited for: a parser that crashes is reterr "invalid_object". */
int nl_object_inspect_forked(const void *data, size_t size, NlObjectInfo **ret, Error *reterr);

/* Sends libbpf's output to our log at debug level. */
void nl_bpf_setup_logging(void);
const char *nl_libbpf_version(void);
