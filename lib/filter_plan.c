/*
 * filter_plan.c - computing the filter plan of a matched request: runs the
 * compiled pure filters (default and route filters merged as SCG orders
 * them) over a working copy of the request (path, raw query, header list)
 * and collects response header operations, status, redirect, short-circuit
 * answers and the entries the host runs. Everything it builds lives in the
 * scratch arena.
 */
#include "filter_int.h"

#include <stdio.h>

typedef struct sy_run {
    sy_plan *plan;
    const sy_request *req;
    const sy_capture *vars;
    size_t var_count;
    pcre2_match_data *md;
    sy_arena *ar;
    bool prefixed; /* a PrefixPath ran (SCG's GATEWAY_ALREADY_PREFIXED) */
} sy_run;

static const sy_str empty_str = {"", 0};

static sy_str cstr(const char *s) {
    return (sy_str){s, strlen(s)};
}

static bool is_space(char ch) {
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' ||
           ch == '\v';
}

/* StringUtils.hasText: some non-whitespace character. */
static bool has_text(sy_str s) {
    for (size_t i = 0; i < s.len; i++)
        if (!is_space(s.ptr[i]))
            return true;
    return false;
}

/* ---- growable arrays in the arena ---- */

static bool grow(sy_arena *ar, void **arr, size_t *cap, size_t count,
                 size_t elem) {
    if (count < *cap)
        return true;
    size_t ncap = *cap ? *cap * 2 : 8;
    void *n = sy_arena_alloc(ar, ncap * elem);
    if (!n)
        return false;
    if (count)
        memcpy(n, *arr, count * elem);
    *arr = n;
    *cap = ncap;
    return true;
}

static bool hdr_add(sy_run *r, sy_str name, sy_str value) {
    sy_plan *p = r->plan;
    void *arr = p->headers;
    if (!grow(r->ar, &arr, &p->header_cap, p->header_count, sizeof(sy_header)))
        return false;
    p->headers = arr;
    p->headers[p->header_count++] = (sy_header){name, value};
    return true;
}

/* Remove every header named `name`, from index `from` on. */
static void hdr_remove(sy_plan *p, sy_str name, size_t from) {
    size_t o = from;
    for (size_t i = from; i < p->header_count; i++)
        if (!sy_str_ieq(p->headers[i].name, name.ptr, name.len))
            p->headers[o++] = p->headers[i];
    p->header_count = o;
}

/* HttpHeaders.set: the first header of that name takes the value in
 * place, the others go; appended when absent. */
static bool hdr_set(sy_run *r, sy_str name, sy_str value) {
    sy_plan *p = r->plan;
    for (size_t i = 0; i < p->header_count; i++)
        if (sy_str_ieq(p->headers[i].name, name.ptr, name.len)) {
            p->headers[i].value = value;
            hdr_remove(p, name, i + 1);
            return true;
        }
    return hdr_add(r, name, value);
}

static bool resp_add(sy_run *r, sy_response_op_kind kind, sy_str name,
                     sy_str value, sy_str arg) {
    sy_plan *p = r->plan;
    void *arr = p->resp;
    if (!grow(r->ar, &arr, &p->resp_cap, p->resp_count, sizeof(sy_response_op)))
        return false;
    p->resp = arr;
    p->resp[p->resp_count++] = (sy_response_op){kind, name, value, arg};
    return true;
}

static bool host_add(sy_run *r, const sy_filter_entry *e) {
    sy_plan *p = r->plan;
    void *arr = (void *)p->host_filters;
    if (!grow(r->ar, &arr, &p->host_filter_cap, p->host_filter_count,
              sizeof(const sy_filter_entry *)))
        return false;
    p->host_filters = arr;
    p->host_filters[p->host_filter_count++] = e;
    return true;
}

/*
 * Short-circuit answers. switchyard: the first short-circuit wins. SCG
 * stops the chain there; we keep running the later filters (their request
 * edits are moot, their response header edits apply to the answer the
 * host sends), but a later RedirectTo / RequestSize / RequestHeaderSize /
 * failed RewritePath changes nothing, and SetStatus never overrides the
 * status of a short-circuit answer (SCG's SetStatus sees a committed
 * response).
 */
