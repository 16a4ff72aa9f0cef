/*
 * cli_replay.c - `switchyard diff --requests FILE OLD NEW`: the impact of
 * a route change on recorded traffic. Each request of FILE is matched
 * against both documents (two routers, the same instances) and every
 * request whose route, upstream or instance changes is listed, with a
 * summary by route pair. FILE holds one request a line, in one of three
 * formats, told apart by its first request line:
 *
 *   METHOD URL[<TAB>Name: value]...        (plain; URL /path?q or http://h/p)
 *   1.2.3.4 - - [10/Oct/2024:13:55:36 +0000] "GET /a HTTP/1.1" 200 5 "-" "ua"
 *                                          (nginx's combined log format)
 *   {"method":"GET","path":"/a","host":...} (the mini-gateway's access log;
 *                                          its lines of requests not routed,
 *                                          path null or "*", are skipped)
 *
 * Blank lines and lines starting with '#' are skipped.
 */
#include "cli.h"

#include <cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_REQ_HEADERS 32

typedef enum log_format { FMT_PLAIN, FMT_NGINX, FMT_JSON } log_format;
static const char *const format_names[] = {"plain", "nginx combined",
                                           "access log JSON"};

/* One request read from a line; strings point into `own` (and the line). */
typedef struct replay_req {
    char method[32];
    char *url;    /* as written: path or full URL */
    char *host;   /* the JSON log's "host" (in `own`), or NULL */
    char *remote; /* its "remote_addr" (in `own`), or nginx's address */
    char addr[64];
    sy_header headers[MAX_REQ_HEADERS];
    size_t header_count;
    char *own; /* malloc'd copies the request points into */
} replay_req;

static log_format detect(const char *line) {
    if (line[0] == '{')
        return FMT_JSON;
    /* combined: ADDR - USER [TIME] "REQUEST" ... */
    const char *b = strchr(line, '[');
    if (strstr(line, " - ") && b && strstr(b, "] \""))
        return FMT_NGINX;
    return FMT_PLAIN;
}

static bool set_str(char *dst, size_t size, const char *s, size_t n) {
    if (n >= size)
        return false;
    memcpy(dst, s, n);
    dst[n] = '\0';
    return true;
}

static bool valid_url_start(const char *u) {
    return u[0] == '/' || strstr(u, "://") != NULL;
}

/* METHOD URL[\tName: value]... */
static const char *parse_plain(char *line, replay_req *r) {
    char *tab = strchr(line, '\t');
    if (tab)
        *tab = '\0';
    char *sp = strchr(line, ' ');
    if (!sp || sp == line)
        return "expected METHOD URL";
    if (!set_str(r->method, sizeof r->method, line, (size_t)(sp - line)))
        return "method too long";
    char *url = sp + 1;
    while (*url == ' ')
        url++;
    char *after = url + strcspn(url, " ");
    /* only an HTTP version may follow the URL: a header written after a
     * space (not a tab) was dropped */
    char *rest = after + strspn(after, " ");
    if (*rest && (strncmp(rest, "HTTP/", 5) != 0 || strchr(rest, ' ')))
        return "text after the URL (a header goes after a tab)";
    *after = '\0';
    if (!valid_url_start(url))
        return "URL must be /path[?query] or scheme://host/path";
    r->url = url;
    for (char *h = tab ? tab + 1 : NULL; h && *h;) {
        char *next = strchr(h, '\t');
        if (next)
            *next++ = '\0';
        char *colon = strchr(h, ':');
        if (!colon || colon == h)
            return "a header must look like 'Name: value'";
        if (r->header_count == MAX_REQ_HEADERS)
            return "too many headers";
        char *v = colon + 1;
        while (*v == ' ')
            v++;
        r->headers[r->header_count++] =
            (sy_header){{h, (size_t)(colon - h)}, {v, strlen(v)}};
        h = next;
    }
    return NULL;
}

/* ADDR - USER [TIME] "METHOD URI PROTO" STATUS BYTES "REFERER" "UA".
 * NULL and r->url NULL: a line without a request (nginx logs a bad
 * request line as it came, e.g. TLS bytes): skipped. */
