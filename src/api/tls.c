/* tls.c: the TLS listener's certificate, key and client trust, over GnuTLS. */
#include "tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <gnutls/abstract.h>
#include <gnutls/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "log.h"

#define PEM_MAX (1024 * 1024)
#define CHAIN_MAX 16

/* One generation of the server's credentials. */
typedef struct Credentials {
        gnutls_pcert_st pcert[CHAIN_MAX];
        unsigned n_pcert;
        gnutls_privkey_t key;
        gnutls_x509_trust_list_t clients; /* NULL without --client-ca */
        struct Credentials *older; /* the generation before: kept until clsd exits */
} Credentials;

struct Tls {
        char *cert_file, *key_file, *client_ca_file;
        char *client_ca_pem;
        /* The one in use; the ones before stay (current->older…) until clsd exits: GnuTLS keeps the
         * pointers the callback gave a session for as long as the session lasts. */
        Credentials *current;
};

/* libmicrohttpd's callback carries no pointer of ours: the one TLS listener's. */
static Tls *the_tls;

static Credentials *credentials_free(Credentials *c) {
        if (!c)
                return NULL;
        for (unsigned i = 0; i < c->n_pcert; i++)
                gnutls_pcert_deinit(&c->pcert[i]);
        if (c->key)
                gnutls_privkey_deinit(c->key);
        if (c->clients)
                gnutls_x509_trust_list_deinit(c->clients, 1);
        free(c);
        return NULL;
}

static int read_pem(const char *what, const char *path, char **ret, size_t *ret_size, Error *reterr) {
        int r = read_regular_file(path, PEM_MAX, ret, ret_size);
        if (r < 0)
                return error_set(reterr, r, ERROR_INVALID_CONFIG, "%s %s: %s", what, path, strerror(-r));
        return 0;
}

static int credentials_load(const Tls *t, Credentials **ret, char **ret_ca_pem, Error *reterr) {
        _cleanup_free_ char *cert = NULL, *key = NULL, *ca = NULL;
        size_t cert_size, key_size, ca_size = 0;
        Credentials *c;
        gnutls_datum_t d;
        int r;

        if (read_pem("--tls-cert", t->cert_file, &cert, &cert_size, reterr) < 0 ||
            read_pem("--tls-key", t->key_file, &key, &key_size, reterr) < 0 ||
            (t->client_ca_file && read_pem("--client-ca", t->client_ca_file, &ca, &ca_size, reterr) < 0))
                return -EINVAL;
        if (!(c = calloc(1, sizeof(*c))))
                return error_oom(reterr);
        d = (gnutls_datum_t){ .data = (unsigned char *) cert, .size = (unsigned) cert_size };
        c->n_pcert = CHAIN_MAX;
        r = gnutls_pcert_list_import_x509_raw(c->pcert, &c->n_pcert, &d, GNUTLS_X509_FMT_PEM, 0);
        if (r < 0) {
                c->n_pcert = 0;
                credentials_free(c);
                return error_set(reterr, EINVAL, ERROR_INVALID_CONFIG, "--tls-cert %s: %s", t->cert_file,
                                 gnutls_strerror(r));
        }
        d = (gnutls_datum_t){ .data = (unsigned char *) key, .size = (unsigned) key_size };
        r = gnutls_privkey_init(&c->key);
        if (r < 0 || (r = gnutls_privkey_import_x509_raw(c->key, &d, GNUTLS_X509_FMT_PEM, NULL, 0)) < 0) {
                credentials_free(c);
                return error_set(reterr, EINVAL, ERROR_INVALID_CONFIG, "--tls-key %s: %s", t->key_file,
                                 gnutls_strerror(r));
        }
        /* the key must be the certificate's: a mismatch found now, not at a client's handshake */
        {
                gnutls_pubkey_t pub = NULL;
                gnutls_datum_t a = { 0 }, b = { 0 };
                bool same = gnutls_pubkey_init(&pub) >= 0 &&
                            gnutls_pubkey_import_privkey(pub, c->key, 0, 0) >= 0 &&
                            gnutls_pubkey_export2(pub, GNUTLS_X509_FMT_DER, &a) >= 0 &&
                            gnutls_pubkey_export2(c->pcert[0].pubkey, GNUTLS_X509_FMT_DER, &b) >= 0 &&
                            a.size == b.size && memcmp(a.data, b.data, a.size) == 0;
                gnutls_free(a.data);
                gnutls_free(b.data);
                if (pub)
                        gnutls_pubkey_deinit(pub);
                if (!same) {
                        credentials_free(c);
                        return error_set(reterr, EINVAL, ERROR_INVALID_CONFIG,
                                         "--tls-key %s is not the key of --tls-cert %s", t->key_file,
                                         t->cert_file);
                }
        }
        if (ca) {
                d = (gnutls_datum_t){ .data = (unsigned char *) ca, .size = (unsigned) ca_size };
                r = gnutls_x509_trust_list_init(&c->clients, 0);
                if (r < 0 || (r = gnutls_x509_trust_list_add_trust_mem(c->clients, &d, NULL,
                                                                       GNUTLS_X509_FMT_PEM, 0, 0)) <= 0) {
                        credentials_free(c);
                        return error_set(reterr, EINVAL, ERROR_INVALID_CONFIG, "--client-ca %s: %s",
                                         t->client_ca_file,
                                         r == 0 ? "no certificate in it" : gnutls_strerror(r));
                }
        }
        *ret = c;
        if (ret_ca_pem)
                *ret_ca_pem = TAKE_PTR(ca);
        return 0;
}

