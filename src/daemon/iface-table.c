/* iface-table.c: the interfaces, hashed by "netns/ifname" and by (netns, ifindex), and in a list in the
 * order they came (what the faces list). */
#include <stdio.h>
#include <string.h>

#include "hashmap.h"
#include "iface-table.h"

struct IfaceTable {
        Hashmap *by_name; /* it->key -> it */
        Hashmap *by_ifindex; /* it -> it, hashed and compared by (netns, ifindex) */
        Iface **list;
        size_t n, capacity;
        uint64_t version; /* changes with every add, remove and touch */
};

/* The ifindex index is keyed by an Iface (or a look-up key shaped like one). */
static uint64_t ifindex_hash(const void *key, uint64_t seed) {
        const Iface *it = key;
        uint64_t h = hash_bytes(&it->ifindex, sizeof(it->ifindex), seed);
        return it->netns ? hash_bytes(it->netns, strlen(it->netns), h) : h;
}

static bool ifindex_equal(const void *a, const void *b) {
        const Iface *x = a, *y = b;
        return x->ifindex == y->ifindex && streq_ptr(x->netns, y->netns);
}

static const HashmapOps ifindex_ops = { .hash = ifindex_hash, .equal = ifindex_equal };

int iface_table_new(IfaceTable **ret) {
        IfaceTable *t = calloc(1, sizeof(*t));

        if (!t || hashmap_new(&hashmap_string_ops, &t->by_name) < 0 ||
            hashmap_new(&ifindex_ops, &t->by_ifindex) < 0) {
                iface_table_free(t);
                return -ENOMEM;
        }
        *ret = t;
        return 0;
}

IfaceTable *iface_table_free(IfaceTable *t) {
        if (!t)
                return NULL;
        hashmap_free(t->by_name);
        hashmap_free(t->by_ifindex);
        free(t->list);
        free(t);
        return NULL;
}

int iface_table_reserve(IfaceTable *t) {
        if (t->n == t->capacity) {
                size_t c = t->capacity ? t->capacity * 2 : 16;
                Iface **v = realloc(t->list, c * sizeof(Iface *));
                if (!v)
                        return -ENOMEM;
                t->list = v;
                t->capacity = c;
        }
        if (hashmap_reserve(t->by_name, 1) < 0 || hashmap_reserve(t->by_ifindex, 1) < 0)
                return -ENOMEM;
        return 0;
}

void iface_table_touch(IfaceTable *t) {
        t->version++;
}

uint64_t iface_table_version(const IfaceTable *t) {
        return t->version;
}

void iface_table_add(IfaceTable *t, Iface *it) {
        t->version++;
        t->list[t->n++] = it;
        (void) hashmap_put(t->by_name, it->key, it);
        if (it->ifindex > 0)
                (void) hashmap_put(t->by_ifindex, it, it);
}

void iface_table_remove(IfaceTable *t, Iface *it) {
        t->version++;
        for (size_t i = 0; i < t->n; i++)
                if (t->list[i] == it) {
                        memmove(t->list + i, t->list + i + 1, (t->n - i - 1) * sizeof(Iface *));
                        t->n--;
                        break;
                }
        if (hashmap_get(t->by_name, it->key) == it)
                (void) hashmap_remove(t->by_name, it->key);
        if (it->ifindex > 0 && hashmap_get(t->by_ifindex, it) == it)
                (void) hashmap_remove(t->by_ifindex, it);
}

Iface *iface_table_get(const IfaceTable *t, const char *netns, const char *ifname) {
        char key[NETNS_NAME_MAX + IFNAME_MAX + 3];

        if (strlen(strempty(netns)) > NETNS_NAME_MAX || strlen(ifname) > IFNAME_MAX)
                return NULL;
        snprintf(key, sizeof(key), "%s/%s", strempty(netns), ifname);
        return hashmap_get(t->by_name, key);
}

Iface *iface_table_by_ifindex(const IfaceTable *t, const char *netns, int ifindex) {
        Iface probe = { .netns = (char *) netns, .ifindex = ifindex };

        if (ifindex <= 0)
                return NULL;
        return hashmap_get(t->by_ifindex, &probe);
}

void iface_table_set_ifindex(IfaceTable *t, Iface *it, int ifindex) {
        bool indexed = it->ifindex > 0 && hashmap_get(t->by_ifindex, it) == it;

        if (it->ifindex == ifindex)
                return;
        if (indexed)
                (void) hashmap_remove(t->by_ifindex, it);
        it->ifindex = ifindex;
        /* Two documents cannot hold one device: the first keeps the index. */
        if (ifindex > 0 && !hashmap_get(t->by_ifindex, it))
                (void) hashmap_put(t->by_ifindex, it, it);
}

size_t iface_table_size(const IfaceTable *t) {
        return t->n;
}

Iface *iface_table_at(const IfaceTable *t, size_t i) {
        return i < t->n ? t->list[i] : NULL;
}

int iface_table_ensure(IfaceTable *t, const char *netns, const char *ifname, Iface **ret) {
        Iface *it = iface_table_get(t, netns, ifname);

        if (!it) {
                if (iface_new(netns, ifname, &it) < 0 || iface_table_reserve(t) < 0) {
                        iface_free(it, NULL);
                        return -ENOMEM;
                }
                iface_table_add(t, it);
        }
        *ret = it;
        return 0;
}
