/* daemon-objects.h: stored objects, and the host's links with every tc filter, clsd's and foreign */
#pragma once

#include "daemon.h"
#include "nl-bpf.h"

/* ---- objects ---- */
typedef struct DaemonObject {
        char digest[SHA256_DIGEST_STRING_MAX];
        size_t size;
        NlObjectInfo *info;
} DaemonObject;

/* Whether one more object (digest, size bytes) fits --max-objects and --max-objects-size (one stored
 * already always does): quota_exceeded (507) otherwise. */
int daemon_object_quota_check(Manager *m, const char *digest, size_t size, Error *reterr);
/* Inspected in a worker without privileges (a parser that crashes costs that worker, not clsd). With
 * trusted keys, sig (a minisign or signify signature file's text, or NULL) must sign the bytes first;
 * it is stored with the object. */
typedef void (*DaemonObjectDoneFunc)(Manager *m, const DaemonObject *o, bool created, const Error *e,
                                     void *userdata);
void daemon_object_add(Manager *m, const void *data, size_t size, const char *sig, size_t sig_size,
                       DaemonObjectDoneFunc done, void *userdata);
const DaemonObject *daemon_object_get(Manager *m, const char *digest);
size_t daemon_object_count(Manager *m);
const DaemonObject *daemon_object_at(Manager *m, size_t i);
/* Interfaces whose document uses the object, as a NULL-terminated array of borrowed names. */
int daemon_object_users(Manager *m, const char *digest, const char ***ret);
int daemon_object_remove(Manager *m, const char *digest, Error *reterr);

/* ---- the host's links, with every tc filter, clsd's and foreign ---- */
typedef struct LinkView {
        NlLink link;
        const NlFilter *filters;
        size_t n_filters;
} LinkView;

/* 404 netns_not_found for a named namespace that does not exist. */
/* From clsd's view of the namespace's links, kept by events (a dump only for what it has not seen);
 * sorted by ifindex. */
int daemon_links(Manager *m, const char *netns, LinkView **ret, size_t *ret_n, Error *reterr);
/* Changes with anything daemon_links() could show differently. */
uint64_t daemon_links_version(Manager *m);
/* Frees the views; a namespace that was only looked at (no document follows it) is let go. */
void daemon_links_done(Manager *m, const char *netns, LinkView *v);

/* The named namespaces: those in /run/netns and those documents name. */
typedef struct NetnsView {
        char name[NETNS_NAME_MAX + 1];
        bool present; /* in /run/netns */
        bool followed; /* clsd holds sockets in it (a document names it) */
        size_t documents;
} NetnsView;

int daemon_netns_list(Manager *m, NetnsView **ret, size_t *ret_n, Error *reterr);
