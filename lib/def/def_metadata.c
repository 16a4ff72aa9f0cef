/*
 * def_metadata.c - a route object's metadata and its "enabled" (route
 * model section 2): the metadata sorted into key/values, the timeout keys
 * checked, metadata.status and enabled into the route's disabled flag.
 */
#include "base/values.h"
#include "def/def_build.h"

#include <math.h>
#include <stdio.h>

/* connect-timeout / response-timeout (ms): integers, read as Spring Cloud
 * Gateway reads them (sy_route_timeout); the values with which Spring
 * fails every request of the route are refused here. */
static const char *check_timeout(const char *key, const char *value) {
    int64_t n = 0;
    const char *why = NULL;
    if (!sy__value_int64(value, INT64_MIN, INT64_MAX, &n, &why) &&
        strstr(why, "out of range"))
        return key[0] == 'c' ? "connect-timeout out of range: at most "
                               "9223372036854775807 (milliseconds)"
                             : "response-timeout out of range: at most "
                               "9223372036854775807 (milliseconds)";
    if (why)
        return key[0] == 'c'
                   ? "connect-timeout must be an integer (milliseconds)"
                   : "response-timeout must be an integer (milliseconds)";
    if (key[0] == 'c' && n < 0)
        return "connect-timeout must not be negative (0: no limit)";
    if (key[0] == 'r' && n == 0)
        return "response-timeout 0 times out every request (a negative "
               "value: no limit)";
    return NULL;
}

/* 2^53: a JSON number's whole values are exact up to it (a double) */
#define EXACT_WHOLE 9007199254740992.0

/* A metadata value (not a string) as text: as cJSON prints it, but a
 * whole number from 1e15 to 2^53 as an integer (cJSON prints 1e15 as
 * "1e+15", which no integer read takes; below 1e15 it prints integers as
 * written); NULL: out of memory. */
static char *metadata_text(struct sy_route *r, const cJSON *c) {
    if (sy__def_is_number(c) && c->valuedouble == floor(c->valuedouble) &&
        fabs(c->valuedouble) >= 1e15 && fabs(c->valuedouble) <= EXACT_WHOLE) {
        char num[32];
        sy__def_number_text(c->valuedouble, num, sizeof num);
        return sy__route_strdup(r, num);
    }
    char *txt = cJSON_PrintUnformatted(c);
    char *v = txt ? sy__route_strdup(r, txt) : NULL;
    cJSON_free(txt);
    return v;
}

/* A timeout given as a whole JSON number past 2^53: read into a double,
 * it is no longer the number written (SCG reads it as a long). */
static bool timeout_inexact(const cJSON *c) {
    return sy__def_is_number(c) &&
           (strcmp(c->string, "response-timeout") == 0 ||
            strcmp(c->string, "connect-timeout") == 0) &&
           !(fabs(c->valuedouble) <= EXACT_WHOLE);
}

