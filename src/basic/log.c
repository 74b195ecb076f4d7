/* log.c: writes log lines to stderr; the level is the one piece of global state clsd keeps. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

static int max_level = LOG_INFO;
static int journal_prefix = 0;
static LogJournalSink journal_sink;

void log_set_journal_sink(LogJournalSink sink) {
        journal_sink = journal_prefix ? sink : NULL;
}

void log_set_max_level(int level) {
        max_level = level;
}

int log_get_max_level(void) {
        return max_level;
}

int log_level_from_string(const char *s) {
        static const char *const names[] = {
                [LOG_ERR] = "error", [LOG_WARNING] = "warning", [LOG_NOTICE] = "notice",
                [LOG_INFO] = "info", [LOG_DEBUG] = "debug",
        };
        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                if (names[i] && streq(names[i], s))
                        return (int) i;
        return -EINVAL;
}

void log_open(void) {
        /* systemd sets JOURNAL_STREAM when stderr is connected to journald. */
        journal_prefix = getenv("JOURNAL_STREAM") != NULL;
}

int log_internal(int level, int error, const char *file, int line, const char *fmt, ...) {
        int saved = errno;
        char buf[2048];
        va_list ap;

        if (error < 0)
                error = -error;
        if (level > max_level)
                return -error;

        va_start(ap, fmt);
        errno = error;
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);

        if (journal_sink)
                journal_sink(level, error, file, line, buf);
        else if (journal_prefix)
                fprintf(stderr, "<%d>%s\n", level, buf);
        else if (max_level >= LOG_DEBUG)
                fprintf(stderr, "%s:%d: %s\n", file, line, buf);
        else
                fprintf(stderr, "%s\n", buf);
        errno = saved;
        return -error;
}
