/*
 * instances.c - instances documents: the JSON form of service instance
 * lists read by `switchyard match --instances` and by hosts that keep their
 * instances in files (docs/route-definitions.md, "Instances documents").
 * Parses {"services": {name: [instance...]}} or the bare {name: [...]},
 * checks every field with its JSON path, and keeps the result as
 * sy_instance arrays ready for sy_router_set_instances. Everything lives
 * in one arena owned by the sy_instances object.
 */
#include "base/util.h"
#include "base/values.h"
#include "def/def.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <strings.h>

typedef struct inst_service {
    const char *name;
    sy_instance *list;
    size_t count;
} inst_service;

struct sy_instances {
    sy__alloc alloc;
    sy__arena arena;
    inst_service *services;
    size_t count;
};

/* What a parse needs: the result under construction and the path prefix
 * ("services." for the envelope, "" for the bare map). */
typedef struct inst_parser {
    struct sy_instances *doc;
    const char *prefix;
    sy_error *err;
} inst_parser;

static const char *const instance_keys[] = {
    "id", "host", "port", "weight", "state", "secure", "metadata",
};

/* "<prefix><service>[i].<field>" */
static void inst_path(char *out, size_t cap, const inst_parser *ps,
                      const char *svc, size_t i, const char *field) {
    sy__path_printf(out, cap, "%s%s[%zu]%s%s", ps->prefix, svc, i,
                    field ? "." : "", field ? field : "");
}

static int required_text(const inst_parser *ps, const cJSON *obj,
                         const char *svc, size_t i, const char *key,
                         const char **out) {
    char p[256];
    inst_path(p, sizeof p, ps, svc, i, key);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v || cJSON_IsNull(v))
        return sy__error_set(ps->err, SY_EMISSING, p, "%s is missing", key);
    if (!cJSON_IsString(v))
        return sy__error_set(ps->err, SY_ETYPE, p, "%s must be a string", key);
    if (!*v->valuestring)
        return sy__error_set(ps->err, SY_EMISSING, p, "%s is empty", key);
    if (!(*out = sy__arena_strdup(&ps->doc->arena, v->valuestring)))
        return sy__error_set(ps->err, SY_ENOMEM, "", "out of memory");
    return 0;
}

/* An integer JSON number within [min, max]; `what` names the field. */
static int integer(const inst_parser *ps, const cJSON *v, const char *path,
                   const char *what, double min, double max, double *out) {
    if (cJSON_IsString(v))
        return sy__error_set(ps->err, SY_ETYPE, path,
                             "%s must be a number, not a string (write %s "
                             "without quotes)",
                             what, what);
    if (!cJSON_IsNumber(v))
        return sy__error_set(ps->err, SY_ETYPE, path, "%s must be a number",
                             what);
    double d = v->valuedouble;
    if (!isfinite(d) || d != floor(d))
        return sy__error_set(ps->err, SY_ETYPE, path, "%s must be an integer",
                             what);
    if (d < min || d > max)
        return sy__error_set(ps->err, SY_ERANGE, path,
                             "%s must be from %.0f to %.0f", what, min, max);
    *out = d;
    return 0;
}

static int parse_state(const inst_parser *ps, const cJSON *v, const char *path,
                       sy_instance_state *out) {
    *out = SY_INSTANCE_UP;
    if (!v || cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsString(v))
        return sy__error_set(ps->err, SY_ETYPE, path,
                             "state must be a string: up, draining or down");
    static const struct {
        const char *name;
        sy_instance_state state;
    } states[] = {{"up", SY_INSTANCE_UP},
                  {"draining", SY_INSTANCE_DRAINING},
                  {"down", SY_INSTANCE_DOWN}};
    for (size_t k = 0; k < SY_ARRAY_LEN(states); k++)
        if (strcasecmp(v->valuestring, states[k].name) == 0) {
            *out = states[k].state;
            return 0;
        }
    return sy__error_set(ps->err, SY_EARG, path,
                         "state must be up, draining or down (any case), not "
                         "'%.60s'",
                         v->valuestring);
}

