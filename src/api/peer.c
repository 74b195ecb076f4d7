/* peer.c: an open connection's peer: who it is (an address over TCP; a uid with its groups on the unix
 * socket), its client certificate over TLS (verified once per connection and access generation). */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "http.h"
#include "tls.h"

/* The unix peer's primary group and its supplementary groups, which group grants count: SO_PEERGROUPS
 * says how much room they need (ERANGE) when 64 are not enough. */
static void peer_groups(Peer *p, gid_t primary) {
        socklen_t glen = 64 * sizeof(gid_t);

        for (int tries = 0; tries < 3; tries++) {
                gid_t *v = realloc(p->gids, sizeof(gid_t) + glen);
                if (!v)
                        break;
                p->gids = v;
                if (getsockopt(p->fd, SOL_SOCKET, SO_PEERGROUPS, p->gids + 1, &glen) == 0) {
                        p->gids[0] = primary;
                        p->n_gids = 1 + glen / sizeof(gid_t);
                        return;
                }
                if (errno != ERANGE)
                        break;
        }
        /* the primary group at least */
        if (p->gids || (p->gids = malloc(sizeof(gid_t)))) {
                p->gids[0] = primary;
                p->n_gids = 1;
        }
}

void peer_key(Peer *p, bool tcp) {
        struct sockaddr_storage sa;
        socklen_t len = sizeof(sa);
        struct ucred cred;
        socklen_t clen = sizeof(cred);
        char addr[INET6_ADDRSTRLEN] = "?";
        char *key = p->key;
        size_t size = sizeof(p->key);

        if (!tcp) {
                p->uid = (uid_t) -1;
                if (getsockopt(p->fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0) {
                        snprintf(key, size, "uid %u", (unsigned) cred.uid);
                        p->pid = cred.pid;
                        p->uid = cred.uid;
                        peer_groups(p, cred.gid);
                } else
                        snprintf(key, size, "uid ?");
                return;
        }
        if (getpeername(p->fd, (struct sockaddr *) &sa, &len) == 0) {
                if (sa.ss_family == AF_INET)
                        inet_ntop(AF_INET, &((struct sockaddr_in *) &sa)->sin_addr, addr, sizeof(addr));
                else if (sa.ss_family == AF_INET6)
                        inet_ntop(AF_INET6, &((struct sockaddr_in6 *) &sa)->sin6_addr, addr, sizeof(addr));
        }
        snprintf(key, size, "ip %s", addr);
}

void peer_forget_certificate(Peer *p) {
        for (size_t i = 0; p->sans && p->sans[i]; i++)
                free(p->sans[i]);
        free(p->sans);
        free(p->subject);
        free(p->cert_why);
        p->sans = NULL;
        p->subject = p->cert_why = NULL;
        p->cert_generation = 0;
}

/* The peer's client certificate, verified once per connection (and again after a reload). */
void peer_check_certificate(Peer *p, struct MHD_Connection *c) {
        Api *a = p->listener->api;
        const union MHD_ConnectionInfo *info;

        if (p->cert_generation == a->access_generation)
                return;
        peer_forget_certificate(p);
        p->cert_generation = a->access_generation;
        info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
        p->cert_r = info && info->tls_session ? tls_peer_certificate(a->tls, info->tls_session, &p->subject,
                                                                     &p->sans, &p->cert_why)
                                              : -ENOENT;
}

Peer *connection_peer(struct MHD_Connection *c) {
        const union MHD_ConnectionInfo *info =
                MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        return info ? info->socket_context : NULL;
}
