/*
 * def_entry.c - predicate and filter entries of a route (route model
 * section 2): object and shortcut-string forms, mapping args to the
 * factory's fields (DEFAULT, GATHER_LIST, GATHER_LIST_TAIL_FLAG), SpEL
 * rejection and validation of every value by its field type.
 */
#include "base/values.h"
#include "def/def_build.h"
#include "def/def_memo.h"
#include "policy/policy_args.h"

#include <math.h>
#include <stdio.h>

#define GENKEY "_genkey_"

/* The keys of the first shortcut values, "_genkey_0" .. "_genkey_15"
 * (every real entry's): static text, so a key is known as one of them by
 * its address. */
static const char genkeys[16][12] = {
    GENKEY "0",  GENKEY "1",  GENKEY "2",  GENKEY "3", GENKEY "4",  GENKEY "5",
    GENKEY "6",  GENKEY "7",  GENKEY "8",  GENKEY "9", GENKEY "10", GENKEY "11",
    GENKEY "12", GENKEY "13", GENKEY "14", GENKEY "15"};

/* One of genkeys, or else "_genkey_" compared byte by byte (the compare
 * stops at the first byte that differs: a shorter key is never read past
 * its end). */
static bool is_genkey(const char *k) {
    static const char g[] = GENKEY;
    if ((uintptr_t)k - (uintptr_t)genkeys[0] < sizeof genkeys)
        return true;
    for (size_t i = 0; i < sizeof g - 1; i++)
        if (k[i] != g[i])
            return false;
    return true;
}

void sy__def_number_text(double v, char *buf, size_t size) {
    if (isfinite(v) && v == floor(v) && fabs(v) < 9007199254740992.0)
        snprintf(buf, size, "%.0f", v);
    else
        snprintf(buf, size, "%.17g", v);
}

/* ---- entries ---- */

/* The factory being mapped: built-in spec or host field list. */
typedef struct factory_view {
    const sy__factory_spec *spec;
    const void *host;
    sy_shortcut_type type;
    bool shortcut_allowed, open;
    size_t nfields;
    const char *names[SY_MAX_FIELDS + 8];
    bool list[SY_MAX_FIELDS + 8];
} factory_view;

typedef struct raw_arg {
    const char *key;
    const char *value;
    int field; /* index in view, or -1 for an extra key */
} raw_arg;

/* The raw args of one entry: in the caller's stack buffer of RAW_STACK
 * when they fit (nearly always), else allocated. */
#define RAW_STACK 16

static raw_arg *raw_get(const sy__alloc *a, size_t n, raw_arg *stack) {
    if (n <= RAW_STACK)
        return stack; /* each one is filled whole before it is read */
    return sy__calloc(a, n, sizeof(raw_arg));
}

static void raw_put(const sy__alloc *a, raw_arg *raw, const raw_arg *stack) {
    if (raw != stack)
        sy__free(a, raw);
}

static int find_view(const sy__def_ctx *ctx, sy__factory_kind kind,
                     const char *name, const sy__factory_spec *spec,
                     factory_view *v) {
    /* names[] and list[] are read only below nfields */
    v->host = NULL;
    v->nfields = 0;
    v->spec = spec ? spec : sy__factory_find(kind, name, strlen(name));
    if (v->spec) {
        v->type = v->spec->shortcut;
        v->shortcut_allowed = v->spec->shortcut_allowed;
        v->open = v->spec->open_args;
        v->nfields = v->spec->field_count;
        for (size_t i = 0; i < v->nfields; i++) {
            v->names[i] = v->spec->fields[i].name;
            v->list[i] = v->spec->fields[i].list;
        }
        return 0;
    }
    const char *const *fields = NULL;
    size_t len = strlen(name);
    v->type = SY_SHORTCUT_DEFAULT;
    if (kind == SY_FACTORY_PREDICATE) {
        const sy_predicate_factory *f =
            sy__registry_find_predicate(ctx->registry, name, len);
        if (f) {
            v->host = f;
            v->type = f->shortcut_type;
            fields = f->shortcut_fields;
        }
    } else {
        const sy_filter_factory *f =
            sy__registry_find_filter(ctx->registry, name, len);
        if (f) {
            v->host = f;
            v->type = f->shortcut_type;
            fields = f->shortcut_fields;
        }
    }
    if (!v->host)
        return -1;
    v->shortcut_allowed = true;
    v->open = true;
    for (size_t i = 0; fields && fields[i] && i < SY_ARRAY_LEN(v->names); i++) {
        v->names[i] = fields[i];
        v->list[i] = i == 0 && v->type != SY_SHORTCUT_DEFAULT;
        v->nfields++;
    }
    return 0;
}

