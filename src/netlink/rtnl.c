/* rtnl.c: rtnetlink sockets: strict checking, extended acks, request/ack matching, event reads. */
#include <linux/netlink.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>

#include "log.h"
#include "nl-internal.h"
#include "nl-map.h"

/* A request socket never waits for the kernel longer than this. */
#define NL_REQUEST_TIMEOUT_SEC 5
/* The event socket's buffer: large enough for a burst of link and tc events between two reads. */
#define NL_EVENT_RCVBUF (4 * 1024 * 1024)

NlSocket *nl_socket_free(NlSocket *s) {
        if (!s)
                return NULL;
        if (s->mnl)
                mnl_socket_close(s->mnl);
        free(s->buf);
        free(s);
        return NULL;
}

int nl_socket_fd(const NlSocket *s) {
        return mnl_socket_get_fd(s->mnl);
}

uint32_t nl_socket_next_seq(NlSocket *s) {
        return ++s->seq;
}

int nl_socket_open(unsigned groups, NlSocket **ret, Error *reterr) {
        _cleanup_(nl_socket_freep) NlSocket *s = calloc(1, sizeof(*s));
        int one = 1;

        if (!s || !(s->buf = malloc(NL_RECV_BUFFER_SIZE)))
                return error_oom(reterr);
        s->mnl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC | (groups ? SOCK_NONBLOCK : 0));
        if (!s->mnl)
                return error_set(reterr, errno, ERROR_KERNEL_ERROR, "cannot open rtnetlink socket: %m");
        (void) mnl_socket_setsockopt(s->mnl, NETLINK_EXT_ACK, &one, sizeof(one));
        (void) mnl_socket_setsockopt(s->mnl, NETLINK_CAP_ACK, &one, sizeof(one));
        (void) mnl_socket_setsockopt(s->mnl, NETLINK_GET_STRICT_CHK, &one, sizeof(one));
        if (groups) {
                int size = NL_EVENT_RCVBUF;
                if (setsockopt(nl_socket_fd(s), SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size)) < 0)
                        (void) setsockopt(nl_socket_fd(s), SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
        } else {
                struct timeval tv = { .tv_sec = NL_REQUEST_TIMEOUT_SEC };
                (void) setsockopt(nl_socket_fd(s), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        }
        if (mnl_socket_bind(s->mnl, groups, MNL_SOCKET_AUTOPID) < 0)
                return error_set(reterr, errno, ERROR_KERNEL_ERROR, "cannot bind rtnetlink socket: %m");
        s->portid = mnl_socket_get_portid(s->mnl);
        s->seq = (uint32_t) time(NULL);
        *ret = TAKE_PTR(s);
        return 0;
}

typedef struct AckContext {
        char extack[512];
} AckContext;

static void parse_extack(const struct nlmsghdr *nlh, AckContext *ctx);

int nl_ack_parse(const struct nlmsghdr *nlh, char *extack, size_t size) {
        AckContext ctx = { { 0 } };

        if (nlh->nlmsg_type != NLMSG_ERROR || nlh->nlmsg_len < mnl_nlmsg_size(sizeof(struct nlmsgerr)))
                return -EBADMSG;
        parse_extack(nlh, &ctx);
        snprintf(extack, size, "%s", ctx.extack);
        return ((const struct nlmsgerr *) mnl_nlmsg_get_payload(nlh))->error;
}

/* Finds NLMSGERR_ATTR_MSG in an extended ack. */
static void parse_extack(const struct nlmsghdr *nlh, AckContext *ctx) {
        const struct nlmsgerr *err = mnl_nlmsg_get_payload(nlh);
        size_t off = sizeof(*err);
        const struct nlattr *attr;

        if (!(nlh->nlmsg_flags & NLM_F_ACK_TLVS))
                return;
        if (!(nlh->nlmsg_flags & NLM_F_CAPPED))
                off += err->msg.nlmsg_len - sizeof(struct nlmsghdr);
        if (off >= mnl_nlmsg_get_payload_len(nlh))
                return;
        const void *tlvs = (const char *) err + off;
        mnl_attr_for_each_payload(tlvs, mnl_nlmsg_get_payload_len(nlh) - off) {
                if (mnl_attr_get_type(attr) == NLMSGERR_ATTR_MSG &&
                    mnl_attr_validate(attr, MNL_TYPE_NUL_STRING) >= 0)
                        snprintf(ctx->extack, sizeof(ctx->extack), "%s", mnl_attr_get_str(attr));
        }
}

