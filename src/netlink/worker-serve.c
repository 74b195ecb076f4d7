/* worker-serve.c: the worker's side, in a process of its own: inspecting an object (libbpf parses untrusted
 * ELF and BTF) with no privileges under a tight seccomp filter, and loading a program (the verifier may
 * take seconds); and an inspection in a forked child, waited for (clsd --check, the fuzz harness). */
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

/* si_code of a SIGSYS that a seccomp filter raised (the kernel's; glibc 2.36 does not name it). */
#ifndef SYS_SECCOMP
#define SYS_SECCOMP 1
#endif
/* The user an inspection runs as: nobody. */
#define WORKER_UID 65534
#define WORKER_GID 65534

/* ---- the worker's side ---- */

static int reply(int sock, int r, const Error *e, int program_fd, const void *payload, size_t payload_size) {
        JobReplyHeader h = { .magic = REPLY_MAGIC, .r = r };
        int fds[2], n = 0, payload_fd = -1, k;

        if (e && e->code)
                snprintf(h.code, sizeof(h.code), "%s", error_code_to_string(e->code));
        if (e && e->message)
                snprintf(h.message, sizeof(h.message), "%s", e->message);
        if (program_fd >= 0) {
                h.has_program = 1;
                fds[n++] = program_fd;
        }
        if (payload) {
                payload_fd = memfd_with("clsd-reply", payload, payload_size);
                if (payload_fd < 0)
                        return payload_fd;
                h.has_payload = 1;
                h.payload_size = payload_size;
                fds[n++] = payload_fd;
        }
        k = send_msg(sock, &h, sizeof(h), fds, (size_t) n);
        safe_close(payload_fd);
        return k;
}

static int quiet_print(enum libbpf_print_level level, const char *fmt, va_list ap) {
        (void) level, (void) fmt, (void) ap;
        return 0;
}

/* The job's socket, for the SIGSYS handler: a system call the inspection's filter refuses is said to
 * clsd (which names it) before the worker dies of the signal. */
static volatile int inspect_sock = -1;

/* Async-signal-safe: the reply's header by hand, the number in decimal, then death by the same signal. */
static void seccomp_releasep(scmp_filter_ctx *ctx) {
        if (*ctx)
                seccomp_release(*ctx);
}

static void on_sigsys(int sig, siginfo_t *si, void *uc) {
        JobReplyHeader h = { .magic = REPLY_MAGIC, .r = -ENOSYS };
        char digits[16];
        size_t n = 0;
        unsigned nr = (unsigned) si->si_syscall;

        (void) uc;
        if (si->si_code != SYS_SECCOMP) /* sent by someone: no system call to name */
                (void) syscall(SYS_tgkill, getpid(), (pid_t) syscall(SYS_gettid), sig);
        memcpy(h.code, NL_SANDBOX_REFUSED, sizeof(NL_SANDBOX_REFUSED));
        do
                digits[n++] = (char) ('0' + nr % 10);
        while ((nr /= 10) && n < sizeof(digits));
        for (size_t i = 0; i < n; i++)
                h.message[i] = digits[n - 1 - i];
        if (inspect_sock >= 0) {
                struct iovec iov = { .iov_base = &h, .iov_len = sizeof(h) };
                struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
                (void) sendmsg(inspect_sock, &mh, MSG_NOSIGNAL);
        }
        /* SA_RESETHAND made the default action the signal's again; SA_NODEFER lets it in at once. */
        (void) syscall(SYS_tgkill, getpid(), (pid_t) syscall(SYS_gettid), sig);
        _exit(128 + sig);
}

/* An inspection may read and write what it was given, allocate, and answer (a memfd); nothing else. The
 * list is what glibc 2.36 and libbpf 1.1 were traced making while opening a wide set of objects (tests/
 * bpf/gen-wide: hundreds of programs, relocations, maps, subprograms, BTF types, a MiB of .rodata, CO-RE
 * relocations, externs, map-in-map; the contrib and test objects): libbpf asks the kernel's version
 * (uname) and looks for /proc/version_signature (it finds none); glibc's qsort asks the memory's size
 * (sysinfo) to sort more than 1 KiB, and libbpf sorts programs, relocations and BTF; glibc's fatal
 * messages go out with writev, and abort() may set SIGABRT's action back; a sanitizer's runtime takes its
 * signal stack down at exit (sigaltstack). A system call outside the list
 * is trapped (on_sigsys): the worker says which on sock before it dies, so that clsd can name it. */
