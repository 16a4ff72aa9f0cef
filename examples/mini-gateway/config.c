/*
 * config.c - the router and its config as a host keeps them: the router
 * options (route host data, path safety, passive health), one source per
 * route file (named by its base name without ".json", ".yml" or ".yaml";
 * a .yml/.yaml file is Spring Boot YAML, converted by the code of
 * `switchyard convert`, examples/cli/scg_convert.c), the instances file,
 * the first load, and inotify watches (uv_fs_event on the files'
 * directories) that re-read changed files and apply them together as one
 * change set. Also the JSON form of apply reports and errors shared with
 * the admin API. Main thread only.
 */
#define _DEFAULT_SOURCE
#include "gw.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#ifdef GW_HAVE_YAML
#include "scg_convert.h"
#endif

typedef struct watched_file {
    const char *path;
    char *dir, *base;
    char source[128]; /* "" for the instances file */
    bool dirty;
} watched_file;

static watched_file files[GW_MAX_FILES + 1];
static size_t file_count;
static uv_fs_event_t dir_watch[GW_MAX_FILES + 1];
static char *dir_names[GW_MAX_FILES + 1];
static size_t dir_count;
static uv_timer_t debounce;
static bool debounce_init;
/* services named by the instances file last time (to empty the ones that
 * disappear from it) */
static char **file_services;
static size_t file_service_count;

/* ------------------------------------------------------------------ */
/* JSON helpers                                                         */
/* ------------------------------------------------------------------ */

void gw_error_json(gw_buf *b, const sy_error *err) {
    gw_buf_adds(b, "{\"code\":");
    const char *name = sy_strerror(err->code);
    gw_buf_json_str(b, name, strlen(name));
    gw_buf_adds(b, ",\"path\":");
    gw_buf_json_str(b, err->path, strlen(err->path));
    gw_buf_adds(b, ",\"message\":");
    gw_buf_json_str(b, err->message, strlen(err->message));
    gw_buf_printf(b, ",\"line\":%u,\"column\":%u,\"offset\":%zu}", err->line,
                  err->column, err->offset);
}

static void ids_json(gw_buf *b, const char *key, size_t n,
                     const char *(*at)(const sy_diff *, size_t),
                     const sy_diff *d) {
    gw_buf_printf(b, ",\"%s\":[", key);
    for (size_t i = 0; i < n; i++) {
        const char *id = at(d, i);
        if (i)
            gw_buf_add(b, ",", 1);
        gw_buf_json_str(b, id, strlen(id));
    }
    gw_buf_add(b, "]", 1);
}

static const char *updated_at(const sy_diff *d, size_t i) {
    unsigned changed;
    return sy_diff_updated(d, i, &changed);
}