static int ack_error_cb(const struct nlmsghdr *nlh, void *data) {
        const struct nlmsgerr *err = mnl_nlmsg_get_payload(nlh);
        AckContext *ctx = data;

        if (nlh->nlmsg_len < mnl_nlmsg_size(sizeof(struct nlmsgerr))) {
                errno = EBADMSG;
                return MNL_CB_ERROR;
        }
        parse_extack(nlh, ctx);
        if (err->error == 0)
                return MNL_CB_STOP;
        errno = -err->error;
        return MNL_CB_ERROR;
}

typedef struct RunContext {
        AckContext ack;
        mnl_cb_t cb;
        void *userdata;
} RunContext;

static int run_data_cb(const struct nlmsghdr *nlh, void *data) {
        RunContext *rc = data;
        return rc->cb ? rc->cb(nlh, rc->userdata) : MNL_CB_OK;
}

static int run_error_cb(const struct nlmsghdr *nlh, void *data) {
        RunContext *rc = data;
        return ack_error_cb(nlh, &rc->ack);
}

/* The end of a dump; a dump that failed half-way carries the error in its payload. */
static int run_done_cb(const struct nlmsghdr *nlh, void *data) {
        (void) data;
        if (mnl_nlmsg_get_payload_len(nlh) >= sizeof(int)) {
                int err = *(const int *) mnl_nlmsg_get_payload(nlh);
                if (err < 0) {
                        errno = -err;
                        return MNL_CB_ERROR;
                }
        }
        return MNL_CB_STOP;
}

static NlRequestCounts request_counts;

NlRequestCounts nl_request_counts(void) {
        return request_counts;
}

/* Reads the answer to the request seq: its messages to cb, then its ack. */
static int read_answer(NlSocket *s, uint32_t seq, mnl_cb_t cb, void *userdata, const char *what,
                       Error *reterr) {
        mnl_cb_t ctl[NLMSG_MIN_TYPE] = { [NLMSG_ERROR] = run_error_cb, [NLMSG_DONE] = run_done_cb };
        RunContext rc = { .cb = cb, .userdata = userdata };
        int r;

        for (;;) {
                ssize_t n = mnl_socket_recvfrom(s->mnl, s->buf, NL_RECV_BUFFER_SIZE);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return error_set(reterr, errno == EAGAIN ? ETIMEDOUT : errno, ERROR_KERNEL_ERROR,
                                         "%s: no answer from rtnetlink: %m", what);
                }
                /* An answer to an earlier request (one that timed out, or a dump we stopped reading) has
                 * another sequence number: skip it, or every later request would read the wrong answer.
                 * A datagram holds the messages of one answer, so its first header tells. */
                if (nl_msg_ok((const struct nlmsghdr *) s->buf, (size_t) n) &&
                    ((const struct nlmsghdr *) s->buf)->nlmsg_seq != seq) {
                        log_debug("%s: skipping a stale rtnetlink answer (seq %u, want %u)", what,
                                  ((const struct nlmsghdr *) s->buf)->nlmsg_seq, seq);
                        continue;
                }
                r = mnl_cb_run2(s->buf, (size_t) n, seq, s->portid, run_data_cb, &rc, ctl, ELEMENTSOF(ctl));
                if (r < 0) {
                        int e = errno;
                        log_debug("%s: %s%s%s", what, strerror(e), rc.ack.extack[0] ? ": " : "",
                                  rc.ack.extack);
                        if (rc.ack.extack[0])
                                return error_set(reterr, e, ERROR_KERNEL_ERROR, "%s: %s (%s)", what,
                                                 rc.ack.extack, strerror(e));
                        return error_set(reterr, e, ERROR_KERNEL_ERROR, "%s: %s", what, strerror(e));
                }
                if (r == MNL_CB_STOP)
                        return 0;
        }
}

struct nlmsghdr *nl_msg_dump(void *buf, uint16_t type, size_t extra, NlSocket *s) {
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);

        nlh->nlmsg_type = type;
        nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
        nlh->nlmsg_seq = nl_socket_next_seq(s);
        (void) mnl_nlmsg_put_extra_header(nlh, extra);
        return nlh;
}