int nl_inspect_confine(int sock) {
        static const int allowed[] = {
                SCMP_SYS(read),          SCMP_SYS(write),        SCMP_SYS(writev),
                SCMP_SYS(pread64),       SCMP_SYS(lseek),        SCMP_SYS(fstat),
                SCMP_SYS(newfstatat),    SCMP_SYS(mmap),         SCMP_SYS(munmap),
                SCMP_SYS(mremap),        SCMP_SYS(brk),          SCMP_SYS(madvise),
                SCMP_SYS(mprotect),      SCMP_SYS(sendmsg),      SCMP_SYS(close),
                SCMP_SYS(uname),         SCMP_SYS(sysinfo),      SCMP_SYS(futex),
                SCMP_SYS(getrandom),     SCMP_SYS(rt_sigreturn), SCMP_SYS(rt_sigprocmask),
                SCMP_SYS(rt_sigaction),  SCMP_SYS(exit),         SCMP_SYS(exit_group),
                SCMP_SYS(getpid),        SCMP_SYS(gettid),       SCMP_SYS(sigaltstack),
                SCMP_SYS(clock_gettime), SCMP_SYS(memfd_create)
        };
        static const int not_found[] = { SCMP_SYS(openat), SCMP_SYS(faccessat2), SCMP_SYS(faccessat),
                                         SCMP_SYS(access) };
        struct sigaction sa = { .sa_sigaction = on_sigsys,
                                .sa_flags = SA_SIGINFO | SA_RESETHAND | SA_NODEFER };
        _cleanup_(seccomp_releasep) scmp_filter_ctx ctx = NULL;
        int r;

        /* No way back to privileges: nobody where clsd may change its user; else (clsd.service does not
         * give it CAP_SETUID) root without a single capability. No new privileges either way. */
        if (geteuid() == 0 && (setgroups(0, NULL) < 0 || setresgid(WORKER_GID, WORKER_GID, WORKER_GID) < 0 ||
                               setresuid(WORKER_UID, WORKER_UID, WORKER_UID) < 0)) {
                struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
                struct __user_cap_data_struct none[_LINUX_CAPABILITY_U32S_3] = { 0 };
                if (errno != EPERM || syscall(SYS_capset, &h, none) < 0)
                        return -errno;
        }
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return -errno;
        inspect_sock = sock;
        if (sigaction(SIGSYS, &sa, NULL) < 0)
                return -errno;
        ctx = seccomp_init(SCMP_ACT_TRAP);
        if (!ctx)
                return -ENOMEM;
        for (size_t i = 0; i < ELEMENTSOF(allowed); i++) {
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, allowed[i], 0);
                if (r < 0)
                        return r;
        }
        /* abort() and the trap's handler signal their own process; no other (it may still be uid 0). */
        r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(tgkill), 1,
                             SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t) getpid()));
        if (r < 0)
                return r;
        /* The answer goes in a memfd, sealed (F_ADD_SEALS is the only fcntl). */
        r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(fcntl), 1, SCMP_A1(SCMP_CMP_EQ, F_ADD_SEALS));
        if (r < 0)
                return r;
        /* Files are not to be opened: libbpf takes "not found" for an answer. */
        for (size_t i = 0; i < ELEMENTSOF(not_found); i++) {
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOENT), not_found[i], 0);
                if (r < 0)
                        return r;
        }
        return seccomp_load(ctx);
}

/* A load needs bpf(2) and what libbpf probes with; it may not run programs, trace others, reach the
 * network or change the system. */
static int load_confine(void) {
        static const int denied[] = { SCMP_SYS(execve),
                                      SCMP_SYS(execveat),
                                      SCMP_SYS(ptrace),
                                      SCMP_SYS(process_vm_readv),
                                      SCMP_SYS(process_vm_writev),
                                      SCMP_SYS(mount),
                                      SCMP_SYS(umount2),
                                      SCMP_SYS(pivot_root),
                                      SCMP_SYS(chroot),
                                      SCMP_SYS(setns),
                                      SCMP_SYS(unshare),
                                      SCMP_SYS(connect),
                                      SCMP_SYS(bind),
                                      SCMP_SYS(listen),
                                      SCMP_SYS(init_module),
                                      SCMP_SYS(finit_module),
                                      SCMP_SYS(delete_module),
                                      SCMP_SYS(kexec_load),
                                      SCMP_SYS(reboot),
                                      SCMP_SYS(swapon),
                                      SCMP_SYS(swapoff) };
        _cleanup_(seccomp_releasep) scmp_filter_ctx ctx = NULL;
        int r;

        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return -errno;
        ctx = seccomp_init(SCMP_ACT_ALLOW);
        if (!ctx)
                return -ENOMEM;
        for (size_t i = 0; i < ELEMENTSOF(denied); i++) {
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), denied[i], 0);
                if (r < 0)
                        return r;
        }
        return seccomp_load(ctx);
}

