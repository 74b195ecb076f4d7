/* fleet-session.h: the session with etcd: login, lease, keepalive, reconnect (session.c), and the list and
 * the stream (watch.c) */
#pragma once

#include "fleet-internal.h"

/* ---- watch.c ---- */
int watch_setup(Fleet *f);
/* The fleet read: listed (the first time, or after a compaction), then watched from where it was. */
void watch_start(Fleet *f);
void watch_list(Fleet *f);
void watch_stop(Fleet *f);
void watch_free(Fleet *f);

/* ---- session.c ---- */
int session_start(Fleet *f);
void session_free(Fleet *f);
