/* error-code.c: the string and HTTP status of each error code, both made from error-code.h's one list. */
#include <stddef.h>
#include <string.h>

#include "error-code.h"
#include "macros.h"

static const struct {
        const char *string;
        unsigned status;
} error_codes[_ERROR_CODE_MAX] = {
#define ERROR_CODE_ENTRY(name, s, st) [ERROR_##name] = { .string = s, .status = st },
        ERROR_CODE_LIST(ERROR_CODE_ENTRY)
#undef ERROR_CODE_ENTRY
};

const char *error_code_to_string(ErrorCode code) {
        if (code <= ERROR_CODE_NONE || code >= _ERROR_CODE_MAX)
                return NULL;
        return error_codes[code].string;
}

ErrorCode error_code_from_string(const char *s) {
        for (ErrorCode c = ERROR_CODE_NONE + 1; s && c < _ERROR_CODE_MAX; c++)
                if (streq(error_codes[c].string, s))
                        return c;
        return ERROR_INTERNAL_ERROR;
}

unsigned error_code_status(ErrorCode code) {
        if (code <= ERROR_CODE_NONE || code >= _ERROR_CODE_MAX)
                return 500;
        return error_codes[code].status;
}
