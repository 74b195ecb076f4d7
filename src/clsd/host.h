/* host.h: what clsd takes from the host it runs on (host.c). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "api.h"
#include "daemon.h"

/* log.c's sink under journald: an entry with fields of its own. */
void host_journal_sink(int level, int error, const char *file, int line, const char *message);
/* Whether clsd has what it needs: CAP_NET_ADMIN (tc) and CAP_BPF or CAP_SYS_ADMIN (bpf(2)). */
bool host_privileged(void);
/* The fds systemd passed: "api" becomes ac->socket_fd; the fd store's ("prog.…", "act.…", "map.…",
 * "actmap.…") go to *ret for the daemon (freed with host_passed_fds_free(), their fds taken). */
int host_passed_fds(ApiConfig *ac, DaemonPassedFd **ret, size_t *ret_n);
void host_passed_fds_free(DaemonPassedFd *v, size_t n);
/* clsd-worker beside clsd (a build tree), else the one installed; NULL: clsd --worker. */
const char *host_worker_exe(char *buf, size_t size);
/* RLIMIT_NOFILE's soft limit raised to the hard one. */
void host_raise_fd_limit(void);