static bool short_circuited(const sy_run *r) {
    return r->plan->action != SY_ACTION_PROXY;
}

static void respond(sy_run *r, sy_action action, int status) {
    r->plan->action = action;
    r->plan->status = status;
}

/* ---- {var} expansion ---- */

/* The captured value of a variable: the last capture of that name wins
 * (SCG merges Host and Path variables into one map, later ones win). */
static bool var_get(const sy_run *r, const char *name, size_t len,
                    sy_str *out) {
    for (size_t i = r->var_count; i-- > 0;)
        if (sy_str_eq(r->vars[i].name, name, len)) {
            *out = r->vars[i].value;
            return true;
        }
    return false;
}

/* pchar or '/' (RFC 3986): what a path keeps unencoded. */
static bool path_char(unsigned char ch) {
    if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
        (ch >= '0' && ch <= '9'))
        return true;
    return ch && strchr("-._~!$&'()*+,;=:@/", ch) != NULL;
}

static const char hex_digits[] = "0123456789ABCDEF";

/* Append s to dst (if non-NULL), percent-encoding for a path when asked;
 * returns the bytes written. */
static size_t put(char *dst, sy_str s, bool encode) {
    size_t n = 0;
    for (size_t i = 0; i < s.len; i++) {
        unsigned char ch = (unsigned char)s.ptr[i];
        if (!encode || path_char(ch)) {
            if (dst)
                dst[n] = (char)ch;
            n++;
        } else {
            if (dst) {
                dst[n] = '%';
                dst[n + 1] = hex_digits[ch >> 4];
                dst[n + 2] = hex_digits[ch & 15];
            }
            n += 3;
        }
    }
    return n;
}

/* One pass of expansion: writes into dst when non-NULL, returns length.
 * Spring's rule: "{name}" or "{name:regex}" with no '/' inside is a
 * variable; anything else stays as written. */
static size_t expand_pass(const sy_run *r, sy_str t, char *dst) {
    size_t o = 0;
    for (size_t i = 0; i < t.len;) {
        if (t.ptr[i] == '{') {
            size_t j = i + 1;
            while (j < t.len && t.ptr[j] != '}' && t.ptr[j] != '/')
                j++;
            if (j < t.len && t.ptr[j] == '}' && j > i + 1) {
                size_t s = i + 1, e = j;
                for (size_t k = s; k < j; k++)
                    if (t.ptr[k] == ':') {
                        e = k;
                        break;
                    }
                while (s < e && is_space(t.ptr[s]))
                    s++;
                while (e > s && is_space(t.ptr[e - 1]))
                    e--;
                sy_str v = empty_str;
                /* switchyard: an unknown variable expands to "" (SCG
                 * throws and answers 500). */
                (void)var_get(r, t.ptr + s, e - s, &v);
                o += put(dst ? dst + o : NULL, v, false);
                i = j + 1;
                continue;
            }
        }
        if (dst)
            dst[o] = t.ptr[i];
        o++;
        i++;
    }
    return o;
}

/* Expand `t` into the arena; `t` itself when it has no '{'. */
static bool expand(const sy_run *r, sy_str t, sy_str *out) {
    if (!memchr(t.ptr, '{', t.len)) {
        *out = t;
        return true;
    }
    size_t n = expand_pass(r, t, NULL);
    char *buf = sy_arena_alloc(r->ar, n + 1);
    if (!buf)
        return false;
    expand_pass(r, t, buf);
    buf[n] = '\0';
    *out = (sy_str){buf, n};
    return true;
}

/*
 * The raw path of Spring's UriTemplate(t).expand(vars) (SetPath,
 * PrefixPath): the template is read as a URI, so its path ends at the
 * first '?' or '#' outside a {var}; the variables are expanded, and then
 * the whole path - the template's own text as much as the values - is
 * percent-encoded as a path ("%20" in a template goes out as "%2520", a
 * space as "%20"; '/' stays).
 */
