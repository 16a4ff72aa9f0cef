/*
 * report.c - apply reports: building one (new, add an issue), freeing it,
 * and the public sy_report_* accessors. The router (router.c) fills a
 * report while it applies a change and hands it to the host.
 */
#include "router/report.h"

sy_report *sy__report_new(const sy__alloc *a, const char *src) {
    sy_report *rep = sy__calloc(a, 1, sizeof *rep);
    if (!rep)
        return NULL;
    rep->alloc = *a;
    rep->failed_change = -1;
    if (src && !(rep->source = sy__strdup(a, src))) {
        sy__free(a, rep);
        return NULL;
    }
    return rep;
}

void sy_report_free(sy_report *rep) {
    if (!rep)
        return;
    sy__alloc a = rep->alloc;
    sy__free(&a, rep->source);
    sy__free(&a, rep->version);
    sy_diff_free(rep->diff);
    sy__free(&a, rep->issues);
    sy__service_diff_free(&rep->instances);
    sy__free(&a, rep->service);
    for (size_t i = 0; i < rep->part_count; i++)
        sy_report_free(rep->parts[i]);
    sy__free(&a, rep->parts);
    sy__free(&a, rep);
}

int sy__report_add_issue(sy_report *rep, const sy_error *e) {
    sy_error *n = sy__realloc(&rep->alloc, rep->issues,
                              (rep->issue_count + 1) * sizeof *n);
    if (!n)
        return SY_ENOMEM;
    rep->issues = n;
    rep->issues[rep->issue_count++] = *e;
    return SY_OK;
}

/* ---- accessors (a NULL report, which a failed call may leave, has
 * nothing: NULL, 0, false) ---- */

const char *sy_report_source(const sy_report *rep) {
    return rep ? rep->source : NULL;
}
const char *sy_report_version(const sy_report *rep) {
    return rep ? rep->version : NULL;
}
bool sy_report_skipped(const sy_report *rep) {
    return rep ? rep->skipped : false;
}
uint64_t sy_report_generation(const sy_report *rep) {
    return rep ? rep->generation : 0;
}
const sy_diff *sy_report_diff(const sy_report *rep) {
    return rep ? rep->diff : NULL;
}
uint64_t sy_report_parse_us(const sy_report *rep) {
    return rep ? rep->parse_us : 0;
}
uint64_t sy_report_publish_us(const sy_report *rep) {
    return rep ? rep->publish_us : 0;
}
size_t sy_report_issue_count(const sy_report *rep) {
    return rep ? rep->issue_count : 0;
}
const sy_error *sy_report_issue(const sy_report *rep, size_t i) {
    return rep && i < rep->issue_count ? &rep->issues[i] : NULL;
}
size_t sy_report_instances_added_count(const sy_report *rep) {
    return rep ? rep->instances.added_count : 0;
}
const char *sy_report_instance_added(const sy_report *rep, size_t i) {
    return rep && i < rep->instances.added_count ? rep->instances.added[i]
                                                 : NULL;
}
size_t sy_report_instances_removed_count(const sy_report *rep) {
    return rep ? rep->instances.removed_count : 0;
}
const char *sy_report_instance_removed(const sy_report *rep, size_t i) {
    return rep && i < rep->instances.removed_count ? rep->instances.removed[i]
                                                   : NULL;
}
size_t sy_report_instances_changed_count(const sy_report *rep) {
    return rep ? rep->instances.changed_count : 0;
}
const char *sy_report_instance_changed(const sy_report *rep, size_t i) {
    return rep && i < rep->instances.changed_count ? rep->instances.changed[i]
                                                   : NULL;
}

int sy__report_add_part(sy_report *rep, sy_report *part) {
    sy_report **v =
        sy__realloc(&rep->alloc, rep->parts, (rep->part_count + 1) * sizeof *v);
    if (!v)
        return SY_ENOMEM;
    rep->parts = v;
    rep->parts[rep->part_count++] = part;
    return SY_OK;
}

const char *sy_report_service(const sy_report *rep) {
    return rep ? rep->service : NULL;
}
bool sy_report_version_not_bumped(const sy_report *rep) {
    return rep && rep->version_not_bumped;
}
size_t sy_report_part_count(const sy_report *rep) {
    return rep ? rep->part_count : 0;
}
const sy_report *sy_report_part(const sy_report *rep, size_t i) {
    return rep && i < rep->part_count ? rep->parts[i] : NULL;
}
long sy_report_failed_change(const sy_report *rep) {
    return rep ? rep->failed_change : -1;
}
