/* fuzz-http-response.c: clsctl parses whatever answers on the socket. */
#include <stddef.h>
#include <stdint.h>

#include "http-client.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        HttpResponse *r = NULL;

        if (http_response_parse((const char *) data, size, size > 0 && data[0] == 'H', &r) >= 0)
                http_response_free(r);
        return 0;
}