static bool expand_uri_path(const sy_run *r, sy_str t, sy_str *out) {
    size_t depth = 0, end = 0;
    for (; end < t.len; end++) {
        char ch = t.ptr[end];
        if (ch == '{')
            depth++;
        else if (ch == '}' && depth)
            depth--;
        else if ((ch == '?' || ch == '#') && !depth)
            break;
    }
    sy_str v;
    if (!expand(r, (sy_str){t.ptr, end}, &v))
        return false;
    size_t n = put(NULL, v, true);
    if (n == v.len) {
        *out = v;
        return true;
    }
    char *buf = sy_arena_alloc(r->ar, n + 1);
    if (!buf)
        return false;
    put(buf, v, true);
    buf[n] = '\0';
    *out = (sy_str){buf, n};
    return true;
}

/* ---- string building ---- */

static char *concat(sy_arena *ar, sy_str a, sy_str b, sy_str c, sy_str d,
                    size_t *len) {
    size_t n = a.len + b.len + c.len + d.len;
    char *buf = sy_arena_alloc(ar, n + 1);
    if (!buf)
        return NULL;
    size_t o = 0;
    const sy_str parts[4] = {a, b, c, d};
    for (size_t i = 0; i < 4; i++)
        if (parts[i].len) {
            memcpy(buf + o, parts[i].ptr, parts[i].len);
            o += parts[i].len;
        }
    buf[o] = '\0';
    *len = n;
    return buf;
}

/* ---- the query string ---- */

/* The next byte of s form-decoded ('+' is space, %XX a byte, a bad
 * escape kept as it is), advancing *i. */
static unsigned char next_decoded(sy_str s, size_t *i) {
    unsigned char ch = (unsigned char)s.ptr[*i];
    if (ch == '+') {
        ch = ' ';
    } else if (ch == '%' && *i + 2 < s.len && sy_hexval(s.ptr[*i + 1]) >= 0 &&
               sy_hexval(s.ptr[*i + 2]) >= 0) {
        ch = (unsigned char)(sy_hexval(s.ptr[*i + 1]) * 16 +
                             sy_hexval(s.ptr[*i + 2]));
        *i += 2;
    }
    (*i)++;
    return ch;
}

/* Are the decoded forms of a and b equal? (`b_plain`: b is not encoded) */
static bool decoded_eq(sy_str a, sy_str b, bool b_plain) {
    size_t i = 0, j = 0;
    while (i < a.len && j < b.len) {
        unsigned char x = next_decoded(a, &i);
        unsigned char y =
            b_plain ? (unsigned char)b.ptr[j++] : next_decoded(b, &j);
        if (x != y)
            return false;
    }
    return i == a.len && j == b.len;
}

/* Decode then re-encode a query name or value, so that equal decoded
 * values get one spelling. Keeps unreserved characters and the safe
 * sub-delims; encodes '&', '=', '+', '%', '#', space, controls and
 * non-ASCII bytes. Writes to dst when non-NULL; returns the length. */
static size_t reencode(sy_str s, char *dst) {
    size_t o = 0;
    for (size_t i = 0; i < s.len;) {
        unsigned char ch = next_decoded(s, &i);
        bool plain = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                     (ch >= '0' && ch <= '9') ||
                     (ch && strchr("-._~!$'()*,;:@/?", ch) != NULL);
        if (plain) {
            if (dst)
                dst[o] = (char)ch;
            o++;
        } else {
            if (dst) {
                dst[o] = '%';
                dst[o + 1] = hex_digits[ch >> 4];
                dst[o + 2] = hex_digits[ch & 15];
            }
            o += 3;
        }
    }
    return o;
}

/* One "name[=value]" piece of a raw query. */
typedef struct sy_qpart {
    sy_str name;
    sy_str value;
    bool has_eq;
    bool done; /* emitted or removed */
} sy_qpart;

static bool next_part(sy_str q, size_t *pos, sy_qpart *out) {
    while (*pos < q.len) {
        size_t s = *pos, e = s;
        while (e < q.len && q.ptr[e] != '&')
            e++;
        *pos = e + 1;
        size_t eq = s;
        while (eq < e && q.ptr[eq] != '=')
            eq++;
        if (eq == s)
            continue; /* "" or "=x": no name, Spring drops it */
        out->name = (sy_str){q.ptr + s, eq - s};
        out->has_eq = eq < e;
        out->value =
            out->has_eq ? (sy_str){q.ptr + eq + 1, e - eq - 1} : empty_str;
        out->done = false;
        return true;
    }
    return false;
}

