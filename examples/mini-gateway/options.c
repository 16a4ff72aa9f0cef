/*
 * options.c - the mini-gateway's command line as a table: one row per
 * flag (its name, its value's name, where the value goes, its help line),
 * the defaults, the parser and the usage text drawn from the same table.
 * A new flag is one row here (and a field in gw_options or gw_config).
 */
#define _DEFAULT_SOURCE
#include "gw.h"

#include <ctype.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

typedef enum opt_kind {
    OPT_BOOL,  /* no value: sets a bool */
    OPT_STR,   /* a string (argv's, not copied) */
    OPT_U64,   /* a decimal number into a uint64_t */
    OPT_INT,   /* a decimal number into an int */
    OPT_SIZE,  /* a decimal number into a size_t */
    OPT_CUSTOM /* parsed by `parse` */
} opt_kind;

typedef struct opt {
    const char *name; /* "--listen" */
    const char *arg;  /* the value's name in the usage; NULL: no value */
    opt_kind kind;
    size_t off; /* of the target in gw_options */
    int (*parse)(gw_options *o, const char *flag, const char *v);
    const char *help;
} opt;

#define AT(field) offsetof(gw_options, field)

static int parse_admin(gw_options *o, const char *flag, const char *v) {
    gw_config *cfg = &o->cfg;
    if (strcmp(v, "off") == 0) {
        cfg->admin_port = 0;
        return 0;
    }
    /* port 0 turned the admin API off: that is --admin off */
    if (gw_parse_addr(v, cfg->admin_host, sizeof cfg->admin_host,
                      &cfg->admin_port) == 0 &&
        cfg->admin_port > 0)
        return 0;
    fprintf(stderr,
            "mini-gateway: bad %s %s (ADDR:PORT, a port 1-65535, or "
            "off)\n",
            flag, v);
    return -1;
}

static int parse_trusted(gw_options *o, const char *flag, const char *v) {
    return gw_trusted_compile(&o->cfg, flag, v);
}

static int parse_routes(gw_options *o, const char *flag, const char *v) {
    if (o->cfg.route_count == GW_MAX_FILES) {
        fprintf(stderr, "mini-gateway: at most %d %s\n", GW_MAX_FILES, flag);
        return -1;
    }
    o->cfg.routes[o->cfg.route_count++] = v;
    return 0;
}

static int parse_slashes(gw_options *o, const char *flag, const char *v) {
    static const struct {
        const char *name;
        sy_escaped_slashes value;
    } values[] = {{"reject", SY_SLASHES_REJECT},
                  {"keep", SY_SLASHES_KEEP},
                  {"decode", SY_SLASHES_DECODE}};
    for (size_t i = 0; i < sizeof values / sizeof *values; i++)
        if (strcmp(v, values[i].name) == 0) {
            o->cfg.escaped_slashes = values[i].value;
            return 0;
        }
    fprintf(stderr, "mini-gateway: %s takes reject, keep or decode\n", flag);
    return -1;
}

static int parse_pipeline(gw_options *o, const char *flag, const char *v) {
    char *end;
    unsigned long n = strtoul(v, &end, 10);
    if (*v < '0' || *v > '9' || *end || n < 1 || n > GW_PIPE_MAX) {
        fprintf(stderr, "mini-gateway: %s takes 1 to %d, not \"%s\"\n", flag,
                GW_PIPE_MAX, v);
        return -1;
    }
    o->cfg.upstream_pipeline = (unsigned)n;
    return 0;
}