static int serve_inspect(int sock, const char *data, size_t size) {
        _cleanup_(nl_object_info_freep) NlObjectInfo *info = NULL;
        _cleanup_free_ char *out = NULL;
        _cleanup_error_ Error e = ERROR_NULL;
        size_t out_size = 0;
        int r;

        r = nl_inspect_confine(sock);
        if (r < 0) {
                error_set(&e, -r, ERROR_INTERNAL_ERROR, "cannot confine the inspection: %s", strerror(-r));
                return reply(sock, r, &e, -1, NULL, 0);
        }
        r = nl_object_inspect(data, size, &info, &e);
        if (r < 0 || (r = nl_object_info_serialize(info, &out, &out_size)) < 0) {
                if (!e.code)
                        error_set(&e, -r, ERROR_INTERNAL_ERROR, "out of memory");
                return reply(sock, r, &e, -1, NULL, 0);
        }
        return reply(sock, 0, NULL, -1, out, out_size);
}

static int serve_load(int sock, const JobRequest *req, const char *data, size_t size, const int *reuse_fds,
                      size_t n_reuse) {
        _cleanup_(nl_program_freep) NlProgram *p = NULL;
        NlMap reuse[NL_JOB_REUSE_MAX] = { 0 };
        _cleanup_error_ Error e = ERROR_NULL;
        static bool confined = false; /* once: a worker that loads again keeps its filter */
        int r;

        r = confined ? 0 : load_confine();
        confined = confined || r >= 0;
        if (r < 0) {
                error_set(&e, -r, ERROR_INTERNAL_ERROR, "cannot confine the load: %s", strerror(-r));
                return reply(sock, r, &e, -1, NULL, 0);
        }
        for (size_t i = 0; i < n_reuse; i++) {
                if (nl_map_from_fd(reuse_fds[i], &reuse[i], NULL) < 0)
                        reuse[i].fd = -1;
                /* The map's name as the object has it (the kernel's is cut to 15 characters). */
                snprintf(reuse[i].name, sizeof(reuse[i].name), "%s", req->reuse_names[i]);
        }
        r = nl_program_load(data, size, req->object_name, req->program, (NlProgKind) req->prog_kind, reuse,
                            n_reuse, &p, &e);
        for (size_t i = 0; i < n_reuse; i++)
                safe_close(reuse[i].fd);
        if (r < 0)
                return reply(sock, r, &e, -1, e.detail, e.detail ? strlen(e.detail) : 0);
        return reply(sock, 0, NULL, nl_program_fd(p), NULL, 0);
}