int tls_new(const char *cert_file, const char *key_file, const char *client_ca_file, Tls **ret,
            Error *reterr) {
        Tls *t = calloc(1, sizeof(*t));
        int r;

        if (!t || !(t->cert_file = strdup(cert_file)) || !(t->key_file = strdup(key_file)) ||
            (client_ca_file && !(t->client_ca_file = strdup(client_ca_file)))) {
                tls_free(t);
                return error_oom(reterr);
        }
        r = credentials_load(t, &t->current, &t->client_ca_pem, reterr);
        if (r < 0) {
                tls_free(t);
                return r;
        }
        the_tls = t;
        *ret = t;
        return 0;
}

Tls *tls_free(Tls *t) {
        if (!t)
                return NULL;
        if (the_tls == t)
                the_tls = NULL;
        while (t->current) {
                Credentials *older = t->current->older;
                credentials_free(t->current);
                t->current = older;
        }
        free(t->cert_file);
        free(t->key_file);
        free(t->client_ca_file);
        free(t->client_ca_pem);
        free(t);
        return NULL;
}

int tls_reload(Tls *t, Error *reterr) {
        Credentials *c = NULL;
        int r = credentials_load(t, &c, NULL, reterr);

        if (r < 0)
                return r;
        c->older = t->current;
        t->current = c;
        return 0;
}

const char *tls_client_ca_pem(const Tls *t) {
        return t->client_ca_pem;
}

int tls_retrieve_certificate(gnutls_session_t session, const gnutls_datum_t *req_ca_dn, int nreqs,
                             const gnutls_pk_algorithm_t *pk_algos, int pk_algos_length,
                             gnutls_pcert_st **pcert, unsigned int *pcert_length, gnutls_privkey_t *pkey) {
        (void) session, (void) req_ca_dn, (void) nreqs, (void) pk_algos, (void) pk_algos_length;
        if (!the_tls || !the_tls->current)
                return -1;
        /* GnuTLS neither frees nor changes these: they stay ours (and alive for a generation) */
        *pcert = the_tls->current->pcert;
        *pcert_length = the_tls->current->n_pcert;
        *pkey = the_tls->current->key;
        return 0;
}

static int sans_add(char ***v, size_t *n, const char *prefix, const char *value) {
        char **w = realloc(*v, (*n + 2) * sizeof(char *));
        if (!w)
                return -ENOMEM;
        *v = w;
        if (asprintf(&w[*n], "%s%s", prefix, value) < 0)
                return -ENOMEM;
        w[++*n] = NULL;
        return 0;
}

