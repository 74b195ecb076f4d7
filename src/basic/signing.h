/* signing.h: signing with a secret key of minisign (made with -W: not encrypted) or OpenBSD signify
 * (made with -n), into a signature file's text that signature.h verifies against the public key. An
 * encrypted key is refused: clsctl asks for no passphrase (decrypt a copy for automation, or sign on a
 * machine that holds one so made). */
#pragma once

#include <stddef.h>

#include "error.h"

typedef struct SecretKey SecretKey;

/* -EINVAL with reterr: not such a key file, an encrypted one, a checksum that does not match. */
int secret_key_load(const char *path, SecretKey **ret, Error *reterr);
SecretKey *secret_key_free(SecretKey *k);
/* The text of a signature file (signify's two lines; comment on the first), malloc'ed. */
char *secret_key_sign(const SecretKey *k, const void *data, size_t size, const char *comment);
