/*
 * def_tree.c - the cJSON tree of one route object, built from text that
 * def_scan.c has already checked (syntax, depth, string lengths, NUL
 * bytes, surrogate pairs), with its nodes and strings in an arena that the
 * caller resets from route to route. The tree is cJSON's own node type,
 * read with cJSON's own calls (def_route.c, def_entry.c, def_probe.c); it
 * is never given to cJSON_Delete. What it saves against
 * cJSON_ParseWithLengthOpts: a malloc per node and per string, and their
 * frees, which were most of the cost of parsing a large document.
 *
 * Values are decoded exactly as cJSON 1.7 decodes them: strings with their
 * escapes as UTF-8, numbers through strtod with the locale's decimal point
 * (valueint saturated to int), true with valueint 1, the first child's
 * prev pointing at the last. A number of more than 63 characters (no
 * route needs one) is left to cJSON: the caller parses that route with it.
 *
 * sy__def_tree_parse_checked reads a route element the scan has not
 * checked, checking it as the scan's fast pass does (def_scan.h's
 * readers, the same limits): one read of the text instead of a scan and
 * then a parse. It gives up (and the scan reads the element) on whatever
 * the fast pass gives up on.
 */
#include "def/def_build.h"
#include "def/def_scan.h"

#include <limits.h>
#include <locale.h>
#include <stdlib.h>

/* The parse's shared state; the position travels in arguments and return
 * values instead, so it stays in a register (a field written back at
 * every byte was a third of the parse). */
typedef struct tree_parser {
    const char *s;
    size_t end;
    sy__arena *ar;
    int rc; /* 0, SY_ENOMEM, or SY_DEF_TREE_CJSON */
    /* the checked parse's limits and counts (sy__def_tree_parse_checked) */
    size_t max_bytes, values;
    uint32_t depth, max_depth, level;
} tree_parser;

/* JSON's whitespace: space, tab, newline, carriage return. */
static const unsigned char is_ws[256] = {
    [' '] = 1, ['\t'] = 1, ['\n'] = 1, ['\r'] = 1};

/* Past the blanks at pos. The scan accepted the text, so a byte that is
 * not blank (a value, ':', ',' or a closing bracket) comes before the end
 * wherever this is called: no bound to test. */
static inline size_t skip_ws(const char *s, size_t pos) {
    while (is_ws[(unsigned char)s[pos]])
        pos++;
    return pos;
}

static cJSON *new_node(tree_parser *t, int type) {
    cJSON *n = sy__arena_alloc(t->ar, sizeof *n);
    if (!n) {
        t->rc = SY_ENOMEM;
        return NULL;
    }
    memset(n, 0, sizeof *n);
    n->type = type;
    return n;
}

static unsigned hex4(const char *p) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++)
        v = v << 4 | (unsigned)sy__hexval(p[i]);
    return v;
}

/* n bytes that need no decoding, from s to o: a word at a time (the last
 * word overlapping the one before), without a call for the short strings
 * routes are made of. */
static inline void copy_plain(char *o, const char *s, size_t n) {
    if (n >= 8) {
        size_t i = 0;
        for (; i + 8 < n; i += 8) {
            uint64_t w = sy__load_u64(s + i);
            memcpy(o + i, &w, 8);
        }
        uint64_t w = sy__load_u64(s + n - 8);
        memcpy(o + n - 8, &w, 8);
    } else if (n >= 4) {
        uint32_t a, b;
        memcpy(&a, s, 4);
        memcpy(&b, s + n - 4, 4);
        memcpy(o, &a, 4);
        memcpy(o + n - 4, &b, 4);
    } else {
        for (size_t i = 0; i < n; i++)
            o[i] = s[i];
    }
    o[n] = '\0';
}