static size_t put_part(char *buf, size_t o, const sy_qpart *qp) {
    if (o)
        buf[o++] = '&';
    o += reencode(qp->name, buf + o);
    if (qp->has_eq) {
        buf[o++] = '=';
        o += reencode(qp->value, buf + o);
    }
    return o;
}

/*
 * RemoveRequestParameter, as SCG does it: the query is read into a
 * multi-map keyed by decoded name (names in first-seen order, each name's
 * values together), the name is removed and the rest is re-encoded.
 * switchyard: a query without that parameter is left byte for byte.
 */
static bool remove_param(sy_run *r, sy_str name) {
    sy_str q = r->plan->query;
    size_t pos = 0, n = 0;
    sy_qpart part;
    bool found = false;
    while (next_part(q, &pos, &part)) {
        n++;
        found = found || decoded_eq(part.name, name, true);
    }
    if (!found)
        return true;
    sy_qpart *parts = sy_arena_alloc(r->ar, n * sizeof *parts);
    /* worst case every byte becomes %XX */
    char *buf = sy_arena_alloc(r->ar, q.len * 3 + 1);
    if (!parts || !buf)
        return false;
    pos = 0;
    for (size_t i = 0; i < n && next_part(q, &pos, &parts[i]); i++)
        parts[i].done = decoded_eq(parts[i].name, name, true);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (parts[i].done)
            continue;
        o = put_part(buf, o, &parts[i]);
        for (size_t j = i + 1; j < n; j++)
            if (!parts[j].done &&
                decoded_eq(parts[j].name, parts[i].name, false)) {
                o = put_part(buf, o, &parts[j]);
                parts[j].done = true;
            }
    }
    buf[o] = '\0';
    r->plan->query = (sy_str){buf, o};
    return true;
}

/* ---- paths ---- */

/* StripPrefix as SCG: tokenize the raw path on '/' (tokens trimmed, empty
 * ones dropped), drop the first `parts`, re-join behind '/', and keep a
 * trailing '/' when the original had one and the result is not "/". */
static bool strip_prefix(sy_run *r, int64_t parts) {
    sy_str p = r->plan->path;
    char *buf = sy_arena_alloc(r->ar, p.len + 2);
    if (!buf)
        return false;
    size_t o = 0;
    buf[o++] = '/';
    int64_t idx = 0;
    for (size_t i = 0; i < p.len;) {
        while (i < p.len && p.ptr[i] == '/')
            i++;
        size_t s = i;
        while (i < p.len && p.ptr[i] != '/')
            i++;
        size_t e = i;
        while (s < e && is_space(p.ptr[s]))
            s++;
        while (e > s && is_space(p.ptr[e - 1]))
            e--;
        if (e == s)
            continue;
        if (idx++ < parts)
            continue;
        if (o > 1)
            buf[o++] = '/';
        memcpy(buf + o, p.ptr + s, e - s);
        o += e - s;
    }
    if (o > 1 && p.len && p.ptr[p.len - 1] == '/')
        buf[o++] = '/';
    buf[o] = '\0';
    r->plan->path = (sy_str){buf, o};
    return true;
}

/* RewritePath: replace-all on the current raw path with pcre2_substitute.
 * switchyard: a regex failure at run time (match limit) answers 500, as
 * SCG's exception would. */
static int rewrite_path(sy_run *r, const sy_filter *f) {
    sy_str p = r->plan->path;
    const char *subject = p.ptr ? p.ptr : "";
    pcre2_match_data *md = r->md;
    if (md && pcre2_get_ovector_count(md) < f->groups)
        md = NULL; /* too small: PCRE2 makes one (sy_alloc hooks) */
    const uint32_t opts = PCRE2_SUBSTITUTE_GLOBAL |
                          PCRE2_SUBSTITUTE_OVERFLOW_LENGTH |
                          PCRE2_SUBSTITUTE_UNSET_EMPTY;
    PCRE2_SIZE cap = p.len + f->value.len + 64;
    for (int attempt = 0; attempt < 2; attempt++) {
        char *out = sy_arena_alloc(r->ar, cap + 1);
        if (!out)
            return SY_ENOMEM;
        PCRE2_SIZE len = cap + 1;
        int rc = pcre2_substitute(f->re, (PCRE2_SPTR)subject, p.len, 0, opts,
                                  md, f->mctx, (PCRE2_SPTR)f->value.ptr,
                                  f->value.len, (PCRE2_UCHAR *)out, &len);
        if (rc >= 0) {
            r->plan->path = (sy_str){out, len};
            return 0;
        }
        if (rc != PCRE2_ERROR_NOMEMORY)
            break;
        cap = len; /* the length needed, terminator included */
    }
    if (!short_circuited(r))
        respond(r, SY_ACTION_RESPOND, 500);
    return 0;
}

