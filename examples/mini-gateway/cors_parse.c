/*
 * cors_parse.c - the reading of a route's `cors` metadata (cors_parse.h),
 * SCG's keys (CorsGatewayFilterApplicationListener) and Spring's checks;
 * compiled into the gateway and into `switchyard check`.
 */
#include "cors_parse.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void list_free(gw_list *l) {
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
}

void gw_cors_free(gw_cors *c) {
    if (!c)
        return;
    list_free(&c->origins);
    list_free(&c->patterns);
    list_free(&c->methods);
    list_free(&c->headers);
    list_free(&c->exposed);
    free(c);
}

/* What a list's items are: origins (or origin patterns), compared with
 * a request's Origin; or header names and methods (tokens, or "*"),
 * compared with a request's and written into the answer's headers. */
typedef enum { ITEM_ORIGIN, ITEM_TOKEN } item_kind;

static bool tchar(unsigned char ch) {
    return (ch >= '0' && ch <= '9') || ((ch | 32) >= 'a' && (ch | 32) <= 'z') ||
           (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

/* An item that would never match, or would write a header of its own
 * into the answer (a CR LF): refused, naming the key and the item. */
static bool item_ok(const char *key, const char *s, size_t len, item_kind kind,
                    char *err, size_t cap) {
    bool ok = true;
    for (size_t i = 0; ok && i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        ok = kind == ITEM_TOKEN ? tchar(ch) : ch > 0x20 && ch != 0x7f;
    }
    if (!ok)
        snprintf(err, cap, "%s: '%.*s' is not %s", key,
                 (int)(len > 60 ? 60 : len), s,
                 kind == ITEM_TOKEN
                     ? "a header name or method (a token, or *; list several "
                       "as an array)"
                     : "an origin (no spaces or control characters)");
    return ok;
}

/* 0, or -1 with err set (empty: out of memory). */
static int list_add(gw_list *l, const char *key, const char *s, size_t len,
                    item_kind kind, char *err, size_t cap) {
    while (len && (*s == ' ' || *s == '\t'))
        s++, len--;
    while (len && (s[len - 1] == ' ' || s[len - 1] == '\t'))
        len--;
    if (!len)
        return 0;
    if (!item_ok(key, s, len, kind, err, cap))
        return -1;
    char **v = realloc(l->v, (l->n + 1) * sizeof *v);
    if (!v)
        return -1;
    l->v = v;
    if (!(v[l->n] = strndup(s, len)))
        return -1;
    l->all |= len == 1 && s[0] == '*';
    l->n++;
    return 0;
}

/* A string (one item, or comma separated items with `split`: origins) or
 * an array of strings, as SCG binds the metadata's lists. */
static int list_parse(const cJSON *it, gw_list *l, bool split, item_kind kind,
                      char *err, size_t cap) {
    const char *k = it->string;
    l->set = true;
    if (cJSON_IsString(it)) {
        const char *s = it->valuestring;
        if (!split)
            return list_add(l, k, s, strlen(s), kind, err, cap);
        for (const char *c; (c = strchr(s, ',')); s = c + 1)
            if (list_add(l, k, s, (size_t)(c - s), kind, err, cap))
                return -1;
        return list_add(l, k, s, strlen(s), kind, err, cap);
    }
    if (!cJSON_IsArray(it)) {
        snprintf(err, cap, "%s: must be a string or an array of strings", k);
        return -1;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, it) {
        if (!cJSON_IsString(e)) {
            snprintf(err, cap, "%s: must be a string or an array of strings",
                     k);
            return -1;
        }
        if (list_add(l, k, e->valuestring, strlen(e->valuestring), kind, err,
                     cap))
            return -1;
    }
    return 0;
}

gw_cors *gw_cors_parse(const char *json, char *err, size_t cap) {
    cJSON *root = cJSON_Parse(json);
    gw_cors *c = calloc(1, sizeof *c);
    int rc = -1;
    if (!c)
        goto out;
    c->max_age = -1;
    if (!cJSON_IsObject(root)) {
        snprintf(err, cap, "must be an object");
        goto out;
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, root) {
        const char *k = it->string;
        int r = 0;
        if (strcmp(k, "allowedOrigins") == 0)
            r = list_parse(it, &c->origins, true, ITEM_ORIGIN, err, cap);
        else if (strcmp(k, "allowedOriginPatterns") == 0)
            r = list_parse(it, &c->patterns, true, ITEM_ORIGIN, err, cap);
        else if (strcmp(k, "allowedMethods") == 0)
            r = list_parse(it, &c->methods, false, ITEM_TOKEN, err, cap);
        else if (strcmp(k, "allowedHeaders") == 0)
            r = list_parse(it, &c->headers, false, ITEM_TOKEN, err, cap);
        else if (strcmp(k, "exposedHeaders") == 0)
            r = list_parse(it, &c->exposed, false, ITEM_TOKEN, err, cap);
        else if (strcmp(k, "allowCredentials") == 0) {
            if (!cJSON_IsBool(it)) {
                snprintf(err, cap, "allowCredentials: must be true or false");
                goto out;
            }
            c->credentials = cJSON_IsTrue(it);
        } else if (strcmp(k, "maxAge") == 0) {
            double d = it->valuedouble;
            if (!cJSON_IsNumber(it) || d != (double)(long long)d || d < 0 ||
                d > 9.2e18) {
                snprintf(err, cap, "maxAge: must be a whole number of seconds");
                goto out;
            }
            c->max_age = (long long)d;
        } else {
            snprintf(err, cap,
                     "unknown key '%s' (allowedOrigins, allowedOriginPatterns, "
                     "allowedMethods, allowedHeaders, exposedHeaders, "
                     "allowCredentials, maxAge)",
                     k);
            goto out;
        }
        if (r) {
            if (!err[0])
                snprintf(err, cap, "out of memory");
            goto out;
        }
    }
    /* Spring refuses this combination (validateAllowCredentials) */
    if (c->credentials && c->origins.all) {
        snprintf(err, cap,
                 "allowCredentials true cannot go with allowedOrigins '*' "
                 "(list the origins, or use allowedOriginPatterns)");
        goto out;
    }
    rc = 0;
out:
    cJSON_Delete(root);
    if (rc) {
        gw_cors_free(c);
        return NULL;
    }
    return c;
}
