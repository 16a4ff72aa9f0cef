/*
 * main.c - the mini-gateway's command line: flags, the built-in demo (no
 * arguments: example routes and two backends, v1 and v2 of one service),
 * the test backend mode, start-up order (router, workers, config, admin),
 * and graceful shutdown on SIGTERM/SIGINT (stop accepting, finish the
 * requests in flight, then exit).
 */
#define _DEFAULT_SOURCE
#include "gw.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#ifdef GW_HAVE_ETCD
#include "etcd_source.h"
#endif

gw_state G;

void gw_workers_free(void);
void gw_config_free(void);

static uv_loop_t main_loop;
static bool etcd_trace; /* --etcd-trace */
static uv_signal_t sig_term, sig_int;

static const char demo_routes[] =
    "{\"version\": \"1\", \"routes\": [\n"
    "  {\"id\": \"greet\", \"uri\": \"lb://greeter\",\n"
    "   \"predicates\": [\"Path=/greet/**\"],\n"
    "   \"filters\": [\"StripPrefix=1\", "
    "\"AddResponseHeader=X-Served-By,mini-gateway\"],\n"
    "   \"metadata\": {\"version-header\": \"version\"}},\n"
    "  {\"id\": \"hello\", \"uri\": \"http://127.0.0.1:%d\",\n"
    "   \"predicates\": [\"Path=/hello/{name}\"],\n"
    "   \"filters\": [\"SetPath=/greeting/{name}\", "
    "\"AddRequestHeader=X-Greeting-For,{name}\"]},\n"
    "  {\"id\": \"orders-read\", \"uri\": \"lb://greeter\",\n"
    "   \"predicates\": [\"Path=/orders/**\", \"Method=GET,HEAD\"]},\n"
    "  {\"id\": \"teapot\", \"uri\": \"http://127.0.0.1:%d\",\n"
    "   \"predicates\": [\"Path=/teapot\"], \"filters\": "
    "[\"SetStatus=418\"]},\n"
    "  {\"id\": \"docs\", \"uri\": \"no://op\",\n"
    "   \"predicates\": [\"Path=/docs/**\"],\n"
    "   \"filters\": [\"RedirectTo=302,https://example.org/docs\"]}\n"
    "]}\n";

static void usage(FILE *f) {
    fputs(
        "usage: mini-gateway                      the built-in demo\n"
        "       mini-gateway [--listen ADDR:PORT] [--admin ADDR:PORT|off]\n"
        "                    [--routes FILE]... [--instances FILE] "
        "[--workers N]\n"
        "                    [--admin-token TOKEN] [--etcd URL] "
        "[--etcd-prefix P]\n"
        "                    [--etcd-trace]\n"
        "                    [--header-timeout MS] [--idle-timeout MS]\n"
        "                    [--connect-timeout MS] [--response-timeout MS]\n"
        "                    [--max-header-bytes N] [--max-body-bytes N]\n"
        "                    [--retries N] [--escaped-slashes "
        "reject|keep|decode]\n"
        "                    [--merge-slashes] [--quiet]\n"
        "       mini-gateway --backend --id ID [--version V] --listen "
        "ADDR:PORT\n"
        "Defaults: --listen 127.0.0.1:8080 --admin 127.0.0.1:9901 --workers 1\n"
        "--header-timeout 10000 --idle-timeout 60000 --connect-timeout 2000\n"
        "--response-timeout 30000 --max-header-bytes 32768\n"
        "--max-body-bytes 10485760 --retries 2 --escaped-slashes reject.\n"
        "The admin token may also come from MINI_GATEWAY_ADMIN_TOKEN.\n"
        "--etcd-trace prints one JSON line per change from etcd on stdout\n"
        "(when it was received, decoded, committed; for benchmarks).\n",
        f);
}

static void on_signal(uv_signal_t *s, int sig) {
    (void)s;
    gw_log("%s: finishing the requests in flight, then exiting",
           sig == SIGTERM ? "SIGTERM" : "SIGINT");
    gw_admin_close();
    gw_config_close();
#ifdef GW_HAVE_ETCD
    if (G.etcd)
        gw_etcd_stop(G.etcd);
    G.etcd = NULL;
#endif
    uv_close((uv_handle_t *)&sig_term, NULL);
    uv_close((uv_handle_t *)&sig_int, NULL);
}