static int field_index(const factory_view *v, const char *key) {
    for (size_t i = 0; i < v->nfields; i++)
        if (strcmp(v->names[i], key) == 0)
            return (int)i;
    return -1;
}

static bool is_spel(const char *s) {
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
        s++;
    if (s[0] != '#')
        return false;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' ||
                 s[n - 1] == '\r'))
        n--;
    return n >= 3 && s[0] == '#' && s[1] == '{' && s[n - 1] == '}';
}

/* RequestRateLimiter names its key resolver and rate limiter as SCG
 * names beans, "#{@name}": policy/keyresolve.c checks those. */
static bool bean_ref_arg(const factory_view *v, const char *key) {
    return v->spec && v->spec->id == SY_F_REQUEST_RATE_LIMITER &&
           (sy__parg_name_eq(key, "key-resolver") ||
            sy__parg_name_eq(key, "rate-limiter"));
}

/* Map raw args onto fields (sets raw[i].field). */
static int map_args(const factory_view *v, const sy__entry_ctx *ec,
                    raw_arg *raw, size_t n, sy_error *err) {
    bool set[SY_ARRAY_LEN(v->names)] = {false};
    size_t gen = 0;
    int list_field = -1;
    for (size_t i = 0; i < v->nfields; i++)
        if (v->list[i] && list_field < 0)
            list_field = (int)i;
    if (v->type != SY_SHORTCUT_DEFAULT && list_field < 0) {
        /* a host GATHER_LIST factory without fields: keep keys as given */
        for (size_t i = 0; i < n; i++)
            raw[i].field = -1;
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        const char *k = raw[i].key;
        /* no built-in has a field named like a shortcut's key */
        bool shortkey = is_genkey(k);
        int f = shortkey && v->spec ? -1 : field_index(v, k);
        if (v->type != SY_SHORTCUT_DEFAULT) {
            /* gathered: named non-list fields keep their key, every other
             * value joins the list in order */
            if (f < 0 || v->list[f])
                f = list_field;
        } else if (shortkey) {
            size_t limit = v->shortcut_allowed ? v->nfields : 0;
            if (gen >= limit) {
                if (v->host) {
                    raw[i].field = -1;
                    continue;
                }
                char why[160];
                if (v->shortcut_allowed && v->nfields == 0)
                    snprintf(why, sizeof why, "takes no arguments");
                else if (!v->shortcut_allowed)
                    snprintf(why, sizeof why,
                             "takes its arguments in object form only "
                             "({\"name\": ..., \"args\": {...}})");
                else {
                    int off = snprintf(why, sizeof why,
                                       "too many arguments (takes at most "
                                       "%zu:",
                                       v->nfields);
                    for (size_t j = 0;
                         j < v->nfields && off > 0 && off < (int)sizeof why;
                         j++)
                        off += snprintf(why + off, sizeof why - (size_t)off,
                                        " %s%s", v->names[j],
                                        j + 1 < v->nfields ? "," : ")");
                }
                if (ec->shortcut)
                    return sy__error_set(err, SY_EARG, ec->path, "%s: %s",
                                         ec->name, why);
                return sy__def_arg_error(ec, SY_EARG, k, why, err);
            }
            f = (int)gen++;
        } else if (f < 0 && !v->open) {
            char why[200];
            int off = snprintf(why, sizeof why, "unknown argument (expected ");
            for (size_t j = 0; j < v->nfields && off < (int)sizeof why; j++)
                off += snprintf(why + off, sizeof why - (size_t)off, "%s%s",
                                j ? ", " : "", v->names[j]);
            if (v->nfields == 0 && off < (int)sizeof why)
                off += snprintf(why + off, sizeof why - (size_t)off, "none");
            if (off < (int)sizeof why)
                snprintf(why + off, sizeof why - (size_t)off, ")");
            return sy__def_arg_error(ec, SY_EARG, k, why, err);
        }
        if (f >= 0 && !v->list[f]) {
            if (set[f])
                return sy__def_arg_error(ec, SY_EARG, v->names[f],
                                         "given twice", err);
            set[f] = true;
        }
        raw[i].field = f;
    }
    if (v->type == SY_SHORTCUT_GATHER_LIST_TAIL_FLAG) {
        int flag = -1;
        for (size_t i = 0; i < v->nfields; i++)
            if (!v->list[i]) {
                flag = (int)i;
                break;
            }
        if (flag >= 0 && !set[flag]) {
            for (size_t i = n; i-- > 0;) {
                if (raw[i].field != list_field)
                    continue;
                if (sy__value_bool(raw[i].value, NULL, NULL))
                    raw[i].field = flag;
                break;
            }
        }
    }
    return 0;
}

