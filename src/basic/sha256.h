/* sha256.h: content-addressed object digests ("sha256:<hex>"), hashed by nettle (GnuTLS's hashes). */
#pragma once

#include <stddef.h>

#define SHA256_DIGEST_SIZE 32
/* "sha256:" + 64 hex + NUL */
#define SHA256_DIGEST_STRING_MAX (7 + 64 + 1)

/* Writes "sha256:<64 lowercase hex>" into out. */
void sha256_digest_string(const void *data, size_t size, char out[SHA256_DIGEST_STRING_MAX]);
/* 1 if s looks like "sha256:<64 lowercase hex>". */
int sha256_digest_string_valid(const char *s);
