/* oci-ref.c: OCI references parsed and written back (oci-ref.h). */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "oci-ref.h"

static int bad(Error *reterr, const char *s, const char *why) {
        return error_set(reterr, EINVAL, ERROR_INVALID_VALUE, "object %s: %s", s, why);
}

/* host[:port], a name of letters, digits, '.' and '-', or [IPv6]:port */
static bool registry_valid(const char *r, size_t n) {
        size_t i = 0;

        if (n == 0)
                return false;
        if (r[0] == '[') {
                while (i < n && r[i] != ']')
                        i++;
                if (i == n)
                        return false;
                i++;
        } else {
                for (; i < n && r[i] != ':'; i++)
                        if (!isalnum((unsigned char) r[i]) && r[i] != '.' && r[i] != '-')
                                return false;
                if (i == 0)
                        return false;
        }
        if (i == n)
                return true;
        if (r[i] != ':' || i + 1 == n || n - i - 1 > 5)
                return false;
        for (i++; i < n; i++)
                if (!isdigit((unsigned char) r[i]))
                        return false;
        return true;
}

/* Path components of lowercase letters and digits, joined inside by '.', '_', '__' or '-'s. */
static bool repository_valid(const char *p) {
        bool start = true;

        for (; *p; p++) {
                if (islower((unsigned char) *p) || isdigit((unsigned char) *p)) {
                        start = false;
                        continue;
                }
                if (start)
                        return false;
                if (*p == '/')
                        start = true;
                else if (*p == '.' || *p == '_' || *p == '-') {
                        if (!(islower((unsigned char) p[1]) || isdigit((unsigned char) p[1]) ||
                              p[1] == '_' || p[1] == '-'))
                                return false;
                } else
                        return false;
        }
        return !start;
}

static bool tag_valid(const char *t) {
        size_t n = strlen(t);

        if (n == 0 || n > 128 || !(isalnum((unsigned char) t[0]) || t[0] == '_'))
                return false;
        for (size_t i = 1; i < n; i++)
                if (!isalnum((unsigned char) t[i]) && t[i] != '_' && t[i] != '.' && t[i] != '-')
                        return false;
        return true;
}

int oci_ref_parse(const char *s, OciRef *ret, Error *reterr) {
        const char *rest = startswith(s, OCI_REF_PREFIX), *slash, *at;
        char name[512];
        char *colon;
        OciRef r = { 0 };

        if (!rest)
                return bad(reterr, s, "expected oci://REGISTRY/REPOSITORY[:TAG][@sha256:DIGEST]");
        if (strlen(s) > OCI_REF_MAX)
                return bad(reterr, s, "longer than 512 characters");
        slash = strchr(rest, '/');
        if (!slash || !registry_valid(rest, slash - rest) || (size_t) (slash - rest) >= sizeof(r.registry))
                return bad(reterr, s, "expected a registry (host[:port]) before the first '/'");
        memcpy(r.registry, rest, slash - rest);
        at = strchr(slash + 1, '@');
        if (at) {
                if (!sha256_digest_string_valid(at + 1))
                        return bad(reterr, s, "expected @sha256:<64 lowercase hex> after '@'");
                snprintf(r.digest, sizeof(r.digest), "%s", at + 1);
        }
        snprintf(name, sizeof(name), "%.*s", (int) ((at ?: slash + strlen(slash)) - slash - 1), slash + 1);
        /* a tag follows the last ':' that comes after the last '/' */
        colon = strrchr(name, ':');
        if (colon && !strchr(colon, '/')) {
                if (!tag_valid(colon + 1))
                        return bad(reterr, s,
                                   "a tag is 1 to 128 of [A-Za-z0-9_.-], not starting with '.' or '-'");
                snprintf(r.tag, sizeof(r.tag), "%s", colon + 1);
                *colon = 0;
        }
        if (strlen(name) >= sizeof(r.repository) || !repository_valid(name))
                return bad(reterr, s,
                           "a repository is '/'-separated components of [a-z0-9] joined by '.', '_' or '-'");
        snprintf(r.repository, sizeof(r.repository), "%s", name);
        if (!r.tag[0] && !r.digest[0])
                return bad(reterr, s, "name a tag (:TAG) or a manifest digest (@sha256:DIGEST)");
        *ret = r;
        return 0;
}

int oci_ref_pinned(const OciRef *r, const char *digest, char **ret) {
        return asprintf(ret, OCI_REF_PREFIX "%s/%s%s%s@%s", r->registry, r->repository, r->tag[0] ? ":" : "",
                        r->tag, digest) < 0
                       ? -ENOMEM
                       : 0;
}
