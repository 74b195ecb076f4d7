/* nl-internal.h: request/ack plumbing shared by the rtnetlink files of src/netlink/. */
#pragma once

#include <libmnl/libmnl.h>

#include "nl.h"

struct NlSocket {
        struct mnl_socket *mnl;
        uint32_t portid;
        uint32_t seq;
        char *buf; /* NL_RECV_BUFFER_SIZE bytes */
};

uint32_t nl_socket_next_seq(NlSocket *s);
/* Sends nlh (which must ask for an ack) and waits for the ack of its sequence number. The kernel's
 * extack message, if any, goes into reterr as "kernel_error" (code may be overridden by the caller). */
int nl_request(NlSocket *s, struct nlmsghdr *nlh, mnl_cb_t cb, void *userdata, const char *what,
               Error *reterr);
/* Parses an NLMSG_ERROR: returns its error (0 for an ack) and copies the extack message. */
int nl_ack_parse(const struct nlmsghdr *nlh, char *extack, size_t size);
