/*
 * ngx_http_switchyard_location.c - what a `switchyard on` location sends
 * upstream, checked when the configuration is loaded (`nginx -t`, start,
 * reload). The route's target, path and query, Host and request headers
 * reach the upstream only through the location's proxy directives
 * (proxy_pass, proxy_set_header, proxy_pass_request_headers), which nginx
 * evaluates after the module's last hook: a location that does not send
 * them would have the route's filters accepted and ignored. So every
 * proxy_pass is recorded as it is parsed (the proxy module's handler is
 * wrapped while an http block is parsed) and, once every location is
 * merged, one in a `switchyard on` location that would lose any of them
 * is refused with its file and line. A request header the location sets
 * itself (proxy_set_header) is not passed from the request: a route whose
 * filters change it is refused per request (sw_location_header_lost).
 * Likewise a response header the location adds (add_header, expires) is
 * added after the route's response filters ran: a route that sets,
 * removes or rewrites it is refused (sw_location_response_lost). The
 * add_header and expires lines are recorded into this module's conf of
 * their level as they are parsed, and inherited as nginx inherits them.
 * A routed request whose location does not proxy at all (a return, static
 * files) is refused too (sw_location_refuses), and a switchyard location
 * without any proxy_pass at load. A `rewrite` or `set $args` of a
 * switchyard location runs after the module routed the request (its URI
 * changes, the route's path and target do not): recorded as parsed,
 * refused at load. So are another module's *_pass to a switchyard_balancer
 * upstream, a proxy_pass in an admin location, an admin location whose
 * content handler is not the admin API's, and (for ws/wss routes, through
 * sw_host_runs) a switchyard location that does not pass WebSocket
 * upgrades.
 * docs/nginx.md, "What a switchyard location must send".
 */
#include "ngx_http_switchyard.h"

#include <ctype.h>

extern ngx_module_t ngx_http_proxy_module;
extern ngx_module_t ngx_http_headers_filter_module;
extern ngx_module_t ngx_http_rewrite_module;

/* One proxy_pass of the http block being parsed (the cycle's pool). */
typedef struct {
    ngx_str_t value; /* its argument */
    ngx_str_t file;
    ngx_uint_t line;
    void *proxy_conf;   /* the proxy module's conf of its location */
    sw_loc_conf_t *lcf; /* this module's conf of its location */
} sw_proxy_pass_t;

/* One fastcgi_pass, uwsgi_pass... of the http block (sw_other_passes). */
typedef struct {
    ngx_str_t directive, value, file;
    ngx_uint_t line;
} sw_pass_t;

/* One rewrite of a location or of its `if` that does not redirect, or a
 * `set $args` there. */
typedef struct {
    ngx_str_t directive, regex, replacement, flag;
    ngx_str_t file;
    ngx_uint_t line;
    sw_loc_conf_t *lcf; /* this module's conf of its level */
} sw_rewrite_t;

typedef char *(*sw_set_pt)(ngx_conf_t *, ngx_command_t *, void *);
static sw_set_pt sw_proxy_pass_set, sw_add_header_set, sw_expires_set,
    sw_rewrite_set, sw_set_set;
/* the proxy module's content handler, as proxy_pass sets it (one
 * function: the same in every configuration) */
static ngx_http_handler_pt sw_proxy_handler;
/* where proxy_set_header's list is in the proxy module's loc conf (set at
 * configuration, read by the workers) */
static ngx_uint_t sw_psh_offset = NGX_CONF_UNSET_UINT;

static ngx_flag_t sw_str_has(const ngx_str_t *s, const char *needle) {
    size_t n = ngx_strlen(needle);

    for (size_t i = 0; i + n <= s->len; i++)
        if (ngx_strncmp(s->data + i, needle, n) == 0)
            return 1;
    return 0;
}

static ngx_flag_t sw_str_is(const ngx_str_t *s, const char *a) {
    return s->len == ngx_strlen(a) && ngx_strncmp(s->data, a, s->len) == 0;
}

static ngx_command_t *sw_command(ngx_module_t *m, const char *name) {
    size_t n = ngx_strlen(name);

    for (ngx_command_t *c = m->commands; c->name.len; c++)
        if (c->name.len == n && ngx_strncmp(c->name.data, name, n) == 0)
            return c;
    return NULL;
}

static ngx_command_t *sw_proxy_command(const char *name) {
    return sw_command(&ngx_http_proxy_module, name);
}

