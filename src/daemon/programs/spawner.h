/* spawner.h: a thread that starts worker processes (spawner.c), so that the loop never waits for an exec. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

/* The fd a worker finds its socket on. */
#define SPAWNER_WORKER_FD 3

typedef struct Spawner Spawner;

/* A start answered, in the loop: the process (error 0) or why not (a positive errno). */
typedef void (*SpawnedFunc)(void *cookie, pid_t pid, int error, void *userdata);

/* A spawner of exe (argv "clsd --worker"; environ, or one a sanitizer's options need); spawned() is told of
 * each start. */
int spawner_new(sd_event *event, const char *exe, SpawnedFunc spawned, void *userdata, Spawner **ret);
/* Starts a worker whose socket (child_sock, left open: the caller closes it once told) becomes its fd 3;
 * cookie comes back with the answer. */
int spawner_submit(Spawner *s, void *cookie, int child_sock);
/* Stops the thread; the answers it gave and the loop did not read go to spawned() from here. */
Spawner *spawner_free(Spawner *s);
