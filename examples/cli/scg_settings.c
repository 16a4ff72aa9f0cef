/*
 * scg_settings.c - inside the SCG converter (scg_convert.h): the gateway
 * settings of spring.cloud.gateway that SCG applies to every route, carried
 * into the route document or refused. Global filter properties
 * (filter.secure-headers.*, request-rate-limiter.*, local-response-cache.*)
 * folded into each such filter's args; httpclient timeouts and globalcors'
 * catch-all configuration written as each route's metadata; settings no
 * route field carries (predicate.host.include-port: false, ...) and
 * environment variables that Spring Boot would bind over the routes
 * refused with their place. scg_convert.c makes the document and calls
 * these.
 */
#define _DEFAULT_SOURCE
#include "scg_tree.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* SCG's global filter properties (spring.cloud.gateway.filter.<group>.*)
 * are the defaults of a route filter's args: SecureHeaders' header values
 * (Config.withDefaults), RequestRateLimiter's empty-key answer,
 * LocalResponseCache's time to live and size. They are folded into each
 * such entry's args (the route's own win); a property of these groups
 * that switchyard cannot carry (secure-headers.disable, ...) is an error. */
static const struct {
    const char *filter, *group, *prop, *arg;
} folded[] = {
    {"SecureHeaders", "secureheaders", "xssprotectionheader",
     "xssProtectionHeader"},
    {"SecureHeaders", "secureheaders", "stricttransportsecurity",
     "strictTransportSecurity"},
    {"SecureHeaders", "secureheaders", "frameoptions", "frameOptions"},
    {"SecureHeaders", "secureheaders", "contenttypeoptions",
     "contentTypeOptions"},
    {"SecureHeaders", "secureheaders", "referrerpolicy", "referrerPolicy"},
    {"SecureHeaders", "secureheaders", "contentsecuritypolicy",
     "contentSecurityPolicy"},
    {"SecureHeaders", "secureheaders", "downloadoptions", "downloadOptions"},
    {"SecureHeaders", "secureheaders", "permittedcrossdomainpolicies",
     "permittedCrossDomainPolicies"},
    {"RequestRateLimiter", "requestratelimiter", "denyemptykey",
     "deny-empty-key"},
    {"RequestRateLimiter", "requestratelimiter", "emptykeystatuscode",
     "empty-key-status-code"},
    {"LocalResponseCache", "localresponsecache", "timetolive", "timeToLive"},
    {"LocalResponseCache", "localresponsecache", "size", "size"},
    {"LocalResponseCache", "localresponsecache", "enabled", NULL},
};
#define NFOLDED (sizeof folded / sizeof *folded)

/* Is group.prop (relaxed) one that fold() carries (or, arg NULL, may be
 * there and means nothing to switchyard)? */
static bool folded_prop(const char *group, const char *key) {
    for (size_t i = 0; i < NFOLDED; i++)
        if (strcmp(folded[i].group, group) == 0 &&
            scg_relaxed_eq(key, folded[i].prop))
            return true;
    return false;
}

/* Does the object `args` have a key that is `arg` in relaxed form? */
static bool has_arg(const cJSON *args, const char *arg) {
    char canon[64];
    size_t k = 0;
    for (const char *p = arg; *p && k + 1 < sizeof canon; p++)
        if (*p != '-' && *p != '_')
            canon[k++] = (char)tolower((unsigned char)*p);
    canon[k] = 0;
    for (const cJSON *a = args ? args->child : NULL; a; a = a->next)
        if (scg_relaxed_eq(a->string, canon))
            return true;
    return false;
}