static void part_json(gw_buf *b, const sy_report *p) {
    const char *src = sy_report_source(p);
    const char *ver = sy_report_version(p);
    const char *svc = sy_report_service(p);
    gw_buf_adds(b, "{\"source\":");
    if (src)
        gw_buf_json_str(b, src, strlen(src));
    else
        gw_buf_adds(b, "null");
    gw_buf_adds(b, ",\"version\":");
    if (ver)
        gw_buf_json_str(b, ver, strlen(ver));
    else
        gw_buf_adds(b, "null");
    if (svc) {
        gw_buf_adds(b, ",\"service\":");
        gw_buf_json_str(b, svc, strlen(svc));
    }
    gw_buf_printf(b, ",\"skipped\":%s,\"version_not_bumped\":%s",
                  sy_report_skipped(p) ? "true" : "false",
                  sy_report_version_not_bumped(p) ? "true" : "false");
    const sy_diff *d = sy_report_diff(p);
    if (d) {
        ids_json(b, "added", sy_diff_added_count(d), sy_diff_added, d);
        ids_json(b, "removed", sy_diff_removed_count(d), sy_diff_removed, d);
        ids_json(b, "updated", sy_diff_updated_count(d), updated_at, d);
    }
    static const struct {
        const char *key;
        size_t (*count)(const sy_report *);
        const char *(*at)(const sy_report *, size_t);
    } kinds[3] = {{"instances_added", sy_report_instances_added_count,
                   sy_report_instance_added},
                  {"instances_removed", sy_report_instances_removed_count,
                   sy_report_instance_removed},
                  {"instances_changed", sy_report_instances_changed_count,
                   sy_report_instance_changed}};
    if (svc) {
        for (int k = 0; k < 3; k++) {
            size_t n = kinds[k].count(p);
            gw_buf_printf(b, ",\"%s\":[", kinds[k].key);
            for (size_t i = 0; i < n; i++) {
                const char *id = kinds[k].at(p, i);
                if (i)
                    gw_buf_add(b, ",", 1);
                gw_buf_json_str(b, id, strlen(id));
            }
            gw_buf_add(b, "]", 1);
        }
    }
    size_t issues = sy_report_issue_count(p);
    if (issues) {
        gw_buf_adds(b, ",\"issues\":[");
        for (size_t i = 0; i < issues; i++) {
            if (i)
                gw_buf_add(b, ",", 1);
            gw_error_json(b, sy_report_issue(p, i));
        }
        gw_buf_add(b, "]", 1);
    }
    gw_buf_add(b, "}", 1);
}

int gw_commit(sy_change_set *cs, const char *what, sy_error *err) {
    sy_report *rep = NULL;
    int rc = sy_router_commit(G.router, cs, &rep, err);
    gw_buf *b = &G.last_report;
    b->len = 0;
    gw_buf_adds(b, "{\"what\":");
    gw_buf_json_str(b, what, strlen(what));
    gw_buf_printf(b, ",\"ok\":%s", rc ? "false" : "true");
    if (rc) {
        gw_buf_printf(b, ",\"failed_change\":%ld,\"error\":",
                      rep ? sy_report_failed_change(rep) : -1L);
        gw_error_json(b, err);
    } else if (rep) {
        gw_buf_printf(b, ",\"generation\":%llu,\"parts\":[",
                      (unsigned long long)sy_report_generation(rep));
        size_t n = sy_report_part_count(rep);
        for (size_t i = 0; i < n; i++) {
            if (i)
                gw_buf_add(b, ",", 1);
            part_json(b, sy_report_part(rep, i));
        }
        gw_buf_add(b, "]", 1);
    }
    gw_buf_adds(b, "}\n");
    sy_report_free(rep);
    return rc;
}

/* ------------------------------------------------------------------ */
/* Instances documents                                                  */
/* ------------------------------------------------------------------ */

static int inst_fail(sy_error *err, int code, const char *path,
                     const char *msg) {
    memset(err, 0, sizeof *err);
    err->code = code;
    snprintf(err->path, sizeof err->path, "%s", path);
    snprintf(err->message, sizeof err->message, "%s", msg);
    return code;
}

/* Stage every service of a parsed instances document; with `file`, the
 * services the file named last time and no longer does lose their
 * instances. */
static int stage_doc(sy_change_set *cs, const sy_instances *d, bool file,
                     sy_error *err) {
    size_t n = sy_instances_service_count(d);
    for (size_t i = 0; i < n; i++) {
        int rc = sy_change_set_set_instances(cs, sy_instances_service(d, i),
                                             sy_instances_list(d, i),
                                             sy_instances_count(d, i), err);
        if (rc)
            return rc;
    }
    if (!file)
        return 0;
    for (size_t i = 0; i < file_service_count; i++)
        if (sy_instances_find(d, file_services[i]) == SIZE_MAX) {
            int rc =
                sy_change_set_set_instances(cs, file_services[i], NULL, 0, err);
            if (rc)
                return rc;
        }
    /* the names staged now (a failed commit leaves the old instances with
     * these names gone from the list: the next file read stages them
     * again anyway, since it re-reads the whole file) */
    for (size_t i = 0; i < file_service_count; i++)
        free(file_services[i]);
    free(file_services);
    file_services = calloc(n + 1, sizeof *file_services);
    file_service_count = 0;
    for (size_t i = 0; file_services && i < n; i++)
        file_services[file_service_count++] =
            strdup(sy_instances_service(d, i));
    return 0;
}