/* Gather the raw (key, value) args of one entry. Values are arena text. */
/* The text of a scalar JSON value (numbers and booleans as text), or NULL
 * for anything else. */
static const char *scalar_text(const cJSON *c, char *num, size_t cap) {
    if (sy__def_is_string(c))
        return c->valuestring;
    if (sy__def_is_number(c)) {
        sy__def_number_text(c->valuedouble, num, cap);
        return num;
    }
    if (cJSON_IsBool(c))
        return cJSON_IsTrue(c) ? "true" : "false";
    return NULL;
}

/* Object-form args. A JSON array gives one arg per element under the same
 * key (as Spring binds `methods[0]`, `methods[1]`); an empty one gives one
 * empty arg (Spring binds `series: []` as "", an empty list), never none:
 * a key that vanished would bring its default back. */
static int raw_from_object(struct sy_route *r, const cJSON *args,
                           const sy__entry_ctx *ec, raw_arg **out, size_t *n,
                           const sy__alloc *a, raw_arg *stack, sy_error *err) {
    char p[256];
    size_t count = 0;
    for (const cJSON *c = args->child; c; c = c->next)
        count +=
            sy__def_is_array(c) && c->child ? (size_t)cJSON_GetArraySize(c) : 1;
    *out = NULL;
    *n = 0;
    if (count == 0)
        return 0;
    raw_arg *raw = raw_get(a, count, stack);
    if (!raw)
        return sy__error_set(err, SY_ENOMEM, ec->path, "out of memory");
    size_t i = 0;
    for (const cJSON *c = args->child; c; c = c->next) {
        bool empty = sy__def_is_array(c) && !c->child;
        const cJSON *one = sy__def_is_array(c) && !empty ? c->child : c;
        size_t k = 0;
        for (; one;
             one = sy__def_is_array(c) && !empty ? one->next : NULL, k++) {
            char num[64];
            const char *val = empty ? "" : scalar_text(one, num, sizeof num);
            if (!val) {
                raw_put(a, raw, stack);
                if (sy__def_is_array(c))
                    sy__def_path(p, sizeof p, "%s.args.%s[%zu]", ec->path,
                                 c->string, k);
                else
                    sy__def_path(p, sizeof p, "%s.args.%s", ec->path,
                                 c->string);
                /* YAML's nested args (Retry's backoff) are dotted keys
                 * in SCG's route definitions: say so */
                bool nest =
                    cJSON_IsObject(one) && one->child && one->child->string;
                return sy__error_set(
                    err, SY_ETYPE, p,
                    "%s: %s: expected a string, number, boolean or an array "
                    "of them%s%.60s%s%.60s%s",
                    ec->name, c->string,
                    nest ? " (a nested arg is a dotted key: \"" : "",
                    nest ? c->string : "", nest ? "." : "",
                    nest ? one->child->string : "", nest ? "\")" : "");
            }
            raw[i].key = sy__route_strdup(r, c->string);
            raw[i].value = sy__route_strdup(r, val);
            raw[i].field = -1;
            if (!raw[i].key || !raw[i].value) {
                raw_put(a, raw, stack);
                return sy__error_set(err, SY_ENOMEM, ec->path, "out of memory");
            }
            i++;
        }
    }
    *out = raw;
    *n = i;
    return 0;
}

/* Object form: a list field given by name as one string is split on
 * commas, trimmed, empty items dropped (Spring's conversion of
 * "GET,POST" to a list). `_genkey_N` values are never split. */
