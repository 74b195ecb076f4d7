/* names.c: the names clsd takes from its users for files and keys. */
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
