/* curl-loop.c: libcurl's multi interface driven by sd-event: curl says which sockets to watch and
 * when to time out (CURLMOPT_SOCKETFUNCTION, CURLMOPT_TIMERFUNCTION), the loop tells it what happened
 * (curl_api.multi_socket_action()), and each finished transfer is handed to its callback. */
#include <stdlib.h>

#include "dl.h"
#include "etcd-curl-loop.h"
#include "log.h"

struct CurlLoop {
        sd_event *event;
        CURLM *multi;
        sd_event_source *timer;
};

typedef struct Transfer {
        CurlDoneFunc done;
        void *userdata;
} Transfer;

/* Every transfer that finished is answered to its done. */
static void transfers_finished(CurlLoop *l) {
        CURLMsg *msg;
        int left;

        while ((msg = curl_api.multi_info_read(l->multi, &left))) {
                Transfer *t = NULL;
                CURL *easy = msg->easy_handle;
                CURLcode result = msg->data.result;

                if (msg->msg != CURLMSG_DONE)
                        continue;
                curl_api.easy_getinfo(easy, CURLINFO_PRIVATE, (char **) &t);
                curl_api.multi_remove_handle(l->multi, easy);
                curl_api.easy_setopt(easy, CURLOPT_PRIVATE, NULL);
                if (t) {
                        CurlDoneFunc done = t->done;
                        void *userdata = t->userdata;
                        free(t);
                        done(l, easy, result, userdata);
                }
        }
}

static void act(CurlLoop *l, curl_socket_t fd, int flags) {
        int running;

        (void) curl_api.multi_socket_action(l->multi, fd, flags, &running);
        transfers_finished(l);
}

static int on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        int flags = 0;

        (void) s;
        if (revents & (EPOLLIN | EPOLLHUP))
                flags |= CURL_CSELECT_IN;
        if (revents & EPOLLOUT)
                flags |= CURL_CSELECT_OUT;
        if (revents & EPOLLERR)
                flags |= CURL_CSELECT_ERR;
        act(userdata, fd, flags);
        return 0;
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        (void) s, (void) usec;
        act(userdata, CURL_SOCKET_TIMEOUT, 0);
        return 0;
}

static int on_socket(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp) {
        CurlLoop *l = userp;
        sd_event_source *io = socketp;
        uint32_t events = (what == CURL_POLL_IN      ? EPOLLIN
                           : what == CURL_POLL_OUT   ? EPOLLOUT
                           : what == CURL_POLL_INOUT ? EPOLLIN | EPOLLOUT
                                                     : 0);

        (void) easy;
        if (what == CURL_POLL_REMOVE) {
                sd_event_source_disable_unref(io);
                curl_api.multi_assign(l->multi, fd, NULL);
                return 0;
        }
        if (io) {
                (void) sd_event_source_set_io_events(io, events);
                return 0;
        }
        if (sd_event_add_io(l->event, &io, fd, events, on_io, l) < 0) {
                log_error("fleet: cannot watch a socket of libcurl");
                return -1;
        }
        curl_api.multi_assign(l->multi, fd, io);
        return 0;
}

static int on_timeout(CURLM *multi, long timeout_ms, void *userp) {
        CurlLoop *l = userp;
        uint64_t now;

        (void) multi;
        if (timeout_ms < 0)
                return l->timer ? sd_event_source_set_enabled(l->timer, SD_EVENT_OFF) < 0 ? -1 : 0 : 0;
        (void) sd_event_now(l->event, CLOCK_MONOTONIC, &now);
        uint64_t when = now + (uint64_t) timeout_ms * 1000;
        if (!l->timer)
                /* accuracy 1 µs: sd-event would otherwise let it fire up to 250 ms late */
                return sd_event_add_time(l->event, &l->timer, CLOCK_MONOTONIC, when, 1, on_timer, l) < 0 ? -1
                                                                                                         : 0;
        if (sd_event_source_set_time(l->timer, when) < 0 ||
            sd_event_source_set_enabled(l->timer, SD_EVENT_ONESHOT) < 0)
                return -1;
        return 0;
}

int curl_loop_new(sd_event *event, CurlLoop **ret) {
        CurlLoop *l = calloc(1, sizeof(*l));

        if (!l)
                return -ENOMEM;
        if (curl_api.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK || !(l->multi = curl_api.multi_init())) {
                free(l);
                return -ENOMEM;
        }
        l->event = sd_event_ref(event);
        curl_api.multi_setopt(l->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
        curl_api.multi_setopt(l->multi, CURLMOPT_SOCKETDATA, l);
        curl_api.multi_setopt(l->multi, CURLMOPT_TIMERFUNCTION, on_timeout);
        curl_api.multi_setopt(l->multi, CURLMOPT_TIMERDATA, l);
        *ret = l;
        return 0;
}

void curl_loop_remove(CurlLoop *l, CURL *easy) {
        Transfer *t = NULL;

        if (!easy)
                return;
        curl_api.easy_getinfo(easy, CURLINFO_PRIVATE, (char **) &t);
        if (!t)
                return; /* not running */
        curl_api.multi_remove_handle(l->multi, easy);
        curl_api.easy_setopt(easy, CURLOPT_PRIVATE, NULL);
        free(t);
}

CurlLoop *curl_loop_free(CurlLoop *l) {
        if (!l)
                return NULL;
        curl_api.multi_cleanup(l->multi);
        sd_event_source_disable_unref(l->timer);
        sd_event_unref(l->event);
        free(l);
        return NULL;
}

int curl_loop_add(CurlLoop *l, CURL *easy, CurlDoneFunc done, void *userdata) {
        Transfer *t = calloc(1, sizeof(*t));

        if (!t)
                return -ENOMEM;
        t->done = done;
        t->userdata = userdata;
        curl_api.easy_setopt(easy, CURLOPT_PRIVATE, t);
        if (curl_api.multi_add_handle(l->multi, easy) != CURLM_OK) {
                curl_api.easy_setopt(easy, CURLOPT_PRIVATE, NULL);
                free(t);
                return -ENOMEM;
        }
        return 0;
}