static char *sw_proxy_pass_checked(ngx_conf_t *cf, ngx_command_t *cmd,
                                   void *conf) {
    ngx_str_t *value = cf->args->elts;
    sw_main_conf_t *mcf =
        ngx_http_conf_get_module_main_conf(cf, ngx_http_switchyard_module);
    sw_proxy_pass_t *p;

    if (cf->args->nelts == 2 && sw_str_has(&value[1], "switchyard_upstream") &&
        !sw_str_has(&value[1], "switchyard_uri"))
        return "uses $switchyard_upstream without $switchyard_uri: the "
               "client's path would be sent and the route's path filters "
               "(StripPrefix, RewritePath, SetPath...) ignored; write "
               "proxy_pass $switchyard_upstream$switchyard_uri";
    if (cf->args->nelts == 2) {
        if (mcf->proxy_passes.elts == NULL &&
            ngx_array_init(&mcf->proxy_passes, cf->pool, 4, sizeof *p) !=
                NGX_OK)
            return NGX_CONF_ERROR;
        p = ngx_array_push(&mcf->proxy_passes);
        if (p == NULL)
            return NGX_CONF_ERROR;
        p->value = value[1];
        p->file.len = cf->conf_file->file.name.len;
        p->file.data = ngx_pstrdup(cf->pool, &cf->conf_file->file.name);
        if (p->file.data == NULL)
            return NGX_CONF_ERROR;
        p->line = cf->conf_file->line;
        p->proxy_conf = conf;
        p->lcf =
            ngx_http_conf_get_module_loc_conf(cf, ngx_http_switchyard_module);
        if (cf->cmd_type == NGX_HTTP_LIF_CONF)
            p->lcf->proxy_in_if = 1;
    }
    char *rv = sw_proxy_pass_set(cf, cmd, conf);
    ngx_http_core_loc_conf_t *clcf =
        ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
    if (rv == NGX_CONF_OK && clcf->handler)
        sw_proxy_handler = clcf->handler;
    return rv;
}

/* add_header NAME VALUE [always]: NAME recorded at its level */
static char *sw_add_header_seen(ngx_conf_t *cf, ngx_command_t *cmd,
                                void *conf) {
    sw_loc_conf_t *lcf =
        ngx_http_conf_get_module_loc_conf(cf, ngx_http_switchyard_module);
    ngx_str_t *value = cf->args->elts, *name;
    char *rv = sw_add_header_set(cf, cmd, conf);

    if (rv != NGX_CONF_OK)
        return rv;
    if (lcf->added == NULL) {
        lcf->added = ngx_array_create(cf->pool, 2, sizeof(ngx_str_t));
        if (lcf->added == NULL)
            return NGX_CONF_ERROR;
    }
    name = ngx_array_push(lcf->added);
    if (name == NULL)
        return NGX_CONF_ERROR;
    *name = value[1];
    return NGX_CONF_OK;
}

/* expires ...: on at its level unless "off" */
static char *sw_expires_seen(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) {
    sw_loc_conf_t *lcf =
        ngx_http_conf_get_module_loc_conf(cf, ngx_http_switchyard_module);
    ngx_str_t *value = cf->args->elts;
    char *rv = sw_expires_set(cf, cmd, conf);

    if (rv == NGX_CONF_OK)
        lcf->expires = !(cf->args->nelts == 2 && sw_str_is(&value[1], "off"));
    return rv;
}

/* Record the directive being parsed (its two arguments, flag) for
 * sw_location_check. Nonzero: out of memory. */
static int sw_rewrite_note(ngx_conf_t *cf, ngx_command_t *cmd,
                           const ngx_str_t *flag) {
    sw_main_conf_t *mcf =
        ngx_http_conf_get_module_main_conf(cf, ngx_http_switchyard_module);
    ngx_str_t *value = cf->args->elts;
    sw_rewrite_t *w;

    if (mcf->rewrites.elts == NULL &&
        ngx_array_init(&mcf->rewrites, cf->pool, 2, sizeof *w) != NGX_OK)
        return -1;
    w = ngx_array_push(&mcf->rewrites);
    if (w == NULL)
        return -1;
    w->directive = cmd->name;
    w->regex = value[1];
    w->replacement = value[2];
    w->flag.len = 0;
    if (flag)
        w->flag = *flag;
    w->file.len = cf->conf_file->file.name.len;
    w->file.data = ngx_pstrdup(cf->pool, &cf->conf_file->file.name);
    if (w->file.data == NULL)
        return -1;
    w->line = cf->conf_file->line;
    w->lcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_switchyard_module);
    return 0;
}

/* rewrite REGEX REPLACEMENT [FLAG] of a location or its `if` (the
 * server's run before the routes are matched), unless it redirects (an
 * absolute URL, redirect, permanent): recorded for sw_location_check */
