/*
 * scg_convert.c - Spring Boot configuration to a switchyard route
 * document (scg_convert.h). Each file (and each YAML document of a file)
 * is read into a tree of its own, property names split as Spring Boot
 * splits them ("a.b[0].c", "[x.y]" for a key with dots), then merged into
 * the converter's tree: later sources win key by key and a list replaces
 * the whole list. The document is made from the merged tree: routes from
 * spring.cloud.gateway.server.webflux.routes or spring.cloud.gateway.
 * routes, default-filters interleaved into each route's filters as SCG
 * orders them (route model, section 5), ${name} and ${name:default}
 * resolved from --set values, then the environment, then the files' own
 * properties. Structure keys bind relaxed (defaultFilters, default-filters
 * and default_filters are one); metadata and args keys are kept as
 * written. The gateway settings SCG applies to every route (global filter
 * defaults, timeouts, CORS) are scg_settings.c's.
 */
#define _DEFAULT_SOURCE
#include "scg_tree.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ------------------------------------------------------------------ */
/* The converter                                                        */
/* ------------------------------------------------------------------ */

scg_format scg_format_of(const char *path) {
    const char *dot = strrchr(path, '.');
    if (!dot || strchr(dot, '/'))
        return SCG_FORMAT_UNKNOWN;
    if (strcasecmp(dot, ".yml") == 0 || strcasecmp(dot, ".yaml") == 0)
        return SCG_FORMAT_YAML;
    if (strcasecmp(dot, ".properties") == 0)
        return SCG_FORMAT_PROPERTIES;
    return SCG_FORMAT_UNKNOWN;
}

scg_converter *scg_converter_new(const scg_options *opts) {
    scg_converter *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    if (opts)
        c->opt = *opts;
    c->root = scg_node_new(N_MAP, "", 0);
    if (!c->root) {
        free(c);
        return NULL;
    }
    return c;
}

void scg_converter_free(scg_converter *c) {
    if (!c)
        return;
    scg_node_free(c->root);
    free(c->defaults_json);
    for (size_t i = 0; i < c->nfiles; i++)
        free(c->files[i]);
    free(c->files);
    free(c->issues);
    free(c);
}

int scg_converter_add(scg_converter *c, const char *file, const char *text,
                      size_t len, scg_format fmt) {
    char **nf = realloc(c->files, (c->nfiles + 1) * sizeof *nf);
    char *name = strdup(file);
    if (!nf || !name) {
        free(name);
        if (nf)
            c->files = nf;
        scg_issue_add(c, true, file, 0, "out of memory");
        return -1;
    }
    c->files = nf;
    c->files[c->nfiles++] = name;
    if (fmt == SCG_FORMAT_UNKNOWN)
        fmt = scg_format_of(file);
    if (fmt == SCG_FORMAT_UNKNOWN) {
        scg_issue_add(c, true, name, 0,
                      "not a .yml, .yaml or .properties file name (the format "
                      "is told by the extension)");
        return -1;
    }
    int rc = fmt == SCG_FORMAT_YAML ? scg_add_yaml(c, name, text, len)
                                    : scg_add_properties(c, name, text, len);
    if (c->oom) {
        scg_issue_add(c, true, name, 0, "out of memory");
        rc = -1;
    }
    return rc;
}

/* ---- placeholders ---- */

/* The value of the file property `name` (a scalar), or NULL. */
static const node *property(const scg_converter *c, const char *name) {
    seg segs[MAX_DEPTH];
    int n = scg_split_name(name, strlen(name), segs, MAX_DEPTH);
    const node *t = c->root;
    for (int i = 0; i < n && t; i++) {
        const node *hit = NULL;
        char canon[256];
        size_t cl = 0;
        for (size_t k = 0; k < segs[i].len && cl + 1 < sizeof canon; k++)
            if (segs[i].p[k] != '-' && segs[i].p[k] != '_')
                canon[cl++] = (char)tolower((unsigned char)segs[i].p[k]);
        canon[cl] = 0;
        for (size_t k = 0; k < t->n; k++) {
            const node *kid = t->kids[k];
            if (segs[i].index
                    ? t->kind == N_LIST &&
                          kid->index == strtol(segs[i].p, NULL, 10)
                    : t->kind == N_MAP && scg_relaxed_eq(kid->key, canon))
                hit = kid;
        }
        t = hit;
    }
    return t && n > 0 && t->kind == N_SCALAR && t->value ? t : NULL;
}

