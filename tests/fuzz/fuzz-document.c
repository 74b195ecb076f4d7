/* fuzz-document.c: the PUT document parser, the hog file parser and the document file parser take
 * outside input. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "store-internal.h"
#include "store-policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        Document *d = NULL;
        Error e = ERROR_NULL;

        if (document_from_string("eth0", (const char *) data, size, &d, &e) >= 0) {
                /* what clsd writes of a document, it reads back */
                json_t *j = document_spec_to_json(d);
                Document *again = NULL;
                if (document_from_json("eth0", j, &again, &e) < 0)
                        abort();
                document_unref(again);
                json_decref(j);
        }
        document_free(d);
        error_done(&e);

        d = NULL;
        if (document_hog_from_string((const char *) data, size, &d, &e) >= 0)
                document_free(d);
        error_done(&e);

        StoredDocument sd = { 0 };
        if (document_file_parse((const char *) data, size, &sd, &e) >= 0) {
                document_unref(sd.doc);
                document_facts_done(&sd.facts);
        }
        error_done(&e);
        return 0;
}