static char *sw_rewrite_seen(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) {
    ngx_str_t *value = cf->args->elts;
    char *rv = sw_rewrite_set(cf, cmd, conf);

    if (rv != NGX_CONF_OK ||
        !(cf->cmd_type & (NGX_HTTP_LOC_CONF | NGX_HTTP_LIF_CONF)))
        return rv;
    if ((value[2].len > 7 &&
         ngx_strncmp(value[2].data, (u_char *)"http://", 7) == 0) ||
        (value[2].len > 8 &&
         ngx_strncmp(value[2].data, (u_char *)"https://", 8) == 0) ||
        (value[2].len >= 7 &&
         ngx_strncmp(value[2].data, (u_char *)"$scheme", 7) == 0) ||
        (cf->args->nelts == 4 && (sw_str_is(&value[3], "redirect") ||
                                  sw_str_is(&value[3], "permanent"))))
        return rv;
    return sw_rewrite_note(cf, cmd, cf->args->nelts == 4 ? &value[3] : NULL)
               ? NGX_CONF_ERROR
               : rv;
}

/* set $args VALUE of a location or its `if` (the server's runs before the
 * routes are matched): the query the route computed is sent, so it is
 * recorded as a rewrite is */
static char *sw_set_seen(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) {
    ngx_str_t *value = cf->args->elts, arg = value[1], now;
    char *rv = sw_set_set(cf, cmd, conf);

    if (rv != NGX_CONF_OK ||
        !(cf->cmd_type & (NGX_HTTP_LOC_CONF | NGX_HTTP_LIF_CONF)) ||
        arg.len != 5 || ngx_strncasecmp(arg.data, (u_char *)"$args", 5) != 0)
        return rv;
    /* (nginx's handler may have dropped the '$' of its argument in place) */
    now = value[1];
    value[1] = arg;
    rv = sw_rewrite_note(cf, cmd, NULL) ? NGX_CONF_ERROR : rv;
    value[1] = now;
    return rv;
}

/* The other modules' passes. An upstream with switchyard_balancer is
 * proxy_pass's: its peer is a route's target, set for the proxy module's
 * request; another module's request through it has no route (every one
 * was answered 500). Found by the module's name: a module this nginx was
 * built without is skipped. */
static struct {
    const char *module, *name;
    ngx_command_t *cmd;
    sw_set_pt saved;
} sw_other_passes[] = {
    {"ngx_http_fastcgi_module", "fastcgi_pass", NULL, NULL},
    {"ngx_http_uwsgi_module", "uwsgi_pass", NULL, NULL},
    {"ngx_http_scgi_module", "scgi_pass", NULL, NULL},
    {"ngx_http_grpc_module", "grpc_pass", NULL, NULL},
    {"ngx_http_memcached_module", "memcached_pass", NULL, NULL},
};
#define SW_OTHER_PASSES (sizeof sw_other_passes / sizeof sw_other_passes[0])

static char *sw_other_pass_seen(ngx_conf_t *cf, ngx_command_t *cmd,
                                void *conf) {
    sw_main_conf_t *mcf =
        ngx_http_conf_get_module_main_conf(cf, ngx_http_switchyard_module);
    ngx_str_t *value = cf->args->elts;
    sw_set_pt set = NULL;
    sw_pass_t *w;
    char *rv;

    for (size_t i = 0; i < SW_OTHER_PASSES && set == NULL; i++)
        if (sw_other_passes[i].cmd == cmd)
            set = sw_other_passes[i].saved;
    if (set == NULL)
        return "switchyard: a wrapped directive was not found";
    rv = set(cf, cmd, conf);
    if (rv != NGX_CONF_OK || cf->args->nelts < 2)
        return rv;
    if (mcf->other_passes.elts == NULL &&
        ngx_array_init(&mcf->other_passes, cf->pool, 2, sizeof *w) != NGX_OK)
        return NGX_CONF_ERROR;
    w = ngx_array_push(&mcf->other_passes);
    if (w == NULL)
        return NGX_CONF_ERROR;
    w->directive = cmd->name;
    w->value = value[1];
    w->file.len = cf->conf_file->file.name.len;
    w->file.data = ngx_pstrdup(cf->pool, &cf->conf_file->file.name);
    if (w->file.data == NULL)
        return NGX_CONF_ERROR;
    w->line = cf->conf_file->line;
    return rv;
}

/* The directives read while an http block is parsed. */
static struct {
    ngx_module_t *module;
    const char *name;
    sw_set_pt wrapper;
    sw_set_pt *saved;
} sw_wraps[] = {
    {&ngx_http_proxy_module, "proxy_pass", sw_proxy_pass_checked,
     &sw_proxy_pass_set},
    {&ngx_http_headers_filter_module, "add_header", sw_add_header_seen,
     &sw_add_header_set},
    {&ngx_http_headers_filter_module, "expires", sw_expires_seen,
     &sw_expires_set},
    {&ngx_http_rewrite_module, "rewrite", sw_rewrite_seen, &sw_rewrite_set},
    {&ngx_http_rewrite_module, "set", sw_set_seen, &sw_set_set},
};