static const opt opts[] = {
    {"--listen", "ADDR:PORT", OPT_STR, AT(listen), NULL,
     "the gateway's port (default 127.0.0.1:8080)"},
    {"--admin", "ADDR:PORT|off", OPT_CUSTOM, 0, parse_admin,
     "the admin API (default 127.0.0.1:9901)"},
    {"--routes", "FILE", OPT_CUSTOM, 0, parse_routes,
     "a route document, watched (repeatable; its source: the base name)"},
    {"--instances", "FILE", OPT_STR, AT(cfg.instances), NULL,
     "an instances document, watched"},
    {"--workers", "N", OPT_INT, AT(cfg.workers), NULL,
     "worker threads (default 1)"},
    {"--admin-token", "TOKEN", OPT_STR, AT(cfg.admin_token), NULL,
     "bearer token of the admin API (or MINI_GATEWAY_ADMIN_TOKEN)"},
    {"--admin-overrides-files", NULL, OPT_BOOL, AT(cfg.admin_overrides_files),
     NULL, "admin changes to a file's routes kept over it (default: 409)"},
    {"--state", "FILE", OPT_STR, AT(cfg.state_file), NULL,
     "admin changes saved to FILE and replayed at start"},
    {"--etcd", "URL", OPT_STR, AT(cfg.etcd_url), NULL,
     "routes and instances from etcd (comma-separated endpoints)"},
    {"--etcd-prefix", "P", OPT_STR, AT(cfg.etcd_prefix), NULL,
     "the etcd key prefix (default /switchyard/)"},
    {"--etcd-user", "USER", OPT_STR, AT(cfg.etcd_user), NULL,
     "authenticate to etcd as USER (with --etcd-password-file)"},
    {"--etcd-password-file", "FILE", OPT_STR, AT(cfg.etcd_password_file), NULL,
     "the etcd user's password (the file's first line)"},
    {"--etcd-token-renew", "MS", OPT_U64, AT(cfg.etcd_token_renew_ms), NULL,
     "renew an etcd simple token this often (default 100000; a JWT at 2/3 "
     "of its lifetime)"},
    {"--etcd-cacert", "FILE", OPT_STR, AT(cfg.etcd_cacert), NULL,
     "CA of the etcd members' certificates (https:// endpoints)"},
    {"--etcd-cert", "FILE", OPT_STR, AT(cfg.etcd_cert), NULL,
     "client certificate for etcd (with --etcd-key)"},
    {"--etcd-key", "FILE", OPT_STR, AT(cfg.etcd_key), NULL,
     "client key for etcd"},
    {"--etcd-trace", NULL, OPT_BOOL, AT(etcd_trace), NULL,
     "one JSON line per change from etcd on stdout (benchmarks)"},
    {"--redis", "HOST:PORT", OPT_STR, AT(cfg.redis), NULL,
     "rate limits shared through Redis (SCG's script and keys); "
     "unix:PATH for its Unix socket"},
    {"--redis-timeout", "MS", OPT_U64, AT(cfg.redis_timeout_ms), NULL,
     "a Redis call not answered within fails open (default 100)"},
    {"--redis-user", "NAME", OPT_STR, AT(cfg.redis_user), NULL,
     "authenticate to Redis as NAME, a Redis 6 ACL user (with "
     "--redis-password-file)"},
    {"--redis-password-file", "FILE", OPT_STR, AT(cfg.redis_password_file),
     NULL,
     "the Redis password (the file's first line): AUTH on every "
     "connection"},
    {"--retry-body-bytes", "N", OPT_U64, AT(cfg.retry_body_bytes), NULL,
     "request body kept for a Retry or a fallback (default 1048576)"},
    {"--default-filters", "FILE", OPT_STR, AT(cfg.default_filters), NULL,
     "a JSON array of filters run before every route's (SCG's "
     "default-filters)"},
    {"--header-timeout", "MS", OPT_U64, AT(cfg.header_timeout_ms), NULL,
     "the request head must arrive within (default 10000)"},
    {"--idle-timeout", "MS", OPT_U64, AT(cfg.idle_timeout_ms), NULL,
     "keep-alive client connections idle (default 60000)"},
    {"--connect-timeout", "MS", OPT_U64, AT(cfg.connect_timeout_ms), NULL,
     "upstream connect (default 2000; route metadata overrides)"},
    {"--response-timeout", "MS", OPT_U64, AT(cfg.response_timeout_ms), NULL,
     "upstream response head (default 30000; route metadata overrides)"},
    {"--max-header-bytes", "N", OPT_SIZE, AT(cfg.max_header_bytes), NULL,
     "request line and headers (default 32768, at least 1024)"},
    {"--max-body-bytes", "N", OPT_U64, AT(cfg.max_body_bytes), NULL,
     "request body (default 10485760)"},
    {"--upstream-pipeline", "N", OPT_CUSTOM, 0, parse_pipeline,
     "requests in flight on one upstream connection (HTTP/1.1 pipelining "
     "of GET, HEAD and OPTIONS without a body, those of a loop turn in one "
     "write; default 1: none)"},
    {"--retries", "N", OPT_INT, AT(cfg.retries), NULL,
     "extra attempts on connect failure (default 2, at most 7)"},
    {"--escaped-slashes", "reject|keep|decode", OPT_CUSTOM, 0, parse_slashes,
     "%2F in paths (default reject)"},
    {"--trusted-proxies", "REGEX", OPT_CUSTOM, 0, parse_trusted,
     "clients whose address REGEX matches whole get X-Forwarded-* and "
     "Forwarded appended (SCG's trusted-proxies; default: none sent, a "
     "client's dropped)"},
    {"--merge-slashes", NULL, OPT_BOOL, AT(cfg.merge_slashes), NULL,
     "// in paths as /"},
    {"--quiet", NULL, OPT_BOOL, AT(cfg.quiet), NULL,
     "no log line per applied file (the access log is --access-log's)"},
    {"--access-log", "FILE|-", OPT_STR, AT(cfg.access_log), NULL,
     "one JSON line per request (- for stdout; docs/operations.md)"},
    {"--demo", NULL, OPT_BOOL, AT(cfg.demo), NULL,
     "the built-in demo (also without arguments)"},
    {"--backend", NULL, OPT_BOOL, AT(backend), NULL,
     "run as the test backend instead (with --id, --version, --listen)"},
    {"--id", "ID", OPT_STR, AT(backend_id), NULL, "the test backend's id"},
    {"--version", "V", OPT_STR, AT(backend_version), NULL,
     "the test backend's version"},
};

