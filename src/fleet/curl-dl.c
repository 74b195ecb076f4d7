/* curl-dl.c: libcurl opened with dlopen() when the fleet starts (see curl-dl.h). */
#include <dlfcn.h>
#include <stddef.h>

#include "curl-dl.h"

CurlApi curl_api;

int curl_api_load(Error *reterr) {
        static const char *const libraries[] = { "libcurl-gnutls.so.4", "libcurl.so.4" };
        static const struct {
                const char *name;
                size_t offset;
        } symbols[] = {
                { "curl_global_init", offsetof(CurlApi, global_init) },
                { "curl_easy_init", offsetof(CurlApi, easy_init) },
                { "curl_easy_setopt", offsetof(CurlApi, easy_setopt) },
                { "curl_easy_getinfo", offsetof(CurlApi, easy_getinfo) },
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
        };
        static void *handle;
        CurlApi api;

        if (handle)
                return 0;
        void *h = NULL;
        for (size_t i = 0; !h && i < ELEMENTSOF(libraries); i++)
                h = dlopen(libraries[i], RTLD_NOW | RTLD_LOCAL);
        if (!h)
                return error_set(reterr, ENOENT, "internal_error",
                                 "--fleet needs libcurl (libcurl3-gnutls or libcurl4): %s", dlerror());
        for (size_t i = 0; i < ELEMENTSOF(symbols); i++) {
                void *f = dlsym(h, symbols[i].name);
                if (!f) {
                        dlclose(h);
                        return error_set(reterr, ENOENT, "internal_error", "libcurl has no %s",
                                         symbols[i].name);
                }
                *(void **) ((char *) &api + symbols[i].offset) = f;
        }
        curl_api = api;
        handle = h; /* kept open: its functions are called until exit */
        return 0;
}
