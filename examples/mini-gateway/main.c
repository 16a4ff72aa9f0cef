/*
 * main.c - the mini-gateway's run in named phases: the command line
 * (options.c), the built-in demo (no arguments: example routes and two
 * backends, v1 and v2 of one service), the test backend mode, start-up
 * order (router, workers, config, admin, etcd, signals, worker threads),
 * and graceful shutdown on SIGTERM/SIGINT (stop accepting, finish the
 * requests in flight, then exit).
 */
#define _DEFAULT_SOURCE
#include "gw.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef GW_HAVE_ETCD
#include "etcd_source.h"
#endif

gw_state G;

static uv_loop_t main_loop;
static uv_signal_t sig_term, sig_int, sig_usr1, sig_hup;

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
    "   \"filters\": [\"RedirectTo=302,https://example.org/docs\"]},\n"
    /* policies: a rate limit, a breaker with a forward: fallback, a retry */
    "  {\"id\": \"limited\", \"uri\": \"lb://greeter\",\n"
    "   \"predicates\": [\"Path=/limited/**\"],\n"
    "   \"filters\": [\"StripPrefix=1\", {\"name\": \"RequestRateLimiter\", "
    "\"args\": {\"redis-rate-limiter.replenishRate\": \"1\", "
    "\"redis-rate-limiter.burstCapacity\": \"2\", "
    "\"key-resolver\": \"#{@remoteAddrKeyResolver}\"}}]},\n"
    "  {\"id\": \"flaky\", \"uri\": \"http://127.0.0.1:1\",\n"
    "   \"predicates\": [\"Path=/flaky/**\"],\n"
    "   \"filters\": [{\"name\": \"CircuitBreaker\", \"args\": "
    "{\"name\": \"flaky\", \"fallbackUri\": \"forward:/fallback/flaky\", "
    "\"minimumNumberOfCalls\": \"2\", \"slidingWindowSize\": \"4\"}}]},\n"
    "  {\"id\": \"fallback\", \"uri\": \"http://127.0.0.1:%d\",\n"
    "   \"predicates\": [\"Path=/fallback/**\"],\n"
    "   \"filters\": [\"AddResponseHeader=X-Fallback,true\"]},\n"
    "  {\"id\": \"shaky\", \"uri\": \"lb://shaky\",\n"
    "   \"predicates\": [\"Path=/shaky/**\"],\n"
    "   \"filters\": [\"StripPrefix=1\", "
    "\"Retry=2, SERVICE_UNAVAILABLE, GET\"]}\n"
    "]}\n";

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
    uv_close((uv_handle_t *)&sig_usr1, NULL);
    uv_close((uv_handle_t *)&sig_hup, NULL);
}

/* SIGUSR1: the access log reopened (logrotate's postrotate, as nginx's) */
static void on_usr1(uv_signal_t *s, int sig) {
    (void)s;
    (void)sig;
    char msg[600];
    gw_access_log_reopen(msg, sizeof msg);
    gw_log("SIGUSR1: %s", msg);
}

/* SIGHUP: a reload, what operators send for one (nginx's, HAProxy's):
 * the route and instance files read again (config.c). Its default action
 * ended the gateway at once before. */
static void on_hup(uv_signal_t *s, int sig) {
    (void)s;
    (void)sig;
    gw_config_reload();
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
    snprintf(doc, sizeof doc, demo_routes, p1, p1, p1);
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
    /* one instance of "shaky" refuses connections: the Retry route's
     * attempts that land there are made again on the other one */
    snprintf(inst, sizeof inst,
             "[{\"id\": \"shaky-down\", \"host\": \"127.0.0.1\", "
             "\"port\": 1},\n"
             " {\"id\": \"shaky-up\", \"host\": \"127.0.0.1\", \"port\": "
             "%d}]",
             p1);
    if (!rc)
        rc = gw_instances_stage(cs, inst, strlen(inst), "shaky", &err);
    if (!rc)
        rc = gw_commit(cs, "demo", &err);
    sy_change_set_free(cs);
    if (rc) {
        gw_log("demo routes: %s: %s", err.path, err.message);
        return -1;
    }
    gw_origin_set("demo", "demo"); /* /status: the built-in routes */
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
           "  # policies: a rate limit (burst 2, 1/s: then 429)\n"
           "  for i in 1 2 3 4; do curl -s -o /dev/null -w '%%{http_code} ' "
           "http://127.0.0.1:%d/limited/x; done; echo\n"
           "  # a circuit breaker on a dead upstream: its forward: fallback "
           "answers (then the breaker opens)\n"
           "  curl -si http://127.0.0.1:%d/flaky/x | grep -iE "
           "'^HTTP|^x-fallback'\n"
           "  # Retry: an attempt on the dead instance of lb://shaky is made "
           "again on the live one\n"
           "  for i in 1 2 3 4; do curl -s -o /dev/null -w '%%{http_code} ' "
           "http://127.0.0.1:%d/shaky/x; done; echo\n"
           "  # status, fingerprint and metrics\n"
           "  curl -s http://127.0.0.1:%d/status\n"
           "  curl -s http://127.0.0.1:%d/metrics | grep -E "
           "'gateway_requests|rate_limit_limited|circuit_breaker_state|"
           "retry_attempts'\n\n",
           gp, ap, gp, gp, gp, gp, gp, gp, gp, ap, gp, gp, gp, gp, ap, ap);
    fflush(stdout);
}