void gw_options_usage(FILE *f) {
    fputs("usage: mini-gateway                the built-in demo\n"
          "       mini-gateway [OPTION]...    the gateway\n"
          "       mini-gateway --backend --id ID [--version V] --listen "
          "ADDR:PORT\n"
          "Options:\n",
          f);
    for (size_t i = 0; i < sizeof opts / sizeof *opts; i++) {
        char head[64];
        snprintf(head, sizeof head, "%s%s%s", opts[i].name,
                 opts[i].arg ? " " : "", opts[i].arg ? opts[i].arg : "");
        fprintf(f, "  %-36s %s\n", head, opts[i].help);
    }
}

void gw_options_defaults(gw_options *o) {
    memset(o, 0, sizeof *o);
    gw_config *cfg = &o->cfg;
    gw_copy_str(cfg->listen_host, sizeof cfg->listen_host, "127.0.0.1");
    cfg->listen_port = 8080;
    gw_copy_str(cfg->admin_host, sizeof cfg->admin_host, "127.0.0.1");
    cfg->admin_port = 9901;
    cfg->workers = 1;
    cfg->header_timeout_ms = 10000;
    cfg->idle_timeout_ms = 60000;
    cfg->connect_timeout_ms = 2000;
    cfg->response_timeout_ms = 30000;
    cfg->upstream_idle_ms = 30000;
    cfg->max_header_bytes = 32768;
    cfg->max_body_bytes = 10u << 20;
    cfg->retries = 2;
    cfg->pool_max_idle = 64;
    cfg->upstream_pipeline = 1;
    cfg->redis_timeout_ms = 100;
    cfg->retry_body_bytes = 1u << 20;
    cfg->escaped_slashes = SY_SLASHES_REJECT;
    cfg->admin_token = getenv("MINI_GATEWAY_ADMIN_TOKEN");
}

static int num_arg(const char *flag, const char *v, uint64_t *out) {
    char *end;
    unsigned long long n = strtoull(v, &end, 10);
    if (*v == 0 || *end || v[0] == '-') {
        fprintf(stderr, "mini-gateway: %s takes a number, not \"%s\"\n", flag,
                v);
        return -1;
    }
    *out = (uint64_t)n;
    return 0;
}

/* A number outside its flag's range: refused, never clamped. */
static int out_of_range(const char *flag, uint64_t v, uint64_t lo,
                        uint64_t hi) {
    if (v >= lo && v <= hi)
        return 0;
    fprintf(stderr, "mini-gateway: %s takes %llu to %llu, not %llu\n", flag,
            (unsigned long long)lo, (unsigned long long)hi,
            (unsigned long long)v);
    return -1;
}

