/* pull-thread.c: a pull on a thread of its own (oci_pull() blocks for as long as a registry takes), its end
 * told to the loop through an eventfd; the loop calls done(). A cancelled job is freed by whichever of
 * the two comes last: the loop (cancel) or the thread's end. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <unistd.h>

#include "log.h"
#include "oci-internal.h"

struct OciPullJob {
        char *ref;
        OciPullOptions o;
        OciRegistry registry; /* a copy: the registries file may be read again meanwhile */
        int efd;
        sd_event_source *source;
        pthread_t thread;
        int r;
        OciImage image;
        Error error;
        OciPullDoneFunc done;
        void *userdata;
};

static void job_free(OciPullJob *j) {
        sd_event_source_disable_unref(j->source);
        safe_close(j->efd);
        free(j->ref);
        oci_registry_done(&j->registry);
        oci_image_done(&j->image);
        error_done(&j->error);
        free(j);
}

static void *run(void *userdata) {
        OciPullJob *j = userdata;
        uint64_t one = 1;

        if (j->o.jitter_msec > 0) {
                uint32_t wait;
                if (getrandom(&wait, sizeof(wait), 0) != sizeof(wait))
                        wait = (uint32_t) getpid();
                usleep((useconds_t) (wait % j->o.jitter_msec) * 1000);
        }
        j->r = oci_pull(j->ref, &j->o, &j->image, &j->error);
        if (write(j->efd, &one, sizeof(one)) != sizeof(one))
                log_error("oci: cannot wake the loop: %m");
        return NULL;
}

static int on_done(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        OciPullJob *j = userdata;
        uint64_t v;

        (void) s, (void) revents;
        if (read(fd, &v, sizeof(v)) != sizeof(v))
                return 0;
        pthread_join(j->thread, NULL);
        if (j->done)
                j->done(j->r, j->r < 0 ? NULL : &j->image, &j->error, j->userdata);
        job_free(j);
        return 0;
}

int oci_pull_start(sd_event *event, const char *ref, const OciPullOptions *o, OciPullDoneFunc done,
                   void *userdata, OciPullJob **ret) {
        OciPullJob *j = calloc(1, sizeof(*j));
        const OciRegistry *reg = o->registry;
        int r;

        if (!j)
                return -ENOMEM;
        j->efd = -1;
        j->o = *o;
        j->done = done;
        j->userdata = userdata;
        if (!(j->ref = strdup(ref)) || (reg && oci_registry_copy(reg, &j->registry) < 0)) {
                job_free(j);
                return -ENOMEM;
        }
        j->o.registry = reg ? &j->registry : NULL;
        /* libcurl's global state is made before any thread uses it */
        r = dl_load_curl(&j->error);
        if (r < 0) {
                job_free(j);
                return r;
        }
        j->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (j->efd < 0) {
                job_free(j);
                return -errno;
        }
        r = sd_event_add_io(event, &j->source, j->efd, EPOLLIN, on_done, j);
        if (r < 0) {
                job_free(j);
                return r;
        }
        r = -pthread_create(&j->thread, NULL, run, j);
        if (r < 0) {
                job_free(j);
                return r;
        }
        *ret = j;
        return 0;
}

void oci_pull_cancel(OciPullJob *j) {
        if (j)
                j->done = NULL;
}
