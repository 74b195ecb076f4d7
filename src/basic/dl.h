/* dl.h: libcurl, and GnuTLS's base64, certificates and public keys, opened with dlopen() when first used
 * (clsd --fleet, a pull from a registry, a cosign key; clsctl's requests, src/ctl/http-client.c). Linked,
 * libcurl-gnutls brings 18 shared libraries to clsd's start; opened on demand, a clsd that talks to
 * neither etcd nor a registry never maps them. Only the functions used. */
#pragma once

#include <curl/curl.h>
#include <gnutls/gnutls.h>
#include <gnutls/abstract.h>
#include <gnutls/x509.h>

#include "error.h"

typedef struct CurlApi {
        CURLcode (*global_init)(long flags);
        CURL *(*easy_init)(void);
        CURLcode (*easy_setopt)(CURL *easy, CURLoption option, ...);
        CURLcode (*easy_getinfo)(CURL *easy, CURLINFO info, ...);
        CURLcode (*easy_perform)(CURL *easy);
        void (*easy_reset)(CURL *easy);
        void (*easy_cleanup)(CURL *easy);
        const char *(*easy_strerror)(CURLcode code);
        struct curl_slist *(*slist_append)(struct curl_slist *list, const char *s);
        void (*slist_free_all)(struct curl_slist *list);
        CURLM *(*multi_init)(void);
        CURLMcode (*multi_setopt)(CURLM *multi, CURLMoption option, ...);
        CURLMcode (*multi_add_handle)(CURLM *multi, CURL *easy);
        CURLMcode (*multi_remove_handle)(CURLM *multi, CURL *easy);
        CURLMcode (*multi_socket_action)(CURLM *multi, curl_socket_t fd, int ev_bitmask, int *running);
        CURLMsg *(*multi_info_read)(CURLM *multi, int *msgs_in_queue);
        CURLMcode (*multi_assign)(CURLM *multi, curl_socket_t fd, void *sockp);
        CURLMcode (*multi_cleanup)(CURLM *multi);
        char *(*easy_escape)(CURL *easy, const char *s, int length);
        void (*free)(void *p);
        CURLU *(*url)(void);
        CURLUcode (*url_set)(CURLU *u, CURLUPart part, const char *content, unsigned flags);
        CURLUcode (*url_get)(const CURLU *u, CURLUPart part, char **content, unsigned flags);
        void (*url_cleanup)(CURLU *u);
} CurlApi;

typedef struct GnutlsApi {
        int (*base64_encode2)(const gnutls_datum_t *data, gnutls_datum_t *result);
        int (*base64_decode2)(const gnutls_datum_t *b64_data, gnutls_datum_t *result);
        gnutls_free_function *free; /* GnuTLS's gnutls_free, a variable */
        int (*load_file)(const char *filename, gnutls_datum_t *data);
        int (*x509_crt_init)(gnutls_x509_crt_t *cert);
        int (*x509_crt_import)(gnutls_x509_crt_t cert, const gnutls_datum_t *data,
                               gnutls_x509_crt_fmt_t format);
        int (*x509_crt_get_dn_by_oid)(gnutls_x509_crt_t cert, const char *oid, unsigned indx,
                                      unsigned raw_flag, void *buf, size_t *buf_size);
        void (*x509_crt_deinit)(gnutls_x509_crt_t cert);
        int (*pubkey_init)(gnutls_pubkey_t *key);
        int (*pubkey_import)(gnutls_pubkey_t key, const gnutls_datum_t *data, gnutls_x509_crt_fmt_t format);
        int (*pubkey_get_pk_algorithm)(gnutls_pubkey_t key, unsigned *bits);
        int (*pubkey_verify_data2)(gnutls_pubkey_t key, gnutls_sign_algorithm_t algo, unsigned flags,
                                   const gnutls_datum_t *data, const gnutls_datum_t *signature);
        void (*pubkey_deinit)(gnutls_pubkey_t key);
        int (*privkey_init)(gnutls_privkey_t *key);
        int (*privkey_import_x509_raw)(gnutls_privkey_t pkey, const gnutls_datum_t *data,
                                       gnutls_x509_crt_fmt_t format, const char *password, unsigned flags);
        int (*privkey_get_pk_algorithm)(gnutls_privkey_t key, unsigned *bits);
        int (*privkey_sign_data2)(gnutls_privkey_t signer, gnutls_sign_algorithm_t algo, unsigned flags,
                                  const gnutls_datum_t *data, gnutls_datum_t *signature);
        void (*privkey_deinit)(gnutls_privkey_t key);
} GnutlsApi;

extern CurlApi curl_api;
extern GnutlsApi gnutls_api;

/* Opens libcurl (libcurl-gnutls.so.4, else libcurl.so.4) and GnuTLS once and fills both. */
int dl_load_curl(Error *reterr);
