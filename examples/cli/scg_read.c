/*
 * scg_read.c - Spring Boot configuration files into the converter's tree
 * (scg_tree.h): YAML through libyaml's document API (every document of a
 * file; merge keys; a document for a profile is read when --profile
 * names it, else left out with a warning), .properties in java.util.Properties'
 * format (continuations, escapes, \\uXXXX). Each file or document is read into
 * a tree of its own, then merged into the converter's, so a later source
 * overrides an earlier one as Spring Boot's property sources do.
 */
#define _DEFAULT_SOURCE
#include "scg_tree.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

node *scg_node_new(nkind k, const char *file, unsigned line) {
    node *n = calloc(1, sizeof *n);
    if (n) {
        n->kind = k;
        n->file = file;
        n->line = line;
    }
    return n;
}

void scg_node_free(node *n) {
    if (!n)
        return;
    for (size_t i = 0; i < n->n; i++)
        scg_node_free(n->kids[i]);
    free(n->kids);
    free(n->key);
    free(n->value);
    free(n);
}

static void node_clear(node *n, nkind k) {
    for (size_t i = 0; i < n->n; i++)
        scg_node_free(n->kids[i]);
    n->n = 0;
    free(n->value);
    n->value = NULL;
    n->kind = k;
}

static bool node_push(node *p, node *k) {
    if (p->n == p->cap) {
        size_t nc = p->cap ? p->cap * 2 : 4;
        node **nk = realloc(p->kids, nc * sizeof *nk);
        if (!nk)
            return false;
        p->kids = nk;
        p->cap = nc;
    }
    p->kids[p->n++] = k;
    return true;
}

/* Spring's relaxed form of a name: lower case, without '-' and '_'. */
bool scg_relaxed_eq(const char *key, const char *canon) {
    for (;; key++) {
        while (*key == '-' || *key == '_')
            key++;
        if (tolower((unsigned char)*key) != *canon)
            return false;
        if (!*canon)
            return true;
        canon++;
    }
}

/* The last kid of map m whose key is canon (relaxed), or NULL. */
node *scg_map_get(const node *m, const char *canon) {
    node *hit = NULL;
    if (m && m->kind == N_MAP)
        for (size_t i = 0; i < m->n; i++)
            if (scg_relaxed_eq(m->kids[i]->key, canon))
                hit = m->kids[i];
    return hit;
}

/* ------------------------------------------------------------------ */
/* Issues                                                               */
/* ------------------------------------------------------------------ */

void scg_issue_add(scg_converter *c, bool error, const char *file,
                   unsigned line, const char *fmt, ...) {
    if (error)
        c->errors++;
    if (c->nissues == c->cap) {
        size_t nc = c->cap ? c->cap * 2 : 8;
        scg_issue *ni = realloc(c->issues, nc * sizeof *ni);
        if (!ni) {
            c->oom = true;
            return;
        }
        c->issues = ni;
        c->cap = nc;
    }
    scg_issue *is = &c->issues[c->nissues++];
    is->error = error;
    int off = line ? snprintf(is->text, sizeof is->text, "%s:%u: ", file, line)
                   : snprintf(is->text, sizeof is->text, "%s: ", file);
    if (off < 0 || (size_t)off >= sizeof is->text)
        off = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(is->text + off, sizeof is->text - (size_t)off, fmt, ap);
    va_end(ap);
}

size_t scg_converter_issue_count(const scg_converter *c) {
    return c->nissues;
}
const scg_issue *scg_converter_issue(const scg_converter *c, size_t i) {
    return i < c->nissues ? &c->issues[i] : NULL;
}
size_t scg_converter_error_count(const scg_converter *c) {
    return c->errors;
}

/* ------------------------------------------------------------------ */
/* Property names into the tree                                         */
/* ------------------------------------------------------------------ */

/* Split "a.b[0].c[x.y]" into segments; returns the count (at most cap),
 * -1 on an unclosed bracket. */
int scg_split_name(const char *s, size_t len, seg *out, int cap) {
    int n = 0;
    size_t i = 0;
    while (i < len) {
        if (s[i] == '.') {
            i++;
            continue;
        }
        if (n == cap)
            return -1;
        if (s[i] == '[') {
            size_t j = i + 1;
            while (j < len && s[j] != ']')
                j++;
            if (j == len)
                return -1;
            bool digits = j > i + 1;
            for (size_t k = i + 1; k < j; k++)
                digits &= isdigit((unsigned char)s[k]) != 0;
            out[n++] = (seg){s + i + 1, j - i - 1, digits};
            i = j + 1;
            continue;
        }
        size_t j = i;
        while (j < len && s[j] != '.' && s[j] != '[')
            j++;
        out[n++] = (seg){s + i, j - i, false};
        i = j;
    }
    return n;
}

