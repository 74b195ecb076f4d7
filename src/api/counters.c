/* counters.c: the API's own counters (requests by route template and status, error answers by code),
 * kept as requests are answered and shown by /metrics. */
#include <string.h>

#include "api-internal.h"
#include "daemon-metrics.h"

/* Route labels are templates, never what the client sent, so that a scanner cannot make the label
 * set grow without bound. */
const char *api_route_label(const char *url) {
        const char *rest;
        bool netns = false;

        static const char *const fixed[] = { "/healthz", "/version", "/metrics" };

        for (size_t i = 0; i < ELEMENTSOF(fixed); i++)
                if (streq(url, fixed[i]))
                        return fixed[i]; /* never url: it lives only as long as the request */
        if ((rest = startswith(url, "/objects")))
                return rest[0] == 0 || streq(rest, "/") ? "/objects" : "/objects/{digest}";
        if ((rest = startswith(url, "/policies"))) {
                const char *sub = rest[0] ? strchr(rest + 1, '/') : NULL;
                if (rest[0] == 0 || streq(rest, "/"))
                        return "/policies";
                if (!sub)
                        return "/policies/{name}";
                if (streq(sub, "/maps") || streq(sub, "/maps/"))
                        return "/policies/{name}/maps";
                if (startswith(sub, "/maps/") && endswith(sub, "/entries"))
                        return "/policies/{name}/maps/{map}/entries";
                return startswith(sub, "/maps/") ? "/policies/{name}/maps/{map}" : "other";
        }
        if ((rest = startswith(url, "/netns"))) {
                if (rest[0] == 0 || streq(rest, "/"))
                        return "/netns";
                rest = strchr(rest + 1, '/');
                if (!rest || !(rest = startswith(rest, "/ifaces")))
                        return "other";
                netns = true;
        } else if (!(rest = startswith(url, "/ifaces")))
                return "other";
        if (rest[0] == 0 || streq(rest, "/"))
                return netns ? "/netns/{netns}/ifaces" : "/ifaces";
        rest = strchr(rest + 1, '/');
        if (rest && streq(rest, "/classifier"))
                return netns ? "/netns/{netns}/ifaces/{ifname}/classifier" : "/ifaces/{ifname}/classifier";
        if (rest && streq(rest, "/classifier/maps"))
                return netns ? "/netns/{netns}/ifaces/{ifname}/classifier/maps"
                             : "/ifaces/{ifname}/classifier/maps";
        if (rest && startswith(rest, "/classifier/maps/") && endswith(rest, "/entries"))
                return netns ? "/netns/{netns}/ifaces/{ifname}/classifier/maps/{map}/entries"
                             : "/ifaces/{ifname}/classifier/maps/{map}/entries";
        if (rest && startswith(rest, "/classifier/maps/"))
                return netns ? "/netns/{netns}/ifaces/{ifname}/classifier/maps/{map}"
                             : "/ifaces/{ifname}/classifier/maps/{map}";
        return "other";
}

void api_count_request(Api *a, const char *url, unsigned status) {
        const char *route = api_route_label(url);

        for (size_t i = 0; i < a->n_requests; i++)
                if (a->requests[i].status == status && streq(a->requests[i].route, route)) {
                        a->requests[i].n++;
                        return;
                }
        if (a->n_requests < ELEMENTSOF(a->requests))
                a->requests[a->n_requests++] = (ApiRequestCount){ .route = route, .status = status, .n = 1 };
}

void api_count_error(Api *a, ErrorCode code) {
        error_counts_add(a->errors, &a->n_errors, ELEMENTSOF(a->errors), code);
}
