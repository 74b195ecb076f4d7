/* access.h: who may do what. Roles (reader: reads, maps, metrics; operator: changes too), granted by
 * an access file (--access-file, strict JSON, reloaded on SIGHUP) to unix users and groups (the
 * socket's peer credentials), to named tokens (by their SHA-256, so the file holds no secret) and to
 * client certificates (subject or subject alternative name). */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "error.h"

typedef enum Role {
        ROLE_NONE,
        ROLE_READER,
        ROLE_OPERATOR,
} Role;

const char *role_to_string(Role r);

typedef struct AccessPolicy AccessPolicy;

int access_policy_load(const char *path, AccessPolicy **ret, Error *reterr);
AccessPolicy *access_policy_free(AccessPolicy *p);

/* The role of a unix peer: root is an operator; else the best a grant gives its uid or one of its
 * groups (gids: primary and supplementary). */
Role access_role_of_unix(const AccessPolicy *p, uid_t uid, const gid_t *gids, size_t n_gids);
/* The role a named token has (its name in *ret_name), compared in constant time: ROLE_NONE if none. */
Role access_role_of_token(const AccessPolicy *p, const char *token, const char **ret_name);
/* The role of a verified client certificate: its subject (RFC 4514) or one of its subject alternative
 * names ("DNS:…", "IP:…", "email:…", "URI:…"). */
Role access_role_of_certificate(const AccessPolicy *p, const char *subject, char *const *sans);
