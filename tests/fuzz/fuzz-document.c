/* fuzz-document.c: the PUT document parser, the hog file parser and the document file parser take
 * outside input. */
#include <stddef.h>
#include <stdint.h>

#include "store-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        Document *d = NULL;
        Error e = ERROR_NULL;

        if (document_from_string("eth0", (const char *) data, size, &d, &e) >= 0) {
                json_t *j = document_spec_to_json(d);
                Document *copy = NULL;
                if (document_copy(d, &copy) >= 0)
                        document_free(copy);
                json_decref(j);
        }
        document_free(d);
        error_done(&e);

        d = NULL;
        if (document_hog_from_string((const char *) data, size, &d, &e) >= 0)
                document_free(d);
        error_done(&e);

        d = NULL;
        if (document_file_parse((const char *) data, size, &d, &e) >= 0)
                document_free(d);
        error_done(&e);
        return 0;
}
