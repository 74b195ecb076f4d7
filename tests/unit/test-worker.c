/* test-worker.c: what clsd reads from a worker is as untrusted as what the worker read: an object's
 * description (program and map names, types, sizes) parsed back strictly. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nl-internal.h"
#include "nl-bpf.h"
#include "nl-worker.h"

typedef struct Buf {
        uint8_t b[4096];
        size_t n;
} Buf;

static void u32(Buf *b, uint32_t v) {
        memcpy(b->b + b->n, &v, 4);
        b->n += 4;
}

static void str(Buf *b, const char *s) {
        u32(b, (uint32_t) strlen(s));
        memcpy(b->b + b->n, s, strlen(s));
        b->n += strlen(s);
}

/* count.bpf.o as a worker describes it: one tc program, one array map. */
static Buf count_answer(void) {
        Buf b = { .n = 0 };
        u32(&b, 1);
        str(&b, "count_pkts");
        str(&b, "tc");
        u32(&b, 3); /* BPF_PROG_TYPE_SCHED_CLS */
        u32(&b, 1);
        str(&b, "counters");
        u32(&b, 2); /* BPF_MAP_TYPE_ARRAY */
        u32(&b, 4);
        u32(&b, 8);
        u32(&b, 1);
        u32(&b, 0);
        u32(&b, 0);
        return b;
}

static void test_answer_parsed_and_written_back_alike(void **state) {
        Buf b = count_answer();
        _cleanup_(nl_object_info_freep) NlObjectInfo *info = NULL;
        _cleanup_free_ char *again = NULL;
        size_t n;
        Error e = ERROR_NULL;

        (void) state;
        assert_int_equal(nl_object_info_parse(b.b, b.n, &info, &e), 0);
        assert_int_equal(info->n_programs, 1);
        assert_string_equal(info->programs[0].name, "count_pkts");
        assert_string_equal(info->programs[0].section, "tc");
        assert_string_equal(info->programs[0].type, "sched_cls");
        assert_int_equal(info->n_maps, 1);
        assert_string_equal(info->maps[0].name, "counters");
        assert_int_equal(info->maps[0].value_size, 8);
        assert_int_equal(nl_object_info_serialize(info, &again, &n), 0);
        assert_int_equal(n, b.n);
        assert_memory_equal(again, b.b, n);
}

/* Every cut of a valid answer, and one byte too many, is nonsense: refused, nothing leaks (ASan). */
static void test_truncated_or_longer_is_refused(void **state) {
        Buf b = count_answer();
        Error e = ERROR_NULL;

        (void) state;
        for (size_t n = 0; n < b.n; n++) {
                NlObjectInfo *info = NULL;
                assert_int_equal(nl_object_info_parse(b.b, n, &info, &e), -EBADMSG);
                assert_null(info);
                assert_int_equal(e.code, ERROR_INTERNAL_ERROR);
                error_done(&e);
        }
        b.b[b.n++] = 0;
        NlObjectInfo *info = NULL;
        assert_true(nl_object_info_parse(b.b, b.n, &info, &e) < 0);
        error_done(&e);
}

/* Names clsd shows, stores and logs are printable ASCII; an object with others is refused as such. */
static void test_names_must_be_printable(void **state) {
        Buf b = count_answer();
        NlObjectInfo *info = NULL;
        Error e = ERROR_NULL;

        (void) state;
        b.b[8] = '\033'; /* the program name's first byte: an escape */
        assert_true(nl_object_info_parse(b.b, b.n, &info, &e) < 0);
        assert_int_equal(e.code, ERROR_INVALID_OBJECT);
        assert_non_null(strstr(e.message, "printable"));
        error_done(&e);
}

/* A count that no object has (or a length beyond what came) is not believed: nothing is allocated
 * for it. */
static void test_counts_are_bounded(void **state) {
        Buf b = { .n = 0 };
        NlObjectInfo *info = NULL;
        Error e = ERROR_NULL;

        (void) state;
        u32(&b, UINT32_MAX);
        assert_true(nl_object_info_parse(b.b, b.n, &info, &e) < 0);
        assert_int_equal(e.code, ERROR_INVALID_OBJECT);
        error_done(&e);
        b.n = 0;
        u32(&b, 1);
        u32(&b, 1000000); /* a name as long as that, in a 12-byte answer */
        assert_int_equal(nl_object_info_parse(b.b, b.n, &info, &e), -EBADMSG);
        error_done(&e);
        b.n = 0;
        u32(&b, 0);
        u32(&b, 1);
        str(&b, "m");
        for (int i = 0; i < 5; i++)
                u32(&b, 1);
        u32(&b, 2); /* "internal" is 0 or 1 */
        assert_true(nl_object_info_parse(b.b, b.n, &info, &e) < 0);
        error_done(&e);
}

/* A system call outside the inspection's allowlist: the confined process says which on its socket and
 * dies of SIGSYS; clsd reads an internal_error that names the call (socket(2), not the object). */
static void test_a_refused_system_call_is_named(void **state) {
        int sv[2], status;
        NlJobReply rep = { 0 };
        pid_t pid;

        (void) state;
        assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                close(sv[0]);
                if (nl_inspect_confine(sv[1]) < 0)
                        _exit(3);
                (void) syscall(SYS_socket, AF_INET, SOCK_STREAM, 0);
                _exit(4); /* not reached: the filter traps it */
        }
        close(sv[1]);
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFSIGNALED(status));
        assert_int_equal(WTERMSIG(status), SIGSYS);
        assert_int_equal(nl_job_read_reply(sv[0], NL_JOB_INSPECT, &rep), 0);
        close(sv[0]);
        assert_int_equal(rep.r, -ENOSYS);
        assert_int_equal(rep.error.code, ERROR_INTERNAL_ERROR);
        assert_non_null(strstr(rep.error.message, "refused system call socket (41)"));
        error_done(&rep.error);
}

/* What glibc and libbpf need to open an object is allowed: sysinfo(2), which glibc's qsort calls to sort
 * more than 1 KiB (libbpf sorts programs and relocations), and writev(2) of glibc's fatal messages. */
static void test_what_libbpf_needs_is_allowed(void **state) {
        int sv[2], status;
        pid_t pid;

        (void) state;
        assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                struct iovec iov = { .iov_base = (void *) "", .iov_len = 0 };
                close(sv[0]);
                if (nl_inspect_confine(sv[1]) < 0)
                        _exit(3);
                _exit(sysconf(_SC_PHYS_PAGES) > 0 && writev(sv[1], &iov, 0) == 0 ? 0 : 5);
        }
        close(sv[1]);
        close(sv[0]);
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_answer_parsed_and_written_back_alike),
                cmocka_unit_test(test_truncated_or_longer_is_refused),
                cmocka_unit_test(test_names_must_be_printable),
                cmocka_unit_test(test_counts_are_bounded),
                cmocka_unit_test(test_a_refused_system_call_is_named),
                cmocka_unit_test(test_what_libbpf_needs_is_allowed),
        };
        return cmocka_run_group_tests_name("worker", tests, NULL, NULL);
}
