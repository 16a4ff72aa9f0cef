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
 */
#include "def/def_build.h"

#include <limits.h>
#include <locale.h>
#include <stdlib.h>

typedef struct tree_parser {
    const char *s;
    size_t pos, end;
    sy__arena *ar;
    int rc; /* 0, SY_ENOMEM, or SY_DEF_TREE_CJSON */
} tree_parser;

/* JSON's whitespace: space, tab, newline, carriage return. */
static const unsigned char is_ws[256] = {
    [' '] = 1, ['\t'] = 1, ['\n'] = 1, ['\r'] = 1};

static void skip_ws(tree_parser *t) {
    while (t->pos < t->end && is_ws[(unsigned char)t->s[t->pos]])
        t->pos++;
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

/* The string at t->pos (its opening quote), decoded into the arena. */
static char *parse_string(tree_parser *t) {
    static const unsigned char stop[256] = {['"'] = 1, ['\\'] = 1};
    const unsigned char *u = (const unsigned char *)t->s;
    size_t start = ++t->pos, i = start;
    bool esc = false;
    for (;;) {                    /* the scan saw the closing quote */
        while (i + 8 <= t->end) { /* a word at a time, then byte by byte */
            uint64_t w = sy__load_u64(t->s + i);
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
    t->pos = i + 1;
    /* decoded text is never longer than its JSON spelling */
    char *out = sy__arena_alloc_bytes(t->ar, i - start + 1);
    if (!out) {
        t->rc = SY_ENOMEM;
        return NULL;
    }
    if (!esc) {
        memcpy(out, t->s + start, i - start);
        out[i - start] = '\0';
        return out;
    }
    size_t o = 0;
    for (size_t k = start; k < i; k++) {
        char c = t->s[k];
        if (c != '\\') {
            out[o++] = c;
            continue;
        }
        c = t->s[++k];
        switch (c) {
        case 'b': out[o++] = '\b'; break;
        case 'f': out[o++] = '\f'; break;
        case 'n': out[o++] = '\n'; break;
        case 'r': out[o++] = '\r'; break;
        case 't': out[o++] = '\t'; break;
        case 'u': {
            unsigned long cp = hex4(t->s + k + 1);
            k += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF) { /* checked: a low follows */
                unsigned lo = hex4(t->s + k + 3);
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
    return out;
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

static cJSON *parse_number(tree_parser *t) {
    /* an integer of at most 15 digits (an order, a count) is exact in a
     * double: what strtod returns for it, without strtod */
    size_t k = t->pos + (t->s[t->pos] == '-');
    size_t d = k;
    int64_t iv = 0;
    while (d < t->end && d - k < 16 && t->s[d] >= '0' && t->s[d] <= '9')
        iv = iv * 10 + (t->s[d++] - '0');
    if (d > k && d - k <= 15 &&
        (d == t->end ||
         !((t->s[d] >= '0' && t->s[d] <= '9') || t->s[d] == '.' ||
           t->s[d] == 'e' || t->s[d] == 'E'))) {
        double v = t->s[t->pos] == '-' ? -(double)iv : (double)iv;
        cJSON *node = number_node(t, v);
        if (node)
            t->pos = d;
        return node;
    }
    char buf[64];
    size_t n = 0;
    char point = *localeconv()->decimal_point;
    while (t->pos + n < t->end) {
        char c = t->s[t->pos + n];
        if (!((c >= '0' && c <= '9') || c == '+' || c == '-' || c == 'e' ||
              c == 'E' || c == '.'))
            break;
        if (n == sizeof buf - 1) {
            t->rc = SY_DEF_TREE_CJSON;
            return NULL;
        }
        buf[n++] = c == '.' ? point : c;
    }
    buf[n] = '\0';
    char *stop = NULL;
    double v = strtod(buf, &stop);
    if (stop != buf + n) { /* not what cJSON would read either */
        t->rc = SY_DEF_TREE_CJSON;
        return NULL;
    }
    cJSON *node = number_node(t, v);
    if (node)
        t->pos += n;
    return node;
}

static void append(cJSON *parent, cJSON *last, cJSON *c) {
    if (!last) {
        parent->child = c;
    } else {
        last->next = c;
        c->prev = last;
    }
    parent->child->prev = c; /* cJSON: the first child's prev is the last */
}

static cJSON *parse_value(tree_parser *t);

static cJSON *parse_container(tree_parser *t, bool object) {
    cJSON *n = new_node(t, object ? cJSON_Object : cJSON_Array), *last = NULL;
    if (!n)
        return NULL;
    char close = object ? '}' : ']';
    t->pos++;
    skip_ws(t);
    if (t->s[t->pos] == close) {
        t->pos++;
        return n;
    }
    for (;;) {
        skip_ws(t);
        char *key = NULL;
        if (object) {
            if (!(key = parse_string(t)))
                return NULL;
            skip_ws(t);
            t->pos++; /* ':' */
            skip_ws(t);
        }
        cJSON *c = parse_value(t);
        if (!c)
            return NULL;
        c->string = key;
        append(n, last, c);
        last = c;
        skip_ws(t);
        if (t->s[t->pos] == ',') {
            t->pos++;
            continue;
        }
        t->pos++; /* the closing bracket */
        return n;
    }
}

static cJSON *parse_value(tree_parser *t) {
    cJSON *n;
    switch (t->s[t->pos]) {
    case '{': return parse_container(t, true);
    case '[': return parse_container(t, false);
    case '"':
        if (!(n = new_node(t, cJSON_String)))
            return NULL;
        n->valuestring = parse_string(t);
        return n->valuestring ? n : NULL;
    case 't':
        t->pos += 4;
        if ((n = new_node(t, cJSON_True)))
            n->valueint = 1;
        return n;
    case 'f': t->pos += 5; return new_node(t, cJSON_False);
    case 'n': t->pos += 4; return new_node(t, cJSON_NULL);
    default: return parse_number(t);
    }
}

int sy__def_tree_parse(sy__arena *ar, const char *json, size_t start,
                       size_t end, cJSON **out) {
    tree_parser t = {json, start, end, ar, 0};
    skip_ws(&t);
    *out = parse_value(&t);
    if (!*out)
        return t.rc ? t.rc : SY_ENOMEM;
    return 0;
}