/* The global properties folded into entry e (made by entry_json). */
cJSON *scg_fold(scg_converter *c, cJSON *e) {
    const node *fp = c->filter_props;
    const char *name =
        cJSON_IsString(e) ? e->valuestring
        : cJSON_GetObjectItemCaseSensitive(e, "name")
            ? cJSON_GetObjectItemCaseSensitive(e, "name")->valuestring
            : NULL;
    if (!fp || !name)
        return e;
    size_t nl = strcspn(name, "=");
    const char *group = NULL;
    for (size_t i = 0; i < NFOLDED && !group; i++)
        if (strlen(folded[i].filter) == nl &&
            strncmp(name, folded[i].filter, nl) == 0)
            group = folded[i].group;
    const node *g = group ? scg_map_get(fp, group) : NULL;
    if (!g)
        return e;
    size_t gi = 0;
    while (strcmp(folded[gi].group, group) != 0)
        gi++;
    if (!(c->fold_checked & (1u << gi))) { /* once, where it is used */
        c->fold_checked |= 1u << gi;
        if (g->kind != N_MAP)
            scg_issue_add(c, true, g->file, g->line,
                          "spring.cloud.gateway.filter.%s: expected a map of "
                          "settings",
                          g->key);
        for (size_t j = 0; g->kind == N_MAP && j < g->n; j++)
            if (g->kids[j]->kind != N_SCALAR)
                scg_issue_add(c, true, g->kids[j]->file, g->kids[j]->line,
                              "spring.cloud.gateway.filter.%s.%s: expected a "
                              "value",
                              g->key, g->kids[j]->key);
            else if (!folded_prop(group, g->kids[j]->key))
                scg_issue_add(c, true, g->kids[j]->file, g->kids[j]->line,
                              "spring.cloud.gateway.filter.%s.%s: %.*s has no "
                              "such setting in switchyard (it is refused, "
                              "not left unread)",
                              g->key, g->kids[j]->key, (int)nl, name);
    }
    if (g->kind != N_MAP)
        return e;
    cJSON *o = e;
    if (cJSON_IsString(e)) { /* the shortcut as named args */
        o = cJSON_CreateObject();
        char *nm = strndup(name, nl);
        cJSON_AddItemToObject(o, "name", cJSON_CreateString(nm ? nm : ""));
        free(nm);
        cJSON *args = cJSON_AddObjectToObject(o, "args");
        /* only LocalResponseCache takes shortcut args: timeToLive, size */
        const char *rest = name[nl] ? name + nl + 1 : "";
        static const char *const lrc[] = {"timeToLive", "size"};
        for (int k = 0; *rest; k++) {
            size_t len = strcspn(rest, ",");
            const char *v = rest;
            while (len && *v == ' ')
                v++, len--;
            size_t vl = len;
            while (vl && v[vl - 1] == ' ')
                vl--;
            char *t = strndup(v, vl);
            if (k < 2 && strcmp(group, "localresponsecache") == 0)
                cJSON_AddItemToObject(args, lrc[k],
                                      cJSON_CreateString(t ? t : ""));
            else { /* not a shortcut switchyard maps: left to the check */
                free(t);
                cJSON_Delete(o);
                return e;
            }
            free(t);
            rest = v + len + (v[len] == ',');
            if (!v[len])
                break;
        }
        cJSON_Delete(e);
    }
    cJSON *args = cJSON_GetObjectItemCaseSensitive(o, "args");
    if (!args)
        args = cJSON_AddObjectToObject(o, "args");
    for (size_t i = 0; args && i < NFOLDED; i++) {
        if (strcmp(folded[i].group, group) != 0 || !folded[i].arg)
            continue;
        const node *v = scg_map_get(g, folded[i].prop);
        if (!v || v->kind != N_SCALAR || has_arg(args, folded[i].arg))
            continue;
        char p[256];
        snprintf(p, sizeof p, "spring.cloud.gateway.filter.%s.%s", g->key,
                 v->key);
        cJSON *j = scg_scalar_json(c, v, p, NULL, false);
        if (j)
            cJSON_AddItemToObject(args, folded[i].arg, j);
    }
    return o;
}

/* A Spring Duration in milliseconds: "5000" (ms), "5s", "500ms", "1m",
 * "2h", "1d", "10us"/"10ns" (rounded down), ISO-8601 "PT5S", "PT1M30S",
 * "PT0.5S". false when it is none of these. */
static bool duration_ms(const char *s, long long *ms) {
    char *end;
    errno = 0;
    if ((s[0] == 'P' || s[0] == 'p') && (s[1] == 'T' || s[1] == 't')) {
        double total = 0;
        const char *p = s + 2;
        if (!*p)
            return false;
        while (*p) {
            double v = strtod(p, &end);
            if (end == p || errno)
                return false;
            char u = (char)toupper((unsigned char)*end);
            total += u == 'H'   ? v * 3600000
                     : u == 'M' ? v * 60000
                     : u == 'S' ? v * 1000
                                : -1e300;
            if (total < 0)
                return false;
            p = end + 1;
        }
        *ms = (long long)total;
        return true;
    }
    long long v = strtoll(s, &end, 10);
    if (end == s || errno)
        return false;
    static const struct {
        const char *unit;
        long long mul, div;
    } units[] = {{"", 1, 1},      {"ms", 1, 1},      {"s", 1000, 1},
                 {"m", 60000, 1}, {"h", 3600000, 1}, {"d", 86400000, 1},
                 {"us", 1, 1000}, {"ns", 1, 1000000}};
    for (size_t i = 0; i < sizeof units / sizeof *units; i++)
        if (strcasecmp(end, units[i].unit) == 0) {
            *ms = v * units[i].mul / units[i].div;
            return true;
        }
    return false;
}