void sw_location_unwrap(void *data) {
    (void)data;
    for (size_t i = 0; i < SW_OTHER_PASSES; i++) {
        ngx_command_t *c = sw_other_passes[i].cmd;
        if (c && c->set == sw_other_pass_seen && sw_other_passes[i].saved)
            c->set = sw_other_passes[i].saved;
    }
    for (size_t i = 0; i < sizeof sw_wraps / sizeof sw_wraps[0]; i++) {
        ngx_command_t *c = sw_command(sw_wraps[i].module, sw_wraps[i].name);
        if (c && c->set == sw_wraps[i].wrapper && *sw_wraps[i].saved)
            c->set = *sw_wraps[i].saved;
    }
}

/* The wrap is undone when the http block is done (postconfiguration) or
 * when the cycle being configured goes away (a failed parse), so no other
 * module keeps a pointer into this module. */
ngx_int_t sw_location_wrap(ngx_conf_t *cf) {
    ngx_pool_cleanup_t *cln = ngx_pool_cleanup_add(cf->pool, 0);

    if (cln == NULL)
        return NGX_ERROR;
    cln->handler = sw_location_unwrap;
    for (size_t i = 0; i < sizeof sw_wraps / sizeof sw_wraps[0]; i++) {
        ngx_command_t *c = sw_command(sw_wraps[i].module, sw_wraps[i].name);
        if (c == NULL) {
            ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                          "switchyard: this nginx has no \"%s\" directive: "
                          "the module cannot check its locations",
                          sw_wraps[i].name);
            return NGX_ERROR;
        }
        if (c->set == sw_wraps[i].wrapper)
            continue;
        *sw_wraps[i].saved = c->set;
        c->set = sw_wraps[i].wrapper;
    }
    for (size_t i = 0; i < SW_OTHER_PASSES; i++) {
        ngx_module_t **m = cf->cycle->modules;
        ngx_command_t *c = NULL;
        for (; m && *m && c == NULL; m++)
            if ((*m)->name && (*m)->type == NGX_HTTP_MODULE &&
                ngx_strcmp((*m)->name, sw_other_passes[i].module) == 0)
                c = sw_command(*m, sw_other_passes[i].name);
        sw_other_passes[i].cmd = c;
        if (c == NULL || c->set == sw_other_pass_seen)
            continue;
        sw_other_passes[i].saved = c->set;
        c->set = sw_other_pass_seen;
    }
    return NGX_OK;
}

/* The length of the upstream name at the start of h: up to its port, path
 * or a variable. */
static size_t sw_name_end(const ngx_str_t *h) {
    size_t n = 0;

    while (n < h->len && h->data[n] != '$' && h->data[n] != '/' &&
           h->data[n] != ':')
        n++;
    return n;
}

/* True when `host` names an upstream block with switchyard_balancer. */
static ngx_flag_t sw_balancer_named(ngx_conf_t *cf, sw_main_conf_t *mcf,
                                    const ngx_str_t *host) {
    ngx_http_upstream_main_conf_t *umcf =
        ngx_http_conf_get_module_main_conf(cf, ngx_http_upstream_module);
    ngx_http_upstream_srv_conf_t **us = umcf->upstreams.elts;

    for (ngx_uint_t i = 0; i < umcf->upstreams.nelts; i++)
        if (us[i]->host.len == host->len &&
            ngx_strncasecmp(us[i]->host.data, host->data, host->len) == 0 &&
            sw_is_balancer(mcf, us[i]))
            return 1;
    return 0;
}

/* True when proxy_pass sends to $switchyard_upstream or to an upstream
 * block with switchyard_balancer (`http://NAME$switchyard_uri`); `rest`
 * is what follows it. */
static ngx_flag_t sw_routed_target(ngx_conf_t *cf, sw_main_conf_t *mcf,
                                   const ngx_str_t *v, ngx_str_t *rest) {
    ngx_str_t host = *v;
    size_t n;

    if (host.len > 1 && host.data[0] == '$') {
        ngx_flag_t brace = host.data[1] == '{';
        n = (brace ? 2 : 1) + 19;
        if (host.len < n + brace ||
            ngx_strncmp(host.data + n - 19, "switchyard_upstream", 19) != 0 ||
            (brace && host.data[n] != '}') ||
            (!brace && host.len > n &&
             (isalnum(host.data[n]) || host.data[n] == '_')))
            return 0;
        rest->data = host.data + n + brace;
        rest->len = host.len - n - brace;
        return 1;
    }
    if (host.len > 7 && ngx_strncasecmp(host.data, (u_char *)"http://", 7) == 0)
        n = 7;
    else if (host.len > 8 &&
             ngx_strncasecmp(host.data, (u_char *)"https://", 8) == 0)
        n = 8;
    else
        return 0;
    host.data += n;
    host.len -= n;
    n = sw_name_end(&host);
    rest->data = host.data + n;
    rest->len = host.len - n;
    host.len = n;
    return sw_balancer_named(cf, mcf, &host);
}

/* True when a *_pass target ([scheme://]NAME[:port][/...]) names an
 * upstream block with switchyard_balancer. */