/* The kid of p for segment g, made (and p turned into the right kind of
 * container, dropping what it held) when needed. */
static node *descend(scg_converter *c, node *p, const seg *g, const char *file,
                     unsigned line) {
    nkind want = g->index ? N_LIST : N_MAP;
    if (p->kind != want)
        node_clear(p, want);
    long idx = g->index ? strtol(g->p, NULL, 10) : 0;
    for (size_t i = 0; i < p->n; i++) {
        node *k = p->kids[i];
        if (g->index
                ? k->index == idx
                : strlen(k->key) == g->len && memcmp(k->key, g->p, g->len) == 0)
            return k;
    }
    node *k = scg_node_new(N_MAP, file, line);
    if (k && !g->index && !(k->key = strndup(g->p, g->len))) {
        free(k);
        k = NULL;
    }
    if (!k || !node_push(p, k)) {
        scg_node_free(k);
        c->oom = true;
        return NULL;
    }
    k->index = idx;
    return k;
}

/* The node for name (relative to p), made as needed; NULL (an error
 * issue) when the name does not split. */
static node *at_name(scg_converter *c, node *p, const char *name, size_t len,
                     const char *file, unsigned line) {
    seg segs[MAX_DEPTH];
    int n = scg_split_name(name, len, segs, MAX_DEPTH);
    if (n < 0) {
        scg_issue_add(c, true, file, line, "%.*s: a bad property name",
                      (int)len, name);
        return NULL;
    }
    for (int i = 0; i < n && p; i++)
        p = descend(c, p, &segs[i], file, line);
    return p;
}

static void set_scalar(scg_converter *c, node *t, const char *v, size_t len,
                       bool plain, bool null) {
    node_clear(t, N_SCALAR);
    t->plain = plain;
    if (!null && !(t->value = strndup(v, len)))
        c->oom = true;
}

/* Move src's content into dst (src is consumed): scalars and lists
 * replace, maps merge key by key. */
static void merge(scg_converter *c, node *dst, node *src) {
    if (src->kind != N_MAP || dst->kind != N_MAP) {
        node_clear(dst, src->kind);
        free(dst->kids);
        dst->kids = src->kids;
        dst->n = src->n;
        dst->cap = src->cap;
        dst->value = src->value;
        dst->plain = src->plain;
        dst->file = src->file;
        dst->line = src->line;
        src->kids = NULL;
        src->n = src->cap = 0;
        src->value = NULL;
        scg_node_free(src);
        return;
    }
    for (size_t i = 0; i < src->n; i++) {
        node *k = src->kids[i];
        seg g = {k->key, strlen(k->key), false};
        node *d = descend(c, dst, &g, k->file, k->line);
        if (d)
            merge(c, d, k);
        else
            scg_node_free(k);
    }
    src->n = 0;
    scg_node_free(src);
}

/* ------------------------------------------------------------------ */
/* YAML (libyaml's document API)                                        */
/* ------------------------------------------------------------------ */

static int walk_yaml(scg_converter *c, yaml_document_t *d, yaml_node_t *y,
                     node *t, const char *file, int depth);

static int walk_map_pairs(scg_converter *c, yaml_document_t *d, yaml_node_t *y,
                          node *t, const char *file, int depth) {
    for (yaml_node_pair_t *p = y->data.mapping.pairs.start;
         p < y->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(d, p->key);
        yaml_node_t *v = yaml_document_get_node(d, p->value);
        unsigned line = (unsigned)k->start_mark.line + 1;
        if (!k || !v || k->type != YAML_SCALAR_NODE) {
            scg_issue_add(c, true, file, line, "a map key must be a scalar");
            return -1;
        }
        const char *ks = (const char *)k->data.scalar.value;
        size_t kl = k->data.scalar.length;
        if (kl == 2 && memcmp(ks, "<<", 2) == 0 &&
            k->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
            /* a merge key: the maps' pairs, then this map's own */
            if (v->type == YAML_MAPPING_NODE) {
                if (walk_map_pairs(c, d, v, t, file, depth + 1))
                    return -1;
                continue;
            }
            if (v->type == YAML_SEQUENCE_NODE) {
                for (yaml_node_item_t *i = v->data.sequence.items.start;
                     i < v->data.sequence.items.top; i++) {
                    yaml_node_t *m = yaml_document_get_node(d, *i);
                    if (m && m->type == YAML_MAPPING_NODE &&
                        walk_map_pairs(c, d, m, t, file, depth + 1))
                        return -1;
                }
                continue;
            }
        }
        node *sub = at_name(c, t, ks, kl, file, line);
        if (!sub)
            return -1;
        if (walk_yaml(c, d, v, sub, file, depth + 1))
            return -1;
    }
    return 0;
}