static int split_named_lists(const factory_view *v, struct sy_route *r,
                             raw_arg **rawp, size_t *np, const sy__alloc *a,
                             const raw_arg *stack, sy_error *err,
                             const char *path) {
    raw_arg *raw = *rawp;
    size_t n = *np, extra = 0;
    for (size_t i = 0; i < n; i++) {
        int f = raw[i].field;
        if (f >= 0 && v->list[f] && strcmp(raw[i].key, v->names[f]) == 0)
            for (const char *c = raw[i].value; *c; c++)
                extra += *c == ',';
    }
    if (!extra)
        return 0;
    raw_arg *out = sy__calloc(a, n + extra, sizeof *out);
    if (!out)
        return sy__error_set(err, SY_ENOMEM, path, "out of memory");
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int f = raw[i].field;
        if (!(f >= 0 && v->list[f] && strcmp(raw[i].key, v->names[f]) == 0 &&
              strchr(raw[i].value, ','))) {
            out[k++] = raw[i];
            continue;
        }
        const char *p = raw[i].value;
        for (;;) {
            const char *e = strchr(p, ',');
            const char *end = e ? e : p + strlen(p);
            const char *b = p;
            while (b < end && (*b == ' ' || *b == '\t'))
                b++;
            const char *t = end;
            while (t > b && (t[-1] == ' ' || t[-1] == '\t'))
                t--;
            if (t > b) {
                char *item = sy__route_strndup(r, b, (size_t)(t - b));
                if (!item) {
                    sy__free(a, out);
                    return sy__error_set(err, SY_ENOMEM, path, "out of memory");
                }
                out[k] = raw[i];
                out[k++].value = item;
            }
            if (!e)
                break;
            p = e + 1;
        }
    }
    raw_put(a, raw, stack);
    *rawp = out;
    *np = k;
    return 0;
}

/* The key of the i-th shortcut value: "_genkey_<i>" (static text for the
 * first ones, which is every real entry). NULL when out of memory. */
static const char *genkey(struct sy_route *r, size_t i) {
    if (i < SY_ARRAY_LEN(genkeys))
        return genkeys[i];
    char key[32];
    snprintf(key, sizeof key, GENKEY "%zu", i);
    return sy__route_strdup(r, key);
}

/* Split "Name=a, b,,c" into name and trimmed non-empty tokens. */
static int raw_from_shortcut(struct sy_route *r, const char *text,
                             sy__factory_kind kind, sy__entry_ctx *ec,
                             raw_arg **out, size_t *n, const sy__alloc *a,
                             raw_arg *stack, sy_error *err) {
    *out = NULL;
    *n = 0;
    const char *eq = strchr(text, '=');
    if (!eq && kind == SY_FACTORY_PREDICATE)
        return sy__error_set(err, SY_EARG, ec->path,
                             "predicate '%.80s' has no '=' (expected "
                             "Name=arg1,arg2)",
                             text);
    size_t nlen = eq ? (size_t)(eq - text) : strlen(text);
    /* a built-in's name is its spec's text; only others are copied */
    const sy__factory_spec *spec = sy__factory_find(kind, text, nlen);
    const char *name = spec ? spec->name : sy__route_strndup(r, text, nlen);
    if (!name)
        return sy__error_set(err, SY_ENOMEM, ec->path, "out of memory");
    ec->name = name;
    ec->spec = spec;
    if (!eq)
        return 0;
    /* at most one value per comma plus one: fewer than RAW_STACK when the
     * text is shorter than that (the commas are counted only if not) */
    const char *args = eq + 1, *stop = args + strlen(args);
    size_t cap = (size_t)(stop - args) + 1;
    if (cap > RAW_STACK) {
        cap = 1;
        for (const char *p = args; (p = memchr(p, ',', (size_t)(stop - p)));
             p++)
            cap++;
    }
    raw_arg *raw = raw_get(a, cap, stack);
    if (!raw)
        return sy__error_set(err, SY_ENOMEM, ec->path, "out of memory");
    size_t count = 0;
    const char *p = args;
    for (;;) {
        const char *end = memchr(p, ',', (size_t)(stop - p));
        if (!end)
            end = stop;
        const char *s = p, *e = end;
        while (s < e && (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r'))
            s++;
        while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' ||
                         e[-1] == '\r'))
            e--;
        if (e > s) {
            raw[count].key = genkey(r, count);
            raw[count].value = sy__route_strndup(r, s, (size_t)(e - s));
            raw[count].field = -1;
            if (!raw[count].key || !raw[count].value) {
                raw_put(a, raw, stack);
                return sy__error_set(err, SY_ENOMEM, ec->path, "out of memory");
            }
            count++;
        }
        if (end == stop)
            break;
        p = end + 1;
    }
    *out = raw;
    *n = count;
    return 0;
}