/* ------------------------------------------------------------------ */
/* The phases of a run                                                  */
/* ------------------------------------------------------------------ */

/* The router, the workers' loops and the config (files or the demo). */
static int start_config(void) {
    uv_loop_init(&main_loop);
    G.main_loop = &main_loop;
    if (gw_workers_init() || gw_config_init() ||
        gw_access_log_open(G.cfg.access_log))
        return -1;
    if (G.cfg.demo ? run_demo_setup() : gw_config_load_all())
        return -1;
    if (gw_state_load()) /* --state: admin changes, after the files */
        return -1;
    return gw_config_watch(&main_loop) || gw_admin_start(&main_loop) ? -1 : 0;
}

#ifdef GW_HAVE_ETCD
/* Documents from etcd get the check route files and the admin API run. */
static int etcd_check_document(const char *json, size_t len, sy_error *err) {
    return gw_document_check(json, len, false, err);
}
#endif

/* The etcd source when --etcd is given. */
static int start_etcd(const gw_options *o) {
#ifdef GW_HAVE_ETCD
    if (!G.cfg.etcd_url)
        return 0;
    char err[256];
    gw_etcd *etcd = NULL;
    gw_etcd_options eo = {0};
    eo.url = G.cfg.etcd_url;
    eo.prefix = G.cfg.etcd_prefix;
    eo.cacert = G.cfg.etcd_cacert;
    eo.cert = G.cfg.etcd_cert;
    eo.key = G.cfg.etcd_key;
    eo.check_document = etcd_check_document;
    /* read here too, so that a file that cannot be read is refused at
     * start; the source copies it and reads the file again at every
     * login (a rotated password) */
    char password[1024] = "";
    if (G.cfg.etcd_user) {
        FILE *f = fopen(G.cfg.etcd_password_file, "r");
        if (!f || !fgets(password, sizeof password, f)) {
            gw_log("--etcd-password-file %s: cannot read it",
                   G.cfg.etcd_password_file);
            if (f)
                fclose(f);
            return -1;
        }
        fclose(f);
        password[strcspn(password, "\r\n")] = 0;
        if (!password[0]) { /* etcd refuses an empty password's login */
            gw_log("--etcd-password-file %s: its first line is empty (the "
                   "password is the first line)",
                   G.cfg.etcd_password_file);
            return -1;
        }
        eo.user = G.cfg.etcd_user;
        eo.auth_renew_ms = G.cfg.etcd_token_renew_ms;
        eo.password = password;
        eo.password_file = G.cfg.etcd_password_file;
    }
    if (o->etcd_trace)
        eo.on_commit = on_etcd_commit;
    int rc =
        gw_etcd_start_opts(&main_loop, G.router, &eo, &etcd, err, sizeof err);
    memset(password, 0, sizeof password);
    if (rc) {
        gw_log("--etcd: %s", err);
        return -1;
    }
    G.etcd = etcd;
#else
    (void)o;
#endif
    return 0;
}

/* Signals, then the worker threads: from here requests are served. */
static int start_serving(void) {
    uv_signal_init(&main_loop, &sig_term);
    uv_signal_init(&main_loop, &sig_int);
    uv_signal_start(&sig_term, on_signal, SIGTERM);
    uv_signal_start(&sig_int, on_signal, SIGINT);
    uv_signal_init(&main_loop, &sig_usr1);
    uv_signal_start(&sig_usr1, on_usr1, SIGUSR1);
    uv_signal_init(&main_loop, &sig_hup);
    uv_signal_start(&sig_hup, on_hup, SIGHUP);
    if (gw_workers_start())
        return -1;
    const gw_config *cfg = &G.cfg;
    gw_log("listening on %s:%d (%d worker%s), admin %s%s%.0d", cfg->listen_host,
           cfg->listen_port, G.nworkers, G.nworkers == 1 ? "" : "s",
           cfg->admin_port ? cfg->admin_host : "off",
           cfg->admin_port ? ":" : "", cfg->admin_port);
    if (cfg->demo)
        print_demo();
    return 0;
}

/* After the loop returned (a signal closed its handles): drain the
 * workers, then free in dependency order. */
static void shut_down(void) {
    gw_workers_stop();
    sy_router_free(G.router);
    G.router = NULL;
    gw_workers_free();
    gw_config_free();
    gw_state_free();
    uv_loop_close(&main_loop);
    gw_log("stopped");
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    /* a reload asked before the files are first read is that first read
     * (on_hup's handler replaces this once the gateway serves) */
    signal(SIGHUP, SIG_IGN);
    gw_options o;
    if (gw_options_parse(&o, argc, argv))
        return 2;
    if (o.help) {
        gw_options_usage(stdout);
        return 0;
    }
    if (o.backend)
        return gw_backend_main(o.listen, o.backend_id, o.backend_version);
    G.cfg = o.cfg;
    if (start_config() || start_etcd(&o) || start_serving())
        return 1;
    uv_run(&main_loop, UV_RUN_DEFAULT);
    shut_down();
    return 0;
}
