/* nl-internal.h: request/ack plumbing shared by the rtnetlink files of src/netlink/. */
#pragma once

#include <libmnl/libmnl.h>

#include "nl.h"

/* A request that goes out with the next one, in one sendmsg (nl_defer()). */
typedef struct NlDeferred {
        uint32_t seq;
        const char *what;
        int *ret;
        Error *error;
} NlDeferred;

struct NlSocket {
        struct mnl_socket *mnl;
        uint32_t portid;
        uint32_t seq;
        char *buf; /* NL_RECV_BUFFER_SIZE bytes */
        char deferred_buf[NL_MSG_BUFFER_SIZE]; /* the deferred request (one at a time) */
        size_t deferred_len;
        NlDeferred deferred;
        bool has_deferred;
};

uint32_t nl_socket_next_seq(NlSocket *s);
/* A dump request of type into buf (NL_MSG_BUFFER_SIZE), with a zeroed family header of extra bytes. */
struct nlmsghdr *nl_msg_dump(void *buf, uint16_t type, size_t extra, NlSocket *s);
/* Sends nlh (which must ask for an ack) and waits for the ack of its sequence number. The kernel's
 * extack message, if any, goes into reterr as "kernel_error" (code may be overridden by the caller). */
int nl_request(NlSocket *s, struct nlmsghdr *nlh, mnl_cb_t cb, void *userdata, const char *what,
               Error *reterr);
/* Keeps nlh (which needs no callback) to go out in the same sendmsg as the next request, ahead of it:
 * one round trip for two. Its answer is read first and lands in *ret (0 or -errno) and reterr, before
 * that request returns (or at nl_flush()). One at a time: -EBUSY if one waits already. */
int nl_defer(NlSocket *s, const struct nlmsghdr *nlh, const char *what, int *ret, Error *reterr);
/* Parses an NLMSG_ERROR: returns its error (0 for an ack) and copies the extack message. */
int nl_ack_parse(const struct nlmsghdr *nlh, char *extack, size_t size);

/* Confines an inspection's process for good: no privileges, a seccomp allowlist; a system call outside it
 * is answered on sock as NL_SANDBOX_REFUSED, and the process dies of SIGSYS. */
int nl_inspect_confine(int sock);