static ngx_flag_t sw_names_balancer(ngx_conf_t *cf, sw_main_conf_t *mcf,
                                    const ngx_str_t *v) {
    ngx_str_t host = *v;
    u_char *s = ngx_strlcasestrn(host.data, host.data + host.len,
                                 (u_char *)"://", 3 - 1);
    size_t n;

    if (s) {
        host.len -= s + 3 - host.data;
        host.data = s + 3;
    }
    n = sw_name_end(&host);
    host.len = n;
    return sw_balancer_named(cf, mcf, &host);
}

/* The Host header the location sends: its own proxy_set_header lines or
 * the nearest level's above (nginx inherits the whole list), nginx's
 * $proxy_host without any. Set `host` to the first one that is not
 * $switchyard_host; false when every one is. */
static ngx_flag_t sw_host_lost(const sw_proxy_pass_t *p,
                               const ngx_command_t *psh, ngx_str_t *host) {
    ngx_array_t *a = *(ngx_array_t **)((u_char *)p->proxy_conf + psh->offset);
    ngx_keyval_t *kv;
    ngx_flag_t found = 0;

    ngx_str_set(host, "$proxy_host (nginx's default)");
    if (a == NULL || a == NGX_CONF_UNSET_PTR)
        return 1;
    kv = a->elts;
    for (ngx_uint_t i = 0; i < a->nelts; i++) {
        if (kv[i].key.len != 4 ||
            ngx_strncasecmp(kv[i].key.data, (u_char *)"host", 4) != 0)
            continue;
        found = 1;
        if (!sw_str_is(&kv[i].value, "$switchyard_host") &&
            !sw_str_is(&kv[i].value, "${switchyard_host}")) {
            *host = kv[i].value;
            if (host->len == 0) {
                ngx_str_set(host, "\"\" (none)");
            }
            return 1;
        }
    }
    return !found;
}

/* nginx sends a client's WebSocket handshake upstream as one only when
 * the location says so: proxy_http_version 1.1 (nginx's default is 1.0),
 * an Upgrade line with a value (nginx's default sends Upgrade ""), and a
 * Connection line that can say "upgrade" (a variable, or the word; nginx's
 * default is "close", and keepalive wants ""). True when it does not. */
static ngx_flag_t sw_upgrade_lost(const sw_proxy_pass_t *p,
                                  const ngx_command_t *psh,
                                  const ngx_command_t *phv) {
    ngx_array_t *a = *(ngx_array_t **)((u_char *)p->proxy_conf + psh->offset);
    ngx_keyval_t *kv;
    ngx_flag_t upgrade = 0, connection = 0;

    if (*(ngx_uint_t *)((u_char *)p->proxy_conf + phv->offset) !=
        NGX_HTTP_VERSION_11)
        return 1;
    if (a == NULL || a == NGX_CONF_UNSET_PTR)
        return 1;
    kv = a->elts;
    for (ngx_uint_t i = 0; i < a->nelts; i++) {
        if (kv[i].key.len == 7 &&
            ngx_strncasecmp(kv[i].key.data, (u_char *)"upgrade", 7) == 0)
            upgrade = kv[i].value.len != 0;
        else if (kv[i].key.len == 10 &&
                 ngx_strncasecmp(kv[i].key.data, (u_char *)"connection", 10) ==
                     0)
            connection =
                ngx_strlchr(kv[i].value.data,
                            kv[i].value.data + kv[i].value.len, '$') != NULL ||
                ngx_strlcasestrn(kv[i].value.data,
                                 kv[i].value.data + kv[i].value.len,
                                 (u_char *)"upgrade", 7 - 1) != NULL;
    }
    return !(upgrade && connection);
}

ngx_flag_t sw_location_variable_form(sw_main_conf_t *mcf) {
    sw_proxy_pass_t *p = mcf->proxy_passes.elts;

    for (ngx_uint_t i = 0; i < mcf->proxy_passes.nelts; i++)
        if (sw_str_has(&p[i].value, "switchyard_upstream"))
            return 1;
    return 0;
}