/* SCG's global spring.cloud.gateway.httpclient.connect-timeout (ms) and
 * .response-timeout (a Duration) hold for every route whose metadata does
 * not set its own: added to the route's metadata (in ms) where absent. */
void scg_timeout_defaults(scg_converter *c, cJSON *route) {
    static const char *const keys[] = {"connect-timeout", "response-timeout"};
    static const char *const canon[] = {"connecttimeout", "responsetimeout"};
    for (int k = 0; k < 2; k++) {
        const node *v = scg_map_get(c->httpclient, canon[k]);
        if (!v || (v->kind == N_SCALAR && !v->value))
            continue;
        if (v->kind != N_SCALAR) {
            if (!(c->fold_checked & (1u << (30 + k))))
                scg_issue_add(c, true, v->file, v->line,
                              "spring.cloud.gateway.httpclient.%s: expected "
                              "a value",
                              v->key);
            c->fold_checked |= 1u << (30 + k); /* said once */
            continue;
        }
        cJSON *meta = cJSON_GetObjectItemCaseSensitive(route, "metadata");
        if (meta && cJSON_GetObjectItemCaseSensitive(meta, keys[k]))
            continue;
        char p[256];
        snprintf(p, sizeof p, "spring.cloud.gateway.httpclient.%s", v->key);
        where w = {v->file, v->line, p, NULL};
        char *t = scg_resolve(c, v->value, &w, 0);
        long long ms = 0;
        bool ok = t && (k ? duration_ms(t, &ms) : scg_integer_text(t));
        if (ok && !k)
            ms = strtoll(t, NULL, 10);
        if (!ok) {
            if (t && !(c->fold_checked & (1u << (30 + k))))
                scg_issue_add(c, true, v->file, v->line,
                              "%s: expected %s, not \"%s\"", p,
                              k ? "a duration (5s, 500ms, PT5S or "
                                  "milliseconds)"
                                : "milliseconds",
                              t);
            c->fold_checked |= 1u << (30 + k); /* said once */
            free(t);
            continue;
        }
        free(t);
        if (!meta)
            meta = cJSON_AddObjectToObject(route, "metadata");
        cJSON_AddItemToObject(meta, keys[k], cJSON_CreateNumber((double)ms));
    }
}

/* A CorsConfiguration's properties (relaxed) and the names the route's
 * cors metadata has for them (as SCG reads that metadata). */
static const char *const cors_props[][2] = {
    {"allowedorigins", "allowedOrigins"},
    {"allowedoriginpatterns", "allowedOriginPatterns"},
    {"allowedmethods", "allowedMethods"},
    {"allowedheaders", "allowedHeaders"},
    {"exposedheaders", "exposedHeaders"},
    {"allowcredentials", "allowCredentials"},
    {"maxage", "maxAge"}};
#define NCORS (sizeof cors_props / sizeof *cors_props)

/* spring.cloud.gateway.globalcors: the configuration of the catch-all pattern
 * (every request) becomes the cors metadata of every route (cors_default);
 * a configuration of other paths, which no route field holds, and
 * add-to-simple-url-handler-mapping: true (preflights of paths no route
 * matches answered) are refused with their place. */
