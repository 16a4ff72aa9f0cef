/*
 * fuzz_document.c - libFuzzer target for route documents: every input is
 * parsed in strict and in lenient mode with small limits, and the result
 * (routes, canonical forms, issues) is walked and freed. SY_ENOMEM is a
 * crash: with real malloc it can only mean the pre-scan let through text
 * that cJSON then refused.
 */
#include "def/def.h"

#include <stddef.h>
#include <stdint.h>

static void walk(const sy_document *d) {
    volatile size_t sink = 0;
    for (size_t i = 0; i < sy_document_route_count(d); i++) {
        const sy_route *r = sy_document_route(d, i);
        sink += strlen(sy_route_canonical(r)) + sy_route_metadata_count(r);
        sink += sy_route_fingerprint(r) & 1u;
    }
    for (size_t i = 0; i < sy_document_issue_count(d); i++)
        sink += strlen(sy_document_issue(d, i)->path);
    (void)sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    for (int lenient = 0; lenient < 2; lenient++) {
        sy_parse_options o = SY_PARSE_OPTIONS_INIT;
        o.lenient = lenient != 0;
        o.limits.max_string_bytes = 4096;
        o.limits.max_routes = 1000;
        sy_document *d = NULL;
        sy_error e;
        int rc = sy_document_parse((const char *)data, size, &o, &d, &e);
        /* nothing fails to allocate here: SY_ENOMEM would mean the
         * pre-scan (def_scan.c) accepted text that cJSON refuses */
        if (rc == SY_ENOMEM)
            __builtin_trap();
        if (rc == 0) {
            walk(d);
            sy_document_free(d);
        }
    }
    /* the same bytes as one route and as default filters */
    struct sy_route *r = NULL;
    if (sy__def_parse_route((const char *)data, size, NULL, "route", &r,
                            NULL) == 0) {
        struct sy_route *off = NULL;
        if (sy__def_route_with_enabled(r, false, NULL, &off, NULL) == 0)
            sy__route_unref(off);
        sy__route_unref(r);
    }
    if (sy__def_parse_filters((const char *)data, size, NULL, &r, NULL) == 0)
        sy__route_unref(r);
    return 0;
}
