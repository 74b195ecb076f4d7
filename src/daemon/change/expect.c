/* expect.c: If-Match, the one precondition of a change: "*" (something is there) or a generation (the
 * document's or the policy's, as a GET showed it). */
#include <inttypes.h>

#include "expect.h"
#include "daemon-changes.h"

int expect_check(const DaemonExpect *expect, const char *what, bool exists, uint64_t generation,
                 Error *reterr) {
        if (!expect || expect->kind == EXPECT_NOTHING)
                return 0;
        if (!exists)
                return error_set(reterr, EEXIST, ERROR_PRECONDITION_FAILED,
                                 "If-Match: %s: there is no %s to match", strna(expect->as_given), what);
        if (expect->kind == EXPECT_ANY)
                return 0;
        if (expect->kind != EXPECT_GENERATION || expect->generation != generation)
                return error_set(reterr, EEXIST, ERROR_PRECONDITION_FAILED,
                                 "If-Match: %s does not match the %s's generation \"%" PRIu64 "\"",
                                 strna(expect->as_given), what, generation);
        return 0;
}