ngx_int_t sw_location_check(ngx_conf_t *cf, sw_main_conf_t *mcf) {
    ngx_command_t *psh = sw_proxy_command("proxy_set_header");
    ngx_command_t *prh = sw_proxy_command("proxy_pass_request_headers");
    ngx_command_t *phv = sw_proxy_command("proxy_http_version");
    sw_proxy_pass_t *p = mcf->proxy_passes.elts;
    u_char why[512], *e;
    ngx_str_t host, rest;

    if (psh == NULL || prh == NULL || phv == NULL) {
        /* not this nginx's proxy module */
        ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                      "switchyard: the proxy module has no proxy_set_header, "
                      "proxy_pass_request_headers or proxy_http_version: the "
                      "module cannot check what its locations send");
        return NGX_ERROR;
    }
    sw_psh_offset = psh->offset;
    /* an admin location's content handler is the admin API: a
     * proxy_pass there, before or after switchyard_admin, replaces it or
     * is replaced; another handler set after it replaces it */
    for (ngx_uint_t i = 0; i < mcf->proxy_passes.nelts; i++) {
        if (p[i].lcf == NULL || !p[i].lcf->admin)
            continue;
        ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                      "switchyard: \"proxy_pass %V\" in the location of "
                      "switchyard_admin (%V:%ui): one of them would be "
                      "ignored (nginx keeps the last content handler); give "
                      "the admin API a location of its own in %V:%ui",
                      &p[i].value, &p[i].lcf->admin_file, p[i].lcf->admin_line,
                      &p[i].file, p[i].line);
        return NGX_ERROR;
    }
    for (ngx_uint_t i = 0; i < mcf->admins.nelts; i++) {
        sw_loc_conf_t *a = ((sw_loc_conf_t **)mcf->admins.elts)[i];
        if (a->admin_clcf->handler == sw_admin_handler)
            continue;
        ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                      "switchyard: the location of switchyard_admin has "
                      "another content handler set after it (proxy_pass, "
                      "fastcgi_pass...), which would answer instead of the "
                      "admin API; give the admin API a location of its own "
                      "in %V:%ui",
                      &a->admin_file, a->admin_line);
        return NGX_ERROR;
    }
    for (ngx_uint_t i = 0; i < mcf->other_passes.nelts; i++) {
        sw_pass_t *w = (sw_pass_t *)mcf->other_passes.elts + i;
        if (!sw_names_balancer(cf, mcf, &w->value))
            continue;
        ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                      "switchyard: \"%V %V\" sends to an upstream with "
                      "switchyard_balancer, whose peer is a route's target "
                      "for proxy_pass only: each request would be answered "
                      "500; proxy it with proxy_pass from a \"switchyard on\" "
                      "location, or give it another upstream in %V:%ui",
                      &w->directive, &w->value, &w->file, w->line);
        return NGX_ERROR;
    }
    /* a routed request's location must proxy (its own proxy_pass, or one
     * in an if): a location that does not would answer every routed
     * request 500 and every other 404, its own content never served */
    for (ngx_uint_t i = 0; i < mcf->routed.nelts; i++) {
        sw_loc_conf_t *l = ((sw_loc_conf_t **)mcf->routed.elts)[i];
        if (l->proxy_in_if ||
            (sw_proxy_handler && l->routed_clcf->handler == sw_proxy_handler))
            continue;
        ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                      "switchyard: location \"%V\" has no proxy_pass, but "
                      "\"switchyard on\" routes its requests: each routed "
                      "request would be answered 500 (the route's target "
                      "ignored) and every other 404 (the location's own "
                      "return, root or handler never used); give it a "
                      "proxy_pass or \"switchyard off\" (switchyard on in "
                      "%V:%ui)",
                      &l->routed_clcf->name, &l->on_file, l->on_line);
        return NGX_ERROR;
    }
    /* the module routes in the rewrite phase before the location's own
     * rewrites run: one would change nginx's URI, not the route's path
     * nor its target (break), or move the routed request to a location
     * that keeps its route (last) */
    for (ngx_uint_t i = 0; i < mcf->rewrites.nelts; i++) {
        sw_rewrite_t *w = (sw_rewrite_t *)mcf->rewrites.elts + i;
        if (w->lcf->enable != 1)
            continue;
        ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                      "switchyard: \"%V %V %V%s%V\" of a \"switchyard on\" "
                      "location runs after the module matched the request's "
                      "route and computed its path, query and target, so it "
                      "would be ignored; write it at the server level (it "
                      "runs before the routes are matched), or use the "
                      "route's filters (RewritePath, SetPath, "
                      "AddRequestParameter...) in %V:%ui",
                      &w->directive, &w->regex, &w->replacement,
                      w->flag.len ? " " : "", &w->flag, &w->file, w->line);
        return NGX_ERROR;
    }
    for (ngx_uint_t i = 0; i < mcf->proxy_passes.nelts; i++) {
        if (p[i].lcf == NULL)
            continue;
        /* a location that does not route sends to the balancer (or to
         * $switchyard_upstream) a request without a route: every one
         * would be answered 500 (an internal redirect into it clears the
         * request's route too) */
        if (p[i].lcf->enable != 1) {
            if (!sw_routed_target(cf, mcf, &p[i].value, &rest))
                continue;
            ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                          "switchyard: \"proxy_pass %V\" sends to %s from a "
                          "location without \"switchyard on\", whose requests "
                          "have no route: each would be answered 500; add "
                          "\"switchyard on\" to the location or proxy it "
                          "elsewhere in %V:%ui",
                          &p[i].value,
                          p[i].value.data[0] == '$'
                              ? "$switchyard_upstream"
                              : "an upstream with switchyard_balancer",
                          &p[i].file, p[i].line);
            return NGX_ERROR;
        }
        e = why;
        if (!sw_routed_target(cf, mcf, &p[i].value, &rest))
            e = ngx_snprintf(why, sizeof why,
                             "sends to neither $switchyard_upstream nor an "
                             "upstream with switchyard_balancer, so the "
                             "route's target would be ignored (a location not "
                             "meant for routes needs \"switchyard off\")");
        else if (rest.len != 0 && !sw_str_is(&rest, "$switchyard_uri") &&
                 !sw_str_is(&rest, "${switchyard_uri}"))
            e = ngx_snprintf(why, sizeof why,
                             "%s, so the route's path and query (StripPrefix, "
                             "RewritePath, SetPath...) would not be sent as "
                             "they are; write proxy_pass "
                             "http://UPSTREAM$switchyard_uri (or proxy_pass "
                             "http://UPSTREAM; with nothing after it)",
                             sw_str_has(&rest, "switchyard_uri")
                                 ? "sends more than $switchyard_uri after the "
                                   "upstream"
                                 : "does not send $switchyard_uri");
        else if (sw_host_lost(&p[i], psh, &host))
            e = ngx_snprintf(why, sizeof why,
                             "sends Host %V, so a route's PreserveHostHeader "
                             "or SetRequestHostHeader would be ignored; add "
                             "proxy_set_header Host $switchyard_host (a "
                             "location with its own proxy_set_header lines "
                             "inherits none from above)",
                             &host);
        else if (*(ngx_flag_t *)((u_char *)p[i].proxy_conf + prh->offset) == 0)
            e = ngx_snprintf(why, sizeof why,
                             "has proxy_pass_request_headers off, so the "
                             "route's request header filters "
                             "(AddRequestHeader, SetRequestHeader...) would "
                             "not be sent");
        if (e == why) {
            /* http://UPSTREAM alone: no variable, so no SSL context */
            if (rest.len == 0 && p[i].value.len > 7 &&
                ngx_strncasecmp(p[i].value.data, (u_char *)"http://", 7) == 0)
                mcf->plain_form = 1;
            /* a WebSocket handshake would go up as a plain request */
            if (sw_upgrade_lost(&p[i], psh, phv))
                mcf->upgrade_lost = 1;
            continue;
        }
        ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                      "switchyard: \"proxy_pass %V\" of a \"switchyard on\" "
                      "location %*s in %V:%ui",
                      &p[i].value, e - why, why, &p[i].file, p[i].line);
        return NGX_ERROR;
    }
    return NGX_OK;
}

