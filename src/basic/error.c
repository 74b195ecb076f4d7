/* error.c: filling and freeing the Error type. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "error.h"

int error_set(Error *e, int error, ErrorCode code, const char *fmt, ...) {
        va_list ap;

        if (error < 0)
                error = -error;
        if (error == 0)
                error = EIO;
        if (!e || e->code != ERROR_CODE_NONE)
                return -error; /* keep the first, innermost explanation */

        e->error = error;
        e->code = code != ERROR_CODE_NONE ? code : ERROR_INTERNAL_ERROR;
        va_start(ap, fmt);
        if (vasprintf(&e->message, fmt, ap) < 0)
                e->message = NULL;
        va_end(ap);
        return -error;
}

void error_set_detail(Error *e, char *detail) {
        if (!e) {
                free(detail);
                return;
        }
        free(e->detail);
        e->detail = detail;
}

void error_done(Error *e) {
        if (!e)
                return;
        free(e->message);
        free(e->detail);
        *e = ERROR_NULL;
}

int error_oom(Error *e) {
        return error_set(e, ENOMEM, ERROR_INTERNAL_ERROR, "out of memory");
}
