/* attach-context.c: what every attach kind works with: the context of one interface's pass (made from
 * the manager), the programs a filter wants as a kind plans them, and the findings of a repair. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "attach.h"
#include "manager.h"

void attach_context_init(Manager *m, Iface *it, NlSocket *rtnl, AttachContext *ret) {
        *ret = (AttachContext){ .it = it,
                                .rtnl = rtnl,
                                .netns = m->netns,
                                .bpffs_dir = m->config.bpffs_dir,
                                .tcx = m->kernel.tcx };
}

uint32_t filter_want_id(const Filter *f, int action) {
        if (action < 0)
                return f->program ? program_id(f->program) : f->planned.prog_id;
        return f->actions[action] ? program_id(f->actions[action]) : f->planned_actions[action].prog_id;
}

const char *filter_want_tag(const Filter *f, int action) {
        if (action < 0)
                return f->program ? program_tag(f->program) : f->planned.tag;
        return f->actions[action] ? program_tag(f->actions[action]) : f->planned_actions[action].tag;
}

int filter_want_fd(const Filter *f, int action) {
        const Program *p = action < 0 ? f->program : f->actions[action];
        return p ? program_fd(p) : -1;
}

void attach_what(AttachContext *c, const char *fmt, ...) {
        size_t l;
        va_list ap;

        if (!c->what || c->what_size == 0)
                return;
        l = strlen(c->what);
        if (l > 0 && l + 2 < c->what_size) {
                strcpy(c->what + l, "; ");
                l += 2;
        }
        va_start(ap, fmt);
        vsnprintf(c->what + l, c->what_size - l, fmt, ap);
        va_end(ap);
}
