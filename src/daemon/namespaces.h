/* namespaces.h: the network namespaces clsd follows: its own, and the named ones (/run/netns/NAME) that
 * documents name, each with a request socket and an event socket inside it. A named namespace that is
 * clsd's own (the same inode) is recognised as such. */
#pragma once

#include <systemd/sd-event.h>

#include "nl.h"

typedef struct NetnsSet NetnsSet;
typedef struct Netns Netns;

/* Called with each message of a namespace's events (RTNLGRP_LINK, RTNLGRP_TC); name NULL: clsd's own.
 * lost: the kernel dropped events (ENOBUFS), so everything there must be looked at again. */
typedef void (*NetnsEventFunc)(const char *name, const struct nlmsghdr *nlh, bool lost, void *userdata);
/* A named namespace appeared (it can be followed now) or went. */
typedef void (*NetnsChangeFunc)(const char *name, bool present, void *userdata);

int netns_set_new(sd_event *event, const char *dir, NetnsEventFunc on_event, NetnsChangeFunc on_change,
                  void *userdata, NetnsSet **ret, Error *reterr);
NetnsSet *netns_set_free(NetnsSet *s);
/* Starts the events of clsd's own namespace and watching the directory. */
int netns_set_start(NetnsSet *s, Error *reterr);
/* The request socket of a namespace (NULL: clsd's own), following a named one if needed: -ENOENT when
 * the directory has no such namespace, -EAGAIN while it is only being created. */
int netns_set_rtnl(NetnsSet *s, const char *name, NlSocket **ret, Error *reterr);
/* Like netns_set_rtnl() for a namespace already followed only (no new one), or NULL. */
NlSocket *netns_set_rtnl_followed(NetnsSet *s, const char *name);
bool netns_set_follows(NetnsSet *s, const char *name);
/* Handles the namespace's events queued so far, now: a read after a change sees it (netlink queues the
 * notification before the change returns). */
void netns_set_drain(NetnsSet *s, const char *name);
/* Enters the namespace for a call that acts on the caller's (bpf(2) for tcx); -1 in *ret_saved for
 * clsd's own (or a named one that is clsd's own). */
int netns_set_enter(NetnsSet *s, const char *name, int *ret_saved, Error *reterr);
/* Whether the named namespace is clsd's own (the same namespace under a name). */
bool netns_set_is_own(NetnsSet *s, const char *name);
/* Stops following a named namespace (nothing names it any more, or it went). */
void netns_set_release(NetnsSet *s, const char *name);
/* Lets go of followed namespaces that went (their name points elsewhere or nowhere); calls on_change
 * for each. */
void netns_set_sweep(NetnsSet *s);
/* A namespace was only being made (-EAGAIN): looks again shortly (a bounded number of times). */
void netns_set_rescan(NetnsSet *s);
/* The names of the namespaces in the directory that can be opened. */
int netns_set_list_present(NetnsSet *s, char ***ret, size_t *ret_n);
