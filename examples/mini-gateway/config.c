/*
 * config.c - the router and its config as a host keeps them: the router
 * options (route host data, path safety, passive health), one source per
 * route file (named by its base name without ".json", ".yml", ".yaml" or
 * ".properties"; such a .yml/.yaml/.properties file is Spring Boot's,
 * converted by the code of `switchyard convert`,
 * examples/cli/scg_convert.c), the instances file,
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

/*
 * A watched file. `dirty`: changed on disk and neither applied nor refused
 * with its own error since; a file stays dirty until one of the two, so a
 * change is never dropped because another file of the same tick failed.
 */
typedef struct watched_file {
    const char *path;
    char *dir, *base;
    char source[128]; /* "" for the instances file */
    bool dirty;
    bool has_error; /* the last attempt refused it: `error` says why */
    sy_error error; /* (shown in /status until the file applies) */
    /* the tick in progress */
    char *text; /* the route document read (converted from YAML) */
    size_t len;
    /* a Spring file's default-filters (JSON array): read in the tick, and
     * those of the version applied (for the actuator's routes) */
    char *defaults_read, *defaults;
    sy_instances *doc;   /* the instances file, parsed */
    bool refused;        /* refused in this tick */
    size_t first, count; /* the changes staged for it in this attempt */
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

void gw_report_part_json(gw_buf *b, const sy_report *p) {
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
        ids_json(b, "reordered", sy_diff_reordered_count(d), sy_diff_reordered,
                 d);
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
    G.last_failed_change = rc && rep ? sy_report_failed_change(rep) : -1;
    gw_buf *b = &G.last_report;
    b->len = 0;
    b->failed = false; /* a new report */
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
            gw_report_part_json(b, sy_report_part(rep, i));
        }
        gw_buf_add(b, "]", 1);
    }
    gw_buf_adds(b, "}\n");
    gw_changes_note(b); /* for the console (admin_ops.c) */
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
 * services the file named last time (file_services, replaced only once a
 * commit took them: remember_file_services) and no longer does lose their
 * instances. */
static int stage_doc(sy_change_set *cs, const sy_instances *d, bool file,
                     sy_error *err) {
    size_t n = sy_instances_service_count(d);
    /* run or refuse: the gateway has no TLS client, so a secure instance
     * (https/wss) would be answered 502 at every request sent to it */
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < sy_instances_count(d, i); k++) {
            if (!sy_instances_list(d, i)[k].secure)
                continue;
            char path[200];
            if (file)
                snprintf(path, sizeof path, "services.%.120s[%zu].secure",
                         sy_instances_service(d, i), k);
            else
                snprintf(path, sizeof path, "[%zu].secure", k);
            return inst_fail(err, SY_ENOTRUN, path,
                             "secure: host 'gateway' does not run TLS to "
                             "an instance");
        }
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
    return 0;
}

/* The instances file's services after a commit took its document: the
 * ones to empty when a later version no longer names them. Out of memory:
 * false, and the old list stays (a later version then empties at most
 * services that are empty already). */
static bool remember_file_services(const sy_instances *d) {
    size_t n = sy_instances_service_count(d);
    char **names = calloc(n + 1, sizeof *names);
    for (size_t i = 0; names && i < n; i++)
        if (!(names[i] = strdup(sy_instances_service(d, i)))) {
            while (i)
                free(names[--i]);
            free(names);
            names = NULL;
        }
    if (!names)
        return false;
    for (size_t i = 0; i < file_service_count; i++)
        free(file_services[i]);
    free(file_services);
    file_services = names;
    file_service_count = n;
    return true;
}

int gw_instances_stage(sy_change_set *cs, const char *json, size_t len,
                       const char *service, sy_error *err) {
    sy_instances *d = NULL;
    int rc;
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
    static const char *const ext[] = {".json", ".yml", ".yaml", ".properties"};
    for (int i = 0; i < 4; i++) {
        size_t el = strlen(ext[i]);
        if (n > el && strcasecmp(b + n - el, ext[i]) == 0) {
            n -= el;
            break;
        }
    }
    snprintf(out, cap, "%.*s", (int)n, b);
}

/* Is the route file Spring Boot's (.yml, .yaml, .properties)? */
static bool is_spring(const char *path) {
    size_t n = strlen(path);
    return (n > 4 && strcasecmp(path + n - 4, ".yml") == 0) ||
           (n > 5 && strcasecmp(path + n - 5, ".yaml") == 0) ||
           (n > 11 && strcasecmp(path + n - 11, ".properties") == 0);
}

