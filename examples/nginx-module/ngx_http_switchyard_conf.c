/*
 * ngx_http_switchyard_conf.c - the module's directives and configuration:
 * the ngx_module_t and its command table, the main and location
 * configurations, the switchyard_routes / _instances / _zone / _state /
 * _admin handlers, the check of every file at load, and the module's life
 * cycle (init_module in the master, worker start and stop). The request
 * phase, variables and header filter are ngx_http_switchyard_module.c's.
 */
#include "ngx_http_switchyard.h"

static void *sw_create_main_conf(ngx_conf_t *cf);
static char *sw_init_main_conf(ngx_conf_t *cf, void *conf);
static void *sw_create_loc_conf(ngx_conf_t *cf);
static char *sw_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child);
static char *sw_routes(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *sw_instances(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *sw_zone(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *sw_admin(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *sw_enable(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *sw_state(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static ngx_int_t sw_init_module(ngx_cycle_t *cycle);
static ngx_int_t sw_init_process(ngx_cycle_t *cycle);
static void sw_exit_process(ngx_cycle_t *cycle);

static ngx_conf_enum_t sw_escaped_slashes[] = {
    {ngx_string("keep"), SY_SLASHES_KEEP},
    {ngx_string("reject"), SY_SLASHES_REJECT},
    {ngx_string("decode"), SY_SLASHES_DECODE},
    {ngx_null_string, 0}};

/* switchyard_eject_time's bounds, checked at the directive (its line) */
static char *sw_eject_time_check(ngx_conf_t *cf, void *post, void *data) {
    ngx_msec_t *ms = data;

    if (*ms == 0 || *ms > 3600000)
        return "must be 1ms to 1h";
    return NGX_CONF_OK;
}

static ngx_conf_post_t sw_eject_time_bounds = {sw_eject_time_check};

static ngx_command_t sw_commands[] = {
    {ngx_string("switchyard_routes"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1,
     sw_routes, NGX_HTTP_MAIN_CONF_OFFSET, 0, NULL},
    {ngx_string("switchyard_instances"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1,
     sw_instances, NGX_HTTP_MAIN_CONF_OFFSET, 0, NULL},
    {ngx_string("switchyard_zone"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1,
     sw_zone, NGX_HTTP_MAIN_CONF_OFFSET, 0, NULL},
    {ngx_string("switchyard_state"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1,
     sw_state, NGX_HTTP_MAIN_CONF_OFFSET, 0, NULL},
    {ngx_string("switchyard_strip_host_port"),
     NGX_HTTP_MAIN_CONF | NGX_CONF_FLAG, ngx_conf_set_flag_slot,
     NGX_HTTP_MAIN_CONF_OFFSET, offsetof(sw_main_conf_t, strip_host_port),
     NULL},
    {ngx_string("switchyard_merge_slashes"), NGX_HTTP_MAIN_CONF | NGX_CONF_FLAG,
     ngx_conf_set_flag_slot, NGX_HTTP_MAIN_CONF_OFFSET,
     offsetof(sw_main_conf_t, merge_slashes), NULL},
    {ngx_string("switchyard_escaped_slashes"),
     NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1, ngx_conf_set_enum_slot,
     NGX_HTTP_MAIN_CONF_OFFSET, offsetof(sw_main_conf_t, escaped_slashes),
     sw_escaped_slashes},
    {ngx_string("switchyard_eject_time"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1,
     ngx_conf_set_msec_slot, NGX_HTTP_MAIN_CONF_OFFSET,
     offsetof(sw_main_conf_t, eject_ms), &sw_eject_time_bounds},
    {ngx_string("switchyard"),
     NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_FLAG, sw_enable,
     NGX_HTTP_LOC_CONF_OFFSET, offsetof(sw_loc_conf_t, enable), NULL},
    {ngx_string("switchyard_balancer"), NGX_HTTP_UPS_CONF | NGX_CONF_NOARGS,
     sw_balancer, 0, 0, NULL},
    {ngx_string("switchyard_admin"), NGX_HTTP_LOC_CONF | NGX_CONF_NOARGS,
     sw_admin, NGX_HTTP_LOC_CONF_OFFSET, 0, NULL},
    ngx_null_command};

static ngx_http_module_t sw_module_ctx = {
    sw_preconfiguration,  /* preconfiguration */
    sw_postconfiguration, /* postconfiguration */
    sw_create_main_conf,  /* create main configuration */
    sw_init_main_conf,    /* init main configuration */
    NULL,                 /* create server configuration */
    NULL,                 /* merge server configuration */
    sw_create_loc_conf,   /* create location configuration */
    sw_merge_loc_conf     /* merge location configuration */
};

ngx_module_t ngx_http_switchyard_module = {
    NGX_MODULE_V1,   &sw_module_ctx, sw_commands,
    NGX_HTTP_MODULE, NULL,           sw_init_module,
    sw_init_process, NULL,           NULL,
    sw_exit_process, NULL,           NGX_MODULE_V1_PADDING};

/* ---- configuration ---- */

static void *sw_create_main_conf(ngx_conf_t *cf) {
    sw_main_conf_t *mcf = ngx_pcalloc(cf->pool, sizeof *mcf);
    if (mcf == NULL)
        return NULL;
    if (ngx_array_init(&mcf->route_files, cf->pool, 4, sizeof(sw_file_t)) !=
            NGX_OK ||
        ngx_array_init(&mcf->instance_files, cf->pool, 2, sizeof(sw_file_t)) !=
            NGX_OK)
        return NULL;
    mcf->zone_size = NGX_CONF_UNSET_SIZE;
    mcf->strip_host_port = NGX_CONF_UNSET;
    mcf->merge_slashes = NGX_CONF_UNSET;
    mcf->escaped_slashes = NGX_CONF_UNSET_UINT;
    mcf->eject_ms = NGX_CONF_UNSET_MSEC;
    return mcf;
}

static char *sw_init_main_conf(ngx_conf_t *cf, void *conf) {
    sw_main_conf_t *mcf = conf;
    ngx_conf_init_size_value(mcf->zone_size, SW_DEFAULT_ZONE_SIZE);
    ngx_conf_init_value(mcf->strip_host_port, 0);
    ngx_conf_init_value(mcf->merge_slashes, 0);
    ngx_conf_init_uint_value(mcf->escaped_slashes, SY_SLASHES_KEEP);
    ngx_conf_init_msec_value(mcf->eject_ms, SW_EJECT_BASE_MS);
    sw_file_t *f = mcf->instance_files.elts;
    mcf->instances_hash = SW_HASH_INIT;
    for (ngx_uint_t i = 0; i < mcf->instance_files.nelts; i++)
        mcf->instances_hash = sw_hash(
            (u_char *)"\n", 1,
            sw_hash(f[i].text.data, f[i].text.len, mcf->instances_hash));
    return NGX_CONF_OK;
}

static void *sw_create_loc_conf(ngx_conf_t *cf) {
    sw_loc_conf_t *lcf = ngx_pcalloc(cf->pool, sizeof *lcf);
    if (lcf == NULL)
        return NULL;
    lcf->enable = NGX_CONF_UNSET;
    lcf->admin = 0;
    lcf->expires = NGX_CONF_UNSET;
    return lcf;
}

static char *sw_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child) {
    sw_loc_conf_t *prev = parent, *conf = child;
    ngx_http_core_loc_conf_t *clcf =
        ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
    if (conf->enable == NGX_CONF_UNSET) {
        conf->on_file = prev->on_file;
        conf->on_line = prev->on_line;
    }
    ngx_conf_merge_value(conf->enable, prev->enable, 0);
    /* a location of its own (nginx merges each with cf->ctx on it), not
     * an if or limit_except block (noname) nor the server's level */
    if (conf->enable == 1 && !conf->admin && clcf && clcf->loc_conf &&
        clcf->loc_conf[ngx_http_switchyard_module.ctx_index] == conf &&
        !clcf->noname && clcf->name.len) {
        sw_main_conf_t *mcf =
            ngx_http_conf_get_module_main_conf(cf, ngx_http_switchyard_module);
        sw_loc_conf_t **a;
        if (mcf->routed.elts == NULL &&
            ngx_array_init(&mcf->routed, cf->pool, 4, sizeof *a) != NGX_OK)
            return NGX_CONF_ERROR;
        if ((a = ngx_array_push(&mcf->routed)) == NULL)
            return NGX_CONF_ERROR;
        *a = conf;
        conf->routed_clcf = clcf;
    }
    /* as the headers module: a level with add_header lines inherits none */
    if (conf->added == NULL)
        conf->added = prev->added;
    ngx_conf_merge_value(conf->expires, prev->expires, 0);
    if (conf->proxy_in_if) /* conf is an `if` block of prev */
        prev->proxy_in_if = 1;
    if (conf->enable) {
        sw_main_conf_t *mcf =
            ngx_http_conf_get_module_main_conf(cf, ngx_http_switchyard_module);
        mcf->used = 1;
    }
    return NGX_CONF_OK;
}

/* Read a whole file into the configuration pool, NUL-terminated. */
static char *sw_read_conf_file(ngx_conf_t *cf, ngx_str_t *name, sw_file_t *f) {
    ngx_file_t file;
    ngx_file_info_t fi;
    ssize_t n;

    f->path = *name;
    if (ngx_conf_full_name(cf->cycle, &f->path, 1) != NGX_OK)
        return NGX_CONF_ERROR;
    ngx_memzero(&file, sizeof file);
    file.name = f->path;
    file.log = cf->log;
    file.fd = ngx_open_file(f->path.data, NGX_FILE_RDONLY, NGX_FILE_OPEN, 0);
    if (file.fd == NGX_INVALID_FILE) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, ngx_errno,
                           ngx_open_file_n " \"%V\" failed", &f->path);
        return NGX_CONF_ERROR;
    }
    if (ngx_fd_info(file.fd, &fi) == NGX_FILE_ERROR) {
        ngx_close_file(file.fd);
        return NGX_CONF_ERROR;
    }
    size_t size = (size_t)ngx_file_size(&fi);
    f->text.data = ngx_pnalloc(cf->pool, size + 1);
    if (f->text.data == NULL) {
        ngx_close_file(file.fd);
        return NGX_CONF_ERROR;
    }
    n = ngx_read_file(&file, f->text.data, size, 0);
    ngx_close_file(file.fd);
    if (n != (ssize_t)size) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, ngx_errno, "cannot read \"%V\"",
                           &f->path);
        return NGX_CONF_ERROR;
    }
    f->text.data[size] = '\0';
    f->text.len = size;
    f->hash = sw_hash(f->text.data, size, SW_HASH_INIT);
    return NGX_CONF_OK;
}

static void sw_conf_error(ngx_conf_t *cf, ngx_str_t *path,
                          const sy_error *err) {
    if (err->line)
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "switchyard: %V: line %uD, column %uD: %s", path,
                           err->line, err->column, err->message);
    else
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "switchyard: %V: %s: %s", path,
                           err->path[0] ? err->path : "$", err->message);
}

static char *sw_routes(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) {
    sw_main_conf_t *mcf = conf;
    ngx_str_t *value = cf->args->elts;
    sw_file_t *f, *all;
    sy_parse_options po = SY_PARSE_OPTIONS_INIT;

    /* what the module does not run is refused, located (SY_ENOTRUN) */
    po.host_runs = sy_host_profile("nginx");
    sy_document *doc;
    sy_error err;
    u_char *base, *end;

    f = ngx_array_push(&mcf->route_files);
    if (f == NULL || sw_read_conf_file(cf, &value[1], f) != NGX_CONF_OK)
        return NGX_CONF_ERROR;
    /* the source is the file's base name without ".json" */
    end = f->path.data + f->path.len;
    base = end;
    while (base > f->path.data && base[-1] != '/')
        base--;
    if (end - base > 5 && ngx_strncmp(end - 5, ".json", 5) == 0)
        end -= 5;
    f->name.len = (size_t)(end - base);
    if (f->name.len == 0 || f->name.len > 127) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "switchyard: \"%V\": a source name (the file's "
                           "base name) must be 1 to 127 bytes",
                           &f->path);
        return NGX_CONF_ERROR;
    }
    f->name.data = ngx_pnalloc(cf->pool, f->name.len + 1);
    if (f->name.data == NULL)
        return NGX_CONF_ERROR;
    ngx_memcpy(f->name.data, base, f->name.len);
    f->name.data[f->name.len] = '\0';
    all = mcf->route_files.elts;
    for (ngx_uint_t i = 0; i + 1 < mcf->route_files.nelts; i++)
        if (all[i].name.len == f->name.len &&
            ngx_strncmp(all[i].name.data, f->name.data, f->name.len) == 0) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "switchyard: source \"%V\" is defined twice",
                               &f->name);
            return NGX_CONF_ERROR;
        }
    /* a bad file fails the configuration (nginx -t, reload) */
    if (sy_document_parse((char *)f->text.data, f->text.len, &po, &doc, &err)) {
        sw_conf_error(cf, &f->path, &err);
        return NGX_CONF_ERROR;
    }
    sy_document_free(doc);
    mcf->used = 1;
    return NGX_CONF_OK;
}

