/* worker-msg.h: a worker's job and its answer on the wire (worker-msg.c): a header over a SOCK_SEQPACKET
 * socket with fds beside it (SCM_RIGHTS), bulk bytes in a sealed memfd. Both sides use it: the parent
 * (worker.c) and the worker (worker-serve.c). */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "nl.h"
#include "nl-worker.h"

#define JOB_MAGIC 0x4a534c43u /* "CLSJ" */
#define REPLY_MAGIC 0x52534c43u /* "CLSR" */

typedef struct JobRequest {
        uint32_t magic;
        uint32_t kind; /* NlJobKind */
        uint32_t prog_kind; /* NlProgKind */
        uint32_t n_reuse;
        char object_name[32];
        char program[128];
        char reuse_names[NL_JOB_REUSE_MAX][16];
} JobRequest;

typedef struct JobReplyHeader {
        uint32_t magic;
        int32_t r; /* 0 or -errno */
        char code[32];
        char message[1024];
        uint32_t has_program; /* an fd of the program comes first */
        uint32_t has_payload; /* a memfd of payload_size bytes comes (last) */
        uint64_t payload_size;
} JobReplyHeader;

int send_msg(int sock, const void *buf, size_t size, const int *fds, size_t n_fds);
/* One message of exactly size bytes, and the fds beside it (at most max_fds; the rest closed). */
int recv_msg(int sock, void *buf, size_t size, int *fds, size_t max_fds, size_t *ret_n_fds);
/* A sealed memfd holding data. */
int memfd_with(const char *name, const void *data, size_t size);
/* All of fd (at most max bytes: -EFBIG past it). */
int read_fd_all(int fd, size_t max, char **ret, size_t *ret_size);
/* All of fd mapped (a sealed memfd or a store's object, neither ever shrunk): private, so that a writer
 * (libelf may convert in place) writes a copy; no copy made otherwise, and the pages come a fault-around
 * at a time instead of being copied into a new buffer (at 2 MiB, most of a worker's CPU). An empty fd is
 * read. Freed with fd_mapping_done(). */
typedef struct FdMapping {
        char *data;
        size_t size;
        bool mapped; /* else malloc'ed */
} FdMapping;
int map_fd_all(int fd, size_t max, FdMapping *ret);
void fd_mapping_done(FdMapping *m);
