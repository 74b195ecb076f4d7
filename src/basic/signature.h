/* signature.h: objects signed with minisign or OpenBSD signify (Ed25519), verified against a directory
 * of trusted public keys (--trusted-keys). A signature is the tool's own file: signify's two lines, or
 * minisign's four (its trusted comment is signed too); minisign's prehashed form (BLAKE2b-512) as well. */
#pragma once

#include <stddef.h>

#include "error.h"

typedef struct TrustedKeys TrustedKeys;

/* Reads every "*.pub" of dir (minisign's or signify's public key file): -EINVAL with reterr for a
 * file that is not one, or a key id that two files hold. */
int trusted_keys_load(const char *dir, TrustedKeys **ret, Error *reterr);
TrustedKeys *trusted_keys_free(TrustedKeys *k);
size_t trusted_keys_count(const TrustedKeys *k);

/* 0 if sig (a signature file's text; NULL: none) signs data with a trusted key. Else -EPERM with
 * reterr: "object_unsigned" or "object_signature_invalid", the message naming what and why. */
int trusted_keys_verify(const TrustedKeys *k, const void *data, size_t size, const char *sig,
                        size_t sig_size, const char *what, Error *reterr);

/* Where a signature file for the object file path is looked for, in order. */
#define SIGNATURE_SUFFIXES ((const char *const[]){ ".minisig", ".sig", NULL })
