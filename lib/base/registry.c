/*
 * registry.c - host-registered predicate and filter factories: the public
 * sy_registry_* calls and the lookups used when mapping document entries.
 * Names and shortcut field lists are copied into the registry.
 */
#include "base/factory.h"

typedef struct sy__reg_pred {
    char *name;
    sy_predicate_factory f;
} sy__reg_pred;

typedef struct sy__reg_filter {
    char *name;
    sy_filter_factory f;
} sy__reg_filter;

typedef struct sy__reg_resolver {
    char *name;
    sy_key_resolver kr;
} sy__reg_resolver;

struct sy_registry {
    sy__alloc alloc;
    sy__reg_resolver *resolvers;
    size_t resolver_count, resolver_cap;
    sy__reg_pred *preds;
    size_t pred_count, pred_cap;
    sy__reg_filter *filters;
    size_t filter_count, filter_cap;
};

int sy_registry_new(const sy_allocator *alloc, sy_registry **out,
                    sy_error *err) {
    if (!out)
        return sy__error_set(err, SY_EINVAL, "", "out must not be NULL");
    *out = NULL;
    sy__alloc a;
    sy__alloc_init(&a, alloc);
    sy_registry *reg = sy__calloc(&a, 1, sizeof *reg);
    if (!reg)
        return sy__error_set(err, SY_ENOMEM, "", "out of memory");
    reg->alloc = a;
    *out = reg;
    return SY_OK;
}

static void free_fields(const sy__alloc *a, const char *const *fields) {
    if (!fields)
        return;
    for (size_t i = 0; fields[i]; i++)
        sy__free(a, (void *)(uintptr_t)fields[i]);
    sy__free(a, (void *)(uintptr_t)fields);
}

void sy_registry_free(sy_registry *reg) {
    if (!reg)
        return;
    sy__alloc a = reg->alloc;
    for (size_t i = 0; i < reg->pred_count; i++) {
        sy__free(&a, reg->preds[i].name);
        free_fields(&a, reg->preds[i].f.shortcut_fields);
    }
    for (size_t i = 0; i < reg->filter_count; i++) {
        sy__free(&a, reg->filters[i].name);
        free_fields(&a, reg->filters[i].f.shortcut_fields);
    }
    for (size_t i = 0; i < reg->resolver_count; i++)
        sy__free(&a, reg->resolvers[i].name);
    sy__free(&a, reg->resolvers);
    sy__free(&a, reg->preds);
    sy__free(&a, reg->filters);
    sy__free(&a, reg);
}

/* Deep copy of a NULL-terminated field list (NULL stays NULL). */
static int copy_fields(const sy__alloc *a, const char *const *in,
                       const char *const **out) {
    *out = NULL;
    if (!in)
        return SY_OK;
    size_t n = 0;
    while (in[n])
        n++;
    char **f = sy__calloc(a, n + 1, sizeof *f);
    if (!f)
        return SY_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        f[i] = sy__strdup(a, in[i]);
        if (!f[i]) {
            free_fields(a, (const char *const *)f);
            return SY_ENOMEM;
        }
    }
    *out = (const char *const *)f;
    return SY_OK;
}

static int check_name(const sy_registry *reg, sy__factory_kind kind,
                      const char *name, sy_error *err) {
    if (!reg || !name)
        return sy__error_set(err, SY_EINVAL, "", "registry and name required");
    size_t len = strlen(name);
    if (len == 0)
        return sy__error_set(err, SY_EINVAL, "", "factory name is empty");
    if (strpbrk(name, "=, \t\r\n"))
        return sy__error_set(err, SY_EINVAL, "",
                             "factory name '%s' contains '=', ',' or a space",
                             name);
    const char *what = kind == SY_FACTORY_PREDICATE ? "predicate" : "filter";
    if (sy__factory_find(kind, name, len))
        return sy__error_set(err, SY_EEXIST, "",
                             "'%s' is a built-in %s factory", name, what);
    bool dup = kind == SY_FACTORY_PREDICATE
                   ? sy__registry_find_predicate(reg, name, len) != NULL
                   : sy__registry_find_filter(reg, name, len) != NULL;
    if (dup)
        return sy__error_set(err, SY_EEXIST, "",
                             "%s factory '%s' is already registered", what,
                             name);
    return SY_OK;
}

/* A shortcut type sy_shortcut_type names (an unknown one would be read as
 * a gathered list). */
static int check_shortcut(sy_shortcut_type t, const char *name, sy_error *err) {
    if (t == SY_SHORTCUT_DEFAULT || t == SY_SHORTCUT_GATHER_LIST ||
        t == SY_SHORTCUT_GATHER_LIST_TAIL_FLAG)
        return SY_OK;
    return sy__error_set(err, SY_EINVAL, "",
                         "factory '%s': unknown shortcut_type %d", name,
                         (int)t);
}

static bool grow(const sy__alloc *a, void **arr, size_t *cap, size_t count,
                 size_t elem) {
    if (count < *cap)
        return true;
    void *p = sy__grow(a, *arr, cap, count + 1, 8, elem);
    if (!p)
        return false;
    *arr = p;
    return true;
}

/* Room for one more entry in an array of `elem`-sized entries, and the
 * copies of its name and shortcut fields it will own. */
