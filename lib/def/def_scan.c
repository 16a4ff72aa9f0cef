/*
 * def_scan.c - the pre-scan of a document's JSON text (def_scan.h): a
 * strict RFC 8259 tokenizer that builds nothing, so a hostile document is
 * rejected at the cost of reading it once, before cJSON allocates a tree.
 *
 * It keeps a stack of open containers (one frame per level, at most
 * max_depth) holding the key or index of the current child, so any error
 * can name its JSON path:
 *
 *     {"routes":[ {"id":"a\u0000"} ]}
 *      frame 0: object, key "routes"
 *                frame 1: array, index 0        <- the routes array
 *                  frame 2: object, key "id"    -> "routes[0].id"
 *
 * The grammar is RFC 8259 (numbers without leading zeros, the escapes it
 * lists, surrogate pairs paired), plus an optional UTF-8 byte order mark
 * as cJSON accepts. Everything it accepts cJSON parses, so def.c reads a
 * cJSON failure on scanned text as out of memory.
 */
#include "def/def_scan.h"

#include <stdarg.h>
#include <stdio.h>

typedef struct frame {
    char kind; /* '[' or '{' */
    size_t index;
    const char *key; /* raw key text (between the quotes), objects */
    size_t key_len;
} frame;

typedef struct scanner {
    const sy__alloc *a;
    const char *s;
    size_t len, pos;
    const sy_limits *lim;
    uint32_t max_depth;
    frame *st;
    uint32_t depth;
    bool want_routes;
    uint32_t routes_depth; /* depth of the routes array's frame, 0: none */
    bool routes_done;      /* the routes array was closed */
    size_t values;         /* in the current route (or the whole text) */
    sy__json_scan *out;
    size_t cap;
    const sy__json_skip *skip; /* may be NULL */
    sy_error *err;
} scanner;

void sy__json_locate(const char *json, size_t len, size_t off, sy_error *err) {
    if (!err)
        return;
    if (off > len)
        off = len;
    uint32_t line = 1;
    size_t line_start = 0;
    for (size_t i = 0; i < off; i++)
        if (json[i] == '\n') {
            line++;
            line_start = i + 1;
        }
    err->line = line;
    err->column = (uint32_t)(off - line_start + 1);
    err->offset = off;
}

/* The JSON path of the open frames (up to `upto` of them), as def.c
 * writes paths: "routes[3].uri", "[0].metadata". */
static void path_of(const scanner *sc, uint32_t upto, char *buf, size_t cap) {
    size_t o = 0;
    buf[0] = '\0';
    for (uint32_t i = 0; i < upto && o + 1 < cap; i++) {
        const frame *f = &sc->st[i];
        int n;
        if (f->kind == '[')
            n = snprintf(buf + o, cap - o, "[%zu]", f->index);
        else if (f->key)
            n = snprintf(buf + o, cap - o, "%s%.*s", o ? "." : "",
                         (int)(f->key_len < 150 ? f->key_len : 150), f->key);
        else
            break;
        if (n < 0 || (size_t)n >= cap - o)
            break;
        o += (size_t)n;
    }
}

/* An error named by the first `upto` frames and located at `off`. */
static int fail_at(scanner *sc, int code, uint32_t upto, size_t off,
                   const char *fmt, ...) {
    char path[256], msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    path_of(sc, upto, path, sizeof path);
    sy__error_set(sc->err, code, path, "%s", msg);
    sy__json_locate(sc->s, sc->len, off, sc->err);
    return code;
}

static int unexpected(scanner *sc) {
    if (sc->pos >= sc->len) {
        sy__error_set(sc->err, SY_ESYNTAX, "",
                      sc->len ? "JSON syntax error: unexpected end of document"
                              : "JSON syntax error: the document is empty");
    } else {
        unsigned char c = (unsigned char)sc->s[sc->pos];
        if (c > 0x20 && c < 0x7f)
            sy__error_set(sc->err, SY_ESYNTAX, "",
                          "JSON syntax error: unexpected '%c'", c);
        else
            sy__error_set(sc->err, SY_ESYNTAX, "",
                          "JSON syntax error: unexpected byte 0x%02x",
                          (unsigned)c);
    }
    sy__json_locate(sc->s, sc->len, sc->pos, sc->err);
    return SY_ESYNTAX;
}