#ifdef GW_HAVE_ETCD
/* --etcd-trace: one line per commit from etcd, the module's trace of it
 * (etcd_source.h, gw_etcd_trace): for tests/e2e/bench_etcd.py. */
static void on_etcd_commit(void *data, int64_t revision, uint64_t gen) {
    (void)data;
    (void)gen;
    gw_etcd_trace t;
    gw_etcd_last_trace(G.etcd, &t);
    printf("{\"commit\":%lld,\"first_us\":%lld,\"last_us\":%lld,"
           "\"decoded_us\":%lld,\"committed_us\":%lld,\"bytes\":%llu,"
           "\"reads\":%u,\"decode_cpu_us\":%llu,\"commit_cpu_us\":%llu}\n",
           (long long)revision, (long long)t.first_byte_us,
           (long long)t.last_byte_us, (long long)t.decoded_us,
           (long long)t.committed_us, (unsigned long long)t.line_bytes, t.reads,
           (unsigned long long)t.decode_cpu_us,
           (unsigned long long)t.commit_cpu_us);
    fflush(stdout);
}
#endif

static int num_arg(const char *flag, const char *v, uint64_t *out) {
    char *end;
    if (!v)
        return -1;
    unsigned long long n = strtoull(v, &end, 10);
    if (*v == 0 || *end || v[0] == '-') {
        fprintf(stderr, "mini-gateway: %s takes a number, not \"%s\"\n", flag,
                v);
        return -1;
    }
    *out = (uint64_t)n;
    return 0;
}

static int run_demo_setup(void) {
    int p1 = 9101, p2 = 9102;
    if (gw_backend_spawn("127.0.0.1", p1, "greeter-v1", "1") ||
        gw_backend_spawn("127.0.0.1", p2, "greeter-v2", "2")) {
        gw_log("cannot start the demo backends on 127.0.0.1:%d and :%d", p1,
               p2);
        return -1;
    }
    sy_error err;
    if (sy_router_add_source(G.router, "demo", &err))
        return -1;
    char doc[sizeof demo_routes + 32];
    snprintf(doc, sizeof doc, demo_routes, p1, p1);
    char inst[512];
    snprintf(inst, sizeof inst,
             "[{\"id\": \"greeter-v1\", \"host\": \"127.0.0.1\", \"port\": "
             "%d},\n"
             " {\"id\": \"greeter-v2\", \"host\": \"127.0.0.1\", \"port\": "
             "%d, \"metadata\": {\"version\": \"2\"}}]",
             p1, p2);
    sy_change_set *cs;
    if (sy_change_set_new(G.router, &cs, &err))
        return -1;
    int rc = sy_change_set_apply(cs, "demo", doc, strlen(doc), &err);
    if (!rc)
        rc = gw_instances_stage(cs, inst, strlen(inst), "greeter", &err);
    if (!rc)
        rc = gw_commit(cs, "demo", &err);
    sy_change_set_free(cs);
    if (rc) {
        gw_log("demo routes: %s: %s", err.path, err.message);
        return -1;
    }
    return 0;
}

