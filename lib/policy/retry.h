/*
 * retry.h - Retry: its args as SCG binds them (retries, statuses, series,
 * methods, exceptions, backoff.*, jitter.randomFactor, timeout; the
 * 9-field shortcut) and the decision "retry? after how long?".
 */
#ifndef SY_POLICY_RETRY_H
#define SY_POLICY_RETRY_H

#include "policy/policy_args.h"

enum {
    SY_RETRY_EX_CONNECT = 1, /* connect failure, reset (IOException) */
    SY_RETRY_EX_TIMEOUT = 2  /* no answer in time (TimeoutException) */
};

struct sy_retry_policy {
    uint32_t retries;
    uint64_t statuses[8]; /* bit (status - 100) */
    uint8_t series;       /* bit n: series n (1 informational .. 5 server) */
    uint16_t methods;     /* bits of the known methods (retry.c) */
    uint8_t exceptions;   /* SY_RETRY_EX_* */
    bool backoff, jitter, based_on_previous;
    uint32_t first_ms, max_ms, factor; /* max_ms 0: no cap */
    double random_factor;
    int64_t timeout_ms; /* -1: none */
};

int sy__retry_compile(sy__pargs *p, struct sy_retry_policy *out);

#endif