/* JSON's whitespace: space, tab, newline, carriage return. */
static const unsigned char is_ws[256] = {
    [' '] = 1, ['\t'] = 1, ['\n'] = 1, ['\r'] = 1};

static void skip_ws(scanner *sc) {
    size_t p = sc->pos, len = sc->len;
    while (p < len && is_ws[(unsigned char)sc->s[p]])
        p++;
    sc->pos = p;
}

static int hex4(const char *p, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        unsigned d;
        if (c >= '0' && c <= '9')
            d = (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            d = (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            d = (unsigned)(c - 'A' + 10);
        else
            return -1;
        v = v << 4 | d;
    }
    *out = v;
    return 0;
}

/* A string at sc->pos (on its opening quote). Checks escapes, NUL bytes
 * and the decoded length; is_key: the frame on top records it. */
static inline __attribute__((always_inline)) int scan_string(scanner *sc,
                                                             bool is_key) {
    size_t start = ++sc->pos, decoded = 0;
    const char *s = sc->s;
    for (;;) {
        /* a run of plain bytes at once, in locals (the scanner's fields
         * would be stored back at every byte) */
        size_t p = sy__json_plain_end(s, sc->pos, sc->len);
        decoded += p - sc->pos;
        sc->pos = p;
        if (sc->pos >= sc->len)
            return unexpected(sc);
        unsigned char c = (unsigned char)s[sc->pos];
        if (c == '"')
            break;
        if (c == 0)
            return fail_at(sc, SY_EARG, sc->depth, sc->pos,
                           "a string holds a NUL byte");
        if (c != '\\') {
            decoded++;
            sc->pos++;
            continue;
        }
        size_t esc = sc->pos;
        if (sc->pos + 1 >= sc->len) {
            sc->pos = sc->len;
            return unexpected(sc);
        }
        char e = s[sc->pos + 1];
        if (e != 'u') {
            if (!strchr("\"\\/bfnrt", e) || e == 0) {
                sc->pos++;
                return unexpected(sc);
            }
            decoded++;
            sc->pos += 2;
            continue;
        }
        unsigned cp, lo;
        if (sc->pos + 6 > sc->len || hex4(s + sc->pos + 2, &cp)) {
            sc->pos += 2;
            return unexpected(sc);
        }
        sc->pos += 6;
        if (cp == 0)
            return fail_at(sc, SY_EARG, sc->depth, esc,
                           "a string holds a NUL byte (\\u0000)");
        if (cp >= 0xDC00 && cp <= 0xDFFF) {
            sc->pos = esc;
            return fail_at(sc, SY_ESYNTAX, 0, esc,
                           "JSON syntax error: a lone low surrogate");
        }
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (sc->pos + 6 > sc->len || s[sc->pos] != '\\' ||
                s[sc->pos + 1] != 'u' || hex4(s + sc->pos + 2, &lo) ||
                lo < 0xDC00 || lo > 0xDFFF)
                return fail_at(sc, SY_ESYNTAX, 0, esc,
                               "JSON syntax error: a high surrogate without "
                               "its low surrogate");
            sc->pos += 6;
            decoded += 4;
        } else {
            decoded += cp < 0x80 ? 1 : cp < 0x800 ? 2 : 3;
        }
    }
    size_t end = sc->pos++; /* past the closing quote */
    if (is_key) {
        frame *f = &sc->st[sc->depth - 1];
        f->key = s + start;
        f->key_len = end - start;
    }
    if (decoded > sc->lim->max_string_bytes) {
        /* a long key names its object; a long value names itself */
        return fail_at(sc, SY_ELIMIT, is_key ? sc->depth - 1 : sc->depth,
                       start - 1,
                       is_key ? "a key is longer than %zu bytes"
                              : "a string is longer than %zu bytes",
                       sc->lim->max_string_bytes);
    }
    return 0;
}