/* A .yml/.yaml/.properties route file's text (Spring Boot configuration)
 * as a route document,
 * through the converter `switchyard convert` uses: placeholders resolved
 * from the environment and the file, every unresolved one an error.
 * Returns the document (free it) or NULL with the first error (FILE:LINE:
 * message) in err; warnings are logged. */
static char *yaml_routes(const char *path, const char *text, size_t len,
                         size_t *out_len, char **defaults, sy_error *err) {
#ifdef GW_HAVE_YAML
    scg_options o = {0};
    scg_converter *c = scg_converter_new(&o);
    char *doc = NULL;
    size_t routes = 0;
    if (c && !scg_converter_add(c, path, text, len, scg_format_of(path)))
        doc = scg_converter_document(c, out_len, &routes);
    const char *df = doc ? scg_converter_default_filters(c) : NULL;
    *defaults = df ? strdup(df) : NULL;
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
    *defaults = NULL;
    inst_fail(err, SY_EINVAL, "",
              "built without libyaml: no .yml or .properties routes");
    (void)path;
    return NULL;
#endif
}

static void on_log(void *data, sy_log_level level, const char *message) {
    (void)data;
    if (level >= SY_LOG_WARN)
        gw_log("switchyard: %s", message);
}

/* --default-filters' text, read once at start (the routers copy it). */
static char *default_filters;

/* The gateway's router options; with `host`, its host data and log. */
static void router_options(sy_router_options *o, bool host) {
    *o = (sy_router_options)SY_ROUTER_OPTIONS_INIT;
    if (host) {
        o->route_attach = gw_route_attach;
        o->route_detach = gw_route_detach;
        o->on_log = on_log;
    }
    o->strip_host_port = true;
    o->path_normalization = SY_PATH_NORMALIZE;
    o->escaped_slashes = G.cfg.escaped_slashes;
    o->merge_slashes = G.cfg.merge_slashes;
    o->max_retired = 0;
    /* run or refuse: what the gateway runs (the three policies,
     * RewriteLocationResponseHeader, forward:, the cors and timeout
     * metadata; lib/policy/host_runs.c keeps the list) */
    o->host_runs = sy_host_profile("gateway");
    o->registry = gw_registry(); /* SecureHeaders, FallbackHeaders */
    o->default_filters = default_filters;
}

bool gw_source_exists(const char *name) {
    size_t n = sy_router_source_count(G.router);
    for (size_t i = 0; i < n; i++) {
        sy_source_status st;
        if (sy_router_source_status(G.router, i, &st, NULL) == 0 &&
            strcmp(st.name, name) == 0)
            return true;
    }
    return false;
}

int gw_scratch_router(sy_router **out, sy_error *err) {
    sy_router_options o;
    router_options(&o, false);
    return sy_router_new(&o, out, err);
}

