/*
 * predicate_eval.c - testing a compiled predicate (predicate_int.h)
 * against a request: reads the request and sy__eval only, takes no lock
 * and allocates nothing except, rarely, from the per-request scratch
 * arena (joined {*x} captures, long escaped header values or query
 * values). The choices of how values are read are listed in predicate.c.
 */
#include "route/pattern_int.h" /* a literal pattern's src, inline */
#include "route/predicate_int.h"
#include "route/predicate_quick.h"

#include "base/budget.h"
#include "base/values.h"

#include <stdio.h>

/* Request-time helpers match.c shares: method bits and names, the weight
 * draw. */
static const char *const method_names[] = {"GET",     "HEAD",  "POST",
                                           "PUT",     "PATCH", "DELETE",
                                           "OPTIONS", "TRACE", "CONNECT"};

/* method_names' index of `method` (exact bytes), else 31: by length,
 * then one fixed-size compare (no loop over the names with strlen: a
 * Method test of POST took ~60 instructions). */
#define METHOD_IS(m, lit) (memcmp((m).ptr, lit, sizeof lit - 1) == 0)
int sy__method_bit(sy_str method) {
    switch (method.len) {
    case 3:
        return METHOD_IS(method, "GET") ? 0 : METHOD_IS(method, "PUT") ? 3 : 31;
    case 4:
        return METHOD_IS(method, "POST")   ? 2
               : METHOD_IS(method, "HEAD") ? 1
                                           : 31;
    case 5:
        return METHOD_IS(method, "PATCH")   ? 4
               : METHOD_IS(method, "TRACE") ? 7
                                            : 31;
    case 6: return METHOD_IS(method, "DELETE") ? 5 : 31;
    case 7:
        return METHOD_IS(method, "OPTIONS")   ? 6
               : METHOD_IS(method, "CONNECT") ? 8
                                              : 31;
    }
    return 31;
}
#undef METHOD_IS

const char *sy__method_name(int bit) {
    return bit >= 0 && (size_t)bit < SY_ARRAY_LEN(method_names)
               ? method_names[bit]
               : NULL;
}

double sy__weight_draw(uint64_t seed, uint32_t group) {
    uint64_t h = sy__hash_mix(seed ^ 0x5741594452415721ull,
                              0x9e3779b97f4a7c15ull * ((uint64_t)group + 1));
    return (double)(h >> 11) * (1.0 / 9007199254740992.0); /* 2^-53 */
}

/* ------------------------------------------------------------------ */
/* Testing                                                              */
/* ------------------------------------------------------------------ */

static bool is_ows(char c) {
    return c == ' ' || c == '\t';
}

static sy_str trim(sy_str s) {
    while (s.len && is_ows(s.ptr[0])) {
        s.ptr++;
        s.len--;
    }
    while (s.len && is_ows(s.ptr[s.len - 1]))
        s.len--;
    return s;
}

/* A buffer for a rewritten value: the stack one when it fits, else the
 * scratch arena. NULL when neither can hold n bytes. */
static char *value_buf(char *stack, size_t stack_len, size_t n,
                       sy__arena *scratch) {
    if (n <= stack_len)
        return stack;
    return scratch ? sy__arena_alloc(scratch, n) : NULL;
}

/* Next comma-separated element of a header value (commas inside double
 * quotes do not split); trimmed. Returns false when none is left. */
static bool next_element(sy_str *rest, bool *done, sy_str *out) {
    if (*done)
        return false;
    const char *p = rest->ptr, *end = rest->ptr + rest->len, *q = p;
    bool quoted = false;
    for (; q < end; q++) {
        if (*q == '"')
            quoted = !quoted;
        else if (*q == '\\' && quoted && q + 1 < end)
            q++;
        else if (*q == ',' && !quoted)
            break;
    }
    *out = trim((sy_str){p, (size_t)(q - p)});
    if (q >= end)
        *done = true;
    else
        *rest = (sy_str){q + 1, (size_t)(end - q - 1)};
    return true;
}

/* Strip surrounding double quotes and undo backslash escapes inside. */
static sy_str unquote(sy_str v, char *stack, size_t stack_len,
                      sy__arena *scratch) {
    if (v.len < 2 || v.ptr[0] != '"' || v.ptr[v.len - 1] != '"')
        return v;
    sy_str in = {v.ptr + 1, v.len - 2};
    if (!memchr(in.ptr, '\\', in.len))
        return in;
    char *buf = value_buf(stack, stack_len, in.len, scratch);
    if (!buf)
        return in;
    size_t o = 0;
    for (size_t i = 0; i < in.len; i++) {
        if (in.ptr[i] == '\\' && i + 1 < in.len)
            i++;
        buf[o++] = in.ptr[i];
    }
    return (sy_str){buf, o};
}

