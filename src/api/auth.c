/* auth.c: who a request is from and what it may do: on the unix socket its credentials, over TCP a
 * verified client certificate and a bearer token (the better role of the two), refused with 401 or 403
 * before its body is read. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "access.h"
#include "http.h"
#include "tls.h"

static bool token_matches(const char *want, const char *got) {
        size_t a = strlen(want), b = strlen(got);
        unsigned char diff = a != b;

        /* Constant time in the token's length, so the comparison does not leak a prefix. */
        for (size_t i = 0; i < a; i++)
                diff |= (unsigned char) want[i] ^ (unsigned char) (i < b ? got[i] : 0);
        return diff == 0;
}

/* Who the request is from (req->who, for the audit), and the role that gives it: on the unix socket its
 * credentials; over TCP a verified client certificate and a bearer token, the better of the two. */
void request_identify(Request *req, Peer *p) {
        Api *a = req->api;
        Listener *l = req->listener;
        const char *h = request_header(req, "Authorization"), *token_name = NULL;
        char cert[160] = "";
        Role role = ROLE_NONE;

        if (!p) {
                snprintf(req->who, sizeof(req->who), "an unknown peer");
                return;
        }
        if (!l->tcp) {
                req->role = a->access ? access_role_of_unix(a->access, p->uid, p->gids, p->n_gids)
                                      : ROLE_OPERATOR;
                snprintf(req->who, sizeof(req->who), "%s pid %d (unix socket)", p->key, (int) p->pid);
                return;
        }
        if (l->tls && a->tls) {
                peer_check_certificate(p, req->connection);
                if (p->cert_r == 0) {
                        req->authenticated = true;
                        role = a->access ? access_role_of_certificate(a->access, p->subject, p->sans)
                                         : ROLE_OPERATOR;
                        snprintf(cert, sizeof(cert), " with certificate \"%.120s\"", p->subject);
                }
        }
        if (h && strncasecmp(h, "Bearer ", 7) == 0) { /* the scheme is case-insensitive (RFC 9110 11.1) */
                Role t = ROLE_NONE;
                if (a->token && token_matches(a->token, h + 7)) {
                        t = ROLE_OPERATOR;
                        token_name = "the token of --token-file";
                } else if (a->access &&
                           (t = access_role_of_token(a->access, h + 7, &token_name)) == ROLE_NONE)
                        token_name = NULL;
                req->bad_token = t == ROLE_NONE;
                req->authenticated = req->authenticated || t != ROLE_NONE;
                role = role > t ? role : t;
        }
        req->role = role;
        snprintf(req->who, sizeof(req->who), "%s%s%s%s%s (%s)", p->key + 3, cert, token_name ? " with " : "",
                 token_name && !streq(token_name, "the token of --token-file") ? "token " : "",
                 token_name ? token_name : (cert[0] ? "" : " without the token"), l->tls ? "TLS" : "TCP");
}

/* Whether the request may go on; if not, its 401 or 403 answer in resp. A reader may read, an operator
 * change too. Without an access file, the unix socket is its file mode's, and a loopback TCP listener
 * serves reads to anyone, as before roles. */
bool request_allowed(Request *req, Response *resp) {
        Api *a = req->api;
        Listener *l = req->listener;
        bool change = method_changes_state(req->method);
        Role need = change ? ROLE_OPERATOR : ROLE_READER;
        Peer *p = connection_peer(req->connection);

        if (req->bad_token && !l->metrics_only) { /* a wrong token is said, whatever else authenticated */
                response_errorf(resp, ERROR_UNAUTHORIZED, "the bearer token is not one clsd knows");
                return false;
        }
        if (l->metrics_only || (!change && streq(req->url, "/healthz")) || req->role >= need)
                return true;
        if (!change && l->tcp && !a->access && l->loopback && !req->bad_token)
                return true;
        if (l->tcp && !req->authenticated) {
                if (p && p->cert_r == -EPERM)
                        response_errorf(resp, ERROR_UNAUTHORIZED,
                                        "the client certificate is not trusted (--client-ca): %s",
                                        strna(p->cert_why));
                else
                        response_errorf(resp, ERROR_UNAUTHORIZED,
                                        "%s over TCP needs \"Authorization: Bearer <token>\"%s%s",
                                        change ? "a change" : "a read",
                                        a->tls && tls_client_ca_pem(a->tls) ? " or a client certificate"
                                                                            : "",
                                        req->bad_token ? "; the token given is not one clsd knows" : "");
                return false;
        }
        response_errorf(resp, ERROR_FORBIDDEN, "%s %s needs the %s role; %s has %s", req->method, req->url,
                        role_to_string(need), req->who,
                        req->role == ROLE_NONE ? "no role (--access-file)" : "the reader role");
        return false;
}