/* ---- the filters ---- */

static bool redirect_to(sy_run *r, const sy_filter *f) {
    sy_str url = f->value, q = r->req->query;
    if (!f->flag || q.len == 0) {
        r->plan->redirect = url;
        return true;
    }
    /* the request's query goes before any #fragment of the url */
    const char *hash = memchr(url.ptr, '#', url.len);
    size_t head = hash ? (size_t)(hash - url.ptr) : url.len;
    const char *qm = memchr(url.ptr, '?', head);
    sy_str sep = cstr("?");
    if (qm)
        sep =
            (head > 0 && (url.ptr[head - 1] == '?' || url.ptr[head - 1] == '&'))
                ? empty_str
                : cstr("&");
    size_t len;
    char *buf = concat(r->ar, (sy_str){url.ptr, head}, sep, q,
                       (sy_str){url.ptr + head, url.len - head}, &len);
    if (!buf)
        return false;
    r->plan->redirect = (sy_str){buf, len};
    return true;
}

/* RequestHeaderSize: per header name (case-insensitive), the bytes of the
 * name plus those of all its values. */
static bool header_size(sy_run *r, const sy_filter *f) {
    const sy_plan *p = r->plan;
    char small[1024]; /* the message, copied to the arena at the end */
    size_t o = 0;
    bool any = false;
    o += (size_t)snprintf(small, sizeof small,
                          "Request Header/s size is larger than permissible "
                          "limit (%lldB).",
                          (long long)f->size);
    for (size_t i = 0; i < p->header_count; i++) {
        sy_str name = p->headers[i].name;
        bool first = true;
        for (size_t j = 0; j < i && first; j++)
            if (sy_str_ieq(p->headers[j].name, name.ptr, name.len))
                first = false;
        if (!first)
            continue;
        int64_t total = (int64_t)name.len;
        for (size_t j = i; j < p->header_count; j++)
            if (sy_str_ieq(p->headers[j].name, name.ptr, name.len))
                total += (int64_t)p->headers[j].value.len;
        if (total <= f->size)
            continue;
        any = true;
        if (o < sizeof small)
            o += (size_t)snprintf(small + o, sizeof small - o,
                                  " Request Header/s size for '%.*s' is "
                                  "%lldB.",
                                  (int)(name.len > 200 ? 200 : name.len),
                                  name.ptr, (long long)total);
    }
    if (!any)
        return true;
    if (o >= sizeof small)
        o = sizeof small - 1;
    char *text = sy_arena_strndup(r->ar, small, o);
    if (!text)
        return false;
    respond(r, SY_ACTION_RESPOND, 431);
    return resp_add(r, SY_RESP_ADD, f->name, (sy_str){text, o}, empty_str);
}

/* SCG's getReadableByteCount: 1000-based, one decimal. */
static int readable_bytes(char *dst, size_t cap, int64_t bytes) {
    static const char prefix[] = "kMGTPE";
    if (bytes < 1000)
        return snprintf(dst, cap, "%lld B", (long long)bytes);
    int exp = 0;
    double v = (double)bytes;
    while (v >= 1000.0 && exp < 6) {
        v /= 1000.0;
        exp++;
    }
    return snprintf(dst, cap, "%.1f %cB", v, prefix[exp - 1]);
}

