/* tls.h: HTTPS on --listen (libmicrohttpd over GnuTLS): the server's certificate and key, read again on
 * SIGHUP (handed to each handshake by a GnuTLS callback, so that reloading needs no restart), and with
 * --client-ca the client certificates verified against a trust list that is reloaded too. */
#pragma once

#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>

#include "error.h"

typedef struct Tls Tls;

int tls_new(const char *cert_file, const char *key_file, const char *client_ca_file, Tls **ret,
            Error *reterr);
Tls *tls_free(Tls *t);
/* Reads the files again; on failure the previous ones stay in use. */
int tls_reload(Tls *t, Error *reterr);
/* The PEM of the client CA as read at start (libmicrohttpd asks for client certificates when it has
 * one); NULL without --client-ca. */
const char *tls_client_ca_pem(const Tls *t);
/* The callback libmicrohttpd hands to GnuTLS (MHD_OPTION_HTTPS_CERT_CALLBACK). */
int tls_retrieve_certificate(gnutls_session_t session, const gnutls_datum_t *req_ca_dn, int nreqs,
                             const gnutls_pk_algorithm_t *pk_algos, int pk_algos_length,
                             gnutls_pcert_st **pcert, unsigned int *pcert_length, gnutls_privkey_t *pkey);

/* The client certificate of session, verified against --client-ca (chain, validity dates): 0 with its
 * subject (RFC 4514) and subject alternative names ("DNS:…", "IP:…", "email:…", "URI:…"; a
 * NULL-terminated list); -ENOENT when the client sent none; -EPERM with the reason in *ret_why when it
 * is not trusted. */
int tls_peer_certificate(Tls *t, gnutls_session_t session, char **ret_subject, char ***ret_sans,
                         char **ret_why);
