/* api-internal.h: what the files of src/api/ share: requests, responses, rendering. */
#pragma once

#include <microhttpd.h>

#include "access.h"
#include "api.h"
#include "json-writer.h"
#include "daemon-changes.h"
#include "daemon-maps.h"
#include "daemon-metrics.h"
#include "daemon-objects.h"
#include "nl-map.h"
#include "store-policy.h"

typedef enum MHD_Result MHD_RESULT;

/* Entries per map when ?limit= is not given: enough for most maps, bounded for huge ones. */
#define MAPS_LIMIT_DEFAULT 1000

typedef struct ApiDbus ApiDbus;

/* Requests answered, by route template and status: clsd_api_requests_total. */
typedef struct ApiRequestCount {
        const char *route; /* static: api_route_label() */
        unsigned status;
        uint64_t n;
} ApiRequestCount;

struct Api {
        Manager *daemon;
        sd_event *event;
        ApiConfig config;
        size_t metrics_size; /* the last scrape's: the next one's buffer starts that large */
        char *token;
        AccessPolicy *access; /* --access-file; NULL: none */
        struct Tls *tls; /* --tls-cert; NULL: plain TCP */
        uint64_t access_generation; /* counts reloads: a connection's certificate is verified again */
        bool socket_created; /* the unix socket is ours (not systemd's): removed at exit */
        struct Listener *listeners[3];
        size_t n_listeners;
        ApiRequestCount requests[128]; /* routes × the statuses each gives */
        size_t n_requests;
        DaemonErrorCount errors[64]; /* error answers by code */
        size_t n_errors;
        uint64_t audits[3]; /* audit records: ok, refused (4xx), failed (5xx) */
        uint64_t body_bytes; /* of request bodies read, kept or dropped: clsd_api_body_bytes_total */
        unsigned requests_waiting; /* connections suspended for the daemon's answer (http.c) */
        ApiDbus *dbus; /* NULL: not on D-Bus */
        /* GET /ifaces's last answer per namespace, with what it was made from (links' version and the
         * namespace's interfaces): a poll that finds nothing changed is a copy. */
        struct IfacesAnswer {
                char *netns; /* NULL: clsd's own */
                uint64_t made_of;
                char *text;
                size_t size;
        } ifaces_answers[8];
        size_t n_ifaces_answers;
};

/* A response: status, JSON body (may be NULL for 204), extra headers. */
typedef struct Response {
        unsigned status;
        json_t *body;
        char *text; /* instead of body: a text answer of content_type (heap) */
        size_t text_size;
        const char *content_type;
        ErrorCode error_code; /* of an error answer, for clsd_api_errors_total */
        const char *allow;
        char etag[32];
} Response;

typedef struct Request {
        Api *api;
        struct Listener *listener;
        bool tcp;
        bool metrics_only; /* --metrics-listen: GET /metrics and nothing else */
        const char *method;
        const char *url;
        struct MHD_Connection *connection;
        char *body;
        size_t body_size, body_capacity;
        size_t body_max;
        bool too_large;
        bool refused_early; /* answered 413 while the body came (http-guard.c) */
        size_t lingered; /* what of the body was read and dropped since */
        const char *line_refused; /* why the request line is refused (static), or NULL */
        bool bad_line; /* refused for its method (request_line_refused()) */
        const char *raw_target; /* the request-target as received (in MHD's buffer) */
        char who[256]; /* the peer, for the audit */
        Role role;
        bool authenticated; /* over TCP: a verified client certificate, or a token clsd knows */
        bool bad_token; /* a bearer token clsd does not know */
        /* A change the daemon answers later (it waits for its interface's turn, or a worker): the
         * connection is suspended until request_answer(). */
        bool deferring;
        bool answered;
        bool suspended;
        Response deferred;
        void (*resume)(struct Request *req); /* the listener's: a suspended connection's answer is in */
        struct Request *next_suspended;
} Request;

/* routes.c */
MHD_RESULT api_dispatch(Request *req);

/* request.c */
/* The answer of a deferred request is in req->deferred: it goes out now, or once libmicrohttpd runs the
 * connection again (req->resume). */
void request_answer(Request *req);
void response_error(Response *resp, const Error *e);
void response_errorf(Response *resp, ErrorCode code, const char *fmt, ...) _printf_(3, 4);
/* A JSON string of s (NULL: NULL), its bytes that are not UTF-8 written as \xNN: never dropped. */
json_t *json_text(const char *s);
/* Every object a change's body names by path is under an object directory (0); else the answer is in
 * resp (403 object_path_refused) and -1. */