/* Order the mapped args (fields in order, list values in order, then
 * extra keys sorted), check required fields and types. */
static int finish_entry(sy__arena *ea, const factory_view *v,
                        const sy__entry_ctx *ec, raw_arg *raw, size_t n,
                        sy__def_entry *e, const sy__alloc *a, sy_error *err) {
    e->args = n ? sy__arena_alloc(ea, n * sizeof *e->args) : NULL;
    if (n && !e->args)
        return sy__error_set(err, SY_ENOMEM, ec->path, "out of memory");
    size_t k = 0;
    for (size_t f = 0; f < v->nfields; f++) {
        size_t found = 0;
        for (size_t i = 0; i < n; i++) {
            if (raw[i].field != (int)f)
                continue;
            e->args[k].key = v->names[f];
            e->args[k].value = raw[i].value;
            k++;
            found++;
        }
        const sy__field_spec *fs = v->spec ? &v->spec->fields[f] : NULL;
        if (fs && fs->required && found == 0) {
            if (ec->shortcut)
                return sy__error_set(err, SY_EMISSING, ec->path,
                                     "%s: missing required argument '%s'",
                                     ec->name, fs->name);
            return sy__def_arg_error(ec, SY_EMISSING, fs->name,
                                     "missing required argument", err);
        }
    }
    size_t extra = k;
    for (size_t i = 0; i < n; i++)
        if (raw[i].field < 0) {
            e->args[k].key = raw[i].key;
            e->args[k].value = raw[i].value;
            k++;
        }
    if (k > extra && !sy__def_sort_kv(a, e->args + extra, k - extra))
        return sy__error_set(err, SY_ENOMEM, ec->path, "out of memory");
    e->arg_count = k;
    if (!v->spec)
        return 0;
    /* args[0, extra) are the fields' values in field order, each key the
     * spec's own name; the extra keys after them name no field (map_args
     * gave every field name its field) */
    for (size_t i = 0, f = 0; i < extra; i++) {
        while (e->args[i].key != v->names[f])
            f++;
        const sy__field_spec *fs = &v->spec->fields[f];
        if (fs->list && !*e->args[i].value)
            return sy__def_arg_error(ec, SY_EMISSING, fs->name,
                                     "list values must not be empty", err);
        int rc = sy__def_check_value(fs, ec, e->args[i].value, err);
        if (rc)
            return rc;
    }
    return sy__def_check_rules(e, ec, err);
}

/* *slot: the memo's slot of a shortcut entry (ctx->memo): one built
 * again from it, or whose build it took in; else NULL. pre: its lookup
 * by the route's estimate, or NULL. */