/* ${name} from --set, the environment (as written, then in Spring's
 * environment form: upper case, '.' and '[]' to '_', '-' dropped), the
 * files. A malloc'd value, or NULL. */
static char *lookup(scg_converter *c, const char *name, int depth) {
    size_t nl = strlen(name);
    for (size_t i = c->opt.set_count; i-- > 0;) {
        const char *kv = c->opt.set[i];
        if (strncmp(kv, name, nl) == 0 && kv[nl] == '=')
            return strdup(kv + nl + 1);
    }
    if (!c->opt.no_env) {
        const char *v = getenv(name);
        if (!v) {
            char env[256];
            size_t k = 0;
            for (const char *p = name; *p && k + 1 < sizeof env; p++) {
                if (*p == '-' || *p == ']')
                    continue;
                env[k++] = *p == '.' || *p == '['
                               ? '_'
                               : (char)toupper((unsigned char)*p);
            }
            env[k] = 0;
            v = getenv(env);
        }
        if (v)
            return strdup(v);
    }
    const node *p = property(c, name);
    if (!p)
        return NULL;
    where at = {p->file, p->line, name, NULL};
    return scg_resolve(c, p->value, &at, depth + 1);
}

/* True when regexp has a named group `name`: (?<name> or (?P<name>. */
static bool named_group(const char *regexp, const char *name) {
    size_t nl = strlen(name);
    for (const char *p = regexp; p && (p = strstr(p, "(?")); p += 2) {
        const char *q = p + 2;
        if (*q == 'P')
            q++;
        if (*q == '<' && strncmp(q + 1, name, nl) == 0 && q[1 + nl] == '>')
            return true;
    }
    return false;
}

/* s with its placeholders resolved, malloc'd (NULL: out of memory). An
 * unresolved one is an issue at w and is kept as written. */
char *scg_resolve(scg_converter *c, const char *s, const where *w, int depth) {
    if (depth > 16) {
        scg_issue_add(c, true, w->file, w->line,
                      "%s: placeholders refer to each other in a loop",
                      w->path);
        return strdup(s);
    }
    sbuf out = {0};
    scg_sb_add(&out, "", 0);
    for (const char *p = s; *p;) {
        if (p[0] != '$' || p[1] != '{') {
            scg_sb_addc(&out, *p++);
            continue;
        }
        const char *q = p + 2, *colon = NULL;
        int nest = 1;
        for (; *q; q++) {
            if (*q == '{')
                nest++;
            else if (*q == '}' && --nest == 0)
                break;
            else if (*q == ':' && nest == 1 && !colon)
                colon = q;
        }
        if (!*q) { /* no closing brace: text */
            scg_sb_add(&out, p, strlen(p));
            break;
        }
        char *name = strndup(p + 2, (size_t)((colon ? colon : q) - (p + 2)));
        char *val = name ? lookup(c, name, depth) : NULL;
        if (!val && colon) {
            char *def = strndup(colon + 1, (size_t)(q - colon - 1));
            val = def ? scg_resolve(c, def, w, depth + 1) : NULL;
            free(def);
        } else if (!val && name && w->groups && named_group(w->groups, name)) {
            val = strndup(p, (size_t)(q + 1 - p)); /* a group reference */
        } else if (!val && name) {
            scg_issue_add(
                c, !c->opt.keep_unresolved, w->file, w->line,
                "%s: unresolved placeholder ${%s}%s", w->path, name,
                c->opt.keep_unresolved
                    ? ", kept as written"
                    : " (give it with --set NAME=VALUE or the environment)");
            val = strndup(p, (size_t)(q + 1 - p));
        }
        if (val)
            scg_sb_add(&out, val, strlen(val));
        else
            out.oom = true;
        free(name);
        free(val);
        p = q + 1;
    }
    if (out.oom) {
        c->oom = true;
        free(out.p);
        return NULL;
    }
    return out.p;
}