static bool value_ok(const sy__pred *p, sy_str v, const sy__eval *ev) {
    if (!p->re)
        return v.len > 0;
    return sy__regex_full_match(p->re, v.ptr, v.len, ev->md);
}

/* Values of one name a predicate examines are capped by the request's
 * budget (budget.h): the ones past the cap are not looked at. */
static __attribute__((noinline)) bool test_header(const sy__pred *p,
                                                  sy__eval *ev) {
    const sy_request *r = ev->req;
    char stack[512];
    uint32_t left = sy__budget_max_repeats();
    for (size_t i = 0; i < r->header_count; i++) {
        const sy_header *h = &r->headers[i];
        if (!sy__pred_header_named(p, h))
            continue;
        sy_str rest = h->value, el;
        bool done = false;
        while (next_element(&rest, &done, &el)) {
            if (left-- == 0)
                return false;
            if (value_ok(p, unquote(el, stack, sizeof stack, ev->scratch), ev))
                return true;
        }
    }
    return false;
}

/* Form decoding: '+' is a space, %XX a byte, bad escapes kept. */
static sy_str form_decode(sy_str s, char *stack, size_t stack_len,
                          sy__arena *scratch) {
    if (s.len == 0 ||
        (!memchr(s.ptr, '%', s.len) && !memchr(s.ptr, '+', s.len)))
        return s;
    char *buf = value_buf(stack, stack_len, s.len, scratch);
    if (!buf)
        return s;
    size_t o = 0;
    for (size_t i = 0; i < s.len; i++) {
        char c = s.ptr[i];
        int hi, lo;
        if (c == '+') {
            c = ' ';
        } else if (c == '%' && i + 2 < s.len &&
                   (hi = sy__hexval(s.ptr[i + 1])) >= 0 &&
                   (lo = sy__hexval(s.ptr[i + 2])) >= 0) {
            c = (char)(hi * 16 + lo);
            i += 2;
        }
        buf[o++] = c;
    }
    return (sy_str){buf, o};
}

static bool test_query(const sy__pred *p, sy__eval *ev) {
    sy_str q = ev->req->query;
    if (!q.ptr || !q.len)
        return false;
    const char *s = q.ptr, *end = q.ptr + q.len;
    char kbuf[256], vbuf[512];
    uint32_t left = sy__budget_max_repeats();
    while (s && s < end) {
        const char *amp = memchr(s, '&', (size_t)(end - s));
        const char *pe = amp ? amp : end;
        const char *eq = memchr(s, '=', (size_t)(pe - s));
        sy_str k = {s, (size_t)((eq ? eq : pe) - s)};
        sy_str v =
            eq ? (sy_str){eq + 1, (size_t)(pe - eq - 1)} : (sy_str){"", 0};
        s = amp ? amp + 1 : NULL; /* never past the end */
        if (pe == k.ptr && !eq)
            continue; /* empty pair */
        k = form_decode(k, kbuf, sizeof kbuf, ev->scratch);
        if (!sy__str_eq(k, p->name, p->name_len))
            continue;
        if (!p->re)
            return true;
        if (left-- == 0)
            return false;
        v = form_decode(v, vbuf, sizeof vbuf, ev->scratch);
        if (sy__regex_full_match(p->re, v.ptr, v.len, ev->md))
            return true;
    }
    return false;
}

static bool test_cookie(const sy__pred *p, sy__eval *ev) {
    const sy_request *r = ev->req;
    uint32_t left = sy__budget_max_repeats();
    for (size_t i = 0; i < r->header_count; i++) {
        const sy_header *h = &r->headers[i];
        if (!sy__str_ieq(h->name, "cookie", 6))
            continue;
        const char *s = h->value.ptr, *end = s + h->value.len;
        while (s && s < end) {
            const char *semi = memchr(s, ';', (size_t)(end - s));
            const char *pe = semi ? semi : end;
            const char *eq = memchr(s, '=', (size_t)(pe - s));
            sy_str name = trim((sy_str){s, (size_t)((eq ? eq : pe) - s)});
            sy_str val = eq ? trim((sy_str){eq + 1, (size_t)(pe - eq - 1)})
                            : (sy_str){"", 0};
            s = pe + 1;
            if (!sy__str_eq(name, p->name, p->name_len))
                continue;
            if (val.len >= 2 && val.ptr[0] == '"' &&
                val.ptr[val.len - 1] == '"')
                val = (sy_str){val.ptr + 1, val.len - 2};
            if (left-- == 0)
                return false;
            if (sy__regex_full_match(p->re, val.ptr, val.len, ev->md))
                return true;
        }
    }
    return false;
}

