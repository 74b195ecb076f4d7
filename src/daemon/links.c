/* links.c: the links of each followed namespace and their tc filters (clsd's and foreign), as clsd last
 * saw them. A namespace's links are dumped once, on first need, and then kept current by RTNLGRP_LINK
 * events; a link's filters are dumped on first need and again only after a tc event about that link.
 * Reads (GET /ifaces, policies matching links) are served from here, not from a dump per request;
 * lost events forget the namespace's view, so that the next read looks again. */
#include <linux/rtnetlink.h>
#include <stdlib.h>
#include <string.h>

#include "hashmap.h"
#include "links.h"
#include "log.h"

/* A name of the namespace's links, for finding one by name (the key lives in it). */
typedef struct LinkName {
        char name[IF_NAMESIZE];
        int ifindex;
} LinkName;

typedef struct LinksNs {
        char *netns; /* NULL: clsd's own */
        bool known; /* links dumped and followed since */
        LinkEntry *v; /* by ifindex */
        size_t n, cap;
        Hashmap *by_name; /* name -> LinkName */
} LinksNs;

struct Links {
        LinksNs **ns;
        size_t n;
        uint64_t version; /* changes with anything a read of the links could show */
};

int links_new(Links **ret) {
        Links *l = calloc(1, sizeof(*l));
        if (!l)
                return -ENOMEM;
        *ret = l;
        return 0;
}

static void entry_done(LinkEntry *e) {
        free(e->filters);
        e->filters = NULL;
        e->n_filters = 0;
        e->filters_known = false;
        e->hooks_known = false;
}

static void name_forget(LinksNs *ns, const char *name) {
        free(ns->by_name ? hashmap_remove(ns->by_name, name) : NULL);
}

static void name_set(LinksNs *ns, const NlLink *link) {
        LinkName *ln;

        if (!ns->by_name && hashmap_new(&hashmap_string_ops, &ns->by_name) < 0)
                return;
        ln = hashmap_get(ns->by_name, link->ifname);
        if (ln) {
                ln->ifindex = link->ifindex;
                return;
        }
        ln = calloc(1, sizeof(*ln));
        if (!ln)
                return;
        snprintf(ln->name, sizeof(ln->name), "%s", link->ifname);
        ln->ifindex = link->ifindex;
        if (hashmap_put(ns->by_name, ln->name, ln) < 0)
                free(ln);
}

static void ns_clear(LinksNs *ns) {
        for (size_t i = 0; i < ns->n; i++) {
                name_forget(ns, ns->v[i].link.ifname);
                entry_done(&ns->v[i]);
        }
        ns->n = 0;
        ns->known = false;
}

static void ns_free(LinksNs *ns) {
        if (!ns)
                return;
        ns_clear(ns);
        hashmap_free(ns->by_name);
        free(ns->v);
        free(ns->netns);
        free(ns);
}

Links *links_free(Links *l) {
        if (!l)
                return NULL;
        for (size_t i = 0; i < l->n; i++)
                ns_free(l->ns[i]);
        free(l->ns);
        free(l);
        return NULL;
}

static LinksNs *ns_find(Links *l, const char *netns) {
        for (size_t i = 0; i < l->n; i++)
                if (streq_ptr(l->ns[i]->netns, netns))
                        return l->ns[i];
        return NULL;
}

static LinksNs *ns_get(Links *l, const char *netns) {
        LinksNs *ns = ns_find(l, netns), **v;

        if (ns)
                return ns;
        v = realloc(l->ns, (l->n + 1) * sizeof(*v));
        if (!v)
                return NULL;
        l->ns = v;
        ns = calloc(1, sizeof(*ns));
        if (!ns || (netns && !(ns->netns = strdup(netns)))) {
                free(ns);
                return NULL;
        }
        l->ns[l->n++] = ns;
        return ns;
}

/* The index where ifindex is, or would go. */
static size_t ns_slot(const LinksNs *ns, int ifindex) {
        size_t lo = 0, hi = ns->n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (ns->v[mid].link.ifindex < ifindex)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;
}

static LinkEntry *ns_entry(LinksNs *ns, int ifindex) {
        size_t i = ns_slot(ns, ifindex);
        return i < ns->n && ns->v[i].link.ifindex == ifindex ? &ns->v[i] : NULL;
}

