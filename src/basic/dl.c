/* dl.c: libcurl and GnuTLS opened with dlopen() when etcd or a registry is first talked to (see dl.h). */
#include <dlfcn.h>
#include <stdbool.h>
#include <stddef.h>

#include "dl.h"

CurlApi curl_api;
GnutlsApi gnutls_api;

typedef struct Symbol {
        const char *name;
        size_t offset;
} Symbol;

/* The first of libraries that opens, its symbols into api; kept open (called until exit). */
static int open_one(const char *const *libraries, size_t n_libraries, const Symbol *symbols,
                    size_t n_symbols, void *api, Error *reterr) {
        void *h = NULL;

        for (size_t i = 0; !h && i < n_libraries; i++)
                h = dlopen(libraries[i], RTLD_NOW | RTLD_LOCAL);
        if (!h)
                return error_set(
                        reterr, ENOENT, ERROR_INTERNAL_ERROR,
                        "talking to etcd or a registry needs libcurl (libcurl3-gnutls) and GnuTLS: %s",
                        dlerror());
        for (size_t i = 0; i < n_symbols; i++) {
                void *f = dlsym(h, symbols[i].name);
                if (!f) {
                        dlclose(h);
                        return error_set(reterr, ENOENT, ERROR_INTERNAL_ERROR, "%s has no %s", libraries[0],
                                         symbols[i].name);
                }
                *(void **) ((char *) api + symbols[i].offset) = f;
        }
        return 0;
}

int dl_load_curl(Error *reterr) {
        static const char *const curl_libraries[] = { "libcurl-gnutls.so.4", "libcurl.so.4" };
        static const char *const gnutls_libraries[] = { "libgnutls.so.30" };
        static const Symbol curl_symbols[] = {
                { "curl_global_init", offsetof(CurlApi, global_init) },
                { "curl_easy_init", offsetof(CurlApi, easy_init) },
                { "curl_easy_setopt", offsetof(CurlApi, easy_setopt) },
                { "curl_easy_getinfo", offsetof(CurlApi, easy_getinfo) },
                { "curl_easy_perform", offsetof(CurlApi, easy_perform) },
                { "curl_easy_reset", offsetof(CurlApi, easy_reset) },
                { "curl_easy_cleanup", offsetof(CurlApi, easy_cleanup) },
                { "curl_easy_strerror", offsetof(CurlApi, easy_strerror) },
                { "curl_slist_append", offsetof(CurlApi, slist_append) },
                { "curl_slist_free_all", offsetof(CurlApi, slist_free_all) },
                { "curl_multi_init", offsetof(CurlApi, multi_init) },
                { "curl_multi_setopt", offsetof(CurlApi, multi_setopt) },
                { "curl_multi_add_handle", offsetof(CurlApi, multi_add_handle) },
                { "curl_multi_remove_handle", offsetof(CurlApi, multi_remove_handle) },
                { "curl_multi_socket_action", offsetof(CurlApi, multi_socket_action) },
                { "curl_multi_info_read", offsetof(CurlApi, multi_info_read) },
                { "curl_multi_assign", offsetof(CurlApi, multi_assign) },
                { "curl_multi_cleanup", offsetof(CurlApi, multi_cleanup) },
                { "curl_easy_escape", offsetof(CurlApi, easy_escape) },
                { "curl_free", offsetof(CurlApi, free) },
                { "curl_url", offsetof(CurlApi, url) },
                { "curl_url_set", offsetof(CurlApi, url_set) },
                { "curl_url_get", offsetof(CurlApi, url_get) },
                { "curl_url_cleanup", offsetof(CurlApi, url_cleanup) },
        };
        static const Symbol gnutls_symbols[] = {
                { "gnutls_base64_encode2", offsetof(GnutlsApi, base64_encode2) },
                { "gnutls_base64_decode2", offsetof(GnutlsApi, base64_decode2) },
                { "gnutls_free", offsetof(GnutlsApi, free) },
                { "gnutls_load_file", offsetof(GnutlsApi, load_file) },
                { "gnutls_x509_crt_init", offsetof(GnutlsApi, x509_crt_init) },
                { "gnutls_x509_crt_import", offsetof(GnutlsApi, x509_crt_import) },
                { "gnutls_x509_crt_get_dn_by_oid", offsetof(GnutlsApi, x509_crt_get_dn_by_oid) },
                { "gnutls_x509_crt_deinit", offsetof(GnutlsApi, x509_crt_deinit) },
                { "gnutls_pubkey_init", offsetof(GnutlsApi, pubkey_init) },
                { "gnutls_pubkey_import", offsetof(GnutlsApi, pubkey_import) },
                { "gnutls_pubkey_get_pk_algorithm", offsetof(GnutlsApi, pubkey_get_pk_algorithm) },
                { "gnutls_pubkey_verify_data2", offsetof(GnutlsApi, pubkey_verify_data2) },
                { "gnutls_pubkey_deinit", offsetof(GnutlsApi, pubkey_deinit) },
                { "gnutls_privkey_init", offsetof(GnutlsApi, privkey_init) },
                { "gnutls_privkey_import_x509_raw", offsetof(GnutlsApi, privkey_import_x509_raw) },
                { "gnutls_privkey_get_pk_algorithm", offsetof(GnutlsApi, privkey_get_pk_algorithm) },
                { "gnutls_privkey_sign_data2", offsetof(GnutlsApi, privkey_sign_data2) },
                { "gnutls_privkey_deinit", offsetof(GnutlsApi, privkey_deinit) },
        };
        static bool loaded;
        CurlApi c = { 0 };
        GnutlsApi g = { 0 };

        if (loaded)
                return 0;
        if (open_one(gnutls_libraries, ELEMENTSOF(gnutls_libraries), gnutls_symbols,
                     ELEMENTSOF(gnutls_symbols), &g, reterr) < 0 ||
            open_one(curl_libraries, ELEMENTSOF(curl_libraries), curl_symbols, ELEMENTSOF(curl_symbols), &c,
                     reterr) < 0)
                return -ENOENT;
        curl_api = c;
        gnutls_api = g;
        /* once, before any thread (a pull's) uses libcurl */
        if (curl_api.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
                return error_set(reterr, ENOMEM, ERROR_INTERNAL_ERROR, "libcurl cannot start");
        loaded = true;
        return 0;
}
