/* policy-set.h: the policies clsd has (the API's, the fleet's, the hogs' with "match"), by name, and
 * what is asked of them as a set: which match a link, whether any may match in a namespace, the hogs'
 * merged in (policy-set.c). Pure: no kernel, no queue. */
#pragma once

#include "daemon.h"
#include "store-policy.h"

typedef struct PolicySet {
        Policy **v; /* references */
        size_t n;
} PolicySet;

Policy *policy_set_get(const PolicySet *s, const char *name);
/* Whether a policy of the set may match links of the namespace (NULL: clsd's own). */
bool policy_set_wants_netns(const PolicySet *s, const char *netns);
/* Whether any policy matches named namespaces at all: if none does, the namespaces present need not be
 * listed (a listing opens each one: a host of a thousand namespaces would pay it at every change). */
bool policy_set_wants_named_netns(const PolicySet *s);
/* The policies of the set that match the link (kind and master as the kernel says), into v (room for
 * s->n). */
size_t policy_set_match(const PolicySet *s, const char *netns, const char *ifname, const char *kind,
                        const char *master, Policy **v);
/* The set becomes v (references moved). */
void policy_set_replace(PolicySet *s, Policy **v, size_t n);
void policy_set_clear(PolicySet *s);
/* The set with the hogs' policies v in place of the hog policies it has (the API's and the fleet's
 * kept; a hog of a name they hold is said and left out; one unchanged keeps the policy it was, so that
 * its interfaces are not touched), into ret (references); how many changed, came or went. */
int policy_set_with_hogs(const PolicySet *s, Policy *const *v, size_t n, PolicySet *ret,
                         size_t *ret_changed);
/* How many of the set the API stored (not a hog's, not the fleet's). */
size_t policy_set_count_local(const PolicySet *s);