/* The escaped text s[start, i) decoded into out. */
static void decode_escaped(const char *s, size_t start, size_t i, char *out) {
    size_t o = 0;
    for (size_t k = start; k < i; k++) {
        char c = s[k];
        if (c != '\\') {
            out[o++] = c;
            continue;
        }
        c = s[++k];
        switch (c) {
        case 'b': out[o++] = '\b'; break;
        case 'f': out[o++] = '\f'; break;
        case 'n': out[o++] = '\n'; break;
        case 'r': out[o++] = '\r'; break;
        case 't': out[o++] = '\t'; break;
        case 'u': {
            unsigned long cp = hex4(s + k + 1);
            k += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF) { /* checked: a low follows */
                unsigned lo = hex4(s + k + 3);
                cp = 0x10000 + ((cp & 0x3FF) << 10) + (lo & 0x3FF);
                k += 6;
            }
            if (cp < 0x80) {
                out[o++] = (char)cp;
            } else if (cp < 0x800) {
                out[o++] = (char)(0xC0 | (cp >> 6));
                out[o++] = (char)(0x80 | (cp & 0x3F));
            } else if (cp < 0x10000) {
                out[o++] = (char)(0xE0 | (cp >> 12));
                out[o++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                out[o++] = (char)(0x80 | (cp & 0x3F));
            } else {
                out[o++] = (char)(0xF0 | (cp >> 18));
                out[o++] = (char)(0x80 | ((cp >> 12) & 0x3F));
                out[o++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                out[o++] = (char)(0x80 | (cp & 0x3F));
            }
            break;
        }
        default: out[o++] = c; break; /* " \ / */
        }
    }
    out[o] = '\0';
}

/* The string text s[start, i) (escapes in it: esc) decoded into the
 * arena: *out (NULL: out of memory). Returns i + 1, past its closing
 * quote. */
static inline size_t string_out(tree_parser *t, size_t start, size_t i,
                                bool esc, char **out) {
    /* decoded text is never longer than its JSON spelling */
    char *o = sy__arena_alloc_bytes(t->ar, i - start + 1);
    *out = o;
    if (!o)
        t->rc = SY_ENOMEM;
    else if (!esc)
        copy_plain(o, t->s + start, i - start);
    else
        decode_escaped(t->s, start, i, o);
    return i + 1;
}

/* The string at pos (its opening quote), decoded into the arena: *out
 * (NULL: out of memory). Returns the position past its closing quote. */
static inline size_t parse_string(tree_parser *t, size_t pos, char **out) {
    static const unsigned char stop[256] = {['"'] = 1, ['\\'] = 1};
    const char *s = t->s;
    const unsigned char *u = (const unsigned char *)s;
    size_t start = pos + 1, i = start, end = t->end;
    bool esc = false;
    for (;;) {                 /* the scan saw the closing quote */
        while (i + 8 <= end) { /* a word at a time, then byte by byte */
            uint64_t w = sy__load_u64(s + i);
            uint64_t hit =
                sy__swar_has_byte(w, '"') | sy__swar_has_byte(w, '\\');
            if (hit) {
#if SY_SWAR_FIRST_OK
                i += sy__swar_first(hit);
#endif
                break;
            }
            i += 8;
        }
        while (!stop[u[i]])
            i++;
        if (u[i] == '"')
            break;
        esc = true;
        i += 2; /* the escape's first byte after the backslash; \uXXXX's
                 * hex digits are plain bytes */
    }
    return string_out(t, start, i, esc, out);
}

/* As cJSON's parse_number: '.' as the locale's decimal point, strtod; at
 * most 63 characters here (longer: SY_DEF_TREE_CJSON). */
static cJSON *number_node(tree_parser *t, double v) {
    cJSON *node = new_node(t, cJSON_Number);
    if (!node)
        return NULL;
    node->valuedouble = v;
    node->valueint = v >= INT_MAX           ? INT_MAX
                     : v <= (double)INT_MIN ? INT_MIN
                                            : (int)v;
    return node;
}

/* The number at pos, ending by nend, into *out (NULL: t->rc says why);
 * the position past it. */
static size_t parse_number(tree_parser *t, size_t pos, size_t nend,
                           cJSON **out) {
    const char *s = t->s;
    /* an integer of at most 15 digits (an order, a count) is exact in a
     * double: what strtod returns for it, without strtod */
    size_t k = pos + (s[pos] == '-');
    size_t d = k;
    int64_t iv = 0;
    while (d < nend && d - k < 16 && s[d] >= '0' && s[d] <= '9')
        iv = iv * 10 + (s[d++] - '0');
    if (d > k && d - k <= 15 &&
        (d == nend || !((s[d] >= '0' && s[d] <= '9') || s[d] == '.' ||
                        s[d] == 'e' || s[d] == 'E'))) {
        double v = s[pos] == '-' ? -(double)iv : (double)iv;
        *out = number_node(t, v);
        return d;
    }
    char buf[64];
    size_t n = 0;
    char point = *localeconv()->decimal_point;
    while (pos + n < nend) {
        char c = s[pos + n];
        if (!((c >= '0' && c <= '9') || c == '+' || c == '-' || c == 'e' ||
              c == 'E' || c == '.'))
            break;
        if (n == sizeof buf - 1) {
            t->rc = SY_DEF_TREE_CJSON;
            *out = NULL;
            return pos;
        }
        buf[n++] = c == '.' ? point : c;
    }
    buf[n] = '\0';
    char *stop = NULL;
    double v = strtod(buf, &stop);
    if (stop != buf + n) { /* not what cJSON would read either */
        t->rc = SY_DEF_TREE_CJSON;
        *out = NULL;
        return pos;
    }
    *out = number_node(t, v);
    return pos + n;
}

static size_t parse_value(tree_parser *t, size_t pos, cJSON **out);

/* The string value at pos into *out (NULL: out of memory); the position
 * past it. */
static inline size_t string_node(tree_parser *t, size_t pos, cJSON **out) {
    cJSON *n = new_node(t, cJSON_String);
    *out = n;
    if (!n)
        return pos;
    pos = parse_string(t, pos, &n->valuestring);
    if (!n->valuestring)
        *out = NULL;
    return pos;
}

/* Child c (named key in an object) linked after `last` in container n,
 * as cJSON links children (the first child's prev is set to the last when
 * the container closes). Returns c, the new last. */
static inline cJSON *link_child(cJSON *n, cJSON *last, cJSON *c, char *key) {
    c->string = key;
    if (!last) {
        n->child = c;
    } else {
        last->next = c;
        c->prev = last;
    }
    return c;
}

/* The object or array at pos into *out (NULL: t->rc says why); the
 * position past its closing bracket. Children are linked as cJSON links
 * them: the first child's prev is the last. */
static size_t parse_container(tree_parser *t, size_t pos, bool object,
                              cJSON **out) {
    cJSON *n = new_node(t, object ? cJSON_Object : cJSON_Array), *last = NULL;
    *out = n;
    if (!n)
        return pos;
    const char *s = t->s;
    char close = object ? '}' : ']';
    pos = skip_ws(s, pos + 1);
    if (s[pos] == close)
        return pos + 1;
    for (;;) {
        pos = skip_ws(s, pos);
        char *key = NULL;
        if (object) {
            pos = parse_string(t, pos, &key);
            if (!key)
                break;
            pos = skip_ws(s, skip_ws(s, pos) + 1); /* ':' */
        }
        cJSON *c;
        if (s[pos] == '"') /* most values of a route: read without a call */
            pos = string_node(t, pos, &c);
        else
            pos = parse_value(t, pos, &c);
        if (!c)
            break;
        last = link_child(n, last, c, key);
        pos = skip_ws(s, pos);
        if (s[pos] != ',') {
            n->child->prev = last;
            return pos + 1; /* the closing bracket */
        }
        pos++;
    }
    *out = NULL;
    return pos;
}

static size_t parse_value(tree_parser *t, size_t pos, cJSON **out) {
    cJSON *n;
    switch (t->s[pos]) {
    case '{': return parse_container(t, pos, true, out);
    case '[': return parse_container(t, pos, false, out);
    case '"': return string_node(t, pos, out);
    case 't':
        if ((n = new_node(t, cJSON_True)))
            n->valueint = 1;
        *out = n;
        return pos + 4;
    case 'f': *out = new_node(t, cJSON_False); return pos + 5;
    case 'n': *out = new_node(t, cJSON_NULL); return pos + 4;
    default: return parse_number(t, pos, t->end, out);
    }
}

int sy__def_tree_parse(sy__arena *ar, const char *json, size_t start,
                       size_t end, cJSON **out) {
    tree_parser t = {json, end, ar, 0, 0, 0, 0, 0, 0};
    parse_value(&t, skip_ws(json, start), out);
    if (!*out)
        return t.rc ? t.rc : SY_ENOMEM;
    return 0;
}

/* ---- the checked parse ---- */

/* Past the blanks at pos, by t->end. */
static inline size_t skip_ws_by(const tree_parser *t, size_t pos) {
    while (pos < t->end && is_ws[(unsigned char)t->s[pos]])
        pos++;
    return pos;
}

/* The checked string at pos into *out (NULL: invalid, or out of memory);
 * the position past it. */
static inline size_t string_checked(tree_parser *t, size_t pos, char **out) {
    const char *s = t->s;
    size_t esc = 0, e, end = t->end;
    *out = NULL;
    if (pos >= end || s[pos] != '"')
        return pos;
#if SY_SWAR_FIRST_OK
    /* Most strings: plain bytes then the quote, within the arena chunk's
     * room. Each word is stored as it is read (the room past the string
     * is not handed out), so the text is read once; anything else (an
     * escape, a NUL, the text's or the chunk's end near) is read again
     * below. */
    sy__arena_chunk *c = t->ar->head;
    if (c) {
        unsigned char *o = c->data + c->used;
        size_t room = c->size - c->used, p = pos + 1, k = 0;
        while (p + 8 <= end && k + 8 < room) {
            uint64_t w = sy__load_u64(s + p);
            memcpy(o + k, &w, 8);
            uint64_t hit = sy__swar_has_byte(w, '"') |
                           sy__swar_has_byte(w, '\\') |
                           sy__swar_has_below(w, 1);
            if (hit) {
                unsigned f = sy__swar_first(hit);
                p += f;
                k += f;
                if (s[p] != '"' || k > t->max_bytes)
                    break;
                o[k] = '\0';
                c->used += (uint32_t)(k + 1);
                *out = (char *)o;
                return p + 1;
            }
            p += 8;
            k += 8;
        }
    }
#endif
    if (!(e = sy__json_string_end(s, pos, end, t->max_bytes, &esc)))
        return pos;
    return string_out(t, pos + 1, e - 1, esc != 0, out);
}

static size_t value_checked(tree_parser *t, size_t pos, cJSON **out);

/* The object or array at pos, checked (nesting, values, grammar), into
 * *out (NULL: invalid, or t->rc says why); the position past it. */
static size_t container_checked(tree_parser *t, size_t pos, bool object,
                                cJSON **out) {
    *out = NULL;
    if (t->depth >= t->max_depth || t->level >= SY_JSON_FAST_LEVELS)
        return pos;
    cJSON *n = new_node(t, object ? cJSON_Object : cJSON_Array), *last = NULL;
    if (!n)
        return pos;
    t->depth++;
    t->level++;
    const char *s = t->s;
    char close = object ? '}' : ']';
    pos = skip_ws_by(t, pos + 1);
    if (pos < t->end && s[pos] == close)
        goto closed;
    for (;;) {
        char *key = NULL;
        if (object) {
            pos = skip_ws_by(t, string_checked(t, pos, &key));
            if (!key || pos >= t->end || s[pos] != ':')
                return pos;
            pos = skip_ws_by(t, pos + 1);
        }
        if (pos >= t->end || ++t->values > SY_MAX_ROUTE_VALUES)
            return pos;
        cJSON *c;
        if (s[pos] == '"') {
            if (!(c = new_node(t, cJSON_String)))
                return pos;
            pos = string_checked(t, pos, &c->valuestring);
            if (!c->valuestring)
                return pos;
        } else {
            pos = value_checked(t, pos, &c);
            if (!c)
                return pos;
        }
        last = link_child(n, last, c, key);
        pos = skip_ws_by(t, pos);
        if (pos >= t->end)
            return pos;
        if (s[pos] != ',') {
            if (s[pos] != close)
                return pos;
            n->child->prev = last;
            break;
        }
        pos = skip_ws_by(t, pos + 1);
    }
closed:
    t->depth--;
    t->level--;
    *out = n;
    return pos + 1;
}

static size_t value_checked(tree_parser *t, size_t pos, cJSON **out) {
    static const char *const words[] = {"true", "false", "null"};
    const char *s = t->s;
    char c = s[pos];
    int k = c == 't' ? 0 : c == 'f' ? 1 : c == 'n' ? 2 : -1;
    *out = NULL;
    if (c == '{' || c == '[')
        return container_checked(t, pos, c == '{', out);
    if (c == '-' || sy__json_digit(c)) {
        size_t e = sy__json_number_end(s, pos, t->end);
        if (!e)
            return pos;
        pos = parse_number(t, pos, e, out);
        if (!*out || pos != e) {
            *out = NULL;
            return pos;
        }
        return e;
    }
    if (k < 0)
        return pos;
    size_t n = strlen(words[k]);
    if (t->end - pos < n || memcmp(s + pos, words[k], n) != 0)
        return pos;
    /* the unchecked parse makes the node of a checked word */
    return parse_value(t, pos, out);
}

int sy__def_tree_parse_checked(sy__arena *ar, const char *json, size_t start,
                               size_t len, const sy__def_tree_check *chk,
                               size_t *end, cJSON **out) {
    tree_parser t = {
        json,           len, ar, 0, chk->max_bytes, *chk->values, chk->depth,
        chk->max_depth, 0};
    *out = NULL;
    if (start >= len || json[start] != '{')
        return 1;
    size_t pos = container_checked(&t, start, true, out);
    if (!*out)
        return 1;
    *end = pos;
    *chk->values = t.values;
    return 0;
}
