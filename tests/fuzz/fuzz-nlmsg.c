/* fuzz-nlmsg.c: parsing of kernel answers (filters, links, acks) walks untrusted lengths. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "nl-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        /* Netlink buffers are aligned; copy so that the parser sees what a recv() would give it. */
        static char buf[NL_RECV_BUFFER_SIZE] __attribute__((aligned(8)));
        size_t left = size;

        if (size > sizeof(buf))
                return 0;
        memcpy(buf, data, size);
        for (const struct nlmsghdr *h = (const void *) buf; nl_msg_ok(h, left);) {
                size_t step = MIN((size_t) NLMSG_ALIGN(h->nlmsg_len), left);
                NlFilter f;
                NlLink l;
                char msg[128];
                (void) nl_filter_parse(h, &f);
                (void) nl_link_parse(h, &l);
                if (h->nlmsg_type == NLMSG_ERROR)
                        (void) nl_ack_parse(h, msg, sizeof(msg));
                left -= step;
                h = (const void *) ((const char *) h + step);
        }
        return 0;
}