int sy__def_build_metadata(struct sy_route *r, const cJSON *md,
                           const char *path, const sy__alloc *a,
                           sy_error *err) {
    char p[256];
    if (!md || sy__def_is_null(md))
        return 0;
    sy__def_path(p, sizeof p, "%s.metadata", path);
    if (!sy__def_is_object(md))
        return sy__error_set(err, SY_ETYPE, p, "metadata must be an object");
    size_t n = (size_t)cJSON_GetArraySize(md);
    if (n == 0)
        return 0;
    sy_kv *kv = sy__arena_alloc(&r->arena, n * sizeof *kv);
    if (!kv)
        return sy__error_set(err, SY_ENOMEM, p, "out of memory");
    size_t i = 0;
    for (const cJSON *c = md->child; c; c = c->next, i++) {
        if (!sy__def_is_string(c) && sy__route_is_select_key(c->string)) {
            sy__def_path(p, sizeof p, "%s.metadata.%s", path, c->string);
            return sy__error_set(err, SY_ETYPE, p, "%s must be a string",
                                 c->string);
        }
        if (timeout_inexact(c)) {
            sy__def_path(p, sizeof p, "%s.metadata.%s", path, c->string);
            return sy__error_set(err, SY_EARG, p,
                                 "%s out of range as a JSON number: at most "
                                 "9007199254740992 (2^53, exact in a "
                                 "double); write a larger one as a string",
                                 c->string);
        }
        kv[i].key = sy__route_strdup(r, c->string);
        kv[i].value = sy__def_is_string(c) ? sy__route_strdup(r, c->valuestring)
                                           : metadata_text(r, c);
        if (!kv[i].key || !kv[i].value)
            return sy__error_set(err, SY_ENOMEM, p, "out of memory");
    }
    if (!sy__def_sort_kv(a, kv, n))
        return sy__error_set(err, SY_ENOMEM, p, "out of memory");
    /* a repeated key: the last one wins, as in a JSON map */
    size_t k = 0;
    for (i = 0; i < n; i++) {
        if (k && strcmp(kv[k - 1].key, kv[i].key) == 0)
            kv[k - 1] = kv[i];
        else
            kv[k++] = kv[i];
    }
    sy__route_more *m = sy__route_more_own(r);
    if (!m)
        return sy__error_set(err, SY_ENOMEM, p, "out of memory");
    m->metadata = kv;
    m->metadata_count = (uint32_t)k; /* a cJSON object size: an int */
    static const char *const ms_keys[] = {"response-timeout",
                                          "connect-timeout"};
    for (i = 0; i < k; i++) {
        if (strcmp(kv[i].key, "status") == 0) {
            /* a typo ("Disabled", "disable") would leave the route live */
            r->disabled = strcmp(kv[i].value, "disabled") == 0;
            if (!r->disabled && strcmp(kv[i].value, "enabled") != 0) {
                sy__def_path(p, sizeof p, "%s.metadata.status", path);
                return sy__error_set(err, SY_EARG, p,
                                     "status must be \"disabled\" or "
                                     "\"enabled\", not '%.40s'",
                                     kv[i].value);
            }
        }
        for (size_t j = 0; j < SY_ARRAY_LEN(ms_keys); j++) {
            if (strcmp(kv[i].key, ms_keys[j]) != 0)
                continue;
            const char *why = check_timeout(kv[i].key, kv[i].value);
            if (why) {
                sy__def_path(p, sizeof p, "%s.metadata.%s", path, kv[i].key);
                return sy__error_set(err, SY_EARG, p, "%s", why);
            }
        }
    }
    return 0;
}

bool sy__def_set_status(struct sy_route *r, bool enabled) {
    /* metadata without "status", then "status": "disabled" if wanted */
    size_t n = 0;
    sy_kv *md =
        sy__arena_alloc(&r->arena, (r->more->metadata_count + 1) * sizeof *md);
    sy__route_more *m = md ? sy__route_more_own(r) : NULL;
    if (!m)
        return false;
    bool placed = enabled;
    for (size_t i = 0; i < m->metadata_count; i++) {
        int cmp = strcmp(m->metadata[i].key, "status");
        if (!placed && cmp > 0) {
            md[n++] = (sy_kv){"status", "disabled"};
            placed = true;
        }
        if (cmp != 0)
            md[n++] = m->metadata[i];
    }
    if (!placed)
        md[n++] = (sy_kv){"status", "disabled"};
    m->metadata = md;
    m->metadata_count = (uint32_t)n;
    r->disabled = !enabled;
    return true;
}

int sy__def_build_enabled(struct sy_route *r, const cJSON *en, const char *path,
                          sy_error *err) {
    char p[256];
    if (!en || sy__def_is_null(en))
        return 0;
    sy__path_join(p, sizeof p, path, "enabled");
    if (!cJSON_IsBool(en))
        return sy__error_set(err, SY_ETYPE, p, "enabled must be true or false");
    bool on = cJSON_IsTrue(en), status = false;
    for (size_t i = 0; i < r->more->metadata_count; i++)
        status |= strcmp(r->more->metadata[i].key, "status") == 0;
    /* an explicit metadata.status that says otherwise: which one holds? */
    if (status && on == r->disabled)
        return sy__error_set(err, SY_EARG, p,
                             "enabled is %s but metadata.status is \"%s\": "
                             "say it once",
                             on ? "true" : "false",
                             on ? "disabled" : "enabled");
    if (on || r->disabled)
        return 0;
    if (!sy__def_set_status(r, false))
        return sy__error_set(err, SY_ENOMEM, p, "out of memory");
    return 0;
}
