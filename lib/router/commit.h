/*
 * commit.h - running a commit (commit.c): the router's single calls and
 * sy_router_commit both come here, with the writer lock held.
 */
#ifndef SY_COMMIT_H
#define SY_COMMIT_H

#include "router/change_set.h"
#include "router/router_int.h"

/*
 * Run `n` changes as one commit; the caller holds r->lock. `single`: a
 * one-change call, whose report is the part itself and whose messages
 * carry no "change N: " prefix. `dry`: run every step, then publish
 * nothing and change nothing (sy_router_check). *report (may be NULL) as the
 * public calls document.
 */
int sy__commit_run(sy_router *r, const sy__change *items, size_t n, bool single,
                   bool dry, sy_report **report, sy_error *err);

#endif