static bool yaml_null(const yaml_node_t *y) {
    if (y->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return false;
    const char *s = (const char *)y->data.scalar.value;
    return !*s || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 ||
           strcmp(s, "Null") == 0 || strcmp(s, "NULL") == 0;
}

static int walk_yaml(scg_converter *c, yaml_document_t *d, yaml_node_t *y,
                     node *t, const char *file, int depth) {
    unsigned line = (unsigned)y->start_mark.line + 1;
    if (depth > MAX_DEPTH || ++c->walked > MAX_WALK) {
        scg_issue_add(c, true, file, line,
                      "nested too deeply (or an alias bomb)");
        return -1;
    }
    t->file = file;
    if (y->type == YAML_SCALAR_NODE || depth == 0)
        t->line = line; /* a container keeps its key's line */
    switch (y->type) {
    case YAML_SCALAR_NODE:
        set_scalar(
            c, t, (const char *)y->data.scalar.value, y->data.scalar.length,
            y->data.scalar.style == YAML_PLAIN_SCALAR_STYLE, yaml_null(y));
        return 0;
    case YAML_SEQUENCE_NODE: {
        node_clear(t, N_LIST);
        long i = 0;
        for (yaml_node_item_t *it = y->data.sequence.items.start;
             it < y->data.sequence.items.top; it++, i++) {
            yaml_node_t *v = yaml_document_get_node(d, *it);
            char name[32];
            int nl = snprintf(name, sizeof name, "[%ld]", i);
            node *sub = v ? at_name(c, t, name, (size_t)nl, file,
                                    (unsigned)v->start_mark.line + 1)
                          : NULL;
            if (!sub || walk_yaml(c, d, v, sub, file, depth + 1))
                return -1;
        }
        return 0;
    }
    case YAML_MAPPING_NODE:
        if (t->kind != N_MAP)
            node_clear(t, N_MAP);
        return walk_map_pairs(c, d, y, t, file, depth);
    default: return 0;
    }
}

/* The profiles a document is for (spring.config.activate.on-profile or
 * the older spring.profiles), or NULL: for every profile. A map under
 * spring.profiles (`active:`, `include:`, `group:`) says which profiles
 * are on, not which this document is for. */
static const node *doc_profiles(const node *root) {
    const node *s = scg_map_get(root, "spring");
    const node *p = scg_map_get(
        scg_map_get(scg_map_get(s, "config"), "activate"), "onprofile");
    if (p)
        return p;
    p = scg_map_get(s, "profiles");
    return p && p->kind != N_MAP ? p : NULL;
}

/* The next name of a comma-separated list at *p (spaces trimmed): its
 * start, *len its length; NULL at the end. */
static const char *next_name(const char **p, size_t *len) {
    const char *s = *p;
    while (s && (*s == ' ' || *s == ','))
        s++;
    if (!s || !*s)
        return NULL;
    size_t k = strcspn(s, ",");
    *len = k;
    while (*len && s[*len - 1] == ' ')
        (*len)--;
    *p = s + k;
    return s;
}

/* Is name[0..n) in the comma-separated `list`? */
static bool in_list(const char *list, const char *name, size_t n) {
    size_t len;
    for (const char *t; (t = next_name(&list, &len));)
        if (len == n && strncmp(t, name, n) == 0)
            return true;
    return false;
}

/* Is profile name[0..n) active? --profile, else the environment's
 * SPRING_PROFILES_ACTIVE, else spring.profiles.active of what was read so
 * far, as Spring Boot decides. */
static bool is_active(const scg_converter *c, const char *name, size_t n) {
    if (c->opt.profile_count) {
        for (size_t i = 0; i < c->opt.profile_count; i++)
            if (strlen(c->opt.profiles[i]) == n &&
                strncmp(c->opt.profiles[i], name, n) == 0)
                return true;
        return false;
    }
    const char *env = c->opt.no_env ? NULL : getenv("SPRING_PROFILES_ACTIVE");
    if (env)
        return in_list(env, name, n);
    const node *a = scg_map_get(
        scg_map_get(scg_map_get(c->root, "spring"), "profiles"), "active");
    if (a && a->kind == N_SCALAR)
        return in_list(a->value, name, n);
    for (size_t i = 0; a && a->kind == N_LIST && i < a->n; i++)
        if (a->kids[i]->kind == N_SCALAR && in_list(a->kids[i]->value, name, n))
            return true;
    return false;
}

/* Is one of `names` (a comma-separated profile list, "!p" for "not p")
 * active? */
static bool names_active(const scg_converter *c, const char *names) {
    size_t len;
    for (const char *t; (t = next_name(&names, &len));) {
        size_t neg = len && *t == '!';
        bool on = len > neg && is_active(c, t + neg, len - neg);
        if (len && on != (neg != 0))
            return true;
    }
    return false;
}

/* A profile document is read when one of its profiles is active
 * (spring.config.activate.on-profile: a list, or "a, b", or "!a"). */
static bool profile_active(const scg_converter *c, const node *prof) {
    if (prof->kind == N_SCALAR)
        return names_active(c, prof->value);
    for (size_t i = 0; prof->kind == N_LIST && i < prof->n; i++)
        if (prof->kids[i]->kind == N_SCALAR &&
            names_active(c, prof->kids[i]->value))
            return true;
    return false;
}

int scg_add_yaml(scg_converter *c, const char *file, const char *text,
                 size_t len) {
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p)) {
        c->oom = true;
        return -1;
    }
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    int rc = 0;
    for (unsigned ndoc = 1;; ndoc++) {
        yaml_document_t d;
        if (!yaml_parser_load(&p, &d)) {
            scg_issue_add(c, true, file, (unsigned)p.problem_mark.line + 1,
                          "column %u: YAML: %s%s%s",
                          (unsigned)p.problem_mark.column + 1,
                          p.problem ? p.problem : "syntax error",
                          p.context ? " " : "", p.context ? p.context : "");
            rc = -1;
            break;
        }
        yaml_node_t *r = yaml_document_get_root_node(&d);
        if (!r) { /* the end of the stream */
            yaml_document_delete(&d);
            break;
        }
        node *t = scg_node_new(N_MAP, file, (unsigned)r->start_mark.line + 1);
        if (!t) {
            c->oom = true;
            yaml_document_delete(&d);
            rc = -1;
            break;
        }
        rc = walk_yaml(c, &d, r, t, file, 0);
        yaml_document_delete(&d);
        if (rc) {
            scg_node_free(t);
            break;
        }
        const node *prof = doc_profiles(t);
        if (t->kind != N_MAP && !(t->kind == N_SCALAR && !t->value)) {
            scg_issue_add(
                c, true, file, t->line,
                "a configuration document must be a map of properties");
            scg_node_free(t);
            rc = -1;
            break;
        }
        if (prof && !profile_active(c, prof)) {
            scg_issue_add(
                c, false, file, prof->line,
                "document %u is for profile %s: not converted (not an "
                "active profile: --profile, SPRING_PROFILES_ACTIVE or "
                "spring.profiles.active)",
                ndoc,
                prof->kind == N_SCALAR && prof->value ? prof->value
                                                      : "(a list)");
            scg_node_free(t);
            continue;
        }
        if (t->kind == N_MAP)
            merge(c, c->root, t);
        else
            scg_node_free(t);
    }
    yaml_parser_delete(&p);
    return rc;
}