static void globalcors(scg_converter *c, const node *k, const char *gpath) {
    for (size_t i = 0; i < k->n; i++) {
        const node *e = k->kids[i];
        if (scg_relaxed_eq(e->key, "addtosimpleurlhandlermapping")) {
            if (e->kind == N_SCALAR && e->value &&
                strcasecmp(e->value, "true") == 0)
                scg_issue_add(c, true, e->file, e->line,
                              "%s.globalcors.%s: true: switchyard does not "
                              "answer preflights of paths no route matches",
                              gpath, e->key);
            continue;
        }
        if (!scg_relaxed_eq(e->key, "corsconfigurations") || e->kind != N_MAP) {
            scg_issue_add(c, false, e->file, e->line,
                          "%s.globalcors.%s: not converted", gpath, e->key);
            continue;
        }
        for (size_t j = 0; j < e->n; j++) {
            const node *pat = e->kids[j];
            if (strcmp(pat->key, "/**") != 0 &&
                strcmp(pat->key, "[/**]") != 0) {
                scg_issue_add(c, true, pat->file, pat->line,
                              "%s.globalcors.cors-configurations.%s: a CORS "
                              "configuration of some paths only: switchyard "
                              "carries the one of /** (to every route's cors "
                              "metadata); give the others as the cors "
                              "metadata of their routes",
                              gpath, pat->key);
                continue;
            }
            if (pat->kind != N_MAP) {
                scg_issue_add(c, true, pat->file, pat->line,
                              "%s.globalcors.cors-configurations.%s: "
                              "expected a map of CORS settings",
                              gpath, pat->key);
                continue;
            }
            c->global_cors = pat;
            for (size_t m = 0; m < pat->n; m++) {
                bool known = false;
                for (size_t q = 0; q < NCORS; q++)
                    known |=
                        scg_relaxed_eq(pat->kids[m]->key, cors_props[q][0]);
                if (!known)
                    scg_issue_add(c, true, pat->kids[m]->file,
                                  pat->kids[m]->line,
                                  "%s.globalcors.cors-configurations.%s.%s: "
                                  "not a CORS setting switchyard reads",
                                  gpath, pat->key, pat->kids[m]->key);
            }
        }
    }
}

/* The globalcors catch-all configuration as the route's cors metadata. SCG
 * combines it with a route's own cors metadata (CorsConfiguration.combine);
 * switchyard takes one, so a route with both is refused. */
void scg_cors_default(scg_converter *c, cJSON *route, const char *path) {
    const node *g = c->global_cors;
    if (!g || g->kind != N_MAP)
        return;
    cJSON *meta = cJSON_GetObjectItemCaseSensitive(route, "metadata");
    if (meta && cJSON_GetObjectItemCaseSensitive(meta, "cors")) {
        scg_issue_add(c, true, g->file, g->line,
                      "%s.metadata.cors: SCG combines it with globalcors' "
                      "configuration of /** (here); switchyard takes one: "
                      "give this route the combined one, or leave it out",
                      path);
        return;
    }
    cJSON *cors = cJSON_CreateObject();
    for (size_t i = 0; cors && i < g->n; i++)
        for (size_t q = 0; q < NCORS; q++)
            if (scg_relaxed_eq(g->kids[i]->key, cors_props[q][0])) {
                char p[256];
                snprintf(p, sizeof p,
                         "spring.cloud.gateway.globalcors.cors-configurations."
                         "%s.%s",
                         g->key, g->kids[i]->key);
                cJSON *v = scg_meta_json(c, g->kids[i], p);
                if (v)
                    cJSON_AddItemToObject(cors, cors_props[q][1], v);
            }
    if (!meta)
        meta = cJSON_AddObjectToObject(route, "metadata");
    if (meta && cors)
        cJSON_AddItemToObject(meta, "cors", cors);
    else
        cJSON_Delete(cors);
}

extern char **environ;

/* Spring Boot binds environment variables over the files:
 * SPRING_CLOUD_GATEWAY_ROUTES_0_URI is spring.cloud.gateway.routes[0].uri,
 * and a list any of whose elements the environment names is bound from the
 * environment alone (the files' list is dropped). convert reads routes
 * from the files: such a variable is an error, never left unread while the
 * files' routes are served; another gateway setting is named in a warning,
 * as in a file. Not looked at with --no-env. */
void scg_environment_overrides(scg_converter *c) {
    static const char *const lists[] = {
        "SPRING_CLOUD_GATEWAY_ROUTES_", "SPRING_CLOUD_GATEWAY_DEFAULTFILTERS_",
        "SPRING_CLOUD_GATEWAY_SERVER_WEBFLUX_ROUTES_",
        "SPRING_CLOUD_GATEWAY_SERVER_WEBFLUX_DEFAULTFILTERS_"};
    for (char **e = c->opt.no_env ? NULL : environ; e && *e; e++) {
        const char *v = *e;
        if (strncmp(v, "SPRING_CLOUD_GATEWAY_", 21) != 0)
            continue;
        int nl = (int)strcspn(v, "=");
        bool list = false;
        for (size_t i = 0; i < sizeof lists / sizeof *lists; i++)
            list |= strncmp(v, lists[i], strlen(lists[i])) == 0;
        if (list)
            scg_issue_add(c, true, "environment", 0,
                          "%.*s: Spring Boot would bind the gateway's routes "
                          "from the environment instead of the files; "
                          "convert reads them from the files: unset it, or "
                          "read a value in the file with a ${placeholder}",
                          nl, v);
        else
            scg_issue_add(c, false, "environment", 0,
                          "%.*s: not converted (convert reads routes and "
                          "default-filters)",
                          nl, v);
    }
}

