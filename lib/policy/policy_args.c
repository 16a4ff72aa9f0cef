/*
 * policy_args.c - the arg reader of the stateful filters (policy_args.h):
 * relaxed names, duplicate and unknown keys, typed values, located errors.
 */
#include "policy/policy_args.h"
#include "base/values.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static char relax(char c) {
    return (char)tolower((unsigned char)c);
}

bool sy__parg_name_eq(const char *a, const char *b) {
    for (;;) {
        while (*a == '-' || *a == '_')
            a++;
        while (*b == '-' || *b == '_')
            b++;
        if (!*a || !*b)
            return !*a && !*b;
        if (relax(*a) != relax(*b))
            return false;
        a++, b++;
    }
}

bool sy__parg_enum_eq(const char *t, size_t len, const char *name) {
    const char *end = t + len;
    for (;;) {
        while (t < end && !isalnum((unsigned char)*t))
            t++;
        while (*name && !isalnum((unsigned char)*name))
            name++;
        if (t == end || !*name)
            return t == end && !*name;
        if (relax(*t) != relax(*name))
            return false;
        t++, name++;
    }
}

int sy__parg_fail(sy__pargs *p, int code, const char *key, const char *fmt,
                  ...) {
    char msg[200], path[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (p->shortcut || !key)
        snprintf(path, sizeof path, "%s", p->path ? p->path : "");
    else
        snprintf(path, sizeof path, "%s.args.%s", p->path ? p->path : "", key);
    if (key)
        return sy__error_set(p->err, code, path, "%s: %s: %s", p->filter, key,
                             msg);
    return sy__error_set(p->err, code, path, "%s: %s", p->filter, msg);
}

const char *sy__parg(sy__pargs *p, const char *name, int *rc) {
    const char *v = NULL;
    for (size_t i = 0; i < p->count; i++) {
        if (!sy__parg_name_eq(p->args[i].key, name))
            continue;
        if (v) {
            *rc = sy__parg_fail(p, SY_EARG, p->args[i].key,
                                "given more than once");
            return NULL;
        }
        v = p->args[i].value;
        if (i < 64)
            p->used |= 1ull << i;
    }
    return v;
}

/* Edit distance of a and b (relaxed: case, '-' and '_' ignored), at most
 * 99; long names are cut at 63 bytes. */
static int distance(const char *a, const char *b) {
    char x[64], y[64];
    size_t n = 0, m = 0;
    for (; *a && n < sizeof x; a++)
        if (*a != '-' && *a != '_')
            x[n++] = relax(*a);
    for (; *b && m < sizeof y; b++)
        if (*b != '-' && *b != '_')
            y[m++] = relax(*b);
    int row[sizeof y + 1];
    for (size_t j = 0; j <= m; j++)
        row[j] = (int)j;
    for (size_t i = 1; i <= n; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= m; j++) {
            int up = row[j];
            int best = diag + (x[i - 1] != y[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[m] < 99 ? row[m] : 99;
}

/* The known name closest to key (within a third of its length, at most
 * 3 edits) into buf, "" when none is. */
static void closest(const char *key, const char *known, char *buf, size_t cap) {
    int best = 4;
    buf[0] = '\0';
    for (const char *s = known; *s;) {
        size_t n = strcspn(s, ",");
        char name[64];
        if (n < sizeof name) {
            memcpy(name, s, n);
            name[n] = '\0';
            int d = distance(key, name);
            if (d < best && (size_t)d * 3 <= n) {
                best = d;
                snprintf(buf, cap, "%s", name);
            }
        }
        s += n;
        while (*s == ',' || *s == ' ')
            s++;
    }
}

int sy__parg_unknown(sy__pargs *p, const char *known) {
    /* the used bits cover 64 args: one past them would go unchecked */
    if (p->count > 64)
        return sy__parg_fail(p, SY_EARG, p->args[64].key,
                             "more than 64 arguments");
    for (size_t i = 0; i < p->count && i < 64; i++)
        if (!(p->used & (1ull << i))) {
            /* the closest known name, else the list of them (a long list
             * is cut at the message's size) */
            char near[64];
            closest(p->args[i].key, known, near, sizeof near);
            if (near[0])
                return sy__parg_fail(p, SY_EARG, p->args[i].key,
                                     "unknown argument: did you mean %s?",
                                     near);
            return sy__parg_fail(p, SY_EARG, p->args[i].key,
                                 "unknown argument (known: %s)", known);
        }
    return 0;
}

/* A text-to-value conversion of values.c, on a void pointer. */
typedef bool (*conv_fn)(const char *s, void *out, const char **why);

static bool conv_int(const char *s, void *out, const char **why) {
    return sy__value_int64(s, INT64_MIN, INT64_MAX, out, why);
}
static bool conv_bool(const char *s, void *out, const char **why) {
    return sy__value_bool(s, out, why);
}
static bool conv_duration(const char *s, void *out, const char **why) {
    return sy__value_duration_ms(s, out, why);
}
static bool conv_status(const char *s, void *out, const char **why) {
    return sy__value_status(s, out, why);
}

/* Read `name` through fn into out: 0 when absent (*present false) or
 * converted, else the located error. */
static int typed(sy__pargs *p, const char *name, conv_fn fn, void *out,
                 bool *present) {
    int rc = 0;
    const char *v = sy__parg(p, name, &rc), *why = NULL;
    if (present)
        *present = v != NULL;
    if (rc || !v)
        return rc;
    if (!fn(v, out, &why))
        return sy__parg_fail(p, SY_EARG, name, "%s", why);
    return 0;
}

int sy__parg_int(sy__pargs *p, const char *name, int64_t min, int64_t max,
                 int64_t *out, bool *present) {
    int64_t x = *out;
    bool given;
    int rc = typed(p, name, conv_int, &x, &given);
    if (present)
        *present = given;
    if (rc || !given)
        return rc;
    if (x < min || x > max)
        return sy__parg_fail(p, SY_ERANGE, name,
                             "%lld is out of range %lld..%lld", (long long)x,
                             (long long)min, (long long)max);
    *out = x;
    return 0;
}

int sy__parg_bool(sy__pargs *p, const char *name, bool *out) {
    return typed(p, name, conv_bool, out, NULL);
}

int sy__parg_status(sy__pargs *p, const char *name, int *out) {
    return typed(p, name, conv_status, out, NULL);
}

int sy__parg_duration(sy__pargs *p, const char *name, int64_t min_ms,
                      int64_t *out, bool *present) {
    int64_t ms = *out;
    bool given;
    int rc = typed(p, name, conv_duration, &ms, &given);
    if (present)
        *present = given;
    if (rc || !given)
        return rc;
    if (ms < min_ms)
        return sy__parg_fail(p, SY_ERANGE, name, "must be at least %lldms",
                             (long long)min_ms);
    /* the breaker and the retry run durations in 32 bits of ms: a longer
     * one was clamped to that, silently */
    if (ms > (int64_t)UINT32_MAX)
        return sy__parg_fail(p, SY_ERANGE, name,
                             "must be at most 4294967295ms (49.7 days)");
    *out = ms;
    return 0;
}

static bool conv_double(const char *v, void *out, const char **why) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    while (end && (*end == ' ' || *end == '\t'))
        end++;
    if (!*v || isspace((unsigned char)*v) || !end || *end || errno ||
        !isfinite(x)) {
        *why = "expected a number";
        return false;
    }
    *(double *)out = x;
    return true;
}

int sy__parg_float(sy__pargs *p, const char *name, double min, bool min_open,
                   double max, double *out, bool *present) {
    double x = *out;
    bool given;
    int rc = typed(p, name, conv_double, &x, &given);
    if (present)
        *present = given;
    if (rc || !given)
        return rc;
    if (x > max || x < min || (min_open && x == min))
        return sy__parg_fail(p, SY_ERANGE, name, "%g is out of range %s%g..%g",
                             x, min_open ? "above " : "", min, max);
    *out = x;
    return 0;
}

int sy__parg_each(const char *list,
                  int (*fn)(void *data, const char *item, size_t len),
                  void *data) {
    const char *s = list;
    while (*s) {
        const char *e = strchr(s, ',');
        if (!e)
            e = s + strlen(s);
        const char *a = s, *b = e;
        while (a < b && isspace((unsigned char)*a))
            a++;
        while (b > a && isspace((unsigned char)b[-1]))
            b--;
        if (b > a) {
            int rc = fn(data, a, (size_t)(b - a));
            if (rc)
                return rc;
        }
        s = *e ? e + 1 : e;
    }
    return 0;
}

int sy__parg_list(sy__pargs *p, const char *name,
                  int (*fn)(void *data, const char *item, size_t len),
                  void *data, bool *present) {
    *present = false;
    for (size_t i = 0; i < p->count; i++) {
        if (!sy__parg_name_eq(p->args[i].key, name))
            continue;
        *present = true;
        if (i < 64)
            p->used |= 1ull << i;
        int rc = sy__parg_each(p->args[i].value, fn, data);
        if (rc)
            return rc;
    }
    return 0;
}
