/* sha256.h: SHA-256 (FIPS 180-4), for content-addressed object digests. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define SHA256_DIGEST_SIZE 32
/* "sha256:" + 64 hex + NUL */
#define SHA256_DIGEST_STRING_MAX (7 + 64 + 1)

typedef struct Sha256 {
        uint32_t h[8];
        uint64_t length;
        uint8_t buf[64];
        size_t used;
} Sha256;

void sha256_init(Sha256 *s);
void sha256_update(Sha256 *s, const void *data, size_t size);
void sha256_final(Sha256 *s, uint8_t out[SHA256_DIGEST_SIZE]);
/* Writes "sha256:<64 lowercase hex>" into out. */
void sha256_digest_string(const void *data, size_t size, char out[SHA256_DIGEST_STRING_MAX]);
/* 1 if s looks like "sha256:<64 lowercase hex>". */
int sha256_digest_string_valid(const char *s);
