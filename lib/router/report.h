/*
 * report.h - apply reports (internal): what one change to the router did
 * (source, version, skipped, generation, route diff, timings, issues,
 * instance changes). The router fills the fields directly; hosts read them
 * through the sy_report_* accessors in include/switchyard.h.
 */
#ifndef SY_REPORT_H
#define SY_REPORT_H

#include "service/service.h"

struct sy_report {
    sy__alloc alloc;
    char *source;
    char *version;
    bool skipped;
    uint64_t generation;
    sy_diff *diff;
    uint64_t parse_us, publish_us;
    sy_error *issues;
    size_t issue_count;
    sy__service_diff instances;
    char *service;            /* instance changes: the service */
    bool version_not_bumped;  /* applied with the live version's number */
    bool noop;                /* nothing to do (no event is delivered) */
    struct sy_report **parts; /* a commit's report: one per change */
    size_t part_count;
    long failed_change; /* index of the change that failed a commit, or -1 */
};

/* A new empty report for source `src` (may be NULL: not tied to a source);
 * NULL when out of memory. `a` is copied. Writer side. */
sy_report *sy__report_new(const sy__alloc *a, const char *src);
/* Append a copy of `e` to the report's issues: SY_OK or SY_ENOMEM. */
int sy__report_add_issue(sy_report *rep, const sy_error *e);
/* Append `part` (ownership moves to rep): SY_OK or SY_ENOMEM (part kept by
 * the caller). */
int sy__report_add_part(sy_report *rep, sy_report *part);

#endif