static const char *parse_nginx(char *line, replay_req *r) {
    size_t alen = strcspn(line, " ");
    if (set_str(r->addr, sizeof r->addr, line, alen))
        r->remote = r->addr;
    char *q = strstr(line, "] \"");
    if (!q)
        return "expected [time] \"request\" (nginx's combined format)";
    char *req = q + 3, *end = strchr(req, '"');
    if (!end)
        return "the request is not closed by '\"'";
    *end = '\0';
    char *m = req, *sp = strchr(req, ' ');
    if (!sp)
        return NULL; /* no METHOD URI: skipped */
    char *url = sp + 1, *sp2 = strchr(url, ' ');
    if (sp2)
        *sp2 = '\0';
    if (!valid_url_start(url) ||
        !set_str(r->method, sizeof r->method, m, (size_t)(sp - m)))
        return NULL;
    r->url = url;
    /* the quoted field after the referer: User-Agent (nginx's stock
     * "main" format has "$http_x_forwarded_for" after it: the last quoted
     * field was read, so X-Forwarded-For stood in for the User-Agent) */
    char *ref = strchr(end + 1, '"');
    char *ref_end = ref ? strchr(ref + 1, '"') : NULL;
    char *ua = ref_end ? strchr(ref_end + 1, '"') : NULL;
    char *ua_end = ua ? strchr(ua + 1, '"') : NULL;
    if (ua_end) {
        *ua_end = '\0';
        if (strcmp(ua + 1, "-") != 0)
            r->headers[r->header_count++] =
                (sy_header){{"User-Agent", 10}, {ua + 1, strlen(ua + 1)}};
    }
    return NULL;
}

/* The mini-gateway logs the Host header as the client sent it and
 * matches Host routes without its port (strip_host_port): the port is
 * cut here as the library cuts it ([v6]:port too), else h:8080 took
 * Host=h live and no route in the replay. */
static void strip_port(char *host) {
    size_t start = 0, len = strlen(host);
    if (host[0] == '[')
        start = strcspn(host, "]");
    for (size_t i = len; i-- > start;)
        if (host[i] == ':') {
            host[i] = '\0';
            break;
        }
}

/* {"method", "path", "query"?, "host"?, "remote_addr"?} */
static const char *parse_json(const char *line, replay_req *r) {
    cJSON *o = cJSON_Parse(line);
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return "not a JSON object";
    }
    const char *why = NULL;
    cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "method");
    cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "path");
    cJSON *q = cJSON_GetObjectItemCaseSensitive(o, "query");
    cJSON *h = cJSON_GetObjectItemCaseSensitive(o, "host");
    cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "remote_addr");
    /* skipped: a request refused before its head was read (method and
     * path null), and those the gateway answered without routing them: a
     * CONNECT (path null: its authority-form target) and OPTIONS * */
    if ((cJSON_IsNull(m) && cJSON_IsNull(p)) ||
        (cJSON_IsString(m) &&
         (cJSON_IsNull(p) ||
          (cJSON_IsString(p) && strcmp(p->valuestring, "*") == 0)))) {
        cJSON_Delete(o);
        return NULL;
    }
    if (!cJSON_IsString(m) || !cJSON_IsString(p) || p->valuestring[0] != '/')
        why = "needs \"method\" and \"path\" (a string starting with '/')";
    else if (!set_str(r->method, sizeof r->method, m->valuestring,
                      strlen(m->valuestring)))
        why = "method too long";
    if (!why) {
        /* the URL, host and address in one allocation, whatever their
         * lengths (a host was dropped past 255 bytes: its Host routes
         * were not seen) */
        const char *qs = cJSON_IsString(q) ? q->valuestring : "";
        const char *hs = cJSON_IsString(h) ? h->valuestring : "";
        const char *as = cJSON_IsString(a) ? a->valuestring : "";
        size_t ul = strlen(p->valuestring) + strlen(qs) + 2,
               hl = strlen(hs) + 1;
        r->own = malloc(ul + hl + strlen(as) + 1);
        if (!r->own) {
            why = "out of memory";
        } else {
            snprintf(r->own, ul, "%s%s%s", p->valuestring, *qs ? "?" : "", qs);
            r->url = r->own;
            r->host = memcpy(r->own + ul, hs, hl);
            r->remote = strcpy(r->own + ul + hl, as);
            strip_port(r->host);
        }
    }
    cJSON_Delete(o);
    return why;
}

