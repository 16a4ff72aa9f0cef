/*
 * retry.c - Retry (retry.h): SCG's RetryConfig checked as SCG binds and
 * validates it, and sy_retry_next, SCG's repeat/retry predicates:
 * iteration < retries, method listed, status listed or in a listed series
 * (or a listed exception), the next delay within `timeout`; the delay is
 * firstBackoff * factor^(n-1) capped at maxBackoff, then jittered
 * uniformly by +-randomFactor.
 */
#include "policy/retry.h"
#include "base/values.h"

#include <math.h>
#include <stdio.h>

#define KNOWN                                                                  \
    "retries, statuses, series, methods, exceptions, backoff.firstBackoff, "   \
    "backoff.maxBackoff, backoff.factor, backoff.basedOnPreviousValue, "       \
    "jitter.randomFactor, timeout"

static const char *const methods[] = {"GET",   "HEAD",   "POST",    "PUT",
                                      "PATCH", "DELETE", "OPTIONS", "TRACE"};
static const char *const series[] = {NULL,           "INFORMATIONAL",
                                     "SUCCESSFUL",   "REDIRECTION",
                                     "CLIENT_ERROR", "SERVER_ERROR"};
/* Java exception classes SCG configurations name, and what they cover. */
static const struct {
    const char *name;
    uint8_t covers;
} exceptions[] = {
    {"java.io.IOException", SY_RETRY_EX_CONNECT},
    {"java.net.ConnectException", SY_RETRY_EX_CONNECT},
    {"java.net.SocketException", SY_RETRY_EX_CONNECT},
    {"io.netty.channel.ConnectTimeoutException", SY_RETRY_EX_CONNECT},
    {"reactor.netty.http.client.PrematureCloseException", SY_RETRY_EX_CONNECT},
    {"java.util.concurrent.TimeoutException", SY_RETRY_EX_TIMEOUT},
    {"org.springframework.cloud.gateway.support.TimeoutException",
     SY_RETRY_EX_TIMEOUT},
    {"io.netty.handler.timeout.ReadTimeoutException", SY_RETRY_EX_TIMEOUT},
};

typedef struct list_ctx {
    sy__pargs *p;
    struct sy_retry_policy *r;
    const char *field;
} list_ctx;

static int item_text(const char *item, size_t len, char *buf, size_t cap) {
    if (len >= cap)
        len = cap - 1;
    memcpy(buf, item, len);
    buf[len] = '\0';
    return 0;
}

static int add_status(void *data, const char *item, size_t len) {
    list_ctx *c = data;
    char buf[64];
    const char *why = NULL;
    int code;
    item_text(item, len, buf, sizeof buf);
    if (!sy__value_status_enum(buf, &code, &why))
        return sy__parg_fail(c->p, SY_EARG, c->field, "'%s': %s", buf, why);
    c->r->statuses[(code - 100) / 64] |= 1ull << ((code - 100) % 64);
    return 0;
}

static int add_series(void *data, const char *item, size_t len) {
    list_ctx *c = data;
    for (int i = 1; i <= 5; i++)
        if (sy__parg_enum_eq(item, len, series[i])) {
            c->r->series |= (uint8_t)(1u << i);
            return 0;
        }
    return sy__parg_fail(c->p, SY_EARG, c->field,
                         "'%.*s' is not a series (INFORMATIONAL, SUCCESSFUL, "
                         "REDIRECTION, CLIENT_ERROR, SERVER_ERROR)",
                         (int)(len > 60 ? 60 : len), item);
}

static int add_method(void *data, const char *item, size_t len) {
    list_ctx *c = data;
    for (size_t i = 0; i < SY_ARRAY_LEN(methods); i++)
        if (strlen(methods[i]) == len &&
            sy__str_ieq((sy_str){item, len}, methods[i], len)) {
            c->r->methods |= (uint16_t)(1u << i);
            return 0;
        }
    return sy__parg_fail(c->p, SY_EARG, c->field,
                         "'%.*s' is not an HTTP method (GET, HEAD, POST, PUT, "
                         "PATCH, DELETE, OPTIONS, TRACE)",
                         (int)(len > 60 ? 60 : len), item);
}