static int scan_number(scanner *sc) {
    const char *s = sc->s;
    if (sc->pos < sc->len && s[sc->pos] == '-')
        sc->pos++;
    if (sc->pos >= sc->len || !sy__json_digit(s[sc->pos]))
        return unexpected(sc);
    if (s[sc->pos] == '0')
        sc->pos++;
    else
        while (sc->pos < sc->len && sy__json_digit(s[sc->pos]))
            sc->pos++;
    if (sc->pos < sc->len && s[sc->pos] == '.') {
        sc->pos++;
        if (sc->pos >= sc->len || !sy__json_digit(s[sc->pos]))
            return unexpected(sc);
        while (sc->pos < sc->len && sy__json_digit(s[sc->pos]))
            sc->pos++;
    }
    if (sc->pos < sc->len && (s[sc->pos] == 'e' || s[sc->pos] == 'E')) {
        sc->pos++;
        if (sc->pos < sc->len && (s[sc->pos] == '+' || s[sc->pos] == '-'))
            sc->pos++;
        if (sc->pos >= sc->len || !sy__json_digit(s[sc->pos]))
            return unexpected(sc);
        while (sc->pos < sc->len && sy__json_digit(s[sc->pos]))
            sc->pos++;
    }
    /* a number runs into the next token: "01", "1x" */
    if (sc->pos < sc->len && (sy__json_digit(s[sc->pos]) || s[sc->pos] == '.' ||
                              (s[sc->pos] >= 'a' && s[sc->pos] <= 'z') ||
                              (s[sc->pos] >= 'A' && s[sc->pos] <= 'Z')))
        return unexpected(sc);
    return 0;
}

static int scan_literal(scanner *sc, const char *word) {
    size_t n = strlen(word);
    for (size_t i = 0; i < n; i++, sc->pos++)
        if (sc->pos >= sc->len || sc->s[sc->pos] != word[i])
            return unexpected(sc);
    return 0;
}

/* Is the key on frame f (raw text) exactly `word`? Keys with escapes are
 * compared decoded for the simple escapes a key like "routes" could use. */
static bool key_is(const frame *f, const char *word) {
    size_t n = strlen(word), i = 0, k = 0;
    while (k < f->key_len) {
        char c = f->key[k];
        if (c == '\\') {
            unsigned cp;
            if (k + 6 <= f->key_len && f->key[k + 1] == 'u' &&
                hex4(f->key + k + 2, &cp) == 0 && cp < 0x80) {
                c = (char)cp;
                k += 6;
            } else if (k + 1 < f->key_len && f->key[k + 1] == '/') {
                c = '/';
                k += 2;
            } else {
                return false;
            }
        } else {
            k++;
        }
        if (i >= n || word[i++] != c)
            return false;
    }
    return i == n;
}

static int count_value(scanner *sc) {
    if (++sc->values <= SY_MAX_ROUTE_VALUES)
        return 0;
    bool in_route = sc->routes_depth && sc->depth > sc->routes_depth;
    uint32_t upto = in_route ? sc->routes_depth : sc->depth;
    return fail_at(sc, SY_ELIMIT, upto, sc->pos,
                   in_route ? "a route holds more than %zu JSON values"
                            : "more than %zu JSON values",
                   (size_t)SY_MAX_ROUTE_VALUES);
}

/* A value starts at sc->pos (whitespace skipped) as a child of the top
 * frame (or as the root): note where a route or the version begins. */
static int begin_value(scanner *sc) {
    if (sc->routes_depth && sc->depth == sc->routes_depth) {
        sy__json_scan *o = sc->out;
        if (o->route_count >= sc->lim->max_routes)
            return fail_at(sc, SY_ELIMIT, sc->routes_depth - 1, sc->pos,
                           "more than %zu routes (the limit)",
                           sc->lim->max_routes);
        if (o->route_count == sc->cap) {
            size_t first = 64;
            if (sc->skip && sc->skip->expect > first &&
                sc->skip->expect <= sc->lim->max_routes)
                first = sc->skip->expect; /* no copies on the way up */
            sy__json_span *n =
                sy__grow(sc->a, o->routes, &sc->cap, o->route_count + 1, first,
                         sizeof *o->routes);
            if (!n)
                return sy__error_set(sc->err, SY_ENOMEM, "", "out of memory");
            o->routes = n;
        }
        o->routes[o->route_count] =
            (sy__json_span){sc->pos, 0, 0, NULL, 0, false};
        sc->values = 0;
    }
    return count_value(sc);
}