/* What one document does with a request. */
typedef struct outcome {
    const char *route; /* id, or NULL: no route */
    const char *upstream;
    char instance[128]; /* "" when none */
} outcome;

static void run_one(sy_snapshot *s, sy_match_ctx *ctx, const sy_request *req,
                    outcome *o) {
    memset(o, 0, sizeof *o);
    sy_match *m = NULL;
    if (sy_snapshot_match(s, ctx, req, &m) || !m)
        return;
    const sy_route *r = sy_match_route(m);
    o->route = sy_route_id(r);
    o->upstream = sy_route_uri(r);
    sy_upstream up;
    sy_route_upstream(r, &up);
    sy_selection sel;
    if (up.kind == SY_UPSTREAM_SERVICE &&
        sy_snapshot_select(s, ctx, m, req, &sel, NULL) == 0)
        snprintf(o->instance, sizeof o->instance, "%s", sel.id);
}

static bool same(const char *a, const char *b) {
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* Re-routed pairs for the summary. */
typedef struct pair_count {
    char *old_route, *new_route; /* NULL: none */
    size_t count;
} pair_count;

typedef struct replay {
    bool json;
    sy_router *old_r, *new_r;
    sy_snapshot *old_s, *new_s;
    sy_match_ctx *ctx;
    size_t requests, changed, skipped;
    cJSON *list;
    pair_count *pairs;
    size_t npairs;
} replay;

static void count_pair(replay *rp, const char *a, const char *b) {
    for (size_t i = 0; i < rp->npairs; i++)
        if (same(rp->pairs[i].old_route, a) &&
            same(rp->pairs[i].new_route, b)) {
            rp->pairs[i].count++;
            return;
        }
    pair_count *np = realloc(rp->pairs, (rp->npairs + 1) * sizeof *np);
    if (!np)
        return;
    rp->pairs = np;
    np[rp->npairs++] =
        (pair_count){a ? strdup(a) : NULL, b ? strdup(b) : NULL, 1};
}

static cJSON *str_or_null(const char *s) {
    return s ? cJSON_CreateString(s) : cJSON_CreateNull();
}

static void report_change(replay *rp, const replay_req *q, size_t line,
                          const outcome *a, const outcome *b) {
    rp->changed++;
    count_pair(rp, a->route, b->route);
    if (rp->json) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "method", q->method);
        cJSON_AddStringToObject(e, "url", q->url);
        cJSON_AddNumberToObject(e, "line", (double)line);
        cJSON_AddItemToObject(e, "old_route", str_or_null(a->route));
        cJSON_AddItemToObject(e, "new_route", str_or_null(b->route));
        cJSON_AddItemToObject(e, "old_upstream", str_or_null(a->upstream));
        cJSON_AddItemToObject(e, "new_upstream", str_or_null(b->upstream));
        cJSON_AddItemToObject(e, "old_instance",
                              str_or_null(a->instance[0] ? a->instance : NULL));
        cJSON_AddItemToObject(e, "new_instance",
                              str_or_null(b->instance[0] ? b->instance : NULL));
        cJSON_AddItemToArray(rp->list, e);
        return;
    }
    printf("%s %s: %s -> %s", q->method, q->url,
           a->route ? a->route : "(no route)",
           b->route ? b->route : "(no route)");
    if (a->route && b->route && !same(a->upstream, b->upstream))
        printf(" [upstream %s -> %s]", a->upstream, b->upstream);
    if (strcmp(a->instance, b->instance) != 0)
        printf(" [instance %s -> %s]", a->instance[0] ? a->instance : "none",
               b->instance[0] ? b->instance : "none");
    printf("\n");
}

