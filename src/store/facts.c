/* facts.c: what clsd attached last for a document (each filter's program and actions, by tag and id,
 * and whether it created the clsact qdisc), kept beside the document, never inside it. */
#include <string.h>

#include "store.h"

void document_facts_done(DocumentFacts *f) {
        free(f->filters);
        *f = (DocumentFacts){ 0 };
}

int document_facts_copy(const DocumentFacts *f, DocumentFacts *ret) {
        DocumentFacts c = { .clsact_created = f->clsact_created, .n_filters = f->n_filters };

        c.filters = calloc(f->n_filters + 1, sizeof(FilterFact));
        if (!c.filters)
                return -ENOMEM;
        if (f->n_filters > 0)
                memcpy(c.filters, f->filters, f->n_filters * sizeof(FilterFact));
        *ret = c;
        return 0;
}

const FilterFact *document_facts_find(const DocumentFacts *f, const char *name) {
        for (size_t i = 0; f && i < f->n_filters; i++)
                if (streq(f->filters[i].name, name))
                        return &f->filters[i];
        return NULL;
}

int document_facts_set(DocumentFacts *f, const FilterFact *fact) {
        FilterFact *v;

        for (size_t i = 0; i < f->n_filters; i++)
                if (streq(f->filters[i].name, fact->name)) {
                        f->filters[i] = *fact;
                        return 0;
                }
        v = realloc(f->filters, (f->n_filters + 1) * sizeof(FilterFact));
        if (!v)
                return -ENOMEM;
        f->filters = v;
        f->filters[f->n_filters++] = *fact;
        return 0;
}
