/* btf-field.h: one field of a map key or value by path through BTF, resolved once and read from many
 * entries (metric labels and values), and the BTF helpers the JSON decoder shares. */
#pragma once

#include "daemon.h"

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
