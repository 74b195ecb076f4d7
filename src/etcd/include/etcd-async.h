/* etcd-async.h: an etcd client on an sd-event loop (async.c), beside the blocking one of etcd.h: calls
 * (a JSON POST, its answer to a callback) and one stream (a watch, its JSON lines to a callback), over
 * the endpoints in turn. Used by clsd --fleet. */
#pragma once

#include <systemd/sd-event.h>

#include "etcd.h"

typedef struct EtcdAsync EtcdAsync;

/* A call's answer: the JSON of a 200 (borrowed), or e. */
typedef void (*EtcdCallDone)(EtcdAsync *a, json_t *answer, const Error *e, void *userdata);
/* A stream's message (borrowed), from the loop; the stream may be stopped from here. */
typedef void (*EtcdStreamMessage)(EtcdAsync *a, json_t *msg, void *userdata);
/* The stream ended: why (etcd closed it, or the transfer failed). */
typedef void (*EtcdStreamEnd)(EtcdAsync *a, const char *why, void *userdata);

/* urls: "http://h:2379[,…]" (invalid_value if not; or a user's password file that cannot be read); libcurl
 * is opened. */
int etcd_async_new(sd_event *event, const char *urls, const EtcdCredentials *creds, EtcdAsync **ret,
                   Error *reterr);
/* Calls under way are dropped (their cancel, not their done, called). */
EtcdAsync *etcd_async_free(EtcdAsync *a);
/* The endpoint in use, and the next one in turn (after a failure). */
const char *etcd_async_endpoint(const EtcdAsync *a);
void etcd_async_next_endpoint(EtcdAsync *a);
/* contact is called whenever etcd answers (a call's 200, a stream's message): what a node counts as
 * reaching etcd. */
void etcd_async_set_contact(EtcdAsync *a, void (*contact)(void *userdata), void *userdata);
/* Requests made so far (a stream counts once; a call sent again counts again). */
uint64_t etcd_async_requests(const EtcdAsync *a);
/* A call etcd answers busy (etcd_overloaded: too many requests, no leader, a timeout on a connection
 * made) is sent again, to the endpoint then in use, for up to ETCD_BUSY_RETRY_USEC since it was first
 * asked; the client's calls are spaced meanwhile by a backoff that doubles from ETCD_BUSY_BACKOFF_MIN_USEC
 * up to the cap (drawn from its upper half, at least a Retry-After), each answer halving it. Only then
 * does the call fail with etcd_overloaded. The cap is the user's to size by the fleet (default
 * ETCD_BUSY_BACKOFF_MAX_USEC). The constants are etcd-transfer.h's, shared with the blocking client. */
void etcd_async_set_backoff_cap(EtcdAsync *a, uint64_t usec);
/* Busy answers so far, calls sent again, the spacing now (0: none). */
uint64_t etcd_async_busy_answers(const EtcdAsync *a);
uint64_t etcd_async_retries(const EtcdAsync *a);
uint64_t etcd_async_backoff_usec(const EtcdAsync *a);
/* The etcd user the client authenticates as (NULL: none). */
const char *etcd_async_user(const EtcdAsync *a);
/* Whether it holds a token (from the last authentication); forgotten when etcd no longer knows it. */
bool etcd_async_has_token(const EtcdAsync *a);
void etcd_async_forget_token(EtcdAsync *a);
/* Asks etcd for a token (the user's password checked, its file read again), which every later request
 * carries; done gets the answer or why not (etcd_auth_failed: a user or password etcd does not know). As
 * etcd_async_call(). */
int etcd_async_authenticate(EtcdAsync *a, EtcdCallDone done, void (*cancel)(void *), void *userdata);
/* POSTs body (taken) to path ("/v3/kv/put"); done gets the answer. cancel (may be NULL) is called with
 * userdata instead of done if the call is dropped. -ENOMEM: nothing is called. */
int etcd_async_call(EtcdAsync *a, const char *path, json_t *body, EtcdCallDone done, void (*cancel)(void *),
                    void *userdata);
/* Drops every call (each one's cancel called) and the stream. */
void etcd_async_cancel_all(EtcdAsync *a);
/* The stream: text (taken; JSON requests, one per line) POSTed to path, each line of the answer a
 * message; no overall timeout (TCP keepalive finds a dead peer). One at a time: a new one replaces it. */
int etcd_async_stream_start(EtcdAsync *a, const char *path, char *text, EtcdStreamMessage message,
                            EtcdStreamEnd end, void *userdata);
void etcd_async_stream_stop(EtcdAsync *a);