/* Metadata values are text: strings as they are, integers and booleans
 * as their JSON text ("version": 2 is "2"). A fractional number is
 * refused: 1.10 as a JSON number is 1.1, so a version must be quoted. */
static int parse_metadata(const inst_parser *ps, const cJSON *md,
                          const char *path, sy_instance *x) {
    if (!md || cJSON_IsNull(md))
        return 0;
    if (!cJSON_IsObject(md))
        return sy__error_set(ps->err, SY_ETYPE, path,
                             "metadata must be an object of strings");
    size_t n = (size_t)cJSON_GetArraySize(md);
    if (n == 0)
        return 0;
    sy_kv *kv = sy__arena_alloc(&ps->doc->arena, n * sizeof *kv);
    if (!kv)
        return sy__error_set(ps->err, SY_ENOMEM, "", "out of memory");
    size_t k = 0;
    for (const cJSON *c = md->child; c; c = c->next) {
        char p[256], num[32];
        sy__path_printf(p, sizeof p, "%s.%s", path, c->string);
        const char *text = NULL;
        if (cJSON_IsString(c)) {
            text = c->valuestring;
        } else if (cJSON_IsBool(c)) {
            text = cJSON_IsTrue(c) ? "true" : "false";
        } else if (cJSON_IsNumber(c)) {
            double d = c->valuedouble;
            if (!isfinite(d) || d != floor(d) || fabs(d) > 9007199254740992.0)
                return sy__error_set(
                    ps->err, SY_ETYPE, p,
                    "%s: a number with a fraction loses its spelling (1.10 "
                    "is read as 1.1): write it as a string, \"%.17g\"",
                    c->string, d);
            snprintf(num, sizeof num, "%.0f", d);
            text = num;
        } else {
            return sy__error_set(ps->err, SY_ETYPE, p,
                                 "metadata values must be strings (or "
                                 "integers, booleans)");
        }
        if (!*text && strcmp(c->string, "version") == 0)
            return sy__error_set(ps->err, SY_EARG, p,
                                 "version is empty (leave it out for an "
                                 "unversioned instance)");
        for (size_t j = 0; j < k; j++)
            if (strcmp(kv[j].key, c->string) == 0)
                return sy__error_set(ps->err, SY_EDUPLICATE, p,
                                     "metadata key '%.60s' is given twice",
                                     c->string);
        kv[k].key = sy__arena_strdup(&ps->doc->arena, c->string);
        kv[k].value = sy__arena_strdup(&ps->doc->arena, text);
        if (!kv[k].key || !kv[k].value)
            return sy__error_set(ps->err, SY_ENOMEM, "", "out of memory");
        k++;
    }
    x->metadata = kv;
    x->metadata_count = k;
    return 0;
}