int request_check_object_paths(const Request *req, json_t *body, Response *resp);
const char *request_header(const Request *req, const char *name);
/* 0 if the content type is acceptable, or fills resp with 415. */
int request_want_content_type(const Request *req, const char *const *types, Response *resp);
MHD_RESULT api_send(Request *req, Response *resp);
/* 405, naming the method and the URL, with Allow: allow. */
void method_not_allowed(Response *resp, const Request *req, const char *allow);

/* routes-objects.c, routes-ifaces.c: each handler parses, calls one daemon function, renders. */
void route_objects(Request *req, const char *rest, Response *resp);
/* netns: NULL for clsd's own namespace (/ifaces), or a name (/netns/{name}/ifaces). */
void route_ifaces(Request *req, const char *netns, const char *rest, Response *resp);
void route_netns(Request *req, const char *rest, Response *resp);
void route_policies(Request *req, const char *rest, Response *resp);
json_t *render_policy(Manager *d, const Policy *p);
/* A change's body (JSON, sent as one of types) and its ?dry_run: 0, or <0 with the 4xx in resp. */
int request_change_body(Request *req, const char *const *types, json_t **ret_body, bool *ret_dry_run,
                        Response *resp);
/* HTTP's If-Match as the daemon's precondition on a generation. */
DaemonExpect request_expect(const Request *req);
/* routes-maps.c: what NULL lists every map; else one map, by name or id. */
void route_maps(Request *req, const char *netns, const char *ifname, const char *what, Response *resp);
/* PUT (write one entry: {"key", "value"}) and DELETE ({"key"}) of .../maps/{map}/entries. */
void route_policy_maps(Request *req, const char *name, const char *what, bool entries, Response *resp);
void route_map_entries(Request *req, const char *netns, const char *ifname, const char *what,
                       Response *resp);

/* metrics.c: GET /metrics */
void route_metrics(Request *req, Response *resp);
/* counters.c */
const char *api_route_label(const char *url);
void api_count_request(Api *a, const char *url, unsigned status);
void api_count_error(Api *a, ErrorCode code);

/* audit.c: a change asked (or refused): who, what, how it ended. */
typedef struct AuditRecord {
        const char *who; /* "uid 0 pid 42 (unix socket)", "198.18.0.2 with the token (TCP)", … */
        const char *method, *path;
        unsigned status;
        const char *code; /* the error's, or NULL */
        const char *generation, *digest; /* what a change made, when it says */
} AuditRecord;
void api_audit(Api *a, const AuditRecord *r);
/* Not GET or HEAD. */
bool method_changes_state(const char *method);

/* dbus.c */
void api_dbus_free(ApiDbus *b);

/* render.c: one place per resource. */
json_t *render_object(Manager *d, const DaemonObject *o);
json_t *render_iface(Manager *d, const Iface *it, const IfaceStatus *status);
/* The document the interface applies (each hook's filters, the hog's or the API's), as JSON. */
json_t *render_iface_document(const Iface *it);
/* One link of GET /ifaces, written straight into w (read often, and large). */
void write_link(JsonWriter *w, Manager *d, const char *netns, const LinkView *v);
json_t *render_netns_list(const NetnsView *v, size_t n);
json_t *render_error(const Error *e);
json_t *render_version(Manager *d);
json_t *render_dry_run(Manager *d, const DryRun *dr);
/* render-maps.c: page NULL: the map could not be read, read_error says why. */
json_t *render_map(Manager *d, const DaemonMap *m, const NlMapPage *page, const Error *read_error);
/* A page of the map read now, rendered; NULL with reterr when it cannot be read. */
json_t *render_map_page(Manager *d, const DaemonMap *m, const uint8_t *cursor, size_t cursor_size,
                        size_t limit, Error *reterr);
/* {"ifname", "netns", "maps": [...]}: every map with its first limit entries (REST and D-Bus). */
/* Each map with its first page (or why it cannot be read), as a JSON array. */
json_t *render_map_pages(Manager *d, const DaemonMaps *maps, size_t limit);
json_t *render_maps_list(Manager *d, const Iface *it, const DaemonMaps *maps, size_t limit);
/* Cursors are "<map id>.<hex>": a map replaced meanwhile is told apart, not misread. */
void map_cursor_format(const DaemonMap *m, const NlMapPage *p, char *buf, size_t size);
int map_cursor_parse(const DaemonMap *m, const char *s, uint8_t *buf, size_t *ret_size, Error *reterr);
