/* expect.h: If-Match checked (expect.c). */
#pragma once

#include "daemon.h"
#include "daemon-changes.h"

/* Whether expect (NULL or EXPECT_NOTHING: anything) holds of what ("document", "policy"), which exists
 * or not, at generation: precondition_failed otherwise. */
int expect_check(const DaemonExpect *expect, const char *what, bool exists, uint64_t generation,
                 Error *reterr);