/* ------------------------------------------------------------------ */
/* .properties (java.util.Properties' format)                           */
/* ------------------------------------------------------------------ */

void scg_sb_add(sbuf *b, const char *s, size_t n) {
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 64;
        while (nc < b->len + n + 1)
            nc *= 2;
        char *np = realloc(b->p, nc);
        if (!np) {
            b->oom = true;
            return;
        }
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

void scg_sb_addc(sbuf *b, char ch) {
    scg_sb_add(b, &ch, 1);
}

static void sb_utf8(sbuf *b, unsigned cp) {
    char u[4];
    if (cp < 0x80) {
        scg_sb_addc(b, (char)cp);
    } else if (cp < 0x800) {
        u[0] = (char)(0xC0 | (cp >> 6));
        u[1] = (char)(0x80 | (cp & 0x3F));
        scg_sb_add(b, u, 2);
    } else {
        u[0] = (char)(0xE0 | (cp >> 12));
        u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (char)(0x80 | (cp & 0x3F));
        scg_sb_add(b, u, 3);
    }
}

/* One logical line (continuations joined, escapes kept) of a properties
 * text from *pos; false at the end. */
static bool prop_line(const char *t, size_t len, size_t *pos, sbuf *out,
                      unsigned *line, unsigned *lines) {
    out->len = 0;
    if (out->p)
        out->p[0] = 0;
    size_t i = *pos;
    if (i >= len)
        return false;
    *line = *lines + 1;
    bool first = true;
    for (;;) {
        size_t e = i;
        while (e < len && t[e] != '\n' && t[e] != '\r')
            e++;
        size_t s = i;
        if (!first) /* a continuation's leading white space goes */
            while (s < e && (t[s] == ' ' || t[s] == '\t' || t[s] == '\f'))
                s++;
        (*lines)++;
        size_t bs = 0; /* backslashes ending the line */
        while (bs < e - s && t[e - 1 - bs] == '\\')
            bs++;
        bool cont = bs % 2 == 1;
        bool comment = false;
        if (first) {
            size_t k = s;
            while (k < e && (t[k] == ' ' || t[k] == '\t' || t[k] == '\f'))
                k++;
            comment = k < e && (t[k] == '#' || t[k] == '!');
        }
        scg_sb_add(out, t + s, e - s - (cont && !comment ? 1 : 0));
        i = e;
        if (i < len && t[i] == '\r') {
            if (++i < len && t[i] == '\n')
                i++;
        } else if (i < len && t[i] == '\n') {
            i++;
        }
        if (!cont || comment || i >= len)
            break;
        first = false;
    }
    *pos = i;
    return true;
}

/* Unescape t[0..n) into out (\t \n \r \f \uXXXX, \X is X). */
static void prop_unescape(const char *t, size_t n, sbuf *out) {
    out->len = 0;
    scg_sb_add(out, "", 0);
    for (size_t i = 0; i < n; i++) {
        if (t[i] != '\\' || i + 1 == n) {
            scg_sb_addc(out, t[i]);
            continue;
        }
        char e = t[++i];
        if (e == 'u' && i + 4 < n) {
            char hex[5] = {t[i + 1], t[i + 2], t[i + 3], t[i + 4], 0};
            char *end;
            unsigned long cp = strtoul(hex, &end, 16);
            if (!*end) {
                sb_utf8(out, (unsigned)cp);
                i += 4;
                continue;
            }
        }
        scg_sb_addc(out, e == 't'   ? '\t'
                         : e == 'n' ? '\n'
                         : e == 'r' ? '\r'
                         : e == 'f' ? '\f'
                                    : e);
    }
}

int scg_add_properties(scg_converter *c, const char *file, const char *text,
                       size_t len) {
    node *t = scg_node_new(N_MAP, file, 1);
    if (!t) {
        c->oom = true;
        return -1;
    }
    sbuf ln = {0}, key = {0}, val = {0};
    size_t pos = 0;
    unsigned line = 0, lines = 0;
    int rc = 0;
    while (prop_line(text, len, &pos, &ln, &line, &lines)) {
        const char *s = ln.p ? ln.p : "";
        size_t n = ln.len, i = 0;
        while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\f'))
            i++;
        if (i == n || s[i] == '#' || s[i] == '!')
            continue;
        size_t k0 = i;
        while (i < n && s[i] != '=' && s[i] != ':' && s[i] != ' ' &&
               s[i] != '\t' && s[i] != '\f') {
            if (s[i] == '\\')
                i++;
            i++;
        }
        if (i > n)
            i = n;
        size_t k1 = i;
        while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\f'))
            i++;
        if (i < n && (s[i] == '=' || s[i] == ':'))
            i++;
        while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\f'))
            i++;
        prop_unescape(s + k0, k1 - k0, &key);
        prop_unescape(s + i, n - i, &val);
        if (key.oom || val.oom || ln.oom) {
            c->oom = true;
            rc = -1;
            break;
        }
        node *at = at_name(c, t, key.p, key.len, file, line);
        if (!at) {
            rc = -1;
            continue;
        }
        set_scalar(c, at, val.p, val.len, false, false);
        at->file = file;
        at->line = line;
    }
    free(ln.p);
    free(key.p);
    free(val.p);
    if (rc)
        scg_node_free(t);
    else
        merge(c, c->root, t);
    return rc;
}
