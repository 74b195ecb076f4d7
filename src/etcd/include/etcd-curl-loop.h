/* etcd-curl-loop.h: libcurl's multi interface on an sd-event loop. */
#pragma once

#include <curl/curl.h>
#include <systemd/sd-event.h>

typedef struct CurlLoop CurlLoop;
/* A transfer ended (result CURLE_OK: the answer is complete); the handle is the caller's again. */
typedef void (*CurlDoneFunc)(CurlLoop *l, CURL *easy, CURLcode result, void *userdata);

int curl_loop_new(sd_event *event, CurlLoop **ret);
/* Transfers still running are dropped without their callbacks. */
CurlLoop *curl_loop_free(CurlLoop *l);
int curl_loop_add(CurlLoop *l, CURL *easy, CurlDoneFunc done, void *userdata);
/* Stops a running transfer without its callback (nothing if it is not running). */
void curl_loop_remove(CurlLoop *l, CURL *easy);