static bool request_size(sy_run *r, const sy_filter *f) {
    int64_t cl = r->req->content_length;
    if (cl < 0 || cl <= f->size)
        return true;
    char a[32], b[32], text[160];
    readable_bytes(a, sizeof a, cl);
    readable_bytes(b, sizeof b, f->size);
    int n = snprintf(text, sizeof text,
                     "Request size is larger than permissible limit. Request "
                     "size is %s where permissible limit is %s",
                     a, b);
    size_t len = n < 0                      ? 0
                 : (size_t)n >= sizeof text ? sizeof text - 1
                                            : (size_t)n;
    char *msg = sy_arena_strndup(r->ar, text, len);
    if (!msg)
        return false;
    respond(r, SY_ACTION_RESPOND, 413);
    return resp_add(r, SY_RESP_ADD, cstr(SY_FILTER_ERROR_HEADER),
                    (sy_str){msg, len}, empty_str);
}

static bool headers_if_not_present(sy_run *r, const sy_filter *f) {
    /* Decide against the headers as they were before this filter, then
     * add every value of each missing-or-blank name (SCG groups the
     * items by name). */
    size_t before = r->plan->header_count;
    for (size_t i = 0; i < f->item_count; i++) {
        sy_str name = f->items[i].name;
        bool blank = true;
        for (size_t j = 0; j < before && blank; j++)
            if (sy_str_ieq(r->plan->headers[j].name, name.ptr, name.len) &&
                has_text(r->plan->headers[j].value))
                blank = false;
        if (!blank)
            continue;
        sy_str v;
        if (!expand(r, f->items[i].value, &v) || !hdr_add(r, name, v))
            return false;
    }
    return true;
}

static bool add_param(sy_run *r, const sy_filter *f) {
    sy_str v;
    if (!expand(r, f->value, &v))
        return false;
    sy_str q = r->plan->query, sep = empty_str;
    if (!has_text(q))
        q = empty_str;
    else if (q.ptr[q.len - 1] != '&')
        sep = cstr("&");
    size_t len;
    char *head = concat(r->ar, q, sep, f->name, cstr("="), &len);
    if (!head)
        return false;
    char *buf =
        concat(r->ar, (sy_str){head, len}, v, empty_str, empty_str, &len);
    if (!buf)
        return false;
    r->plan->query = (sy_str){buf, len};
    return true;
}

static bool map_header(sy_run *r, const sy_filter *f) {
    size_t n = r->plan->header_count;
    for (size_t i = 0; i < n; i++) {
        sy_header h = r->plan->headers[i];
        if (sy_str_ieq(h.name, f->name.ptr, f->name.len) &&
            !hdr_add(r, f->value, h.value))
            return false;
    }
    return true;
}

