/* clsd-worker: the process clsd starts for each slow job (an object to inspect, a program to load): the
 * job on fd 3, an answer back, exit. Apart from clsd so that it links only what a job needs (libbpf,
 * libseccomp) and starts in a fraction of clsd's time; `clsd --worker` does the same when it is not
 * installed. See src/daemon/worker.c and src/netlink/worker.c. */
#include "log.h"
#include "nl.h"
#include "nl-worker.h"

int main(void) {
        log_open();
        nl_worker_main(3);
}