int tls_peer_certificate(Tls *t, gnutls_session_t session, char **ret_subject, char ***ret_sans,
                         char **ret_why) {
        const gnutls_datum_t *raw;
        unsigned n = 0, status = 0;
        gnutls_x509_crt_t crts[CHAIN_MAX] = { 0 };
        gnutls_datum_t dn = { 0 };
        char **sans = NULL;
        size_t n_sans = 0;
        int r = 0;

        *ret_why = NULL;
        *ret_subject = NULL;
        *ret_sans = NULL;
        raw = gnutls_certificate_get_peers(session, &n);
        if (!raw || n == 0 || !t->current->clients)
                return -ENOENT;
        n = n > CHAIN_MAX ? CHAIN_MAX : n;
        for (unsigned i = 0; i < n && r >= 0; i++)
                if ((r = gnutls_x509_crt_init(&crts[i])) >= 0)
                        r = gnutls_x509_crt_import(crts[i], &raw[i], GNUTLS_X509_FMT_DER);
        /* a client certificate, not a server's of the same CA (extended key usage) */
        gnutls_typed_vdata_st purpose = { .type = GNUTLS_DT_KEY_PURPOSE_OID,
                                          .data = (unsigned char *) GNUTLS_KP_TLS_WWW_CLIENT };
        if (r >= 0)
                r = gnutls_x509_trust_list_verify_crt2(t->current->clients, crts, n, &purpose, 1, 0, &status,
                                                       NULL);
        if (r < 0 || status != 0) {
                gnutls_datum_t out = { 0 };
                if (r >= 0 &&
                    gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &out, 0) >= 0) {
                        size_t l = strlen((char *) out.data);
                        while (l > 0 && out.data[l - 1] == ' ')
                                out.data[--l] = 0;
                        *ret_why = strdup((char *) out.data);
                } else
                        *ret_why = strdup(gnutls_strerror(r));
                gnutls_free(out.data);
                r = -EPERM;
                goto out;
        }
        if (gnutls_x509_crt_get_dn3(crts[0], &dn, 0) < 0 ||
            !(*ret_subject = strndup((char *) dn.data, dn.size))) {
                r = -ENOMEM;
                goto out;
        }
        for (unsigned i = 0;; i++) {
                char buf[1024];
                size_t size = sizeof(buf) - 1;
                unsigned critical;
                int type = gnutls_x509_crt_get_subject_alt_name(crts[0], i, buf, &size, &critical);
                char ip[INET6_ADDRSTRLEN];
                if (type == GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE)
                        break;
                if (type < 0)
                        continue;
                buf[size] = 0;
                r = 0;
                if (type == GNUTLS_SAN_DNSNAME)
                        r = sans_add(&sans, &n_sans, "DNS:", buf);
                else if (type == GNUTLS_SAN_RFC822NAME)
                        r = sans_add(&sans, &n_sans, "email:", buf);
                else if (type == GNUTLS_SAN_URI)
                        r = sans_add(&sans, &n_sans, "URI:", buf);
                else if (type == GNUTLS_SAN_IPADDRESS && (size == 4 || size == 16) &&
                         inet_ntop(size == 4 ? AF_INET : AF_INET6, buf, ip, sizeof(ip)))
                        r = sans_add(&sans, &n_sans, "IP:", ip);
                if (r < 0)
                        goto out;
        }
        if (!sans && !(sans = calloc(1, sizeof(char *)))) {
                r = -ENOMEM;
                goto out;
        }
        *ret_sans = TAKE_PTR(sans);
        r = 0;
out:
        if (r < 0 && *ret_subject) {
                free(*ret_subject);
                *ret_subject = NULL;
        }
        for (size_t i = 0; sans && sans[i]; i++)
                free(sans[i]);
        free(sans);
        gnutls_free(dn.data);
        for (unsigned i = 0; i < n; i++)
                if (crts[i])
                        gnutls_x509_crt_deinit(crts[i]);
        return r;
}