static void count_request(const struct nlmsghdr *nlh) {
        if ((nlh->nlmsg_flags & NLM_F_DUMP) == NLM_F_DUMP)
                request_counts.dumps++;
        else
                request_counts.others++;
}

int nl_defer(NlSocket *s, const struct nlmsghdr *nlh, const char *what, int *ret, Error *reterr) {
        if (s->has_deferred || nlh->nlmsg_len > sizeof(s->deferred_buf))
                return -EBUSY;
        memcpy(s->deferred_buf, nlh, nlh->nlmsg_len);
        ((struct nlmsghdr *) s->deferred_buf)->nlmsg_flags |= NLM_F_ACK;
        s->deferred_len = nlh->nlmsg_len;
        s->deferred = (NlDeferred){ .seq = nlh->nlmsg_seq, .what = what, .ret = ret, .error = reterr };
        s->has_deferred = true;
        *ret = 0;
        return 0;
}

/* The deferred request's answer, read ahead of the request it went out with. */
static void deferred_answer(NlSocket *s, int send_error) {
        NlDeferred d = s->deferred;

        s->has_deferred = false;
        s->deferred_len = 0;
        if (send_error)
                *d.ret = error_set(d.error, send_error, ERROR_KERNEL_ERROR,
                                   "%s: cannot send to rtnetlink: %s", d.what, strerror(send_error));
        else
                *d.ret = read_answer(s, d.seq, NULL, NULL, d.what, d.error);
}

int nl_flush(NlSocket *s) {
        int e = 0;

        if (!s->has_deferred)
                return 0;
        request_counts.sends++;
        if (mnl_socket_sendto(s->mnl, s->deferred_buf, s->deferred_len) < 0)
                e = errno;
        deferred_answer(s, e);
        return 0;
}

int nl_request(NlSocket *s, struct nlmsghdr *nlh, mnl_cb_t cb, void *userdata, const char *what,
               Error *reterr) {
        ssize_t sent;

        nlh->nlmsg_flags |= NLM_F_ACK;
        count_request(nlh);
        request_counts.sends++;
        if (s->has_deferred) {
                /* Both in one sendmsg: the kernel handles them in order, and answers in order. */
                struct iovec iov[2] = { { s->deferred_buf, s->deferred_len }, { nlh, nlh->nlmsg_len } };
                struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
                struct msghdr mh = {
                        .msg_name = &sa, .msg_namelen = sizeof(sa), .msg_iov = iov, .msg_iovlen = 2
                };
                count_request((const struct nlmsghdr *) s->deferred_buf);
                sent = sendmsg(mnl_socket_get_fd(s->mnl), &mh, 0);
                int e = sent < 0 ? errno : 0;
                deferred_answer(s, e);
                errno = e;
        } else
                sent = mnl_socket_sendto(s->mnl, nlh, nlh->nlmsg_len);
        if (sent < 0)
                return error_set(reterr, errno, ERROR_KERNEL_ERROR, "%s: cannot send to rtnetlink: %m",
                                 what);
        return read_answer(s, nlh->nlmsg_seq, cb, userdata, what, reterr);
}

bool nl_msg_ok(const struct nlmsghdr *nlh, size_t len) {
        return len >= sizeof(struct nlmsghdr) && nlh->nlmsg_len >= sizeof(struct nlmsghdr) &&
               nlh->nlmsg_len <= len;
}

int nl_socket_read_events(NlSocket *s, NlEventFunc cb, void *userdata) {
        for (;;) {
                ssize_t n = recv(nl_socket_fd(s), s->buf, NL_RECV_BUFFER_SIZE, MSG_DONTWAIT);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN)
                                return 0;
                        return -errno;
                }
                size_t left = (size_t) n;
                for (const struct nlmsghdr *nlh = (const void *) s->buf; nl_msg_ok(nlh, left);) {
                        size_t step = MIN((size_t) NLMSG_ALIGN(nlh->nlmsg_len), left);
                        int r = cb(nlh, userdata);
                        if (r < 0)
                                return r;
                        left -= step;
                        nlh = (const void *) ((const char *) nlh + step);
                }
        }
}