static ngx_flag_t sw_name_is(const u_char *s, size_t len, const ngx_str_t *n) {
    return len == n->len && ngx_strncasecmp((u_char *)s, n->data, len) == 0;
}

/* True when the route's filters changed the request's headers named
 * `name`: the values of that name, in order, differ between the request
 * (orig) and the filter plan. */
static ngx_flag_t sw_header_changed(const ngx_str_t *name,
                                    const ngx_list_t *orig,
                                    const sy_header *plan, size_t n) {
    size_t j = 0;

    for (const ngx_list_part_t *part = &orig->part; part; part = part->next) {
        const ngx_table_elt_t *h = part->elts;
        for (ngx_uint_t k = 0; k < part->nelts; k++) {
            if (!sw_name_is(h[k].key.data, h[k].key.len, name))
                continue;
            while (j < n && !sw_name_is((u_char *)plan[j].name.ptr,
                                        plan[j].name.len, name))
                j++;
            if (j == n || plan[j].value.len != h[k].value.len ||
                ngx_memcmp(plan[j].value.ptr, h[k].value.data,
                           h[k].value.len) != 0)
                return 1;
            j++;
        }
    }
    while (j < n &&
           !sw_name_is((u_char *)plan[j].name.ptr, plan[j].name.len, name))
        j++;
    return j < n;
}

/* True when the location's line for a header sends what the plan has
 * anyway: "" (none) for a header the plan drops, or $http_NAME, which
 * reads the request's headers after the filters. */
static ngx_flag_t sw_line_agrees(const ngx_keyval_t *kv, const sy_header *plan,
                                 size_t n) {
    if (kv->value.len == 0) {
        for (size_t j = 0; j < n; j++)
            if (sw_name_is((u_char *)plan[j].name.ptr, plan[j].name.len,
                           &kv->key))
                return 0;
        return 1;
    }
    if (kv->value.len != kv->key.len + 6 ||
        ngx_strncmp(kv->value.data, "$http_", 6) != 0)
        return 0;
    for (size_t i = 0; i < kv->key.len; i++) {
        u_char c = ngx_tolower(kv->key.data[i]);
        if (c == '-')
            c = '_';
        if (kv->value.data[6 + i] != c)
            return 0;
    }
    return 1;
}