/* Store v into the row's target. */
static int set_opt(gw_options *o, const opt *op, const char *v) {
    char *at = (char *)o + op->off;
    uint64_t n = 0;
    if (op->kind >= OPT_U64 && op->kind <= OPT_SIZE && num_arg(op->name, v, &n))
        return -1;
    switch (op->kind) {
    case OPT_BOOL: *(bool *)(void *)at = true; return 0;
    case OPT_STR: *(const char **)(void *)at = v; return 0;
    case OPT_U64: *(uint64_t *)(void *)at = n; return 0;
    case OPT_INT:
        if (n > INT_MAX)
            return out_of_range(op->name, n, 0, INT_MAX);
        *(int *)(void *)at = (int)n;
        return 0;
    case OPT_SIZE: *(size_t *)(void *)at = (size_t)n; return 0;
    case OPT_CUSTOM: return op->parse(o, op->name, v);
    }
    return -1;
}

#define N_OPTS (sizeof opts / sizeof *opts)

/* How often each flag was given (gw_options_parse), by name. */
static int given(const unsigned char *seen, const char *name) {
    for (size_t k = 0; k < N_OPTS; k++)
        if (strcmp(opts[k].name, name) == 0)
            return seen[k];
    return 0;
}

/* A flag that would be taken and not used: needs another that is absent
 * (or, in backend mode, is not the backend's). */
static int unused_flags(const gw_options *o, const unsigned char *seen) {
    static const char *const needs[][2] = {
        {"--etcd-prefix", "--etcd"},
        {"--etcd-token-renew", "--etcd-user"},
        {"--etcd-trace", "--etcd"},
        {"--redis-timeout", "--redis"},
        {"--redis-user", "--redis"},
        {"--redis-password-file", "--redis"},
        {"--redis-user", "--redis-password-file"},
        {"--id", "--backend"},
        {"--version", "--backend"},
    };
    for (size_t i = 0; i < sizeof needs / sizeof *needs; i++)
        if (given(seen, needs[i][0]) && !given(seen, needs[i][1])) {
            fprintf(stderr, "mini-gateway: %s is used only with %s\n",
                    needs[i][0], needs[i][1]);
            return -1;
        }
    for (size_t k = 0; o->backend && k < N_OPTS; k++) {
        const char *n = opts[k].name;
        if (seen[k] && strcmp(n, "--backend") && strcmp(n, "--id") &&
            strcmp(n, "--version") && strcmp(n, "--listen")) {
            fprintf(stderr,
                    "mini-gateway: %s is not used by --backend (it takes "
                    "--id, --version and --listen)\n",
                    n);
            return -1;
        }
    }
    return 0;
}

/* A host hiredis can connect to: a name or an IPv4/IPv6 address (no
 * scheme, path or space: redis://h:6379 was taken as the host
 * "redis://h", never reached, and every rate limit failed open). */
static bool redis_host(const char *h) {
    for (const char *p = h; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr(".-_:%", *p))
            return false;
    return true;
}

/* The Redis password: the first line of --redis-password-file, read
 * here so that a bad file stops the start (exit 2) naming the flag; the
 * password itself is never printed. */
static int redis_password(gw_config *cfg) {
    static char pw[1024];
    const char *file = cfg->redis_password_file;
    FILE *f = fopen(file, "r");
    bool ok = f && fgets(pw, sizeof pw, f);
    if (f)
        fclose(f);
    if (!ok) {
        fprintf(stderr,
                "mini-gateway: --redis-password-file %s: cannot read it "
                "(or it is empty)\n",
                file);
        return -1;
    }
    pw[strcspn(pw, "\r\n")] = 0;
    if (!pw[0]) { /* AUTH "" is refused by Redis: every limit failed open */
        fprintf(stderr,
                "mini-gateway: --redis-password-file %s: its first line "
                "is empty (the password is the first line)\n",
                file);
        return -1;
    }
    if (cfg->redis_user && !cfg->redis_user[0]) {
        fprintf(stderr, "mini-gateway: --redis-user is empty\n");
        return -1;
    }
    cfg->redis_password = pw;
    return 0;
}