/* ---- the document ---- */

/* path + suffix into p[cap], cut to fit. */
static void sub(char *p, size_t cap, const char *path, const char *suffix) {
    size_t a = strlen(path), b = strlen(suffix);
    if (a >= cap)
        a = cap - 1;
    if (b > cap - 1 - a)
        b = cap - 1 - a;
    memmove(p, path, a);
    memmove(p + a, suffix, b);
    p[a + b] = 0;
}

/* A scalar's text with placeholders resolved, into a cJSON string (or a
 * raw number/bool/null when `typed` and the YAML scalar was plain). */
cJSON *scg_scalar_json(scg_converter *c, const node *n, const char *path,
                       const char *groups, bool typed) {
    if (!n->value)
        return typed ? cJSON_CreateNull() : cJSON_CreateString("");
    where w = {n->file, n->line, path, groups};
    char *v = scg_resolve(c, n->value, &w, 0);
    if (!v)
        return NULL;
    cJSON *j = NULL;
    if (n->plain) {
        /* YAML 1.1's booleans, as SCG's YAML reader takes them */
        static const char *const yes[] = {"yes", "Yes",  "YES",  "on",  "On",
                                          "ON",  "true", "True", "TRUE"};
        static const char *const no[] = {"no",  "No",    "NO",    "off",  "Off",
                                         "OFF", "false", "False", "FALSE"};
        for (size_t i = 0; i < sizeof yes / sizeof *yes && !j; i++) {
            if (strcmp(v, yes[i]) == 0)
                j = typed ? cJSON_CreateTrue() : cJSON_CreateString("true");
            else if (strcmp(v, no[i]) == 0)
                j = typed ? cJSON_CreateFalse() : cJSON_CreateString("false");
        }
        if (typed && !j) {
            const char *d = v + (*v == '-' || *v == '+');
            size_t dl = strlen(d);
            bool digits = dl > 0 && dl < 16 && (d[0] != '0' || dl == 1);
            for (size_t i = 0; digits && i < dl; i++)
                digits = isdigit((unsigned char)d[i]) != 0;
            if (digits)
                j = cJSON_CreateRaw(v[0] == '+' ? v + 1 : v);
        }
    }
    if (!j)
        j = cJSON_CreateString(v);
    free(v);
    return j;
}