static int build_entry(const sy__def_ctx *ctx, struct sy_route *r,
                       sy__arena *ea, sy__factory_kind kind, const cJSON *item,
                       const char *path, sy__def_entry *e, bool *shortcut,
                       const sy__memo_pre *pre, sy__memo_slot **slot,
                       sy_error *err) {
    sy__entry_ctx ec = {path, false, "", NULL};
    raw_arg stack[RAW_STACK];
    raw_arg *raw = NULL;
    size_t n = 0, tlen = 0;
    uint64_t hash = 0;
    int rc;
    char p[256];
    const char *what = kind == SY_FACTORY_PREDICATE ? "predicate" : "filter";
    *slot = NULL;
    if (sy__def_is(item, cJSON_String)) {
        ec.shortcut = true;
        if (ctx->memo) { /* seen before: built as then */
            sy__memo_slot *s;
            if (pre) { /* looked up by the route's estimate */
                tlen = pre->len;
                hash = pre->hash;
                s = sy__def_memo_check(ctx->memo, pre->slot, kind,
                                       item->valuestring, tlen, hash);
            } else {
                tlen = strlen(item->valuestring);
                s = sy__def_memo_find(ctx->memo, kind, item->valuestring, tlen,
                                      &hash);
            }
            if (s) {
                *shortcut = true;
                *slot = s;
                if (!sy__def_memo_replay(s, r, ea, e))
                    return sy__error_set(err, SY_ENOMEM, path, "out of memory");
                return 0;
            }
        }
        const char *vals[SY_MEMO_ARGS];
        int fields[SY_MEMO_ARGS];
        rc = sy__def_shortcut_fast(ctx->memo, r, ea, kind, item->valuestring,
                                   path, e, vals, fields, &n, err);
        if (rc <= 0) { /* built (or failed) without the general reading */
            *shortcut = true;
            if (!rc && ctx->memo)
                *slot = sy__def_memo_add(ctx->memo, kind, item->valuestring,
                                         tlen, hash, e, vals, fields, n);
            return rc;
        }
        n = 0;
        rc = raw_from_shortcut(r, item->valuestring, kind, &ec, &raw, &n,
                               ctx->alloc, stack, err);
        if (rc)
            return rc;
        if (!*ec.name) {
            raw_put(ctx->alloc, raw, stack);
            return sy__error_set(err, SY_EMISSING, path, "%s name is empty",
                                 what);
        }
    } else if (sy__def_is(item, cJSON_Object)) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(item, "name");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(item, "args");
        sy__def_path(p, sizeof p, "%s.name", path);
        if (!name)
            return sy__error_set(err, SY_EMISSING, p, "%s name is missing",
                                 what);
        if (!sy__def_is_string(name))
            return sy__error_set(err, SY_ETYPE, p, "%s name must be a string",
                                 what);
        if (!*name->valuestring)
            return sy__error_set(err, SY_EMISSING, p, "%s name is empty", what);
        const sy__factory_spec *spec = sy__factory_find(
            kind, name->valuestring, strlen(name->valuestring));
        ec.name = spec ? spec->name : sy__route_strdup(r, name->valuestring);
        if (!ec.name)
            return sy__error_set(err, SY_ENOMEM, path, "out of memory");
        ec.spec = spec;
        if (args && !sy__def_is_null(args)) {
            if (!sy__def_is_object(args)) {
                sy__def_path(p, sizeof p, "%s.args", path);
                return sy__error_set(err, SY_ETYPE, p,
                                     "%s: args must be an object", ec.name);
            }
            rc =
                raw_from_object(r, args, &ec, &raw, &n, ctx->alloc, stack, err);
            if (rc)
                return rc;
        }
    } else {
        return sy__error_set(err, SY_ETYPE, path,
                             "a %s must be a string (\"Name=args\") or an "
                             "object ({\"name\", \"args\"})",
                             what);
    }
    *shortcut = ec.shortcut;
    factory_view v;
    if (find_view(ctx, kind, ec.name, ec.spec, &v) != 0) {
        raw_put(ctx->alloc, raw, stack);
        if (ec.shortcut)
            return sy__error_set(err, SY_EUNKNOWN, path, "unknown %s '%.80s'",
                                 what, ec.name);
        sy__def_path(p, sizeof p, "%s.name", path);
        return sy__error_set(err, SY_EUNKNOWN, p, "unknown %s '%.80s'", what,
                             ec.name);
    }
    if (v.spec) {
        sy__def_set_factory(e, v.spec, NULL);
    } else { /* the name as written, with the host's factory */
        sy__def_host_ref *ref = sy__route_calloc(r, 1, sizeof *ref);
        if (!ref) {
            raw_put(ctx->alloc, raw, stack);
            return sy__error_set(err, SY_ENOMEM, path, "out of memory");
        }
        *ref = (sy__def_host_ref){v.host, ec.name};
        sy__def_set_factory(e, NULL, ref);
    }
    for (size_t i = 0; i < n; i++)
        if (is_spel(raw[i].value) && !bean_ref_arg(&v, raw[i].key)) {
            rc = sy__def_arg_error(
                &ec, SY_ESPEL, raw[i].key,
                "SpEL expressions (#{...}) are not supported", err);
            raw_put(ctx->alloc, raw, stack);
            return rc;
        }
    rc = map_args(&v, &ec, raw, n, err);
    if (!rc && !ec.shortcut)
        rc = split_named_lists(&v, r, &raw, &n, ctx->alloc, stack, err, path);
    if (!rc)
        rc = finish_entry(ea, &v, &ec, raw, n, e, ctx->alloc, err);
    if (!rc && ctx->memo && ec.shortcut && n <= SY_MEMO_ARGS) {
        const char *vals[SY_MEMO_ARGS];
        int fields[SY_MEMO_ARGS];
        for (size_t i = 0; i < n; i++) {
            vals[i] = raw[i].value;
            fields[i] = raw[i].field;
        }
        *slot = sy__def_memo_add(ctx->memo, kind, item->valuestring, tlen, hash,
                                 e, vals, fields, n);
    }
    raw_put(ctx->alloc, raw, stack);
    return rc;
}

