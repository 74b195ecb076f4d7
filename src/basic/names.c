/* names.c: the names clsd takes from its users for files and keys. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macros.h"
#include "names.h"

bool name_valid(const char *s, size_t max) {
        size_t n = s ? strlen(s) : 0;

        if (n == 0 || n > max || streq(s, ".") || streq(s, ".."))
                return false;
        for (const char *p = s; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                      *p == '-' || *p == '_' || *p == '.'))
                        return false;
        return true;
}

/* The length of the valid UTF-8 sequence at s, or 0. */
static size_t utf8_sequence(const unsigned char *s) {
        unsigned c = s[0], n, cp;

        if (c < 0x80)
                return 1;
        if (c >= 0xc2 && c <= 0xdf)
                n = 2, cp = c & 0x1f;
        else if (c >= 0xe0 && c <= 0xef)
                n = 3, cp = c & 0x0f;
        else if (c >= 0xf0 && c <= 0xf4)
                n = 4, cp = c & 0x07;
        else
                return 0;
        for (unsigned i = 1; i < n; i++) {
                if ((s[i] & 0xc0) != 0x80)
                        return 0;
                cp = (cp << 6) | (s[i] & 0x3f);
        }
        if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff))
                return 0;
        return n;
}

char *utf8_escape_invalid(const char *s) {
        char *out = malloc(strlen(s) * 4 + 1), *o = out;

        if (!out)
                return NULL;
        for (const unsigned char *p = (const unsigned char *) s; *p;) {
                size_t n = utf8_sequence(p);
                if (n == 0) {
                        o += sprintf(o, "\\x%02x", *p++);
                        continue;
                }
                memcpy(o, p, n);
                o += n, p += n;
        }
        *o = 0;
        return out;
}