static int ns_upsert(LinksNs *ns, const NlLink *link) {
        size_t i = ns_slot(ns, link->ifindex);

        if (i < ns->n && ns->v[i].link.ifindex == link->ifindex) {
                if (!streq(ns->v[i].link.ifname, link->ifname))
                        name_forget(ns, ns->v[i].link.ifname);
                ns->v[i].link = *link;
                name_set(ns, link);
                return 0;
        }
        if (ns->n == ns->cap) {
                size_t cap = ns->cap ? ns->cap * 2 : 16;
                LinkEntry *v = realloc(ns->v, cap * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                ns->v = v;
                ns->cap = cap;
        }
        memmove(&ns->v[i + 1], &ns->v[i], (ns->n - i) * sizeof(*ns->v));
        /* A link seen appearing (the namespace followed) has no qdisc yet: one added since comes as a tc
         * event after this one. */
        ns->v[i] = (LinkEntry){ .link = *link, .hooks_known = ns->known };
        ns->n++;
        name_set(ns, link);
        return 0;
}

static void ns_remove(LinksNs *ns, int ifindex) {
        size_t i = ns_slot(ns, ifindex);

        if (i >= ns->n || ns->v[i].link.ifindex != ifindex)
                return;
        name_forget(ns, ns->v[i].link.ifname);
        entry_done(&ns->v[i]);
        memmove(&ns->v[i], &ns->v[i + 1], (ns->n - i - 1) * sizeof(*ns->v));
        ns->n--;
}

uint64_t links_version(const Links *l) {
        return l->version;
}

void links_on_event(Links *l, const char *netns, const struct nlmsghdr *nlh) {
        LinksNs *ns = ns_find(l, netns);
        LinkEntry *e;
        NlLink link;
        int ifindex;

        if (!ns || !ns->known)
                return; /* not looked at yet: the first read dumps */
        l->version++;
        if (nl_tc_event_parse(nlh, &ifindex) >= 0) {
                if (nlh->nlmsg_type == RTM_NEWACTION || nlh->nlmsg_type == RTM_DELACTION) {
                        /* actions belong to the namespace; any filter may show one */
                        for (size_t i = 0; i < ns->n; i++)
                                entry_done(&ns->v[i]);
                        return;
                }
                e = ns_entry(ns, ifindex);
                if (e)
                        entry_done(e);
                return;
        }
        if (nl_link_parse(nlh, &link) < 0)
                return;
        if (nlh->nlmsg_type == RTM_DELLINK)
                ns_remove(ns, link.ifindex);
        else if (ns_upsert(ns, &link) < 0)
                ns_clear(ns); /* out of memory: look again next time */
}

void links_lost(Links *l, const char *netns) {
        LinksNs *ns = ns_find(l, netns);
        l->version++;
        if (ns)
                ns_clear(ns);
}

void links_forget(Links *l, const char *netns) {
        l->version++;
        for (size_t i = 0; i < l->n; i++)
                if (streq_ptr(l->ns[i]->netns, netns)) {
                        ns_free(l->ns[i]);
                        l->ns[i] = l->ns[--l->n];
                        return;
                }
}

static int ns_load(LinksNs *ns, NlSocket *rtnl, Error *reterr) {
        _cleanup_free_ NlLink *links = NULL;
        size_t n = 0;
        int r;

        if (ns->known)
                return 0;
        r = nl_link_list(rtnl, &links, &n, reterr);
        if (r < 0)
                return r;
        ns_clear(ns);
        for (size_t i = 0; i < n; i++)
                if (ns_upsert(ns, &links[i]) < 0) {
                        ns_clear(ns);
                        return error_oom(reterr);
                }
        ns->known = true;
        return 0;
}

int links_get(Links *l, NlSocket *rtnl, const char *netns, bool with_filters, const LinkEntry **ret,
              size_t *ret_n, Error *reterr) {
        LinksNs *ns = ns_get(l, netns);
        int r;

        if (!ns)
                return error_oom(reterr);
        if (!ns->known)
                l->version++;
        r = ns_load(ns, rtnl, reterr);
        if (r < 0)
                return r;
        for (size_t i = 0; with_filters && i < ns->n; i++) {
                LinkEntry *e = &ns->v[i];
                if (e->filters_known)
                        continue;
                /* A link can vanish between the dumps: it shows without filters until its event. */
                l->version++;
                if (nl_filter_dump(rtnl, e->link.ifindex, &e->filters, &e->n_filters, NULL) >= 0)
                        e->filters_known = true;
        }
        *ret = ns->v;
        *ret_n = ns->n;
        return 0;
}

bool links_hooks_absent(Links *l, NlSocket *rtnl, const char *netns, int ifindex) {
        LinksNs *ns = ns_find(l, netns);
        LinkEntry *e = ns && ns->known ? ns_entry(ns, ifindex) : NULL;
        _cleanup_free_ int *with = NULL;
        size_t n = 0;

        if (!e)
                return false;
        if (e->hooks_known)
                return !e->has_hooks;
        if (nl_hook_qdiscs(rtnl, &with, &n, NULL) < 0)
                return false;
        for (size_t i = 0; i < ns->n; i++)
                if (!ns->v[i].hooks_known)
                        ns->v[i].has_hooks = false;
        for (size_t k = 0; k < n; k++) {
                LinkEntry *w = ns_entry(ns, with[k]);
                if (w && !w->hooks_known)
                        w->has_hooks = true;
        }
        for (size_t i = 0; i < ns->n; i++)
                ns->v[i].hooks_known = true;
        return !e->has_hooks;
}

bool links_known(Links *l, const char *netns) {
        LinksNs *ns = ns_find(l, netns);
        return ns && ns->known;
}

const NlLink *links_find_name(Links *l, const char *netns, const char *ifname) {
        LinksNs *ns = ns_find(l, netns);
        const LinkName *ln;
        const LinkEntry *e;

        if (!ns || !ns->known || !ns->by_name || !(ln = hashmap_get(ns->by_name, ifname)))
                return NULL;
        e = ns_entry(ns, ln->ifindex);
        return e && streq(e->link.ifname, ifname) ? &e->link : NULL;
}

const NlLink *links_find(Links *l, const char *netns, int ifindex) {
        LinksNs *ns = ns_find(l, netns);
        const LinkEntry *e = ns && ns->known ? ns_entry(ns, ifindex) : NULL;
        return e ? &e->link : NULL;
}