static char *sw_instances(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) {
    sw_main_conf_t *mcf = conf;
    ngx_str_t *value = cf->args->elts;
    sy_error err;
    sw_file_t *f = ngx_array_push(&mcf->instance_files);

    if (f == NULL || sw_read_conf_file(cf, &value[1], f) != NGX_CONF_OK)
        return NGX_CONF_ERROR;
    if (sw_instances_file_check((char *)f->text.data, f->text.len, &err)) {
        sw_conf_error(cf, &f->path, &err);
        return NGX_CONF_ERROR;
    }
    mcf->used = 1;
    return NGX_CONF_OK;
}

static char *sw_zone(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) {
    sw_main_conf_t *mcf = conf;
    ngx_str_t *value = cf->args->elts;
    ssize_t size;

    if (mcf->zone_size != NGX_CONF_UNSET_SIZE)
        return "is duplicate";
    size = ngx_parse_size(&value[1]);
    if (size == NGX_ERROR) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "switchyard_zone: invalid size \"%V\"", &value[1]);
        return NGX_CONF_ERROR;
    }
    if ((size_t)size < sw_zone_min_size()) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "switchyard_zone: zone \"switchyard\" of %V is "
                           "too small: it needs at least %uzk",
                           &value[1], (sw_zone_min_size() + 1023) / 1024);
        return NGX_CONF_ERROR;
    }
    mcf->zone_size = (size_t)size;
    mcf->used = 1;
    return NGX_CONF_OK;
}

