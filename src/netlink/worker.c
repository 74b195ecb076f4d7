/* worker.c: the parent's side of the work on object bytes that must not take clsd down (worker-serve.c
 * does it in a process of its own): a job sent (an object to inspect, a program to load, the socket of
 * the next job) and its answer read back, strictly: what a worker says is as untrusted as what it read. */
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/bpf.h>
#include <linux/capability.h>
#include <poll.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "nl-internal.h"

#include "worker-msg.h"
#include "nl-bpf.h"
#include "nl-map.h"
#include "nl-worker.h"

/* ---- the parent's side ---- */

int nl_job_send_inspect(int sock, const void *data, size_t size) {
        JobRequest req = { .magic = JOB_MAGIC, .kind = NL_JOB_INSPECT };
        int fd = memfd_with("clsd-object", data, size), r;

        if (fd < 0)
                return fd;
        r = send_msg(sock, &req, sizeof(req), &fd, 1);
        close(fd);
        return r;
}

int nl_job_send_load(int sock, const NlLoadSpec *spec) {
        JobRequest req = { .magic = JOB_MAGIC, .kind = NL_JOB_LOAD, .prog_kind = spec->kind };
        int fds[NL_JOB_REUSE_MAX + 1];

        if (spec->n_reuse > NL_JOB_REUSE_MAX || strlen(spec->program) >= sizeof(req.program))
                return -E2BIG;
        snprintf(req.object_name, sizeof(req.object_name), "%s", spec->object_name);
        snprintf(req.program, sizeof(req.program), "%s", spec->program);
        req.n_reuse = (uint32_t) spec->n_reuse;
        fds[0] = spec->object_fd;
        for (size_t i = 0; i < spec->n_reuse; i++) {
                snprintf(req.reuse_names[i], sizeof(req.reuse_names[i]), "%s", spec->reuse[i].name);
                fds[i + 1] = spec->reuse[i].fd;
        }
        return send_msg(sock, &req, sizeof(req), fds, spec->n_reuse + 1);
}

int nl_job_send_next(int sock, int next_sock) {
        JobRequest req = { .magic = JOB_MAGIC, .kind = NL_JOB_NEXT };
        return send_msg(sock, &req, sizeof(req), &next_sock, 1);
}

void nl_job_reply_done(NlJobReply *r) {
        error_done(&r->error);
        r->info = nl_object_info_free(r->info);
        r->program = nl_program_free(r->program);
}

/* An error code as the worker names it (text on the socket), made clsd's own: one a worker cannot send is
 * an internal error, so that a worker that misbehaves cannot answer, say, 404 or 409 through clsd. */
static ErrorCode code_known(const char *s) {
        static const ErrorCode codes[] = {
                ERROR_INVALID_OBJECT,    ERROR_VERIFIER_REJECTED, ERROR_WRONG_PROGRAM_TYPE,
                ERROR_PROGRAM_NOT_FOUND, ERROR_MAP_INCOMPATIBLE,  ERROR_KERNEL_ERROR,
                ERROR_INTERNAL_ERROR,    ERROR_PROGRAM_AMBIGUOUS,
        };
        ErrorCode c = error_code_from_string(s);

        for (size_t i = 0; i < ELEMENTSOF(codes); i++)
                if (c == codes[i])
                        return c;
        return ERROR_INTERNAL_ERROR;
}

/* The system call an inspection's filter trapped (its number in text, from on_sigsys()), named: a defect of
 * the sandbox's list, not of the object, and said as such. */
static void sandbox_refused(Error *e, const char *number) {
        char *end;
        unsigned long nr = strtoul(number, &end, 10);
        _cleanup_free_ char *name =
                *number && !*end ? seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, (int) nr) : NULL;

        error_set(e, ENOSYS, ERROR_INTERNAL_ERROR,
                  "the inspection's sandbox refused system call %s (%s), which libbpf or glibc made while "
                  "reading this object: a defect of clsd's sandbox, not of the object (please report it)",
                  name ? name : "?", number);
}

int nl_job_read_reply(int sock, NlJobKind kind, NlJobReply *ret) {
        JobReplyHeader h;
        int fds[2] = { -1, -1 }, r;
        size_t n_fds = 0, i = 0;
        NlJobReply reply = { 0 };

        r = recv_msg(sock, &h, sizeof(h), fds, 2, &n_fds);
        if (r < 0)
                return r;
        if (h.magic != REPLY_MAGIC || n_fds != (size_t) (h.has_program != 0) + (h.has_payload != 0)) {
                r = -EBADMSG;
                goto finish;
        }
        h.code[sizeof(h.code) - 1] = 0;
        h.message[sizeof(h.message) - 1] = 0;
        reply.r = h.r > 0 ? -h.r : h.r;
        if (reply.r < 0 && streq(h.code, NL_SANDBOX_REFUSED))
                sandbox_refused(&reply.error, h.message);
        else if (reply.r < 0)
                error_set(&reply.error, -reply.r, code_known(h.code), "%s", h.message);
        if (h.has_program) {
                r = kind == NL_JOB_LOAD ? nl_program_take_fd(fds[i], &reply.program, NULL) : -EBADMSG;
                fds[i++] = -1;
                if (r < 0)
                        goto finish;
        }
        if (h.has_payload) {
                _cleanup_free_ char *payload = NULL;
                size_t size;
                r = read_fd_all(fds[i],
                                kind == NL_JOB_INSPECT ? NL_INSPECT_REPLY_MAX : NL_VERIFIER_LOG_MAX + 1,
                                &payload, &size);
                if (r < 0)
                        goto finish;
                if (reply.r < 0)
                        error_set_detail(&reply.error, TAKE_PTR(payload)); /* a verifier log */
                else if (kind == NL_JOB_INSPECT) {
                        r = nl_object_info_parse(payload, size, &reply.info, &reply.error);
                        if (r < 0) {
                                reply.r = r;
                                r = 0;
                        }
                }
        }
        if (kind == NL_JOB_INSPECT && reply.r >= 0 && !reply.info)
                r = -EBADMSG;
        if (kind == NL_JOB_LOAD && reply.r >= 0 && !reply.program)
                r = -EBADMSG;
finish:
        for (size_t k = 0; k < n_fds; k++)
                safe_close(fds[k]);
        if (r < 0) {
                nl_job_reply_done(&reply);
                return r;
        }
        *ret = reply;
        return 0;
}
