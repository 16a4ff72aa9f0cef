/*
 * resp_edits.h - a response's header list (names and values borrowed
 * from the upstream's head or from the route's edits) and its small
 * operations, inlined where the response head is written (upstream.c);
 * the route's response edits on it are resp_edits.c's.
 */
#ifndef GW_RESP_EDITS_H
#define GW_RESP_EDITS_H
#include "proxy.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A response header list: names and values (with their lengths: not
 * NUL-ended) borrowed from the response head (q->rhs) or from the
 * request's response edits, which outlive it; a value made here
 * (RewriteResponseHeader) is owned. */
typedef struct hv {
    const char *n, *v;
    char *owned; /* v when it was made here, else NULL */
    uint32_t nl, vl;
} hv;

typedef struct hlist {
    hv *a;
    size_t n, cap;
    hv local[32]; /* no allocation for the usual response */
} hlist;

static inline void hl_addn(hlist *l, const char *n, size_t nl, const char *v,
                           size_t vl) {
    if (l->n == l->cap) {
        size_t cap = l->cap * 2;
        hv *a = l->a == l->local ? malloc(cap * sizeof *a)
                                 : realloc(l->a, cap * sizeof *a);
        if (!a)
            return;
        if (l->a == l->local)
            memcpy(a, l->local, l->n * sizeof *a);
        l->a = a;
        l->cap = cap;
    }
    l->a[l->n++] = (hv){n, v, NULL, (uint32_t)nl, (uint32_t)vl};
}

static inline void hl_add(hlist *l, const char *n, const char *v) {
    hl_addn(l, n, strlen(n), v, strlen(v));
}

/* h's name is `name` (NUL-ended), ASCII case aside */
static inline bool hv_is(const hv *h, const char *name) {
    return strncasecmp(h->n, name, h->nl) == 0 && name[h->nl] == '\0';
}

static inline bool hl_has(const hlist *l, const char *name) {
    int c = name[0] | 0x20; /* first letters that differ: no call */
    for (size_t i = 0; i < l->n; i++)
        if ((l->a[i].n[0] | 0x20) == c && hv_is(&l->a[i], name))
            return true;
    return false;
}

static inline void hl_free(hlist *l) {
    for (size_t i = 0; i < l->n; i++)
        free(l->a[i].owned);
    if (l->a != l->local)
        free(l->a);
}

static inline void hl_init(hlist *l) {
    l->a = l->local;
    l->n = 0;
    l->cap = sizeof l->local / sizeof *l->local;
}

static inline void hl_text(const hlist *l, gw_buf *out) {
    for (size_t i = 0; i < l->n; i++) {
        gw_buf_add(out, l->a[i].n, l->a[i].nl);
        gw_buf_add(out, ": ", 2);
        gw_buf_add(out, l->a[i].v, l->a[i].vl);
        gw_buf_add(out, "\r\n", 2);
    }
}

/* Remove every header of `name` (resp_edits.c). */
void gw_hl_remove(hlist *l, const char *name);
/* The response edits on l; `proxied`: an upstream's answer, which the
 * edits of routes that forwarded the request leave alone (gw_resp_op). */
void gw_apply_ops(gw_request *q, hlist *l, bool proxied);

#endif
