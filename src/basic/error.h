/* error.h: the one error type: an errno, a stable code the API shows, a message and an optional detail. */
#pragma once

#include "error-code.h"
#include "macros.h"

typedef struct Error {
        int error; /* positive errno */
        ErrorCode code; /* ERROR_VERIFIER_REJECTED, ...; ERROR_CODE_NONE: no error */
        char *message; /* heap */
        char *detail; /* heap, optional: a verifier log can be hundreds of KiB */
} Error;

#define ERROR_NULL ((Error){ 0 })

/* Fills e (if not NULL and not already set) and returns -abs(error). */
int error_set(Error *e, int error, ErrorCode code, const char *fmt, ...) _printf_(4, 5);
/* Takes ownership of detail. */
void error_set_detail(Error *e, char *detail);
void error_done(Error *e);
/* The one out-of-memory error: ENOMEM, internal_error, "out of memory". */
int error_oom(Error *e);
/* An Error on the stack, done when it goes out of scope: _cleanup_error_ Error e = ERROR_NULL; */
#define _cleanup_error_ _cleanup_(error_done)
static inline int error_is_set(const Error *e) {
        return e && e->code != ERROR_CODE_NONE;
}
