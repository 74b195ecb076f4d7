/* names.h: the names clsd takes from its users for files and keys (policies, fleet nodes, labels). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* 1 to max of A-Z a-z 0-9 - _ . (a host name fits), and neither "." nor "..": safe as a file name. */
bool name_valid(const char *s, size_t max);

/* A copy of s with each byte that is not part of valid UTF-8 written as the four characters \xNN, or
 * NULL (out of memory): text from elsewhere (an object's names, a path) shown, never dropped. */
char *utf8_escape_invalid(const char *s);