int gw_config_init(void) {
    if (G.cfg.default_filters && !default_filters) {
        size_t len;
        default_filters = gw_read_file(G.cfg.default_filters, &len);
        if (!default_filters) {
            gw_log("%s: cannot read the default filters",
                   G.cfg.default_filters);
            return -1;
        }
    }
    sy_router_options o;
    router_options(&o, true);
    sy_error err;
    if (sy_router_new(&o, &G.router, &err)) {
        if (G.cfg.default_filters)
            gw_log("router: %s: %s: %s", G.cfg.default_filters, err.path,
                   err.message);
        else
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

/* ------------------------------------------------------------------ */
/* Applying files                                                       */
/* ------------------------------------------------------------------ */

static void refuse(watched_file *f, const sy_error *err) {
    f->refused = true;
    f->error = *err;
}

/* Read (and convert, or parse) a file for this tick; false when it cannot
 * be used, its error in f->error. */
static bool read_file(watched_file *f) {
    sy_error err;
    size_t len;
    char *text = gw_read_file(f->path, &len);
    if (!text) {
        inst_fail(&err, SY_ENOTFOUND, "", "cannot read the file");
        refuse(f, &err);
        return false;
    }
    if (!f->source[0]) { /* the instances file: parsed now, staged later */
        int rc = sy_instances_parse(text, len, NULL, &f->doc, &err);
        free(text);
        if (rc)
            refuse(f, &err);
        return rc == 0;
    }
    if (is_spring(f->path)) {
        free(f->defaults_read);
        char *doc =
            yaml_routes(f->path, text, len, &len, &f->defaults_read, &err);
        free(text);
        if (!doc) {
            refuse(f, &err);
            return false;
        }
        text = doc;
    }
    f->text = text;
    f->len = len;
    return true;
}

/* Stage every file of the tick not refused yet; a file whose staging
 * fails is refused, and the caller tries again without it. */
static int stage_tick(sy_change_set *cs, watched_file **tick, size_t n) {
    for (size_t i = 0; i < n; i++) {
        watched_file *f = tick[i];
        if (f->refused)
            continue;
        sy_error err;
        f->first = sy_change_set_count(cs);
        int rc =
            !f->source[0] ? stage_doc(cs, f->doc, true, &err)
            : gw_document_check(f->text, f->len, false, &err)
                ? err.code
                : sy_change_set_apply(cs, f->source, f->text, f->len, &err);
        if (!rc) /* admin changes kept over the file (--admin-overrides-files)
                  */
            rc = gw_overrides_stage(cs, f->source[0] ? f->source : NULL, &err);
        f->count = sy_change_set_count(cs) - f->first;
        if (rc) {
            refuse(f, &err);
            return rc;
        }
    }
    return 0;
}

/* The file whose changes include change `k` of the attempt, or NULL. */
static watched_file *file_of_change(watched_file **tick, size_t n, long k) {
    for (size_t i = 0; k >= 0 && i < n; i++) {
        watched_file *f = tick[i];
        if (!f->refused && (size_t)k >= f->first &&
            (size_t)k < f->first + f->count)
            return f;
    }
    return NULL;
}

/* The error of a failed commit without its "change N (...): " prefix: it
 * is shown on the file it belongs to. */
static void strip_change_prefix(sy_error *err) {
    const char *m = err->message;
    if (strncmp(m, "change ", 7) != 0)
        return;
    const char *p = strstr(m, ": ");
    if (p)
        memmove(err->message, p + 2, strlen(p + 2) + 1);
}

/* Commit the tick's files as one change set; a file the router refuses is
 * left out with its own error and the others are committed again. Returns
 * whether what was left was committed (false: nothing was, for a reason
 * no single file owns, e.g. out of memory; every file then carries it). */
static bool commit_tick(watched_file **tick, size_t n, char *what, size_t cap) {
    for (;;) {
        what[0] = 0;
        size_t left = 0;
        for (size_t i = 0; i < n; i++)
            if (!tick[i]->refused) {
                size_t wl = strlen(what);
                snprintf(what + wl, cap - wl, "%s%s", wl ? " " : "",
                         tick[i]->path);
                left++;
            }
        if (!left)
            return true;
        sy_change_set *cs;
        sy_error err;
        if (sy_change_set_new(G.router, &cs, &err))
            break;
        if (stage_tick(cs, tick, n)) {
            sy_change_set_free(cs);
            continue; /* that file is refused: again without it */
        }
        int rc = sy_change_set_count(cs) ? gw_commit(cs, what, &err) : 0;
        sy_change_set_free(cs);
        if (!rc)
            return true;
        watched_file *f = file_of_change(tick, n, G.last_failed_change);
        if (!f) { /* nothing to leave out: every file carries the error */
            for (size_t i = 0; i < n; i++)
                if (!tick[i]->refused)
                    refuse(tick[i], &err);
            return false;
        }
        strip_change_prefix(&err);
        refuse(f, &err);
    }
    sy_error oom;
    inst_fail(&oom, SY_ENOMEM, "", "out of memory");
    for (size_t i = 0; i < n; i++)
        if (!tick[i]->refused)
            refuse(tick[i], &oom);
    return false;
}

/* The outcome of a tick on each of its files: applied ones are clean,
 * refused ones show their own error; both stop being dirty (an
 * out-of-memory keeps the files dirty: they are tried again). Logged. */
static void settle_tick(watched_file **tick, size_t n, bool committed,
                        bool startup, int *refused) {
    *refused = 0;
    for (size_t i = 0; i < n; i++) {
        watched_file *f = tick[i];
        if (f->refused) {
            f->has_error = true;
            f->dirty = f->error.code == SY_ENOMEM;
            ++*refused;
            gw_log("%s %s: %s%s%s", f->path,
                   startup ? "cannot be loaded"
                           : "rejected, the old config keeps serving",
                   f->error.path, f->error.path[0] ? ": " : "",
                   f->error.message);
        } else {
            if (f->doc && committed && !remember_file_services(f->doc))
                gw_log("%s: out of memory keeping its service names", f->path);
            if (committed && f->source[0])
                gw_origin_set(f->source, "file"); /* for /status */
            if (committed) { /* the applied version's default-filters */
                free(f->defaults);
                f->defaults = f->defaults_read;
                f->defaults_read = NULL;
            }
            f->has_error = false;
            f->dirty = false;
        }
        free(f->text);
        sy_instances_free(f->doc);
        f->text = NULL;
        f->doc = NULL;
        f->refused = false;
    }
}

/* Read, stage and commit the dirty files (every file when `all`); returns
 * the number of files refused. */
static int apply_files(bool all) {
    watched_file *tick[GW_MAX_FILES + 1];
    size_t n = 0;
    for (size_t i = 0; i < file_count; i++)
        if (all || files[i].dirty)
            tick[n++] = &files[i];
    for (size_t i = 0; i < n; i++)
        read_file(tick[i]);
    char what[2048];
    bool committed = commit_tick(tick, n, what, sizeof what);
    int refused;
    settle_tick(tick, n, committed, all, &refused);
    if (committed && what[0] && !G.cfg.quiet)
        gw_log("applied %s", what);
    return refused;
}

int gw_config_load_all(void) {
    return apply_files(true) ? -1 : 0;
}

static void on_debounce(uv_timer_t *t) {
    (void)t;
    apply_files(false);
}

void gw_config_files_json(gw_buf *b) {
    gw_buf_adds(b, "[");
    for (size_t i = 0; i < file_count; i++) {
        const watched_file *f = &files[i];
        gw_buf_adds(b, i ? ",{\"path\":" : "{\"path\":");
        gw_buf_json_str(b, f->path, strlen(f->path));
        gw_buf_adds(b, ",\"source\":");
        if (f->source[0])
            gw_buf_json_str(b, f->source, strlen(f->source));
        else
            gw_buf_adds(b, "null");
        gw_buf_adds(b, ",\"error\":");
        if (f->has_error)
            gw_error_json(b, &f->error);
        else
            gw_buf_adds(b, "null");
        gw_buf_adds(b, "}");
    }
    gw_buf_adds(b, "]");
}

const sy_error *gw_config_source_error(const char *source) {
    for (size_t i = 0; i < file_count; i++)
        if (files[i].has_error && strcmp(files[i].source, source) == 0)
            return &files[i].error;
    return NULL;
}

int gw_config_refresh(sy_error *err) {
    for (size_t i = 0; i < file_count; i++)
        files[i].dirty = true;
    apply_files(false);
    for (size_t i = 0; i < file_count; i++)
        if (files[i].has_error) {
            *err = files[i].error;
            return err->code ? err->code : SY_EINVAL;
        }
    return 0;
}

void gw_config_reload(void) {
    if (!file_count) {
        gw_log("SIGHUP: nothing to reload: no --routes or --instances file "
               "(admin and etcd changes apply as they come)");
        return;
    }
    sy_error err;
    gw_config_refresh(&err); /* a refused file's error logged on its line */
    size_t refused = 0;
    for (size_t i = 0; i < file_count; i++)
        refused += files[i].has_error;
    if (refused)
        gw_log("SIGHUP: %zu file%s read again, %zu refused: what %s had "
               "keeps serving (its error above and in /status)",
               file_count, file_count == 1 ? "" : "s", refused,
               refused == 1 ? "it" : "they");
    else
        gw_log("SIGHUP: %zu file%s read again, none refused", file_count,
               file_count == 1 ? "" : "s");
}

const char *gw_config_default_filters(const char **file, const char **other) {
    const char *df = NULL;
    *file = *other = NULL;
    for (size_t i = 0; i < file_count; i++) {
        if (!files[i].defaults)
            continue;
        if (!df) {
            df = files[i].defaults;
            *file = files[i].path;
        } else if (strcmp(df, files[i].defaults) != 0) {
            *other = files[i].path;
        }
    }
    return df;
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
        free(files[i].defaults);
        free(files[i].defaults_read);
    }
    file_count = 0;
    for (size_t i = 0; i < file_service_count; i++)
        free(file_services[i]);
    free(file_services);
    file_services = NULL;
    file_service_count = 0;
    gw_buf_free(&G.last_report);
}
