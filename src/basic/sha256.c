/* sha256.c: object digests over libsodium's SHA-256 (the library that also verifies signed objects). */
#include "sha256.h"

#include <sodium.h>
#include <string.h>

void sha256_digest_string(const void *data, size_t size, char out[SHA256_DIGEST_STRING_MAX]) {
        unsigned char d[crypto_hash_sha256_BYTES];

        crypto_hash_sha256(d, data, size);
        memcpy(out, "sha256:", 7);
        sodium_bin2hex(out + 7, SHA256_DIGEST_STRING_MAX - 7, d, sizeof(d));
}

int sha256_digest_string_valid(const char *s) {
        if (strncmp(s, "sha256:", 7) != 0 || strlen(s) != 7 + 64)
                return 0;
        for (const char *p = s + 7; *p; p++)
                if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
                        return 0;
        return 1;
}