/* Gateway settings that change what SCG's routes do and that no route
 * field can carry: an error at their place when set away from SCG's
 * default, never a warning the routes then ignore. True when k is one
 * (whether or not it was set away from the default). */
static bool changes_routes(scg_converter *c, const node *k, const char *gpath) {
    static const struct {
        const char *key, *sub, *sub2, *refused; /* NULL: any value */
        const char *why;
    } rules[] = {
        {"predicate", "host", "includeport", "false",
         "Host predicates match the Host header with its port"},
        {"setstatus", "originalstatusheadername", NULL, NULL,
         "SetStatus does not add the original status as a header"},
        {"loadbalancer", "use404", NULL, "true",
         "an lb:// route without an instance is answered 503"},
        {"discovery", "locator", "enabled", "true",
         "no route is made for each discovered service: write them, "
         "uri lb://SERVICE"},
        {"redisratelimiter", "includeheaders", NULL, "false",
         "a limited route's answers carry the X-RateLimit-* headers"},
        {"redisratelimiter", "remainingheader", NULL, NULL,
         "the X-RateLimit-* headers keep SCG's default names"},
        {"redisratelimiter", "replenishrateheader", NULL, NULL,
         "the X-RateLimit-* headers keep SCG's default names"},
        {"redisratelimiter", "burstcapacityheader", NULL, NULL,
         "the X-RateLimit-* headers keep SCG's default names"},
        {"redisratelimiter", "requestedtokensheader", NULL, NULL,
         "the X-RateLimit-* headers keep SCG's default names"},
    };
    bool ours = false;
    for (size_t i = 0; i < sizeof rules / sizeof *rules; i++) {
        if (!scg_relaxed_eq(k->key, rules[i].key))
            continue;
        ours = true;
        const node *mid = scg_map_get(k, rules[i].sub), *v = mid;
        if (rules[i].sub2)
            v = scg_map_get(mid, rules[i].sub2);
        const node *bad = k->kind != N_MAP                             ? k
                          : rules[i].sub2 && mid && mid->kind != N_MAP ? mid
                          : v && v->kind != N_SCALAR                   ? v
                                                                       : NULL;
        if (bad) {
            scg_issue_add(
                c, true, bad->file, bad->line,
                "%s.%s: not the shape SCG binds (a map of settings, a value "
                "each)",
                gpath, k->key);
            return true;
        }
        if (!v || !v->value ||
            (rules[i].refused && strcasecmp(v->value, rules[i].refused) != 0))
            continue;
        scg_issue_add(c, true, v->file, v->line,
                      "%s.%s.%s%s%s: %s: switchyard does not run this "
                      "setting (%s)",
                      gpath, k->key, mid->key, rules[i].sub2 ? "." : "",
                      rules[i].sub2 ? v->key : "", v->value, rules[i].why);
    }
    return ours && k->kind == N_MAP && k->n == 1;
}

/* trusted-proxies, x-forwarded.* and forwarded.*: SCG 4.3.5+ sends
 * X-Forwarded-* and Forwarded only with trusted-proxies set, each header
 * on and appended unless these say otherwise; the mini-gateway sends them
 * all, appended, with --trusted-proxies, and none without. So with
 * trusted-proxies in the files, a setting that turns one off (or its
 * appending, or turns Forwarded's by= on) is an error at its place;
 * without it the setting changes nothing in SCG nor in the gateway run
 * without the flag: a warning says so. trusted-proxies itself is the
 * gateway's flag, named in a warning. True when k is one of the three. */