static void replay_request(replay *rp, replay_req *q, size_t line) {
    sy_request req = SY_REQUEST_INIT;
    sy_cli_split_url(q->url, &req);
    req.method = (sy_str){q->method, strlen(q->method)};
    if (q->host && q->host[0])
        req.host = (sy_str){q->host, strlen(q->host)};
    for (size_t i = 0; i < q->header_count; i++)
        if (q->headers[i].name.len == 4 &&
            strncasecmp(q->headers[i].name.ptr, "host", 4) == 0)
            req.host = q->headers[i].value;
    req.headers = q->headers;
    req.header_count = q->header_count;
    req.remote_addr = q->remote && q->remote[0]
                          ? (sy_str){q->remote, strlen(q->remote)}
                          : (sy_str){"127.0.0.1", 9};
    /* the same Weight draws on both sides */
    req.seed = 0x9e3779b97f4a7c15ull * (line + 1);
    outcome a, b;
    run_one(rp->old_s, rp->ctx, &req, &a);
    run_one(rp->new_s, rp->ctx, &req, &b);
    rp->requests++;
    if (!same(a.route, b.route) || !same(a.upstream, b.upstream) ||
        strcmp(a.instance, b.instance) != 0)
        report_change(rp, q, line, &a, &b);
}

/* Every line of the file; 0, or 2 with a located error on stderr. */
static int replay_file(replay *rp, const char *file) {
    size_t len;
    char *text = sy_cli_read_file(file, &len);
    if (!text) {
        fprintf(stderr, "switchyard diff: cannot read %s: %s\n", file,
                strerror(errno));
        return 2;
    }
    int fmt = -1;
    size_t lineno = 0, first_skip = 0;
    char *p = text, *end = text + len;
    int rc = 0;
    while (p < end && !rc) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *e = nl ? nl : end;
        lineno++;
        if (e > p && e[-1] == '\r')
            e[-1] = '\0';
        *e = '\0';
        char *line = p;
        p = nl ? nl + 1 : end;
        if (!line[0] || line[0] == '#')
            continue;
        if (fmt < 0)
            fmt = (int)detect(line);
        replay_req q;
        memset(&q, 0, sizeof q);
        const char *why = fmt == FMT_JSON    ? parse_json(line, &q)
                          : fmt == FMT_NGINX ? parse_nginx(line, &q)
                                             : parse_plain(line, &q);
        if (why) {
            fprintf(stderr, "%s:%zu: %s (read as %s lines)\n", file, lineno,
                    why, format_names[fmt]);
            rc = 2;
        } else if (!q.url) {
            if (!rp->skipped++)
                first_skip = lineno;
        } else {
            replay_request(rp, &q, lineno);
        }
        free(q.own);
    }
    if (rp->skipped)
        fprintf(stderr,
                "%s: %zu line%s without a request skipped (first: line %zu)\n",
                file, rp->skipped, rp->skipped == 1 ? "" : "s", first_skip);
    free(text);
    return rc;
}

static int load_side(const char *file, const char *instances, sy_router **out,
                     sy_snapshot **snap) {
    sy_router_options opts = SY_ROUTER_OPTIONS_INIT;
    sy_error err;
    if (sy_router_new(&opts, out, &err))
        return 2;
    size_t len;
    char *text = sy_cli_read_file(file, &len);
    if (!text) {
        fprintf(stderr, "switchyard diff: cannot read %s: %s\n", file,
                strerror(errno));
        return 2;
    }
    int rc = sy_router_add_source(*out, "routes", &err);
    if (!rc)
        rc = sy_router_apply(*out, "routes", text, len, NULL, &err);
    free(text);
    if (rc) {
        if (err.line)
            fprintf(stderr, "%s: line %u, column %u: %s\n", file, err.line,
                    err.column, err.message);
        else
            fprintf(stderr, "%s: %s: %s\n", file, err.path[0] ? err.path : "$",
                    err.message);
        return 2;
    }
    if (instances && sy_cli_load_instances(*out, instances))
        return 2;
    *snap = sy_router_acquire(*out);
    return 0;
}