int gw_instances_stage(sy_change_set *cs, const char *json, size_t len,
                       const char *service, sy_error *err) {
    sy_instances *d = NULL;
    int rc;
    if (!service) {
        rc = sy_instances_parse(json, len, NULL, &d, err);
        if (!rc)
            rc = stage_doc(cs, d, true, err);
        sy_instances_free(d);
        return rc;
    }
    /* one service's bare array: parsed as {"services": {NAME: ARRAY}} by
     * the library, error positions given back relative to the array */
    gw_buf doc = {0};
    gw_buf_adds(&doc, "{\"services\":{");
    gw_buf_json_str(&doc, service, strlen(service));
    gw_buf_adds(&doc, ":");
    size_t pre = doc.len;
    gw_buf_add(&doc, json, len);
    gw_buf_adds(&doc, "\n}}");
    rc = sy_instances_parse(doc.p, doc.len, NULL, &d, err);
    gw_buf_free(&doc);
    if (rc) {
        if (err->offset >= pre)
            err->offset -= pre;
        if (err->line == 1 && err->column > pre)
            err->column -= (uint32_t)pre;
        /* "services.NAME[1].port" -> "[1].port" */
        size_t sl = strlen("services.") + strlen(service);
        if (strncmp(err->path, "services.", 9) == 0 &&
            strlen(err->path) >= sl) {
            memmove(err->path, err->path + sl, strlen(err->path + sl) + 1);
        }
        if (rc == SY_EMISSING && strcmp(err->path, "services") == 0)
            return inst_fail(err, SY_ETYPE, "",
                             "expected an array of instances");
        return rc;
    }
    rc = stage_doc(cs, d, false, err);
    sy_instances_free(d);
    return rc;
}

/* ------------------------------------------------------------------ */
/* Router and files                                                     */
/* ------------------------------------------------------------------ */

static void source_name(const char *path, char *out, size_t cap) {
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t n = strlen(b);
    static const char *const ext[] = {".json", ".yml", ".yaml"};
    for (int i = 0; i < 3; i++) {
        size_t el = strlen(ext[i]);
        if (n > el && strcasecmp(b + n - el, ext[i]) == 0) {
            n -= el;
            break;
        }
    }
    snprintf(out, cap, "%.*s", (int)n, b);
}

static bool is_yaml(const char *path) {
    size_t n = strlen(path);
    return (n > 4 && strcasecmp(path + n - 4, ".yml") == 0) ||
           (n > 5 && strcasecmp(path + n - 5, ".yaml") == 0);
}

/* A .yml/.yaml route file's text (Spring Boot YAML) as a route document,
 * through the converter `switchyard convert` uses: placeholders resolved
 * from the environment and the file, every unresolved one an error.
 * Returns the document (free it) or NULL with the first error (FILE:LINE:
 * message) in err; warnings are logged. */
static char *yaml_routes(const char *path, const char *text, size_t len,
                         size_t *out_len, sy_error *err) {
#ifdef GW_HAVE_YAML
    scg_options o = {0};
    scg_converter *c = scg_converter_new(&o);
    char *doc = NULL;
    size_t routes = 0;
    if (c && !scg_converter_add(c, path, text, len, SCG_FORMAT_YAML))
        doc = scg_converter_document(c, out_len, &routes);
    const scg_issue *first = NULL;
    for (size_t i = 0; c && i < scg_converter_issue_count(c); i++) {
        const scg_issue *is = scg_converter_issue(c, i);
        if (is->error && !first)
            first = is;
        else if (!is->error)
            gw_log("%s", is->text);
    }
    if (!doc) {
        inst_fail(err, c ? SY_ESYNTAX : SY_ENOMEM, "", "");
        gw_copy_str(err->message, sizeof err->message,
                    first ? first->text : "out of memory");
    }
    scg_converter_free(c);
    return doc;
#else
    (void)text;
    (void)len;
    (void)out_len;
    inst_fail(err, SY_EINVAL, "", "built without libyaml: no .yml routes");
    (void)path;
    return NULL;
#endif
}