int nl_worker_main(int fd) {
        /* Dies with clsd (a clsd gone before this line leaves it a parent that is not clsd), and
         * yields to clsd's loop and to everything else on the host. */
        pid_t parent = getppid();
        (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
                _exit(1);
        (void) setpriority(PRIO_PROCESS, 0, NL_WORKER_NICE);
        /* _exit(): a confined worker has nothing to flush, and no exit handler may run (a leak
         * checker's would need system calls the seccomp filter refuses). */
        _exit(nl_worker_serve(fd));
}

/* One message from sock: a job (its kind in *ret_kind), or the socket of the next job (NL_JOB_NEXT,
 * the socket in *ret_next): what a spare worker, started before there was a job, is first sent, and
 * what a worker may be sent after a load (after_load), for the next load of the same object; after a
 * load nothing else is taken, and the socket's end is no failure (0 in *ret_kind). The exit status on
 * failure. */
static int serve_one(int sock, bool after_load, NlJobKind *ret_kind, int *ret_next) {
        _cleanup_(fd_mapping_done) FdMapping object = { 0 };
        int fds[NL_JOB_REUSE_MAX + 1];
        size_t n_fds = 0;
        JobRequest req;
        int r;

        *ret_kind = 0;
        r = recv_msg(sock, &req, sizeof(req), fds, ELEMENTSOF(fds), &n_fds);
        if (r < 0)
                return after_load ? 0 : 1;
        if (req.magic == JOB_MAGIC && req.kind == NL_JOB_NEXT && n_fds == 1) {
                *ret_kind = NL_JOB_NEXT;
                *ret_next = fds[0];
                return 0;
        }
        req.object_name[sizeof(req.object_name) - 1] = 0;
        req.program[sizeof(req.program) - 1] = 0;
        for (size_t i = 0; i < NL_JOB_REUSE_MAX; i++)
                req.reuse_names[i][sizeof(req.reuse_names[i]) - 1] = 0;
        if (after_load || req.magic != JOB_MAGIC || n_fds < 1 || req.n_reuse > NL_JOB_REUSE_MAX ||
            n_fds != req.n_reuse + 1) {
                for (size_t i = 0; i < n_fds; i++)
                        close(fds[i]);
                return after_load ? 0 : 1;
        }
        r = map_fd_all(fds[0], NL_OBJECT_SIZE_MAX, &object);
        close(fds[0]);
        if (r < 0) {
                _cleanup_error_ Error e = ERROR_NULL;
                error_set(&e, -r, r == -EFBIG ? ERROR_PAYLOAD_TOO_LARGE : ERROR_INTERNAL_ERROR,
                          "cannot read the object: %s", strerror(-r));
                (void) reply(sock, r, &e, -1, NULL, 0);
                return 1;
        }
        if (req.kind == NL_JOB_INSPECT)
                r = serve_inspect(sock, object.data, object.size);
        else if (req.kind == NL_JOB_LOAD)
                r = serve_load(sock, &req, object.data, object.size, fds + 1, req.n_reuse);
        else
                r = -EINVAL;
        *ret_kind = (NlJobKind) req.kind;
        return r < 0 ? 1 : 0;
}

int nl_worker_serve(int sock) {
        bool loaded = false;

        libbpf_set_print(quiet_print);
        for (;;) {
                NlJobKind kind;
                int next = -1, r = serve_one(sock, loaded, &kind, &next);

                if (r != 0 || kind == 0)
                        return r;
                if (kind == NL_JOB_NEXT) {
                        close(sock);
                        sock = next;
                        loaded = false;
                        continue;
                }
                if (kind != NL_JOB_LOAD)
                        return 0;
                loaded = true;
        }
}

/* ---- an inspection in a forked worker, waited for (clsd --check, the fuzz harness) ---- */

int nl_object_inspect_forked(const void *data, size_t size, NlObjectInfo **ret, Error *reterr) {
        int sv[2], status, r;
        NlJobReply rep = { 0 };
        pid_t pid;

        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                return error_set(reterr, errno, ERROR_INTERNAL_ERROR, "socketpair: %m");
        pid = fork();
        if (pid < 0) {
                r = -errno;
                close(sv[0]);
                close(sv[1]);
                return error_set(reterr, -r, ERROR_INTERNAL_ERROR, "fork: %s", strerror(-r));
        }
        if (pid == 0) {
                /* A parser that crashes dies of its signal, as a worker started afresh does (a sanitizer's
                 * handler, inherited from a fuzzing harness, would report from inside the sandbox). */
                static const int faults[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT };
                for (size_t i = 0; i < ELEMENTSOF(faults); i++)
                        (void) signal(faults[i], SIG_DFL);
                close(sv[0]);
                _exit(nl_worker_serve(sv[1]));
        }
        close(sv[1]);
        r = nl_job_send_inspect(sv[0], data, size);
        if (r >= 0) {
                struct pollfd p = { .fd = sv[0], .events = POLLIN };
                (void) poll(&p, 1, -1);
                r = nl_job_read_reply(sv[0], NL_JOB_INSPECT, &rep);
        }
        close(sv[0]);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        if (r < 0) {
                if (WIFSIGNALED(status))
                        return error_set(reterr, EINVAL, ERROR_INVALID_OBJECT,
                                         "the object's parser crashed on it (signal %d, %s): not an object "
                                         "libbpf can read",
                                         WTERMSIG(status), strsignal(WTERMSIG(status)));
                return error_set(reterr, -r, ERROR_INTERNAL_ERROR, "the inspection failed: %s",
                                 strerror(-r));
        }
        if (rep.r < 0) {
                r = rep.r;
                if (reterr && !reterr->code)
                        *reterr = rep.error;
                else
                        error_done(&rep.error);
                return r;
        }
        *ret = TAKE_PTR(rep.info);
        return 0;
}