/* Apply one filter. Returns 0 or SY_ENOMEM. */
static int apply(sy_run *r, const sy_filter *f) {
    sy_plan *p = r->plan;
    sy_str v;
    size_t len;
    bool ok = true;
    switch (f->id) {
    case SY_F_ADD_REQUEST_HEADER:
        ok = expand(r, f->value, &v) && hdr_add(r, f->name, v);
        break;
    case SY_F_ADD_REQUEST_HEADERS_IF_NOT_PRESENT:
        ok = headers_if_not_present(r, f);
        break;
    case SY_F_ADD_REQUEST_PARAMETER: ok = add_param(r, f); break;
    case SY_F_ADD_RESPONSE_HEADER:
        ok = expand(r, f->value, &v) &&
             resp_add(r, f->flag ? SY_RESP_ADD : SY_RESP_ADD_IF_ABSENT, f->name,
                      v, empty_str);
        break;
    case SY_F_DEDUPE_RESPONSE_HEADER:
        ok = resp_add(r, SY_RESP_DEDUPE, f->name, empty_str, f->arg);
        break;
    case SY_F_MAP_REQUEST_HEADER: ok = map_header(r, f); break;
    case SY_F_PREFIX_PATH: {
        /* SCG: only the first PrefixPath of the chain applies */
        if (r->prefixed)
            break;
        r->prefixed = true;
        char *buf = NULL;
        ok = expand_uri_path(r, f->value, &v) &&
             (buf = concat(r->ar, v, p->path, empty_str, empty_str, &len));
        if (ok)
            p->path = (sy_str){buf, len};
        break;
    }
    case SY_F_PRESERVE_HOST_HEADER: p->preserve_host = true; break;
    case SY_F_REDIRECT_TO:
        if (short_circuited(r))
            break;
        ok = redirect_to(r, f);
        if (ok)
            respond(r, SY_ACTION_REDIRECT, f->status);
        break;
    case SY_F_REMOVE_REQUEST_HEADER: hdr_remove(p, f->name, 0); break;
    case SY_F_REMOVE_RESPONSE_HEADER:
        ok = resp_add(r, SY_RESP_REMOVE, f->name, empty_str, empty_str);
        break;
    case SY_F_REMOVE_REQUEST_PARAMETER: ok = remove_param(r, f->name); break;
    case SY_F_REQUEST_HEADER_SIZE:
        if (!short_circuited(r))
            ok = header_size(r, f);
        break;
    case SY_F_REQUEST_SIZE:
        if (!short_circuited(r))
            ok = request_size(r, f);
        break;
    case SY_F_REWRITE_PATH: return rewrite_path(r, f);
    case SY_F_REWRITE_LOCATION_RESPONSE_HEADER:
        ok = resp_add(r, SY_RESP_REWRITE_LOCATION, f->name, f->value, f->arg) &&
             host_add(r, &f->entry);
        break;
    case SY_F_REWRITE_RESPONSE_HEADER:
        ok = resp_add(r, SY_RESP_REWRITE, f->name, f->value, f->arg);
        break;
    case SY_F_SET_PATH:
        ok = expand_uri_path(r, f->value, &v);
        if (ok)
            p->path = v;
        break;
    case SY_F_SET_REQUEST_HEADER:
        ok = expand(r, f->value, &v) && hdr_set(r, f->name, v);
        break;
    case SY_F_SET_RESPONSE_HEADER:
        ok = expand(r, f->value, &v) &&
             resp_add(r, SY_RESP_SET, f->name, v, empty_str);
        break;
    case SY_F_SET_REQUEST_HOST_HEADER:
        /* SCG: remove Host, add the new one, keep it upstream */
        ok = expand(r, f->value, &v);
        if (ok) {
            hdr_remove(p, cstr("Host"), 0);
            ok = hdr_add(r, cstr("Host"), v);
            p->preserve_host = true;
        }
        break;
    case SY_F_SET_STATUS:
        if (!short_circuited(r))
            p->status = f->status;
        break;
    case SY_F_STRIP_PREFIX: ok = strip_prefix(r, f->size); break;
    default: /* stateful built-ins and host filters */
        ok = host_add(r, &f->entry);
        break;
    }
    return ok ? 0 : SY_ENOMEM;
}

/*
 * The chain as SCG builds it (RouteDefinitionRouteLocator.getFilters):
 * each list numbered from 1 in its own order, both stably sorted together
 * by that number, defaults first on ties - default 1, route 1, default 2,
 * route 2, ... NULL entries (a compiler that produced nothing) keep their
 * number and are skipped.
 */
int sy_plan_compute(sy_plan *plan, const sy_filter *const *defaults,
                    size_t default_count, const sy_filter *const *filters,
                    size_t filter_count, const sy_request *req,
                    const sy_capture *vars, size_t var_count,
                    pcre2_match_data *md, sy_arena *scratch) {
    memset(plan, 0, sizeof *plan);
    plan->action = SY_ACTION_PROXY;
    plan->path = req->path.ptr ? req->path : empty_str;
    plan->query = req->query.ptr ? req->query : empty_str;
    if (req->header_count) {
        size_t cap = req->header_count + 8;
        plan->headers = sy_arena_alloc(scratch, cap * sizeof(sy_header));
        if (!plan->headers)
            return SY_ENOMEM;
        memcpy(plan->headers, req->headers,
               req->header_count * sizeof(sy_header));
        plan->header_count = req->header_count;
        plan->header_cap = cap;
    }
    sy_run r = {plan, req, vars, var_count, md, scratch, false};
    size_t n = default_count > filter_count ? default_count : filter_count;
    for (size_t i = 0; i < n; i++) {
        const sy_filter *pair[2] = {i < default_count ? defaults[i] : NULL,
                                    i < filter_count ? filters[i] : NULL};
        for (size_t k = 0; k < 2; k++) {
            int rc = pair[k] ? apply(&r, pair[k]) : 0;
            if (rc)
                return rc;
        }
    }
    return 0;
}