/* A value ended at sc->pos, child of the top frame. */
static void end_value(scanner *sc, size_t start) {
    static const char *const dflt[] = {"default-filters", "defaultFilters",
                                       "default_filters"};
    if (sc->depth == 1 && sc->st[0].kind == '{' && !sc->out->default_filters)
        for (size_t i = 0; i < SY_ARRAY_LEN(dflt); i++)
            if (key_is(&sc->st[0], dflt[i]))
                sc->out->default_filters = dflt[i];
    if (sc->routes_depth && sc->depth == sc->routes_depth)
        sc->out->routes[sc->out->route_count++].end = sc->pos;
    if (sc->depth == 1 && sc->st[0].kind == '{' &&
        key_is(&sc->st[0], "version") && !sc->out->version.end) {
        sc->out->version.start = start;
        sc->out->version.end = sc->pos;
    }
}

/* Where the scan of scan() stands: the states of its loop (the negative
 * SY_E* codes end it too). */
enum { AT_END = 0, AT_VALUE, AT_AFTER, AT_KEY };

/* A route the caller knows (sc->skip) at sc->pos: valid bytes, skipped
 * whole. True when skipped. */
static bool skip_known_route(scanner *sc) {
    if (!sc->skip || !sc->routes_depth || sc->depth != sc->routes_depth)
        return false;
    size_t values = sc->values;
    size_t n = sc->skip->fn(sc->skip->data, sc->s, sc->len, sc->out,
                            sc->out->route_count, sc->pos, sc->depth, &values);
    if (!n || n > sc->len - sc->pos)
        return false;
    sc->pos += n;
    sc->values = values;
    return true;
}

/* The top frame's container closed (its closing byte read). */
static void close_frame(scanner *sc) {
    if (sc->routes_depth == sc->depth) {
        sc->routes_depth = 0; /* the routes array is complete (or empty) */
        sc->routes_done = true;
    }
    sc->depth--;
}

/* A '{' or '[' at sc->pos: a new frame (the routes array noted), closed
 * at once when empty. The next state. */
static int open_container(scanner *sc, char c) {
    if (sc->depth >= sc->max_depth)
        return fail_at(sc, SY_ELIMIT, 0, sc->pos,
                       "JSON nesting deeper than %u levels", sc->max_depth);
    frame *f = &sc->st[sc->depth++];
    *f = (frame){c, 0, NULL, 0};
    if (sc->want_routes && !sc->routes_depth && !sc->routes_done &&
        ((sc->depth == 1 && c == '[') ||
         (sc->depth == 2 && c == '[' && sc->st[0].kind == '{' &&
          key_is(&sc->st[0], "routes"))))
        sc->routes_depth = sc->depth;
    sc->pos++;
    skip_ws(sc);
    if (sc->pos < sc->len && sc->s[sc->pos] == (c == '{' ? '}' : ']')) {
        sc->pos++;
        close_frame(sc);
        return AT_AFTER;
    }
    return c == '[' ? AT_VALUE : AT_KEY;
}

static int scan_scalar(scanner *sc, char c) {
    if (c == '"')
        return scan_string(sc, false);
    if (c == '-' || sy__json_digit(c))
        return scan_number(sc);
    if (c == 't')
        return scan_literal(sc, "true");
    if (c == 'f')
        return scan_literal(sc, "false");
    if (c == 'n')
        return scan_literal(sc, "null");
    return unexpected(sc);
}

/* ---- the fast check of one route ----
 *
 * Most route elements are valid, and the frames the scan keeps (a key or
 * an index per level, for an error's path) are read only when something
 * fails. fast_route checks one element of the routes array with its
 * position in a register and no frames: the same grammar and the same
 * limits as the scan below. Anything it does not take on (a \u escape, a
 * nesting deeper than 63 levels in the route) and every error makes it
 * return 0: the scan then reads the element again from its first byte,
 * and finds and locates what is wrong as it always did. So it may give up
 * on a valid element (that costs time only), never accept an invalid one. */

