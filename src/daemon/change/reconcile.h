/* reconcile.h: one reconciler for every attach kind (reconcile.c). */
#pragma once

#include "attach.h"
#include "manager.h"

/* One reconcile of the interface (any reason): observe, acquire programs (adopting), plan, apply,
 * verify. -EAGAIN when programs are being loaded (the request runs again when they are in). */
int iface_reconcile(Manager *m, Iface *it, Error *reterr);
/* One reconcile, its outcome made the interface's state (logged, counted, told to listeners): 0,
 * -EAGAIN (programs are being loaded), or <0 (failed: the caller retries after a backoff). */
int iface_reconcile_and_report(Manager *m, Iface *it);
/* What is trusted stands, the rest was removed, and stays so until a key that signed it comes back
 * (SIGHUP): an interface with objects no key trusts any more is failed (object_untrusted, logged and
 * counted once), not retried. Returns whether it was. */
bool iface_report_untrusted(Manager *m, Iface *it);
/* The queue's process function. */
int reconcile_process_request(Manager *m, ReconcileRequest *r);
/* Acquires every program of target's filters: 0, -EAGAIN (loads started; resume's work goes on when they
 * are in), or a load's failure. The filters' observed facts say what may be adopted. */
int iface_acquire_programs(Manager *m, Iface *target, Iface *resume, Error *reterr);
/* Puts back what the snapshot held after what (a change, a reconcile that applies an interface whole)
 * failed for why (logged), through ctx; the filters' facts of it read back. A rollback that fails too
 * fails it (kernel_error), for all to see. */
void iface_rollback(Manager *m, Iface *it, AttachContext *ctx, const AttachSnapshot *snap, const char *what,
                    const Error *why);
/* Everything of clsd's goes from the interface (its filters, its tcx links, the clsact it created). */
int iface_remove_all(Manager *m, Iface *it, NlSocket *rtnl, Error *reterr);
/* One device, one owner: an interface of a named namespace that is clsd's own names the device of its
 * own namespace's interface of that name (netns NULL: the other way round). device_taken if one of
 * them is declared already. */
int iface_check_owner(Manager *m, const char *netns, const char *ifname, Error *reterr);
