/* log.h: one logging family; under journald structured entries (or "<N>" syslog prefixes), plain text
 * otherwise. */
#pragma once

#include <syslog.h>

#include "macros.h"

void log_set_max_level(int level);
int log_get_max_level(void);
int log_level_from_string(const char *s);
void log_open(void);
/* Under journald, each line goes to sink instead of stderr, with its fields (the composition root sets
 * one that calls sd_journal_send(): PRIORITY, CODE_FILE, CODE_LINE, ERRNO), so that basic needs no
 * libsystemd and the workers stay small. NULL: stderr with "<N>" prefixes. */
typedef void (*LogJournalSink)(int level, int error, const char *file, int line, const char *message);
void log_set_journal_sink(LogJournalSink sink);

int log_internal(int level, int error, const char *file, int line, const char *fmt, ...) _printf_(5, 6);

#define log_full_errno(level, error, ...) log_internal((level), (error), __FILE__, __LINE__, __VA_ARGS__)
#define log_debug(...) log_full_errno(LOG_DEBUG, 0, __VA_ARGS__)
#define log_info(...) log_full_errno(LOG_INFO, 0, __VA_ARGS__)
#define log_notice(...) log_full_errno(LOG_NOTICE, 0, __VA_ARGS__)
#define log_warning(...) log_full_errno(LOG_WARNING, 0, __VA_ARGS__)
#define log_error(...) log_full_errno(LOG_ERR, 0, __VA_ARGS__)
#define log_debug_errno(e, ...) log_full_errno(LOG_DEBUG, (e), __VA_ARGS__)
#define log_warning_errno(e, ...) log_full_errno(LOG_WARNING, (e), __VA_ARGS__)
#define log_error_errno(e, ...) log_full_errno(LOG_ERR, (e), __VA_ARGS__)