static void on_log(void *data, sy_log_level level, const char *message) {
    (void)data;
    if (level >= SY_LOG_WARN)
        gw_log("switchyard: %s", message);
}

int gw_config_init(void) {
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.route_attach = gw_route_attach;
    o.route_detach = gw_route_detach;
    o.on_log = on_log;
    o.strip_host_port = true;
    o.path_normalization = SY_PATH_NORMALIZE;
    o.escaped_slashes = G.cfg.escaped_slashes;
    o.merge_slashes = G.cfg.merge_slashes;
    o.max_retired = 0;
    sy_error err;
    if (sy_router_new(&o, &G.router, &err)) {
        gw_log("router: %s", err.message);
        return -1;
    }
    for (size_t i = 0; i < G.cfg.route_count; i++) {
        watched_file *f = &files[file_count++];
        f->path = G.cfg.routes[i];
        source_name(f->path, f->source, sizeof f->source);
        if (sy_router_add_source(G.router, f->source, &err)) {
            gw_log("%s: source %s: %s", f->path, f->source, err.message);
            return -1;
        }
    }
    if (G.cfg.instances) {
        watched_file *f = &files[file_count++];
        f->path = G.cfg.instances;
        f->source[0] = 0;
    }
    for (size_t i = 0; i < file_count; i++) {
        watched_file *f = &files[i];
        const char *slash = strrchr(f->path, '/');
        f->dir = slash ? strndup(f->path,
                                 (size_t)(slash - f->path) + (slash == f->path))
                       : strdup(".");
        f->base = strdup(slash ? slash + 1 : f->path);
    }
    return 0;
}

/* Stage the files marked dirty (all of them when `all`). */
static int stage_files(sy_change_set *cs, bool all, char *what, size_t cap,
                       sy_error *err) {
    what[0] = 0;
    for (size_t i = 0; i < file_count; i++) {
        watched_file *f = &files[i];
        if (!all && !f->dirty)
            continue;
        f->dirty = false;
        size_t len;
        char *text = gw_read_file(f->path, &len);
        if (!text) {
            if (all) {
                inst_fail(err, SY_ENOTFOUND, "", "cannot read the file");
                snprintf(what, cap, "%s", f->path);
                return SY_ENOTFOUND;
            }
            continue; /* being replaced: the next event brings it */
        }
        if (f->source[0] && is_yaml(f->path)) {
            char *doc = yaml_routes(f->path, text, len, &len, err);
            free(text);
            if (!doc) {
                snprintf(what, cap, "%s", f->path);
                return err->code;
            }
            text = doc;
        }
        int rc = f->source[0]
                     ? sy_change_set_apply(cs, f->source, text, len, err)
                     : gw_instances_stage(cs, text, len, NULL, err);
        free(text);
        if (!rc) /* admin changes kept over the file (--admin-overrides-files) */
            rc = gw_overrides_stage(cs, f->source[0] ? f->source : NULL, err);
        size_t wl = strlen(what);
        snprintf(what + wl, cap - wl, "%s%s", wl ? " " : "", f->path);
        if (rc) {
            snprintf(what, cap, "%s", f->path);
            return rc;
        }
    }
    return 0;
}

int gw_config_load_all(void) {
    sy_change_set *cs;
    sy_error err;
    if (sy_change_set_new(G.router, &cs, &err))
        return -1;
    char what[1024];
    int rc = stage_files(cs, true, what, sizeof what, &err);
    if (!rc)
        rc = gw_commit(cs, what[0] ? what : "startup", &err);
    sy_change_set_free(cs);
    if (rc) {
        gw_log("%s: %s%s%s", what[0] ? what : "config", err.path,
               err.path[0] ? ": " : "", err.message);
        return -1;
    }
    return 0;
}

