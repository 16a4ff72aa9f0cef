/*
 * filter_query.c - the plan's raw query string: RemoveRequestParameter
 * and RewriteRequestParameter (read into a multi-map by decoded name,
 * re-encoded as SCG does) and AddRequestParameter. Strings live in the
 * scratch arena.
 */
#include "route/filter_plan_int.h"

/* The next byte of s form-decoded ('+' is space, %XX a byte, a bad
 * escape kept as it is), advancing *i. */
static unsigned char next_decoded(sy_str s, size_t *i) {
    unsigned char ch = (unsigned char)s.ptr[*i];
    if (ch == '+') {
        ch = ' ';
    } else if (ch == '%' && *i + 2 < s.len && sy__hexval(s.ptr[*i + 1]) >= 0 &&
               sy__hexval(s.ptr[*i + 2]) >= 0) {
        ch = (unsigned char)(sy__hexval(s.ptr[*i + 1]) * 16 +
                             sy__hexval(s.ptr[*i + 2]));
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

/* Written as it is (unreserved characters and the safe sub-delims). */
static bool plain(unsigned char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
           (ch >= '0' && ch <= '9') ||
           (ch && strchr("-._~!$'()*,;:@/?", ch) != NULL);
}

/* Decode then re-encode a query name or value, so that equal decoded
 * values get one spelling. Keeps unreserved characters and the safe
 * sub-delims; encodes '&', '=', '+', '%', '#', space, controls and
 * non-ASCII bytes. Writes to dst when non-NULL; returns the length. */
static size_t reencode(sy_str s, char *dst) {
    size_t o = 0;
    for (size_t i = 0; i < s.len;) {
        unsigned char ch = next_decoded(s, &i);
        o += sy__plan_put_byte(dst ? dst + o : NULL, ch, plain(ch));
    }
    return o;
}

/* Encode a plain (not encoded) name or value as reencode spells it. */
static size_t encode_plain(sy_str s, char *dst) {
    size_t o = 0;
    for (size_t i = 0; i < s.len; i++) {
        unsigned char ch = (unsigned char)s.ptr[i];
        o += sy__plan_put_byte(dst ? dst + o : NULL, ch, plain(ch));
    }
    return o;
}

/* One "name[=value]" piece of a raw query. */
typedef struct sy__qpart {
    sy_str name;
    sy_str value;
    bool has_eq;
    bool done; /* emitted or removed */
} sy__qpart;

static bool next_part(sy_str q, size_t *pos, sy__qpart *out) {
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
            out->has_eq ? (sy_str){q.ptr + eq + 1, e - eq - 1} : SY_PLAN_EMPTY;
        out->done = false;
        return true;
    }
    return false;
}

static size_t put_part(char *buf, size_t o, const sy__qpart *qp) {
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
 * RewriteRequestParameter (`replacement` non-NULL), as SCG does it: the
 * same, then the name is added back last with the one value
 * `replacement` (encoded). switchyard: a query without that parameter is
 * left byte for byte.
 */
bool sy__plan_remove_param(sy__run *r, sy_str name, const sy_str *replacement) {
    sy_str q = r->plan->query;
    size_t pos = 0, n = 0;
    sy__qpart part;
    bool found = false;
    while (next_part(q, &pos, &part)) {
        n++;
        found = found || decoded_eq(part.name, name, true);
    }
    if (!found)
        return true;
    sy__qpart *parts = sy__arena_alloc(r->ar, n * sizeof *parts);
    /* worst case every byte becomes %XX */
    size_t extra = replacement ? 3 * (name.len + replacement->len) + 2 : 0;
    char *buf = sy__arena_alloc(r->ar, q.len * 3 + extra + 1);
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
    if (replacement) {
        if (o)
            buf[o++] = '&';
        o += encode_plain(name, buf + o);
        buf[o++] = '=';
        o += encode_plain(*replacement, buf + o);
    }
    buf[o] = '\0';
    r->plan->query = (sy_str){buf, o};
    return true;
}

/* May this byte stand in a request target's query as it is? Not a
 * space, control, non-ASCII byte or one of "#<>\^`{|}: a captured
 * variable is decoded ("a b"), and written raw it would break the
 * upstream request line. */
static bool query_safe(unsigned char ch) {
    return ch > 0x20 && ch < 0x7f && !strchr("\"#<>\\^`{|}", ch);
}

/* s with the bytes query_safe refuses as %XX (what java.net.URI does to
 * them when SCG builds the new query), in the arena; '%', '&', '=' and
 * '+' are kept as they are, as SCG appends them. */
static bool query_encode(sy__run *r, sy_str s, sy_str *out) {
    size_t n = 0;
    for (size_t i = 0; i < s.len; i++)
        n += query_safe((unsigned char)s.ptr[i]) ? 1 : 3;
    if (n == s.len) {
        *out = s;
        return true;
    }
    char *buf = sy__arena_alloc(r->ar, n + 1);
    if (!buf)
        return false;
    size_t o = 0;
    for (size_t i = 0; i < s.len; i++) {
        unsigned char ch = (unsigned char)s.ptr[i];
        o += sy__plan_put_byte(buf + o, ch, query_safe(ch));
    }
    buf[o] = '\0';
    *out = (sy_str){buf, o};
    return true;
}

/* AddRequestParameter: "name=<expanded value>" appended to the query,
 * behind a '&' unless the query is blank or already ends in one; bytes
 * that cannot stand in a query are percent-encoded (query_encode). */
bool sy__plan_add_param(sy__run *r, const sy__filter *f) {
    sy_str v, name;
    if (!sy__plan_expand(r, f->value, &v) || !query_encode(r, v, &v) ||
        !query_encode(r, f->name, &name))
        return false;
    sy_str q = r->plan->query, sep = SY_PLAN_EMPTY;
    if (!sy__plan_has_text(q))
        q = SY_PLAN_EMPTY;
    else if (q.ptr[q.len - 1] != '&')
        sep = sy__plan_cstr("&");
    size_t len;
    char *head = sy__plan_concat(r->ar, q, sep, name, sy__plan_cstr("="), &len);
    if (!head)
        return false;
    char *buf = sy__plan_concat(r->ar, (sy_str){head, len}, v, SY_PLAN_EMPTY,
                                SY_PLAN_EMPTY, &len);
    if (!buf)
        return false;
    r->plan->query = (sy_str){buf, len};
    return true;
}
