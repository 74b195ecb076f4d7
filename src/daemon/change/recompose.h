/* recompose.h: an interface's filters composed again from its documents and a new set of policies, then
 * reconciled (recompose.c). */
#pragma once

#include "manager.h"
#include "daemon-changes.h"
#include "store-policy.h"

/* Queues, behind the interface's other changes, giving the interface (netns, ifname; made if new) the
 * policies v (references taken); done (may be NULL) is told how it ended: as any reconcile, a failure is
 * the interface's state, retried with a backoff, not a refusal. -ENOMEM: nothing queued. */
int recompose_queue(Manager *m, const char *netns, const char *ifname, Policy *const *v, size_t n,
                    DaemonDoneFunc done, void *userdata);
/* The interface composed again with the policies it has (what they use may have been revoked or come
 * back). */
void iface_recompose(Manager *m, Iface *it);
