/*
 * filter_headers.c - the plan's request header list (a scratch copy of the
 * request's, names case-insensitive): add, remove, set, and the filters
 * that work on the whole list: AddRequestHeadersIfNotPresent,
 * MapRequestHeader and RequestHeaderSize (in linear time).
 */
#include "route/filter_plan_int.h"

#include <stdio.h>

bool sy__plan_hdr_add(sy__run *r, sy_str name, sy_str value) {
    sy__plan *p = r->plan;
    void *arr = p->headers;
    if (!sy__plan_grow(r->ar, &arr, &p->header_cap, p->header_count,
                       sizeof(sy_header)))
        return false;
    p->headers = arr;
    p->headers[p->header_count++] = (sy_header){name, value};
    return true;
}

void sy__plan_hdr_remove(sy__plan *p, sy_str name, size_t from) {
    size_t o = from;
    for (size_t i = from; i < p->header_count; i++)
        if (!sy__str_ieq(p->headers[i].name, name.ptr, name.len))
            p->headers[o++] = p->headers[i];
    p->header_count = o;
}

bool sy__plan_hdr_set(sy__run *r, sy_str name, sy_str value) {
    sy__plan *p = r->plan;
    for (size_t i = 0; i < p->header_count; i++)
        if (sy__str_ieq(p->headers[i].name, name.ptr, name.len)) {
            p->headers[i].value = value;
            sy__plan_hdr_remove(p, name, i + 1);
            return true;
        }
    return sy__plan_hdr_add(r, name, value);
}

/* AddRequestHeadersIfNotPresent: each item whose name is missing or blank
 * in the list. */
bool sy__plan_headers_if_not_present(sy__run *r, const sy__filter *f) {
    /* Decide against the headers as they were before this filter, then
     * add every value of each missing-or-blank name (SCG groups the
     * items by name). */
    size_t before = r->plan->header_count;
    for (size_t i = 0; i < f->item_count; i++) {
        sy_str name = f->items[i].name;
        bool blank = true;
        for (size_t j = 0; j < before && blank; j++)
            if (sy__str_ieq(r->plan->headers[j].name, name.ptr, name.len) &&
                sy__plan_has_text(r->plan->headers[j].value))
                blank = false;
        if (!blank)
            continue;
        sy_str v;
        if (!sy__plan_expand(r, f->items[i].value, &v) ||
            !sy__plan_hdr_add(r, name, v))
            return false;
    }
    return true;
}

/* MapRequestHeader: every value of header `name` added again under
 * `value`. */
bool sy__plan_map_header(sy__run *r, const sy__filter *f) {
    size_t n = r->plan->header_count;
    for (size_t i = 0; i < n; i++) {
        sy_header h = r->plan->headers[i];
        if (sy__str_ieq(h.name, f->name.ptr, f->name.len) &&
            !sy__plan_hdr_add(r, f->value, h.value))
            return false;
    }
    return true;
}

/* A header name's case-insensitive hash. */
static uint64_t name_hash(sy_str n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n.len; i++) {
        unsigned char c = (unsigned char)n.ptr[i];
        h = (h ^ (uint64_t)(c >= 'A' && c <= 'Z' ? c + 32 : c)) *
            0x100000001b3ull;
    }
    return h;
}

/* RequestHeaderSize: per header name (case-insensitive), the bytes of the
 * name plus those of all its values; names in first-seen order. Linear in
 * the number of headers: the totals are summed in a hash table of first
 * occurrences (from the arena), not by comparing every pair. */
bool sy__plan_header_size(sy__run *r, const sy__filter *f) {
    const sy__plan *p = r->plan;
    size_t n = p->header_count, cap = sy__pow2_at_least(16, n * 2);
    /* slot: 1 + index of the name's first header, 0: empty */
    size_t *slot = sy__arena_alloc(r->ar, cap * sizeof *slot);
    int64_t *total = sy__arena_alloc(r->ar, (n ? n : 1) * sizeof *total);
    if (!slot || !total)
        return false;
    memset(slot, 0, cap * sizeof *slot);
    bool any = false;
    for (size_t i = 0; i < n; i++) {
        sy_str name = p->headers[i].name;
        size_t k = (size_t)name_hash(name) & (cap - 1);
        while (slot[k] &&
               !sy__str_ieq(p->headers[slot[k] - 1].name, name.ptr, name.len))
            k = (k + 1) & (cap - 1);
        if (!slot[k]) {
            slot[k] = i + 1;
            total[i] = (int64_t)name.len;
        }
        size_t first = slot[k] - 1;
        total[first] += (int64_t)p->headers[i].value.len;
        total[i] = i == first ? total[i] : -1; /* not a first occurrence */
        any |= total[first] > f->size;
    }
    if (!any)
        return true;
    char small[1024]; /* the message, copied to the arena at the end */
    size_t o = (size_t)snprintf(small, sizeof small,
                                "Request Header/s size is larger than "
                                "permissible limit (%lldB).",
                                (long long)f->size);
    for (size_t i = 0; i < n && o < sizeof small; i++) {
        if (total[i] <= f->size) /* -1: a repeat, counted at its first */
            continue;
        sy_str name = p->headers[i].name;
        o += (size_t)snprintf(small + o, sizeof small - o,
                              " Request Header/s size for '%.*s' is %lldB.",
                              (int)(name.len > 200 ? 200 : name.len), name.ptr,
                              (long long)total[i]);
    }
    if (o >= sizeof small)
        o = sizeof small - 1;
    char *text = sy__arena_strndup(r->ar, small, o);
    if (!text)
        return false;
    sy__plan_respond(r, SY_ACTION_RESPOND, 431);
    return sy__plan_resp_add(r, SY_RESP_ADD, f->name, (sy_str){text, o},
                             SY_PLAN_EMPTY);
}