/* Limits that need every flag: the listen address, ranges, the build. */
static int finish(gw_options *o, const unsigned char *seen) {
    gw_config *cfg = &o->cfg;
    if (unused_flags(o, seen))
        return -1;
    if (o->backend)
        return 0; /* the backend reads --listen itself */
    if (o->listen &&
        gw_parse_addr(o->listen, cfg->listen_host, sizeof cfg->listen_host,
                      &cfg->listen_port)) {
        fprintf(stderr, "mini-gateway: bad --listen %s\n", o->listen);
        return -1;
    }
    if (out_of_range("--max-header-bytes", cfg->max_header_bytes, 1024,
                     SIZE_MAX) ||
        out_of_range("--retries", (uint64_t)cfg->retries, 0, 7) ||
        out_of_range("--workers", (uint64_t)cfg->workers, 1, GW_MAX_WORKERS) ||
        /* (at most a day: a sent time plus it cannot wrap, which made
         * every call time out at once and the limits fail open) */
        out_of_range("--redis-timeout", cfg->redis_timeout_ms, 1, 86400000) ||
        (given(seen, "--etcd-token-renew") &&
         out_of_range("--etcd-token-renew", cfg->etcd_token_renew_ms, 1,
                      UINT64_MAX)))
        return -1;
    char rhost[256];
    int rport;
    if (cfg->redis && strncmp(cfg->redis, "unix:", 5) == 0) {
        size_t n = strlen(cfg->redis + 5);
        if (n == 0 || n >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
            fprintf(stderr,
                    "mini-gateway: bad --redis %s (unix:PATH, a path of "
                    "1-%zu bytes)\n",
                    cfg->redis,
                    sizeof(((struct sockaddr_un *)0)->sun_path) - 1);
            return -1;
        }
    } else if (cfg->redis &&
               (gw_parse_addr(cfg->redis, rhost, sizeof rhost, &rport) ||
                rport == 0 || !redis_host(rhost))) {
        fprintf(stderr,
                "mini-gateway: bad --redis %s (HOST:PORT, a host name or "
                "address and a port 1-65535, or unix:PATH)\n",
                cfg->redis);
        return -1;
    }
    if (cfg->redis_password_file && redis_password(cfg))
        return -1;
    if (given(seen, "--admin-token") && !cfg->admin_port) {
        fprintf(stderr, "mini-gateway: --admin-token is used only with an "
                        "admin port (--admin is off)\n");
        return -1;
    }
    if (cfg->admin_token && !cfg->admin_token[0]) {
        /* an unset $TOKEN: any client sending "Bearer " passed */
        fprintf(stderr, "mini-gateway: %s is empty\n",
                given(seen, "--admin-token") ? "--admin-token"
                                             : "MINI_GATEWAY_ADMIN_TOKEN");
        return -1;
    }
    if (!cfg->etcd_url &&
        (cfg->etcd_user || cfg->etcd_password_file || cfg->etcd_cacert ||
         cfg->etcd_cert || cfg->etcd_key)) {
        fprintf(stderr, "mini-gateway: the --etcd-* options need --etcd\n");
        return -1;
    }
    if (!cfg->etcd_user != !cfg->etcd_password_file) {
        fprintf(stderr, "mini-gateway: --etcd-user and "
                        "--etcd-password-file go together\n");
        return -1;
    }
#ifndef GW_HAVE_ETCD
    if (cfg->etcd_url) {
        fprintf(stderr, "mini-gateway: built without the etcd source\n");
        return -1;
    }
#endif
    return 0;
}

int gw_options_parse(gw_options *o, int argc, char **argv) {
    unsigned char seen[N_OPTS] = {0};
    gw_options_defaults(o);
    o->cfg.demo = argc == 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            o->help = true;
            return 0;
        }
        const opt *op = NULL;
        for (size_t k = 0; !op && k < sizeof opts / sizeof *opts; k++)
            if (strcmp(a, opts[k].name) == 0)
                op = &opts[k];
        if (!op) {
            fprintf(stderr, "mini-gateway: unknown argument %s\n", a);
            gw_options_usage(stderr);
            return -1;
        }
        size_t k = (size_t)(op - opts);
        if (op->arg && seen[k] && op->parse != parse_routes) {
            fprintf(stderr,
                    "mini-gateway: %s given twice: it takes one value "
                    "(the first would be ignored)\n",
                    a);
            return -1;
        }
        seen[k] = seen[k] < 255 ? seen[k] + 1 : 255;
        const char *v = NULL;
        if (op->arg) {
            if (i + 1 >= argc) {
                fprintf(stderr, "mini-gateway: %s needs a value\n", a);
                return -1;
            }
            v = argv[++i];
        }
        if (set_opt(o, op, v))
            return -1;
    }
    return finish(o, seen);
}
