/* etcd-transfer.h: one request to etcd's gateway as libcurl makes it (transfer.c), shared by the
 * blocking client and the one on an event loop. */
#pragma once

#include <curl/curl.h>

#include "etcd.h"

/* an answer beyond any etcd request limit is refused */
#define ETCD_ANSWER_MAX (64u * 1024 * 1024)
/* A busy etcd (ERROR_ETCD_OVERLOADED) is asked again for up to ETCD_BUSY_RETRY_USEC, the pauses between
 * doubling from ETCD_BUSY_BACKOFF_MIN_USEC to ETCD_BUSY_BACKOFF_MAX_USEC: by both clients. */
#define ETCD_BUSY_RETRY_USEC (60 * 1000000ULL)
#define ETCD_BUSY_BACKOFF_MIN_USEC (100 * 1000ULL)
#define ETCD_BUSY_BACKOFF_MAX_USEC (8 * 1000000ULL)
#define ETCD_CALL_TIMEOUT_MS 10000L
/* A login waits its turn: etcd checks its password with bcrypt (tens of ms of its CPU each), so a fleet
 * that logs in at once is a queue of them, and a login given up after 10 s and asked again costs etcd one
 * more while the first is still done (a storm of logins that never ends: 1,000 nodes started at once on
 * one member did not register within 2 minutes). */
#define ETCD_LOGIN_TIMEOUT_MS 120000L

/* Sets easy up to POST body (JSON) to url with the TLS files of creds (may be NULL) and an
 * authentication token (NULL: none); *headers made if NULL (the caller frees them after the transfer).
 * With answer, the answer is read into it (up to ETCD_ANSWER_MAX) and the transfer times out after
 * ETCD_CALL_TIMEOUT_MS (a login, /v3/auth/authenticate, after ETCD_LOGIN_TIMEOUT_MS); without, the
 * caller reads it (a stream). */
int etcd_transfer_setup(CURL *easy, const char *url, const char *body, const EtcdCredentials *creds,
                        const char *token, struct curl_slist **headers, EtcdBuffer *answer);
/* What a finished transfer to url answered: the JSON of a 200 (*ret), or why not: etcd_unreachable
 * (EHOSTUNREACH: no connection), etcd_overloaded (EAGAIN: etcd busy, between leaders, or no answer in
 * time on a connection made), an answer over the limit, the gateway's error (EACCES, EKEYEXPIRED:
 * etcd_answer_error()'s), an answer that is not JSON. */
int etcd_transfer_answer(CURL *easy, CURLcode result, const EtcdBuffer *b, const char *url, json_t **ret,
                         Error *reterr);
/* The longest Retry-After taken from an answer: a longer one is a mistake, not a plan. */
#define ETCD_RETRY_AFTER_MAX_S 120
/* An answer's Retry-After, in µs (0: none). */
uint64_t etcd_transfer_retry_after_usec(CURL *easy);
/* "http://h:2379[,https://h2:2379…]" as a list of endpoints: invalid_value if none, or one is not an
 * http:// or https:// URL. */
int etcd_endpoints_parse(const char *urls, char ***ret, size_t *ret_n, Error *reterr);