static const char replay_help[] =
    "usage: switchyard diff --requests FILE [--json] [--instances FILE] OLD "
    "NEW\n"
    "Replay recorded requests through both route documents and list each "
    "request\nwhose route, upstream or instance changes, then how many were "
    "re-routed, by\nroute pair. FILE has one request a line: METHOD URL "
    "(then Name: value\nheaders, each after a tab), nginx's combined log "
    "format, or the\nmini-gateway's JSON access log (told apart by the "
    "first line).\n"
    "\n"
    "options:\n"
    "  --json             print {\"requests\": N, \"changed\": [{\"method\", "
    "\"url\",\n"
    "                     \"old_route\", \"new_route\", ...}], \"summary\": "
    "[...]} (null:\n"
    "                     no route)\n"
    "  --instances FILE   service instances for lb:// routes, the same "
    "for both\n"
    "  -h, --help         show this help\n"
    "\n"
    "exit status: 0 the replay ran (changes or not), 2 usage errors, "
    "unreadable or\ninvalid input (a bad line is named FILE:LINE).\n"
    "\n"
    "example:\n"
    "  switchyard diff --requests access.log --json routes-v1.json "
    "routes-v2.json\n";

int sy_cli_replay(int argc, char **argv) {
    replay rp;
    memset(&rp, 0, sizeof rp);
    const char *requests = NULL, *instances = NULL, *files[2];
    int nf = 0;
    for (int i = 0; i < argc; i++) {
        const char *s = argv[i];
        if (strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0) {
            printf("%s", replay_help);
            return 0;
        }
        if ((strcmp(s, "--requests") == 0 && requests) ||
            (strcmp(s, "--instances") == 0 && instances)) {
            /* one value is used: the first was dropped */
            fprintf(stderr, "switchyard diff: %s given twice\n", s);
            return 2;
        }
        if (strcmp(s, "--json") == 0)
            rp.json = true;
        else if (strcmp(s, "--requests") == 0 && i + 1 < argc)
            requests = argv[++i];
        else if (strcmp(s, "--instances") == 0 && i + 1 < argc)
            instances = argv[++i];
        else if (nf < 2 && s[0] != '-')
            files[nf++] = s;
        else
            nf = 3;
    }
    if (nf != 2 || !requests) {
        fprintf(stderr, "usage: switchyard diff --requests FILE [--json] "
                        "[--instances FILE] OLD NEW\n");
        return 2;
    }
    int rc = load_side(files[0], instances, &rp.old_r, &rp.old_s);
    if (!rc)
        rc = load_side(files[1], instances, &rp.new_r, &rp.new_s);
    if (!rc && sy_match_ctx_new(NULL, &rp.ctx, NULL))
        rc = 2;
    if (!rc) {
        rp.list = rp.json ? cJSON_CreateArray() : NULL;
        rc = replay_file(&rp, requests);
    }
    if (!rc && rp.json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "requests", (double)rp.requests);
        cJSON_AddItemToObject(o, "changed", rp.list);
        rp.list = NULL;
        cJSON *sum = cJSON_AddArrayToObject(o, "summary");
        for (size_t i = 0; i < rp.npairs; i++) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddItemToObject(e, "old_route",
                                  str_or_null(rp.pairs[i].old_route));
            cJSON_AddItemToObject(e, "new_route",
                                  str_or_null(rp.pairs[i].new_route));
            cJSON_AddNumberToObject(e, "count", (double)rp.pairs[i].count);
            cJSON_AddItemToArray(sum, e);
        }
        char *t = cJSON_PrintUnformatted(o);
        printf("%s\n", t);
        free(t);
        cJSON_Delete(o);
    } else if (!rc) {
        printf("%zu of %zu request%s re-routed%s\n", rp.changed, rp.requests,
               rp.requests == 1 ? "" : "s", rp.npairs ? ":" : "");
        for (size_t i = 0; i < rp.npairs; i++)
            printf("  %6zu  %s -> %s\n", rp.pairs[i].count,
                   rp.pairs[i].old_route ? rp.pairs[i].old_route : "(no route)",
                   rp.pairs[i].new_route ? rp.pairs[i].new_route
                                         : "(no route)");
    }
    cJSON_Delete(rp.list);
    for (size_t i = 0; i < rp.npairs; i++) {
        free(rp.pairs[i].old_route);
        free(rp.pairs[i].new_route);
    }
    free(rp.pairs);
    if (rp.old_s)
        sy_snapshot_release(rp.old_s);
    if (rp.new_s)
        sy_snapshot_release(rp.new_s);
    sy_match_ctx_free(rp.ctx);
    sy_router_free(rp.old_r);
    sy_router_free(rp.new_r);
    return rc;
}
