/* fuzz-inspect.c: an object upload is untrusted bytes. Two parsers see them: libbpf, in a worker that
 * has no privileges (the crashes of libbpf 1.1 on a broken BTF section stay there), and clsd's own
 * parser of the worker's answer, which must hold whatever a worker says. Each input is tried as both:
 * as an answer, parsed and written back (a round trip that must give the same bytes); as an object,
 * inspected in a forked worker whose every end is an answer or an error, never the caller's crash. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nl.h"
#include "nl-bpf.h"
#include "nl-worker.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void round_trip(const NlObjectInfo *info) {
        _cleanup_free_ char *buf = NULL, *again = NULL;
        size_t n = 0, n_again = 0;
        NlObjectInfo *back = NULL;
        Error e = ERROR_NULL;

        if (nl_object_info_serialize(info, &buf, &n) < 0)
                abort();
        if (nl_object_info_parse(buf, n, &back, &e) < 0)
                abort(); /* what clsd writes, clsd reads */
        if (nl_object_info_serialize(back, &again, &n_again) < 0 || n != n_again ||
            memcmp(buf, again, n) != 0)
                abort();
        nl_object_info_free(back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        NlObjectInfo *info = NULL;
        Error e = ERROR_NULL;

        if (nl_object_info_parse(data, size, &info, &e) >= 0) {
                round_trip(info);
                nl_object_info_free(info);
                info = NULL;
        }
        error_done(&e);

        /* Forking costs a millisecond: only what libbpf would take for an ELF file goes there. */
        if (size >= 4 && memcmp(data, "\177ELF", 4) == 0) {
                if (nl_object_inspect_forked(data, size, &info, &e) >= 0) {
                        if (!info)
                                abort();
                        round_trip(info);
                        nl_object_info_free(info);
                } else if (!e.code)
                        abort(); /* a failure always says why */
                else if (e.error == ENOSYS) {
                        /* the sandbox refused a system call libbpf or glibc made: its list is short */
                        fprintf(stderr, "%s\n", e.message);
                        abort();
                }
                error_done(&e);
        }
        return 0;
}
