/* fleet-keys.h: the fleet's keys as clsctl reads them (fleet-keys.c). */
#pragma once

#include <stdio.h>

#include "ctl.h"
#include "etcd.h"

/* Who clsctl is to etcd: --fleet-ca/-cert/-key, --fleet-user and its password file. */
EtcdCredentials fleet_credentials(const Ctl *c);
int fleet_client(const Ctl *c, EtcdClient **ret);
const char *fleet_prefix_of(const Ctl *c);
/* POSTs body (taken) to path; a failure is reported (one line). */
int fleet_call(EtcdClient *ec, const char *path, json_t *body, json_t **ret);
/* The IDs of the leases etcd holds, as a JSON array of decimal strings. */
int fleet_live_leases(EtcdClient *ec, json_t **ret);
/* Every key under PREFIX kind/ as a JSON object: its value's members and "_key", "_revision"; a policy
 * no node can read has "_invalid"; with leases, "_lease" and "_bound". */
int fleet_range_json(EtcdClient *ec, const Ctl *c, const char *kind, json_t *leases, json_t **ret,
                     uint64_t *ret_revision);
/* The JSON value of one key and the revision that wrote it (NULL, 0: no such key, or not JSON). */
int fleet_get_json(EtcdClient *ec, const char *key, json_t **ret, uint64_t *ret_revision);
/* The keys under prefix (with their values, unless keys_only), oldest write first; freed with
 * etcd_kvs_free(). */
int fleet_range_kvs(EtcdClient *ec, const char *prefix, bool keys_only, EtcdKv **ret, size_t *ret_n);
/* "k=v,k2=v2" of a labels object, into f. */
void fleet_labels_print(FILE *f, json_t *labels);
/* The rows of kind in *ret (nodes: with their leases). */
int fleet_rows(const Ctl *c, const char *kind, json_t **ret);
/* The same; with --json they are printed and 1 returned. */
int fleet_listing(const Ctl *c, const char *kind, json_t **ret);
/* A fleet policy's file read as fleet apply reads it: parsed strictly, each object a digest (a file
 * uploaded to etcd when missing) or a pinned image; its name, and its envelope. */
int fleet_policy_file_read(EtcdClient *ec, const Ctl *c, const char *file, char **ret_name, json_t **ret);
