/* tcx-plan.c: tcx_plan(want, have): what to do with clsd's tcx links, computed without a kernel. */
#include <stdlib.h>
#include <string.h>

#include "tcx-plan.h"

const char *tcx_step_to_string(TcxStepKind k) {
        static const char *const names[] = {
                [TCX_KEEP] = "keep", [TCX_REMOVE] = "remove", [TCX_UPDATE] = "replace", [TCX_ADD] = "add"
        };
        return k < ELEMENTSOF(names) ? names[k] : "unknown";
}

static bool same_place(const TcxWant *w, const TcxHave *h) {
        return w->dir == h->dir && w->pref == h->pref && streq(w->name, h->name);
}

int tcx_plan(const TcxWant *want, size_t n_want, const TcxHave *have, size_t n_have, TcxStep **ret,
             size_t *ret_n) {
        _cleanup_free_ int *have_of = calloc(n_want + 1, sizeof(int)); /* want -> its have, or -1 */
        _cleanup_free_ bool *wanted = calloc(n_have + 1, sizeof(bool));
        _cleanup_free_ size_t *adds = calloc(n_want + 1, sizeof(size_t));
        TcxStep *steps = calloc(n_want + n_have + 1, sizeof(TcxStep));
        size_t n = 0, n_adds = 0;

        if (!have_of || !wanted || !adds || !steps) {
                free(steps);
                return -ENOMEM;
        }
        /* Which of ours the document still wants, in place (hook, pref, name) and attached. */
        for (size_t i = 0; i < n_want; i++) {
                have_of[i] = -1;
                for (size_t k = 0; k < n_have && have_of[i] < 0; k++)
                        if (!wanted[k] && have[k].attached && same_place(&want[i], &have[k])) {
                                have_of[i] = (int) k;
                                wanted[k] = true;
                        }
        }
        /* A link whose new program another wanted link of the hook runs now must make way. */
        for (size_t i = 0; i < n_want; i++) {
                int h = have_of[i];
                bool blocked = false;
                if (h < 0 || have[h].prog_id == want[i].prog_id || want[i].prog_id == 0)
                        continue;
                for (size_t k = 0; k < n_have && !blocked; k++)
                        blocked = (int) k != h && wanted[k] && have[k].dir == want[i].dir &&
                                  have[k].prog_id == want[i].prog_id;
                if (!blocked)
                        continue;
                wanted[h] = false;
                have_of[i] = -1;
        }
        for (size_t k = 0; k < n_have; k++)
                if (!wanted[k])
                        steps[n++] = (TcxStep){ .kind = TCX_REMOVE, .want = -1, .have = (int) k };
        for (size_t i = 0; i < n_want; i++) {
                int h = have_of[i];
                if (h < 0) {
                        adds[n_adds++] = i;
                        continue;
                }
                steps[n++] = (TcxStep){ .kind = have[h].prog_id == want[i].prog_id && want[i].prog_id
                                                        ? TCX_KEEP
                                                        : TCX_UPDATE,
                                        .want = (int) i,
                                        .have = h };
        }
        /* New links in priority order, so that each finds its neighbours in place. */
        for (size_t i = 1; i < n_adds; i++)
                for (size_t j = i; j > 0; j--) {
                        const TcxWant *a = &want[adds[j - 1]], *b = &want[adds[j]];
                        if (a->dir < b->dir || (a->dir == b->dir && a->pref <= b->pref))
                                break;
                        size_t t = adds[j];
                        adds[j] = adds[j - 1];
                        adds[j - 1] = t;
                }
        for (size_t i = 0; i < n_adds; i++)
                steps[n++] = (TcxStep){ .kind = TCX_ADD, .want = (int) adds[i], .have = -1 };
        *ret = steps;
        *ret_n = n;
        return 0;
}