static int add_exception(void *data, const char *item, size_t len) {
    list_ctx *c = data;
    for (size_t i = 0; i < SY_ARRAY_LEN(exceptions); i++)
        if (strlen(exceptions[i].name) == len &&
            memcmp(exceptions[i].name, item, len) == 0) {
            c->r->exceptions |= exceptions[i].covers;
            return 0;
        }
    return sy__parg_fail(c->p, SY_EARG, c->field,
                         "'%.*s': not an exception this host can tell "
                         "(java.io.IOException, java.net.ConnectException, "
                         "java.util.concurrent.TimeoutException, ...)",
                         (int)(len > 80 ? 80 : len), item);
}

static int list(sy__pargs *p, struct sy_retry_policy *r, const char *field,
                int (*fn)(void *, const char *, size_t), bool *present) {
    list_ctx c = {p, r, field};
    return sy__parg_list(p, field, fn, &c, present);
}

int sy__retry_compile(sy__pargs *p, struct sy_retry_policy *r) {
    memset(r, 0, sizeof *r);
    int64_t retries = 3;
    int rc;
    if ((rc = sy__parg_int(p, "retries", 1, INT32_MAX, &retries, NULL)))
        return rc == SY_ERANGE ? sy__parg_fail(p, SY_ERANGE, "retries",
                                               "retries must be greater than 0")
                               : rc;
    r->retries = (uint32_t)retries;
    bool has;
    if ((rc = list(p, r, "statuses", add_status, &has)))
        return rc;
    if ((rc = list(p, r, "series", add_series, &has)))
        return rc;
    if (!has)
        r->series = 1u << 5; /* SERVER_ERROR */
    if ((rc = list(p, r, "methods", add_method, &has)))
        return rc;
    if (!has)
        r->methods = 1u; /* GET */
    if ((rc = list(p, r, "exceptions", add_exception, &has)))
        return rc;
    if (!has)
        r->exceptions = SY_RETRY_EX_CONNECT | SY_RETRY_EX_TIMEOUT;
    if (!r->methods)
        return sy__parg_fail(p, SY_EARG, "methods", "methods may not be empty");
    bool any_status = r->series;
    for (size_t i = 0; i < SY_ARRAY_LEN(r->statuses); i++)
        any_status |= r->statuses[i] != 0;
    if (!any_status && !r->exceptions) /* a Retry that never retries */
        return sy__parg_fail(p, SY_EARG, "exceptions",
                             "series, statuses and exceptions may not all "
                             "be empty");
    /* backoff: present when any of its fields is */
    int64_t first = 5, max = 0, factor = 2;
    bool f1 = false, f2 = false, f3 = false;
    r->based_on_previous = true;
    if ((rc = sy__parg_duration(p, "backoff.firstBackoff", 0, &first, &f1)) ||
        (rc = sy__parg_duration(p, "backoff.maxBackoff", 0, &max, &f2)) ||
        (rc = sy__parg_int(p, "backoff.factor", 1, 1000, &factor, &f3)))
        return rc;
    bool f4 = sy__parg(p, "backoff.basedOnPreviousValue", &rc) != NULL;
    if (rc || (rc = sy__parg_bool(p, "backoff.basedOnPreviousValue",
                                  &r->based_on_previous)))
        return rc;
    r->backoff = f1 || f2 || f3 || f4;
    r->first_ms = (uint32_t)(first < UINT32_MAX ? first : UINT32_MAX);
    r->max_ms = (uint32_t)(max < UINT32_MAX ? max : UINT32_MAX);
    r->factor = (uint32_t)factor;
    if (r->backoff && f2 && r->max_ms < r->first_ms)
        return sy__parg_fail(p, SY_ERANGE, "backoff.maxBackoff",
                             "is below backoff.firstBackoff");
    r->random_factor = 0.5; /* SCG's default once jitter is given */
    if ((rc = sy__parg_float(p, "jitter.randomFactor", 0, false, 1,
                             &r->random_factor, &r->jitter)))
        return rc;
    int64_t timeout = -1;
    bool has_t;
    if ((rc = sy__parg_duration(p, "timeout", 0, &timeout, &has_t)))
        return rc;
    r->timeout_ms = has_t ? timeout : -1;
    return sy__parg_unknown(p, KNOWN);
}

