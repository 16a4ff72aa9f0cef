/*
 * host_runs.h - run or refuse: the host-run items (filters, uri schemes,
 * metadata keys whose effect needs the host), the lists of what the
 * project's own hosts run, and the membership test of a host's list.
 */
#ifndef SY_POLICY_HOST_RUNS_H
#define SY_POLICY_HOST_RUNS_H

#include "base/util.h"

/* The host-run item of a built-in filter name, a uri scheme ("forward",
 * "ws", ...) or a metadata key, or NULL when the library runs it whole. */
const char *sy__host_item_filter(const char *name);
const char *sy__host_item_scheme(const char *scheme);
const char *sy__host_item_metadata(const char *key);
/* True when `runs` (NULL: nothing declared) lets the host run `item`. */
bool sy__host_runs(const char *const *runs, const char *item);
/* True when `runs` lists "!PART": the host runs the item but not this
 * part of it ("!Retry.backoff": Retry without a wait between tries). */
bool sy__host_excludes(const char *const *runs, const char *part);
/* 0 when every entry of `runs` (NULL: nothing declared) is a host-run
 * item, "host=NAME" or a "!PART" the library knows; else SY_EINVAL naming
 * the first other one (a misspelled "!PART" would let the host accept,
 * then ignore, the part it cannot run). */
int sy__host_runs_check(const char *const *runs, sy_error *err);
/* The host's name from its list ("host=NAME" entry), or "this host". */
const char *sy__host_name(const char *const *runs, char *buf, size_t cap);

#endif
