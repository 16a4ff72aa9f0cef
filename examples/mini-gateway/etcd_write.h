/*
 * etcd_write.h - admin changes written through to etcd, so that every
 * gateway of a fleet applies them (each from its own watch) instead of the
 * one that was asked. A route source's whole document is one key
 * (PREFIX routes/<source>); a service's instances are its keys
 * (PREFIX instances/<service>/<id>). Each write is one etcd transaction
 * that holds only while the keys are as this gateway last saw them (a
 * compare on each key's mod_revision): a write by anyone else meanwhile
 * makes it fail, and the caller answers 409.
 *
 * Threads: the loop's thread of the etcd source (the gateway's main
 * thread).
 */
#ifndef GW_ETCD_WRITE_H
#define GW_ETCD_WRITE_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "etcd_source.h"

/* The outcome, once: status 200 (etcd accepted it; revision is the
 * transaction's), 409 (a key changed since this gateway saw it: nothing
 * written), 502 (no endpoint answered; msg says what failed). */
typedef void (*gw_etcd_write_cb)(void *data, int status, int64_t revision,
                                 const char *msg);

/* Put `json` (NULL: delete the key) as PREFIX routes/<source>. 0, or -1
 * (out of memory) and the callback is not called. */
int gw_etcd_write_source(gw_etcd *e, const char *source, const char *json,
                         size_t len, gw_etcd_write_cb cb, void *data);

/* Make the service's instance keys the entries of `list` (a JSON array
 * of instance objects, each with its "id"): put each, delete the keys of
 * instances not in it. 0, or -1 (out of memory, an entry without an
 * "id": msg filled) and the callback is not called. */
int gw_etcd_write_instances(gw_etcd *e, const char *service, const cJSON *list,
                            gw_etcd_write_cb cb, void *data, char *msg,
                            size_t cap);

/* The full key of a source (PREFIX routes/<source>) into out. */
void gw_etcd_source_key(gw_etcd *e, const char *source, char *out, size_t cap);

#endif
