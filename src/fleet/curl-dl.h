/* curl-dl.h: libcurl, opened only when clsd runs with --fleet. Linked, libcurl-gnutls brings 18 more
 * shared libraries to every start (8 ms of it here, most of them page faults); opened on demand, a clsd
 * without --fleet never maps them. Only the functions the fleet uses, called through curl_api. */
#pragma once

#include <curl/curl.h>

#include "error.h"

typedef struct CurlApi {
        CURLcode (*global_init)(long flags);
        CURL *(*easy_init)(void);
        CURLcode (*easy_setopt)(CURL *easy, CURLoption option, ...);
        CURLcode (*easy_getinfo)(CURL *easy, CURLINFO info, ...);
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
} CurlApi;

extern CurlApi curl_api;

/* Opens libcurl (libcurl-gnutls.so.4, else libcurl.so.4) once and fills curl_api. */
int curl_api_load(Error *reterr);
