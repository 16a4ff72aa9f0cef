/*
 * fuzz_instances.c - libFuzzer target for instances documents: every input
 * goes through sy_instances_parse; a parsed document is walked (every
 * service, instance and metadata pair) and fed to a router, then freed.
 */
#include "switchyard.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sy_instances *d = NULL;
    sy_error e;
    if (sy_instances_parse((const char *)data, size, NULL, &d, &e)) {
        volatile size_t sink = strlen(e.path) + strlen(e.message);
        (void)sink;
        return 0;
    }
    sy_router *r = NULL;
    if (sy_router_new(NULL, &r, NULL) == 0) {
        for (size_t i = 0; i < sy_instances_service_count(d); i++) {
            volatile size_t sink = strlen(sy_instances_service(d, i));
            for (size_t k = 0; k < sy_instances_count(d, i); k++) {
                const sy_instance *x = sy_instances_at(d, i, k);
                sink += strlen(x->id) + strlen(x->host) + x->port;
                for (size_t j = 0; j < x->metadata_count; j++)
                    sink += strlen(x->metadata[j].key) +
                            strlen(x->metadata[j].value);
            }
            (void)sink;
            /* everything the parse accepted, the router accepts */
            if (sy_router_set_instances(r, sy_instances_service(d, i),
                                        sy_instances_list(d, i),
                                        sy_instances_count(d, i), NULL, NULL))
                __builtin_trap();
        }
        sy_router_free(r);
    }
    sy_instances_free(d);
    return 0;
}