static char *sw_state(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) {
    sw_main_conf_t *mcf = conf;
    ngx_str_t *value = cf->args->elts;

    if (mcf->state_path.len)
        return "is duplicate";
    mcf->state_path = value[1];
    if (ngx_conf_full_name(cf->cycle, &mcf->state_path, 1) != NGX_OK)
        return NGX_CONF_ERROR;
    mcf->used = 1;
    return NGX_CONF_OK;
}

static char *sw_admin(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) {
    sw_loc_conf_t *lcf = conf;
    ngx_http_core_loc_conf_t *clcf;
    sw_main_conf_t *mcf =
        ngx_http_conf_get_module_main_conf(cf, ngx_http_switchyard_module);

    if (lcf->admin)
        return "is duplicate";
    clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
    /* the API's paths are what follows the location's prefix: a regex,
     * exact or named location has none (every request was a 404) */
    if (clcf->named || clcf->exact_match
#if (NGX_PCRE)
        || clcf->regex
#endif
    )
        return "needs a prefix location (location /PREFIX/ { ... }): the "
               "admin API's paths are read after the location's prefix";
    /* the admin API answers the location's requests: a route would be
     * ignored there */
    if (lcf->enable == 1)
        return "cannot share a location with \"switchyard on\": the admin "
               "API answers its requests, which would never be routed";
    lcf->admin = 1;
    mcf->used = 1;
    clcf->handler = sw_admin_handler;
    /* a content handler set after it (fastcgi_pass...) would replace the
     * admin API: checked once the http block is read */
    lcf->admin_clcf = clcf;
    lcf->admin_file.len = cf->conf_file->file.name.len;
    lcf->admin_file.data = ngx_pstrdup(cf->pool, &cf->conf_file->file.name);
    lcf->admin_line = cf->conf_file->line;
    if (lcf->admin_file.data == NULL)
        return NGX_CONF_ERROR;
    if (mcf->admins.elts == NULL &&
        ngx_array_init(&mcf->admins, cf->pool, 1, sizeof lcf) != NGX_OK)
        return NGX_CONF_ERROR;
    sw_loc_conf_t **a = ngx_array_push(&mcf->admins);
    if (a == NULL)
        return NGX_CONF_ERROR;
    *a = lcf;
    return NGX_CONF_OK;
}

