/*
 * service_hooks.c - the instance-selection benchmark of switchyard-bench
 * (the select cases), kept out of the shipped library. It goes through the same
 * calls the router does: sy__service_new, then sy__service_select.
 */
#include "hooks.h"
#include "service/service.h"

#include <stdio.h>
#include <time.h>

static double sy__svc_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

double sy__service_bench_select_ns(const char *policy, size_t instances,
                                   uint64_t iters) {
    sy__select_params p = SY_SELECT_PARAMS_INIT;
    if (!policy || !instances ||
        sy__lb_policy_parse(policy, strlen(policy), &p.policy))
        return -1;
    sy__alloc a;
    sy__alloc_init(&a, NULL);
    sy_instance *list = sy__calloc(&a, instances, sizeof *list);
    char *names = sy__calloc(&a, instances, 64);
    enum { NKEYS = 1024 };
    char(*keys)[24] = sy__calloc(&a, NKEYS, sizeof *keys);
    static const sy_kv zones[3][1] = {
        {{"zone", "z0"}}, {{"zone", "z1"}}, {{"zone", "z2"}}};
    double res = -1;
    sy__service *s = NULL;
    if (!list || !names || !keys)
        goto out;
    for (size_t i = 0; i < instances; i++) {
        char *id = names + i * 64, *host = id + 32;
        snprintf(id, 32, "inst-%zu", i);
        snprintf(host, 32, "10.%zu.%zu.%zu", i >> 16 & 255, i >> 8 & 255,
                 i & 255);
        list[i] = (sy_instance){.id = id,
                                .host = host,
                                .port = 8080,
                                .weight = (uint32_t)(i % 4 + 1),
                                .metadata = zones[i % 3],
                                .metadata_count = 1};
    }
    for (size_t k = 0; k < NKEYS; k++)
        snprintf(keys[k], sizeof keys[k], "user-%08zu", k * 7919);
    if (sy__service_new(&a, "bench", list, instances, &s, NULL))
        goto out;
    sy_selection sel;
    uint64_t sink = 0;
    for (uint64_t i = 0; i < 1000; i++) {
        p.seed = i;
        p.hash_key = (sy_str){keys[i % NKEYS], strlen(keys[i % NKEYS])};
        sy__service_select(s, &p, &sel, NULL);
        sink += sel.port;
    }
    double t0 = sy__svc_now_ns();
    for (uint64_t i = 0; i < iters; i++) {
        p.seed = i * 0x9e3779b97f4a7c15ull;
        p.hash_key.ptr = keys[i % NKEYS];
        p.hash_key.len = 13;
        if (sy__service_select(s, &p, &sel, NULL))
            goto out;
        sink += sel.port;
    }
    double t1 = sy__svc_now_ns();
    res = iters ? (t1 - t0) / (double)iters : 0;
    volatile uint64_t keep = sink; /* the loop's results are used */
    (void)keep;
out:
    sy__service_unref(s);
    sy__free(&a, list);
    sy__free(&a, names);
    sy__free(&a, keys);
    return res;
}