static int parse_instance(const inst_parser *ps, const cJSON *o,
                          const char *svc, size_t i, sy_instance *x) {
    char p[256];
    inst_path(p, sizeof p, ps, svc, i, NULL);
    if (!cJSON_IsObject(o))
        return sy__error_set(ps->err, SY_ETYPE, p,
                             "an instance must be an object");
    for (const cJSON *c = o->child; c; c = c->next) {
        bool known = false;
        for (size_t k = 0; k < SY_ARRAY_LEN(instance_keys) && !known; k++)
            known = strcmp(c->string, instance_keys[k]) == 0;
        if (!known) {
            inst_path(p, sizeof p, ps, svc, i, c->string);
            return sy__error_set(ps->err, SY_EARG, p,
                                 "unknown key '%.60s' (an instance has id, "
                                 "host, port, weight, state, secure, "
                                 "metadata)",
                                 c->string);
        }
    }
    int rc;
    if ((rc = required_text(ps, o, svc, i, "id", &x->id)) ||
        (rc = required_text(ps, o, svc, i, "host", &x->host)))
        return rc;
    const char *why;
    if (!sy__value_host(x->host, &why)) {
        inst_path(p, sizeof p, ps, svc, i, "host");
        return sy__error_set(ps->err, SY_EARG, p, "host '%.80s': %s", x->host,
                             why);
    }
    inst_path(p, sizeof p, ps, svc, i, "port");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "port");
    double d;
    if (!v || cJSON_IsNull(v))
        return sy__error_set(ps->err, SY_EMISSING, p, "port is missing");
    if ((rc = integer(ps, v, p, "port", 1, 65535, &d)))
        return rc;
    x->port = (uint16_t)d;
    x->weight = 1;
    inst_path(p, sizeof p, ps, svc, i, "weight");
    v = cJSON_GetObjectItemCaseSensitive(o, "weight");
    if (v && !cJSON_IsNull(v)) {
        if ((rc = integer(ps, v, p, "weight", 1, 4294967295.0, &d)))
            return rc;
        x->weight = (uint32_t)d;
    }
    inst_path(p, sizeof p, ps, svc, i, "state");
    if ((rc = parse_state(ps, cJSON_GetObjectItemCaseSensitive(o, "state"), p,
                          &x->state)))
        return rc;
    inst_path(p, sizeof p, ps, svc, i, "secure");
    v = cJSON_GetObjectItemCaseSensitive(o, "secure");
    if (v && !cJSON_IsNull(v) && !cJSON_IsBool(v))
        return sy__error_set(ps->err, SY_ETYPE, p,
                             "secure must be true or false");
    x->secure = cJSON_IsTrue(v);
    inst_path(p, sizeof p, ps, svc, i, "metadata");
    return parse_metadata(ps, cJSON_GetObjectItemCaseSensitive(o, "metadata"),
                          p, x);
}

static int parse_service(const inst_parser *ps, const cJSON *arr,
                         inst_service *out) {
    char p[256];
    sy__path_printf(p, sizeof p, "%s%s", ps->prefix, arr->string);
    if (!*arr->string)
        return sy__error_set(ps->err, SY_EMISSING, p,
                             "a service name must not be empty");
    if (!cJSON_IsArray(arr))
        return sy__error_set(ps->err, SY_ETYPE, p,
                             "service '%.60s': its instances must be an array",
                             arr->string);
    if (!(out->name = sy__arena_strdup(&ps->doc->arena, arr->string)))
        return sy__error_set(ps->err, SY_ENOMEM, "", "out of memory");
    size_t n = (size_t)cJSON_GetArraySize(arr);
    out->count = n;
    out->list =
        sy__arena_alloc(&ps->doc->arena, (n ? n : 1) * sizeof *out->list);
    if (!out->list)
        return sy__error_set(ps->err, SY_ENOMEM, "", "out of memory");
    memset(out->list, 0, (n ? n : 1) * sizeof *out->list);
    size_t i = 0;
    for (const cJSON *c = arr->child; c; c = c->next, i++) {
        int rc = parse_instance(ps, c, out->name, i, &out->list[i]);
        if (rc)
            return rc;
        for (size_t j = 0; j < i; j++)
            if (strcmp(out->list[j].id, out->list[i].id) == 0) {
                inst_path(p, sizeof p, ps, out->name, i, "id");
                return sy__error_set(ps->err, SY_EDUPLICATE, p,
                                     "instance id '%.60s' is already used in "
                                     "service '%.60s' ([%zu])",
                                     out->list[i].id, out->name, j);
            }
    }
    return 0;
}

/* The map of services: the envelope's "services", or the root itself. */
static int find_services(const cJSON *root, inst_parser *ps,
                         const cJSON **out) {
    if (!cJSON_IsObject(root))
        return sy__error_set(ps->err, SY_ETYPE, "",
                             "an instances document is an object: "
                             "{\"services\": {\"name\": [instances]}} or "
                             "{\"name\": [instances]}");
    const cJSON *svcs = cJSON_GetObjectItemCaseSensitive(root, "services");
    if (!cJSON_IsObject(svcs)) { /* the bare map ("services" may be a name) */
        ps->prefix = "";
        *out = root;
        return 0;
    }
    for (const cJSON *c = root->child; c; c = c->next)
        if (strcmp(c->string, "services") != 0)
            return sy__error_set(ps->err, SY_EARG, c->string,
                                 "unknown key '%.60s' next to \"services\"",
                                 c->string);
    ps->prefix = "services.";
    *out = svcs;
    return 0;
}