static inline size_t fast_ws(const char *s, size_t pos, size_t len) {
    while (pos < len && is_ws[(unsigned char)s[pos]])
        pos++;
    return pos;
}

/* The route element at sc->pos (its '{', counted in sc->values): the
 * position past its closing brace with *values its count of values, or 0
 * (see above). */
static size_t fast_route(const scanner *sc, size_t *values) {
    const char *s = sc->s;
    size_t len = sc->len, pos = sc->pos, n = *values;
    size_t max_bytes = sc->lim->max_string_bytes;
    uint32_t depth = sc->depth, max_depth = sc->max_depth;
    uint64_t objects = 0; /* a bit a level open in the route: 1 object */
    unsigned level = 0;
    char c = '{';
    for (;;) {
        /* a value at pos, counted: c is its first byte */
        if (c == '{' || c == '[') {
            if (depth >= max_depth || level >= SY_JSON_FAST_LEVELS)
                return 0;
            depth++;
            level++;
            objects = objects << 1 | (c == '{');
            pos = fast_ws(s, pos + 1, len);
            if (pos >= len)
                return 0;
            if (s[pos] == (c == '{' ? '}' : ']')) {
                pos++;
                depth--;
                level--;
                objects >>= 1;
            } else if (c == '[') {
                goto value;
            } else {
                goto key;
            }
        } else if (c == '"') {
            if (!(pos = sy__json_string_end(s, pos, len, max_bytes, NULL)))
                return 0;
        } else if (c == '-' || sy__json_digit(c)) {
            if (!(pos = sy__json_number_end(s, pos, len)))
                return 0;
        } else {
            const char *w = c == 't' ? "true" : c == 'f' ? "false" : "null";
            size_t k = c == 'f' ? 5 : 4;
            if ((c != 't' && c != 'f' && c != 'n') || len - pos < k ||
                memcmp(s + pos, w, k) != 0)
                return 0;
            pos += k;
        }
        /* after a value: a ',' and the next, or closing brackets */
        for (;;) {
            if (!level) {
                *values = n;
                return pos;
            }
            pos = fast_ws(s, pos, len);
            if (pos >= len)
                return 0;
            if (s[pos] == ',') {
                pos = fast_ws(s, pos + 1, len);
                if (objects & 1)
                    goto key;
                goto value;
            }
            if (s[pos] != ((objects & 1) ? '}' : ']'))
                return 0;
            pos++;
            depth--;
            level--;
            objects >>= 1;
        }
    key:
        if (pos >= len || s[pos] != '"' ||
            !(pos = sy__json_string_end(s, pos, len, max_bytes, NULL)))
            return 0;
        pos = fast_ws(s, pos, len);
        if (pos >= len || s[pos] != ':')
            return 0;
        pos = fast_ws(s, pos + 1, len);
    value:
        if (pos >= len || ++n > SY_MAX_ROUTE_VALUES)
            return 0;
        c = s[pos];
    }
}

/* A value starts at sc->pos: a known route skipped, a container opened
 * or a scalar read. *vstart: where a value at depth 1 starts. */
static int at_value(scanner *sc, size_t *vstart) {
    int rc;
    if (sc->pos >= sc->len)
        return unexpected(sc);
    if ((rc = begin_value(sc)))
        return rc;
    if (sc->depth == 1)
        *vstart = sc->pos;
    char c = sc->s[sc->pos];
    if (sc->depth == 0)
        sc->out->root = c;
    if (c == '{' && skip_known_route(sc))
        return AT_AFTER;
    if (c == '{' && sc->routes_depth && sc->depth == sc->routes_depth) {
        size_t values = sc->values, end = fast_route(sc, &values);
        if (end) { /* else read again below, to find what is wrong */
            sc->pos = end;
            sc->values = values;
            return AT_AFTER;
        }
    }
    if (c == '{' || c == '[')
        return open_container(sc, c);
    rc = scan_scalar(sc, c);
    return rc ? rc : AT_AFTER;
}

