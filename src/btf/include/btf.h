/* btf.h: map keys and values through their BTF, the module's one header: typed JSON both ways (btf-json.c,
 * btf-encode.c, as bpftool's dumper reads them), and one field of a key or value by path, resolved once
 * and read from many entries (btf-field.c: metric labels and values), with the helpers they share. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

struct btf;
struct btf_type;

typedef enum BtfFieldKind {
        BTF_FIELD_INT,
        BTF_FIELD_ENUM,
        BTF_FIELD_BYTES, /* arrays (a char array: its text), structs: hex */
} BtfFieldKind;

typedef struct BtfField {
        const struct btf *btf;
        uint32_t type_id;
        uint32_t bit_off;
        uint32_t size_bits;
        uint32_t bitfield;
        BtfFieldKind kind;
        bool is_signed;
        bool raw; /* no BTF: the whole key or value as a little-endian unsigned integer */
} BtfField;

/* bits bits at bit offset off of data, little-endian (a field may span 9 bytes). */
uint64_t btf_load_bits(const uint8_t *data, uint32_t off, uint32_t bits);
/* The type behind typedefs, const, volatile, restrict and type tags (*id becomes its id). */
const struct btf_type *btf_skip_mods(const struct btf *btf, uint32_t *id);
/* The enumerator of t (an enum or enum64) with value v, or NULL. */
const char *btf_enum_name(const struct btf *btf, const struct btf_type *t, uint64_t v, bool is_signed);
/* Whether the type is a char (what makes an array a string). */
bool btf_is_char(const struct btf *btf, uint32_t id);
/* path NULL: the whole key or value; else "a.b" through struct members. Fills why on failure. */
int btf_field_resolve(const struct btf *btf, uint32_t type_id, size_t size, const char *path, BtfField *ret,
                      char *why, size_t why_size);
bool btf_field_is_number(const BtfField *f);
uint64_t btf_field_load(const BtfField *f, const uint8_t *data);
int64_t btf_field_signed(const BtfField *f, uint64_t v);
double btf_field_number(const BtfField *f, const uint8_t *data);
/* A label value: the number, the enumerator's name, a char array's text, else hex. */
void btf_field_format(const BtfField *f, const uint8_t *data, char *buf, size_t size);

/* ---- typed JSON ---- */
json_t *btf_json_hex(const uint8_t *data, size_t size);
/* The value of type type_id at data (size bytes) as typed JSON; hex when btf is NULL or disagrees. */
json_t *btf_json_decode(const struct btf *btf, uint32_t type_id, const uint8_t *data, size_t size);
/* The reverse: v, in the shapes btf_json_decode() gives, as size bytes of type_id in out (zeroed first;
 * a struct's fields not given stay 0). Errors name the place in v (what: "key", "value"): 400
 * invalid_value or unknown_field; 422 map_unwritable for a kind that is not written (a pointer). */
int btf_json_encode(const struct btf *btf, uint32_t type_id, const json_t *v, uint8_t *out, size_t size,
                    const char *what, Error *reterr);
/* A per-CPU value (n_cpus slots of value_size rounded up to 8): the list of each CPU's, and in
 * *ret_sum their sum leaf by leaf when every leaf is an integer (else NULL). */
json_t *btf_json_percpu(const struct btf *btf, uint32_t type_id, const uint8_t *data, size_t value_size,
                        unsigned n_cpus, json_t **ret_sum);
void btf_json_type_name(const struct btf *btf, uint32_t type_id, char *buf, size_t size);