/* switchyard on|off; "on" is refused in an admin location (whose
 * requests the admin API answers), at this level. */
static char *sw_enable(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) {
    sw_loc_conf_t *lcf = conf;
    char *rv = ngx_conf_set_flag_slot(cf, cmd, conf);

    if (rv == NGX_CONF_OK && lcf->admin && lcf->enable == 1)
        return "on is ignored in a location with switchyard_admin: the admin "
               "API answers its requests, which would never be routed";
    if (rv == NGX_CONF_OK) {
        lcf->on_file.len = cf->conf_file->file.name.len;
        lcf->on_file.data = ngx_pstrdup(cf->pool, &cf->conf_file->file.name);
        lcf->on_line = cf->conf_file->line;
        if (lcf->on_file.data == NULL)
            return NGX_CONF_ERROR;
    }
    return rv;
}

/* ---- module life cycle ---- */

/* Every routes and instances file together, as a worker will load them
 * (ids across files, every reference): `nginx -t` and a reload fail here
 * rather than leave the master with workers that cannot start. */
ngx_int_t sw_check_files(ngx_conf_t *cf, sw_main_conf_t *mcf) {
    sy_router *router = NULL;
    ngx_str_t *path = NULL;
    sy_error err;
    int rc = sw_router_create(mcf, &router, &err);

    if (rc == 0)
        rc = sw_load_files(router, mcf, &err, &path);
    if (router)
        sy_router_free(router);
    if (rc == 0)
        return NGX_OK;
    if (path)
        sw_conf_error(cf, path, &err);
    else
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "switchyard: %s%s%s", err.path,
                           err.path[0] ? ": " : "", err.message);
    return NGX_ERROR;
}

