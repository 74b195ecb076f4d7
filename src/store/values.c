/* values.c: the values a document holds, checked and written as people write them: interface, namespace
 * and filter names, tc handles ("1:", "1:10") for parents and classids. */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <errno.h>
#include <string.h>

#include "store-internal.h"

int ifname_valid(const char *s) {
        size_t n = strlen(s);

        /* The kernel's dev_valid_name(): no '/', ':' or whitespace, not "." or "..". */
        if (n == 0 || n > IFNAME_MAX || streq(s, ".") || streq(s, ".."))
                return 0;
        for (const char *p = s; *p; p++)
                if (*p == '/' || *p == ':' || isspace((unsigned char) *p) || !isprint((unsigned char) *p))
                        return 0;
        return 1;
}

int netns_name_valid(const char *s) {
        size_t n = strlen(s);

        if (n == 0 || n > NETNS_NAME_MAX || streq(s, ".") || streq(s, ".."))
                return 0;
        for (const char *p = s; *p; p++)
                if (!isalnum((unsigned char) *p) && *p != '_' && *p != '.' && *p != '-')
                        return 0;
        return 1;
}

int filter_name_valid(const char *s) {
        size_t n = strlen(s);

        if (n == 0 || n > FILTER_NAME_MAX)
                return 0;
        for (const char *p = s; *p; p++)
                if (!isalnum((unsigned char) *p) && !strchr("_.-", *p))
                        return 0;
        return 1;
}

/* One half of "MAJ:MIN": 1 to 4 hex digits, nothing else (no sign, space or "0x"). */
static int classid_half(const char *s, size_t n, uint32_t *ret) {
        uint32_t v = 0;

        if (n == 0 || n > 4)
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                if (!isxdigit((unsigned char) s[i]))
                        return -EINVAL;
                v = v << 4 |
                    (uint32_t) (isdigit((unsigned char) s[i]) ? s[i] - '0' : (tolower(s[i]) - 'a' + 10));
        }
        *ret = v;
        return 0;
}

int classid_parse(const char *s, uint32_t *ret) {
        const char *colon = strchr(s, ':');
        uint32_t maj, min;

        /* tc's notation "MAJ:MIN" in hex, as in "1:10". */
        if (!colon || classid_half(s, (size_t) (colon - s), &maj) < 0 ||
            classid_half(colon + 1, strlen(colon + 1), &min) < 0)
                return -EINVAL;
        *ret = maj << 16 | min;
        return 0;
}

int parent_parse(const char *s, uint32_t *ret) {
        const char *colon = strchr(s, ':');
        uint32_t maj, min = 0;

        if (!colon || classid_half(s, (size_t) (colon - s), &maj) < 0 ||
            (colon[1] && classid_half(colon + 1, strlen(colon + 1), &min) < 0))
                return -EINVAL;
        /* ffff: is the clsact/ingress pseudo-qdisc: those are the "ingress" and "egress" hooks. */
        if (maj == 0 || maj == 0xFFFF)
                return -ERANGE;
        *ret = maj << 16 | min;
        return 0;
}

void parent_format(uint32_t parent, char buf[16]) {
        if (parent & 0xFFFF)
                snprintf(buf, 16, "%x:%x", parent >> 16, parent & 0xFFFF);
        else
                snprintf(buf, 16, "%x:", parent >> 16);
}

void classid_format(uint32_t classid, char buf[16]) {
        snprintf(buf, 16, "%x:%x", classid >> 16, classid & 0xFFFF);
}