/* An address as a client or proxy writes it: "1.2.3.4", "1.2.3.4:80",
 * "::1", "[::1]", "[::1]:80". */
static bool parse_client(sy_str s, sy__cidr *out) {
    s = trim(s);
    if (sy__value_ip(s, out))
        return true;
    if (s.len && s.ptr[0] == '[') {
        const char *rb = memchr(s.ptr, ']', s.len);
        return rb &&
               sy__value_ip((sy_str){s.ptr + 1, (size_t)(rb - s.ptr - 1)}, out);
    }
    const char *colon = s.len ? memchr(s.ptr, ':', s.len) : NULL;
    if (colon && !memchr(colon + 1, ':', (size_t)(s.ptr + s.len - colon - 1)))
        return sy__value_ip((sy_str){s.ptr, (size_t)(colon - s.ptr)}, out);
    return false;
}

static bool in_cidrs(const sy__pred *p, sy_str addr) {
    sy__cidr ip;
    if (!parse_client(addr, &ip))
        return false;
    for (size_t i = 0; i < p->ncidrs; i++)
        if (sy__cidr_contains(&p->cidrs[i], &ip))
            return true;
    return false;
}

static bool is_xff(const sy_header *h) {
    return sy__str_ieq(h->name, "x-forwarded-for", 15);
}

/* Character.isWhitespace for the bytes an address list can hold. */
static bool xff_space(char ch) {
    return ch == ' ' || (ch >= '\t' && ch <= '\r') ||
           (ch >= 0x1c && ch <= 0x1f);
}

/* Entries of one X-Forwarded-For value as SCG tokenizes it: split on every
 * ',' (quotes mean nothing here), trimmed, empty ones dropped. Returns
 * entry `want` (counting from 0) in *out, and the total count. */
static size_t xff_entries(sy_str v, size_t want, sy_str *out) {
    size_t n = 0;
    for (size_t i = 0; i <= v.len;) {
        size_t s = i, e = i;
        while (e < v.len && v.ptr[e] != ',')
            e++;
        i = e + 1;
        while (s < e && xff_space(v.ptr[s]))
            s++;
        while (e > s && xff_space(v.ptr[e - 1]))
            e--;
        if (e == s)
            continue;
        if (n == want)
            *out = (sy_str){v.ptr + s, e - s};
        n++;
    }
    return n;
}

/* XForwardedRemoteAddressResolver: exactly one X-Forwarded-For header
 * line is read; none, several (SCG discards them all, out of caution) or
 * one without entries: the socket address. */
static bool test_xff(const sy__pred *p, sy__eval *ev) {
    const sy_request *r = ev->req;
    const sy_header *line = NULL;
    for (size_t i = 0; i < r->header_count; i++) {
        if (!is_xff(&r->headers[i]))
            continue;
        if (line)
            return in_cidrs(p, r->remote_addr);
        line = &r->headers[i];
    }
    sy_str entry = {0};
    size_t n = line ? xff_entries(line->value, SIZE_MAX, &entry) : 0;
    if (n == 0)
        return in_cidrs(p, r->remote_addr);
    size_t idx = (uint64_t)p->trusted >= n ? 0 : n - (size_t)p->trusted;
    xff_entries(line->value, idx, &entry);
    return in_cidrs(p, entry);
}

static __attribute__((noinline)) bool test_method(const sy__pred *p, sy_str m) {
    int bit = sy__method_bit(m);
    if (bit != 31)
        return (p->mask >> bit) & 1u;
    for (size_t i = 0; i < p->nothers; i++)
        if (sy__str_eq(m, p->others[i], strlen(p->others[i])))
            return true;
    return false;
}

/* sy__pattern_match_host for a literal pattern: no leading or trailing
 * '.' (either adds a virtual empty label: the count tells), as many
 * labels, the same text (a label holds no '.'). */