int sy__def_build_entries_in(const sy__def_ctx *ctx, struct sy_route *r,
                             sy__arena *ea, sy__factory_kind kind,
                             const cJSON *arr, const char *path,
                             sy_error *err) {
    /* filters go to r's own `more`, made only when there are some */
    bool preds = kind == SY_FACTORY_PREDICATE;
    bool named = path != NULL; /* else every error unnamed (""): the caller
                                  builds again with the path after one */
    if (!named)
        path = "";
    sy__def_memo *memo = ctx->memo;
    if (memo) { /* a route's predicates come first: a new route */
        memo->gen += preds;
        memo->hint_n[!preds] = 0;
    }
    sy__route_more *m = r->more == &sy__route_more_none
                            ? NULL
                            : (sy__route_more *)(uintptr_t)r->more;
    if (preds) {
        r->predicates = NULL;
        r->predicate_count = 0;
    } else if (m) {
        m->filters = NULL;
        m->filter_count = 0;
    }
    if (!arr || sy__def_is(arr, cJSON_NULL))
        return 0;
    if (!sy__def_is(arr, cJSON_Array))
        return sy__error_set(err, SY_ETYPE, path, "%s must be an array",
                             kind == SY_FACTORY_PREDICATE ? "predicates"
                                                          : "filters");
    size_t n = 0;
    for (const cJSON *c = arr->child; c; c = c->next)
        n++;
    if (n == 0)
        return 0;
    if (n > SY_ROUTE_ENTRIES_MAX) /* the counts are 16-bit */
        return sy__error_set(err, SY_ELIMIT, path, "more than %u %s",
                             (unsigned)SY_ROUTE_ENTRIES_MAX,
                             kind == SY_FACTORY_PREDICATE ? "predicates"
                                                          : "filters");
    if (!preds || !ea)
        ea = &r->arena;
    sy__def_entry *es = sy__arena_alloc(ea, n * sizeof *es);
    if (!es)
        return sy__error_set(err, SY_ENOMEM, path, "out of memory");
    memset(es, 0, n * sizeof *es);
    size_t i = 0;
    char p[256];
    size_t at = 0; /* "<path>[i]", truncated as sy__path_join */
    if (named) {
        at = strlen(path);
        if (at > sizeof p - 1)
            at = sizeof p - 1;
        memcpy(p, path, at);
    } else {
        p[0] = '\0';
    }
    for (const cJSON *c = arr->child; c; c = c->next, i++) {
        if (named)
            sy__path_index(p, sizeof p, at, i);
        sy__memo_slot *slot;
        const sy__memo_pre *pre = memo && preds && i < memo->pre_n &&
                                          memo->pre[i].item == (const void *)c
                                      ? &memo->pre[i]
                                      : NULL;
        int rc = build_entry(ctx, r, ea, kind, c, p, &es[i], &es[i].shortcut,
                             pre, &slot, err);
        if (rc)
            return rc;
        if (memo && i < SY_MEMO_HINTS)
            memo->hint[!preds][i] = slot;
    }
    if (memo)
        memo->hint_n[!preds] = n <= SY_MEMO_HINTS ? n : 0;
    if (preds) {
        r->predicates = es;
        r->predicate_count = (uint16_t)n;
    } else {
        if (!(m = sy__route_more_own(r)))
            return sy__error_set(err, SY_ENOMEM, path, "out of memory");
        m->filters = es;
        m->filter_count = (uint16_t)n;
    }
    return 0;
}

void sy__def_shortcut_error(sy_error *err, const char *entry_path) {
    if (!err)
        return;
    size_t n = strlen(entry_path);
    if (strncmp(err->path, entry_path, n) != 0 ||
        strncmp(err->path + n, ".args.", 6) != 0)
        return;
    char field[sizeof err->path], msg[2 * sizeof err->message + 8];
    snprintf(field, sizeof field, "%s", err->path + n + 6);
    err->path[n] = '\0';
    if (strstr(err->message, field))
        return;
    snprintf(msg, sizeof msg, "%s: %s", field, err->message);
    msg[sizeof err->message - 1] = '\0';
    memcpy(err->message, msg, sizeof err->message);
}
