/* trust.h: which stored objects a trusted key still verifies (trust.c). */
#pragma once

#include "manager.h"

/* Whether a trusted key verifies the stored object (data, its bytes): 1, or 0 and it is revoked in the
 * registry. */
int trust_object_check(Manager *m, const char *digest, const void *data, size_t size);
/* --trusted-keys read again and every stored object checked against them: how many were revoked or
 * trusted again (their interfaces are to be composed again), or <0 (the keys in use stay). */
int trust_reload(Manager *m);