static int method_bit(sy_str m) {
    for (size_t i = 0; i < SY_ARRAY_LEN(methods); i++)
        if (sy__str_eq(m, methods[i], strlen(methods[i])))
            return (int)i;
    return -1;
}

/* The delay before retry number n (1-based). */
static uint64_t delay_of(const sy_retry_policy *p, uint32_t n,
                         uint64_t random) {
    if (!p->backoff)
        return 0;
    double d = (double)p->first_ms * pow((double)p->factor, (double)n - 1);
    if (p->max_ms && d > p->max_ms)
        d = p->max_ms;
    if (d > (double)UINT32_MAX) /* what the delay's type holds */
        d = (double)UINT32_MAX;
    uint64_t ms = (uint64_t)d;
    if (p->jitter && p->random_factor > 0) {
        uint64_t off = (uint64_t)((double)ms * p->random_factor);
        uint64_t lo = ms > off ? ms - off : 0, hi = ms + off;
        /* as Reactor's: never below firstBackoff nor above maxBackoff */
        if (lo < p->first_ms)
            lo = p->first_ms < ms ? p->first_ms : ms;
        if (p->max_ms && hi > p->max_ms)
            hi = p->max_ms > ms ? p->max_ms : ms;
        ms = lo + random % (hi - lo + 1);
    }
    return ms;
}

bool sy_retry_next(const sy_retry_policy *p, uint32_t done, sy_str method,
                   sy_outcome outcome, int status, uint64_t elapsed_ms,
                   uint64_t random, uint32_t *delay_ms) {
    if (delay_ms)
        *delay_ms = 0;
    if (!p || done >= p->retries)
        return false;
    int mb = method_bit(method);
    if (mb < 0 || !(p->methods >> mb & 1))
        return false;
    bool yes = false;
    if (outcome == SY_OUTCOME_CONNECT_FAILURE)
        yes = p->exceptions & SY_RETRY_EX_CONNECT;
    else if (outcome == SY_OUTCOME_TIMEOUT)
        yes = p->exceptions & SY_RETRY_EX_TIMEOUT;
    else if (status >= 100 && status <= 599)
        yes = (p->statuses[(status - 100) / 64] >> ((status - 100) % 64) & 1) ||
              (p->series >> (status / 100) & 1);
    if (!yes)
        return false;
    uint64_t d = delay_of(p, done + 1, random);
    if (p->timeout_ms >= 0 && elapsed_ms + d >= (uint64_t)p->timeout_ms)
        return false;
    if (delay_ms)
        *delay_ms = (uint32_t)(d < UINT32_MAX ? d : UINT32_MAX);
    return true;
}

void sy_retry_policy_info(const sy_retry_policy *p, sy_retry_info *out) {
    if (!out)
        return;
    memset(out, 0, sizeof *out);
    out->timeout_ms = -1;
    if (!p)
        return;
    out->retries = p->retries;
    out->first_backoff_ms = p->backoff ? p->first_ms : 0;
    out->max_backoff_ms = p->backoff ? p->max_ms : 0;
    out->factor = p->backoff ? p->factor : 0;
    out->based_on_previous = p->based_on_previous;
    out->jitter = p->jitter ? p->random_factor : 0;
    out->timeout_ms = p->timeout_ms;
}