static void on_debounce(uv_timer_t *t) {
    (void)t;
    sy_change_set *cs;
    sy_error err;
    if (sy_change_set_new(G.router, &cs, &err))
        return;
    char what[1024];
    int rc = stage_files(cs, false, what, sizeof what, &err);
    if (!rc && sy_change_set_count(cs))
        rc = gw_commit(cs, what, &err);
    sy_change_set_free(cs);
    if (rc)
        gw_log("%s rejected, the old config keeps serving: %s%s%s", what,
               err.path, err.path[0] ? ": " : "", err.message);
    else if (what[0] && !G.cfg.quiet)
        gw_log("applied %s", what);
}

int gw_config_refresh(sy_error *err) {
    sy_change_set *cs;
    if (sy_change_set_new(G.router, &cs, err))
        return err->code;
    char what[1024];
    int rc = stage_files(cs, true, what, sizeof what, err);
    if (!rc && sy_change_set_count(cs))
        rc = gw_commit(cs, what, err);
    sy_change_set_free(cs);
    if (rc)
        gw_log("refresh: %s rejected, the old config keeps serving: %s%s%s",
               what, err->path, err->path[0] ? ": " : "", err->message);
    return rc;
}

const char *gw_config_source_file(const char *source) {
    for (size_t i = 0; i < file_count; i++)
        if (files[i].source[0] && strcmp(files[i].source, source) == 0)
            return files[i].path;
    return NULL;
}

const char *gw_config_service_file(const char *service) {
    for (size_t i = 0; i < file_service_count; i++)
        if (strcmp(file_services[i], service) == 0)
            return G.cfg.instances;
    return NULL;
}

static void on_fs_event(uv_fs_event_t *h, const char *filename, int events,
                        int status) {
    (void)events;
    if (status < 0 || !filename)
        return;
    const char *dir = h->data;
    bool hit = false;
    for (size_t i = 0; i < file_count; i++)
        if (strcmp(files[i].dir, dir) == 0 &&
            strcmp(files[i].base, filename) == 0) {
            files[i].dirty = true;
            hit = true;
        }
    if (hit) /* editors write in several steps: settle first */
        uv_timer_start(&debounce, on_debounce, 20, 0);
}

int gw_config_watch(uv_loop_t *loop) {
    uv_timer_init(loop, &debounce);
    debounce_init = true;
    for (size_t i = 0; i < file_count; i++) {
        bool seen = false;
        for (size_t j = 0; j < dir_count; j++)
            seen |= strcmp(dir_names[j], files[i].dir) == 0;
        if (seen)
            continue;
        uv_fs_event_t *h = &dir_watch[dir_count];
        dir_names[dir_count++] = files[i].dir;
        uv_fs_event_init(loop, h);
        h->data = files[i].dir;
        int rc = uv_fs_event_start(h, on_fs_event, files[i].dir, 0);
        if (rc)
            gw_log("cannot watch %s: %s", files[i].dir, uv_strerror(rc));
    }
    return 0;
}

void gw_config_close(void) {
    for (size_t j = 0; j < dir_count; j++)
        uv_close((uv_handle_t *)&dir_watch[j], NULL);
    dir_count = 0;
    if (debounce_init)
        uv_close((uv_handle_t *)&debounce, NULL);
    debounce_init = false;
}

void gw_config_free(void) {
    for (size_t i = 0; i < file_count; i++) {
        free(files[i].dir);
        free(files[i].base);
    }
    file_count = 0;
    for (size_t i = 0; i < file_service_count; i++)
        free(file_services[i]);
    free(file_services);
    file_services = NULL;
    file_service_count = 0;
    gw_buf_free(&G.last_report);
}
