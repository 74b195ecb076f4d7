/* audit.c: one record of every change asked of clsd, and of every one refused: who (the peer's uid and
 * pid on the unix socket or D-Bus, its address and whether it gave the token over TCP), what (method,
 * path, the generation or digest it made) and how it ended. Under journald the record has fields of its
 * own (CLSD_AUDIT=1, CLSD_WHO=, …: `journalctl CLSD_AUDIT=1`); otherwise it is a line of the log. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-journal.h>

#include "api-internal.h"
#include "log.h"

static const char *result_of(unsigned status) {
        return status < 400 ? "ok" : status < 500 ? "refused" : "failed";
}

void api_audit(Api *a, const AuditRecord *r) {
        const char *result = result_of(r->status);

        a->audits[r->status < 400 ? 0 : r->status < 500 ? 1 : 2]++;
        if (getenv("JOURNAL_STREAM")) {
                (void) sd_journal_send("MESSAGE=audit: %s %s by %s: %u %s", r->method, r->path, r->who,
                                       r->status, r->code ?: result, "PRIORITY=%d",
                                       r->status < 400 ? LOG_NOTICE : LOG_WARNING, "CLSD_AUDIT=1",
                                       "CLSD_WHO=%s", r->who, "CLSD_METHOD=%s", r->method, "CLSD_PATH=%s",
                                       r->path, "CLSD_STATUS=%u", r->status, "CLSD_RESULT=%s", result,
                                       "CLSD_ERROR=%s", r->code ?: "", "CLSD_GENERATION=%s",
                                       r->generation ?: "", "CLSD_DIGEST=%s", r->digest ?: "", NULL);
                return;
        }
        log_notice("audit: %s %s by %s: %u %s%s%s%s%s", r->method, r->path, r->who, r->status,
                   r->code ?: result, r->generation ? " generation=" : "", r->generation ?: "",
                   r->digest ? " digest=" : "", r->digest ?: "");
}