static void path_add(char *path, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void path_add(char *path, size_t cap, const char *fmt, ...) {
    size_t l = strlen(path);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(path + l, cap - l, fmt, ap);
    va_end(ap);
}

/* A list's kids in index order; an error for a gap (Spring refuses one). */
static node **list_items(scg_converter *c, const node *l, const char *path,
                         size_t *n) {
    *n = 0;
    if (l->kind != N_LIST) {
        scg_issue_add(c, true, l->file, l->line, "%s: expected a list", path);
        return NULL;
    }
    node **v = malloc((l->n ? l->n : 1) * sizeof *v);
    if (!v) {
        c->oom = true;
        return NULL;
    }
    memcpy(v, l->kids, l->n * sizeof *v);
    for (size_t i = 1; i < l->n; i++) /* insertion sort: lists are short */
        for (size_t k = i; k > 0 && v[k - 1]->index > v[k]->index; k--) {
            node *t = v[k];
            v[k] = v[k - 1];
            v[k - 1] = t;
        }
    for (size_t i = 0; i < l->n; i++)
        if (v[i]->index != (long)i) {
            scg_issue_add(
                c, true, v[i]->file, v[i]->line,
                "%s[%ld]: the list has no element [%zu] (indexes must "
                "run from 0 without gaps)",
                path, v[i]->index, i);
            free(v);
            return NULL;
        }
    *n = l->n;
    return v;
}

/* Args of an entry: a map of strings; nested maps join their keys with
 * '.' (as Spring binds a Map<String, String>); a list of values is a JSON
 * array (the library takes one for a list field, e.g. Path's patterns). */
static void args_json(scg_converter *c, const node *m, const char *prefix,
                      cJSON *out, const char *path, const char *groups) {
    for (size_t i = 0; i < m->n; i++) {
        const node *k = m->kids[i];
        char key[512], p[1024];
        snprintf(key, sizeof key, "%s%s%s", prefix, *prefix ? "." : "", k->key);
        sub(p, sizeof p, path, ".");
        sub(p, sizeof p, p, key);
        if (k->kind == N_MAP) {
            args_json(c, k, key, out, path, groups);
            continue;
        }
        cJSON *v = NULL;
        if (k->kind == N_LIST) {
            size_t n;
            node **items = list_items(c, k, p, &n);
            v = items ? cJSON_CreateArray() : NULL;
            for (size_t j = 0; v && j < n; j++) {
                char ip[1100];
                snprintf(ip, sizeof ip, "%s[%zu]", p, j);
                if (items[j]->kind != N_SCALAR)
                    scg_issue_add(c, true, items[j]->file, items[j]->line,
                                  "%s: expected a value", ip);
                else
                    cJSON_AddItemToArray(
                        v, scg_scalar_json(c, items[j], ip, groups, false));
            }
            free(items);
        } else {
            v = scg_scalar_json(c, k, p, groups, false);
        }
        if (v)
            cJSON_AddItemToObject(out, key, v);
    }
}

/* The regexp of a RewritePath entry (shortcut or args), for its ${g}. */
static const char *rewrite_regexp(const node *e) {
    if (e->kind == N_SCALAR && e->value &&
        strncmp(e->value, "RewritePath=", 12) == 0)
        return e->value + 12;
    const node *name = scg_map_get(e, "name"), *args = scg_map_get(e, "args");
    if (!name || !name->value || strcmp(name->value, "RewritePath") != 0)
        return NULL;
    const node *r = scg_map_get(args, "regexp");
    if (!r && args && args->kind == N_MAP && args->n)
        r = args->kids[0]; /* _genkey_0 */
    return r && r->kind == N_SCALAR ? r->value : NULL;
}

/* A predicate or filter entry: a shortcut string or {name, args}. */
static cJSON *entry_json(scg_converter *c, const node *e, const char *path) {
    const char *groups = rewrite_regexp(e);
    if (e->kind == N_SCALAR)
        return scg_scalar_json(c, e, path, groups, false);
    if (e->kind != N_MAP) {
        scg_issue_add(c, true, e->file, e->line,
                      "%s: expected \"Name=args\" or a map of name and args",
                      path);
        return NULL;
    }
    cJSON *o = cJSON_CreateObject();
    const node *name = NULL, *args = NULL;
    for (size_t i = 0; i < e->n; i++) {
        const node *k = e->kids[i];
        if (scg_relaxed_eq(k->key, "name"))
            name = k;
        else if (scg_relaxed_eq(k->key, "args"))
            args = k;
        else
            scg_issue_add(
                c, true, k->file, k->line,
                "%s.%s: not a field of a predicate or filter (name, args)",
                path, k->key);
    }
    char p[1024];
    sub(p, sizeof p, path, ".name");
    if (!name || name->kind != N_SCALAR || !name->value)
        scg_issue_add(c, true, e->file, e->line, "%s: no name", path);
    else
        cJSON_AddItemToObject(o, "name",
                              scg_scalar_json(c, name, p, NULL, false));
    if (args) {
        sub(p, sizeof p, path, ".args");
        cJSON *a = cJSON_AddObjectToObject(o, "args");
        if (args->kind == N_SCALAR && args->value)
            scg_issue_add(c, true, args->file, args->line,
                          "%s: expected a map of arguments", p);
        else if (a)
            args_json(c, args, "", a, p, groups);
    }
    return o;
}

static cJSON *entries_json(scg_converter *c, const node *l, const char *path) {
    cJSON *a = cJSON_CreateArray();
    size_t n;
    node **items = list_items(c, l, path, &n);
    for (size_t i = 0; i < n; i++) {
        char p[1024];
        snprintf(p, sizeof p, "%s[%zu]", path, i);
        cJSON *e = entry_json(c, items[i], p);
        if (e)
            cJSON_AddItemToArray(a, scg_fold(c, e));
    }
    free(items);
    return a;
}

/* Metadata: nested maps stay objects, lists arrays; plain YAML scalars
 * keep their type (integers, booleans, null). */
cJSON *scg_meta_json(scg_converter *c, const node *m, const char *path) {
    if (m->kind == N_SCALAR) {
        if (m->plain && m->value && strchr(m->value, '.') &&
            strspn(m->value, "0123456789.-+eE") == strlen(m->value) &&
            isdigit((unsigned char)m->value[strlen(m->value) - 1]))
            scg_issue_add(c, false, m->file, m->line,
                          "%s: %s is a YAML number to SCG (quote it to keep it "
                          "text); kept as the string \"%s\"",
                          path, m->value, m->value);
        return scg_scalar_json(c, m, path, NULL, true);
    }
    bool list = m->kind == N_LIST;
    cJSON *o = list ? cJSON_CreateArray() : cJSON_CreateObject();
    size_t n = m->n;
    node **items = list ? list_items(c, m, path, &n) : m->kids;
    for (size_t i = 0; o && i < n; i++) {
        char p[1024];
        snprintf(p, sizeof p, "%s", path);
        if (list)
            path_add(p, sizeof p, "[%zu]", i);
        else
            path_add(p, sizeof p, ".%s", items[i]->key);
        cJSON *v = scg_meta_json(c, items[i], p);
        if (!v)
            continue;
        if (list)
            cJSON_AddItemToArray(o, v);
        else
            cJSON_AddItemToObject(o, items[i]->key, v);
    }
    if (list)
        free(items);
    return o;
}

bool scg_integer_text(const char *s) {
    if (*s == '-' || *s == '+')
        s++;
    size_t n = strlen(s);
    return n > 0 && n < 10 && strspn(s, "0123456789") == n;
}

static cJSON *route_json(scg_converter *c, const node *r, const char *path,
                         const cJSON *defaults) {
    if (r->kind != N_MAP) {
        scg_issue_add(c, true, r->file, r->line, "%s: expected a map (a route)",
                      path);
        return NULL;
    }
    static const char *const fields[] = {
        "id", "uri", "predicates", "filters", "metadata", "order", "enabled"};
    const node *f[7] = {0};
    for (size_t i = 0; i < r->n; i++) {
        size_t k = 0;
        while (k < 7 && !scg_relaxed_eq(r->kids[i]->key, fields[k]))
            k++;
        if (k < 7)
            f[k] = r->kids[i];
        else
            scg_issue_add(
                c, true, r->kids[i]->file, r->kids[i]->line,
                "%s.%s: not a route field (id, uri, predicates, filters, "
                "metadata, order, enabled)",
                path, r->kids[i]->key);
    }
    cJSON *o = cJSON_CreateObject();
    char p[1024];
    if (!f[0] || f[0]->kind != N_SCALAR || !f[0]->value)
        scg_issue_add(
            c, true, r->file, r->line,
            "%s: no id (switchyard needs one; SCG would make up a random "
            "one)",
            path);
    for (int k = 0; k < 2; k++)
        if (f[k] && f[k]->kind == N_SCALAR) {
            sub(p, sizeof p, path, k ? ".uri" : ".id");
            cJSON *v = scg_scalar_json(c, f[k], p, NULL, false);
            if (v)
                cJSON_AddItemToObject(o, fields[k], v);
        } else if (f[k]) {
            scg_issue_add(c, true, f[k]->file, f[k]->line,
                          "%s.%s: expected text", path, fields[k]);
        }
    if (f[2]) {
        sub(p, sizeof p, path, ".predicates");
        cJSON_AddItemToObject(o, "predicates", entries_json(c, f[2], p));
    }
    /* default filters and the route's interleave by their index, defaults
     * first on ties (route model, section 5) */
    cJSON *own = NULL;
    if (f[3]) {
        sub(p, sizeof p, path, ".filters");
        own = entries_json(c, f[3], p);
    }
    int nd = defaults ? cJSON_GetArraySize(defaults) : 0;
    int no = own ? cJSON_GetArraySize(own) : 0;
    if (own || nd) {
        cJSON *all = cJSON_AddArrayToObject(o, "filters");
        for (int i = 0; all && (i < nd || i < no); i++) {
            if (i < nd)
                cJSON_AddItemToArray(
                    all,
                    cJSON_Duplicate(cJSON_GetArrayItem(defaults, i), true));
            if (i < no)
                cJSON_AddItemToArray(
                    all, cJSON_Duplicate(cJSON_GetArrayItem(own, i), true));
        }
    }
    cJSON_Delete(own);
    if (f[4]) {
        sub(p, sizeof p, path, ".metadata");
        if (f[4]->kind == N_MAP)
            cJSON_AddItemToObject(o, "metadata", scg_meta_json(c, f[4], p));
        else if (f[4]->kind != N_SCALAR || f[4]->value)
            scg_issue_add(c, true, f[4]->file, f[4]->line, "%s: expected a map",
                          p);
    }
    scg_timeout_defaults(c, o);
    scg_cors_default(c, o, path);
    if (f[5]) {
        sub(p, sizeof p, path, ".order");
        char *v = NULL;
        if (f[5]->kind == N_SCALAR && f[5]->value) {
            where w = {f[5]->file, f[5]->line, p, NULL};
            v = scg_resolve(c, f[5]->value, &w, 0);
        }
        if (v && scg_integer_text(v))
            cJSON_AddRawToObject(o, "order", v[0] == '+' ? v + 1 : v);
        else
            scg_issue_add(c, true, f[5]->file, f[5]->line,
                          "%s: expected an integer, not \"%s\"", p, v ? v : "");
        free(v);
    }
    if (f[6]) { /* SCG 4.2: false turns the route off */
        sub(p, sizeof p, path, ".enabled");
        /* as Spring binds a boolean: true/false, on/off, yes/no */
        cJSON *v = f[6]->kind == N_SCALAR && f[6]->value
                       ? scg_scalar_json(c, f[6], p, NULL, false)
                       : NULL;
        const char *t = cJSON_IsString(v) ? v->valuestring : "";
        static const char *const words[] = {"true",  "on",  "yes",
                                            "false", "off", "no"};
        size_t k = 0;
        while (k < 6 && strcasecmp(t, words[k]) != 0)
            k++;
        if (k < 6)
            cJSON_AddBoolToObject(o, "enabled", k < 3);
        else
            scg_issue_add(c, true, f[6]->file, f[6]->line,
                          "%s: expected true or false, not \"%s\"", p, t);
        cJSON_Delete(v);
    }
    return o;
}

char *scg_converter_document(scg_converter *c, size_t *len, size_t *routes) {
    *len = 0;
    *routes = 0;
    c->filter_props = NULL;
    c->httpclient = NULL;
    c->global_cors = NULL;
    c->fold_checked = 0;
    scg_environment_overrides(c);
    const node *gw = scg_map_get(
        scg_map_get(scg_map_get(c->root, "spring"), "cloud"), "gateway");
    const node *wf = scg_map_get(scg_map_get(gw, "server"), "webflux");
    const node *g =
        wf && (scg_map_get(wf, "routes") || !scg_map_get(gw, "routes")) ? wf
                                                                        : gw;
    const char *gpath = g == wf ? "spring.cloud.gateway.server.webflux"
                                : "spring.cloud.gateway";
    c->gateway = g;
    if (wf && gw && scg_map_get(wf, "routes") && scg_map_get(gw, "routes")) {
        const node *old = scg_map_get(gw, "routes");
        scg_issue_add(
            c, true, old->file, old->line,
            "spring.cloud.gateway.routes and spring.cloud.gateway.server."
            "webflux.routes are both set: keep one");
    }
    /* what a gateway key holds besides routes is not converted: say so */
    for (size_t i = 0; g && g->kind == N_MAP && i < g->n; i++) {
        const node *k = g->kids[i];
        if (scg_relaxed_eq(k->key, "routes") ||
            scg_relaxed_eq(k->key, "defaultfilters"))
            continue;
        if (g == gw && scg_relaxed_eq(k->key, "server") &&
            k == scg_map_get(gw, "server"))
            continue;
        if (scg_gateway_setting(c, k, gpath))
            continue;
        scg_issue_add(c, false, k->file, k->line,
                      "%s.%s: not converted (convert reads routes and "
                      "default-filters)",
                      gpath, k->key);
    }
    /* where RequestRateLimiter's buckets live: not a route's; say where it
     * goes instead of leaving it unread */
    const node *sp = scg_map_get(c->root, "spring");
    const node *redis[2] = {scg_map_get(scg_map_get(sp, "data"), "redis"),
                            scg_map_get(sp, "redis")};
    for (int i = 0; i < 2; i++)
        if (redis[i])
            scg_issue_add(c, false, redis[i]->file, redis[i]->line,
                          "%s: not converted: the rate limits share buckets "
                          "in Redis only through the mini-gateway's --redis "
                          "HOST:PORT, its password through "
                          "--redis-password-file FILE (the first line) and "
                          "--redis-user NAME for a username (no TLS); "
                          "without --redis each gateway limits on its own",
                          i ? "spring.redis" : "spring.data.redis");
    const node *rl = scg_map_get(g, "routes");
    if (!rl)
        scg_issue_add(c, true, c->nfiles ? c->files[0] : "", 0,
                      "no spring.cloud.gateway.routes (or spring.cloud.gateway."
                      "server.webflux.routes)");
    const node *df = scg_map_get(g, "defaultfilters");
    char path[256];
    cJSON *defaults = NULL;
    if (df) {
        snprintf(path, sizeof path, "%s.default-filters", gpath);
        defaults = entries_json(c, df, path);
    }
    cJSON *doc = cJSON_CreateArray();
    size_t n = 0;
    node **items = NULL;
    if (rl) {
        snprintf(path, sizeof path, "%s.routes", gpath);
        items = list_items(c, rl, path, &n);
    }
    for (size_t i = 0; doc && i < n; i++) {
        char p[256];
        snprintf(p, sizeof p, "%s.routes[%zu]", gpath, i);
        cJSON *r = route_json(c, items[i], p, defaults);
        if (r)
            cJSON_AddItemToArray(doc, r);
    }
    free(items);
    free(c->defaults_json);
    c->defaults_json =
        cJSON_GetArraySize(defaults) ? cJSON_PrintUnformatted(defaults) : NULL;
    cJSON_Delete(defaults);
    char *out = NULL;
    if (!doc)
        c->oom = true;
    if (c->oom)
        scg_issue_add(c, true, c->nfiles ? c->files[0] : "", 0,
                      "out of memory");
    if (!c->errors && doc) { /* one route a line: readable, diffable */
        sbuf b = {0};
        scg_sb_add(&b, "[", 1);
        int i = 0;
        for (cJSON *r = doc->child; r; r = r->next, i++) {
            char *t = cJSON_PrintUnformatted(r);
            if (!t)
                b.oom = true;
            scg_sb_add(&b, i ? ",\n  " : "\n  ", i ? 4 : 3);
            scg_sb_add(&b, t ? t : "", t ? strlen(t) : 0);
            free(t);
        }
        scg_sb_add(&b, "\n]", 2);
        if (b.oom)
            free(b.p);
        else {
            out = b.p;
            *len = b.len;
            *routes = n;
        }
    }
    cJSON_Delete(doc);
    return out;
}

const char *scg_converter_default_filters(const scg_converter *c) {
    return c->errors ? NULL : c->defaults_json;
}