static void sw_kept_headers_mark(void *data) {
    (void)data; /* only a marker in the pool's cleanup list */
}

static const ngx_list_t *sw_kept_headers(ngx_http_request_t *r) {
    for (ngx_pool_cleanup_t *c = r->pool->cleanup; c; c = c->next)
        if (c->handler == sw_kept_headers_mark)
            return c->data;
    return NULL;
}

ngx_int_t sw_location_keep_headers(ngx_http_request_t *r,
                                   const ngx_list_t *orig) {
    ngx_list_t *k;

    if (sw_kept_headers(r)) /* the client's, from the first redirect */
        return NGX_OK;
    k = sw_keep_add(r, sw_kept_headers_mark, sizeof *k);
    if (k == NULL)
        return NGX_ERROR;
    *k = *orig;
    return NGX_OK;
}

const ngx_str_t *sw_location_header_lost(ngx_http_request_t *r,
                                         const ngx_list_t *orig,
                                         const sy_header *plan, size_t n) {
    u_char *plcf = ngx_http_get_module_loc_conf(r, ngx_http_proxy_module);
    ngx_array_t *a;
    ngx_keyval_t *kv;

    if (plcf == NULL || sw_psh_offset == NGX_CONF_UNSET_UINT)
        return NULL;
    a = *(ngx_array_t **)(plcf + sw_psh_offset);
    if (a == NULL || a == NGX_CONF_UNSET_PTR)
        return NULL;
    if (a->nelts && sw_kept_headers(r)) /* routed on after a forward: */
        orig = sw_kept_headers(r);      /* every route's changes */
    kv = a->elts;
    for (ngx_uint_t i = 0; i < a->nelts; i++) {
        if (kv[i].key.len == 4 &&
            ngx_strncasecmp(kv[i].key.data, (u_char *)"host", 4) == 0)
            continue; /* $switchyard_host: sw_location_check */
        if (sw_header_changed(&kv[i].key, orig, plan, n) &&
            !sw_line_agrees(&kv[i], plan, n))
            return &kv[i].key;
    }
    return NULL;
}

/* What a response operation of a route acts on that the location's
 * add_header or expires would add again after it: SetResponseHeader and
 * RemoveResponseHeader, the rewrites and DedupeResponseHeader
 * (AddResponseHeader's value is sent beside the location's). */
static ngx_flag_t sw_op_lost(const sy_response_op *op, const ngx_str_t *name) {
    switch (op->kind) {
    case SY_RESP_SET:
    case SY_RESP_REMOVE:
    case SY_RESP_REWRITE:
        return sw_name_is((u_char *)op->name.ptr, op->name.len, name);
    case SY_RESP_REWRITE_LOCATION:
        return name->len == 8 &&
               ngx_strncasecmp(name->data, (u_char *)"location", 8) == 0;
    case SY_RESP_DEDUPE: /* space separated names */
        for (size_t i = 0, k; i < op->name.len; i = k + 1) {
            for (k = i; k < op->name.len && op->name.ptr[k] != ' '; k++)
                ;
            if (k > i && sw_name_is((u_char *)op->name.ptr + i, k - i, name))
                return 1;
        }
        return 0;
    default: return 0;
    }
}

const char *sw_location_response_lost(const sw_loc_conf_t *lcf,
                                      const sy_response_op *ops, size_t n,
                                      ngx_str_t *name) {
    static ngx_str_t by_expires[] = {ngx_string("Expires"),
                                     ngx_string("Cache-Control")};
    ngx_str_t *added = lcf->added ? lcf->added->elts : NULL;

    for (size_t i = 0; i < n; i++) {
        for (ngx_uint_t k = 0; added && k < lcf->added->nelts; k++)
            if (sw_op_lost(&ops[i], &added[k])) {
                *name = added[k];
                return "add_header";
            }
        for (ngx_uint_t k = 0; lcf->expires == 1 && k < 2; k++)
            if (sw_op_lost(&ops[i], &by_expires[k])) {
                *name = by_expires[k];
                return "expires";
            }
    }
    return NULL;
}

ngx_flag_t sw_location_refuses(ngx_http_request_t *r, sw_req_ctx_t *ctx,
                               ngx_flag_t final) {
    sw_loc_conf_t *lcf =
        ngx_http_get_module_loc_conf(r, ngx_http_switchyard_module);

    if (ctx->upstream.data == NULL ||
        (sw_proxy_handler && r->content_handler == sw_proxy_handler) ||
        (!final && lcf->proxy_in_if))
        return 0;
    ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                  "switchyard: route \"%V\" refused: the location does not "
                  "proxy (no proxy_pass, or a return or another content "
                  "handler), so the route's target would be ignored; give "
                  "it a proxy_pass or \"switchyard off\": answering 500",
                  &ctx->route);
    return 1;
}
