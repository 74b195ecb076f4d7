/* program-set.c: the programs of one policy, acquired as an interface's are (the registry first, else a
 * worker loads them: loads.c), without an interface: each filter's program and actions once, a filter
 * with maps of its own in an instance of the set's own. A new load of a shared program gets the policy's
 * configuration entries before any interface takes it from the registry. */
#include <stdio.h>
#include <string.h>

#include "loads.h"
#include "map-config.h"
#include "program-set.h"

int program_set_init(ProgramSet *s, Manager *m, Policy *policy, void (*on_loaded)(void *userdata),
                     void *userdata) {
        _cleanup_free_ char *key = NULL;
        size_t n = 0;

        *s = (ProgramSet){ .m = m, .on_loaded = on_loaded, .userdata = userdata };
        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++)
                for (size_t i = 0; i < policy->doc->n_filters[dir]; i++)
                        n += 1 + policy->doc->filters[dir][i].n_actions;
        if (asprintf(&key, "policy:%s", policy->name) < 0)
                return -ENOMEM;
        s->slots = calloc(n + 1, sizeof(ProgramSetSlot));
        if (!s->slots)
                return -ENOMEM;
        s->policy = policy_ref(policy);
        for (Direction dir = 0; dir < _DIRECTION_MAX; dir++)
                for (size_t i = 0; i < policy->doc->n_filters[dir]; i++) {
                        const FilterSpec *spec = &policy->doc->filters[dir][i];
                        char instance[17] = "";
                        if (filter_has_own_maps(spec))
                                program_instance_name(key, dir, spec->name, instance);
                        for (int a = -1; a < (int) spec->n_actions; a++) {
                                ProgramSetSlot *slot = &s->slots[s->n_slots++];
                                *slot = (ProgramSetSlot){ .spec = spec, .action = a };
                                memcpy(slot->instance, instance, sizeof(slot->instance));
                        }
                }
        return 0;
}

static ProgramRef slot_ref(const ProgramSetSlot *slot) {
        return program_ref(slot->spec, slot->action, NULL, slot->instance);
}

/* A load is in: the program goes to every slot that waits for it. */
static void on_program_loaded(void *target, const ProgramRef *ref, Program *p) {
        ProgramSet *s = target;

        for (size_t i = 0; i < s->n_slots; i++) {
                ProgramSetSlot *slot = &s->slots[i];
                ProgramRef want = slot_ref(slot);
                if (!slot->program && want.kind == ref->kind && streq_ptr(want.digest, ref->digest) &&
                    streq_ptr(want.program, ref->program) && streq_ptr(want.instance, ref->instance)) {
                        slot->program = registry_ref(p);
                        slot->unwritten = true;
                }
        }
}

static void on_programs_in(Manager *m, void *resume) {
        ProgramSet *s = resume;

        (void) m;
        s->on_loaded(s->userdata);
}

int program_set_acquire(ProgramSet *s, Error *reterr) {
        Manager *m = s->m;
        LoadWaiter w = {
                .target = s, .hand_over = on_program_loaded, .resume = s, .on_loaded = on_programs_in
        };
        bool waiting = false;
        int r;

        if (s->held)
                return 0;
        for (size_t i = 0; i < s->n_slots; i++) {
                ProgramSetSlot *slot = &s->slots[i];
                ProgramRef ref = slot_ref(slot);
                if (slot->program)
                        continue;
                r = loads_acquire(m, &ref, 0, 0, &slot->program, &w, reterr);
                if (r == -EAGAIN)
                        waiting = true;
                else if (r < 0)
                        return r;
        }
        if (waiting)
                return -EAGAIN;
        /* before any interface takes them: the policy's configuration from the first packet */
        for (size_t i = 0; i < s->n_slots; i++)
                if (s->slots[i].unwritten) {
                        s->slots[i].unwritten = false;
                        if (!s->slots[i].instance[0])
                                map_config_apply_policy(m, s->policy, s->slots[i].spec, s->slots[i].program);
                }
        s->held = true;
        return 0;
}

void program_set_done(ProgramSet *s) {
        if (!s->m)
                return;
        loads_forget(s->m, s);
        for (size_t i = 0; i < s->n_slots; i++)
                registry_release(s->m->registry, s->slots[i].program);
        free(s->slots);
        policy_unref(s->policy);
        *s = (ProgramSet){ 0 };
}