static int new_entry(sy_registry *reg, void **arr, size_t *cap, size_t count,
                     size_t elem, const char *name, const char *const *fields,
                     char **name_out, const char *const **fields_out,
                     sy_error *err) {
    if (!grow(&reg->alloc, arr, cap, count, elem))
        return sy__error_set(err, SY_ENOMEM, "", "out of memory");
    *name_out = sy__strdup(&reg->alloc, name);
    if (!*name_out || copy_fields(&reg->alloc, fields, fields_out)) {
        sy__free(&reg->alloc, *name_out);
        return sy__error_set(err, SY_ENOMEM, "", "out of memory");
    }
    return SY_OK;
}

int sy_registry_add_predicate(sy_registry *reg, const char *name,
                              const sy_predicate_factory *f, sy_error *err) {
    int rc = check_name(reg, SY_FACTORY_PREDICATE, name, err);
    if (rc)
        return rc;
    if (!f || !f->compile || !f->test)
        return sy__error_set(err, SY_EINVAL, "",
                             "predicate factory '%s' needs compile and test",
                             name);
    if ((rc = check_shortcut(f->shortcut_type, name, err)))
        return rc;
    char *copy;
    const char *const *fields;
    rc = new_entry(reg, (void **)&reg->preds, &reg->pred_cap, reg->pred_count,
                   sizeof *reg->preds, name, f->shortcut_fields, &copy, &fields,
                   err);
    if (rc)
        return rc;
    sy__reg_pred *e = &reg->preds[reg->pred_count++];
    e->f = *f;
    e->name = copy;
    e->f.shortcut_fields = fields;
    return SY_OK;
}

int sy_registry_add_filter(sy_registry *reg, const char *name,
                           const sy_filter_factory *f, sy_error *err) {
    int rc = check_name(reg, SY_FACTORY_FILTER, name, err);
    if (rc)
        return rc;
    if (!f)
        return sy__error_set(err, SY_EINVAL, "", "filter factory required");
    if ((rc = check_shortcut(f->shortcut_type, name, err)))
        return rc;
    char *copy;
    const char *const *fields;
    rc = new_entry(reg, (void **)&reg->filters, &reg->filter_cap,
                   reg->filter_count, sizeof *reg->filters, name,
                   f->shortcut_fields, &copy, &fields, err);
    if (rc)
        return rc;
    sy__reg_filter *e = &reg->filters[reg->filter_count++];
    e->f = *f;
    e->name = copy;
    e->f.shortcut_fields = fields;
    return SY_OK;
}

const sy_predicate_factory *sy__registry_find_predicate(const sy_registry *reg,
                                                        const char *name,
                                                        size_t len) {
    if (!reg)
        return NULL;
    for (size_t i = 0; i < reg->pred_count; i++)
        if (strlen(reg->preds[i].name) == len &&
            memcmp(reg->preds[i].name, name, len) == 0)
            return &reg->preds[i].f;
    return NULL;
}

const sy_filter_factory *
sy__registry_find_filter(const sy_registry *reg, const char *name, size_t len) {
    if (!reg)
        return NULL;
    for (size_t i = 0; i < reg->filter_count; i++)
        if (strlen(reg->filters[i].name) == len &&
            memcmp(reg->filters[i].name, name, len) == 0)
            return &reg->filters[i].f;
    return NULL;
}

int sy_registry_add_key_resolver(sy_registry *reg, const char *name,
                                 const sy_key_resolver *kr, sy_error *err) {
    if (!reg || !name || !*name || !kr || !kr->resolve)
        return sy__error_set(err, SY_EINVAL, "",
                             "registry, name and resolve are required");
    size_t len = strlen(name);
    for (size_t i = 0; i < len; i++)
        if (!(name[i] == '_' || name[i] == '$' ||
              (name[i] >= '0' && name[i] <= '9' && i) ||
              (name[i] >= 'a' && name[i] <= 'z') ||
              (name[i] >= 'A' && name[i] <= 'Z')))
            return sy__error_set(err, SY_EINVAL, "",
                                 "key resolver name '%s' is not a bean name",
                                 name);
    for (size_t i = 0; i < SY_KR_BUILTIN_COUNT; i++)
        if (strcmp(sy__key_resolver_names[i], name) == 0)
            return sy__error_set(err, SY_EEXIST, "",
                                 "'%s' is a built-in key resolver", name);
    if (sy__registry_find_key_resolver(reg, name, len))
        return sy__error_set(err, SY_EEXIST, "",
                             "key resolver '%s' is already registered", name);
    if (!grow(&reg->alloc, (void **)&reg->resolvers, &reg->resolver_cap,
              reg->resolver_count, sizeof *reg->resolvers))
        return sy__error_set(err, SY_ENOMEM, "", "out of memory");
    char *copy = sy__strdup(&reg->alloc, name);
    if (!copy)
        return sy__error_set(err, SY_ENOMEM, "", "out of memory");
    sy__reg_resolver *e = &reg->resolvers[reg->resolver_count++];
    e->name = copy;
    e->kr = *kr;
    return SY_OK;
}

const sy_key_resolver *sy__registry_find_key_resolver(const sy_registry *reg,
                                                      const char *name,
                                                      size_t len) {
    if (!reg)
        return NULL;
    for (size_t i = 0; i < reg->resolver_count; i++)
        if (strlen(reg->resolvers[i].name) == len &&
            memcmp(reg->resolvers[i].name, name, len) == 0)
            return &reg->resolvers[i].kr;
    return NULL;
}