static bool test_literal_host(const sy__pred *p, const sy__segments *labels) {
    if (labels->lead || labels->trail || labels->count != p->lit_segs)
        return false;
    const char *lit = p->lit_src;
    size_t len = p->lit_len, pos = 0;
    for (size_t i = 0; i < labels->count; i++) {
        sy_str d = labels->dec[i];
        if (i && (pos >= len || lit[pos++] != '.'))
            return false;
        if (len - pos < d.len || !sy__bytes_eq(lit + pos, d.ptr, d.len))
            return false;
        pos += d.len;
    }
    return pos == len;
}

/* The first `c` segments, each after a '/', spell lit exactly. With as
 * many segments as the literal pattern, that is segment for segment
 * equality: a literal segment holds no '/', so a decoded "%2F" in a
 * segment would make one '/' too many. */
static bool lit_segments_eq(const sy__pred *p, const sy__segments *segs,
                            size_t c) {
    const char *lit = p->lit_src;
    size_t len = p->lit_len, pos = 0;
    for (size_t i = 0; i < c; i++) {
        sy_str d = segs->dec[i];
        if (pos >= len || lit[pos] != '/' || len - pos - 1 < d.len)
            return false;
        if (!sy__bytes_eq(lit + pos + 1, d.ptr, d.len))
            return false;
        pos += 1 + d.len;
    }
    return pos == len;
}

/* sy__pattern_match_path for a literal pattern: same count of segments
 * and the same text, or (matchTrailingSlash) one more, bare empty one. */
static bool test_literal_path(const sy__pred *p, const sy__segments *segs) {
    size_t c = segs->count;
    sy_str f = segs->flat;
    if (f.ptr)
        return sy__pred_lit_flat(p, f);
    /* literals then "**": at least those segments, spelling the literals
     * (what follows is the **'s; a trailing slash changes nothing) */
    if (p->lit_rest)
        return c >= p->lit_segs && lit_segments_eq(p, segs, p->lit_segs);
    if (c == p->lit_segs)
        return lit_segments_eq(p, segs, c);
    return p->trailing && c >= 2 && c - 1 == p->lit_segs &&
           segs->dec[c - 1].len == 0 &&
           (!segs->raw || segs->raw[c - 1].len == 0) &&
           lit_segments_eq(p, segs, c - 1);
}

/* sy__pattern_match_path (pattern.c) for a rooted pattern of literal
 * segments then a last "**" or "{*name}", on plain segments of one rooted
 * path (segs->flat): the literals compared, the rest the path's own text
 * from the '/' before it (join_rest's, no copy). A failed literal fails
 * it with or without the trailing-slash retry (the retry has fewer
 * segments). -1: another shape (the pattern matcher decides). */
static int match_lit_rest(const sy__pattern *pat, const sy__segments *segs,
                          sy__capture *caps, size_t *ncaps) {
    size_t m = pat->multi;
    if (m == PE_NONE || m + 1 != pat->n || !pat->rooted || !segs->flat.ptr)
        return -1;
    for (size_t i = 0; i < m; i++)
        if (pat->elems[i].kind != PE_LITERAL)
            return -1;
    size_t c = segs->count, pos = 0;
    if (c < m)
        return 0;
    for (size_t i = 0; i < m; i++) {
        const sy__pelem *el = &pat->elems[i];
        sy_str d = segs->dec[i];
        if (d.len != el->len ||
            !sy__bytes_eq(d.ptr, pat->src + el->offset, d.len))
            return 0;
        pos += d.len + 1;
    }
    const sy__pelem *mul = &pat->elems[m];
    if (caps && mul->nvars) {
        size_t total = 0;
        for (size_t i = m; i < c; i++)
            total += segs->dec[i].len + 1;
        caps[*ncaps].name = pat->vars[mul->var];
        caps[*ncaps].value =
            m == c ? (sy_str){"", 0} : (sy_str){segs->flat.ptr + pos, total};
        (*ncaps)++;
    }
    return 1;
}