static void print_demo(void) {
    int gp = G.cfg.listen_port, ap = G.cfg.admin_port;
    printf("\nmini-gateway demo: gateway on http://127.0.0.1:%d, admin API on "
           "http://127.0.0.1:%d\n"
           "backends greeter-v1 (127.0.0.1:9101) and greeter-v2 "
           "(127.0.0.1:9102); Ctrl-C stops.\n\n"
           "Try:\n"
           "  # path routing to lb://greeter (StripPrefix=1): v1 is the stable "
           "version\n"
           "  curl -s http://127.0.0.1:%d/greet/hello\n"
           "  # gray release: the 'version' header picks the v2 instances\n"
           "  curl -s -H 'version: 2' http://127.0.0.1:%d/greet/hello\n"
           "  # a filter at work: SetPath and AddRequestHeader from the "
           "captured {name}\n"
           "  curl -s http://127.0.0.1:%d/hello/world\n"
           "  # SetStatus answered by the gateway, and a redirect\n"
           "  curl -si http://127.0.0.1:%d/teapot | head -1\n"
           "  curl -si http://127.0.0.1:%d/docs/intro | grep -i location\n"
           "  # no route: 404; a route that only takes GET: 405 with Allow\n"
           "  curl -si http://127.0.0.1:%d/nowhere | head -1\n"
           "  curl -si -X POST http://127.0.0.1:%d/orders/1 | grep -iE "
           "'^HTTP|^allow'\n"
           "  # change a route through the admin API: effective at the next "
           "request\n"
           "  curl -s -X PUT http://127.0.0.1:%d/routes/demo/hello -d "
           "'{\"id\":\"hello\",\"uri\":\"http://127.0.0.1:9102\","
           "\"predicates\":[\"Path=/hello/{name}\"],"
           "\"filters\":[\"SetPath=/v2/{name}\"]}'\n"
           "  curl -s http://127.0.0.1:%d/hello/world\n"
           "  # status, fingerprint and metrics\n"
           "  curl -s http://127.0.0.1:%d/status\n"
           "  curl -s http://127.0.0.1:%d/metrics | grep gateway_requests\n\n",
           gp, ap, gp, gp, gp, gp, gp, gp, gp, ap, gp, ap, ap);
    fflush(stdout);
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    gw_config *cfg = &G.cfg;
    snprintf(cfg->listen_host, sizeof cfg->listen_host, "127.0.0.1");
    cfg->listen_port = 8080;
    snprintf(cfg->admin_host, sizeof cfg->admin_host, "127.0.0.1");
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
    cfg->escaped_slashes = SY_SLASHES_REJECT;
    cfg->admin_token = getenv("MINI_GATEWAY_ADMIN_TOKEN");
    cfg->demo = argc == 1;
    bool backend = false;
    const char *b_id = NULL, *b_version = NULL, *listen = NULL;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t n;
#define NEED_V()                                                               \
    do {                                                                       \
        if (!v) {                                                              \
            fprintf(stderr, "mini-gateway: %s needs a value\n", a);            \
            return 2;                                                          \
        }                                                                      \
        i++;                                                                   \
    } while (0)
#define NUM(field)                                                             \
    do {                                                                       \
        NEED_V();                                                              \
        if (num_arg(a, v, &n))                                                 \
            return 2;                                                          \
        field = n;                                                             \
    } while (0)
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--listen") == 0) {
            NEED_V();
            listen = v;
        } else if (strcmp(a, "--admin") == 0) {
            NEED_V();
            if (strcmp(v, "off") == 0)
                cfg->admin_port = 0;
            else if (gw_parse_addr(v, cfg->admin_host, sizeof cfg->admin_host,
                                   &cfg->admin_port)) {
                fprintf(stderr, "mini-gateway: bad --admin %s\n", v);
                return 2;
            }
        } else if (strcmp(a, "--routes") == 0) {
            NEED_V();
            if (cfg->route_count == GW_MAX_FILES) {
                fprintf(stderr, "mini-gateway: at most %d --routes\n",
                        GW_MAX_FILES);
                return 2;
            }
            cfg->routes[cfg->route_count++] = v;
        } else if (strcmp(a, "--instances") == 0) {
            NEED_V();
            cfg->instances = v;
        } else if (strcmp(a, "--workers") == 0) {
            NUM(cfg->workers);
        } else if (strcmp(a, "--admin-token") == 0) {
            NEED_V();
            cfg->admin_token = v;
        } else if (strcmp(a, "--header-timeout") == 0) {
            NUM(cfg->header_timeout_ms);
        } else if (strcmp(a, "--idle-timeout") == 0) {
            NUM(cfg->idle_timeout_ms);
        } else if (strcmp(a, "--connect-timeout") == 0) {
            NUM(cfg->connect_timeout_ms);
        } else if (strcmp(a, "--response-timeout") == 0) {
            NUM(cfg->response_timeout_ms);
        } else if (strcmp(a, "--max-header-bytes") == 0) {
            NUM(cfg->max_header_bytes);
        } else if (strcmp(a, "--max-body-bytes") == 0) {
            NUM(cfg->max_body_bytes);
        } else if (strcmp(a, "--retries") == 0) {
            NUM(cfg->retries);
        } else if (strcmp(a, "--escaped-slashes") == 0) {
            NEED_V();
            if (strcmp(v, "reject") == 0)
                cfg->escaped_slashes = SY_SLASHES_REJECT;
            else if (strcmp(v, "keep") == 0)
                cfg->escaped_slashes = SY_SLASHES_KEEP;
            else if (strcmp(v, "decode") == 0)
                cfg->escaped_slashes = SY_SLASHES_DECODE;
            else {
                fprintf(stderr, "mini-gateway: --escaped-slashes takes "
                                "reject, keep or decode\n");
                return 2;
            }
        } else if (strcmp(a, "--merge-slashes") == 0) {
            cfg->merge_slashes = true;
        } else if (strcmp(a, "--quiet") == 0) {
            cfg->quiet = true;
        } else if (strcmp(a, "--demo") == 0) {
            cfg->demo = true;
        } else if (strcmp(a, "--etcd") == 0) {
            NEED_V();
            cfg->etcd_url = v;
        } else if (strcmp(a, "--etcd-prefix") == 0) {
            NEED_V();
            cfg->etcd_prefix = v;
        } else if (strcmp(a, "--etcd-trace") == 0) {
            etcd_trace = true;
        } else if (strcmp(a, "--backend") == 0) {
            backend = true;
        } else if (strcmp(a, "--id") == 0) {
            NEED_V();
            b_id = v;
        } else if (strcmp(a, "--version") == 0) {
            NEED_V();
            b_version = v;
        } else {
            fprintf(stderr, "mini-gateway: unknown argument %s\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (backend)
        return gw_backend_main(listen, b_id, b_version);
    if (listen && gw_parse_addr(listen, cfg->listen_host,
                                sizeof cfg->listen_host, &cfg->listen_port)) {
        fprintf(stderr, "mini-gateway: bad --listen %s\n", listen);
        return 2;
    }
    if (cfg->max_header_bytes < 1024)
        cfg->max_header_bytes = 1024;
    if (cfg->retries > 7)
        cfg->retries = 7;
#ifndef GW_HAVE_ETCD
    if (cfg->etcd_url) {
        fprintf(stderr, "mini-gateway: built without the etcd source\n");
        return 2;
    }
#endif

    uv_loop_init(&main_loop);
    G.main_loop = &main_loop;
    if (gw_workers_init() || gw_config_init())
        return 1;
    if (cfg->demo ? run_demo_setup() : gw_config_load_all())
        return 1;
    if (gw_config_watch(&main_loop) || gw_admin_start(&main_loop))
        return 1;
#ifdef GW_HAVE_ETCD
    if (cfg->etcd_url) {
        char err[256];
        gw_etcd *etcd = NULL;
        gw_etcd_options o = {0};
        o.url = cfg->etcd_url;
        o.prefix = cfg->etcd_prefix;
        if (etcd_trace)
            o.on_commit = on_etcd_commit;
        if (gw_etcd_start_opts(&main_loop, G.router, &o, &etcd, err,
                               sizeof err)) {
            gw_log("--etcd: %s", err);
            return 1;
        }
        G.etcd = etcd;
    }
#endif
    uv_signal_init(&main_loop, &sig_term);
    uv_signal_init(&main_loop, &sig_int);
    uv_signal_start(&sig_term, on_signal, SIGTERM);
    uv_signal_start(&sig_int, on_signal, SIGINT);
    if (gw_workers_start())
        return 1;
    gw_log("listening on %s:%d (%d worker%s), admin %s%s%d", cfg->listen_host,
           cfg->listen_port, G.nworkers, G.nworkers == 1 ? "" : "s",
           cfg->admin_port ? cfg->admin_host : "off",
           cfg->admin_port ? ":" : "", cfg->admin_port);
    if (cfg->demo)
        print_demo();

    uv_run(&main_loop, UV_RUN_DEFAULT);
    gw_workers_stop();
    sy_router_free(G.router);
    G.router = NULL;
    gw_workers_free();
    gw_config_free();
    uv_loop_close(&main_loop);
    gw_log("stopped");
    return 0;
}
