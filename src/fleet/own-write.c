/* own-write.c: whose write a revision of one of this node's own keys is (its record, its status): a
 * revision after this node's last answered put, with none under way, is another writer's. */
#include "fleet-internal.h"

bool own_write_foreign(OwnWrite *w, uint64_t revision) {
        if (revision <= w->written)
                return false;
        if (w->inflight > 0) {
                w->seen = MAX(w->seen, revision);
                return false;
        }
        return true;
}

bool own_write_answered(OwnWrite *w, uint64_t revision) {
        bool foreign;

        if (w->inflight > 0)
                w->inflight--;
        w->written = MAX(w->written, revision);
        foreign = w->inflight == 0 && w->seen > w->written;
        if (w->inflight == 0)
                w->seen = 0;
        return foreign;
}
