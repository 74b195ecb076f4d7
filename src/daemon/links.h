/* links.h: each followed namespace's links and their tc filters as clsd last saw them, kept current by
 * rtnetlink events: what reads are served from. */
#pragma once

#include "nl.h"

typedef struct Links Links;

typedef struct LinkEntry {
        NlLink link;
        NlFilter *filters; /* every tc filter of the link, clsd's and foreign */
        size_t n_filters;
        bool filters_known; /* dumped, and no tc event about the link since */
        /* Whether it has a clsact (or ingress) qdisc, known from a qdisc dump or from seeing the link
         * appear, with no tc event about the link since. */
        bool hooks_known;
        bool has_hooks;
} LinkEntry;

int links_new(Links **ret);
/* Changes with anything a read of the links could show (an event, a dump, a namespace let go). */
uint64_t links_version(const Links *l);
Links *links_free(Links *l);
/* An event of a namespace clsd follows (NULL: its own): a link came, changed or went; a tc event makes
 * the link's filters (an action's: every link's) to be read again at the next look. */
void links_on_event(Links *l, const char *netns, const struct nlmsghdr *nlh);
/* Events were lost: the next look dumps again. */
void links_lost(Links *l, const char *netns);
/* The namespace is not followed any more (no events come): nothing of it is kept. */
void links_forget(Links *l, const char *netns);
/* The namespace's links, sorted by ifindex (with every link's filters if with_filters), dumping only
 * what is not known yet. Valid until the next event or call. */
int links_get(Links *l, NlSocket *rtnl, const char *netns, bool with_filters, const LinkEntry **ret,
              size_t *ret_n, Error *reterr);
/* Whether the namespace's links were dumped and are followed since. */
bool links_known(Links *l, const char *netns);
/* Whether the link is known to have no clsact (or ingress) qdisc, and so no filter on a clsact hook.
 * Asks the kernel (one dump of the namespace's qdiscs, for every link not known) only when this link
 * is not known; false when that fails. */
bool links_hooks_absent(Links *l, NlSocket *rtnl, const char *netns, int ifindex);
/* A link of a namespace already looked at, by name (its name index), or NULL. */
const NlLink *links_find_name(Links *l, const char *netns, const char *ifname);
/* A link of a namespace already looked at, or NULL. */
const NlLink *links_find(Links *l, const char *netns, int ifindex);