/* The root value closed: nothing but whitespace may follow. */
static int end_of_document(scanner *sc) {
    skip_ws(sc);
    if (sc->pos >= sc->len)
        return AT_END;
    sy__error_set(sc->err, SY_ESYNTAX, "",
                  "JSON syntax error: unexpected data after the document");
    sy__json_locate(sc->s, sc->len, sc->pos, sc->err);
    return SY_ESYNTAX;
}

/* A value just closed, a child of the top frame (or the root): a ',' and
 * the next child, or the frame's closing byte. */
static int at_after(scanner *sc, size_t vstart) {
    end_value(sc, sc->depth == 1 ? vstart : 0);
    if (sc->depth == 0)
        return end_of_document(sc);
    skip_ws(sc);
    if (sc->pos >= sc->len)
        return unexpected(sc);
    frame *f = &sc->st[sc->depth - 1];
    char c = sc->s[sc->pos];
    if (c == ',') {
        sc->pos++;
        f->index++;
        f->key = NULL; /* until the next key is read */
        skip_ws(sc);
        return f->kind == '[' ? AT_VALUE : AT_KEY;
    }
    if (c != (f->kind == '{' ? '}' : ']'))
        return unexpected(sc);
    sc->pos++;
    close_frame(sc);
    return AT_AFTER;
}

/* An object's key and its ':' (the routes key of the root noted). */
static int at_key(scanner *sc) {
    int rc;
    if (sc->pos >= sc->len || sc->s[sc->pos] != '"')
        return unexpected(sc);
    if ((rc = scan_string(sc, true)))
        return rc;
    skip_ws(sc);
    if (sc->pos >= sc->len || sc->s[sc->pos] != ':')
        return unexpected(sc);
    sc->pos++;
    skip_ws(sc);
    if (sc->depth == 1 && key_is(&sc->st[0], "routes") &&
        !sc->out->has_routes) {
        sc->out->has_routes = true;
        sc->out->routes_first = sc->pos < sc->len ? sc->s[sc->pos] : 0;
    }
    return AT_VALUE;
}

/* The whole text: a value, what follows it, a key, as the grammar goes,
 * until the root value closed (0) or an error (negative). */
static int scan(scanner *sc) {
    size_t vstart = 0; /* where the value at depth 1 starts */
    /* an optional UTF-8 byte order mark, as cJSON accepts */
    if (sc->len >= 3 && memcmp(sc->s, "\xEF\xBB\xBF", 3) == 0)
        sc->pos = 3;
    skip_ws(sc);
    int at = AT_VALUE;
    while (at > AT_END) {
        if (at == AT_VALUE)
            at = at_value(sc, &vstart);
        else if (at == AT_AFTER)
            at = at_after(sc, vstart);
        else
            at = at_key(sc);
    }
    return at;
}

static int scan_text(const sy__alloc *a, const char *json, size_t len,
                     const sy_limits *lim, bool routes,
                     const sy__json_skip *skip, sy__json_scan *out,
                     sy_error *err) {
    memset(out, 0, sizeof *out);
    uint32_t max_depth =
        lim->max_depth < SY_JSON_MAX_DEPTH ? lim->max_depth : SY_JSON_MAX_DEPTH;
    scanner sc = {.a = a,
                  .s = json,
                  .len = len,
                  .lim = lim,
                  .max_depth = max_depth,
                  .want_routes = routes,
                  .out = out,
                  .skip = skip && skip->fn ? skip : NULL,
                  .err = err};
    sc.st = sy__malloc(a, (max_depth + 1) * sizeof *sc.st);
    if (!sc.st)
        return sy__error_set(err, SY_ENOMEM, "", "out of memory");
    int rc = scan(&sc);
    sy__free(a, sc.st);
    return rc;
}

int sy__json_scan_text(const sy__alloc *a, const char *json, size_t len,
                       const sy_limits *lim, bool routes, sy__json_scan *out,
                       sy_error *err) {
    return scan_text(a, json, len, lim, routes, NULL, out, err);
}

int sy__json_scan_routes(const sy__alloc *a, const char *json, size_t len,
                         const sy_limits *lim, const sy__json_skip *skip,
                         sy__json_scan *out, sy_error *err) {
    return scan_text(a, json, len, lim, true, skip, out, err);
}