static bool forwarding(scg_converter *c, const node *k, const char *gpath) {
    bool xf = scg_relaxed_eq(k->key, "xforwarded");
    bool fw = scg_relaxed_eq(k->key, "forwarded");
    if (scg_relaxed_eq(k->key, "trustedproxies")) {
        scg_issue_add(c, false, k->file, k->line,
                      "%s.%s: not converted: the mini-gateway takes it as "
                      "--trusted-proxies '%s' (X-Forwarded-* and Forwarded "
                      "sent for the clients it matches; without it none)",
                      gpath, k->key, k->value ? k->value : "");
        return true;
    }
    if (!xf && !fw)
        return false;
    const node *t = scg_map_get(c->gateway, "trustedproxies");
    bool trusted = t && t->kind == N_SCALAR && t->value && *t->value;
    if (k->kind != N_MAP) {
        scg_issue_add(c, true, k->file, k->line,
                      "%s.%s: not the shape SCG binds (a map of settings)",
                      gpath, k->key);
        return true;
    }
    static const char *const xkeys[] = {
        "enabled",      "forenabled",    "hostenabled", "portenabled",
        "protoenabled", "prefixenabled", "forappend",   "hostappend",
        "portappend",   "protoappend",   "prefixappend"};
    for (size_t i = 0; i < k->n; i++) {
        const node *s = k->kids[i], *v = s;
        const char *off = "false"; /* the value SCG's default is not */
        bool known = false;
        for (size_t j = 0; xf && j < sizeof xkeys / sizeof *xkeys; j++)
            known |= scg_relaxed_eq(s->key, xkeys[j]);
        if (fw && scg_relaxed_eq(s->key, "enabled"))
            known = true;
        if (fw && scg_relaxed_eq(s->key, "by")) {
            v = scg_map_get(s, "enabled");
            off = "true";
            known = v != NULL && s->kind == N_MAP && s->n == 1;
        }
        if (!known) {
            scg_issue_add(c, false, s->file, s->line, "%s.%s.%s: not converted",
                          gpath, k->key, s->key);
            continue;
        }
        if (v->kind != N_SCALAR || !v->value) {
            scg_issue_add(c, true, v->file, v->line,
                          "%s.%s.%s: expected a value", gpath, k->key, s->key);
            continue;
        }
        if (strcasecmp(v->value, off) != 0)
            continue;
        scg_issue_add(c, trusted, v->file, v->line,
                      trusted ? "%s.%s.%s%s: %s: switchyard does not run this "
                                "setting (with --trusted-proxies the "
                                "mini-gateway sends X-Forwarded-For, -Proto, "
                                "-Prefix, -Port, -Host and Forwarded, each "
                                "appended to the client's)"
                              : "%s.%s.%s%s: %s: no effect: without "
                                "trusted-proxies SCG sends no X-Forwarded-* "
                                "nor Forwarded header, nor does the "
                                "mini-gateway without --trusted-proxies",
                      gpath, k->key, s->key, v != s ? ".enabled" : "",
                      v->value);
    }
    return true;
}

/* <gateway>.filter: the groups fold() carries are read from c->filter_props
 * (a property of theirs fold() cannot carry is an error where the filter is
 * used); the others are named in a warning, as other gateway settings. */
static void filter_props(scg_converter *c, const node *f, const char *gpath) {
    static const char *const groups[] = {"secureheaders", "requestratelimiter",
                                         "localresponsecache"};
    c->filter_props = f;
    for (size_t i = 0; i < f->n; i++) {
        const node *k = f->kids[i];
        bool ours = false;
        for (size_t j = 0; j < 3; j++)
            ours |= scg_relaxed_eq(k->key, groups[j]);
        if (!ours)
            scg_issue_add(c, false, k->file, k->line,
                          "%s.filter.%s: not converted (convert reads routes "
                          "and default-filters)",
                          gpath, k->key);
    }
}

/* One key of <gateway> besides routes and default-filters: true when it is
 * a setting this file carries or refuses (the caller warns of the rest). */
bool scg_gateway_setting(scg_converter *c, const node *k, const char *gpath) {
    if (scg_relaxed_eq(k->key, "filter") && k->kind == N_MAP) {
        filter_props(c, k, gpath);
        return true;
    }
    if (scg_relaxed_eq(k->key, "httpclient") && k->kind == N_MAP) {
        c->httpclient = k; /* its timeouts: timeout_defaults() */
        for (size_t j = 0; j < k->n; j++)
            if (!scg_relaxed_eq(k->kids[j]->key, "connecttimeout") &&
                !scg_relaxed_eq(k->kids[j]->key, "responsetimeout"))
                scg_issue_add(c, false, k->kids[j]->file, k->kids[j]->line,
                              "%s.httpclient.%s: not converted (convert "
                              "reads routes, default-filters and the "
                              "httpclient timeouts)",
                              gpath, k->kids[j]->key);
        return true;
    }
    if (changes_routes(c, k, gpath) || forwarding(c, k, gpath))
        return true;
    if (scg_relaxed_eq(k->key, "globalcors") && k->kind == N_MAP) {
        globalcors(c, k, gpath);
        return true;
    }
    return false;
}
