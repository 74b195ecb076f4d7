/* tcx-plan.h: the pure core of the tcx attach kind: which of clsd's pinned links go, which change their
 * program in place, which are attached anew (and in what order), on plain structs. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"

typedef struct TcxWant {
        Direction dir;
        uint16_t pref;
        const char *name;
        uint32_t prog_id; /* 0: a program not loaded yet (a dry run) */
} TcxWant;

typedef struct TcxHave {
        Direction dir;
        uint16_t pref;
        const char *name;
        uint32_t prog_id;
        uint32_t link_id;
        bool attached; /* the link still runs on the interface (else only its pin is left) */
} TcxHave;

typedef enum TcxStepKind {
        TCX_KEEP, /* the link runs the wanted program */
        TCX_REMOVE, /* detach (if attached) and unpin: not wanted, or in the way of a swap */
        TCX_UPDATE, /* the link's program is replaced in place: it keeps its id and position */
        TCX_ADD, /* a new link, placed by its priority among clsd's */
} TcxStepKind;

typedef struct TcxStep {
        TcxStepKind kind;
        int want; /* index into want, or -1 */
        int have; /* index into have, or -1 */
} TcxStep;

/* Steps in the order to apply them: removals, updates, then additions by (hook, priority). The kernel
 * runs a program at most once per hook: a link whose new program another of clsd's runs now (and gives
 * up in this change) is removed and added again, so that two programs can swap. */
int tcx_plan(const TcxWant *want, size_t n_want, const TcxHave *have, size_t n_have, TcxStep **ret,
             size_t *ret_n);
const char *tcx_step_to_string(TcxStepKind k);