int sy_instances_parse(const char *json, size_t len, const sy_allocator *alloc,
                       sy_instances **out, sy_error *err) {
    if (!out || (!json && len))
        return sy__error_set(err, SY_EINVAL, "", "json and out are required");
    *out = NULL;
    sy__alloc a;
    sy__alloc_init(&a, alloc);
    sy_limits lim;
    sy__limits_resolve(&lim, NULL);
    cJSON *root = NULL;
    bool own = false;
    sy__arena tree; /* the parsed text, freed before returning */
    sy__arena_init(&tree, &a, 4096);
    int rc = sy__def_parse_json(&tree, json ? json : "", len, &lim, &root, &own,
                                err);
    struct sy_instances *doc = rc ? NULL : sy__calloc(&a, 1, sizeof *doc);
    if (!doc) {
        if (own)
            cJSON_Delete(root);
        sy__arena_free(&tree);
        return rc ? rc : sy__error_set(err, SY_ENOMEM, "", "out of memory");
    }
    doc->alloc = a;
    sy__arena_init(&doc->arena, &doc->alloc, 4096);
    inst_parser ps = {doc, "", err};
    const cJSON *svcs = NULL;
    rc = find_services(root, &ps, &svcs);
    size_t n = rc ? 0 : (size_t)cJSON_GetArraySize(svcs);
    if (!rc && n &&
        !(doc->services =
              sy__arena_alloc(&doc->arena, n * sizeof *doc->services)))
        rc = sy__error_set(err, SY_ENOMEM, "", "out of memory");
    for (const cJSON *c = rc ? NULL : svcs->child; c && !rc; c = c->next) {
        for (size_t j = 0; j < doc->count && !rc; j++)
            if (strcmp(doc->services[j].name, c->string) == 0) {
                char p[256];
                sy__path_printf(p, sizeof p, "%s%s", ps.prefix, c->string);
                rc =
                    sy__error_set(err, SY_EDUPLICATE, p,
                                  "service '%.60s' is listed twice", c->string);
            }
        if (!rc && !(rc = parse_service(&ps, c, &doc->services[doc->count])))
            doc->count++;
    }
    if (own)
        cJSON_Delete(root);
    sy__arena_free(&tree);
    if (rc) {
        sy_instances_free(doc);
        return rc;
    }
    *out = doc;
    return 0;
}

void sy_instances_free(sy_instances *doc) {
    if (!doc)
        return;
    sy__arena_free(&doc->arena);
    sy__alloc a = doc->alloc;
    sy__free(&a, doc);
}

size_t sy_instances_service_count(const sy_instances *doc) {
    return doc ? doc->count : 0;
}

const char *sy_instances_service(const sy_instances *doc, size_t i) {
    return doc && i < doc->count ? doc->services[i].name : NULL;
}

size_t sy_instances_count(const sy_instances *doc, size_t i) {
    return doc && i < doc->count ? doc->services[i].count : 0;
}

const sy_instance *sy_instances_list(const sy_instances *doc, size_t i) {
    return doc && i < doc->count ? doc->services[i].list : NULL;
}

const sy_instance *sy_instances_at(const sy_instances *doc, size_t i,
                                   size_t k) {
    return doc && i < doc->count && k < doc->services[i].count
               ? &doc->services[i].list[k]
               : NULL;
}

size_t sy_instances_find(const sy_instances *doc, const char *service) {
    for (size_t i = 0; doc && service && i < doc->count; i++)
        if (strcmp(doc->services[i].name, service) == 0)
            return i;
    return SIZE_MAX;
}
