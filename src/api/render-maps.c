/* render-maps.c: the JSON of a map of an attached program: its definition, the filters using it and a
 * page of its entries, typed through BTF. The same rendering serves REST and D-Bus. */
#include <stdio.h>
#include <string.h>

#include "api-internal.h"
#include "btf.h"
#include "daemon-maps.h"
#include "nl-bpf.h"
#include "nl-map.h"

void map_cursor_format(const DaemonMap *m, const NlMapPage *p, char *buf, size_t size) {
        size_t o = (size_t) snprintf(buf, size, "%u.", m->map.id);

        for (size_t i = 0; i < p->cursor_size && o + 2 < size; i++, o += 2)
                snprintf(buf + o, size - o, "%02x", p->cursor[i]);
}

int map_cursor_parse(const DaemonMap *m, const char *s, uint8_t *buf, size_t *ret_size, Error *reterr) {
        unsigned id;
        int n = 0;
        size_t len;
        const char *hex;

        if (sscanf(s, "%u.%n", &id, &n) != 1 || n == 0)
                return error_set(reterr, EINVAL, ERROR_BAD_CURSOR, "cursor \"%s\" is not one clsd gave", s);
        if (id != m->map.id)
                return error_set(
                        reterr, EINVAL, ERROR_BAD_CURSOR,
                        "the cursor is of map id %u; %s is now map id %u (its program was replaced)", id,
                        m->map.name, m->map.id);
        hex = s + n;
        len = strlen(hex);
        if (len == 0 || len % 2 || len / 2 > NL_MAP_CURSOR_MAX)
                return error_set(reterr, EINVAL, ERROR_BAD_CURSOR, "cursor \"%s\" is not one clsd gave", s);
        for (size_t i = 0; i < len / 2; i++) {
                unsigned b;
                if (sscanf(hex + 2 * i, "%2x", &b) != 1)
                        return error_set(reterr, EINVAL, ERROR_BAD_CURSOR,
                                         "cursor \"%s\" is not one clsd gave", s);
                buf[i] = (uint8_t) b;
        }
        *ret_size = len / 2;
        return 0;
}

static json_t *render_entry(const DaemonMap *m, const NlMapPage *p, size_t i) {
        const uint8_t *key = p->keys + i * m->map.key_size, *value = p->values + i * p->value_stride;
        json_t *e = json_object(), *sum = NULL, *values;

        json_object_set_new(e, "key", btf_json_decode(m->btf, m->map.btf_key_type_id, key, m->map.key_size));
        if (!nl_map_percpu(m->map.type)) {
                json_object_set_new(
                        e, "value",
                        btf_json_decode(m->btf, m->map.btf_value_type_id, value, m->map.value_size));
                return e;
        }
        values =
                btf_json_percpu(m->btf, m->map.btf_value_type_id, value, m->map.value_size, p->n_cpus, &sum);
        json_object_set_new(e, "values", values);
        json_object_set_new(e, "sum", sum ? sum : json_null());
        return e;
}

json_t *render_map(Manager *d, const DaemonMap *m, const NlMapPage *page, const Error *read_error) {
        json_t *j = json_object(), *users = json_array();
        char buf[256];

        json_object_set_new(j, "name", json_text(m->map.name));
        json_object_set_new(j, "id", json_integer(m->map.id));
        json_object_set_new(j, "type", json_text(nl_map_type_name(m->map.type)));
        json_object_set_new(j, "key_size", json_integer(m->map.key_size));
        json_object_set_new(j, "value_size", json_integer(m->map.value_size));
        json_object_set_new(j, "max_entries", json_integer(m->map.max_entries));
        json_object_set_new(j, "flags", json_integer(m->map.flags));
        if (m->btf && m->map.btf_value_type_id) {
                json_t *b = json_object();
                btf_json_type_name(m->btf, m->map.btf_key_type_id, buf, sizeof(buf));
                json_object_set_new(b, "key", json_text(buf));
                btf_json_type_name(m->btf, m->map.btf_value_type_id, buf, sizeof(buf));
                json_object_set_new(b, "value", json_text(buf));
                json_object_set_new(j, "btf", b);
        } else
                json_object_set_new(j, "btf", json_null());
        for (size_t i = 0; i < m->n_users; i++) {
                const Filter *f = m->users[i].filter;
                json_array_append_new(
                        users, json_pack("{s:s,s:s,s:i,s:s}", "ifname", iface_ifname(m->users[i].iface),
                                         "direction", direction_to_string(filter_direction(f)), "pref",
                                         (int) filter_spec(f)->priority, "name", filter_spec(f)->name));
        }
        json_object_set_new(j, "filters", users);
        {
                size_t stored = 0;
                json_object_set_new(j, "config",
                                    daemon_map_config(d, m, &stored)
                                            ? json_pack("{s:I}", "stored", (json_int_t) stored)
                                            : json_null());
        }
        if (!page) {
                json_object_set_new(j, "entries", json_null());
                json_object_set_new(j, "count", json_null());
                json_object_set_new(j, "read", json_null());
                json_object_set_new(j, "next_cursor", json_null());
                json_object_set_new(j, "unreadable",
                                    read_error && read_error->message ? json_text(read_error->message)
                                                                      : json_text("not read"));
                return j;
        }
        json_t *entries = json_array();
        for (size_t i = 0; i < page->n; i++)
                json_array_append_new(entries, render_entry(m, page, i));
        json_object_set_new(j, "entries", entries);
        json_object_set_new(j, "count", json_integer((json_int_t) page->n));
        json_object_set_new(j, "read", json_text(page->batched ? "batch" : "by_key"));
        if (page->more) {
                char cursor[2 * NL_MAP_CURSOR_MAX + 16];
                map_cursor_format(m, page, cursor, sizeof(cursor));
                json_object_set_new(j, "next_cursor", json_text(cursor));
        } else
                json_object_set_new(j, "next_cursor", json_null());
        json_object_set_new(j, "unreadable", json_null());
        return j;
}

json_t *render_map_page(Manager *d, const DaemonMap *m, const uint8_t *cursor, size_t cursor_size,
                        size_t limit, Error *reterr) {
        NlMapPage p = { 0 };
        json_t *j;

        if (daemon_map_read(d, m, cursor, cursor_size, limit, &p, reterr) < 0)
                return NULL;
        j = render_map(d, m, &p, NULL);
        nl_map_page_done(&p);
        return j;
}

json_t *render_map_pages(Manager *d, const DaemonMaps *maps, size_t limit) {
        json_t *list = json_array();

        for (size_t i = 0; i < maps->n; i++) {
                _cleanup_error_ Error e = ERROR_NULL;
                json_t *j = render_map_page(d, &maps->maps[i], NULL, 0, limit, &e);
                /* one map that cannot be read does not hide the others */
                if (!j)
                        j = render_map(d, &maps->maps[i], NULL, &e);
                json_array_append_new(list, j);
        }
        return list;
}

json_t *render_maps_list(Manager *d, const Iface *it, const DaemonMaps *maps, size_t limit) {
        json_t *list = render_map_pages(d, maps, limit);

        return json_pack("{s:s,s:o,s:o}", "ifname", iface_ifname(it), "netns",
                         iface_netns(it) ? json_text(iface_netns(it)) : json_null(), "maps", list);
}