static bool test_patterns(const sy__pred *p, sy__eval *ev) {
    const sy__segments *segs = p->kind == SY_PK_PATH ? ev->path : ev->host;
    if (!segs)
        return false;
    if (p->lit)
        return p->kind == SY_PK_PATH ? test_literal_path(p, segs)
                                     : test_literal_host(p, segs);
    sy__capture *caps = ev->caps;
    if (!caps || ev->caps_cap < ev->ncaps ||
        ev->caps_cap - ev->ncaps < p->var_count)
        caps = NULL; /* no room: match without capturing */
    sy__pattern *const *pats = p->many ? p->pats : &p->one;
    for (size_t i = 0, n = sy__pred_npats(p); i < n; i++) {
        int q = p->kind == SY_PK_PATH
                    ? match_lit_rest(pats[i], segs, caps, &ev->ncaps)
                    : -1;
        if (q >= 0) {
            if (q)
                return true;
            continue;
        }
        bool ok = p->kind == SY_PK_PATH
                      ? sy__pattern_match_path(pats[i], segs, p->trailing, caps,
                                               &ev->ncaps, ev->md, ev->scratch)
                      : sy__pattern_match_host(pats[i], segs, caps, &ev->ncaps,
                                               ev->md);
        if (ok)
            return true;
    }
    return false;
}

static __attribute__((noinline)) bool test_any(const sy__pred *p, sy__eval *ev);

/* A literal Path predicate first, outside the general switch (whose
 * prologue saves every register): the common case behind an
 * index-proven Host (hosts: ~10 instructions a lookup fewer). Header and
 * Method, the predicates an index leaves to test most often besides
 * (the mixed table), go to their own functions without that prologue. */
bool sy__pred_test(const sy__pred *p, sy__eval *ev) {
    if (p->kind == SY_PK_PATH && p->lit && ev->path)
        return test_literal_path(p, ev->path);
    if (p->kind == SY_PK_HEADER)
        return test_header(p, ev);
    if (p->kind == SY_PK_METHOD)
        return test_method(p, ev->req->method);
    return test_any(p, ev);
}

/* The predicates a candidate's other tests mostly are, answered without
 * the budget: a literal Path; a Method for a standard method (`mbit`, the
 * request's sy__method_bit, below 31). 1 holds, 0 fails, -1 another kind
 * (sy__pred_test decides it). */
int sy__pred_test_quick(const sy__pred *p, const sy__eval *ev, int mbit) {
    if (p->kind == SY_PK_PATH && p->lit && ev->path)
        return ev->path->flat.ptr ? sy__pred_lit_flat(p, ev->path->flat)
                                  : test_literal_path(p, ev->path);
    if (p->kind == SY_PK_METHOD && mbit != 31)
        return (int)((p->mask >> mbit) & 1u);
    if (p->kind == SY_PK_HOST)
        return sy__pred_test_host_flat(p, ev->host_str);
    return -1;
}

/* A literal Host against the unsplit host: its labels joined by '.' are
 * at most the host's length (a dropped empty label only shortens them),
 * and the literal is its labels joined by single dots (no empty one:
 * sy__pred_note_literal). So a host shorter than the literal fails, and
 * one as long holds exactly when it is the literal (no room for an empty
 * label). A longer one may hold through empty labels ("a..b"): -1, test
 * the labels. */
int sy__pred_test_host_flat(const sy__pred *p, sy_str host) {
    if (!p->lit || host.len > p->lit_len)
        return -1;
    return host.len == p->lit_len &&
           sy__bytes_eq(host.ptr, p->lit_src, host.len);
}

static bool test_any(const sy__pred *p, sy__eval *ev) {
    switch (p->kind) {
    case SY_PK_PATH:
    case SY_PK_HOST: return test_patterns(p, ev);
    case SY_PK_METHOD: return test_method(p, ev->req->method);
    case SY_PK_HEADER: return test_header(p, ev);
    case SY_PK_QUERY: return test_query(p, ev);
    case SY_PK_COOKIE: return test_cookie(p, ev);
    case SY_PK_TIME:
        return (!p->has_lo || ev->now_ms > p->lo) &&
               (!p->has_hi || ev->now_ms < p->hi);
    case SY_PK_REMOTE_ADDR: return in_cidrs(p, ev->req->remote_addr);
    case SY_PK_XFF: return test_xff(p, ev);
    case SY_PK_WEIGHT: {
        if (!ev->weight)
            return false;
        double r = sy__weight_draw(ev->req->seed, ev->weight->group);
        return ev->weight->lo <= r && r < ev->weight->hi;
    }
    case SY_PK_HOST_FACTORY:
        return p->hf->test && p->hf->test(p->state, ev->req);
    }
    return false;
}
