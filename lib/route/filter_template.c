/*
 * filter_template.c - building the plan's strings: {var} templates
 * expanded with the match's captures (as text, or as a percent-encoded URI
 * path the way Spring's UriTemplate does it), concatenation in the
 * scratch arena, and the plan's growable arrays there (the response
 * header operations among them), which every filter file appends to.
 */
#include "route/filter_plan_int.h"

/* The captured value of a variable: the last capture of that name wins
 * (SCG merges Host and Path variables into one map, later ones win). */
static bool var_get(const sy__run *r, const char *name, size_t len,
                    sy_str *out) {
    for (size_t i = r->var_count; i-- > 0;)
        if (sy__str_eq(r->vars[i].name, name, len)) {
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

size_t sy__plan_put_byte(char *dst, unsigned char ch, bool plain) {
    if (!plain) {
        if (dst) {
            dst[0] = '%';
            dst[1] = hex_digits[ch >> 4];
            dst[2] = hex_digits[ch & 15];
        }
        return 3;
    }
    if (dst)
        dst[0] = (char)ch;
    return 1;
}

/* How put() writes: as it is (a header value: control bytes but HTAB
 * percent-encoded); percent-encoded for a path (the template's
 * own text, as Spring's UriTemplate encodes it); or encoded for a path but
 * with an encoded slash or backslash ("%2F", "%5c") kept as it is: a
 * variable's value, where such a sequence is one the capture kept encoded
 * (SY_SLASHES_KEEP), so it reaches the upstream still encoded instead of
 * becoming a separator. */
typedef enum put_mode { PUT_RAW, PUT_PATH, PUT_PATH_VALUE } put_mode;

static bool escaped_slash_at(sy_str s, size_t i) {
    return i + 2 < s.len && s.ptr[i] == '%' &&
           ((s.ptr[i + 1] == '2' && (s.ptr[i + 2] | 0x20) == 'f') ||
            (s.ptr[i + 1] == '5' && (s.ptr[i + 2] | 0x20) == 'c'));
}

/* Append s to dst (if non-NULL) as `mode` says; returns the bytes
 * written. */
static size_t put(char *dst, sy_str s, put_mode mode) {
    size_t n = 0;
    for (size_t i = 0; i < s.len; i++) {
        unsigned char ch = (unsigned char)s.ptr[i];
        /* raw (a header value): a control byte but HTAB percent-encoded,
         * never a line break a decoded {var} would put in the headers */
        bool plain = mode == PUT_RAW
                         ? (ch >= 0x20 || ch == '\t') && ch != 0x7F
                         : path_char(ch) || (mode == PUT_PATH_VALUE &&
                                             escaped_slash_at(s, i));
        n += sy__plan_put_byte(dst ? dst + n : NULL, ch, plain);
    }
    return n;
}

/* One pass of expansion: writes into dst when non-NULL, returns length.
 * Spring's rule: "{name}" or "{name:regex}" with no '/' inside is a
 * variable; anything else stays as written. `path`: the result is a URI
 * path (template text and values percent-encoded, see put_mode). */
static size_t expand_pass(const sy__run *r, sy_str t, char *dst, bool path) {
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
                sy__plan_trim(t.ptr, &s, &e);
                sy_str v = SY_PLAN_EMPTY;
                /* switchyard: an unknown variable expands to "" (SCG
                 * throws and answers 500). */
                (void)var_get(r, t.ptr + s, e - s, &v);
                o += put(dst ? dst + o : NULL, v,
                         path ? PUT_PATH_VALUE : PUT_RAW);
                i = j + 1;
                continue;
            }
        }
        o += put(dst ? dst + o : NULL, (sy_str){t.ptr + i, 1},
                 path ? PUT_PATH : PUT_RAW);
        i++;
    }
    return o;
}

/* Expand `t` into the arena (as a URI path with `path`); `t` itself when
 * nothing changes. */
static bool expand_as(const sy__run *r, sy_str t, bool path, sy_str *out) {
    size_t n = expand_pass(r, t, NULL, path);
    if (n == t.len && !memchr(t.ptr, '{', t.len)) {
        *out = t; /* no variable, nothing encoded */
        return true;
    }
    char *buf = sy__arena_alloc(r->ar, n + 1);
    if (!buf)
        return false;
    expand_pass(r, t, buf, path);
    buf[n] = '\0';
    *out = (sy_str){buf, n};
    return true;
}

bool sy__plan_expand(const sy__run *r, sy_str t, sy_str *out) {
    return expand_as(r, t, false, out);
}

/*
 * The raw path of Spring's UriTemplate(t).expand(vars) (SetPath,
 * PrefixPath): the template is read as a URI, so its path ends at the
 * first '?' or '#' outside a {var}; the variables are expanded, and the
 * whole path - the template's own text as much as the values - is
 * percent-encoded as a path ("%20" in a template goes out as "%2520", a
 * space as "%20"; '/' stays). switchyard: an encoded slash a capture kept
 * encoded stays so (put_mode).
 */
bool sy__plan_expand_uri_path(const sy__run *r, sy_str t, sy_str *out) {
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
    return expand_as(r, (sy_str){t.ptr, end}, true, out);
}

char *sy__plan_concat(sy__arena *ar, sy_str a, sy_str b, sy_str c, sy_str d,
                      size_t *len) {
    size_t n = a.len + b.len + c.len + d.len;
    char *buf = sy__arena_alloc(ar, n + 1);
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

/* ---- growable arrays in the arena ---- */

bool sy__plan_grow(sy__arena *ar, void **arr, size_t *cap, size_t count,
                   size_t elem) {
    if (count < *cap)
        return true;
    size_t ncap = *cap ? *cap * 2 : 8;
    void *n = sy__arena_alloc(ar, ncap * elem);
    if (!n)
        return false;
    if (count)
        memcpy(n, *arr, count * elem);
    *arr = n;
    *cap = ncap;
    return true;
}

bool sy__plan_resp_add(sy__run *r, sy_response_op_kind kind, sy_str name,
                       sy_str value, sy_str arg) {
    sy__plan *p = r->plan;
    void *arr = p->resp;
    if (!sy__plan_grow(r->ar, &arr, &p->resp_cap, p->resp_count,
                       sizeof(sy_response_op)))
        return false;
    p->resp = arr;
    p->resp[p->resp_count++] = (sy_response_op){kind, name, value, arg};
    return true;
}
