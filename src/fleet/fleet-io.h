/* fleet-io.h: the node's calls to etcd (fleet-call.c), its statuses published (status.c), and etcd's wishes
 * applied (apply.c) */
#pragma once

#include "fleet-internal.h"

/* ---- fleet-call.c ---- */
/* The connection is lost (why): the session disconnects from the loop and reconnects with backoff. */
void fleet_lost(Fleet *f, const char *fmt, ...) _printf_(2, 3);
/* A call of the connection failed (e): etcd busy past the client's retries (etcd_overloaded) keeps the
 * connection, and what the call was for is done again soon (statuses published, steps said, the daemon
 * converged); a token etcd no longer knows is asked for again; anything else loses the connection. The
 * caller undoes first what it took as done. */
void fleet_call_failed(Fleet *f, const Error *e);
/* The next delay of the connection's backoff: doubling, up to a window sized by the fleet, drawn from its
 * upper half. */
uint64_t fleet_backoff_next(Fleet *f);
/* The fleet has nodes nodes (a count of their records): the backoffs follow it. */
void fleet_sized(Fleet *f, uint64_t nodes);
/* POSTs body (taken) to path; done gets the answer of a 200 or an error; cancel (may be NULL) is called
 * instead if the connection goes first. Out of memory: the connection is lost. */
void fleet_call(Fleet *f, const char *path, json_t *body, EtcdCallDone done, void (*cancel)(void *),
                void *userdata);
/* A write that needs no answer beyond success (status, record): a failure is the connection's. */
void fleet_on_written(EtcdAsync *a, json_t *answer, const Error *e, void *userdata);
/* A range's answer: its kvs (freed by the caller), or < 0 (an error: the connection lost). */
int fleet_range_answer(Fleet *f, json_t *answer, const Error *e, EtcdKv **ret, size_t *ret_n);
uint64_t fleet_now(Fleet *f);
/* What the node's status says changed (a rollout's step): status.c writes it soon, from the loop. */
void fleet_status_changed(Fleet *f);
/* What the node is to hold may have changed: apply.c converges soon, from the loop. */
void fleet_converge_soon(Fleet *f);
uint64_t fleet_realtime_ms(void);
/* A timer source of f's loop (made at first) set to fire once, usec from now. */
void fleet_timer_once(Fleet *f, sd_event_source **s, uint64_t usec, sd_event_time_handler_t handler);

/* ---- status.c ---- */
int status_start(Fleet *f);
/* This node's status of its policies, written soon (changes come in bursts) or now: with its record
 * when that changed, in one transaction. */
void status_later(Fleet *f);
void status_publish(Fleet *f);
/* The node's record (labels, kernel, the revision applied), written alone when it changed (at a
 * connection's start, and after another writer's change). */
void status_publish_record(Fleet *f);
/* Once a connection has published: keys under status/NODE/ it did not write go. */
void status_own_keys_check(Fleet *f);
/* The watch says one of this node's own keys changed (deleted: went). */
void status_own_key_seen(Fleet *f, const EtcdKv *kv, bool deleted);
/* A new lease: what was published is forgotten (written again under it). */
void status_reset(Fleet *f);
/* The connection went, its lease kept: what was being written is forgotten (written again). */
void status_unsent(Fleet *f);
void status_free(Fleet *f);

/* ---- apply.c ---- */
int apply_start(Fleet *f);
/* Converges the daemon on what etcd wants, from the loop: soon, or after usec. */
void apply_later(Fleet *f);
void apply_after(Fleet *f, uint64_t usec);
void apply_free(Fleet *f);

/* ---- policy-status.c ---- */
/* The node's status of the policy w names, as JSON (what status/NODE/POLICY holds). */
json_t *policy_status(Fleet *f, const Wanted *w);