static sw_main_conf_t *sw_cycle_conf(ngx_cycle_t *cycle) {
    sw_main_conf_t *mcf;

    if (cycle->conf_ctx[ngx_http_module.index] == NULL)
        return NULL;
    mcf =
        ngx_http_cycle_get_module_main_conf(cycle, ngx_http_switchyard_module);
    return mcf && mcf->used ? mcf : NULL;
}

/* In the master (or the single process), once per configuration. */
static ngx_int_t sw_init_module(ngx_cycle_t *cycle) {
    sw_main_conf_t *mcf = sw_cycle_conf(cycle);
    if (mcf == NULL)
        return NGX_OK;
    sw_zone_reconcile(cycle, mcf);
    if (ngx_test_config)
        sw_test_stored(cycle, mcf);
    return sw_notify_init(cycle, mcf);
}

static ngx_int_t sw_init_process(ngx_cycle_t *cycle) {
    sw_main_conf_t *mcf;

    if (ngx_process != NGX_PROCESS_WORKER && ngx_process != NGX_PROCESS_SINGLE)
        return NGX_OK;
    if (cycle->conf_ctx[ngx_http_module.index] == NULL)
        return NGX_OK;
    mcf =
        ngx_http_cycle_get_module_main_conf(cycle, ngx_http_switchyard_module);
    if (mcf == NULL || !mcf->used)
        return NGX_OK;
    if (ngx_worker == 0)
        sw_state_check_access(mcf, cycle->log);
    return sw_worker_start(cycle, mcf);
}

static void sw_exit_process(ngx_cycle_t *cycle) {
    sw_worker_stop();
}
