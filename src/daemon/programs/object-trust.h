/* object-trust.h: which stored objects a trusted key still verifies (object-trust.c). */
#pragma once

#include "manager.h"

/* Whether a trusted key verifies the stored object (data, its bytes): 1, or 0 and it is revoked in the
 * registry. */
int trust_object_check(Manager *m, const char *digest, const void *data, size_t size);
/* An upload's signature (sig, verified when it came) of the object it stores (data, its bytes): 1 if it
 * is to be stored beside it, 0 if the one stored already verifies and stays (it is not traded for
 * another), or <0 with why in reterr (the keys read again since it came do not verify it). An object
 * stored before --trusted-keys, or whose key was removed, is so signed by uploading it again. */
int trust_upload_signature(Manager *m, const char *digest, const void *data, size_t size, const char *sig,
                           size_t sig_size, Error *reterr);
/* The object is stored with a signature a trusted key verifies (an upload's, or the one it kept): trusted
 * again if it was revoked, and m->trust.on_trusted_again() told (its interfaces are composed again). */
void trust_object_signed(Manager *m, const char *digest);
/* --trusted-keys read again and every stored object checked against them: how many were revoked or
 * trusted again (their interfaces are to be composed again), or <0 (the keys in use stay). */
int trust_reload(Manager *m);
