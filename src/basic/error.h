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
static inline int error_is_set(const Error *e) {
        return e && e->code != ERROR_CODE_NONE;
}
